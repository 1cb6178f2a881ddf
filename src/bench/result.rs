//! What a benchmark found: per variant its samples and summary, or why it
//! was not timed, and how it compares with the fastest and the reference.

use crate::classify::OutcomeKind;
use crate::fingerprint::ClassFacts;
use crate::stats::{
    Comparison, PROCESS_BAND, Rounds, SAME_BAND, StopCriteria, StopRule, Summary, Verdict,
    try_compare_rounds_beyond,
};
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
    /// the time other processes get cannot lengthen it, but it adds up
    /// every thread.
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
    /// The round each kept sample was taken in: comparisons pair rounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<u32>,
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
        /// The outcome that excludes it (`wrong_result`, `crashed`, …;
        /// `skipped` for a variant not for this OS or CPU).
        outcome: OutcomeKind,
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
    /// What was timed and where, in words: a chart's caption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<BenchContext>,
}

/// What a bench ran on, beyond the fingerprint's hash: the kernel's
/// revision, the machine's facts and the time, as a chart's caption shows
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchContext {
    /// The kernel's hub revision (12 hex digits), when it is a snapshot
    /// in the hub cache.
    pub revision: Option<String>,
    /// The machine's class facts: GPU, driver, toolkit, torch, Python,
    /// OS and architecture.
    pub machine: ClassFacts,
    /// When the bench finished, in seconds since the Unix epoch.
    pub finished: u64,
}

impl Timed {
    /// Its samples with their rounds, as comparisons pair them.
    pub fn paired(&self) -> Rounds<'_> {
        Rounds {
            ms: &self.samples_ms,
            round: &self.rounds,
        }
    }
}

impl VariantBench {
    /// Its timing, when it was timed to the end.
    pub fn timed(&self) -> Option<&Timed> {
        match &self.status {
            BenchStatus::Timed(t) => Some(t),
            BenchStatus::Excluded { .. } => None,
        }
    }
}

impl BenchReport {
    /// The report of a bench where nothing passed, so nothing was timed:
    /// every variant with the outcome that kept it out (a "no", exit 1,
    /// not bad input).
    pub fn nothing_timed(
        target: String,
        workload: String,
        fingerprint: String,
        criteria: StopCriteria,
        variants: Vec<VariantBench>,
        context: BenchContext,
    ) -> BenchReport {
        BenchReport {
            target,
            workload,
            fingerprint,
            device: "none".to_owned(),
            flush_l2: false,
            criteria,
            variants,
            reference: None,
            context: Some(context),
        }
    }

    /// Whether any variant was timed to the end.
    pub fn any_timed(&self) -> bool {
        self.variants.iter().any(|v| v.timed().is_some())
    }

    /// Sorts timed variants fastest first by median (excluded ones last, in
    /// their original order) and fills in the comparisons: each timed
    /// variant but the fastest against the fastest, each against the
    /// reference when one was timed, and the reference against the fastest.
    /// Comparisons of excluded variants are cleared.
    pub fn rank(&mut self, seed: u64) {
        let (mut timed, excluded): (Vec<_>, Vec<_>) =
            self.variants.drain(..).partition(|v| v.timed().is_some());
        // Stable, so equal medians keep the order they were given in.
        timed.sort_by(|a, b| median(a).total_cmp(&median(b)));
        let fastest = timed.first().and_then(|v| v.timed()).cloned();
        let reference = self.reference.as_ref().and_then(|r| r.timed()).cloned();
        let vs = |v: &VariantBench, base: &Option<Timed>| {
            let (v, base) = (v.timed()?, base.as_ref()?);
            // Two processes' host clocks differ by more than their samples
            // show (`PROCESS_BAND`); device events time the kernel alone.
            let floor = match (v.timer, base.timer) {
                (Timer::DeviceEvents, Timer::DeviceEvents) => SAME_BAND,
                _ => PROCESS_BAND,
            };
            try_compare_rounds_beyond(v.paired(), base.paired(), seed, floor)
        };
        for (i, v) in timed.iter_mut().enumerate() {
            v.vs_fastest = if i == 0 { None } else { vs(v, &fastest) };
            v.vs_reference = vs(v, &reference);
        }
        if let Some(r) = self.reference.as_mut() {
            r.vs_fastest = vs(r, &fastest);
            r.vs_reference = None;
        }
        self.variants = timed;
        for mut v in excluded {
            v.vs_fastest = None;
            v.vs_reference = None;
            self.variants.push(v);
        }
    }

    /// The fastest variant and every timed variant not clearly slower than
    /// it (its verdict against the fastest is not `slower`), once ranked;
    /// more than one means the ranking at the top is not settled.
    pub fn contenders(&self) -> impl Iterator<Item = &VariantBench> {
        self.variants
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                v.timed().is_some()
                    && (*i == 0 || v.vs_fastest.is_some_and(|c| c.verdict != Verdict::Slower))
            })
            .map(|(_, v)| v)
    }
}

/// The median a variant ranks by; excluded ones never reach the sort.
fn median(v: &VariantBench) -> f64 {
    v.timed().map_or(f64::INFINITY, |t| t.summary.median)
}

#[cfg(test)]
#[path = "result_tests.rs"]
pub(crate) mod tests;
