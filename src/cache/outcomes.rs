//! Probe outcomes in the cache: what a record holds, which outcomes are
//! worth keeping, and the two calls `run` makes — `get` and `put` — with the
//! identity of a smoke source that goes into each key.

use super::bucket::{Entry, Lookup, Shelf};
use super::job::{OutcomeKey, OutcomeParts};
use super::key::Key;
use super::warm::{Witness, read_witnessed};
use super::{Cache, CacheError};
use crate::classify::{Outcome, Timings};
use crate::discover::repo::benchmark_sources;
use crate::fingerprint::Fingerprint;
use crate::probe::SmokeSource;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// What the cache keeps about one probe, besides its key's parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    /// The variant's directory when it was probed (what `prune` checks).
    pub path: PathBuf,
    /// The smoke source, for people (`benchmarks`, `library:relu`, `file:…`, `load-only`).
    pub smoke: String,
    /// What probing showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// The machine, in one line (see `machine_line`).
    pub machine: String,
    /// For a hub variant's outcome (its import runs in the probed Python
    /// environment): what was installed there when it was probed
    /// ([`crate::fingerprint::python::distributions_digest`]). An import
    /// may need any installed package, and the fingerprint tracks only
    /// some, so an install, upgrade or removal it cannot see must still
    /// retire the outcome: a module found missing may have been installed
    /// since, one a pass imported removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<String>,
}

/// An outcome entry as it is stored, listed and exported.
pub type OutcomeEntry = Entry<OutcomeParts, OutcomeRecord>;

/// Whether an outcome is worth keeping: real evidence about the variant.
/// Faults of preflight, deadlines (often a busy machine), variants that
/// were not probed, and causes that `classify` marks as passing by
/// themselves ([`Outcome::transient`]: a busy device, memory taken by
/// another process, a cancelled probe) are asked again next time.
///
/// The one place the outcome bucket asks this.
pub fn cacheable(outcome: &Outcome) -> bool {
    outcome.lasts()
}

/// What `put` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Written to this file.
    Stored(PathBuf),
    /// Not written: a transient outcome (see `cacheable`).
    Transient,
}

/// The outcomes bucket.
#[derive(Debug, Clone, Copy)]
pub struct Outcomes<'c> {
    cache: &'c Cache,
}

impl Cache {
    /// The outcomes bucket.
    pub fn outcomes(&self) -> Outcomes<'_> {
        Outcomes { cache: self }
    }
}

impl Outcomes<'_> {
    /// The cached record of a job, if a valid one is kept.
    pub fn get(&self, key: &OutcomeKey) -> Lookup<OutcomeRecord> {
        self.cache.record::<OutcomeParts, OutcomeRecord>(&key.key)
    }

    /// The cached record of a job with the `stat` of the entry it was read
    /// from (what a warm record keeps); `None`: no valid entry.
    pub fn get_witnessed(&self, key: &OutcomeKey) -> Option<(OutcomeRecord, Witness)> {
        read_witnessed::<OutcomeParts, OutcomeRecord>(self.cache, &key.key)
            .map(|(entry, witness)| (entry.record, witness))
    }

    /// Keep a record under its job's key, unless its outcome is transient.
    pub fn put(&self, key: &OutcomeKey, record: OutcomeRecord) -> Result<Kept, CacheError> {
        if !cacheable(&record.outcome) {
            return Ok(Kept::Transient);
        }
        let entry = Entry::new(key.parts.clone(), record);
        self.cache.write(&entry).map(Kept::Stored)
    }

    /// The whole entry of a key (`cache show`).
    pub fn entry(&self, key: &Key) -> Lookup<OutcomeEntry> {
        self.cache.read(key)
    }

    /// Every valid entry, by key; invalid ones are removed on the way.
    pub fn entries(&self) -> Vec<OutcomeEntry> {
        self.keys()
            .iter()
            .filter_map(|key| self.entry(key).hit())
            .collect()
    }

    /// Every key, sorted.
    pub fn keys(&self) -> Vec<Key> {
        self.cache.keys(Shelf::OUTCOMES)
    }
}

/// The identity of a smoke source: its text (the driver that runs it is
/// the job's executor code, [`super::JobIdentity::code`]).
pub fn smoke_identity(smoke: &SmokeSource) -> Result<String, CacheError> {
    let unreadable = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Unreadable { path, source }
    };
    let mut h = Sha256::new();
    let label = match smoke {
        SmokeSource::File(path) => {
            h.update(crate::fs::read_small(path).map_err(unreadable(path))?);
            "file"
        }
        SmokeSource::Benchmarks { dir, .. } => {
            for s in benchmark_sources(dir).map_err(unreadable(dir))? {
                h.update(s.file_name().unwrap_or_default().as_encoded_bytes());
                h.update(crate::fs::read_small(&s).map_err(unreadable(&s))?);
            }
            "benchmarks"
        }
        SmokeSource::Library(entry) => {
            h.update(entry.id().as_bytes());
            h.update(entry.source().as_bytes());
            "library"
        }
        SmokeSource::LoadOnly => "load-only",
    };
    Ok(format!("{label}:{}", crate::hash::hex(&h.finalize())))
}

/// A person's name for a smoke source.
pub fn smoke_label(smoke: &SmokeSource) -> String {
    match smoke {
        SmokeSource::File(path) => format!("file:{}", path.display()),
        SmokeSource::Benchmarks { .. } => "benchmarks".into(),
        SmokeSource::Library(entry) => format!("library:{}", entry.id()),
        SmokeSource::LoadOnly => "load-only".into(),
    }
}

/// One line describing a machine: GPUs, driver, Python, hash prefix.
pub fn machine_line(fp: &Fingerprint, hash: &str) -> String {
    let gpus = fp.gpu_models().unwrap_or_else(|| "no GPU".into());
    let driver = fp
        .gpus
        .driver
        .as_deref()
        .map_or(String::new(), |d| format!(", driver {d}"));
    let python = fp
        .python
        .as_ref()
        .and_then(|p| p.version.clone())
        .map_or(String::new(), |v| format!(", Python {v}"));
    format!("{gpus}{driver}{python} [{}]", &hash[..hash.len().min(12)])
}
