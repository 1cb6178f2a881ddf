//! Where a planned job meets an executor: the executors of this machine,
//! and the one function that runs a job in a sandboxed child and turns what
//! the child did into an outcome.

use super::plan::Job;
use crate::classify::{self, Outcome, Phase, Timings};
use crate::declared::arch::ComputeCapability;
use crate::declared::embedded::Judge;
use crate::fingerprint::{Fingerprint, Toolkits};
use crate::probe::cuda::{self, CudaExecutor};
use crate::probe::{Placement, PythonProbe, Subject};
use crate::sandbox::{Cancel, Limits};
use std::path::PathBuf;
use std::time::Instant;

/// The executors a run (or `doctor`) uses.
#[derive(Debug, Clone)]
pub struct Executors {
    /// The interpreter hub variants are imported in; `None` when none is
    /// known (a plan with hub jobs then cannot run: see
    /// [`super::Plan::needs_python`]).
    pub python: Option<PathBuf>,
    /// The cuda executor for native modules; `None` when the plan has none.
    /// Each job runs it within the job's own limits.
    pub cuda: Option<CudaExecutor>,
}

impl Executors {
    /// The cuda executor of this machine: the running binary re-executed in
    /// its child mode, with the NVRTC library a kernel would use (found
    /// among `toolkits`) and `limits`. `check`, `warmup` and `doctor` all
    /// get theirs here.
    pub fn cuda_for(toolkits: &Toolkits, limits: &Limits) -> std::io::Result<CudaExecutor> {
        Ok(CudaExecutor {
            limits: limits.clone(),
            ..CudaExecutor::current()?.with_nvrtc(cuda::nvrtc_library(toolkits))
        })
    }

    /// What declared verdicts are judged against: the fingerprint's first
    /// GPU and its driver's PTX ISA; when the fingerprint knows no GPU and
    /// there is a cuda executor, device 0 as that executor sees it (the
    /// driver native modules will meet), found by one query child.
    pub fn judge(&self, fingerprint: &Fingerprint, cancel: &Cancel) -> Judge {
        let judge = Judge::from_fingerprint(fingerprint);
        if judge.gpu.is_some() {
            return judge;
        }
        let device = self
            .cuda
            .as_ref()
            .and_then(|cuda| cuda.run(0, None, &[], cancel).ok())
            .and_then(|run| run.facts.device);
        Judge {
            gpu: device.map(|d| ComputeCapability::new(d.major, d.minor)),
            ..judge
        }
    }
}

/// What running one job showed.
pub(super) struct Executed {
    pub outcome: Outcome,
    pub timings: Timings,
    pub leaked: Option<String>,
}

/// Runs one job in a fresh sandboxed child of its executor and classifies
/// what the child did. A fault of preflight (no executor, a sandbox that
/// fails) is a `probe_error` outcome, never a failed run.
pub(super) fn execute(job: &Job, executors: &Executors, cancel: &Cancel) -> Executed {
    let start = Instant::now();
    let fault = |message: String| Executed {
        outcome: Outcome::probe_error(Phase::Start, &message),
        timings: Timings {
            total_ms: round_ms(start.elapsed().as_secs_f64() * 1e3),
            ..Timings::default()
        },
        leaked: None,
    };
    let probe = &job.probe;
    match &probe.subject {
        Subject::Variant { name, path } => {
            let Some(python) = &executors.python else {
                return fault("no Python interpreter to import the variant in".into());
            };
            let prober = PythonProbe {
                python: python.clone(),
                smoke: probe.smoke.clone(),
                limits: probe.limits.clone(),
                env: Vec::new(),
            };
            let device = match probe.device {
                Placement::Cpu => "cpu",
                Placement::Default | Placement::Ordinal(_) => crate::probe::device_for(name),
            };
            match prober.run(path, device, cancel) {
                Ok(run) => Executed {
                    outcome: classify::classify_run(&run),
                    timings: Timings {
                        total_ms: round_ms(start.elapsed().as_secs_f64() * 1e3),
                        import_ms: run.report.import_ms.map(round_ms),
                        smoke_ms: run.report.smoke_ms.map(round_ms),
                    },
                    leaked: run.run.leaked,
                },
                Err(e) => fault(e.to_string()),
            }
        }
        Subject::Module { .. } | Subject::Device => {
            let Some(cuda) = &executors.cuda else {
                return fault("no cuda executor to load the module in".into());
            };
            let executor = CudaExecutor {
                limits: probe.limits.clone(),
                ..cuda.clone()
            };
            let (module, launches) = match &probe.subject {
                Subject::Module { spec, launches } => (Some(spec), launches.as_slice()),
                _ => (None, &[][..]),
            };
            match executor.run(probe.device.ordinal(), module, launches, cancel) {
                Ok(run) => Executed {
                    outcome: run.outcome,
                    timings: run.timings,
                    leaked: run.run.leaked,
                },
                Err(e) => fault(e.to_string()),
            }
        }
    }
}

/// Milliseconds, rounded to the microsecond.
fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}
