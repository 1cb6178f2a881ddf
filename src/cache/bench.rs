//! Bench results in the cache: one record per timed variant, keyed by the
//! machine, the variant's job identity and the workload, so that `select
//! --fastest` ranks by measured medians of this machine only.

use super::bucket::{Bucket, Entry, Lookup, Parts, Shelf};
use super::job::JobIdentity;
use super::key::Key;
use super::{Cache, CacheError};
use crate::stats::{StopRule, Summary};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The workload name a bench without `--workload` is kept under.
pub const DEFAULT_WORKLOAD: &str = "default";

/// What a bench result's key is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchParts {
    /// The bench bucket's version when the entry was made.
    pub schema: u32,
    /// Hash of the machine's full fingerprint.
    pub fingerprint: String,
    /// The variant's job, as its probe is keyed.
    pub job: JobIdentity,
    /// The workload as asked for (`--workload`), or [`DEFAULT_WORKLOAD`].
    pub workload: String,
}

impl Parts for BenchParts {
    const SHELF: Shelf = Shelf::BENCH;

    /// sha256(fingerprint ‖ job ‖ workload ‖ schema), each length-prefixed.
    fn key(&self) -> Key {
        // A job identity always serializes: strings, enums and integers.
        let job = serde_json::to_vec(&self.job).unwrap_or_default();
        Key::of_fields([
            self.fingerprint.as_bytes(),
            &job,
            self.workload.as_bytes(),
            &self.schema.to_le_bytes(),
        ])
    }

    fn is_current(&self) -> bool {
        self.schema == Bucket::Bench.version()
    }
}

/// A bench result's key, with what it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchKey {
    /// The key.
    pub key: Key,
    /// Its inputs.
    pub parts: BenchParts,
}

impl BenchKey {
    /// The key of `job`'s results for `workload` on the machine whose full
    /// fingerprint hashes to `fingerprint`.
    pub fn new(fingerprint: &str, job: JobIdentity, workload: &str) -> BenchKey {
        let parts = BenchParts {
            schema: Bucket::Bench.version(),
            fingerprint: fingerprint.to_owned(),
            job,
            workload: workload.to_owned(),
        };
        BenchKey {
            key: parts.key(),
            parts,
        }
    }
}

/// One timed variant, as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// The variant's name.
    pub variant: String,
    /// What was timed (`Relu.small`, `smoke`).
    pub label: String,
    /// Statistics of the kept samples (milliseconds).
    pub summary: Summary,
    /// The kept samples, in the order taken: what a later comparison
    /// bootstraps from.
    pub samples_ms: Vec<f64>,
    /// The round each sample was taken in (empty in records kept before
    /// rounds were): comparisons pair rounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<u32>,
    /// The rule that ended the timing.
    pub stop: StopRule,
    /// Samples dropped because the device throttled.
    pub dropped_throttled: u32,
    /// `device_events` or `host_clock`.
    pub timer: String,
    /// Whether the L2 cache was flushed before each sample.
    pub flush_l2: bool,
    /// The machine, in one line.
    pub machine: String,
}

/// The bench bucket.
#[derive(Debug, Clone, Copy)]
pub struct BenchResults<'c> {
    cache: &'c Cache,
}

impl Cache {
    /// The bench bucket.
    pub(crate) fn bench(&self) -> BenchResults<'_> {
        BenchResults { cache: self }
    }
}

impl BenchResults<'_> {
    /// The kept result of a key, if a valid one is kept.
    pub fn get(&self, key: &BenchKey) -> Lookup<BenchRecord> {
        self.cache.record::<BenchParts, BenchRecord>(&key.key)
    }

    /// Keep a result under its key (the last bench of a key wins).
    pub fn put(&self, key: &BenchKey, record: BenchRecord) -> Result<PathBuf, CacheError> {
        self.cache.write(&Entry::new(key.parts.clone(), record))
    }
}
