//! Probe outcomes in the cache: what a record holds, how its key is made
//! from a variant and a smoke source, and the lookup-or-store calls that
//! `check`, `select` and `warmup` share.

use super::identity::Identities;
use super::key::{Key, KeyParts};
use super::store::{CacheError, Entry, Lookup, SCHEMA, Store};
use crate::classify::{Outcome, OutcomeKind, Timings};
use crate::discover::FoundVariant;
use crate::fingerprint::Fingerprint;
use crate::probe::{self, SmokeSource};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What the cache keeps about one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// The variant's name.
    pub variant: String,
    /// Its directory when it was probed.
    pub path: PathBuf,
    /// Its identity (metadata digest or content hash).
    pub identity: String,
    /// The smoke source, for people (`benchmarks`, `library:relu`, `file:…`, `load-only`).
    pub smoke: String,
    /// What probing showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// The machine, in one line.
    pub machine: String,
}

/// Whether an outcome is worth keeping: real evidence about the variant.
/// Faults of preflight, deadlines (often a busy machine) and variants that
/// were not probed are asked again next time.
pub fn cacheable(kind: OutcomeKind) -> bool {
    !matches!(
        kind,
        OutcomeKind::ProbeError | OutcomeKind::Timeout | OutcomeKind::Skipped
    )
}

/// The hash of the probe driver's own code, computed once per process.
fn driver_hash() -> &'static [u8] {
    static HASH: OnceLock<Vec<u8>> = OnceLock::new();
    HASH.get_or_init(|| {
        let mut h = Sha256::new();
        h.update(probe::DRIVER.as_bytes());
        h.update(probe::COMPARE.as_bytes());
        h.finalize().to_vec()
    })
}

/// The identity of a smoke source: its text, and the probe driver's own,
/// since a new driver may reach a different verdict.
pub fn smoke_identity(smoke: &SmokeSource) -> Result<String, std::io::Error> {
    let mut h = Sha256::new();
    h.update(driver_hash());
    let label = match smoke {
        SmokeSource::File(path) => {
            h.update(std::fs::read(path)?);
            "file"
        }
        SmokeSource::Benchmarks { dir, .. } => {
            let mut scripts: Vec<PathBuf> = std::fs::read_dir(dir)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "py"))
                .collect();
            scripts.sort();
            for s in scripts {
                h.update(s.file_name().unwrap_or_default().as_encoded_bytes());
                h.update(std::fs::read(&s)?);
            }
            "benchmarks"
        }
        SmokeSource::Library { kernel, source } => {
            h.update(kernel.as_bytes());
            h.update(source.as_bytes());
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
        SmokeSource::Library { kernel, .. } => format!("library:{kernel}"),
        SmokeSource::LoadOnly => "load-only".into(),
    }
}

/// The outcome cache for one machine.
#[derive(Debug)]
pub struct OutcomeCache {
    store: Store,
    identities: Identities,
    fingerprint: String,
    machine: String,
}

/// A variant's cache key, with what it was made from.
#[derive(Debug, Clone)]
pub struct VariantKey {
    /// The key's inputs.
    pub parts: KeyParts,
    /// The key.
    pub key: Key,
    /// The smoke source's label.
    pub smoke: String,
}

impl OutcomeCache {
    /// The cache at `root` for the machine `fingerprint` describes (full).
    pub fn new(root: &Path, fingerprint: &Fingerprint) -> OutcomeCache {
        let store = Store::at(root);
        let hash = fingerprint.hash();
        OutcomeCache {
            identities: Identities::new(root.join(format!("identity-v{SCHEMA}"))),
            store,
            machine: machine_line(fingerprint, &hash),
            fingerprint: hash,
        }
    }

    /// The store underneath.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The key of `variant` probed with `smoke` on this machine.
    pub fn key(
        &self,
        variant: &FoundVariant,
        smoke: &SmokeSource,
    ) -> Result<VariantKey, CacheError> {
        let (identity, _) = self
            .identities
            .identify(&variant.path, variant.metadata.metadata())?;
        let smoke_id = smoke_identity(smoke).map_err(|source| CacheError::Io {
            path: variant.path.clone(),
            source,
        })?;
        let parts = KeyParts {
            schema: SCHEMA,
            fingerprint: self.fingerprint.clone(),
            variant: identity,
            smoke: smoke_id,
        };
        Ok(VariantKey {
            key: parts.key(),
            parts,
            smoke: smoke_label(smoke),
        })
    }

    /// The key of a job whose identity and smoke identity were computed
    /// elsewhere (a native module: its file, spec and launches).
    pub fn key_of(&self, identity: String, smoke: String, label: String) -> VariantKey {
        let parts = KeyParts {
            schema: SCHEMA,
            fingerprint: self.fingerprint.clone(),
            variant: identity,
            smoke,
        };
        VariantKey {
            key: parts.key(),
            parts,
            smoke: label,
        }
    }

    /// The cached record for a key, if there is a valid one; `Err` says why
    /// an entry was found but ignored (it is removed, and the job probed
    /// again).
    pub fn get(&self, key: &VariantKey) -> Result<Option<ProbeRecord>, String> {
        match self.store.get::<ProbeRecord>(&key.key) {
            Lookup::Hit(entry) => Ok(Some(entry.record)),
            Lookup::Miss => Ok(None),
            Lookup::Corrupt(why) => Err(why),
        }
    }

    /// Keep the outcome of the job `name` at `path`, if it is worth
    /// keeping. A cache that cannot be written is the caller's to report;
    /// the outcome is still good to use.
    pub fn put(
        &self,
        key: &VariantKey,
        name: &str,
        path: &Path,
        outcome: &Outcome,
        timings: &Timings,
    ) -> Result<(), CacheError> {
        if !cacheable(outcome.kind) {
            return Ok(());
        }
        let record = ProbeRecord {
            variant: name.to_owned(),
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            identity: key.parts.variant.clone(),
            smoke: key.smoke.clone(),
            outcome: outcome.clone(),
            timings: *timings,
            machine: self.machine.clone(),
        };
        self.store
            .put(&Entry::new(key.parts.clone(), record))
            .map(drop)
    }
}

/// One line describing a machine: GPUs, driver, Python, hash prefix.
pub fn machine_line(fp: &Fingerprint, hash: &str) -> String {
    let gpus = if fp.gpus.devices.is_empty() {
        "no GPU".to_string()
    } else {
        let mut names: Vec<String> = fp
            .gpus
            .devices
            .iter()
            .map(|d| {
                let model = d.model.clone().unwrap_or_else(|| "NVIDIA GPU".into());
                match &d.compute_capability {
                    Some(cc) => format!("{model} (sm {cc})"),
                    None => model,
                }
            })
            .collect();
        names.dedup();
        names.join(", ")
    };
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
