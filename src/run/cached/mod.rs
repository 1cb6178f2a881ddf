//! The run's seam to the cache: a job's identity and key, one lookup, one
//! store, bench results kept and read, and `select`'s warm records
//! (`warm.rs`). Nothing else in the crate touches the cache's buckets,
//! records or keys (`scripts/layers.sh` checks it; outside the crate the
//! compiler does: they are `pub(crate)`), so that a new cache interface
//! changes this folder only.

pub(super) mod remote;
pub(super) mod warm;

pub(crate) use crate::cache::remote::entry::Placement;
pub use crate::cache::remote::{
    Mode as RemoteMode, RemoteSettings, SettingError as RemoteSettingError,
};
pub use remote::{RemoteRow, RemoteStatus};

/// A bench result as the cache keeps it: what `select --fastest` ranks by.
pub use crate::cache::bench::BenchRecord;
/// The workload a bench without `--workload` is kept under.
pub use crate::cache::bench::DEFAULT_WORKLOAD;

use super::plan::Job;
use crate::cache::outcomes::{machine_line, smoke_identity, smoke_label};
use crate::cache::warm::{WarmOutcome, Witness, now_ns};
use crate::cache::{
    BenchKey, Cache, IdentityWitness, JobIdentity, Lookup, OutcomeKey, OutcomeRecord, VariantFiles,
};
use crate::classify::{Outcome, Timings};
use crate::discover::Metadata;
use crate::discover::native::{ModuleKind, ModuleSpec};
use crate::fingerprint::{ClassFacts, Fingerprint};
use crate::probe::{self, Executor, Subject};
use crate::protocol::{Made, PROTOCOL_VERSION};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The cache as one run uses it: every key and record names the machine
/// the plan is for.
#[derive(Debug)]
pub(super) struct RunCache {
    cache: Arc<Cache>,
    /// The full fingerprint's hash, in every key.
    fingerprint: String,
    /// The machine in one line, in every record.
    machine: String,
    /// The machine's class in readable facts, in every published entry.
    class: ClassFacts,
    /// The digest of what is installed in the probed environment's import
    /// folders, as taken with the fingerprint.
    packages: String,
}

impl RunCache {
    /// Outcomes of jobs on the machine `fingerprint` (full) describes.
    pub(super) fn new(cache: Arc<Cache>, fingerprint: &Fingerprint) -> RunCache {
        let hash = fingerprint.hash();
        RunCache {
            cache,
            machine: machine_line(fingerprint, &hash),
            class: fingerprint.class_facts(),
            fingerprint: hash,
            packages: fingerprint.installed_digest(),
        }
    }

    /// The cache itself.
    pub(super) fn cache(&self) -> &Cache {
        &self.cache
    }
}

/// Where a job's outcome is kept.
#[derive(Debug, Clone)]
pub struct JobKey {
    key: OutcomeKey,
    /// The smoke source, for people (kept in the record).
    smoke: String,
    /// The `stat`s a hub variant's identity was computed from (what a warm
    /// record keeps); `None` for a native module.
    witness: Option<IdentityWitness>,
}

impl JobKey {
    /// The outcome key: the machine's fingerprint hash and the job identity.
    pub fn outcome(&self) -> &OutcomeKey {
        &self.key
    }

    /// Where the bench results of this job's `workload` are kept.
    pub fn bench(&self, workload: &str) -> BenchKey {
        let parts = &self.key.parts;
        BenchKey::new(&parts.fingerprint, parts.job.clone(), workload)
    }
}

/// Keep `record`, the bench result of `key` for `workload`, as the
/// machine's (its line in the record is the run's); `Err` says why the
/// cache could not be written.
pub(crate) fn keep_bench(
    cache: &RunCache,
    key: &JobKey,
    workload: &str,
    mut record: BenchRecord,
) -> Result<(), String> {
    record.machine = cache.machine.clone();
    cache
        .cache
        .bench()
        .put(&key.bench(workload), record)
        .map(drop)
        .map_err(|e| format!("bench results are not cached: {e}"))
}

/// The bench result of `key` for `workload`, if one is kept (an invalid
/// entry is removed and counts as none).
pub(super) fn bench_lookup(cache: &RunCache, key: &JobKey, workload: &str) -> Option<BenchRecord> {
    cache.cache.bench().get(&key.bench(workload)).hit()
}

/// The key of `job`, made from its [`probe::Job::identity`] and the code
/// of the executors that run it: `executor`, and for a job with a device
/// step, `device_step`'s (with `metadata`, a hub variant's parsed
/// `metadata.json`, for the identity of its files). `Err` says why its
/// files could not be identified, or that the job is not one kept (the
/// job is then probed and not kept).
pub(super) fn job_key(
    cache: &RunCache,
    job: &probe::Job,
    metadata: Option<&Metadata>,
    executor: &dyn Executor,
    device_step: Option<&dyn Executor>,
) -> Result<JobKey, String> {
    let probe::Identity {
        subject,
        device,
        smoke,
        depth,
    } = job.identity();
    match subject {
        Subject::Variant { name, path } => {
            let (files, _, witness) = cache
                .cache
                .identities()
                .identify_witnessed(path, metadata)
                .map_err(|e| e.to_string())?;
            let identity = JobIdentity {
                executor: executor.kind(),
                code: executor.code_identity().to_owned(),
                name: name.to_string(),
                device: probe::torch_device(name, device),
                files,
                smoke: smoke_identity(smoke).map_err(|e| e.to_string())?,
                depth,
                protocol: PROTOCOL_VERSION,
                device_code: device_step.map(|e| e.code_identity().to_owned()),
                made: executor.made(),
            };
            Ok(JobKey {
                key: OutcomeKey::new(&cache.fingerprint, identity),
                smoke: smoke_label(smoke),
                witness: Some(witness),
            })
        }
        Subject::Module { spec, launches } => {
            // A native module's workload is its launches: its smoke source
            // is always load-only, and says nothing more.
            debug_assert_eq!(*smoke, probe::SmokeSource::LoadOnly);
            let ModuleSpec {
                path,
                kind,
                nvrtc_options,
                target,
            } = spec;
            let bytes = crate::fs::read_small(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            // How the file becomes code on the device is part of what it is.
            #[derive(Serialize)]
            struct Files<'a> {
                sha256: String,
                kind: ModuleKind,
                nvrtc_options: &'a [String],
                target: Option<&'a str>,
            }
            let files = Files {
                sha256: crate::hash::hex(&Sha256::digest(bytes)),
                kind: *kind,
                nvrtc_options,
                target: target.as_deref(),
            };
            let identity = JobIdentity {
                executor: executor.kind(),
                code: executor.code_identity().to_owned(),
                name: spec.name(),
                device: device.ordinal().to_string(),
                files: VariantFiles {
                    content: format!("content:{}", digest(&files)),
                    metadata: None,
                },
                smoke: format!("launches:{}", digest(launches)),
                depth,
                protocol: PROTOCOL_VERSION,
                device_code: device_step.map(|e| e.code_identity().to_owned()),
                made: executor.made(),
            };
            Ok(JobKey {
                key: OutcomeKey::new(&cache.fingerprint, identity),
                smoke: "launches".into(),
                witness: None,
            })
        }
        Subject::DeviceCode { .. } | Subject::Device | Subject::Devices => Err(format!(
            "{} is a question about the machine, not a job that is kept",
            subject.describe()
        )),
    }
}

/// The key a whole native target's bench results are kept under: its one
/// module's own key, or, for several, one identity made of all of theirs
/// (a target is timed as the sum of its launches, so every module is part
/// of what was timed). `None` when a module has no key.
pub(super) fn target_key(keys: &[Option<&JobKey>]) -> Option<JobKey> {
    let keys: Vec<&JobKey> = keys.iter().copied().collect::<Option<_>>()?;
    match keys.as_slice() {
        [] => None,
        [one] => Some((*one).clone()),
        [first, ..] => {
            let jobs: Vec<&JobIdentity> = keys.iter().map(|k| &k.key.parts.job).collect();
            let files: Vec<&VariantFiles> = jobs.iter().map(|j| &j.files).collect();
            let smokes: Vec<&str> = jobs.iter().map(|j| j.smoke.as_str()).collect();
            let head = &first.key.parts.job;
            let identity = JobIdentity {
                executor: head.executor,
                code: head.code.clone(),
                name: jobs
                    .iter()
                    .map(|j| j.name.as_str())
                    .collect::<Vec<_>>()
                    .join("+"),
                device: head.device.clone(),
                files: VariantFiles {
                    content: format!("modules:{}", digest(&files)),
                    metadata: None,
                },
                smoke: format!("launches:{}", digest(&smokes)),
                depth: head.depth,
                protocol: head.protocol,
                device_code: None,
                made: head.made,
            };
            Some(JobKey {
                key: OutcomeKey::new(&first.key.parts.fingerprint, identity),
                smoke: "launches".into(),
                witness: None,
            })
        }
    }
}

/// sha256 of a value's JSON form (plain structs of strings and numbers,
/// which always serialize).
fn digest<T: Serialize>(value: &T) -> String {
    crate::hash::sha256_hex(&serde_json::to_vec(value).unwrap_or_default())
}

/// A job's outcome as the cache answers it.
#[derive(Debug, Clone)]
pub(super) struct Hit {
    /// The outcome.
    pub(super) outcome: Outcome,
    /// Its timings.
    pub(super) timings: Timings,
    /// Whether another node of this machine class probed it (the remote
    /// tier answered).
    pub(super) remote: bool,
}

/// The cached outcome of `key`, the job of the variant at `path`: the
/// local tier's, else the remote tier's (kept locally then). `warn` hears
/// why an entry was ignored (a corrupt local one is removed; a refused
/// remote one is never used) and the remote tier's one warning. A
/// variant's outcome kept when other packages were installed than are now
/// is a miss: the job is probed again and its entry rewritten. A local hit
/// never asks the remote tier.
pub(super) fn lookup(
    cache: &RunCache,
    key: &JobKey,
    path: &std::path::Path,
    warn: &dyn Fn(String),
) -> Option<Hit> {
    match cache.cache.outcomes().get(&key.key) {
        Lookup::Hit(record) if record_holds(cache, record.packages.as_deref()) => {
            return Some(Hit {
                outcome: record.outcome,
                timings: record.timings,
                remote: false,
            });
        }
        Lookup::Hit(_) | Lookup::Miss => {}
        Lookup::Corrupt(why) => warn(format!(
            "{}: ignored a corrupt cache entry: {why}",
            path.display()
        )),
    }
    remote::fetch(cache, key, path, warn)
}

/// How many entries of the remote tier this run refused.
pub(super) fn refused(cache: &RunCache) -> usize {
    cache.cache.remote().map_or(0, |r| r.refused())
}

/// The outcome kept for `key` and when its entry was written (ns since
/// the epoch), read without probing; `None` when nothing valid is kept
/// for what is installed now.
pub(super) fn recall(cache: &RunCache, key: &JobKey) -> Option<(Outcome, i128)> {
    let (record, entry) = cache.cache.outcomes().get_witnessed(&key.key)?;
    if !record_holds(cache, record.packages.as_deref()) {
        return None;
    }
    Some((record.outcome, entry.seen?.mtime_ns))
}

/// Whether a record kept with the package digest `packages` (a variant's)
/// still holds: what is installed is unchanged.
fn record_holds(cache: &RunCache, packages: Option<&str>) -> bool {
    packages.is_none_or(|kept| kept == cache.packages)
}

/// What a warm record keeps of `key`'s job: the `stat`s of its files (when
/// they are settled) and its outcome entry, read now with its own `stat`;
/// `None` when its files cannot vouch for it.
pub(super) fn witnessed(
    cache: &RunCache,
    key: &JobKey,
) -> Option<(Vec<Witness>, Option<WarmOutcome>)> {
    let files = key.witness.as_ref().filter(|w| w.settled())?;
    let taken_ns = now_ns();
    let outcome = cache
        .cache
        .outcomes()
        .get_witnessed(&key.key)
        .filter(|(_, entry)| entry.settled(taken_ns))
        .filter(|(record, _)| record_holds(cache, record.packages.as_deref()))
        .map(|(record, entry)| WarmOutcome {
            entry,
            outcome: record.outcome,
            timings: record.timings,
            packages: record.packages,
        });
    Some((files.files.clone(), outcome))
}

/// The cache and the full fingerprint's hash a run keys its jobs by.
pub(super) fn parts(cache: &RunCache) -> (&Cache, &str) {
    (&cache.cache, &cache.fingerprint)
}

/// Keep `job`'s outcome, and publish it to the remote tier; the cache
/// refuses a transient one ([`crate::cache::outcomes::cacheable`]), and
/// one that does not last is never published. `Err` says why the local
/// cache could not be written; `warn` hears the remote tier's one warning.
pub(super) fn store(
    cache: &RunCache,
    key: &JobKey,
    job: &Job,
    outcome: &Outcome,
    timings: &Timings,
    placement: Option<Placement>,
    warn: &dyn Fn(String),
) -> Result<(), String> {
    // Forked evidence never answers a key for a fresh probe. The other way
    // round it may: a forked job whose fork server was given up ran fresh,
    // in a process of its own as the caller's will be, which is all a
    // forked probe shows and more; and where forking cannot work at all (no
    // namespaces) nothing would be cached otherwise. Its outcome says how
    // it was made.
    if outcome.made == Made::Forked && key.key.parts.job.made == Made::Fresh {
        return Ok(());
    }
    let record = OutcomeRecord {
        path: std::path::absolute(&job.path).unwrap_or_else(|_| job.path.clone()),
        smoke: key.smoke.clone(),
        outcome: outcome.clone(),
        timings: *timings,
        machine: cache.machine.clone(),
        packages: matches!(job.probe.subject, probe::Subject::Variant { .. })
            .then(|| cache.packages.clone()),
    };
    if !crate::cache::outcomes::cacheable(outcome) {
        return Ok(());
    }
    let kept = cache
        .cache
        .outcomes()
        .put(&key.key, record.clone())
        .map(drop)
        .map_err(|e| format!("outcomes are not cached: {e}"));
    remote::publish(cache, key, &record, placement)
        .into_iter()
        .for_each(warn);
    kept
}
