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

/// The hard cap on samples per variant, so a stream that never settles
/// cannot exhaust memory before its timeout.
pub const MAX_SAMPLES: usize = 100_000;

/// The plateau rule's window: the last quarter of the samples, and at least
/// this many.
const PLATEAU_MIN_WINDOW: usize = 8;

/// The plateau rule's threshold: less than this fractional fall in noise over
/// the window means the noise has stopped improving.
const PLATEAU_GAIN: f64 = 0.05;

/// Decides, sample by sample, when to stop timing one variant.
///
/// The noise is the relative standard deviation of all samples so far
/// (`stdev / mean`, as in [`super::Summary`]). Nothing stops a variant before
/// it has `min_samples` samples (and at least 2) and `min_time` of timing;
/// after that, in this order:
/// - [`StopRule::Noise`]: the noise is below `max_noise`;
/// - [`StopRule::Plateau`]: over the last quarter of the samples (at least 8,
///   reaching back no earlier than the `min_samples`-th), the noise fell by
///   less than 5 %. A stationary stream's noise converges to its true spread,
///   so more samples would not bring it under the limit; a stream whose early
///   outliers are being diluted keeps falling by about 13 % per quarter and
///   goes on.
///
/// The limits hold at any count: [`StopRule::Timeout`] once `elapsed` reaches
/// `timeout` (even before `min_samples`: the timeout is the user's hard
/// bound, and the rule is recorded), then [`StopRule::MaxSamples`] at
/// [`MAX_SAMPLES`]. A sample that is not a time (NaN, infinite, negative) is
/// not counted; the limits are still checked.
#[derive(Debug, Clone)]
pub struct Stopper {
    criteria: StopCriteria,
    /// Welford's running mean and sum of squared deviations.
    mean: f64,
    m2: f64,
    /// The noise after each counted sample; `noise[i]` is after `i + 1`.
    noise: Vec<f64>,
}

impl Stopper {
    /// A stopper for these criteria.
    pub fn new(criteria: StopCriteria) -> Self {
        Stopper {
            criteria,
            mean: 0.0,
            m2: 0.0,
            noise: Vec::new(),
        }
    }

    /// Records one sample taken after `elapsed` of this variant's timing;
    /// `Some(rule)` when timing should stop.
    pub fn push(&mut self, ms: f64, elapsed: Duration) -> Option<StopRule> {
        if super::summary::is_time(ms) {
            let n = self.noise.len() as f64 + 1.0;
            let delta = ms - self.mean;
            self.mean += delta / n;
            self.m2 += delta * (ms - self.mean);
            let stdev = if n > 1.0 {
                (self.m2 / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            let noise = if self.mean > 0.0 {
                stdev / self.mean
            } else {
                0.0
            };
            self.noise.push(noise);
        }
        let n = self.noise.len();
        let min_samples = self.criteria.min_samples.max(2);
        if n >= min_samples && elapsed >= self.criteria.min_time {
            if self.noise[n - 1] < self.criteria.max_noise {
                return Some(StopRule::Noise);
            }
            let window = (n / 4).max(PLATEAU_MIN_WINDOW);
            if n >= min_samples + window
                && self.noise[n - 1] > (1.0 - PLATEAU_GAIN) * self.noise[n - 1 - window]
            {
                return Some(StopRule::Plateau);
            }
        }
        if self.timed_out(elapsed) {
            return Some(StopRule::Timeout);
        }
        (n >= MAX_SAMPLES).then_some(StopRule::MaxSamples)
    }

    /// Whether the time limit has passed, for a parent waiting on a sample.
    pub fn timed_out(&self, elapsed: Duration) -> bool {
        elapsed >= self.criteria.timeout
    }

    /// How many samples have been counted.
    pub fn samples(&self) -> usize {
        self.noise.len()
    }

    /// The noise so far (a fraction), once there are two samples; for a
    /// progress display.
    pub fn noise(&self) -> Option<f64> {
        (self.noise.len() >= 2).then(|| self.noise[self.noise.len() - 1])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SplitMix64;

    const DT: Duration = Duration::from_millis(1);

    /// Feeds a stream, one sample per `dt`, until a rule fires; the rule and
    /// the count. Checks on the way that neither noise nor plateau fires
    /// before the gates.
    fn run(
        criteria: StopCriteria,
        dt: Duration,
        mut next: impl FnMut(usize) -> f64,
    ) -> (StopRule, usize) {
        let mut stopper = Stopper::new(criteria);
        for i in 1..=MAX_SAMPLES + 1 {
            let elapsed = dt * i as u32;
            if let Some(rule) = stopper.push(next(i), elapsed) {
                if matches!(rule, StopRule::Noise | StopRule::Plateau) {
                    assert!(i >= criteria.min_samples, "{rule:?} at {i} samples");
                    assert!(elapsed >= criteria.min_time, "{rule:?} at {elapsed:?}");
                }
                return (rule, i);
            }
        }
        panic!("no rule fired");
    }

    fn noisy(seed: u64, mean: f64, rel: f64) -> impl FnMut(usize) -> f64 {
        let mut rng = SplitMix64::new(seed);
        move |_| mean * (1.0 + rel * rng.normal())
    }

    #[test]
    fn quiet_stream_stops_on_noise_at_the_gate() {
        // 0.5 s at 1 ms a sample: 500 samples, more than min_samples.
        let (rule, n) = run(StopCriteria::default(), DT, noisy(1, 2.0, 0.001));
        assert_eq!((rule, n), (StopRule::Noise, 500));
        // 100 ms a sample: min_samples (10) comes after min_time.
        let slow = Duration::from_millis(100);
        let (rule, n) = run(StopCriteria::default(), slow, noisy(2, 2.0, 0.001));
        assert_eq!((rule, n), (StopRule::Noise, 10));
    }

    #[test]
    fn constant_stream_waits_for_min_time() {
        let criteria = StopCriteria {
            min_time: Duration::from_secs(2),
            ..StopCriteria::default()
        };
        assert_eq!(run(criteria, DT, |_| 1.0), (StopRule::Noise, 2000));
    }

    #[test]
    fn stationary_noisy_stream_stops_on_plateau() {
        // 2 % noise never goes under 0.5 %, whatever the count.
        for seed in 0..50 {
            let slow = Duration::from_millis(100);
            let (rule, n) = run(StopCriteria::default(), slow, noisy(seed, 1.0, 0.02));
            assert_eq!(rule, StopRule::Plateau, "seed {seed} after {n}");
            let (rule, n) = run(StopCriteria::default(), DT, noisy(seed, 1.0, 0.02));
            assert_eq!((rule, n), (StopRule::Plateau, 500), "seed {seed}");
        }
    }

    /// One cold sample 1.5× the others: the noise is about 0.5 / √n, so it
    /// keeps falling by √(3/4) a quarter and never plateaus.
    fn diluted(i: usize) -> f64 {
        if i == 1 { 1.5 } else { 1.0 }
    }

    #[test]
    fn diluting_outlier_is_no_plateau() {
        // 0.5 / √n < 0.005 from n = 10⁴ on, well past the 500-sample gate.
        let (rule, n) = run(StopCriteria::default(), DT, diluted);
        assert_eq!(rule, StopRule::Noise);
        assert!((9_900..=10_000).contains(&n), "{n}");
    }

    #[test]
    fn improving_stream_ends_at_the_timeout() {
        let criteria = StopCriteria {
            max_noise: 0.0,
            timeout: Duration::from_secs(3),
            ..StopCriteria::default()
        };
        assert_eq!(run(criteria, DT, diluted), (StopRule::Timeout, 3000));
    }

    #[test]
    fn timeout_is_hard_even_before_min_samples() {
        let criteria = StopCriteria {
            timeout: Duration::from_secs(1),
            ..StopCriteria::default()
        };
        let slow = Duration::from_millis(400);
        assert_eq!(run(criteria, slow, |_| 1.0), (StopRule::Timeout, 3));
        assert!(Stopper::new(criteria).timed_out(Duration::from_secs(1)));
        assert!(!Stopper::new(criteria).timed_out(Duration::from_millis(999)));
    }

    #[test]
    fn endless_stream_ends_at_the_cap() {
        let criteria = StopCriteria {
            max_noise: 0.0,
            timeout: Duration::MAX,
            ..StopCriteria::default()
        };
        let tiny = Duration::from_micros(1);
        let (rule, n) = run(criteria, tiny, diluted);
        assert_eq!((rule, n), (StopRule::MaxSamples, MAX_SAMPLES));
    }

    #[test]
    fn what_is_not_a_time_is_not_counted() {
        let mut stopper = Stopper::new(StopCriteria::default());
        let late = Duration::from_secs(1);
        for _ in 0..20 {
            assert_eq!(stopper.push(f64::NAN, late), None);
            assert_eq!(stopper.push(-1.0, late), None);
        }
        assert_eq!((stopper.samples(), stopper.noise()), (0, None));
        for _ in 0..9 {
            assert_eq!(stopper.push(1.0, late), None);
        }
        assert_eq!(stopper.push(1.0, late), Some(StopRule::Noise));
        assert_eq!(stopper.noise(), Some(0.0));
    }

    #[test]
    fn min_samples_of_zero_still_needs_two() {
        let criteria = StopCriteria {
            min_samples: 0,
            min_time: Duration::ZERO,
            ..StopCriteria::default()
        };
        let mut stopper = Stopper::new(criteria);
        assert_eq!(stopper.push(1.0, DT), None);
        assert_eq!(stopper.push(1.0, DT), Some(StopRule::Noise));
    }

    #[test]
    fn criteria_json_in_seconds() {
        let json = serde_json::to_value(StopCriteria::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"min_samples": 10, "min_time": 0.5, "max_noise": 0.005, "timeout": 30.0})
        );
        let back: StopCriteria = serde_json::from_value(json).unwrap();
        assert_eq!(back, StopCriteria::default());
        let bad = serde_json::json!({"min_samples": 10, "min_time": -1.0, "max_noise": 0.005, "timeout": 30.0});
        assert!(serde_json::from_value::<StopCriteria>(bad).is_err());
        assert_eq!(
            serde_json::to_string(&StopRule::MaxSamples).unwrap(),
            "\"max_samples\""
        );
    }
}
