//! Order statistics and moments of one variant's samples.

use serde::{Deserialize, Serialize};

/// What one variant's timing samples say, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples summarised.
    pub samples: usize,
    /// Median sample.
    pub median: f64,
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// Interquartile range, `q3 - q1`.
    pub iqr: f64,
    /// Fastest sample.
    pub min: f64,
    /// Slowest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor `n - 1`; 0 for one sample).
    pub stdev: f64,
    /// `stdev / mean`, a fraction (0 when the mean is 0).
    pub rel_noise: f64,
}

impl Summary {
    /// Summarises samples in milliseconds; `None` when there are none or one
    /// is not a time (not finite, or negative).
    ///
    /// Quartiles and median interpolate linearly between order statistics
    /// (Hyndman and Fan's type 7, numpy's and R's default), so the median of
    /// an even count is the mean of the middle two.
    pub fn of(samples_ms: &[f64]) -> Option<Summary> {
        if samples_ms.is_empty() || !samples_ms.iter().all(|x| is_time(*x)) {
            return None;
        }
        let mut sorted = samples_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stdev = if n > 1 {
            let ss: f64 = sorted.iter().map(|x| (x - mean) * (x - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        if !(mean.is_finite() && stdev.is_finite()) {
            // Sums of values near f64::MAX overflow; no time is that long.
            return None;
        }
        let (q1, q3) = (quantile(&sorted, 0.25), quantile(&sorted, 0.75));
        Some(Summary {
            samples: n,
            median: quantile(&sorted, 0.5),
            q1,
            q3,
            iqr: q3 - q1,
            min: sorted[0],
            max: sorted[n - 1],
            mean,
            stdev,
            rel_noise: if mean > 0.0 { stdev / mean } else { 0.0 },
        })
    }
}

/// Whether a value can be a duration: finite and not negative.
pub(crate) fn is_time(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

/// The `p` quantile (`0 ≤ p ≤ 1`) of sorted, non-empty values, by linear
/// interpolation between the order statistics around `(n - 1) p`.
pub(crate) fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    match sorted.get(lo + 1) {
        Some(hi) => sorted[lo] + (h - lo as f64) * (hi - sorted[lo]),
        None => sorted[lo],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn odd_count_hand_computed() {
        // sorted 1 2 3 4 10: h = 4p → q1 at 1 (=2), median at 2 (=3), q3 at 3 (=4)
        let s = Summary::of(&[10.0, 2.0, 4.0, 1.0, 3.0]).unwrap();
        assert_eq!(s.samples, 5);
        assert!(close(s.median, 3.0));
        assert!(close(s.q1, 2.0) && close(s.q3, 4.0) && close(s.iqr, 2.0));
        assert!(close(s.min, 1.0) && close(s.max, 10.0));
        assert!(close(s.mean, 4.0));
        // squares of deviations 9 4 1 0 36 = 50, / 4
        assert!(close(s.stdev, 12.5f64.sqrt()));
        assert!(close(s.rel_noise, 12.5f64.sqrt() / 4.0));
    }

    #[test]
    fn even_count_interpolates() {
        // sorted 1 2 3 4: h = 3p → q1 at 0.75 (1.75), median at 1.5 (2.5), q3 at 2.25 (3.25)
        let s = Summary::of(&[4.0, 3.0, 2.0, 1.0]).unwrap();
        assert!(close(s.q1, 1.75));
        assert!(close(s.median, 2.5));
        assert!(close(s.q3, 3.25));
        assert!(close(s.iqr, 1.5));
        assert!(close(s.mean, 2.5));
    }

    #[test]
    fn one_sample_has_no_spread() {
        let s = Summary::of(&[0.7]).unwrap();
        assert_eq!((s.median, s.q1, s.q3, s.iqr), (0.7, 0.7, 0.7, 0.0));
        assert_eq!((s.stdev, s.rel_noise), (0.0, 0.0));
    }

    #[test]
    fn all_zero_samples_have_zero_noise() {
        let s = Summary::of(&[0.0, 0.0, 0.0]).unwrap();
        assert_eq!(s.rel_noise, 0.0);
    }

    #[test]
    fn what_is_not_a_time_gives_none() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[f64::INFINITY]), None);
        assert_eq!(Summary::of(&[1.0, -0.5]), None);
        assert_eq!(Summary::of(&[f64::MAX, f64::MAX]), None);
    }

    #[test]
    fn quantile_ends() {
        let v = [1.0, 5.0, 9.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 9.0);
        assert!(close(quantile(&v, 0.1), 1.8));
    }

    #[test]
    fn json_round_trip() {
        let s = Summary::of(&[1.0, 2.0, 3.5]).unwrap();
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(s, back);
    }
}
