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
    /// Sample standard deviation.
    pub stdev: f64,
    /// `stdev / mean`, a fraction.
    pub rel_noise: f64,
}

impl Summary {
    /// Summarises samples in milliseconds; `None` when there are none or one
    /// is not finite.
    pub fn of(samples_ms: &[f64]) -> Option<Summary> {
        let _ = samples_ms;
        todo!()
    }
}
