//! Warm records: what one directory of variants was found to be on one
//! machine, so that a warm `select` is answered by one read and a `stat` of
//! each file its answer depends on, instead of listing the directory,
//! reading every `metadata.json`, hashing nothing but still checking every
//! file of every variant, and reading one outcome entry per variant.
//!
//! A record never answers what a cold run would not: every input of the
//! plan is either in its key (the directory, the full fingerprint, the
//! plan's options, this very binary) or witnessed by a `stat` taken before
//! it was read (the directory's listing, each variant's folders and files,
//! the smoke sources, each outcome entry). A witness holds only while the
//! `stat` is unchanged, and is written only when it was taken well after
//! its file last changed (git's "racy" rule: [`RACY_NS`]), so that a change
//! within one tick of the file system's clock cannot hide behind an equal
//! modification time.

use super::bucket::{Entry, Lookup, Parts, Shelf};
use super::key::Key;
use super::{Cache, CacheError};
use crate::classify::{Outcome, Timings};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Format of [`WarmParts`] and [`WarmRecord`]; part of every key.
const SCHEMA: u32 = 2;

/// The wall clock and the "racy" rule, shared with tickets
/// ([`crate::seen`]).
pub use crate::seen::{RACY_NS, Seen, now_ns};

/// A path and what a `stat` of it showed: `None`, that it did not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    /// The path, links followed when it is checked.
    pub path: PathBuf,
    /// What was seen.
    pub seen: Option<Seen>,
}

impl Witness {
    /// A `stat` of `path` now.
    pub fn take(path: &Path) -> Witness {
        Witness {
            path: path.to_path_buf(),
            seen: crate::seen::metadata(path).ok().map(|m| Seen::of(&m)),
        }
    }

    /// Whether a `stat` now shows the same (one system call).
    pub fn holds(&self) -> bool {
        let now = crate::seen::metadata(&self.path).ok();
        match (&self.seen, now) {
            (None, None) => true,
            // A folder recorded as such must still be one, and the same.
            (Some(seen), Some(meta)) => *seen == Seen::of(&meta),
            _ => false,
        }
    }

    /// [`Witness::holds`] for a path relative to `dir`.
    pub fn holds_in(&self, dir: &Path) -> bool {
        Witness {
            path: dir.join(&self.path),
            seen: self.seen,
        }
        .holds()
    }

    /// Whether it was taken at `taken_ns` well after its file last changed,
    /// so that an equal `stat` later proves an unchanged file.
    pub fn settled(&self, taken_ns: i128) -> bool {
        self.seen.is_none_or(|s| taken_ns - s.mtime_ns >= RACY_NS)
    }
}

/// What a warm record is keyed by: everything that decides the plan of a
/// directory of variants and is not witnessed by a `stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmParts {
    /// `SCHEMA`.
    pub schema: u32,
    /// The directory whose children are the variants (absolute).
    pub root: PathBuf,
    /// The full fingerprint's hash: the machine, which decides each
    /// variant's acceptance by name and every outcome key.
    pub fingerprint: String,
    /// How the jobs were planned (the options, the protocol and outcome
    /// versions, the probe driver), as the run layer spells it.
    pub plan: String,
    /// The binary that made the record: another build may plan or key
    /// differently without saying so in a version.
    pub binary: Witness,
}

impl Parts for WarmParts {
    const SHELF: Shelf = Shelf::WARM;

    fn key(&self) -> Key {
        // Plain strings and numbers: serializing cannot fail.
        Key::of_bytes(&serde_json::to_vec(self).unwrap_or_default())
    }

    fn is_current(&self) -> bool {
        self.schema == SCHEMA
    }
}

impl WarmParts {
    /// The parts for `root` on the machine `fingerprint` hashes to, planned
    /// as `plan` says, by the running binary (`None` when it cannot be
    /// found: no record then).
    pub fn new(root: &Path, fingerprint: &str, plan: String) -> Option<WarmParts> {
        let binary = Witness::take(&crate::fs::current_exe()?);
        binary.seen.is_some().then(|| WarmParts {
            schema: SCHEMA,
            root: root.to_path_buf(),
            fingerprint: fingerprint.to_string(),
            plan,
            binary,
        })
    }
}

/// One job of the plan, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmJob {
    /// The variant's name.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
    /// Whether the hub accepts it by name here.
    pub accepted: bool,
    /// Whether it is not probed here (another OS or CPU).
    pub skipped: bool,
    /// Its folders and files, as its cache key was computed from them
    /// (paths relative to its directory).
    pub files: Vec<Witness>,
    /// Its cached outcome, with the `stat` of the entry it was read from;
    /// `None`: none was kept (a transient outcome, or not probed).
    pub outcome: Option<WarmOutcome>,
}

/// A cached outcome and the entry that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmOutcome {
    /// The outcome entry's file: rewritten, imported or removed, it no
    /// longer holds.
    pub entry: Witness,
    /// What probing showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// The outcome record's digest of the installed packages (see
    /// [`crate::cache::OutcomeRecord::packages`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<String>,
}

/// The plan of one directory of variants on one machine, with what
/// vouches for each part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmRecord {
    /// The directory of variants: its listing.
    pub root: Witness,
    /// What chose and identified the smoke source (the repo's
    /// `benchmarks/` folder and its scripts).
    pub smoke: Vec<Witness>,
    /// The plan's warnings (entries that are not variants), said again.
    pub warnings: Vec<String>,
    /// Every job, in the hub's preference order.
    pub jobs: Vec<WarmJob>,
}

/// The warm records of this cache.
#[derive(Debug, Clone, Copy)]
pub struct WarmRecords<'c> {
    cache: &'c Cache,
}

impl Cache {
    /// The warm records.
    pub(crate) fn warm(&self) -> WarmRecords<'_> {
        WarmRecords { cache: self }
    }
}

impl WarmRecords<'_> {
    /// The record of `parts`; one that does not parse or does not match
    /// its key is removed and reported (`Corrupt`, with its path).
    pub fn get(&self, parts: &WarmParts) -> Lookup<WarmRecord> {
        match self.cache.read::<WarmParts, WarmRecord>(&parts.key()) {
            Lookup::Hit(e) => Lookup::Hit(e.record),
            Lookup::Miss => Lookup::Miss,
            Lookup::Corrupt(why) => Lookup::Corrupt(why),
        }
    }

    /// Keep `record` under `parts`: compact JSON, since a warm `select`
    /// reads and parses the whole of it.
    pub fn put(&self, parts: WarmParts, record: &WarmRecord) -> Result<PathBuf, CacheError> {
        let entry = Entry::new(parts, record);
        let path = Shelf::WARM.path(self.cache.root(), &entry.key);
        if let Some(shard) = path.parent() {
            self.cache.ensure_dir(shard)?;
        }
        let bytes = serde_json::to_vec(&entry)?;
        super::write_atomic(&path, &bytes).map_err(super::io(&path))?;
        Ok(path)
    }
}

/// An entry read together with the `stat` of the very file it was read
/// from (one open: a concurrent rewrite is another inode, never a mix).
pub(crate) fn read_witnessed<P: Parts, R: DeserializeOwned>(
    cache: &Cache,
    key: &Key,
) -> Option<(Entry<P, R>, Witness)> {
    let path = P::SHELF.path(cache.root(), key);
    let mut file = crate::fs::open_regular(&path).ok()?;
    let seen = Seen::of(&file.metadata().ok()?);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let entry: Entry<P, R> = serde_json::from_slice(&bytes).ok()?;
    if !entry.is_valid_for(key) {
        return None;
    }
    let witness = Witness {
        path,
        seen: Some(seen),
    };
    Some((entry, witness))
}
