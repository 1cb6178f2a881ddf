//! Choosing the variant to load: the best one that works here.

use super::CheckResult;
use crate::classify::Outcome;
use serde::Serialize;

/// How to rank the variants that work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// The hub loader's preference order.
    Preference,
    /// The shortest measured smoke time; variants without one follow, in
    /// preference order.
    Fastest,
}

/// The variant to load, among `results` in the hub's preference order.
pub fn choose(results: &[CheckResult], rank: Rank) -> Option<&CheckResult> {
    let passing = results.iter().filter(|r| r.outcome.kind.passed());
    match rank {
        Rank::Preference => passing.into_iter().next(),
        Rank::Fastest => passing
            .enumerate()
            .min_by(|(i, a), (j, b)| {
                let time = |r: &CheckResult| r.timings.smoke_ms.unwrap_or(f64::INFINITY);
                time(a).total_cmp(&time(b)).then(i.cmp(j))
            })
            .map(|(_, r)| r),
    }
}

/// One variant as `select --json` shows it.
#[derive(Debug, Serialize)]
pub struct Alternative<'a> {
    /// The variant's name.
    pub variant: &'a str,
    /// Its directory.
    pub path: &'a str,
    /// What probing it showed.
    pub outcome: &'a Outcome,
    /// Whether that came from the cache.
    pub cached: bool,
}

/// The document `select --json` prints.
#[derive(Debug, Serialize)]
pub struct Selection<'a> {
    /// The chosen variant; `null` when none works.
    pub variant: Option<&'a str>,
    /// Its directory, to hand to the hub's `get_local_kernel`.
    pub path: Option<&'a str>,
    /// Its outcome.
    pub outcome: Option<&'a Outcome>,
    /// Whether every outcome came from the cache (nothing was probed).
    pub cached: bool,
    /// Every other variant, in preference order.
    pub alternatives: Vec<Alternative<'a>>,
}

impl<'a> Selection<'a> {
    /// The selection among `results`.
    pub fn new(results: &'a [CheckResult], rank: Rank) -> Selection<'a> {
        let chosen = choose(results, rank);
        let probed: Vec<&CheckResult> = results
            .iter()
            .filter(|r| r.outcome.kind != crate::classify::OutcomeKind::Skipped)
            .collect();
        Selection {
            variant: chosen.map(|c| c.variant.as_str()),
            path: chosen.map(|c| c.path.as_str()),
            outcome: chosen.map(|c| &c.outcome),
            cached: probed.iter().all(|r| r.cached),
            alternatives: results
                .iter()
                .filter(|r| chosen.is_none_or(|c| !std::ptr::eq(*r, c)))
                .map(|r| Alternative {
                    variant: &r.variant,
                    path: &r.path,
                    outcome: &r.outcome,
                    cached: r.cached,
                })
                .collect(),
        }
    }
}
