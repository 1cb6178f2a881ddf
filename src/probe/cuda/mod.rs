//! The cuda executor: the `preflight` binary re-executed in a hidden child
//! mode (`preflight __cuda-child REQUEST`) inside a [`Sandbox`](crate::sandbox::Sandbox), where it
//! uses the CUDA driver API and NVRTC (cudarc, loaded dynamically, so the
//! binary runs on machines without CUDA).
//!
//! The parent side ([`CudaExecutor`]) writes a [`CudaRequest`] into the
//! sandbox directory, runs the child and reads its [`crate::protocol`]
//! events back from a channel file there. The child side ([`child::main`])
//! initialises the driver, queries the device, loads a cubin / PTX / fatbin
//! or compiles CUDA C with NVRTC, launches smoke kernels, verifies their
//! buffers and times them with CUDA events — writing each phase before it
//! enters it, so a death is attributed to it. For a hub variant it loads
//! every fatbin embedded in the variant's shared objects on the device
//! (the device depth of a compiled variant).

mod bench_child;
mod bound;
pub mod child;
mod driver;
mod embedded;
mod launch;
mod nvml;
mod nvrtc;
pub mod request;

pub use request::{
    Arg, BenchModule, BenchRequest, CudaRequest, ElemType, Launch, ModuleKind, ModuleSpec,
    Tolerance,
};

use super::bench::Fifos;
use super::{BenchChild, BenchExecutor, BenchSpec, Executor, Job, ProbeError, Subject};
use crate::protocol::{Depth, Evidence, ExecutorKind};
use crate::sandbox::{Cancel, ChildCommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The NVRTC library a kernel would use: the first `libnvrtc.so.N` of the
/// toolkits and wheels, in the order kernels look for them.
pub fn nvrtc_library(toolkits: &crate::fingerprint::Toolkits) -> Option<PathBuf> {
    toolkits.nvrtc.first().map(|l| l.path.clone())
}

/// Whether a variant's directory holds shared objects (`.so`, `.so.N`),
/// which may embed CUDA code for the device depth to load.
pub fn has_shared_objects(dir: &Path) -> bool {
    embedded::shared_objects(dir).is_ok_and(|files| !files.is_empty())
}

/// The hidden subcommand that runs [`child::main`].
pub const CHILD_SUBCOMMAND: &str = "__cuda-child";

/// Environment variable naming the driver library to load instead of
/// `libcuda.so.1` (an unusual install, or a test that needs none).
pub const LIBCUDA_ENV: &str = crate::fingerprint::full::LIBCUDA_VAR;

/// What the cuda child's driver is told about module loading.
pub const MODULE_LOADING: (&str, &str) = ("CUDA_MODULE_LOADING", "EAGER");

const REQUEST_NAME: &str = "cuda_request.json";
const EVENTS_NAME: &str = "cuda_events.jsonl";

/// Runs native modules (and device queries) in the `preflight` binary's
/// cuda child mode, each in its own sandboxed child.
#[derive(Debug, Clone)]
pub struct CudaExecutor {
    /// The `preflight` binary to re-execute.
    pub program: PathBuf,
    /// The driver library by full path; `None`: `libcuda.so.1`.
    pub libcuda: Option<PathBuf>,
    /// `libnvrtc.so.N` by full path, for CUDA C modules; `None`: the
    /// loader's search path.
    pub nvrtc: Option<PathBuf>,
    /// Extra environment for the child.
    pub env: Vec<(OsString, OsString)>,
}

impl CudaExecutor {
    /// An executor that re-executes `program` (the `preflight` binary),
    /// with `libcuda` from [`LIBCUDA_ENV`] when set.
    pub fn new(program: impl Into<PathBuf>) -> CudaExecutor {
        CudaExecutor {
            program: program.into(),
            libcuda: std::env::var_os(LIBCUDA_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            nvrtc: None,
            env: Vec::new(),
        }
    }

    /// An executor that re-executes the running binary; only meaningful
    /// inside `preflight` itself.
    pub fn current() -> std::io::Result<CudaExecutor> {
        Ok(CudaExecutor::new(std::env::current_exe()?))
    }

    /// The cuda executor of the machine `fingerprint` describes: the
    /// running binary in its child mode, with the NVRTC library a kernel
    /// would use (found among its toolkits).
    pub fn for_machine(
        fingerprint: &crate::fingerprint::Fingerprint,
    ) -> std::io::Result<CudaExecutor> {
        Ok(CudaExecutor::current()?.with_nvrtc(nvrtc_library(&fingerprint.toolkits)))
    }

    /// Uses this NVRTC library for CUDA C modules.
    pub fn with_nvrtc(mut self, nvrtc: Option<PathBuf>) -> CudaExecutor {
        self.nvrtc = nvrtc;
        self
    }

    /// The request for `job`, its module path made absolute (relative paths
    /// are from this process's working directory).
    fn request(&self, job: &Job, events: PathBuf) -> Result<CudaRequest, ProbeError> {
        let absolute = |path: &Path| {
            std::path::absolute(path).map_err(|source| ProbeError::Path {
                path: path.to_path_buf(),
                source,
            })
        };
        let variant = match &job.subject {
            Subject::DeviceCode { path, .. } => Some(absolute(path)?),
            _ => None,
        };
        let (module, launches) = match &job.subject {
            Subject::Module { spec, launches } => {
                let path = absolute(&spec.path)?;
                let launches = if job.depth >= Depth::Smoke {
                    launches.clone()
                } else {
                    Vec::new()
                };
                (
                    Some(ModuleSpec {
                        path,
                        ..spec.clone()
                    }),
                    launches,
                )
            }
            Subject::Device
            | Subject::Devices
            | Subject::DeviceCode { .. }
            | Subject::Variant { .. } => (None, Vec::new()),
        };
        Ok(CudaRequest {
            device: job.device.ordinal(),
            module,
            launches,
            nvrtc_library: self.nvrtc.clone(),
            libcuda: self.libcuda.clone(),
            variant,
            events,
            list_devices: job.subject == Subject::Devices,
            bench: None,
        })
    }

    /// Write `request` into the sandbox directory `dir`: the command that
    /// runs the child on it.
    fn write_request(&self, dir: &Path, request: &CudaRequest) -> Result<ChildCommand, ProbeError> {
        let request_path = dir.join(REQUEST_NAME);
        let setup = |source| ProbeError::Setup {
            path: request_path.clone(),
            source,
        };
        let json = serde_json::to_vec_pretty(request).map_err(|e| setup(e.into()))?;
        std::fs::write(&request_path, json).map_err(setup)?;
        Ok(ChildCommand {
            program: self.program.clone(),
            args: vec![CHILD_SUBCOMMAND.into(), request_path.into()],
            env: self.child_env(),
        })
    }

    /// The extra environment: eager module loading, the caller's, and
    /// NVRTC's directory in front of `LD_LIBRARY_PATH` so that it finds
    /// its `libnvrtc-builtins`.
    ///
    /// Since CUDA 12.2 the driver loads a module's kernels lazily, on first
    /// use, and a missing image then fails at the first launch instead of
    /// at load: `EAGER` keeps the failure in phase `load`, where the
    /// device depth and a native module's load look for it.
    fn child_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = vec![(MODULE_LOADING.0.into(), MODULE_LOADING.1.into())];
        env.extend(self.env.iter().cloned());
        if let Some(dir) = self.nvrtc.as_deref().and_then(Path::parent) {
            let mut paths = vec![dir.to_path_buf()];
            // The caller's own path, else this process's, follows.
            let given = self
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "LD_LIBRARY_PATH")
                .map(|(_, v)| v.clone());
            if let Some(old) = given.or_else(|| std::env::var_os("LD_LIBRARY_PATH")) {
                paths.extend(std::env::split_paths(&old));
            }
            if let Ok(joined) = std::env::join_paths(paths) {
                env.push(("LD_LIBRARY_PATH".into(), joined));
            }
        }
        env
    }
}

/// A native target is timed as a whole: `jobs` are its modules (each a
/// [`Subject::Module`] job), all loaded by one child and all their launches
/// timed together in each sample, labelled `label`; the first job's device
/// and limits are the child's.
impl BenchExecutor for CudaExecutor {
    fn start_bench(
        &self,
        jobs: &[&Job],
        label: &str,
        spec: &BenchSpec,
        interrupt: &Cancel,
    ) -> Result<BenchChild, ProbeError> {
        let mut modules = Vec::with_capacity(jobs.len());
        for job in jobs {
            let Subject::Module { spec, launches } = &job.subject else {
                return Err(ProbeError::Unsupported {
                    executor: ExecutorKind::Cuda,
                    subject: job.subject.describe(),
                });
            };
            let path = std::path::absolute(&spec.path).map_err(|source| ProbeError::Path {
                path: spec.path.clone(),
                source,
            })?;
            modules.push(BenchModule {
                module: ModuleSpec {
                    path,
                    ..spec.clone()
                },
                launches: launches.clone(),
            });
        }
        let Some(first) = jobs.first() else {
            return Err(ProbeError::Unsupported {
                executor: ExecutorKind::Cuda,
                subject: "a native target without modules".into(),
            });
        };
        let sandbox =
            crate::probe::kernel_sandbox(jobs.iter().filter_map(|job| job.subject.protected()))?;
        let dir = sandbox.dir().to_path_buf();
        let fifos = Fifos::make(&dir)?;
        let events = dir.join(EVENTS_NAME);
        let request = CudaRequest {
            device: first.device.ordinal(),
            module: None,
            launches: Vec::new(),
            nvrtc_library: self.nvrtc.clone(),
            libcuda: self.libcuda.clone(),
            variant: None,
            events: events.clone(),
            list_devices: false,
            bench: Some(BenchRequest {
                modules,
                label: label.to_owned(),
                flush_l2: spec.flush_l2,
                commands: fifos.commands_path.clone(),
                replies: fifos.replies_path.clone(),
            }),
        };
        let command = self.write_request(&dir, &request)?;
        BenchChild::spawn(
            ExecutorKind::Cuda,
            sandbox,
            fifos,
            command,
            first.limits.clone(),
            events,
            interrupt,
        )
    }
}

impl Executor for CudaExecutor {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Cuda
    }

    /// Modules, device questions and a compiled variant's device code (its
    /// import is another executor's).
    fn accepts(&self, subject: &Subject) -> bool {
        match subject {
            Subject::Module { .. }
            | Subject::DeviceCode { .. }
            | Subject::Device
            | Subject::Devices => true,
            Subject::Variant { .. } => false,
        }
    }

    /// This binary's version: the child is this binary.
    fn code_identity(&self) -> &'static str {
        concat!("cuda ", env!("CARGO_PKG_VERSION"))
    }

    /// A CUDA variant (by its name) that ships shared objects: their
    /// embedded code loaded on the device, at device depth. Universal and
    /// CPU variants run no device code of their own; a variant of Python
    /// alone (Triton) has none to load.
    fn device_step(&self, job: &Job) -> Option<Job> {
        let Subject::Variant { name, path } = &job.subject else {
            return None;
        };
        let cuda = name.is_cuda();
        (cuda && has_shared_objects(path)).then(|| Job {
            subject: Subject::DeviceCode {
                name: name.clone(),
                path: path.clone(),
            },
            device: job.device,
            smoke: super::SmokeSource::LoadOnly,
            depth: Depth::Device,
            limits: job.limits.clone(),
        })
    }

    fn bench(&self) -> Option<&dyn BenchExecutor> {
        Some(self)
    }

    fn run(&self, job: &Job, cancel: &Cancel) -> Result<Evidence, ProbeError> {
        if !self.accepts(&job.subject) {
            return Err(ProbeError::Unsupported {
                executor: self.kind(),
                subject: job.subject.describe(),
            });
        }
        let sandbox = crate::probe::kernel_sandbox(job.subject.protected())?;
        let events = sandbox.dir().join(EVENTS_NAME);
        let request = self.request(job, events.clone())?;
        let command = self.write_request(sandbox.dir(), &request)?;
        let run = sandbox.run(&command, &job.limits, cancel)?;
        Ok(super::evidence(
            self.kind(),
            run,
            &events,
            crate::protocol::Made::Fresh,
        ))
    }
}
