//! What a benchmark found: per variant its samples and summary, or why it
//! was not timed, and how it compares with the fastest and the reference.

use crate::stats::{Comparison, StopCriteria, StopRule, Summary};
use serde::{Deserialize, Serialize};

/// The clock a variant's samples were taken with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timer {
    /// Device events around the launch (GPU variants).
    DeviceEvents,
    /// The host's monotonic clock (CPU variants).
    HostClock,
    /// The CPU time of the variant's process (CPU variants, `--cpu-time`):
    /// other load cannot lengthen it, but it adds up every thread.
    CpuTime,
}

/// A variant that was timed to the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// Statistics of the kept samples.
    pub summary: Summary,
    /// The rule that ended its timing.
    pub stop: StopRule,
    /// The kept samples in milliseconds, in the order taken.
    pub samples_ms: Vec<f64>,
    /// Samples dropped because the device reported throttling.
    pub dropped_throttled: u32,
    /// The clock the samples were taken with.
    pub timer: Timer,
}

/// Whether a variant was timed, and if not, why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BenchStatus {
    /// Timed to the end.
    Timed(Timed),
    /// Not timed, or stopped mid-run.
    Excluded {
        /// The outcome's taxonomy name (`wrong_result`, `crashed`, …).
        outcome: String,
        /// Why, for people.
        reason: String,
    },
}

/// One variant's part of a benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantBench {
    /// The variant's name.
    pub variant: String,
    /// The job identity key, hex.
    pub job: String,
    /// Its timing, or why there is none.
    pub status: BenchStatus,
    /// Against the fastest variant; `None` for the fastest and the excluded.
    pub vs_fastest: Option<Comparison>,
    /// Against the reference computation, when one was timed.
    pub vs_reference: Option<Comparison>,
}

/// A whole benchmark of one kernel's variants on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// The kernel benchmarked (path or repo).
    pub target: String,
    /// The workload timed (`smoke` or a named workload).
    pub workload: String,
    /// The machine fingerprint key.
    pub fingerprint: String,
    /// The device timed on, for people.
    pub device: String,
    /// Whether the L2 cache was flushed before each sample.
    pub flush_l2: bool,
    /// The stopping rule's bounds.
    pub criteria: StopCriteria,
    /// The variants, fastest first once ranked.
    pub variants: Vec<VariantBench>,
    /// The reference computation, when it was timed.
    pub reference: Option<VariantBench>,
}

impl BenchReport {
    /// Sorts timed variants fastest first by median (excluded ones last, in
    /// their original order) and fills in the comparisons.
    pub fn rank(&mut self, seed: u64) {
        let med = |v: &VariantBench| match &v.status { BenchStatus::Timed(t) => t.summary.median, _ => f64::INFINITY };
        self.variants.sort_by(|a, b| med(a).total_cmp(&med(b)));
        let first = match &self.variants[0].status { BenchStatus::Timed(t) => t.samples_ms.clone(), _ => vec![] };
        for v in self.variants.iter_mut().skip(1) { if let BenchStatus::Timed(t) = &v.status { v.vs_fastest = Some(crate::stats::compare(&t.samples_ms, &first, seed)); } }
    }
}
