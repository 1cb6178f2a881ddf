//! The CUDA capability probes of `doctor`: the driver and device, NVRTC,
//! nvcc, the PTX JIT and the bf16 / fp8 / wgmma feature kernels, each run by
//! the cuda executor in its own child.

use super::{Check, DoctorOptions, Verdict};
use crate::classify::{self, Outcome, OutcomeKind, Phase, hints};
use crate::probe::cuda::{Arg, ElemType, Launch, ModuleKind, ModuleSpec, Tolerance};
use crate::probe::{Evidence, Executor, Job, ProbeError, Subject};
use crate::protocol::{DeviceInfo, Failure, Report};
use crate::sandbox::{Cancel, ChildCommand, Sandbox, Termination};
use std::path::PathBuf;

const AXPY_CU: &str = include_str!("kernels/axpy.cu");
const AXPY_PTX: &str = include_str!("kernels/axpy.ptx");
const BF16_CU: &str = include_str!("kernels/bf16.cu");
const FP8_CU: &str = include_str!("kernels/fp8.cu");
const WGMMA_CU: &str = include_str!("kernels/wgmma.cu");

/// Target nvcc compiles for when there is no device to ask.
const NVCC_DEFAULT_ARCH: &str = "sm_75";

/// The test kernels, written to a temporary directory for the children.
pub(super) struct Kernels {
    dir: tempfile::TempDir,
}

impl Kernels {
    pub(super) fn write() -> std::io::Result<Kernels> {
        let dir = tempfile::Builder::new()
            .prefix("preflight-doctor-")
            .tempdir()?;
        for (name, text) in [
            ("axpy.cu", AXPY_CU),
            ("axpy.ptx", AXPY_PTX),
            ("bf16.cu", BF16_CU),
            ("fp8.cu", FP8_CU),
            ("wgmma.cu", WGMMA_CU),
        ] {
            std::fs::write(dir.path().join(name), text)?;
        }
        Ok(Kernels { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn buffer(ty: ElemType, init: Vec<f64>, expect: Option<Vec<f64>>) -> Arg {
    Arg::Buffer {
        ty,
        init,
        expect,
        tolerance: Tolerance::EXACT,
    }
}

fn scalar(ty: ElemType, value: f64) -> Arg {
    Arg::Scalar { ty, value }
}

fn launch(function: &str, threads: u32, block: u32, args: Vec<Arg>) -> Launch {
    Launch {
        function: function.into(),
        grid: [threads.div_ceil(block), 1, 1],
        block: [block, 1, 1],
        shared_mem_bytes: 0,
        args,
        warmup: 3,
        iterations: 10,
    }
}

/// `y = 2 x + y` over 1000 elements (not a multiple of the block: the
/// bounds check runs too); every value is exact in f32.
fn axpy() -> Launch {
    let n = 1000;
    let x: Vec<f64> = (0..n).map(f64::from).collect();
    let want: Vec<f64> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    launch(
        "preflight_axpy",
        n,
        256,
        vec![
            scalar(ElemType::F32, 2.0),
            buffer(ElemType::F32, x, None),
            buffer(ElemType::F32, vec![1.0; n as usize], Some(want)),
            scalar(ElemType::U32, f64::from(n)),
        ],
    )
}

fn module(path: PathBuf, kind: ModuleKind, target: Option<&str>) -> ModuleSpec {
    ModuleSpec {
        path,
        kind,
        nvrtc_options: Vec::new(),
        target: target.map(str::to_owned),
    }
}

fn per_launch(report: &Report) -> String {
    match report.first_median_ms() {
        Some(ms) if ms < 1.0 => format!("{:.1} µs per launch", ms * 1e3),
        Some(ms) => format!("{ms:.2} ms per launch"),
        None => "untimed".into(),
    }
}

/// One cuda executor run, with its events folded and its outcome.
struct Run {
    evidence: Evidence,
    report: Report,
    outcome: Outcome,
}

impl Run {
    fn wall_ms(&self) -> f64 {
        self.evidence.wall.as_secs_f64() * 1e3
    }
}

/// Runs `subject` on device 0 in the cuda executor and classifies it.
fn execute(options: &DoctorOptions, subject: Subject, cancel: &Cancel) -> Result<Run, ProbeError> {
    let job = Job {
        limits: options.cuda_limits.clone(),
        ..Job::new(subject)
    };
    let evidence = options.executor.run(&job, cancel)?;
    Ok(Run {
        report: evidence.report(),
        outcome: classify::classify(&evidence),
        evidence,
    })
}

fn module_job(spec: ModuleSpec, launches: Vec<Launch>) -> Subject {
    Subject::Module { spec, launches }
}

/// A check from a cuda executor run: a pass with `pass` as its message, a
/// missing NVRTC as `missing`, anything else as a failure with the
/// executor's own classification.
fn judge(check: Check, run: &Run, pass: impl FnOnce(&Run) -> String) -> Check {
    let o = &run.outcome;
    let check = check.took(run.wall_ms());
    if o.kind == OutcomeKind::Pass {
        let message = pass(run);
        return check.verdict(Verdict::Pass, OutcomeKind::Pass, message, "");
    }
    if let Some((_, Failure::LibraryMissing { library, detail })) = &run.report.failure
        && library.contains("nvrtc")
    {
        let detail = if detail.starts_with("Unable to dynamically load") {
            "no libnvrtc.so.N in the CUDA toolkits, the nvidia wheels or the loader's path"
        } else {
            detail
        };
        return check.verdict(
            Verdict::Missing,
            o.kind,
            format!("NVRTC is not installed or not found: {detail}"),
            hints::NVRTC_MISSING,
        );
    }
    check.verdict(
        Verdict::Fail,
        o.kind,
        format!("{} in {}: {}", o.kind, o.phase.as_str(), o.message),
        o.hint.clone(),
    )
}

fn probe_error(check: Check, e: impl std::fmt::Display) -> Check {
    check.verdict(
        Verdict::Fail,
        OutcomeKind::ProbeError,
        format!("the probe could not run: {e}"),
        "a fault of preflight, not of this machine: please report it",
    )
}

/// What the driver said of the devices.
pub(super) struct Driver {
    /// Its check.
    pub(super) check: Check,
    /// Device 0, when it answers.
    pub(super) device: Option<DeviceInfo>,
    /// The CUDA version it supports (`13000`).
    pub(super) version: Option<u32>,
    /// How many devices it enumerates.
    pub(super) count: Option<u32>,
}

/// The driver and device 0.
pub(super) fn driver(options: &DoctorOptions, cancel: &Cancel) -> Driver {
    let check = Check::new("driver", "CUDA driver and devices");
    let run = match execute(options, Subject::Device, cancel) {
        Ok(run) => run,
        Err(e) => {
            return Driver {
                check: probe_error(check, e),
                device: None,
                version: None,
                count: None,
            };
        }
    };
    let facts = &run.report;
    let check = check.took(run.wall_ms());
    let check = match (&facts.device, run.outcome.kind) {
        (Some(d), OutcomeKind::Pass) => {
            let version = facts.runtime.cuda_driver.unwrap_or(0);
            check.verdict(
                Verdict::Pass,
                OutcomeKind::Pass,
                format!(
                    "{} ({}, {} SMs, {:.1} GiB) is device 0 of {}; the driver supports CUDA {}.{}",
                    d.name,
                    d.sm(),
                    d.sm_count,
                    d.total_memory as f64 / (1u64 << 30) as f64,
                    facts.runtime.devices.unwrap_or(1),
                    version / 1000,
                    (version % 1000) / 10
                ),
                "",
            )
        }
        (_, OutcomeKind::NoDevice) => check.verdict(
            Verdict::Missing,
            OutcomeKind::NoDevice,
            run.outcome.message.clone(),
            hints::NO_DRIVER,
        ),
        // A pass that named no device, and every failure but the missing
        // device: judged as every capability is. Exhaustive: a new kind is
        // placed here before the crate compiles.
        (None, OutcomeKind::Pass)
        | (
            _,
            OutcomeKind::Skipped
            | OutcomeKind::DriverTooOld
            | OutcomeKind::UnsupportedArch
            | OutcomeKind::PtxTooNew
            | OutcomeKind::NvccMissing
            | OutcomeKind::NvccTooOld
            | OutcomeKind::JitCompileError
            | OutcomeKind::MissingDependency
            | OutcomeKind::DependencyVersion
            | OutcomeKind::ImportError
            | OutcomeKind::MissingSymbol
            | OutcomeKind::WrongResult
            | OutcomeKind::Crashed
            | OutcomeKind::Exited
            | OutcomeKind::Timeout
            | OutcomeKind::OutOfMemory
            | OutcomeKind::ProbeError,
        ) => judge(check, &run, |_| String::new()),
    };
    let device = facts.device.clone().filter(|_| run.outcome.kind.passed());
    Driver {
        check,
        device,
        version: facts.runtime.cuda_driver,
        count: facts.runtime.devices,
    }
}

/// NVRTC: compile the smoke kernel for this device, load it, launch it.
pub(super) fn nvrtc(
    options: &DoctorOptions,
    kernels: &Kernels,
    device: Option<&DeviceInfo>,
    cancel: &Cancel,
) -> Check {
    let check = Check::new("nvrtc", "NVRTC compile + load + launch");
    let spec = module(kernels.path("axpy.cu"), ModuleKind::Cuda, None);
    let run = match execute(options, module_job(spec, vec![axpy()]), cancel) {
        Ok(run) => run,
        Err(e) => return probe_error(check, e),
    };
    if device.is_none() {
        if let Some(c) = &run.report.compiled {
            return check.took(run.wall_ms()).skipped(format!(
                "NVRTC {} works: it compiled the test kernel ({} B of {}); loading and launching need a GPU",
                c.nvrtc_version, c.bytes, c.image
            ));
        }
        if !matches!(
            run.report.failure,
            Some((_, Failure::LibraryMissing { .. }))
        ) {
            return judge(check, &run, |_| String::new());
        }
    }
    judge(check, &run, |run| {
        let c = run.report.compiled.clone().unwrap_or_default();
        format!(
            "NVRTC {} compiled a {} for {}; it loaded, ran and verified ({})",
            c.nvrtc_version,
            c.image,
            c.target,
            per_launch(&run.report)
        )
    })
}

/// nvcc: compile a cubin for this device's architecture (in a sandbox),
/// then load and launch it in the cuda executor.
pub(super) fn nvcc(
    options: &DoctorOptions,
    kernels: &Kernels,
    device: Option<&DeviceInfo>,
    cancel: &Cancel,
) -> Check {
    let check = Check::new("nvcc", "nvcc compile + load + launch");
    let Some((nvcc, version)) = &options.nvcc else {
        return check.verdict(
            Verdict::Missing,
            OutcomeKind::NvccMissing,
            "no nvcc in CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda or the Python environment's nvidia wheels",
            hints::NVCC_MISSING,
        );
    };
    let version = version.as_deref().unwrap_or("(version unknown)");
    let arch = device.map_or_else(|| NVCC_DEFAULT_ARCH.to_owned(), DeviceInfo::sm);
    let sandbox = match Sandbox::new() {
        Ok(s) => s,
        Err(e) => return probe_error(check, e),
    };
    let cubin = sandbox.dir().join("axpy.cubin");
    let command = ChildCommand::new(nvcc)
        .arg("-cubin")
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(&cubin)
        .arg(kernels.path("axpy.cu"));
    let compiled = match sandbox.run(&command, &options.nvcc_limits, cancel) {
        Ok(r) => r,
        Err(e) => return probe_error(check, e),
    };
    let nvcc_ms = compiled.wall.as_secs_f64() * 1e3;
    if compiled.termination != (Termination::Exited { code: 0 }) {
        let output = format!("{}\n{}", compiled.stderr.text(), compiled.stdout.text());
        let found = classify::from_text(&output, Phase::Load);
        let (kind, hint) = match &found {
            Some(o) => (o.kind, o.hint.clone()),
            None => (
                OutcomeKind::JitCompileError,
                "nvcc cannot compile a trivial kernel: check the toolkit installation (NVVM, CRT headers)".into(),
            ),
        };
        let said = output
            .lines()
            .map(str::trim)
            .find(|l| l.contains("fatal") || l.contains("error"))
            .unwrap_or_else(|| output.trim());
        return check.took(nvcc_ms).verdict(
            Verdict::Fail,
            kind,
            format!(
                "nvcc {version} ({}) cannot compile for {arch}: {said} [{}]",
                nvcc.display(),
                compiled.termination
            ),
            hint,
        );
    }
    if device.is_none() {
        return check.took(nvcc_ms).skipped(format!(
            "nvcc {version} ({}) works: it compiled a cubin for {arch}; loading and launching need a GPU",
            nvcc.display()
        ));
    }
    let spec = module(cubin, ModuleKind::Cubin, None);
    match execute(options, module_job(spec, vec![axpy()]), cancel) {
        Ok(run) => judge(check, &run, |run| {
            format!(
                "nvcc {version} compiled a cubin for {arch}; it loaded, ran and verified ({})",
                per_launch(&run.report)
            )
        })
        .took(nvcc_ms + run.wall_ms()),
        Err(e) => probe_error(check, e),
    }
}

/// The driver's PTX JIT: PTX only (ISA 7.0, sm_75), no SASS.
pub(super) fn ptx_jit(
    options: &DoctorOptions,
    kernels: &Kernels,
    device: Option<&DeviceInfo>,
    cancel: &Cancel,
) -> Check {
    let check = Check::new("ptx_jit", "PTX JIT (PTX only, no SASS)");
    let Some(d) = device else {
        return check.skipped("needs a GPU");
    };
    let spec = module(kernels.path("axpy.ptx"), ModuleKind::Ptx, None);
    match execute(options, module_job(spec, vec![axpy()]), cancel) {
        Ok(run) => judge(check, &run, |run| {
            format!(
                "the driver JIT-compiled PTX (ISA 7.0, compute_75) for {} in {:.1} ms; it ran and verified ({})",
                d.sm(),
                run.report.load_ms.unwrap_or(0.0),
                per_launch(&run.report)
            )
        }),
        Err(e) => probe_error(check, e),
    }
}

/// Hardware features with their own instructions, probed by a kernel that
/// uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Feature {
    /// bf16 FMA (sm_80+).
    Bf16,
    /// fp8 e4m3 conversions (sm_89+).
    Fp8,
    /// Warpgroup MMA synchronisation (sm_90a only).
    Wgmma,
}

impl Feature {
    pub(super) const ALL: [Feature; 3] = [Feature::Bf16, Feature::Fp8, Feature::Wgmma];

    fn name(self) -> &'static str {
        match self {
            Feature::Bf16 => "bf16",
            Feature::Fp8 => "fp8",
            Feature::Wgmma => "wgmma",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Feature::Bf16 => "bf16 kernel (fma.rn.bf16, sm_80+)",
            Feature::Fp8 => "fp8 kernel (e4m3 conversions, sm_89+)",
            Feature::Wgmma => "wgmma kernel (sm_90a)",
        }
    }

    /// Why this device cannot run the feature, if it cannot.
    fn unsupported(self, d: &DeviceInfo) -> Option<String> {
        let cc = d.capability().major * 10 + d.capability().minor;
        match self {
            Feature::Bf16 if cc < 80 => {
                Some(format!("needs sm_80 or newer; this GPU is {}", d.sm()))
            }
            Feature::Fp8 if cc < 89 => {
                Some(format!("needs sm_89 or newer; this GPU is {}", d.sm()))
            }
            Feature::Wgmma if cc != 90 => Some(format!(
                "exists only on sm_90 (sm_90a code); this GPU is {}",
                d.sm()
            )),
            _ => None,
        }
    }

    fn source(self) -> &'static str {
        match self {
            Feature::Bf16 => "bf16.cu",
            Feature::Fp8 => "fp8.cu",
            Feature::Wgmma => "wgmma.cu",
        }
    }

    fn target(self) -> Option<&'static str> {
        (self == Feature::Wgmma).then_some("sm_90a")
    }

    fn launch(self) -> Launch {
        let n = 256u32;
        let small: Vec<f64> = (0..n).map(|i| f64::from(i % 16)).collect();
        match self {
            Feature::Bf16 => launch(
                "preflight_bf16_fma",
                n,
                128,
                vec![
                    buffer(ElemType::F32, small.clone(), None),
                    buffer(ElemType::F32, vec![2.0; n as usize], None),
                    buffer(ElemType::F32, vec![1.0; n as usize], None),
                    buffer(
                        ElemType::F32,
                        vec![0.0; n as usize],
                        Some(small.iter().map(|v| 2.0 * v + 1.0).collect()),
                    ),
                    scalar(ElemType::U32, f64::from(n)),
                ],
            ),
            Feature::Fp8 => launch(
                "preflight_fp8_roundtrip",
                n,
                128,
                vec![
                    buffer(ElemType::F32, small.clone(), None),
                    buffer(ElemType::F32, vec![0.0; n as usize], Some(small)),
                    scalar(ElemType::U32, f64::from(n)),
                ],
            ),
            Feature::Wgmma => launch(
                "preflight_wgmma_fence",
                128,
                128,
                vec![buffer(
                    ElemType::U32,
                    vec![0.0; 128],
                    Some((0..128).map(|i| f64::from(i * 3)).collect()),
                )],
            ),
        }
    }
}

/// One feature kernel, compiled with NVRTC for this device, where the
/// architecture allows it.
pub(super) fn feature(
    options: &DoctorOptions,
    kernels: &Kernels,
    feature: Feature,
    device: Option<&DeviceInfo>,
    cancel: &Cancel,
) -> Check {
    let check = Check::new(feature.name(), feature.title());
    let Some(d) = device else {
        return check.skipped("needs a GPU");
    };
    if let Some(why) = feature.unsupported(d) {
        return check.skipped(why);
    }
    let spec = module(
        kernels.path(feature.source()),
        ModuleKind::Cuda,
        feature.target(),
    );
    match execute(options, module_job(spec, vec![feature.launch()]), cancel) {
        Ok(run) => judge(check, &run, |run| {
            let target = run
                .report
                .compiled
                .as_ref()
                .map_or("?", |c| c.target.as_str());
            format!(
                "compiled for {target} with NVRTC, ran and verified ({})",
                per_launch(&run.report)
            )
        }),
        Err(e) => probe_error(check, e),
    }
}
