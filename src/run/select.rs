//! Choosing the variant to load: the best one that works here.

use super::CheckResult;
use crate::classify::{Depth, Outcome};
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

/// Which variants may be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Names {
    /// Only variants the hub accepts by name here, as `get_kernel` would
    /// load (the default): a name is a declaration that evidence reports on
    /// but does not silently overrule.
    #[default]
    Decide,
    /// Evidence may overrule a name: a variant the hub rejects by name may be
    /// chosen when no accepted one works, but only when its smoke workload
    /// ran here (depth `smoke` or deeper); an import alone is not enough
    /// evidence to load what the hub would refuse.
    Overruled,
}

/// Whether `result` may be chosen under `names`.
fn eligible(result: &CheckResult, names: Names) -> bool {
    result.outcome.kind.passed()
        && (result.declared.accepted
            || (names == Names::Overruled
                && result.outcome.depth.is_some_and(|d| d >= Depth::Smoke)))
}

/// The variant to load, among `results` in the hub's preference order:
/// a name-accepted one that works; with [`Names::Overruled`], a
/// name-rejected one with smoke evidence only when no accepted one works.
pub fn choose(results: &[CheckResult], rank: Rank, names: Names) -> Option<&CheckResult> {
    let accepted = pick(results.iter().filter(|r| eligible(r, Names::Decide)), rank);
    match names {
        Names::Decide => accepted,
        Names::Overruled => {
            accepted.or_else(|| pick(results.iter().filter(|r| eligible(r, names)), rank))
        }
    }
}

fn pick<'a>(passing: impl Iterator<Item = &'a CheckResult>, rank: Rank) -> Option<&'a CheckResult> {
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
    /// Whether the hub accepts it by name here.
    pub accepted_by_name: bool,
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
    /// Whether the chosen variant is one the hub rejects by name, chosen
    /// because evidence was allowed to overrule names (`--overrule-names`).
    pub overrules_name: bool,
    /// Whether every outcome came from the cache (nothing was probed).
    pub cached: bool,
    /// Every other variant, in preference order.
    pub alternatives: Vec<Alternative<'a>>,
}

impl<'a> Selection<'a> {
    /// The selection among `results`.
    pub fn new(results: &'a [CheckResult], rank: Rank, names: Names) -> Selection<'a> {
        let chosen = choose(results, rank, names);
        let probed: Vec<&CheckResult> = results
            .iter()
            .filter(|r| r.outcome.kind != crate::classify::OutcomeKind::Skipped)
            .collect();
        Selection {
            variant: chosen.map(|c| c.variant.as_str()),
            path: chosen.map(|c| c.path.as_str()),
            outcome: chosen.map(|c| &c.outcome),
            overrules_name: chosen.is_some_and(|c| !c.declared.accepted),
            cached: probed.iter().all(|r| r.cached),
            alternatives: results
                .iter()
                .filter(|r| chosen.is_none_or(|c| !std::ptr::eq(*r, c)))
                .map(|r| Alternative {
                    variant: &r.variant,
                    path: &r.path,
                    outcome: &r.outcome,
                    cached: r.cached,
                    accepted_by_name: r.declared.accepted,
                })
                .collect(),
        }
    }
}
