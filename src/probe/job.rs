//! The one executor interface: a [`Job`] goes in, [`Evidence`] comes out.
//! No executor classifies; `classify` reads the evidence.

use super::BenchExecutor;
use super::SmokeSource;
use super::cuda::{Launch, ModuleSpec};
use crate::protocol::{Depth, Evidence, ExecutorKind, Made};
use crate::sandbox::{Cancel, Limits, SandboxError};
use crate::variant::VariantName;
use std::path::PathBuf;
use std::sync::Arc;

/// What a job probes.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// One hub build variant: its directory, named as the hub names it.
    Variant {
        /// The variant's name (`torch28-cxx11-cu128-x86_64-linux`).
        name: VariantName,
        /// Its directory (`build/<name>`).
        path: PathBuf,
    },
    /// One native module (cubin, PTX, fatbin or CUDA C) and the smoke
    /// launches to run from it.
    Module {
        /// The module.
        spec: ModuleSpec,
        /// Its launches, in order.
        launches: Vec<Launch>,
    },
    /// The device code a compiled variant's shared objects embed, loaded
    /// on the device without importing the variant: a variant's device
    /// step ([`Executor::device_step`]), run before its import.
    DeviceCode {
        /// The variant's name.
        name: VariantName,
        /// Its directory.
        path: PathBuf,
    },
    /// The device alone: is there a driver, and does the device answer.
    Device,
    /// Every device the driver enumerates, described without creating a
    /// context on any (the full fingerprint's question).
    Devices,
}

impl Subject {
    /// What a probe of this subject keeps read-only: the kernel a variant
    /// belongs to (the repo above `build/`, or its kernel folder in the hub
    /// cache), a native module's folder.
    pub fn protected(&self) -> Option<PathBuf> {
        match self {
            Subject::Variant { path, .. } | Subject::DeviceCode { path, .. } => {
                Some(super::kernel_files(path))
            }
            Subject::Module { spec, .. } => std::path::absolute(&spec.path)
                .ok()
                .and_then(|p| p.parent().map(PathBuf::from)),
            Subject::Device | Subject::Devices => None,
        }
    }

    /// A short description for messages (`variant torch-universal`).
    pub fn describe(&self) -> String {
        match self {
            Subject::Variant { name, .. } => format!("variant {name}"),
            Subject::DeviceCode { name, .. } => format!("the device code of variant {name}"),
            Subject::Module { spec, .. } => format!("module {}", spec.path.display()),
            Subject::Device => "the device".to_owned(),
            Subject::Devices => "the device list".to_owned(),
        }
    }
}

/// Which device a job runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// The subject's own choice: a variant's backend device (`cuda`, `mps`,
    /// `cpu`; the accelerator torch sees for universal variants), device 0
    /// for native modules.
    #[default]
    Default,
    /// The host CPU, whatever the subject is built for.
    Cpu,
    /// Device `n` as the driver counts them (after `CUDA_VISIBLE_DEVICES`).
    Ordinal(u32),
}

impl Placement {
    /// The driver's ordinal: `n` for [`Placement::Ordinal`], else 0.
    pub fn ordinal(self) -> u32 {
        match self {
            Placement::Ordinal(n) => n,
            Placement::Default | Placement::Cpu => 0,
        }
    }
}

/// One probe to run: a subject, where, with which workload, how deep, within
/// which limits.
#[derive(Debug, Clone)]
pub struct Job {
    /// What to probe.
    pub subject: Subject,
    /// Which device.
    pub device: Placement,
    /// The smoke workload of a variant (native modules carry their launches).
    pub smoke: SmokeSource,
    /// How deep to go: below [`Depth::Smoke`] no workload runs.
    pub depth: Depth,
    /// Time and output limits of the child.
    pub limits: Limits,
}

impl Job {
    /// A job for `subject` on its default device, as deep as its workload
    /// allows, with default limits and no smoke source.
    pub fn new(subject: Subject) -> Job {
        Job {
            subject,
            device: Placement::Default,
            smoke: SmokeSource::LoadOnly,
            depth: Depth::Verified,
            limits: Limits::default(),
        }
    }
}

/// What identifies a job: every field of [`Job`] that can change its
/// outcome, borrowed (what every cache key is made from).
#[derive(Debug, Clone, Copy)]
pub struct Identity<'j> {
    /// What is probed.
    pub subject: &'j Subject,
    /// On which device.
    pub device: Placement,
    /// With which smoke workload.
    pub smoke: &'j SmokeSource,
    /// How deep.
    pub depth: Depth,
}

impl Job {
    /// What identifies this job. It names every field of the job, so that a
    /// field added to [`Job`] does not compile until it is placed here (or
    /// said not to matter), and no key can miss it.
    pub fn identity(&self) -> Identity<'_> {
        let Job {
            subject,
            device,
            smoke,
            depth,
            // Limits bound a child's time and output: a job that reaches
            // one ends as `timeout` (never kept) or with a shorter stderr
            // tail, and is the same job.
            limits: _,
        } = self;
        Identity {
            subject,
            device: *device,
            smoke,
            depth: *depth,
        }
    }
}

/// Runs jobs in sandboxed children and returns what it saw. An executor
/// is this one implementation plus one line of registration
/// (`run::Executors::for_machine`): everything a run asks of it — which
/// subjects it takes, what identifies its code in keys, a compiled
/// variant's device step, how it makes children, bench children, work
/// beside the first probes — is asked here, never by its name.
pub trait Executor: Send + Sync {
    /// Which executor this is (recorded in evidence and cache keys).
    fn kind(&self) -> ExecutorKind;

    /// Whether this executor runs `subject`: a run sends each job to the
    /// first executor of its registry that accepts it.
    fn accepts(&self, subject: &Subject) -> bool;

    /// What identifies this executor's own code, in every key made of its
    /// jobs: a new version of it may reach another verdict on the same job.
    fn code_identity(&self) -> &'static str;

    /// How this executor makes its children (part of its jobs' keys: a
    /// forked probe's evidence never answers a fresh one's job).
    fn made(&self) -> Made {
        Made::Fresh
    }

    /// The job that loads the device code embedded in `job`'s subject on
    /// the device, to run (by the executor that accepts it) before `job`
    /// itself, when this executor has such a step for it: the cuda
    /// executor's for a compiled CUDA variant. Its outcome joins the
    /// job's ([`crate::classify::with_device_code`]) and its executor's
    /// code is part of the job's key.
    fn device_step(&self, _job: &Job) -> Option<Job> {
        None
    }

    /// Run `job` in a fresh sandbox; `cancel` stops it (the evidence then
    /// says `Cancelled`). An error means the child could not be run at all.
    fn run(&self, job: &Job, cancel: &Cancel) -> Result<Evidence, ProbeError>;

    /// This executor as a timer of bench participants, when it is one.
    fn bench(&self) -> Option<&dyn BenchExecutor> {
        None
    }

    /// A copy of this executor for one run, when it keeps what a run
    /// learns (the python executor: the verdicts its judge leaves); `None`:
    /// this executor serves every run as it is.
    fn for_run(&self) -> Option<Arc<dyn Executor>> {
        None
    }

    /// Work that runs beside the first probes of a run whose `pending`
    /// jobs are probed `parallel` at a time (the python executor: one
    /// child that judges the hub's acceptance of the variants probed
    /// later), when this executor has some. It ends, or is stopped by
    /// its `Cancel`, with the run; what it fails to do changes nothing.
    fn ahead<'a>(&'a self, _pending: &[&'a Job], _parallel: usize) -> Option<Ahead<'a>> {
        None
    }

    /// What a run should be told once it has run, if anything (the python
    /// executor: why its probes ran as fresh processes, not forked).
    fn after_run(&self) -> Option<String> {
        None
    }
}

/// Work an executor does beside a run's first probes ([`Executor::ahead`]).
pub type Ahead<'a> = Box<dyn FnOnce(&Cancel) + Send + 'a>;

/// A probe that could not be run at all: always preflight's fault, or a
/// job given to an executor that cannot run it.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The sandbox failed.
    #[error("sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    /// A file of the probe could not be written into the sandbox directory.
    #[error("cannot write {}: {source}", path.display())]
    Setup {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A path of the job has no absolute form.
    #[error("cannot resolve {}: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The executor does not run this kind of subject.
    #[error("the {executor} executor cannot probe {subject}")]
    Unsupported {
        /// The executor.
        executor: ExecutorKind,
        /// The subject, described.
        subject: String,
    },
}
