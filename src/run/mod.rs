//! Run: for every variant of some targets, what happens when it is loaded
//! here — answered from the outcome cache when it knows, else by a fresh
//! probe in a sandboxed child — in parallel, in the hub's preference order.
//! `check`, `select` and `warmup` are thin shells over [`run`].

pub mod native;
pub mod select;

use crate::cache::outcomes::{machine_line, smoke_identity, smoke_label};
use crate::cache::{Cache, CacheError, JobIdentity, Lookup, OutcomeKey, OutcomeRecord};
use crate::classify::{self, Depth, Outcome, OutcomeKind, Timings};
use crate::declared::embedded::{self, Judge};
use crate::declared::{self, Decision, Rejection, System};
use crate::discover::{Discovery, FoundVariant};
use crate::fingerprint::{Fingerprint, Hashed};
use crate::probe::{
    self, Executor, ExecutorKind, Job, Placement, PythonExecutor, SmokeSource, Subject,
};
use crate::protocol::PROTOCOL_VERSION;
use crate::sandbox::{Cancel, Limits};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The Python interpreter that probes run in (absolute path).
    pub python: PathBuf,
    /// A smoke file that overrides every other smoke source.
    pub smoke: Option<PathBuf>,
    /// Probe variants for another OS or CPU too.
    pub all: bool,
    /// Probes run at the same time.
    pub jobs: usize,
    /// Limits of each child.
    pub limits: Limits,
    /// When set, each variant's embedded CUDA images are judged against this
    /// GPU as part of its declared verdict (`check`; `select` and `warmup`
    /// skip it, since it reads every shared object).
    pub judge: Option<Judge>,
    /// Where outcomes are looked up first and kept after a probe; `None`:
    /// probe everything, keep nothing (`--no-cache`).
    pub cache: Option<Arc<Cache>>,
}

/// The declared, name-level verdict, as `check --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// Whether the hub loader would accept the variant here by its name.
    pub accepted: bool,
    /// Why not, in the hub's words.
    pub reason: Option<String>,
    /// Why not, in a word or two (for the table).
    #[serde(skip)]
    pub short: Option<&'static str>,
}

/// One variant's row: what it declares, what it did, how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The target as given on the command line.
    pub target: String,
    /// The variant's name.
    pub variant: String,
    /// The variant's directory.
    pub path: String,
    /// The name-level verdict.
    pub declared: Declared,
    /// What probing it showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// Processes that outlived the probe and were killed, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaked: Option<String>,
    /// Whether the outcome came from the cache rather than a probe now.
    pub cached: bool,
}

impl CheckResult {
    /// Whether the declared verdict and the observed outcome disagree: a
    /// variant accepted by name that fails here, or one rejected that works.
    pub fn disagrees(&self) -> bool {
        match self.outcome.kind {
            OutcomeKind::Pass => !self.declared.accepted,
            OutcomeKind::Skipped | OutcomeKind::ProbeError => false,
            _ => self.declared.accepted,
        }
    }
}

/// The document `check --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The machine the results hold for, with its hash.
    #[serde(serialize_with = "hashed")]
    pub fingerprint: Fingerprint,
    /// One row per variant, targets in the order given, each in the hub's
    /// preference order.
    pub results: Vec<CheckResult>,
}

fn hashed<S: serde::Serializer>(fp: &Fingerprint, s: S) -> Result<S::Ok, S::Error> {
    Hashed::from(fp).serialize(s)
}

impl CheckReport {
    /// Whether every target has at least one passing variant.
    pub fn every_target_passes(&self) -> bool {
        let mut targets: Vec<&str> = self.results.iter().map(|r| r.target.as_str()).collect();
        targets.dedup();
        targets.iter().all(|t| {
            self.results
                .iter()
                .any(|r| r.target == *t && r.outcome.kind.passed())
        })
    }
}

/// A discovered target, with the name it was given.
#[derive(Debug, Clone)]
pub struct Target {
    /// As given on the command line.
    pub given: String,
    /// What is in it.
    pub discovery: Discovery,
}

/// One variant to check, before it runs.
struct Work<'a> {
    target: &'a Target,
    variant: &'a FoundVariant,
    decision: Decision,
}

impl Work<'_> {
    /// Variants for another OS or CPU cannot load here at all.
    fn skip_reason(&self, all: bool) -> Option<String> {
        match &self.decision.rejection {
            Some(r @ (Rejection::Cpu { .. } | Rejection::Os { .. })) if !all => Some(r.to_string()),
            _ => None,
        }
    }
}

/// Number of variants `check` will start children for.
pub fn probe_count(targets: &[Target], fingerprint: &Fingerprint, all: bool) -> usize {
    plan(targets, &System::from_fingerprint(fingerprint))
        .iter()
        .filter(|w| w.skip_reason(all).is_none())
        .count()
}

fn plan<'a>(targets: &'a [Target], system: &System) -> Vec<Work<'a>> {
    let mut work = Vec::new();
    for target in targets {
        let names = target.discovery.variants.iter().map(|v| &v.name);
        for decision in declared::resolve(names, system) {
            if let Some(variant) = target
                .discovery
                .variants
                .iter()
                .find(|v| v.name == decision.variant)
            {
                work.push(Work {
                    target,
                    variant,
                    decision,
                });
            }
        }
    }
    work
}

/// Probe every variant of every target on the machine `fingerprint`
/// describes, `options.jobs` at a time; `each` is called as each result
/// arrives (for progress).
pub fn run(
    targets: &[Target],
    fingerprint: &Fingerprint,
    options: &CheckOptions,
    cancel: &Cancel,
    each: &(dyn Fn(&CheckResult) + Sync),
) -> CheckReport {
    use rayon::prelude::*;
    let work = plan(targets, &System::from_fingerprint(fingerprint));
    // What the cache or the plan already answers needs no thread: a warm
    // `select` never starts the pool.
    let mut results: Vec<Option<CheckResult>> = Vec::with_capacity(work.len());
    let mut pending = Vec::new();
    let mut smokes = HashMap::new();
    let machine = options.cache.as_ref().map(|_| fingerprint.hash());
    for (i, w) in work.iter().enumerate() {
        match answer_without_probe(w, options, machine.as_deref(), &mut smokes) {
            Answered::Done(result) => {
                each(&result);
                results.push(Some(result));
            }
            Answered::Probe(p) => {
                results.push(None);
                pending.push((i, w, p));
            }
        }
    }
    let line = machine.as_ref().map(|hash| machine_line(fingerprint, hash));
    let warned = AtomicBool::new(false);
    let probe = |(i, w, p): &(usize, &Work, Pending)| {
        let result = probe_one(w, p, options, cancel);
        // An interrupted probe says nothing about the variant; a transient
        // outcome is refused by the cache itself.
        if let (Some(cache), Some(key), Some(line)) = (&options.cache, &p.key, &line)
            && !cancel.is_cancelled()
        {
            keep(cache, key, w, p, &result, line, &warned);
        }
        each(&result);
        (*i, result)
    };
    let probed: Vec<(usize, CheckResult)> = if pending.is_empty() {
        Vec::new()
    } else {
        match rayon::ThreadPoolBuilder::new()
            .num_threads(options.jobs.max(1))
            .build()
        {
            Ok(pool) => pool.install(|| pending.par_iter().map(probe).collect()),
            Err(_) => pending.iter().map(probe).collect(),
        }
    };
    for (i, result) in probed {
        results[i] = Some(result);
    }
    CheckReport {
        fingerprint: fingerprint.clone(),
        results: results.into_iter().flatten().collect(),
    }
}

/// A variant that needs a probe: its smoke source and, when outcomes are
/// cached, the key to keep the outcome under.
struct Pending {
    smoke: SmokeSource,
    key: Option<OutcomeKey>,
    declared: Declared,
}

enum Answered {
    Done(CheckResult),
    Probe(Pending),
}

/// The declared verdict: the hub's name-level decision, then (when a GPU is
/// judged and the name is accepted) whether the variant's embedded CUDA
/// images can run on it.
fn declared(work: &Work, judge: Option<Judge>) -> Declared {
    let by_name = Declared {
        accepted: work.decision.accepted(),
        reason: work.decision.rejection.as_ref().map(ToString::to_string),
        short: work.decision.rejection.as_ref().map(short_reason),
    };
    if !by_name.accepted {
        return by_name;
    }
    match judge.and_then(|j| embedded::variant_verdict(&work.variant.path, j)) {
        Some((false, summary)) => Declared {
            accepted: false,
            reason: Some(summary),
            short: Some("no image fits"),
        },
        _ => by_name,
    }
}

fn row(
    work: &Work,
    declared: Declared,
    outcome: Outcome,
    timings: Timings,
    leaked: Option<String>,
    cached: bool,
) -> CheckResult {
    CheckResult {
        target: work.target.given.clone(),
        variant: work.variant.name.to_string(),
        path: work.variant.path.display().to_string(),
        declared,
        outcome,
        timings,
        leaked,
        cached,
    }
}

/// Answer a variant from the plan (another OS or CPU) or the cache, or say
/// how to probe it. `smokes` remembers each target's smoke source per
/// kernel name, so that the repo is looked at once.
fn answer_without_probe(
    work: &Work,
    options: &CheckOptions,
    machine: Option<&str>,
    smokes: &mut HashMap<(String, Option<String>), SmokeSource>,
) -> Answered {
    let variant = work.variant;
    if let Some(reason) = work.skip_reason(options.all) {
        return Answered::Done(row(
            work,
            declared(work, None),
            Outcome::skipped(&reason),
            Timings::default(),
            None,
            false,
        ));
    }
    let discovery = &work.target.discovery;
    let kernel = variant
        .metadata
        .metadata()
        .map(|m| m.name.clone())
        .or_else(|| discovery.kernel.clone());
    let smoke = smokes
        .entry((work.target.given.clone(), kernel))
        .or_insert_with_key(|(_, kernel)| {
            SmokeSource::choose(
                options.smoke.as_deref(),
                repo_dir(&discovery.root),
                kernel.as_deref(),
            )
        })
        .clone();
    // A variant whose files cannot be read for its identity is still probed;
    // only its outcome is not kept.
    let key = options
        .cache
        .as_ref()
        .zip(machine)
        .and_then(|(cache, machine)| {
            let job = variant_job(variant, &smoke, &options.limits);
            job_key(cache, variant, &job, machine)
                .inspect_err(|e| {
                    eprintln!(
                        "preflight: warning: {}: not cached: {e}",
                        variant.path.display()
                    )
                })
                .ok()
        });
    if let (Some(cache), Some(key)) = (&options.cache, &key)
        && let Some(record) = cached(cache, key)
    {
        return Answered::Done(row(
            work,
            declared(work, options.judge),
            record.outcome,
            record.timings,
            None,
            true,
        ));
    }
    Answered::Probe(Pending {
        smoke,
        key,
        declared: declared(work, options.judge),
    })
}

fn probe_one(
    work: &Work,
    pending: &Pending,
    options: &CheckOptions,
    cancel: &Cancel,
) -> CheckResult {
    let executor = PythonExecutor::new(&options.python);
    let job = variant_job(work.variant, &pending.smoke, &options.limits);
    let start = Instant::now();
    let result = executor.run(&job, cancel);
    let total_ms = start.elapsed().as_secs_f64() * 1e3;
    let (outcome, timings, leaked) = match result {
        Ok(evidence) => {
            let outcome = classify::classify(&evidence);
            let timings = Timings {
                total_ms: round_ms(total_ms),
                ..evidence.timings()
            };
            (outcome, timings, evidence.leaked)
        }
        Err(e) => (
            Outcome::probe_error(classify::Phase::Start, &e.to_string()),
            Timings {
                total_ms: round_ms(total_ms),
                ..Timings::default()
            },
            None,
        ),
    };
    row(
        work,
        pending.declared.clone(),
        outcome,
        timings,
        leaked,
        false,
    )
}

/// The job that probes `variant` with `smoke`: on the device its backend
/// names, as deep as its smoke source allows. The one place a hub
/// variant's job is made, for its key and for its run alike.
fn variant_job(variant: &FoundVariant, smoke: &SmokeSource, limits: &Limits) -> Job {
    Job {
        subject: Subject::Variant {
            name: variant.name.clone(),
            path: variant.path.clone(),
        },
        device: Placement::Default,
        smoke: smoke.clone(),
        depth: Depth::Verified,
        limits: limits.clone(),
    }
}

/// The cache key of running `job` (which probes `variant`) in the python
/// executor on the machine whose full fingerprint hashes to `machine`:
/// everything that went into the probe.
fn job_key(
    cache: &Cache,
    variant: &FoundVariant,
    job: &Job,
    machine: &str,
) -> Result<OutcomeKey, CacheError> {
    let (files, _) = cache
        .identities()
        .identify(&variant.path, variant.metadata.metadata())?;
    let job = JobIdentity {
        executor: ExecutorKind::Python,
        name: variant.name.to_string(),
        device: probe::torch_device(&variant.name, job.device),
        files,
        smoke: smoke_identity(&job.smoke)?,
        depth: job.depth,
        protocol: PROTOCOL_VERSION,
    };
    Ok(OutcomeKey::new(machine, job))
}

/// The cached record of a job; a corrupt entry is warned about (and removed).
fn cached(cache: &Cache, key: &OutcomeKey) -> Option<OutcomeRecord> {
    let lookup = cache.outcomes().get(key);
    if let Lookup::Corrupt(why) = &lookup {
        eprintln!("preflight: warning: ignored a corrupt cache entry: {why}");
    }
    lookup.hit()
}

/// Keep a probed outcome (transient ones are refused by the cache); a cache
/// that cannot be written is warned about once, and the outcome still used.
fn keep(
    cache: &Cache,
    key: &OutcomeKey,
    work: &Work,
    pending: &Pending,
    result: &CheckResult,
    machine: &str,
    warned: &AtomicBool,
) {
    let path = &work.variant.path;
    let record = OutcomeRecord {
        path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
        smoke: smoke_label(&pending.smoke),
        outcome: result.outcome.clone(),
        timings: result.timings,
        machine: machine.to_string(),
    };
    if let Err(e) = cache.outcomes().put(key, record)
        && !warned.swap(true, Ordering::Relaxed)
    {
        eprintln!("preflight: warning: outcomes are not cached: {e}");
    }
}

fn short_reason(rejection: &Rejection) -> &'static str {
    match rejection {
        Rejection::Cpu { .. } => "other CPU",
        Rejection::Os { .. } => "other OS",
        Rejection::TorchVersion { .. } => "torch version",
        Rejection::Cxx11Abi { .. } => "C++ ABI",
        Rejection::StableAbiTooNew { .. } => "stable ABI too new",
        Rejection::TvmFfiVersion { .. } => "tvm-ffi version",
        Rejection::CudaVersion { .. } => "CUDA version",
        Rejection::Backend { .. } | Rejection::NoarchBackend { .. } => "backend",
        Rejection::MacosTooOld { .. } => "macOS too old",
    }
}

/// Milliseconds, rounded to the microsecond.
fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}

/// The kernel repo above a directory of variants (`<repo>/build`), where
/// `benchmarks/` lives.
fn repo_dir(variants_root: &Path) -> Option<&Path> {
    (variants_root.file_name()? == "build")
        .then(|| variants_root.parent())
        .flatten()
}
