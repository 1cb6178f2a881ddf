//! Run: the one orchestrator. A [`Plan`] lists every job of some targets
//! once — each hub variant and each native module, with its declared
//! verdict, skip reason, smoke and cache key — then [`run`] answers each
//! job from the outcome cache, or probes it in a sandboxed child of its
//! executor, `jobs` at a time, and tells a [`Reporter`] what happens as it
//! happens. The library prints nothing: warnings travel in the events and
//! in the report.
//!
//! Every command is one [`Session`] method taking one options value:
//! `check`, `select` ([`select`]), `warmup` ([`warmup`]) and `bench` are
//! clients of the same plan and run (`bench` times the passing jobs with
//! the executors the check ran with); `resolve` ([`resolve`]) and `doctor`
//! measure the machine as the session does. Each speaks one timed event
//! stream ([`event`]). Every executor, `doctor`'s included, is made by
//! [`Executors`].

mod cached;
mod download;
pub mod event;
mod execute;
pub mod fleet;
mod plan;
pub mod recall;
pub mod resolve;
mod result;
pub mod select;
mod session;
pub mod ticket;
mod verdicts;
pub mod warmup;

pub use cached::{
    BenchRecord, DEFAULT_WORKLOAD, JobKey, RemoteMode, RemoteRow, RemoteSettingError,
    RemoteSettings, RemoteStatus,
};
pub use download::DownloadError;
pub use event::{
    BenchEvent, BenchReporter, Event, EventKind, Listener, Reporter, RunEvent, Stream, Tee,
};
pub use execute::{Executors, ExecutorsError};
pub use plan::{Job, JobId, Plan, PlanOptions, TargetId};
pub use recall::Recalled;
pub use result::{CheckReport, CheckResult, Declared};
pub use session::{CheckOptions, Session, SessionError, SessionOptions};

use crate::classify::Outcome;
use crate::discover::Target;
use crate::sandbox::Cancel;
use cached::remote::Claim;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A probed job's row, and the fault that kept its child from running.
type Probed = (CheckResult, Option<String>);

/// Answer every job of `plan`: from the cache where it knows, else by a
/// probe, `jobs` children at a time (native modules too); `reporter` hears
/// each step. A cancelled run still returns a row for every job.
pub fn run(
    plan: &Plan,
    executors: &Executors,
    jobs: usize,
    cancel: &Cancel,
    reporter: &dyn Reporter,
) -> CheckReport {
    use rayon::prelude::*;
    let warnings = Mutex::new(plan.warnings.clone());
    let warn = warner(reporter, &warnings);
    // What the plan or the cache answers needs no thread: a warm `select`
    // never starts the pool.
    let (mut results, pending) = unprobed(plan, reporter, &warn);
    reporter.report(RunEvent::Probing {
        count: pending.len(),
    });
    protect_every_kernel(&plan.jobs);
    let write_failed = AtomicBool::new(false);
    let executors = &executors.for_run();
    let machine = &crate::classify::Machine::of(&plan.fingerprint);
    // With a remote tier, a job another node of this machine class is
    // probing is put off (`wait` false) and, once every other job is done,
    // waited for (`wait` true): its verdict, or its lease ending.
    let probe = |job: &&Job, wait: bool| -> Option<Probed> {
        let lease = match (&plan.cache, &job.key) {
            (Some(cache), Some(key)) => {
                let warn = |why| warn(Some(job), why);
                match cached::remote::claim(cache, key, &job.path, wait, cancel, &warn) {
                    Claim::Probe(lease) => lease,
                    Claim::Answered(hit) => {
                        return Some((answered(job, plan, hit, reporter), None));
                    }
                    Claim::Busy => return None,
                }
            }
            _ => None,
        };
        reporter.report(RunEvent::Started { job });
        let done = execute::execute(job, executors, cancel, machine);
        // An interrupted probe says nothing lasting about the job; a cause
        // that may pass by itself is refused by the cache itself.
        if let (Some(cache), Some(key)) = (&plan.cache, &job.key)
            && !cancel.is_cancelled()
            && let Err(why) = cached::store(
                cache,
                key,
                job,
                &done.outcome,
                &done.timings,
                plan.placement(job),
                &|w| warn(Some(job), w),
            )
            && !write_failed.swap(true, Ordering::Relaxed)
        {
            warn(Some(job), why);
        }
        // Given up after the outcome is published: the nodes waiting for
        // it find it.
        if let Some(why) = lease.and_then(cached::remote::Lease::finish) {
            warn(Some(job), why);
        }
        let fault = done
            .fault
            .map(|why| format!("{}: {why}", job.path.display()));
        let result = row(job, plan, done.outcome, done.timings, done.leaked, false);
        reporter.report(RunEvent::Finished {
            job,
            result: &result,
        });
        Some((result, fault))
    };
    let probed: Vec<Probed> = if pending.is_empty() {
        Vec::new()
    } else {
        // What executors do beside the first probes (the judge of hub
        // variants) ends, or is stopped, with the run. A thread that
        // cannot be started leaves that work undone (every probe then
        // judges itself).
        let judged = Cancel::new();
        // While other nodes of this machine class probe some of these jobs
        // (a fleet warming up together), most will be answered by them:
        // work ahead of every pending job would be spent for nothing.
        let others = plan.cache.as_ref().is_some_and(|cache| {
            let keys = pending.iter().filter_map(|job| job.key.as_ref());
            cached::remote::others_probing(cache, keys, &|why| warn(None, why))
        });
        std::thread::scope(|scope| {
            for work in ahead(&pending, executors, jobs)
                .into_iter()
                .filter(|_| !others)
            {
                let judged = &judged;
                let _ = std::thread::Builder::new()
                    .name("ahead".into())
                    .spawn_scoped(scope, move || work(judged));
            }
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(jobs.max(1))
                .build();
            let pass = |jobs: &[&Job], wait: bool| -> Vec<Option<Probed>> {
                match &pool {
                    Ok(pool) => {
                        pool.install(|| jobs.par_iter().map(|job| probe(job, wait)).collect())
                    }
                    Err(_) => jobs.iter().map(|job| probe(job, wait)).collect(),
                }
            };
            let first = pass(&pending, false);
            let put_off: Vec<&Job> = pending
                .iter()
                .zip(&first)
                .filter(|(_, done)| done.is_none())
                .map(|(job, _)| *job)
                .collect();
            let second = if put_off.is_empty() {
                Vec::new()
            } else {
                pass(&put_off, true)
            };
            judged.cancel();
            first.into_iter().chain(second).flatten().collect()
        })
    };
    let mut faults = Vec::new();
    for (result, fault) in probed {
        faults.extend(fault);
        let slot = result.job.0;
        results[slot] = Some(result);
    }
    let results: Vec<CheckResult> = results.into_iter().flatten().collect();
    let passing = passing(plan, &results);
    if let Some(refused) = plan.cache.as_ref().map(cached::refused).filter(|n| *n > 0) {
        warn(
            None,
            format!(
                "refused {refused} entr{} of the remote store (see `preflight cache ls --remote`)",
                if refused == 1 { "y" } else { "ies" }
            ),
        );
    }
    // Once, for the whole run: what its probes could do that they should not.
    let isolation = (!pending.is_empty())
        .then(crate::sandbox::isolation)
        .flatten();
    if let Some(warning) = isolation.as_ref().and_then(|i| i.warning()) {
        warn(None, warning);
    }
    if let Some(warning) = isolation
        .as_ref()
        .filter(|i| matches!(i, crate::sandbox::Isolation::Namespaces { .. }))
        .and(crate::sandbox::overlay_warning())
    {
        warn(None, warning);
    }
    drop(warn);
    CheckReport {
        fingerprint: plan.fingerprint.clone(),
        results,
        isolation,
        warnings: warnings.into_inner().unwrap_or_default(),
        faults,
        passing,
    }
}

/// What needs no probe: each job's row where the plan skips it or the
/// cache answers it, in the plan's order (`None` for the others), and the
/// jobs left to probe.
fn unprobed<'p>(
    plan: &'p Plan,
    reporter: &dyn Reporter,
    warn: &dyn Fn(Option<&Job>, String),
) -> (Vec<Option<CheckResult>>, Vec<&'p Job>) {
    let mut results: Vec<Option<CheckResult>> = Vec::with_capacity(plan.jobs.len());
    let mut pending = Vec::new();
    for job in &plan.jobs {
        if let Some(reason) = &job.skip {
            results.push(Some(skipped(job, plan, Outcome::skipped(reason), reporter)));
            continue;
        }
        let hit = match (&plan.cache, &job.key) {
            (Some(cache), Some(key)) => {
                cached::lookup(cache, key, &job.path, &|why| warn(Some(job), why))
            }
            _ => None,
        };
        match hit {
            Some(hit) => results.push(Some(answered(job, plan, hit, reporter))),
            None => {
                results.push(None);
                pending.push(job);
            }
        }
    }
    (results, pending)
}

/// A run's warnings: each is reported as it comes and kept in `warnings`.
fn warner<'a>(
    reporter: &'a dyn Reporter,
    warnings: &'a Mutex<Vec<String>>,
) -> impl Fn(Option<&Job>, String) + Sync + 'a {
    move |job, message| {
        reporter.report(RunEvent::Warning {
            job,
            message: &message,
        });
        if let Ok(mut w) = warnings.lock() {
            w.push(message);
        }
    }
}

/// A row of a job that was not probed, `outcome` saying why.
fn skipped(job: &Job, plan: &Plan, outcome: Outcome, reporter: &dyn Reporter) -> CheckResult {
    let result = row(job, plan, outcome, Default::default(), None, false);
    reporter.report(RunEvent::Skipped {
        job,
        result: &result,
    });
    result
}

/// What the outcome cache alone answers of `plan` (`check --cached`): the
/// cached jobs' results as [`run`] gives them, every other job `skipped`
/// with the reason; no child, no thread, no claim on a remote lease.
pub fn from_cache(plan: &Plan, reporter: &dyn Reporter) -> CheckReport {
    let warnings = Mutex::new(plan.warnings.clone());
    let warn = warner(reporter, &warnings);
    let (mut results, pending) = unprobed(plan, reporter, &warn);
    for job in pending {
        let mut outcome = Outcome::skipped("not in the outcome cache (--cached probes nothing)");
        outcome.hint = "run the same `preflight check` without --cached to probe it".into();
        results[job.id.0] = Some(skipped(job, plan, outcome, reporter));
    }
    let results: Vec<CheckResult> = results.into_iter().flatten().collect();
    let passing = passing(plan, &results);
    drop(warn);
    CheckReport {
        fingerprint: plan.fingerprint.clone(),
        results,
        isolation: None,
        warnings: warnings.into_inner().unwrap_or_default(),
        faults: Vec::new(),
        passing,
    }
}

/// Per target, whether it passes: a hub kernel when one variant does, a
/// native target when every module does.
fn passing(plan: &Plan, results: &[CheckResult]) -> Vec<bool> {
    plan.targets
        .iter()
        .enumerate()
        .map(|(i, named)| {
            let mut rows = results.iter().filter(|r| r.target_id == TargetId(i));
            match named.target {
                Target::Hub(_) => rows.any(|r| r.outcome.kind.passed()),
                Target::Native(_) => rows.all(|r| r.outcome.kind.passed()),
            }
        })
        .collect()
}

/// The work the executors do beside the first probes
/// ([`crate::probe::Executor::ahead`]; the python executor's judge of the
/// hub's acceptance), each given the pending jobs it accepts.
fn ahead<'a>(
    pending: &[&'a Job],
    executors: &'a Executors,
    jobs: usize,
) -> Vec<crate::probe::Ahead<'a>> {
    executors
        .registered()
        .filter_map(|executor| {
            let own: Vec<&crate::probe::Job> = pending
                .iter()
                .map(|job| &job.probe)
                .filter(|probe| executor.accepts(&probe.subject))
                .collect();
            executor.ahead(&own, jobs)
        })
        .collect()
}

/// The row of a job the cache answered (this node's, or another's of its
/// machine class through the remote tier), reported as cached.
fn answered(job: &Job, plan: &Plan, hit: cached::Hit, reporter: &dyn Reporter) -> CheckResult {
    let mut result = row(job, plan, hit.outcome, hit.timings, None, true);
    result.remote = hit.remote;
    reporter.report(RunEvent::Cached {
        job,
        result: &result,
    });
    result
}

fn row(
    job: &Job,
    plan: &Plan,
    outcome: Outcome,
    timings: crate::classify::Timings,
    leaked: Option<String>,
    cached: bool,
) -> CheckResult {
    CheckResult {
        target_id: job.target,
        job: job.id,
        target: plan.targets[job.target.0].given.clone(),
        variant: job.name.clone(),
        path: job.path.display().to_string(),
        declared: job.declared.clone(),
        outcome,
        timings,
        leaked,
        cached,
        remote: false,
    }
}

/// Keeps the files of every kernel of the plan read-only in every probe
/// from now on, not only the probe's own: no probe may change the files
/// another is about to be judged by. Kernels in the hub cache are covered
/// by the cache's root at once.
fn protect_every_kernel(jobs: &[Job]) {
    let hub = crate::discover::hub_cache::cache_root();
    let mut protected: Vec<std::path::PathBuf> = jobs
        .iter()
        .filter_map(|job| job.probe.subject.protected())
        .map(|path| {
            if path.starts_with(&hub) {
                hub.clone()
            } else {
                path
            }
        })
        .collect();
    protected.sort();
    protected.dedup();
    for path in protected {
        crate::sandbox::protect_by_default(path);
    }
}
