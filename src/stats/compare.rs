//! Bootstrap comparison of two variants' medians.

use serde::{Deserialize, Serialize};

/// What a comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The candidate is faster: the whole interval lies above the same band.
    Faster,
    /// The candidate is slower: the whole interval lies below the same band.
    Slower,
    /// The whole interval lies inside the same band.
    Same,
    /// The interval straddles an edge of the same band.
    Ambiguous,
}

/// A candidate's speed against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `median(baseline) / median(candidate)`: above 1 the candidate is faster.
    pub speedup: f64,
    /// Lower end of the bootstrap 95 % interval of the speedup.
    pub low: f64,
    /// Upper end of the bootstrap 95 % interval of the speedup.
    pub high: f64,
    /// The verdict drawn from the interval.
    pub verdict: Verdict,
}

/// Compares two variants' samples by a bootstrap of the ratio of medians,
/// deterministic for a seed.
pub fn compare(candidate_ms: &[f64], baseline_ms: &[f64], seed: u64) -> Comparison {
    let _ = (candidate_ms, baseline_ms, seed);
    todo!()
}
