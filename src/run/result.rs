//! What a run produces: one row per planned job, and the document
//! `check --json` prints.

use super::plan::{JobId, TargetId};
use crate::classify::{Fault, Outcome, Timings};
use crate::fingerprint::{Fingerprint, Hashed};
use serde::Serialize;

/// The declared verdict, as `check --json` shows it: for a hub variant the
/// hub's name-level decision (and, when a GPU is judged, whether its
/// embedded CUDA images fit it); for a native module what its embedded
/// images allow on this GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// Whether it would be accepted here by what it declares.
    pub accepted: bool,
    /// Why not, in full.
    pub reason: Option<String>,
    /// Why not, in a word or two (for the table).
    #[serde(skip)]
    pub short: Option<&'static str>,
}

impl Declared {
    /// Accepted, with nothing to say.
    pub const ACCEPTED: Declared = Declared {
        accepted: true,
        reason: None,
        short: None,
    };
}

/// One job's row: what it declares, what it did, how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The job's target in the plan: rows belong to targets by this, not by
    /// the name the target was given.
    #[serde(skip)]
    pub target_id: TargetId,
    /// The job in the plan.
    #[serde(skip)]
    pub job: JobId,
    /// The target as given on the command line.
    pub target: String,
    /// The variant's name, or a native module's file name.
    pub variant: String,
    /// The variant's directory, or the module's file.
    pub path: String,
    /// The declared verdict.
    pub declared: Declared,
    /// What probing it showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// Processes that outlived the probe and were killed, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaked: Option<String>,
    /// Whether the outcome came from the cache rather than a probe now.
    pub cached: bool,
    /// Whether another node of this machine class probed it: the remote
    /// store answered (absent when not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remote: bool,
}

impl CheckResult {
    /// Whether the declared verdict and the observed outcome disagree: a
    /// job accepted by its declarations that fails here, or one rejected
    /// that works.
    pub fn disagrees(&self) -> bool {
        match self.outcome.kind.fault() {
            Fault::None => !self.declared.accepted,
            Fault::NotProbed | Fault::Preflight => false,
            Fault::Here => self.declared.accepted,
        }
    }
}

/// The document `check --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The machine the results hold for, with its hash.
    #[serde(serialize_with = "hashed")]
    pub fingerprint: Fingerprint,
    /// One row per planned job: targets in the order given, each hub
    /// kernel's variants in the hub's preference order, each native
    /// target's modules in file order.
    pub results: Vec<CheckResult>,
    /// What went wrong around the probes without changing any result (a
    /// directory entry that is not a variant, an unreadable or unwritable
    /// cache).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How the probes of this run were isolated; `None` when none ran
    /// (every answer came from the plan or the cache).
    pub isolation: Option<crate::sandbox::Isolation>,
    /// Jobs whose child could not be run at all (a fork refused, a file of
    /// the probe not written), in plan order, each as `path: why`: faults
    /// of preflight or of the machine, which the command line reports as
    /// such (exit 3) rather than as answers. Their rows say `probe_error`.
    #[serde(skip)]
    pub faults: Vec<String>,
    /// Whether each target works here, by [`TargetId`]: a hub kernel when
    /// one of its variants passes, a native target when every module does.
    #[serde(skip)]
    pub passing: Vec<bool>,
}

fn hashed<S: serde::Serializer>(fp: &Fingerprint, s: S) -> Result<S::Ok, S::Error> {
    Hashed::from(fp).serialize(s)
}

impl CheckReport {
    /// Whether every target works here.
    pub fn every_target_passes(&self) -> bool {
        self.passing.iter().all(|p| *p)
    }

    /// The rows of one target, in plan order.
    pub fn rows(&self, target: TargetId) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(move |r| r.target_id == target)
    }
}
