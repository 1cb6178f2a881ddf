//! The events: one JSON object per line, tagged by `"event"`.

use super::{Depth, ExecutorKind, Phase};
use crate::fingerprint::ComputeCapability;
use serde::{Deserialize, Serialize};

/// One line of a channel.
///
/// Facts are reported as the child learns them, never interpreted: a
/// `CUresult` stays an integer, an exception stays its class, attributes and
/// message. What they mean is decided by `classify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The first line: who is speaking, in which version of the protocol.
    Hello {
        /// The child's [`super::PROTOCOL_VERSION`].
        protocol: u32,
        /// Which executor the child is.
        executor: ExecutorKind,
        /// The child's process id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// The child's process group (its own, in a sandbox).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pgid: Option<u32>,
    },
    /// A phase began; a death from here on is attributed to it.
    Phase {
        /// Which.
        phase: Phase,
        /// What exactly (a workload, a driver call, a file), for people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
    },
    /// Facts about the child's runtime; fields a child does not know are
    /// absent, and later events add to earlier ones.
    Runtime(Runtime),
    /// The module id the variant is imported as (its own submodules are
    /// part of it, not dependencies).
    Module {
        /// `sys.modules` key (`_activation_0c3eb4e`).
        name: String,
        /// The kernel's Python package name (`flash_attn3` for the kernel
        /// `flash-attn3`): a variant that imports it by this absolute name
        /// instead of relatively cannot find itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        package: Option<String>,
    },
    /// The GPU probed, as its driver describes it.
    Device(DeviceInfo),
    /// What the python child found of the variant's device after its
    /// import failed: whether the device is usable, and the capability the
    /// framework or the driver reports for it (the evidence against which
    /// an import guard's claim is judged).
    DeviceState(DeviceState),
    /// Every device the driver enumerates, in its ordinal order (after
    /// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`), none of them opened:
    /// the answer to a device-list job.
    Devices {
        /// Each device, as [`Event::Device`] describes one.
        devices: Vec<DeviceInfo>,
    },
    /// Run-time compilation produced an image.
    Compiled(CompileInfo),
    /// A module was loaded on the device.
    Loaded {
        /// The JIT's info log, if it wrote one.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        info_log: String,
    },
    /// The CUDA code embedded in one shared object of a variant, loaded on
    /// the device (the device depth of a compiled variant).
    Embedded(EmbeddedLoad),
    /// How long a span of the probe took.
    Timing {
        /// Which span.
        span: Span,
        /// Milliseconds (device events where the child has them).
        ms: f64,
    },
    /// A kernel launch ran and synchronised.
    Launched {
        /// The kernel's function.
        function: String,
    },
    /// A result matched its reference.
    Verified {
        /// What was verified (a function, a workload).
        label: String,
        /// Elements compared.
        compared: u64,
    },
    /// A bench child is verified and warmed up, and waits for rounds.
    Bench(BenchSetup),
    /// One timed run of a workload.
    Sample(Sample),
    /// The work failed; nothing follows.
    Failed {
        /// The phase it failed in.
        phase: Phase,
        /// What happened.
        failure: Failure,
    },
    /// The work finished; nothing follows.
    Done {
        /// How far it got.
        depth: Depth,
    },
    /// An event kind this parent does not know (a newer child): counted,
    /// otherwise ignored.
    #[serde(other)]
    Unknown,
}

/// What a child knows of its runtime. Every field is optional: each child
/// fills what it can.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runtime {
    /// Python's version (`3.12.3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The interpreter's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// torch's version, when the kernel imported torch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// The framework device the workload runs on (`cuda`, `cpu`, `mps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `cuDriverGetVersion` (`13000` for 13.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver: Option<u32>,
    /// Devices the driver sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<u32>,
    /// Who judged the variant's metadata the way the hub loader does:
    /// `kernels 0.17.2` (the hub's own code, installed in the probed
    /// interpreter) or `preflight` (its copy of the hub's rules, when
    /// `kernels` is not installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<String>,
    /// The driver library the child's calls are bound to, as the dynamic
    /// loader names the file that holds `cuInit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libcuda: Option<String>,
    /// The NVRTC library the child's calls are bound to (the file that
    /// holds the `nvrtcVersion` it calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvrtc: Option<String>,
    /// The child's resident memory at the end of its probe, in kB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_kb: Option<u64>,
    /// Its proportional share of that memory (a page shared by n
    /// processes counts 1/n), in kB: what a forked child costs beyond the
    /// fork server it shares its pages with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_kb: Option<u64>,
}

impl Runtime {
    /// `other`'s known fields over this one's.
    pub fn merge(&mut self, other: &Runtime) {
        fn take<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) {
            if theirs.is_some() {
                mine.clone_from(theirs);
            }
        }
        take(&mut self.python, &other.python);
        take(&mut self.executable, &other.executable);
        take(&mut self.torch, &other.torch);
        take(&mut self.device, &other.device);
        take(&mut self.cuda_driver, &other.cuda_driver);
        take(&mut self.devices, &other.devices);
        take(&mut self.acceptance, &other.acceptance);
        take(&mut self.libcuda, &other.libcuda);
        take(&mut self.nvrtc, &other.nvrtc);
        take(&mut self.rss_kb, &other.rss_kb);
        take(&mut self.pss_kb, &other.pss_kb);
    }
}

/// What loading the CUDA code embedded in one shared object showed: one
/// per file, whether it loaded or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedLoad {
    /// The file, relative to the variant's directory (`_ops.so`).
    pub file: String,
    /// The images its fatbins hold (`SASS for sm_80, PTX for compute_80`).
    pub images: String,
    /// Fatbins that loaded on the device.
    pub loaded: u32,
    /// Relocatable fatbins (`nvcc -rdc=true`): not loadable alone, so not
    /// tried, and no failure.
    #[serde(default)]
    pub relocatable: u32,
    /// Fatbins the driver refused as holding no image for this device
    /// (209) where the driver's rule, read from their images, says the
    /// same: code for other GPUs, as a kernel section with capabilities of
    /// its own puts in a container of its own. No failure while another
    /// container of the file loads.
    #[serde(default, skip_serializing_if = "none")]
    pub other_gpus: u32,
    /// The image the driver took (`sm_90 SASS`, `compute_80 PTX, JIT`):
    /// inferred from the images present and the device's capability by
    /// the driver's rule, since the driver does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken: Option<String>,
    /// Wall time of the file's loads, in milliseconds.
    pub load_ms: f64,
    /// PTX JIT time the driver reported (`CU_JIT_WALL_TIME`), summed over
    /// the file's loads; `None` when nothing was JIT-compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jit_ms: Option<f64>,
    /// The first load that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CudaError>,
}

/// Whether a count is zero, and left out of the wire (as a line written
/// before the field existed has it).
fn none(count: &u32) -> bool {
    *count == 0
}

/// A timed span of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Span {
    /// Importing the variant.
    Import,
    /// Loading a module on the device (including any PTX JIT).
    Load,
    /// Running the smoke workload once.
    Smoke,
}

/// One timed run: a bench sample, or a timed smoke launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// What ran: a kernel function, a `Benchmark.workload`, a variant.
    pub label: String,
    /// The round it belongs to (rounds interleave variants), from 0.
    #[serde(default)]
    pub round: u32,
    /// Milliseconds, from device events where the child has them.
    pub ms: f64,
    /// The CPU time the child's process spent in the sample (milliseconds),
    /// where it was timed with the host clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
    /// The SM clock just after the sample (MHz), where NVML can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<u32>,
    /// NVML's clock-event (throttle) reasons just after the sample, a bit mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_reasons: Option<u64>,
    /// Whether one of those reasons slowed the clock down: the sample does
    /// not measure the kernel, and a bench drops it (and counts it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub throttled: bool,
}

impl Sample {
    /// A sample without clock facts.
    pub fn new(label: impl Into<String>, round: u32, ms: f64) -> Sample {
        Sample {
            label: label.into(),
            round,
            ms,
            ..Sample::default()
        }
    }
}

/// How a bench child times, announced once it is verified and warmed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchSetup {
    /// What its samples are labelled (`Relu.small`, `smoke`, `reference:…`).
    pub label: String,
    /// `variant` (the kernel's call) or `reference` (the workload's own
    /// reference computation).
    pub role: String,
    /// `device_events` or `host_clock`.
    pub timer: String,
    /// Bytes written before each sample to flush the L2 cache (0: none).
    #[serde(default)]
    pub flush_bytes: u64,
    /// Whether NVML clock facts come with the samples.
    #[serde(default)]
    pub nvml: bool,
    /// Calls made to warm up.
    #[serde(default)]
    pub warmup_calls: u32,
    /// One sample's expected length (ms), from the end of the warm-up.
    pub estimate_ms: f64,
    /// Whether the workload has a reference computation to time
    /// (`verify_<workload>` of the hub's convention).
    #[serde(default)]
    pub has_reference: bool,
    /// The device admits one process's context at a time (compute mode
    /// EXCLUSIVE_PROCESS): another child's context would be refused, so
    /// the session times its participants one after another.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
}

/// What a device said about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Its ordinal, as its driver counts (after `CUDA_VISIBLE_DEVICES`).
    pub ordinal: u32,
    /// Its name (`cuDeviceGetName`).
    pub name: String,
    /// What it is, in its API's terms (on the wire: `"api"` and that
    /// API's fields beside the others).
    #[serde(flatten)]
    pub arch: DeviceArch,
    /// Its multiprocessors (CUDA's SMs).
    pub sm_count: u32,
    /// Total memory in bytes.
    pub total_memory: u64,
    /// PCI bus id (`0000:3b:00.0`), when the driver gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

/// What a device is, typed by the API that drives it: a device of another
/// API (a HIP device's `gfx` target) is one more variant, and every place
/// that reads a device's architecture then decides what it means there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "api", rename_all = "snake_case")]
pub enum DeviceArch {
    /// A CUDA device, by its compute capability.
    Cuda {
        /// Compute capability major.
        major: u32,
        /// Compute capability minor.
        minor: u32,
    },
}

impl DeviceInfo {
    /// `sm_XY`: the SASS target of this device.
    pub fn sm(&self) -> String {
        let c = self.capability();
        format!("sm_{}{}", c.major, c.minor)
    }

    /// Its compute capability.
    pub fn capability(&self) -> ComputeCapability {
        match self.arch {
            DeviceArch::Cuda { major, minor } => ComputeCapability::new(major, minor),
        }
    }
}

/// The state of a variant's device as the python child found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceState {
    /// The framework device asked for (`cuda`, `cuda:1`, `xpu`).
    pub device: String,
    /// Whether something in the child can use it (torch sees it, Triton
    /// has a driver for it).
    pub usable: bool,
    /// Why it is not usable, naming what said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
    /// The device's compute capability, from torch when it sees the
    /// device, else from the CUDA driver (`cuDeviceGetAttribute` 75/76).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<ComputeCapability>,
    /// The device's name, from the same source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who reported the capability: `torch` or `driver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_by: Option<String>,
}

/// What a run-time compiler produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileInfo {
    /// The target it compiled for (`sm_90`, `compute_90`, or the default).
    pub target: String,
    /// What was handed to the driver: `cubin` or `ptx`.
    pub image: String,
    /// Size of that image in bytes.
    pub bytes: u64,
    /// The compiler's version, `major.minor`.
    pub nvrtc_version: String,
    /// Warnings in the compiler log, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
}

/// Why the work failed, as facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Failure {
    /// A Python exception escaped the import or the workload.
    Exception(Box<ExceptionInfo>),
    /// A CUDA driver call returned an error.
    Cuda(CudaError),
    /// NVRTC failed.
    Nvrtc(NvrtcError),
    /// A shared library could not be loaded (`libcuda.so.1`, `libnvrtc.so.N`).
    LibraryMissing {
        /// Which library.
        library: String,
        /// What the loader said.
        detail: String,
    },
    /// An entry point is absent from a loaded library (the library is older
    /// than the code that calls it).
    SymbolMissing {
        /// Which, and in what.
        detail: String,
    },
    /// The driver has no device at the requested ordinal.
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// How many devices the driver sees.
        count: u32,
    },
    /// The hub loader refuses the variant before importing it: its metadata
    /// parser or one of its validators said no.
    HubRefused {
        /// Which check refused.
        validator: HubCheck,
        /// What it said, verbatim.
        message: String,
        /// The distribution to install, when the refusal is a
        /// `python-depends` entry that is allowed but not installed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        package: Option<String>,
    },
    /// The variant's backend is a device, and nothing in the child can use
    /// one: torch sees none, Triton has no active driver, or neither is
    /// installed.
    DeviceUnusable {
        /// The framework device asked for (`cuda`, `cuda:1`, `xpu`, `mps`).
        device: String,
        /// What the child found, naming the framework that said so.
        message: String,
    },
    /// A result differed from its reference.
    Mismatch {
        /// What was compared (a function, a workload), when the child knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// How it differed.
        message: String,
    },
    /// The smoke source cannot be used (no `smoke` function, a bad return value).
    InvalidSmoke {
        /// Why.
        message: String,
    },
    /// The job's input cannot be used (an unreadable module file).
    InvalidInput {
        /// Why.
        message: String,
    },
    /// The child itself failed (a bug, a panic): a fault of preflight.
    Internal {
        /// What failed.
        message: String,
        /// Where, when the child knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceback: Option<String>,
    },
    /// A failure kind this parent does not know (a newer child).
    #[serde(other)]
    Unknown,
}

/// The hub loader's checks of a variant, in the order it applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HubCheck {
    /// The `metadata.json` parser (`kernels._rust.Metadata`): required
    /// fields, their types, the kernel name's form.
    Metadata,
    /// `DependencyValidator`: every `python-depends` entry is on the hub's
    /// allowlist for this machine's backend, and installed.
    Dependencies,
    /// `MinverValidator`: the installed `kernels` is at least `kernels-minver`.
    Minver,
    /// `ArchValidator`: the device's compute capability is among the
    /// declared archs.
    Arch,
    /// `DigestValidator` (kernels 0.18 and later): the variant's files
    /// match the digest its metadata records.
    Digest,
    /// A validator this preflight does not know (a newer `kernels`).
    #[serde(other)]
    Other,
}

/// A failed CUDA driver API call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaError {
    /// The call (`cuInit`, `cuModuleLoadDataEx`, …).
    pub call: String,
    /// The `CUresult`, as the driver returned it: codes this build has never
    /// heard of stay integers.
    pub code: i64,
    /// `cuGetErrorName` (`CUDA_ERROR_NO_BINARY_FOR_GPU`), when the driver knows it.
    #[serde(default)]
    pub name: String,
    /// `cuGetErrorString`.
    #[serde(default)]
    pub message: String,
    /// The JIT error log of a module load, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// A failed NVRTC call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvrtcError {
    /// The call (`nvrtcCompileProgram`, …).
    pub call: String,
    /// The `nvrtcResult`.
    pub code: i64,
    /// `nvrtcGetErrorString`.
    pub message: String,
    /// The compiler log.
    #[serde(default)]
    pub log: String,
}

/// A Python exception, as the driver describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionInfo {
    /// Class name (`ModuleNotFoundError`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Module of the class (`builtins`, `torch`, `triton.compiler.errors`).
    #[serde(default)]
    pub module: String,
    /// Qualified names of the class and its bases, most derived first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mro: Vec<String>,
    /// `str(exception)`.
    #[serde(default)]
    pub message: String,
    /// `ImportError.name`: the module that could not be found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `OSError.filename`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// `OSError.errno`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i64>,
    /// A CUDA error code carried by the exception (torch `AcceleratorError`,
    /// CuTe-DSL `DSLCudaRuntimeError`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// A CUDA error name carried by the exception (`CUDA_ERROR_NO_BINARY_FOR_GPU`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_name: Option<String>,
    /// First word of `CalledProcessError.cmd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `CalledProcessError.returncode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returncode: Option<i64>,
    /// `CalledProcessError.stderr` (else `.output`), when it was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// `AttributeError.obj`'s module name, when the missing attribute was
    /// looked up on a module (`_deep_gemm_0c3eb4e.utils`, `cutlass.cute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `ImportError.name_from` (Python 3.12+): the name `from P import X`
    /// did not find.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_from: Option<String>,
    /// The innermost frames of the traceback, innermost first (at most
    /// three): where the exception was raised.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<Frame>,
    /// What provides the top-level package of the module `name` names, for
    /// an import that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// The chain of causes (`raise … from e`, or raised while handling), outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<ExceptionInfo>,
    /// The last lines of the formatted traceback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
}

/// One frame of a traceback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The source file.
    #[serde(default)]
    pub file: String,
    /// The function (`<module>` for a module's top level).
    #[serde(default)]
    pub function: String,
    /// The line number.
    #[serde(default)]
    pub line: u32,
    /// The source line, stripped, when the file can be read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The short string constants of the function's code (environment
    /// variables it reads, tools it runs), at most a few dozen; empty for a
    /// module's top level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strings: Vec<String>,
}

/// What the probed interpreter has for the top-level package of a module
/// that could not be imported (`triton` for `triton.tools.experimental_descriptor`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provider {
    /// The top-level import name.
    pub top: String,
    /// Whether that package is importable here (then the missing module is
    /// a part of it that this version lacks).
    #[serde(default)]
    pub installed: bool,
    /// The distribution that provides it: the installed one
    /// (`importlib.metadata.packages_distributions()`), else the one the
    /// variant's `python-depends` names for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// The installed distribution's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl ExceptionInfo {
    /// The class's qualified name (`builtins.ImportError`), or its bare
    /// name when the child did not say its module.
    pub fn qualified_name(&self) -> String {
        match self.module.as_str() {
            "" => self.type_name.clone(),
            module => format!("{module}.{}", self.type_name),
        }
    }

    /// Whether the class is, or derives from, a class named `name`
    /// (compared on the unqualified name).
    pub fn is_a(&self, name: &str) -> bool {
        self.type_name == name || self.mro.iter().any(|q| q.rsplit('.').next() == Some(name))
    }

    /// The frame the exception was raised in.
    pub fn raised_in(&self) -> Option<&Frame> {
        self.frames.first()
    }

    /// `module.Type`.
    pub fn qualified(&self) -> String {
        if self.module.is_empty() || self.module == "builtins" {
            self.type_name.clone()
        } else {
            format!("{}.{}", self.module, self.type_name)
        }
    }
}

impl Failure {
    /// The snake_case name of the failure kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Exception(_) => "exception",
            Failure::Cuda(_) => "cuda",
            Failure::Nvrtc(_) => "nvrtc",
            Failure::LibraryMissing { .. } => "library_missing",
            Failure::SymbolMissing { .. } => "symbol_missing",
            Failure::NoSuchDevice { .. } => "no_such_device",
            Failure::HubRefused { .. } => "hub_refused",
            Failure::DeviceUnusable { .. } => "device_unusable",
            Failure::Mismatch { .. } => "mismatch",
            Failure::InvalidSmoke { .. } => "invalid_smoke",
            Failure::InvalidInput { .. } => "invalid_input",
            Failure::Internal { .. } => "internal",
            Failure::Unknown => "unknown",
        }
    }
}
