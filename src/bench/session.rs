//! One bench session: the passing variants of one kernel, each in a bench
//! child of its own, timed in interleaved rounds until each one's
//! [`Stopper`](crate::stats::Stopper) is satisfied.
//!
//! Children are started and warmed up one after another, and rounds run
//! one child at a time (A B C A B C …), so that no two variants ever time
//! — or autotune — on one device at once, whatever `--jobs` says: `--jobs`
//! only applies to the probes that come first. Interleaving spreads the
//! machine's drift (clocks, other load) over every variant alike; so does
//! keeping every variant in the rounds until the last stopper is satisfied
//! (each variant's stop rule is the one that was satisfied first for it,
//! and the session ends at the latest when the slowest reaches its
//! `--timeout`).

use super::BenchError;
use super::result::{BenchContext, BenchReport, BenchStatus, VariantBench};
use super::rounds::{Participant, Turns, Unit, flushed, result, start_each, time_all};
use crate::classify::{Outcome, OutcomeKind};
use crate::discover::Named;
use crate::probe::{BenchRole, ProbeError, SmokeSource, Subject};
use crate::run::{
    BenchReporter, CheckOptions, CheckReport, Executors, Job, Listener, Plan, Session, Stream,
    TargetId,
};
use crate::sandbox::Cancel;
use crate::stats::StopCriteria;

/// How to bench.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The hub benchmark workload (`benchmark_<w>`); `None`: the smoke.
    pub workload: Option<String>,
    /// Only these variants (names); `None`: every one that passes.
    pub variants: Option<Vec<String>>,
    /// When each variant is done.
    pub criteria: StopCriteria,
    /// Flush the L2 cache before each sample on a GPU.
    pub flush_l2: bool,
    /// The seed of the bootstrap comparisons.
    pub seed: u64,
    /// Time variants on the host by their process's CPU time instead of
    /// the wall clock (device events are kept where a child has them).
    pub cpu_time: bool,
}

/// Bench the passing variants of `plan`'s hub kernel — or, when its
/// targets are native (`preflight.toml`), those targets side by side, each
/// as a whole — after `check` answered every job. The caller's `interrupt`
/// stops every child.
pub fn bench(
    plan: &Plan,
    check: &CheckReport,
    executors: &Executors,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
) -> Result<BenchReport, BenchError> {
    if plan
        .targets
        .iter()
        .any(|t| matches!(t.target, crate::discover::Target::Native(_)))
    {
        return super::native::bench(plan, check, executors, options, interrupt, reporter);
    }
    if plan.targets.len() > 1 {
        return Err(BenchError::SeveralKernels);
    }
    let wanted = |name: &str| {
        options
            .variants
            .as_ref()
            .is_none_or(|v| v.iter().any(|w| w == name))
    };
    if let Some(names) = &options.variants
        && let Some(unknown) = names
            .iter()
            .find(|n| !plan.jobs.iter().any(|j| &j.name == *n))
    {
        return Err(BenchError::UnknownVariant {
            variant: unknown.clone(),
            known: plan.jobs.iter().map(|j| j.name.clone()).collect(),
        });
    }
    let mut variants = Vec::new();
    let mut skipped = Vec::new();
    let mut passing = Vec::new();
    for row in &check.results {
        let job = &plan.jobs[row.job.0];
        if !wanted(&row.variant) {
            continue;
        }
        if let Some(why) = &job.skip {
            skipped.push(VariantBench {
                variant: job.name.clone(),
                job: Unit::Variant(job).key_hex(),
                status: BenchStatus::Excluded {
                    outcome: OutcomeKind::Skipped,
                    reason: why.clone(),
                },
                vs_fastest: None,
                vs_reference: None,
            });
        } else if row.outcome.kind.passed() {
            passing.push(job);
        } else {
            variants.push(excluded(job, &row.outcome));
        }
    }
    let Some(first) = passing.first() else {
        // A "no", with each variant's reason: nothing is timed.
        variants.append(&mut skipped);
        return Ok(BenchReport::nothing_timed(
            plan.targets
                .first()
                .map_or_else(String::new, |t| t.given.clone()),
            options
                .workload
                .clone()
                .unwrap_or_else(|| "none".to_owned()),
            plan.fingerprint.hash(),
            options.criteria,
            variants,
            context(plan, plan.targets.first().map(|_| TargetId(0))),
        ));
    };
    match (&first.probe.smoke, &options.workload) {
        (SmokeSource::LoadOnly, _) => return Err(BenchError::NoWorkload),
        (SmokeSource::Benchmarks { dir, .. }, Some(w)) => {
            let known = workloads(dir);
            if !known.contains(w) {
                return Err(BenchError::UnknownWorkload {
                    workload: w.clone(),
                    dir: dir.clone(),
                    known,
                });
            }
        }
        (SmokeSource::Benchmarks { .. }, None) | (_, None) => {}
        (_, Some(w)) => return Err(BenchError::WorkloadWithoutBenchmarks(w.clone())),
    }
    let participant = |job, name| Participant::new(Unit::Variant(job), name, options.criteria);
    let mut timed: Vec<Participant> = passing
        .iter()
        .map(|job| participant(job, job.name.clone()))
        .collect();
    // At most one more: the reference.
    let participants = timed.len() + 1;
    let mut turns = Turns::default();
    start_each(
        &mut timed,
        BenchRole::Variant,
        participants,
        executors,
        options,
        interrupt,
        reporter,
        &mut turns,
    )?;
    // The reference computation, in a child of its own (in the first
    // variant's company: the workload's setup may use it), when a variant
    // said its workload has one (`verify_<workload>` of the hub's convention).
    let mut reference = timed
        .iter()
        .any(|p| p.setup.as_ref().is_some_and(|s| s.has_reference))
        .then(|| participant(first, "reference".into()));
    if let Some(p) = &mut reference {
        start_each(
            std::slice::from_mut(p),
            BenchRole::Reference,
            participants,
            executors,
            options,
            interrupt,
            reporter,
            &mut turns,
        )?;
    }
    time_all(
        &mut timed,
        &mut reference,
        options,
        interrupt,
        reporter,
        &mut turns,
    )?;

    let workload = timed
        .iter()
        .find_map(|p| p.setup.as_ref())
        .map_or_else(|| "smoke".to_owned(), |s| s.label.clone());
    let mut report = BenchReport {
        target: plan
            .targets
            .get(first.target.0)
            .map_or_else(String::new, |t| t.given.clone()),
        workload,
        fingerprint: plan.fingerprint.hash(),
        device: device(plan, &timed),
        flush_l2: flushed(&timed),
        criteria: options.criteria,
        variants: timed.iter().map(|p| result(p, options.cpu_time)).collect(),
        reference: reference.as_ref().map(|p| result(p, options.cpu_time)),
        context: Some(context(plan, Some(first.target))),
    };
    report.variants.append(&mut variants);
    report.rank(options.seed);
    Ok(report)
}

/// The workloads the scripts of a `benchmarks/` folder define, read from
/// their text (`def benchmark_<w>(`), sorted: enough to refuse a misspelt
/// `--workload` before any child starts.
fn workloads(dir: &std::path::Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("benchmark") && n.ends_with(".py"))
        })
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| {
            text.split("def benchmark_")
                .skip(1)
                .filter_map(|rest| {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    rest[name.len()..]
                        .trim_start()
                        .starts_with('(')
                        .then_some(name)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A variant that is not timed, with the outcome that excludes it.
fn excluded(job: &Job, outcome: &Outcome) -> VariantBench {
    VariantBench {
        variant: job.name.clone(),
        job: Unit::Variant(job).key_hex(),
        status: BenchStatus::Excluded {
            outcome: outcome.kind,
            reason: outcome.message.clone(),
        },
        vs_fastest: None,
        vs_reference: None,
    }
}

/// What the bench of `target` ran on, finished now: the chart's caption.
pub(super) fn context(plan: &Plan, target: Option<TargetId>) -> BenchContext {
    BenchContext {
        revision: target.and_then(|t| plan.revision(t)),
        machine: plan.fingerprint.class_facts(),
        finished: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// The device timed on, for people: the framework device the children
/// reported, with the GPU's model where there is one.
fn device(plan: &Plan, timed: &[Participant]) -> String {
    let torch = timed
        .iter()
        .find_map(
            |p| match p.unit.first().map(|j| (&j.probe.subject, j.probe.device)) {
                Some((Subject::Variant { name, .. }, device)) => {
                    Some(crate::probe::torch_device(name, device))
                }
                _ => None,
            },
        )
        .unwrap_or_else(|| "cpu".into());
    // A universal variant's child chooses its device itself (`auto`): the
    // timer it reported says which it took.
    let on_device = timed
        .iter()
        .any(|p| p.setup.as_ref().is_some_and(|s| s.timer == "device_events"));
    let torch = match torch.as_str() {
        "auto" if on_device => "cuda".to_owned(),
        "auto" => "cpu".to_owned(),
        _ => torch,
    };
    match plan
        .fingerprint
        .gpus
        .devices
        .first()
        .and_then(|g| g.model.clone())
    {
        Some(model) if torch.starts_with("cuda") => {
            format!("{torch} ({model})")
        }
        _ => torch,
    }
}

impl From<ProbeError> for BenchError {
    fn from(e: ProbeError) -> BenchError {
        BenchError::Probe(e)
    }
}

/// What [`Session::bench`] answers: the plan, its check, and the bench.
#[derive(Debug)]
pub struct Benched {
    /// The plan of the targets.
    pub plan: Plan,
    /// Every job's outcome (the bench times those that pass).
    pub check: CheckReport,
    /// The bench; `None`: interrupted before it started.
    pub bench: Option<BenchReport>,
}

/// `bench` as the library's front door answers it (here, above `run`, which
/// `bench` is a client of).
impl Session {
    /// `bench`: `targets` checked as `warmup` does, then the variants (or
    /// native targets) that pass timed side by side ([`bench()`]) by the
    /// executors the check ran with, and each timed result kept in the
    /// cache for `select --fastest` (a cache that cannot be written is a
    /// warning). Options that name parts of a hub kernel are refused for
    /// native targets before anything is probed. On `cancel` during the
    /// check no bench is started ([`Benched::bench`] is `None`).
    pub fn bench(
        &self,
        targets: Vec<Named>,
        options: &BenchOptions,
        cancel: &Cancel,
        listener: &dyn Listener,
    ) -> Result<Benched, BenchError> {
        if targets
            .iter()
            .all(|t| matches!(t.target, crate::discover::Target::Native(_)))
        {
            super::native::refuse_hub_options(options, Some(&self.options().smoke))?;
        }
        let stream = Stream::new(listener);
        let (plan, check, executors) =
            self.answer(targets, &CheckOptions::default(), cancel, &stream)?;
        if cancel.signal().is_some() {
            return Ok(Benched {
                plan,
                check,
                bench: None,
            });
        }
        let report = bench(&plan, &check, &executors, options, cancel, &stream)?;
        if report.any_timed()
            && let Err(why) = super::store(&plan, &report, options.workload.as_deref())
        {
            stream.warn(&why);
        }
        Ok(Benched {
            plan,
            check,
            bench: Some(report),
        })
    }
}
