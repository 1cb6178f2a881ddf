//! The on-disk store: one small JSON file per key, written atomically.
//!
//! Layout: `<root>/CACHEDIR.TAG` and `<root>/outcomes-v<SCHEMA>/<ab>/<key>.json`,
//! with the schema version in the folder name so an old layout is never
//! misread. Directories are 0700, files 0600. Every write goes to a temp file
//! in the same directory, is fsynced, then renamed over the target: readers
//! never see a torn file and concurrent writers of one key are harmless.

use super::key::{Key, KeyParts};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Version of the entry format; part of every key and of the folder name.
pub const SCHEMA: u32 = 1;

const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by kernel-preflight.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// A cache operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory cannot be created or written.
    #[error("cache directory {}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An entry cannot be serialized.
    #[error("cannot encode cache entry: {0}")]
    Encode(#[from] serde_json::Error),
    /// A key given by a person that is not a 64-digit hex string.
    #[error("invalid cache key {0:?}: expected 64 hex digits (see `preflight cache ls`)")]
    BadKey(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One cached record with what proves it belongs to its key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry<T> {
    /// Entry format version.
    pub schema: u32,
    /// The key: sha256 of `parts`.
    pub key: Key,
    /// What the key was computed from.
    pub parts: KeyParts,
    /// Unix time (seconds) when the record was made.
    pub created: u64,
    /// Version of preflight that made it.
    pub tool_version: String,
    /// The record itself.
    pub record: T,
}

impl<T> Entry<T> {
    /// A new entry for `parts`, made now by this version of preflight.
    pub fn new(parts: KeyParts, record: T) -> Self {
        Entry {
            schema: SCHEMA,
            key: parts.key(),
            parts,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            record,
        }
    }

    /// Whether the entry is what its key says: current schema, and the key is
    /// the hash of its parts.
    pub fn is_valid_for(&self, key: &Key) -> bool {
        self.schema == SCHEMA && &self.key == key && self.parts.key() == *key
    }
}

/// What reading an entry found.
#[derive(Debug)]
pub enum Lookup<T> {
    /// A valid entry.
    Hit(Entry<T>),
    /// No entry.
    Miss,
    /// A file that does not parse or does not match its key: treated as a
    /// miss, and removed.
    Corrupt(String),
}

/// The outcome cache at one root.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The default root: `PREFLIGHT_CACHE`, else `$XDG_CACHE_HOME/kernel-preflight`,
    /// else `~/.cache/kernel-preflight`.
    pub fn default_root() -> PathBuf {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        var("PREFLIGHT_CACHE")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("kernel-preflight")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/kernel-preflight")))
            .unwrap_or_else(|| std::env::temp_dir().join("kernel-preflight"))
    }

    /// A store at `root`; nothing is created until the first write.
    pub fn at(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder that holds the entries of the current schema.
    pub fn entries_dir(&self) -> PathBuf {
        self.root.join(format!("outcomes-v{SCHEMA}"))
    }

    fn path_of(&self, key: &Key) -> PathBuf {
        let hex = key.as_str();
        self.entries_dir()
            .join(&hex[..2])
            .join(format!("{hex}.json"))
    }

    /// Create the root (0700) with its `CACHEDIR.TAG`.
    pub fn ensure(&self) -> Result<(), CacheError> {
        create_private_dir(&self.root)?;
        let tag = self.root.join("CACHEDIR.TAG");
        if !tag.exists() {
            write_atomic(&tag, TAG.as_bytes())?;
        }
        Ok(())
    }

    /// Read the entry of `key`.
    pub fn get<T: DeserializeOwned>(&self, key: &Key) -> Lookup<T> {
        let path = self.path_of(key);
        let bytes = match crate::fs::read_small(&path) {
            Ok(b) => b,
            // Missing, or a cache that cannot be read at all (not a
            // directory, no permission): nothing known, nothing to remove.
            Err(_) => return Lookup::Miss,
        };
        let why = match serde_json::from_slice::<Entry<T>>(&bytes) {
            Ok(entry) if entry.is_valid_for(key) => return Lookup::Hit(entry),
            Ok(_) => format!("{}: entry does not match its key", path.display()),
            Err(e) => format!("{}: {e}", path.display()),
        };
        // Never trusted again; a concurrent rewrite of a good entry may race
        // this removal, which only costs a re-probe.
        let _ = fs::remove_file(&path);
        Lookup::Corrupt(why)
    }

    /// Write an entry atomically under its key.
    pub fn put<T: Serialize>(&self, entry: &Entry<T>) -> Result<PathBuf, CacheError> {
        self.ensure()?;
        let path = self.path_of(&entry.key);
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(entry)?;
        write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Every entry file of the current schema, with its key.
    pub fn keys(&self) -> Vec<(Key, PathBuf)> {
        let mut out = Vec::new();
        let Ok(shards) = fs::read_dir(self.entries_dir()) else {
            return out;
        };
        for shard in shards.filter_map(Result::ok) {
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for file in files.filter_map(Result::ok) {
                let name = file.file_name().to_string_lossy().into_owned();
                if let Some(key) = name.strip_suffix(".json").and_then(|k| Key::parse(k).ok()) {
                    out.push((key, file.path()));
                }
            }
        }
        out.sort();
        out
    }

    /// Remove the entry of `key`; whether there was one.
    pub fn remove(&self, key: &Key) -> Result<bool, CacheError> {
        let path = self.path_of(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Folders of older (or newer) schemas, which this version never reads.
    pub fn foreign_schema_dirs(&self) -> Vec<PathBuf> {
        let current = format!("outcomes-v{SCHEMA}");
        fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("outcomes-v") && name != current
            })
            .map(|e| e.path())
            .collect()
    }

    /// Leftover temp files of writers that were killed mid-write.
    pub fn stale_temp_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in fs::read_dir(self.entries_dir())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            for f in fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
            {
                if f.file_name().to_string_lossy().starts_with(".tmp") {
                    out.push(f.path());
                }
            }
        }
        out
    }
}

/// Create `dir` and its parents; the leaf is made private (0700).
pub fn create_private_dir(dir: &Path) -> Result<(), CacheError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))
}

/// Write `bytes` to `path` so that readers see the old file or the new one,
/// never a part: temp file in the same directory (0600), fsync, rename, fsync
/// of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
