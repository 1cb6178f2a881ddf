//! The cache's paths, built from typed pieces as uv-cache builds them:
//! bucket (kind of record, version in the folder name) → shelf (a folder in
//! the bucket when it holds more than one kind) → shard (the key's first two
//! hex digits) → entry (`<key>.json`). Every entry carries what its key was
//! computed from, and is trusted only when that hashes to its file name.

use super::key::Key;
use super::{Cache, CacheError, io, write_atomic};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs;
use std::path::{Path, PathBuf};

/// How the temp files of [`write_atomic`] start; what `prune` looks for.
pub(crate) const TEMP_PREFIX: &str = ".tmp";

/// One kind of cached record. Its format version is in its folder name, so
/// that a folder of another version is never misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Probe outcomes, by machine and job.
    Outcomes,
    /// Stat records of directories of variants, which spare hashing files
    /// that did not change.
    Identities,
    /// What the fingerprint measured or asked: full-fingerprint facts and
    /// tool versions.
    Fingerprints,
    /// Bench results.
    Bench,
}

impl Bucket {
    /// Every bucket: what `clear` and `prune` go through.
    pub const ALL: [Bucket; 4] = [
        Bucket::Outcomes,
        Bucket::Identities,
        Bucket::Fingerprints,
        Bucket::Bench,
    ];

    /// The name in the folder name.
    pub fn name(self) -> &'static str {
        match self {
            Bucket::Outcomes => "outcomes",
            Bucket::Identities => "identities",
            Bucket::Fingerprints => "fingerprints",
            Bucket::Bench => "bench",
        }
    }

    /// The version of its format; raised whenever a record of this bucket
    /// changes shape or meaning.
    pub fn version(self) -> u32 {
        match self {
            // v2: keyed by the job identity (executor, name, device,
            // metadata.json, files, smoke, depth, protocol).
            Bucket::Outcomes => 2,
            Bucket::Identities => 2,
            Bucket::Fingerprints => 2,
            Bucket::Bench => 1,
        }
    }

    /// Names the bucket's folders had before, which are never read and are
    /// removed by `prune` (`identity-v1`, `fingerprint-v1`).
    fn former_names(self) -> &'static [&'static str] {
        match self {
            Bucket::Identities => &["identity"],
            Bucket::Fingerprints => &["fingerprint"],
            Bucket::Outcomes | Bucket::Bench => &[],
        }
    }

    /// Its folder name: `outcomes-v2`.
    pub fn folder(self) -> String {
        format!("{}-v{}", self.name(), self.version())
    }

    /// Whether a folder name is one of this bucket's other versions (or a
    /// former name): never read, removed by `prune`.
    pub fn is_other_version(self, folder: &str) -> bool {
        let Some((name, version)) = folder.rsplit_once("-v") else {
            return false;
        };
        let ours = name == self.name() || self.former_names().contains(&name);
        ours && !version.is_empty()
            && version.bytes().all(|b| b.is_ascii_digit())
            && folder != self.folder()
    }
}

/// Where entries of one kind live: a bucket, and a folder in it when the
/// bucket holds more than one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shelf {
    /// The bucket.
    pub bucket: Bucket,
    /// The folder in it, if any.
    pub kind: Option<&'static str>,
}

impl Shelf {
    /// Probe outcomes.
    pub const OUTCOMES: Shelf = Shelf {
        bucket: Bucket::Outcomes,
        kind: None,
    };
    /// Stat records of directories of variants.
    pub const IDENTITIES: Shelf = Shelf {
        bucket: Bucket::Identities,
        kind: None,
    };
    /// Warm records: the plan of one directory of variants on one machine,
    /// with the `stat`s that vouch for it (see [`super::warm`]).
    pub const WARM: Shelf = Shelf {
        bucket: Bucket::Identities,
        kind: Some("warm"),
    };
    /// Full-fingerprint facts.
    pub const MEASURED: Shelf = Shelf {
        bucket: Bucket::Fingerprints,
        kind: Some("measured"),
    };
    /// Tool versions.
    pub const TOOLS: Shelf = Shelf {
        bucket: Bucket::Fingerprints,
        kind: Some("tools"),
    };
    /// Bench results.
    pub const BENCH: Shelf = Shelf {
        bucket: Bucket::Bench,
        kind: None,
    };

    /// Its folder under `root`.
    pub fn dir(self, root: &Path) -> PathBuf {
        let bucket = root.join(self.bucket.folder());
        match self.kind {
            Some(kind) => bucket.join(kind),
            None => bucket,
        }
    }

    /// The file of `key` under `root`.
    pub fn path(self, root: &Path, key: &Key) -> PathBuf {
        let hex = key.as_str();
        self.dir(root).join(&hex[..2]).join(format!("{hex}.json"))
    }
}

/// What a key is computed from. An entry is trusted only when its parts
/// hash to its key and its key is its file name.
pub trait Parts: Serialize + DeserializeOwned {
    /// Where entries keyed by these parts live.
    const SHELF: Shelf;
    /// The key.
    fn key(&self) -> Key;
    /// Whether parts of this shape are of the bucket's current version;
    /// parts that name their version themselves say so here.
    fn is_current(&self) -> bool {
        true
    }
}

/// One cached record with what proves it belongs to its key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry<P, R> {
    /// The key: [`Parts::key`] of `parts`.
    pub key: Key,
    /// What the key was computed from.
    pub parts: P,
    /// Unix time (seconds) when the record was made.
    pub created: u64,
    /// Version of preflight that made it.
    pub tool_version: String,
    /// The record itself.
    pub record: R,
}

impl<P: Parts, R> Entry<P, R> {
    /// A new entry for `parts`, made now by this version of preflight.
    pub fn new(parts: P, record: R) -> Self {
        Entry {
            key: parts.key(),
            parts,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            record,
        }
    }

    /// Whether the entry is what `key` names: its key, and the hash of its
    /// parts, which are of the current version.
    pub fn is_valid_for(&self, key: &Key) -> bool {
        &self.key == key && self.parts.is_current() && self.parts.key() == *key
    }
}

/// What reading an entry found.
#[derive(Debug)]
pub enum Lookup<T> {
    /// A valid entry.
    Hit(T),
    /// No entry.
    Miss,
    /// A file that does not parse or does not match its key: treated as a
    /// miss, and removed.
    Corrupt(String),
}

impl<T> Lookup<T> {
    /// The hit, if it is one.
    pub fn hit(self) -> Option<T> {
        match self {
            Lookup::Hit(t) => Some(t),
            Lookup::Miss | Lookup::Corrupt(_) => None,
        }
    }

    fn map<U>(self, f: impl FnOnce(T) -> U) -> Lookup<U> {
        match self {
            Lookup::Hit(t) => Lookup::Hit(f(t)),
            Lookup::Miss => Lookup::Miss,
            Lookup::Corrupt(why) => Lookup::Corrupt(why),
        }
    }
}

/// A file found on a shelf.
#[derive(Debug)]
pub(crate) enum Found {
    /// `<key>.json` in its shard.
    Entry(Key),
    /// A temp file of a writer, live or killed.
    Temp(PathBuf),
    /// Anything else: never written by preflight.
    Stray(PathBuf),
}

impl Cache {
    /// Read the entry of `key`; an invalid one is removed.
    pub fn read<P: Parts, R: DeserializeOwned>(&self, key: &Key) -> Lookup<Entry<P, R>> {
        let path = P::SHELF.path(&self.root, key);
        let bytes = match crate::fs::read_small(&path) {
            Ok(b) => b,
            // Missing, or a cache that cannot be read at all (not a
            // directory, no permission): nothing known, nothing to remove.
            Err(_) => return Lookup::Miss,
        };
        let why = match serde_json::from_slice::<Entry<P, R>>(&bytes) {
            Ok(entry) if entry.is_valid_for(key) => return Lookup::Hit(entry),
            Ok(_) => format!("{}: entry does not match its key", path.display()),
            Err(e) => format!("{}: {e}", path.display()),
        };
        // Never trusted again; a concurrent rewrite of a good entry may race
        // this removal, which only costs finding the fact out again.
        let _ = fs::remove_file(&path);
        Lookup::Corrupt(why)
    }

    /// Write an entry atomically under its key.
    pub fn write<P: Parts, R: Serialize>(
        &self,
        entry: &Entry<P, R>,
    ) -> Result<PathBuf, CacheError> {
        let path = P::SHELF.path(&self.root, &entry.key);
        if let Some(shard) = path.parent() {
            self.ensure_dir(shard)?;
        }
        let bytes = serde_json::to_vec_pretty(entry)?;
        write_atomic(&path, &bytes).map_err(io(&path))?;
        Ok(path)
    }

    /// The record of `key`, for callers that need only the record.
    pub(crate) fn record<P: Parts, R: DeserializeOwned>(&self, key: &Key) -> Lookup<R> {
        self.read::<P, R>(key).map(|e| e.record)
    }

    /// Remove the entry of `key` from `shelf`; whether there was one.
    pub fn remove(&self, shelf: Shelf, key: &Key) -> Result<bool, CacheError> {
        let path = shelf.path(&self.root, key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// The keys on `shelf`, sorted.
    pub fn keys(&self, shelf: Shelf) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .scan(shelf)
            .into_iter()
            .filter_map(|f| match f {
                Found::Entry(key) => Some(key),
                Found::Temp(_) | Found::Stray(_) => None,
            })
            .collect();
        keys.sort();
        keys
    }

    /// Every file on `shelf`, by what it is.
    pub(crate) fn scan(&self, shelf: Shelf) -> Vec<Found> {
        let mut out = Vec::new();
        let entries = |dir: &Path| {
            fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .collect::<Vec<_>>()
        };
        for shard in entries(&shelf.dir(&self.root)) {
            let name = shard.file_name().to_string_lossy().into_owned();
            let is_shard = name.len() == 2 && shard.file_type().is_ok_and(|t| t.is_dir());
            if !is_shard {
                // A shelf's sub-shelves (the fingerprints bucket's `tools/`)
                // are scanned as shelves of their own.
                if !shard.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(classify_file(&name, shard.path()));
                }
                continue;
            }
            let shard_name = name;
            for file in entries(&shard.path()) {
                let name = file.file_name().to_string_lossy().into_owned();
                // An entry in the wrong shard is never read by its key.
                match name.strip_suffix(".json").map(Key::parse) {
                    Some(Ok(key))
                        if key.as_str().starts_with(&shard_name) && key.as_str() == &name[..64] =>
                    {
                        out.push(Found::Entry(key))
                    }
                    _ => out.push(classify_file(&name, file.path())),
                }
            }
        }
        out
    }
}

fn classify_file(name: &str, path: PathBuf) -> Found {
    if name.starts_with(TEMP_PREFIX) {
        Found::Temp(path)
    } else {
        Found::Stray(path)
    }
}
