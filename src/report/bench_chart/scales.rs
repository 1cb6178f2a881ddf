//! The chart's axes: a scale from times or speeds to px, fitted to the
//! rows, the ticks that fit on it, and the samples a row draws.

use super::{DIST, FOREST, Row, SMALL};
use crate::report::draw::width;

/// The most dots a row draws: a bench of 30 000 samples would otherwise
/// weigh megabytes; spaced by rank, they keep the distribution's shape.
pub(super) const MAX_DOTS: usize = 240;

/// A scale from values to px: linear, or logarithmic for ratios.
#[derive(Clone, Copy)]
pub(super) struct Scale {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) log: bool,
}

impl Scale {
    /// Where `v` lies, clamped to the scale's ends.
    pub(super) fn at(&self, v: f64) -> f64 {
        let f = |x: f64| if self.log { x.ln() } else { x };
        let t = (f(v) - f(self.lo)) / (f(self.hi) - f(self.lo));
        self.from + t.clamp(0.0, 1.0) * (self.to - self.from)
    }
}

/// The ticks whose labels stay within `panel`, give or take `slack` px:
/// the panels' labels never run into each other.
pub(super) fn within(
    ticks: Vec<(f64, String)>,
    panel: (f64, f64),
    slack: f64,
) -> Vec<(f64, String)> {
    ticks
        .into_iter()
        .filter(|(x, label)| {
            let half = width(label, SMALL) / 2.0;
            x - half >= panel.0 - slack && x + half <= panel.1 + slack
        })
        .collect()
}

/// The time axis: from the fastest sample to the slowest row's third
/// quartile plus three IQRs (a preempted sample milliseconds long would
/// squash every box into a line), at most its slowest sample.
pub(super) fn time_scale(rows: &[Row]) -> Scale {
    let lo = rows
        .iter()
        .map(|r| r.timed.summary.min)
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|r| {
            let s = &r.timed.summary;
            s.max.min(s.q3 + 3.0 * s.iqr).max(s.q3)
        })
        .fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.04).max(hi * 1e-3).max(1e-9);
    Scale {
        lo: (lo - pad).max(0.0),
        hi: hi + pad,
        from: DIST.0 + 4.0,
        to: DIST.1 - 4.0,
        log: false,
    }
}

/// The speed axis, logarithmic around 1×: every interval, and 1.
pub(super) fn speed_scale(rows: &[Row]) -> Scale {
    let (mut lo, mut hi) = (1.0f64, 1.0f64);
    for c in rows.iter().filter_map(Row::vs) {
        lo = lo.min(c.low.max(1e-3));
        hi = hi.max(c.high.min(1e3));
    }
    Scale {
        lo: lo.min(1.0 / 1.05) / 1.1,
        hi: hi.max(1.05) * 1.1,
        from: FOREST.0 + 6.0,
        to: FOREST.1 - 6.0,
        log: true,
    }
}

/// At most [`MAX_DOTS`] of `samples`, sorted, spaced evenly by rank.
pub(super) fn spread(samples: &[f64]) -> Vec<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.len() <= MAX_DOTS {
        return sorted;
    }
    let last = (sorted.len() - 1) as f64;
    (0..MAX_DOTS)
        .map(|i| sorted[(i as f64 * last / (MAX_DOTS - 1) as f64).round() as usize])
        .collect()
}
