//! When a variant has been timed enough.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The bounds of the stopping rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopCriteria {
    /// No stop before this many samples.
    pub min_samples: usize,
    /// No stop before this much timed wall time.
    #[serde(with = "secs")]
    pub min_time: Duration,
    /// Stop once the relative noise is below this fraction.
    pub max_noise: f64,
    /// Stop after this much timed wall time whatever the noise.
    #[serde(with = "secs")]
    pub timeout: Duration,
}

impl Default for StopCriteria {
    fn default() -> Self {
        StopCriteria {
            min_samples: 10,
            min_time: Duration::from_millis(500),
            max_noise: 0.005,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Which rule ended a variant's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopRule {
    /// The relative noise fell below the limit.
    Noise,
    /// The relative noise stopped improving.
    Plateau,
    /// The time limit was reached.
    Timeout,
    /// The hard cap on samples was reached.
    MaxSamples,
}

/// Decides, sample by sample, when to stop timing one variant.
#[derive(Debug, Clone)]
pub struct Stopper {
    criteria: StopCriteria,
}

impl Stopper {
    /// A stopper for these criteria.
    pub fn new(criteria: StopCriteria) -> Self {
        Stopper { criteria }
    }

    /// Records one sample; `Some(rule)` when timing should stop.
    pub fn push(&mut self, ms: f64, elapsed: Duration) -> Option<StopRule> {
        let _ = (ms, elapsed);
        todo!()
    }

    /// Whether the time limit has passed, for a parent waiting on a sample.
    pub fn timed_out(&self, elapsed: Duration) -> bool {
        elapsed >= self.criteria.timeout
    }
}

/// Durations as seconds (f64) in JSON.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Duration::try_from_secs_f64(f64::deserialize(d)?).map_err(D::Error::custom)
    }
}
