//! `warmup`'s summary: one line per kernel, as a table or as the JSON
//! `warmup --json` prints (the schema `kernel_preflight._types.KernelSummary`
//! reads).

use crate::discover::{Named, Target};
use crate::run::{CheckReport, CheckResult, Plan, TargetId};
use serde::Serialize;
use std::time::Duration;

/// One kernel's line in the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelSummary {
    /// The target as given.
    pub target: String,
    /// What the kernel is called ([`label`]).
    pub kernel: String,
    /// Its jobs.
    pub variants: usize,
    /// Those probed now.
    pub probed: usize,
    /// Those answered from the cache.
    pub cached: usize,
    /// Those not probed (another OS or CPU).
    pub skipped: usize,
    /// Those that work here.
    pub passed: usize,
    /// The first that works here, in the hub's preference order (none for
    /// a native target, whose modules are all needed).
    pub best: Option<String>,
    /// Whether it is a native target.
    #[serde(skip)]
    pub native: bool,
}

/// One line per target of `plan`, from the rows of `report`.
pub fn summarize(plan: &Plan, report: &CheckReport) -> Vec<KernelSummary> {
    plan.targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let rows: Vec<&CheckResult> = report.rows(TargetId(i)).collect();
            let skipped = rows.iter().filter(|r| !r.outcome.kind.probed()).count();
            let cached = rows.iter().filter(|r| r.cached).count();
            let native = matches!(t.target, Target::Native(_));
            KernelSummary {
                target: t.given.clone(),
                kernel: label(t),
                variants: rows.len(),
                probed: rows.len() - skipped - cached,
                cached,
                skipped,
                passed: rows.iter().filter(|r| r.outcome.kind.passed()).count(),
                // Every module of a native target is needed: none is "best".
                best: rows
                    .iter()
                    .find(|r| !native && r.outcome.kind.passed())
                    .map(|r| r.variant.clone()),
                native,
            }
        })
        .collect()
}

/// What a target is called in the summary: the kernel's name, else the
/// name it was given; a name given as the kernel's with more after it
/// (`acme/relu (main, v2)`, a snapshot of the hub cache named by its refs)
/// is kept whole.
pub fn label(t: &Named) -> String {
    match &t.target {
        Target::Hub(d) => d.kernel.clone().map(|kernel| {
            if t.given.starts_with(&kernel) {
                t.given.clone()
            } else {
                kernel
            }
        }),
        Target::Native(_) => None,
    }
    .unwrap_or_else(|| t.given.clone())
}

/// The summary as a table, with the totals of a run that took `elapsed`.
pub fn table(summary: &[KernelSummary], elapsed: Duration) -> String {
    let mut table = super::table(&[
        "kernel",
        "variants",
        "probed",
        "cached",
        "skipped",
        "work here",
        "best",
    ]);
    for s in summary {
        table.add_row(vec![
            s.kernel.clone(),
            s.variants.to_string(),
            s.probed.to_string(),
            s.cached.to_string(),
            s.skipped.to_string(),
            s.passed.to_string(),
            match (&s.best, s.native) {
                (Some(best), _) => best.clone(),
                (None, true) => "- (native modules)".into(),
                (None, false) => "none".into(),
            },
        ]);
    }
    let probed: usize = summary.iter().map(|s| s.probed).sum();
    format!(
        "{table}\n{}, {} probed in {:.1} s, {} answered from the cache",
        super::count(summary.len(), "kernel"),
        super::count(probed, "variant"),
        elapsed.as_secs_f64(),
        summary.iter().map(|s| s.cached).sum::<usize>()
    )
}
