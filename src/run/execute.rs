//! Where a planned job meets an executor: the executors of this machine,
//! and the one function that runs a job in a sandboxed child and turns what
//! the child did into an outcome.

use super::plan::Job;
use crate::classify::{self, Machine, Outcome, Phase, Timings};
use crate::fingerprint::{Fingerprint, Toolkits};
use crate::probe::cuda::{self, CudaExecutor};
use crate::probe::{self, BenchExecutor, Executor, PythonExecutor, Subject};
use crate::protocol::Depth;
use crate::sandbox::Cancel;
use std::time::Instant;

/// The executors a run (or `doctor`) uses.
#[derive(Debug, Clone)]
pub struct Executors {
    /// Imports hub variants; `None` when no interpreter is known (a plan
    /// with hub jobs then cannot run: see [`super::Plan::needs_python`]).
    pub python: Option<PythonExecutor>,
    /// Loads and launches native modules; `None` when the plan has none.
    pub cuda: Option<CudaExecutor>,
}

impl Executors {
    /// The cuda executor of this machine: the running binary re-executed in
    /// its child mode, with the NVRTC library a kernel would use (found
    /// among `toolkits`).
    fn cuda_for(toolkits: &Toolkits) -> std::io::Result<CudaExecutor> {
        Ok(CudaExecutor::current()?.with_nvrtc(cuda::nvrtc_library(toolkits)))
    }

    /// A copy for one run: its python executor keeps the verdicts a judge
    /// leaves for this run's probes ([`PythonExecutor::judging`]).
    pub(super) fn for_run(&self) -> Executors {
        Executors {
            python: self.python.as_ref().map(PythonExecutor::judging),
            cuda: self.cuda.clone(),
        }
    }

    /// The executors of a run of `plan` on the machine its fingerprint
    /// describes ([`Executors::for_machine`], needing what the plan's jobs
    /// need). `check`, `select`, `warmup` and `bench` get theirs here.
    pub fn for_plan(
        plan: &super::Plan,
        python: Option<&std::path::Path>,
    ) -> Result<Executors, ExecutorsError> {
        let needs = Needs {
            python: plan.needs_python(),
            cuda: plan.needs_cuda(),
        };
        Executors::for_machine(&plan.fingerprint, python, needs)
    }

    /// The executors of the machine `fingerprint` describes, registered:
    /// the python executor (`python`, else the fingerprint's interpreter;
    /// an error when `needs.python` and there is none) and, when
    /// `needs.cuda`, the cuda executor (the running binary in its child
    /// mode, with the NVRTC library a kernel would use). The one place
    /// executors are made: runs get theirs through
    /// [`Executors::for_plan`], `doctor` its own directly.
    pub fn for_machine(
        fingerprint: &Fingerprint,
        python: Option<&std::path::Path>,
        needs: Needs,
    ) -> Result<Executors, ExecutorsError> {
        let python = python
            .map(std::path::Path::to_path_buf)
            .or_else(|| probe::find_python(&fingerprint.python.as_ref()?.interpreter))
            .map(|python| PythonExecutor::for_machine(python, fingerprint));
        if needs.python && python.is_none() {
            return Err(ExecutorsError::NoPython);
        }
        let cuda = needs
            .cuda
            .then(|| Executors::cuda_for(&fingerprint.toolkits))
            .transpose()
            .map_err(ExecutorsError::NoBinary)?;
        Ok(Executors { python, cuda })
    }

    /// Every executor registered, in the order a job is offered to them.
    fn registered(&self) -> impl Iterator<Item = &dyn Executor> {
        let python = self.python.as_ref().map(|e| e as &dyn Executor);
        let cuda = self.cuda.as_ref().map(|e| e as &dyn Executor);
        python.into_iter().chain(cuda)
    }

    /// The executor that times `subject` in bench children: the first
    /// registered one that accepts it (`bench` starts every participant
    /// through it, one shape for both executors).
    pub fn bench_executor(&self, subject: &Subject) -> Option<&dyn BenchExecutor> {
        let python = self.python.as_ref().map(|e| e as &dyn BenchExecutor);
        let cuda = self.cuda.as_ref().map(|e| e as &dyn BenchExecutor);
        python.into_iter().chain(cuda).find(|e| e.accepts(subject))
    }

    /// The executor that runs `subject`: the first registered one that
    /// accepts it.
    fn for_subject(&self, subject: &Subject) -> Option<&dyn Executor> {
        self.registered().find(|e| e.accepts(subject))
    }
}

/// What a caller's executors must be able to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Hub variants (imported by the python executor).
    pub python: bool,
    /// Native modules and the CUDA capability probes (the cuda executor).
    pub cuda: bool,
}

/// Why a run's executors cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorsError {
    /// Hub variants to import, and no interpreter to import them in (a
    /// user's fault: exit 2).
    #[error("no Python interpreter found: give --python P")]
    NoPython,
    /// The running binary, which the cuda child is, cannot be found.
    #[error("cannot find the preflight binary: {0}")]
    NoBinary(std::io::Error),
}

/// What running one job showed.
pub(super) struct Executed {
    pub outcome: Outcome,
    pub timings: Timings,
    pub leaked: Option<String>,
    /// Why no child could be run at all, when none could: a fault of
    /// preflight or of the machine, not an answer about the job.
    pub fault: Option<String>,
}

/// Runs one job in fresh sandboxed children of its executors and
/// classifies the evidence. A compiled CUDA variant's embedded code is
/// loaded on the device first; when that fails, the import still runs (what
/// stops it earlier is the better answer) but no smoke does. A fault of
/// preflight (no executor for the job, a sandbox that fails) is a
/// `probe_error` outcome and a fault, never an abandoned run. The evidence
/// is classified on `machine`, the machine the plan is for.
pub(super) fn execute(
    job: &Job,
    executors: &Executors,
    cancel: &Cancel,
    machine: &Machine,
) -> Executed {
    let import = executors.for_subject(&job.probe.subject);
    let Some(device_job) = &job.device_code else {
        return execute_one(&job.probe, import, cancel, machine);
    };
    let cuda = executors.cuda.as_ref().map(|e| e as &dyn Executor);
    let device = execute_one(device_job, cuda, cancel, machine);
    let mut import_job = job.probe.clone();
    if !device.outcome.kind.passed() {
        import_job.depth = import_job.depth.min(Depth::Device);
    }
    let import = execute_one(&import_job, import, cancel, machine);
    Executed {
        outcome: classify::with_device_code(import.outcome, device.outcome),
        timings: Timings {
            total_ms: round_ms(import.timings.total_ms + device.timings.total_ms),
            ..import.timings
        },
        leaked: import.leaked.or(device.leaked),
        fault: import.fault.or(device.fault),
    }
}

/// Runs `job` in a fresh sandboxed child of `executor`.
fn execute_one(
    job: &probe::Job,
    executor: Option<&dyn Executor>,
    cancel: &Cancel,
    machine: &Machine,
) -> Executed {
    let start = Instant::now();
    let result = match executor {
        Some(executor) => executor.run(job, cancel).map_err(|e| e.to_string()),
        None => Err(format!("no executor to run {} in", job.subject.describe())),
    };
    let total_ms = round_ms(start.elapsed().as_secs_f64() * 1e3);
    match result {
        Ok(evidence) => Executed {
            outcome: classify::classify_on(&evidence, machine),
            timings: Timings {
                total_ms,
                ..evidence.timings()
            },
            leaked: evidence.leaked,
            fault: None,
        },
        Err(message) => Executed {
            outcome: Outcome::probe_error(Phase::Start, &message),
            timings: Timings {
                total_ms,
                ..Timings::default()
            },
            leaked: None,
            fault: Some(message),
        },
    }
}

/// Milliseconds, rounded to the microsecond.
fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}
