//! Where a planned job meets an executor: the registry of this machine's
//! executors, and the one function that runs a job in a sandboxed child and
//! turns what the child did into an outcome.

use super::plan::Job;
use crate::classify::{self, Machine, Outcome, Phase, Timings};
use crate::fingerprint::Fingerprint;
use crate::probe::cuda::CudaExecutor;
use crate::probe::{self, BenchExecutor, Executor, PythonExecutor, Subject};
use crate::protocol::Depth;
use crate::sandbox::Cancel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The executors a run (or a library caller) uses, in the order a job is
/// offered to them: every question a run has of an executor (which one
/// takes a subject, a variant's device step, bench children, work beside
/// the first probes) is asked of this registry through
/// [`probe::Executor`], never of an executor by name.
#[derive(Clone, Default)]
pub struct Executors {
    registered: Vec<Arc<dyn Executor>>,
    /// Why an executor of this machine could not be made, for each one
    /// that could not: what a plan that needs it is told.
    missing: Vec<ExecutorsError>,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<_> = self.registered.iter().map(|e| e.kind()).collect();
        f.debug_struct("Executors")
            .field("registered", &kinds)
            .field("missing", &self.missing)
            .finish()
    }
}

impl Executors {
    /// No executor yet.
    pub fn new() -> Executors {
        Executors::default()
    }

    /// This registry with `executor` offered jobs after those registered
    /// before it.
    pub fn with(mut self, executor: impl Executor + 'static) -> Executors {
        self.registered.push(Arc::new(executor));
        self
    }

    /// This registry with `made`'s executor registered, or, when it could
    /// not be made, the reason kept for a plan that needs it.
    pub fn with_made<E: Executor + 'static>(
        mut self,
        made: Result<E, ExecutorsError>,
    ) -> Executors {
        match made {
            Ok(executor) => self.with(executor),
            Err(why) => {
                self.missing.push(why);
                self
            }
        }
    }

    /// The executors of the machine `fingerprint` describes, registered in
    /// the order jobs are offered to them: the python executor (`python`,
    /// else the fingerprint's interpreter), then the cuda executor (the
    /// running binary in its child mode, with the NVRTC library a kernel
    /// would use). The one place a run's executors are made, and the one
    /// line a new executor adds. One that cannot be made is missing, and
    /// said so only to a plan that needs it ([`Executors::ready_for`]).
    pub fn for_machine(fingerprint: &Fingerprint, python: Option<&std::path::Path>) -> Executors {
        Executors::for_machine_given(fingerprint, python, None)
    }

    /// [`Executors::for_machine`], the python executor's probes replaying
    /// `verdicts` ([`PythonExecutor::given_verdicts`]).
    pub fn for_machine_given(
        fingerprint: &Fingerprint,
        python: Option<&std::path::Path>,
        verdicts: Option<std::sync::Arc<[u8]>>,
    ) -> Executors {
        let python = python
            .map(std::path::Path::to_path_buf)
            .or_else(|| probe::find_python(&fingerprint.python.as_ref()?.interpreter))
            .map(|python| {
                let executor = PythonExecutor::for_machine(python, fingerprint);
                match verdicts {
                    Some(v) => executor.given_verdicts(v),
                    None => executor,
                }
            })
            .ok_or(ExecutorsError::NoPython);
        Executors::new()
            .with_made(python)
            .with_made(Executors::cuda(fingerprint))
    }

    /// The cuda executor of the machine `fingerprint` describes, as
    /// [`Executors::for_machine`] registers it: what `doctor`'s CUDA
    /// capability probes run in.
    pub fn cuda(fingerprint: &Fingerprint) -> Result<CudaExecutor, ExecutorsError> {
        CudaExecutor::for_machine(fingerprint).map_err(|e| ExecutorsError::NoBinary(e.to_string()))
    }

    /// `Ok` when every job `plan` will probe (and every device step) has
    /// an executor here; else why the first executor that could not be
    /// made is missing (a plan of hub variants without an interpreter:
    /// [`ExecutorsError::NoPython`]).
    pub fn ready_for(&self, plan: &super::Plan) -> Result<(), ExecutorsError> {
        let unserved = plan
            .jobs
            .iter()
            .filter(|job| job.skip.is_none())
            .flat_map(|job| std::iter::once(&job.probe).chain(&job.device_code))
            .any(|job| self.for_subject(&job.subject).is_none());
        match self.missing.first() {
            Some(why) if unserved => Err(why.clone()),
            _ => Ok(()),
        }
    }

    /// A copy for one run: each executor that keeps what a run learns
    /// replaced by its copy for the run ([`Executor::for_run`]).
    pub(super) fn for_run(&self) -> Executors {
        Executors {
            registered: self
                .registered
                .iter()
                .map(|e| e.for_run().unwrap_or_else(|| Arc::clone(e)))
                .collect(),
            missing: self.missing.clone(),
        }
    }

    /// Every executor registered, in the order a job is offered to them.
    pub fn registered(&self) -> impl Iterator<Item = &dyn Executor> {
        self.registered.iter().map(|e| e.as_ref())
    }

    /// The executor that runs `subject`: the first registered one that
    /// accepts it.
    pub fn for_subject(&self, subject: &Subject) -> Option<&dyn Executor> {
        self.registered().find(|e| e.accepts(subject))
    }

    /// The device step of `job` ([`Executor::device_step`]): the first
    /// registered executor's that has one.
    pub fn device_step(&self, job: &probe::Job) -> Option<probe::Job> {
        self.registered().find_map(|e| e.device_step(job))
    }

    /// The executor that times `subject` in bench children: the one that
    /// runs it, when it is a bench executor (`bench` starts every
    /// participant through it, one shape for every executor).
    pub fn bench_executor(&self, subject: &Subject) -> Option<&dyn BenchExecutor> {
        self.for_subject(subject)?.bench()
    }

    /// What the executors tell a run once it has run ([`Executor::after_run`]).
    pub fn after_run(&self) -> Vec<String> {
        self.registered().filter_map(Executor::after_run).collect()
    }
}

/// Why a run's executors cannot be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecutorsError {
    /// Hub variants to import, and no interpreter to import them in (a
    /// user's fault: exit 2).
    #[error("no Python interpreter found: give --python P")]
    NoPython,
    /// The running binary, which the cuda child is, cannot be found.
    #[error("cannot find the preflight binary: {0}")]
    NoBinary(String),
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
/// classifies the evidence. A job with a device step (a compiled CUDA
/// variant's embedded code, loaded on the device) runs that first; when
/// that fails, the import still runs (what stops it earlier is the better
/// answer) but no smoke does. A fault of
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
    let device = executors.for_subject(&device_job.subject);
    let device = execute_one(device_job, device, cancel, machine);
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
        Some(executor) => run_when_room(executor, job, cancel).map_err(|e| e.to_string()),
        None => Err(format!("no executor to run {} in", job.subject.describe())),
    };
    let total_ms = round_ms(start.elapsed().as_secs_f64() * 1e3);
    match result {
        Ok(evidence) => Executed {
            outcome: classify::against_machine(
                classify::classify_on(&evidence, machine),
                &job.subject,
                machine,
            ),
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

/// How long a probe the machine refuses a process (`EAGAIN`, `ENOMEM`)
/// is tried again before the refusal is the run's fault: long enough for
/// another probe that held them (a fork bomb at its bound) to end and let
/// them go, short enough that a machine that refuses every fork says so.
const ROOM_WITHIN: Duration = Duration::from_secs(5);

/// `executor.run(job)`, tried again while the machine refuses it a
/// process, for at most [`ROOM_WITHIN`].
fn run_when_room(
    executor: &dyn Executor,
    job: &probe::Job,
    cancel: &Cancel,
) -> Result<crate::protocol::Evidence, probe::ProbeError> {
    let deadline = Instant::now() + ROOM_WITHIN;
    let mut wait = Duration::from_millis(50);
    loop {
        match executor.run(job, cancel) {
            Err(probe::ProbeError::Sandbox(e))
                if e.is_exhaustion() && Instant::now() < deadline && !cancel.is_cancelled() =>
            {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(800));
            }
            result => return result,
        }
    }
}

/// Milliseconds, rounded to the microsecond.
fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}
