//! A warm `select` answered from one warm record ([`crate::cache::warm`]):
//! the plan of one directory of variants on this machine, kept after a run,
//! with the `stat`s that vouch for each part.
//!
//! The answer is the one a cold run gives. `select` (the hub's preference,
//! names decide) chooses the first variant in preference order that the hub
//! accepts by name and that passes; so what the answer depends on is the
//! listing of the directory (which variants there are, hence the order
//! and acceptance on this machine, both fixed by the key's fingerprint),
//! the smoke sources, and — for each accepted variant up to the chosen one
//! — its files and its outcome entry. Those are checked, a `stat` each;
//! variants after the chosen one, and those the hub rejects by name, cannot
//! change it and are not looked at. Anything that does not hold sends the
//! command down the ordinary path, which plans, runs and writes the record
//! again.

use crate::cache::Cache;
use crate::cache::Lookup;
use crate::cache::warm::{WarmJob, WarmParts, WarmRecord, Witness, now_ns};
use crate::discover::KernelRepo;
use crate::discover::repo::benchmark_sources;
use crate::protocol::PROTOCOL_VERSION;
use crate::run::select::Names;
use crate::run::{CheckReport, Plan, PlanOptions};
use std::path::{Path, PathBuf};

/// What the warm path answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The chosen variant's directory.
    pub path: PathBuf,
    /// The plan's warnings, as the run that made the record said them.
    pub warnings: Vec<String>,
}

/// Where the variants of a target lie and what vouches for them, taken
/// before they are listed.
#[derive(Debug, Clone)]
pub struct Before {
    root: PathBuf,
    taken_ns: i128,
    listing: Witness,
    smoke: Vec<Witness>,
}

impl Before {
    /// `stat`s of the directory of variants `root` and of the smoke
    /// sources beside it, taken now, before the plan reads them.
    pub fn take(root: &Path) -> Before {
        let taken_ns = now_ns();
        Before {
            root: root.to_path_buf(),
            taken_ns,
            listing: Witness::take(root),
            smoke: smoke_witnesses(root),
        }
    }

    fn settled(&self) -> bool {
        std::iter::once(&self.listing)
            .chain(&self.smoke)
            .all(|w| w.settled(self.taken_ns))
    }
}

/// What chooses and identifies a hub kernel's smoke source, besides
/// `--smoke` (which the warm path leaves to the ordinary one): the repo's
/// `benchmarks/` folder (its listing) and every Python file in it.
fn smoke_witnesses(root: &Path) -> Vec<Witness> {
    let Some(repo) = KernelRepo::above_variants(root) else {
        return Vec::new();
    };
    let dir = repo.benchmarks();
    let listing = Witness::take(&dir);
    let mut out = Vec::new();
    if listing.seen.is_some()
        && let Ok(scripts) = benchmark_sources(&dir)
    {
        out.extend(scripts.iter().map(|s| Witness::take(s)));
    }
    out.insert(0, listing);
    out
}

/// How `options` plan jobs, for the record's key; `None`: options the
/// warm path does not answer for (`--smoke`, a judge). A library smoke
/// chosen by name (`--smoke-as`, `PREFLIGHT_SMOKE_AS`) is in the line: the
/// record of a run that chose otherwise does not answer. The probe driver,
/// and every rule of planning and keying, are part of the binary, whose
/// `stat` is in the key too ([`WarmParts::binary`]): hashing the driver's
/// sources here would cost more than the rest of a warm `select`.
fn plan_line(options: &PlanOptions) -> Option<String> {
    if options.smoke.file.is_some() || options.judge.is_some() {
        return None;
    }
    Some(format!(
        "select all={} smoke-as={} forks={} protocol={PROTOCOL_VERSION} outcomes=v{}",
        options.all,
        options.smoke.library.map_or("-", |e| e.id()),
        options.smoke.forks,
        crate::cache::Bucket::Outcomes.version(),
    ))
}

/// The variant a cold `select` would choose in `root` on the machine whose
/// full fingerprint hashes to `fingerprint`, from its warm record when
/// every `stat` it depends on holds and what is installed in the probed
/// environment (`installed`: [`crate::fingerprint::Fingerprint::installed_digest`])
/// is what the outcomes it rests on were probed with; `Ok(None)`: ask the
/// ordinary path. `Err` says why a record was ignored (it is removed).
pub fn answer(
    cache: &Cache,
    root: &Path,
    fingerprint: &str,
    options: &PlanOptions,
    installed: &str,
) -> Result<Option<Answer>, String> {
    let Some(parts) = plan_line(options).and_then(|p| WarmParts::new(root, fingerprint, p)) else {
        return Ok(None);
    };
    let record = match cache.warm().get(&parts) {
        Lookup::Hit(record) => record,
        Lookup::Miss => return Ok(None),
        Lookup::Corrupt(why) => return Err(format!("ignored a corrupt warm record: {why}")),
    };
    if !record.root.holds() || !record.smoke.iter().all(Witness::holds) {
        return Ok(None);
    }
    Ok(chosen(&record.jobs, installed).map(|job| Answer {
        path: job.path.clone(),
        warnings: record.warnings.clone(),
    }))
}

/// The first job the hub accepts by name whose files and outcome entry
/// still hold and whose outcome passed; `None` as soon as one that could
/// be chosen no longer holds, or has no outcome kept (a cold run would
/// probe it), or has an outcome kept when other packages were installed
/// than `installed` says are now.
fn chosen<'j>(jobs: &'j [WarmJob], installed: &str) -> Option<&'j WarmJob> {
    for job in jobs.iter().filter(|j| j.accepted && !j.skipped) {
        let kept = job.outcome.as_ref()?;
        if !kept.entry.holds() || !job.files.iter().all(|w| w.holds_in(&job.path)) {
            return None;
        }
        if kept.packages.as_deref().is_some_and(|p| p != installed) {
            return None;
        }
        // The warm path answers only the default choice (names decide, in
        // preference order): the first that `choose` would take.
        if crate::run::select::may_choose(&kept.outcome, job.accepted, Names::Decide) {
            return Some(job);
        }
    }
    None
}

/// Keep the warm record of a run of one hub target planned with `options`
/// (`before` taken before its variants were listed). Nothing is kept when
/// something cannot vouch for it: a job without a cache key, a `stat`
/// taken too soon after its file changed (the next run keeps it), a
/// warning besides the plan's. `Err`: the record could not be written.
pub fn remember(
    plan: &Plan,
    report: &CheckReport,
    options: &PlanOptions,
    before: &Before,
) -> Result<(), String> {
    let Some(cache) = &plan.cache else {
        return Ok(());
    };
    let (store, fingerprint) = super::parts(cache);
    let Some(parts) = plan_line(options).and_then(|p| WarmParts::new(&before.root, fingerprint, p))
    else {
        return Ok(());
    };
    if !before.settled() || plan.targets.len() != 1 || report.warnings != plan.warnings {
        return Ok(());
    }
    let mut jobs = Vec::with_capacity(plan.jobs.len());
    for (job, row) in plan.jobs.iter().zip(&report.results) {
        let skipped = job.skip.is_some();
        // What the hub rejects by name, or does not probe here, is never
        // chosen: only its place in the order is kept.
        let (files, outcome) = match (&job.key, skipped || !row.declared.accepted) {
            (_, true) => (Vec::new(), None),
            (Some(key), false) => match super::witnessed(cache, key) {
                Some(w) => w,
                None => return Ok(()),
            },
            (None, false) => return Ok(()),
        };
        jobs.push(WarmJob {
            name: row.variant.clone(),
            path: job.path.clone(),
            accepted: row.declared.accepted,
            skipped,
            files,
            outcome,
        });
    }
    let record = WarmRecord {
        root: before.listing.clone(),
        smoke: before.smoke.clone(),
        warnings: plan.warnings.clone(),
        jobs,
    };
    store
        .warm()
        .put(parts, &record)
        .map(drop)
        .map_err(|e| format!("warm record not kept: {e}"))
}
