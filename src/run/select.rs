//! Choosing the variant to load: the best one that works here.

use super::cached::{BenchRecord, DEFAULT_WORKLOAD};
use super::event::{Listener, Stream};
use super::{CheckOptions, CheckResult, Session, SessionError};
use crate::classify::{Depth, Outcome};
use crate::discover::{Located, Named, Target, TargetKind};
use crate::sandbox::Cancel;
use crate::stats::{Comparison, Rounds, Verdict, compare_rounds};
use serde::Serialize;

/// How to rank the variants that work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rank {
    /// The hub loader's preference order.
    #[default]
    Preference,
    /// The shortest bench median of this machine (`preflight bench`);
    /// where no variant has one, the shortest smoke call, which is one cold
    /// call and not a speed. Variants without either follow, in preference
    /// order.
    Fastest,
}

/// What `--fastest` ranked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Bench medians kept for this machine.
    Bench,
    /// No bench result is kept for this machine: the smoke's one cold
    /// call decided, which says little about speed.
    NoBenchData,
}

/// How the fastest variant was found, as `select --fastest --json` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Speed {
    /// What the ranking is based on.
    pub basis: Basis,
    /// The bench workload whose kept results were read (`preflight bench
    /// --workload`; `default` without one).
    pub workload: String,
    /// The chosen variant's bench median (ms), when it has one.
    pub median_ms: Option<f64>,
    /// The next variant by bench median, when there is one.
    pub runner_up: Option<String>,
    /// The chosen variant against the runner-up (speedup > 1: chosen is faster).
    pub vs_runner_up: Option<Comparison>,
    /// Whether the bench cannot tell the chosen variant from the runner-up
    /// (their verdict is `same` or `ambiguous`): either may be the faster.
    pub ambiguous: bool,
}

/// The seed of the comparison between the top two: fixed, so that one
/// cache gives one answer.
const SEED: u64 = 0x5e1ec7;

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

/// Whether a variant that ended with `outcome`, accepted by its name or
/// not, may be chosen under `names`: the one rule of the cold choice
/// ([`choose`]) and of the warm path ([`super::cached::warm::answer`]).
pub(super) fn may_choose(outcome: &Outcome, accepted: bool, names: Names) -> bool {
    outcome.kind.passed()
        && (accepted
            || (names == Names::Overruled && outcome.depth.is_some_and(|d| d >= Depth::Smoke)))
}

/// Whether `result` may be chosen under `names`.
fn eligible(result: &CheckResult, names: Names) -> bool {
    may_choose(&result.outcome, result.declared.accepted, names)
}

/// The variant to load, among `results` in the hub's preference order:
/// a name-accepted one that works; with [`Names::Overruled`], a
/// name-rejected one with smoke evidence only when no accepted one works.
/// `bench` holds each job's kept bench result, by job (see
/// [`super::Plan::bench_results`]); only [`Rank::Fastest`] reads it.
pub fn choose<'a>(
    results: &'a [CheckResult],
    rank: Rank,
    names: Names,
    bench: &[Option<BenchRecord>],
) -> Option<&'a CheckResult> {
    let accepted = pick(results, |r| eligible(r, Names::Decide), rank, bench);
    match names {
        Names::Decide => accepted,
        Names::Overruled => accepted.or_else(|| pick(results, |r| eligible(r, names), rank, bench)),
    }
}

fn pick<'a>(
    results: &'a [CheckResult],
    eligible: impl Fn(&CheckResult) -> bool,
    rank: Rank,
    bench: &[Option<BenchRecord>],
) -> Option<&'a CheckResult> {
    let mut passing = results.iter().filter(|r| eligible(r));
    match rank {
        Rank::Preference => passing.next(),
        Rank::Fastest => {
            let passing: Vec<&CheckResult> = passing.collect();
            let benched = passing.iter().any(|r| median(bench, r).is_some());
            // Without bench data the smoke call decides: one cold call, but
            // the only time there is.
            let time = |r: &CheckResult| match benched {
                true => median(bench, r),
                false => r.timings.smoke_ms,
            };
            passing
                .into_iter()
                .enumerate()
                .min_by(|(i, a), (j, b)| {
                    let t = |r| time(r).unwrap_or(f64::INFINITY);
                    t(a).total_cmp(&t(b)).then(i.cmp(j))
                })
                .map(|(_, r)| r)
        }
    }
}

fn record<'b>(bench: &'b [Option<BenchRecord>], r: &CheckResult) -> Option<&'b BenchRecord> {
    bench.get(r.job.0).and_then(Option::as_ref)
}

fn median(bench: &[Option<BenchRecord>], r: &CheckResult) -> Option<f64> {
    record(bench, r).map(|b| b.summary.median)
}

/// How `chosen` was found fastest among `results`: by bench medians (with
/// the verdict against the runner-up), or without bench data.
fn speed(results: &[CheckResult], chosen: &CheckResult, names: Names, bench: &Bench) -> Speed {
    let workload = bench.workload.to_owned();
    let bench = &bench.records[..];
    let Some(mine) = record(bench, chosen) else {
        return Speed {
            basis: Basis::NoBenchData,
            workload,
            median_ms: None,
            runner_up: None,
            vs_runner_up: None,
            ambiguous: false,
        };
    };
    let runner_up = results
        .iter()
        .filter(|r| eligible(r, names) && !std::ptr::eq(*r, chosen))
        .filter_map(|r| record(bench, r).map(|b| (r, b)))
        .min_by(|(_, a), (_, b)| a.summary.median.total_cmp(&b.summary.median));
    let vs = runner_up.map(|(_, b)| compare_rounds(paired(mine), paired(b), SEED));
    Speed {
        basis: Basis::Bench,
        workload,
        median_ms: Some(mine.summary.median),
        runner_up: runner_up.map(|(r, _)| r.variant.clone()),
        vs_runner_up: vs,
        ambiguous: vs.is_some_and(|c| c.verdict != Verdict::Faster),
    }
}

/// A kept result's samples with their rounds, as comparisons pair them.
fn paired(record: &BenchRecord) -> Rounds<'_> {
    Rounds {
        ms: &record.samples_ms,
        round: &record.rounds,
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
    /// With `--fastest`: what the ranking is based on, and whether it is
    /// ambiguous.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<Speed>,
    /// Every other variant, in preference order.
    pub alternatives: Vec<Alternative<'a>>,
}

/// The bench results [`Rank::Fastest`] ranks by: one workload's kept
/// results, by job (see [`super::Plan::bench_results`]).
#[derive(Debug, Clone, Default)]
pub struct Bench {
    /// The workload they are of, as `bench --workload` named it.
    pub workload: String,
    /// Each job's kept result, `None` where it has none.
    pub records: Vec<Option<BenchRecord>>,
}

impl<'a> Selection<'a> {
    /// The selection among `results`; `bench.records` as for [`choose`].
    pub fn new(
        results: &'a [CheckResult],
        rank: Rank,
        names: Names,
        bench: &Bench,
    ) -> Selection<'a> {
        let chosen = choose(results, rank, names, &bench.records);
        let probed: Vec<&CheckResult> =
            results.iter().filter(|r| r.outcome.kind.probed()).collect();
        Selection {
            variant: chosen.map(|c| c.variant.as_str()),
            path: chosen.map(|c| c.path.as_str()),
            outcome: chosen.map(|c| &c.outcome),
            overrules_name: chosen.is_some_and(|c| !c.declared.accepted),
            cached: probed.iter().all(|r| r.cached),
            speed: match (rank, chosen) {
                (Rank::Fastest, Some(c)) => Some(speed(results, c, names, bench)),
                _ => None,
            },
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

/// How `select` answers, validated by its caller.
#[derive(Debug, Clone, Default)]
pub struct SelectOptions {
    /// How to rank the variants that work.
    pub rank: Rank,
    /// Which variants may be chosen.
    pub names: Names,
    /// With [`Rank::Fastest`]: rank by the bench results kept for this
    /// workload (`None`: those of a bench run without `--workload`).
    pub workload: Option<String>,
    /// How much of the answer the caller needs.
    pub wanted: Wanted,
}

/// How much of `select`'s answer the caller needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Wanted {
    /// The chosen variant's path: the target's warm record may answer.
    #[default]
    Path,
    /// The whole [`Selection`] (every alternative and its outcome): a run
    /// answers, from the cache where it can.
    Selection,
}

/// What [`Session::select`] answered.
#[derive(Debug)]
pub enum Selected {
    /// The target's warm record: the variant a run would choose.
    Warm {
        /// The chosen variant's directory.
        path: std::path::PathBuf,
    },
    /// A run of the target's jobs (from the cache where it could).
    Ran(Box<Ran>),
}

/// A `select` answered by a run.
#[derive(Debug)]
pub struct Ran {
    /// The plan of the target.
    pub plan: super::Plan,
    /// Every job's outcome.
    pub report: super::CheckReport,
    rank: Rank,
    names: Names,
    bench: Bench,
}

impl Ran {
    /// The selection among the run's results.
    pub fn selection(&self) -> Selection<'_> {
        Selection::new(&self.report.results, self.rank, self.names, &self.bench)
    }
}

impl Selected {
    /// Whether a variant was chosen.
    pub fn found(&self) -> bool {
        match self {
            Selected::Warm { .. } => true,
            Selected::Ran(ran) => ran.selection().path.is_some(),
        }
    }
}

/// `select` as the library's front door answers it.
impl Session {
    /// `select`: the best variant of the hub kernel `located` (named
    /// `given`) that works here. The plain question (the hub's
    /// preference, names decide, a path wanted) is answered by the
    /// target's warm record when it holds; otherwise its variants are
    /// checked and chosen among, and the warm record written for the next
    /// time. A record that cannot be read or written is a warning.
    pub fn select(
        &self,
        given: String,
        located: Located,
        options: &SelectOptions,
        cancel: &Cancel,
        listener: &dyn Listener,
    ) -> Result<Selected, SessionError> {
        let stream = Stream::new(listener);
        let warn = |message: &str| stream.warn(message);
        // A single variant has its directory's folder as its root, which a
        // record of the whole folder is keyed by: it is planned as usual.
        let warm = options.wanted == Wanted::Path
            && options.rank == Rank::Preference
            && options.names == Names::Decide
            && located.kind != TargetKind::Variant;
        let mut before = None;
        if warm {
            match self.warm_select(&located.root) {
                Ok(Some(answer)) => {
                    for warning in &answer.warnings {
                        warn(warning);
                    }
                    return Ok(Selected::Warm { path: answer.path });
                }
                Ok(None) => {}
                Err(why) => warn(&why),
            }
            before = Some(super::cached::warm::Before::take(&located.root));
        }
        let named = Named {
            given,
            target: Target::Hub(located.list()?),
        };
        let (plan, report, _) =
            self.answer(vec![named], &CheckOptions::default(), cancel, &stream)?;
        if let Some(before) = &before
            && let Err(why) = super::cached::warm::remember(
                &plan,
                &report,
                &self.plan_options(false, None),
                before,
            )
        {
            warn(&why);
        }
        let bench = match options.rank {
            Rank::Fastest => {
                let workload = options.workload.as_deref().unwrap_or(DEFAULT_WORKLOAD);
                Bench {
                    workload: workload.to_owned(),
                    records: plan.bench_results(workload),
                }
            }
            Rank::Preference => Bench::default(),
        };
        Ok(Selected::Ran(Box::new(Ran {
            plan,
            report,
            rank: options.rank,
            names: options.names,
            bench,
        })))
    }

    /// `select`'s warm path: the variant a cold `select` (the hub's
    /// preference, names decide) would choose among the variants in `root`,
    /// from the target's warm record when it still holds
    /// ([`super::cached::warm::answer`]); `Ok(None)`: plan as usual (also when the
    /// fingerprint fails: the ordinary path reports that in its order).
    /// `Err` says why a record was ignored (it is removed).
    fn warm_select(
        &self,
        root: &std::path::Path,
    ) -> Result<Option<super::cached::warm::Answer>, String> {
        let Some(cache) = self.outcome_cache() else {
            return Ok(None);
        };
        let Ok(fingerprint) = self.fingerprint() else {
            return Ok(None);
        };
        let options = self.plan_options(false, None);
        let installed = fingerprint.installed_digest();
        super::cached::warm::answer(cache, root, &fingerprint.hash(), &options, &installed)
    }
}
