//! Probe: load one build variant in a sandboxed child process and run a
//! smoke workload there, so that whatever the variant does (crash, hang,
//! `exit(1)`, flood its output) the caller survives and learns what happened.
//!
//! This is the parent side of the *python executor*: it writes the embedded
//! driver (`probes/python/driver.py` and its `compare.py`) into the sandbox's directory, starts
//! the interpreter there, and reads the child's phase events back from the
//! result channel file. Classification of what it collects is
//! [`crate::classify`]'s job.

pub mod channel;
pub mod cuda;
pub mod doctor;
mod job;
pub mod library;

pub use crate::protocol::{Evidence, ExecutorKind};
pub use channel::{ChildFailure, ChildReport, Depth, ExceptionInfo, Phase};
pub use job::{Executor, Job, Placement, ProbeError, Subject};

use crate::sandbox::{Cancel, ChildCommand, Limits, RunReport, Sandbox};
use crate::variant::{Backend, NoarchBackend, VariantName};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The child-side driver, embedded so that an installed binary needs no data files.
pub const DRIVER: &str = include_str!("../../probes/python/driver.py");

/// The driver's comparison of results with references, written next to it.
pub const COMPARE: &str = include_str!("../../probes/python/compare.py");

/// Environment variable that names the result channel file in the child.
pub const RESULT_FILE_ENV: &str = "PREFLIGHT_RESULT_FILE";

const DRIVER_NAME: &str = "preflight_driver.py";
const COMPARE_NAME: &str = "compare.py";
const RESULT_NAME: &str = "preflight_result.jsonl";
const SMOKE_NAME: &str = "preflight_smoke.py";

/// Where a probe's smoke workload comes from, most specific first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmokeSource {
    /// A file given by the user, with `def smoke(kernel, device)`.
    File(PathBuf),
    /// The kernel repo's own `benchmarks/benchmark*.py` (hub convention).
    Benchmarks {
        /// The `benchmarks/` directory.
        dir: PathBuf,
        /// The kernel repo (working directory while the scripts load).
        repo: PathBuf,
    },
    /// preflight's own smoke file for a known hub kernel (`probes/kernels/`).
    Library {
        /// The kernel's name (`activation`).
        kernel: String,
        /// The file's text.
        source: &'static str,
    },
    /// No workload: import only.
    LoadOnly,
}

impl SmokeSource {
    /// Pick the first source that exists: the explicit file, the repo's
    /// benchmarks, preflight's library entry for `kernel`, else load only.
    pub fn choose(explicit: Option<&Path>, repo: Option<&Path>, kernel: Option<&str>) -> Self {
        if let Some(file) = explicit {
            return SmokeSource::File(file.to_path_buf());
        }
        if let Some(repo) = repo {
            let dir = repo.join("benchmarks");
            if has_benchmark_scripts(&dir) {
                return SmokeSource::Benchmarks {
                    dir,
                    repo: repo.to_path_buf(),
                };
            }
        }
        match kernel.and_then(|k| library::smoke_for(k).map(|s| (k, s))) {
            Some((kernel, source)) => SmokeSource::Library {
                kernel: kernel.to_string(),
                source,
            },
            None => SmokeSource::LoadOnly,
        }
    }
}

fn has_benchmark_scripts(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("benchmark") && name.ends_with(".py")
        })
    })
}

/// The torch device a variant's smoke runs on; `auto` lets the child pick
/// (universal variants run wherever torch has an accelerator, else on cpu).
pub fn device_for(variant: &VariantName) -> &'static str {
    match variant {
        VariantName::Arch { backend, .. } => match backend {
            Backend::Cuda(_) | Backend::Rocm(_) => "cuda",
            Backend::Xpu(_) => "xpu",
            Backend::Metal => "mps",
            Backend::Cann(_) => "npu",
            Backend::Neuron => "neuron",
            Backend::Tpu => "tpu",
            Backend::Cpu => "cpu",
        },
        VariantName::Noarch { backend } => match backend {
            NoarchBackend::Cuda | NoarchBackend::Rocm => "cuda",
            NoarchBackend::Xpu => "xpu",
            NoarchBackend::Metal => "mps",
            NoarchBackend::Npu => "npu",
            NoarchBackend::Neuron => "neuron",
            NoarchBackend::Tpu => "tpu",
            NoarchBackend::Cpu => "cpu",
            NoarchBackend::Universal => "auto",
        },
    }
}

/// How to probe: which interpreter, which smoke, within which limits.
#[derive(Debug, Clone)]
pub struct PythonProbe {
    /// The Python interpreter (an absolute path, see [`find_python`]).
    pub python: PathBuf,
    /// The smoke workload.
    pub smoke: SmokeSource,
    /// Time and output limits of the child.
    pub limits: Limits,
    /// Extra environment for the child, on top of the sandbox's scrubbed one.
    pub env: Vec<(OsString, OsString)>,
}

/// What one probe's child did: how it ended, what it printed, what it reported.
#[derive(Debug, Clone)]
pub struct ProbeRun {
    /// The sandbox's account of the process.
    pub run: RunReport,
    /// The child's phase events, folded.
    pub report: ChildReport,
    /// Why the result channel could not be read, if it could not.
    pub channel_error: Option<String>,
}

impl PythonProbe {
    /// Probe one variant directory in a fresh sandbox.
    pub fn run(
        &self,
        variant: &Path,
        device: &str,
        cancel: &Cancel,
    ) -> Result<ProbeRun, ProbeError> {
        let sandbox = Sandbox::new()?;
        let command = self.command(sandbox.dir(), variant, device)?;
        let run = sandbox.run(&command, &self.limits, cancel)?;
        let (report, channel_error) = match ChildReport::read(&sandbox.dir().join(RESULT_NAME)) {
            Ok(report) => (report, None),
            Err(e) => (ChildReport::default(), Some(e.to_string())),
        };
        Ok(ProbeRun {
            run,
            report,
            channel_error,
        })
    }

    /// The child's command line, with the driver (and a library smoke) written into `dir`.
    fn command(
        &self,
        dir: &Path,
        variant: &Path,
        device: &str,
    ) -> Result<ChildCommand, ProbeError> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .map(|()| path.clone())
                .map_err(|source| ProbeError::Setup { path, source })
        };
        let absolute = |path: &Path| {
            std::path::absolute(path).map_err(|source| ProbeError::Path {
                path: path.to_path_buf(),
                source,
            })
        };
        let driver = write(DRIVER_NAME, DRIVER)?;
        write(COMPARE_NAME, COMPARE)?;
        let mut args: Vec<OsString> = vec![
            "-B".into(),
            driver.into(),
            "--variant".into(),
            absolute(variant)?.into(),
            "--device".into(),
            device.into(),
        ];
        match &self.smoke {
            SmokeSource::File(file) => {
                args.extend(["--smoke".into(), absolute(file)?.into()]);
            }
            SmokeSource::Library { source, .. } => {
                let file = write(SMOKE_NAME, source)?;
                args.extend(["--smoke".into(), file.into()]);
                args.extend(["--smoke-kind".into(), "library".into()]);
            }
            SmokeSource::Benchmarks { dir, repo } => {
                args.extend(["--benchmarks".into(), absolute(dir)?.into()]);
                args.extend(["--repo".into(), absolute(repo)?.into()]);
            }
            SmokeSource::LoadOnly => {}
        }
        let mut env: Vec<(OsString, OsString)> = vec![
            (RESULT_FILE_ENV.into(), dir.join(RESULT_NAME).into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYTHONUNBUFFERED".into(), "1".into()),
        ];
        env.extend(self.env.iter().cloned());
        Ok(ChildCommand {
            program: self.python.clone(),
            args,
            env,
        })
    }
}

/// Resolve an interpreter the way a shell would: a path with a `/` as is,
/// else the first executable of that name on `PATH`.
pub fn find_python(python: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if python.components().count() > 1 {
        return executable(python).then(|| python.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(python))
            .find(|p| executable(p))
    })
}
