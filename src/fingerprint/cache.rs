//! The fingerprint's own small cache files: versions that tools printed,
//! keyed by the tool's `stat`, and measured facts, keyed by the fast
//! fingerprint. Written atomically (temp file, fsync, rename) with private
//! permissions; a file that does not parse is a miss.

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The folder of the fingerprint's files; the schema version is in its name
/// so that an older layout is never misread.
pub(crate) fn dir(cache_root: &Path) -> PathBuf {
    cache_root.join("fingerprint-v1")
}

/// Read a JSON file; missing or unparsable is `None`.
pub(crate) fn read<T: DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Write a JSON file atomically: readers see the old file or the new one,
/// never a torn one. Directories are created 0700, the file is 0600.
pub(crate) fn write<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache path has no parent"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stat {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    device: u64,
}

impl Stat {
    /// The `stat` of a file, following symbolic links.
    pub(crate) fn of(path: &Path) -> Option<Stat> {
        let m = std::fs::metadata(path).ok()?;
        Some(Stat {
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            inode: m.ino(),
            device: m.dev(),
        })
    }
}

/// What a tool said about its version, and the `stat` it had then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ToolAnswer {
    pub stat: Stat,
    /// The version it printed, if it printed one.
    pub version: Option<String>,
    /// Why it gave none (failed to start, exit status, unreadable output).
    pub problem: Option<String>,
}

/// What asking a tool for its version gave.
pub(crate) enum Asked {
    /// It printed this version.
    Version(String),
    /// It cannot say (exit status, unreadable output): a fact about it.
    Failed(String),
    /// It could not be asked this time (did not start in time, timed out).
    Inconclusive(String),
}

/// Tool answers by canonical path, loaded once and saved if anything changed.
#[derive(Debug, Default)]
pub(crate) struct ToolCache {
    path: Option<PathBuf>,
    entries: BTreeMap<String, ToolAnswer>,
    dirty: bool,
}

impl ToolCache {
    /// The cache under `cache_root`; `None`: an in-memory cache only.
    pub(crate) fn load(cache_root: Option<&Path>) -> ToolCache {
        let path = cache_root.map(|r| dir(r).join("tools.json"));
        let entries = path.as_deref().and_then(read).unwrap_or_default();
        ToolCache {
            path,
            entries,
            dirty: false,
        }
    }

    /// The answer for `tool` if its `stat` is unchanged; otherwise ask
    /// `measure` and remember what it said, unless the answer was
    /// inconclusive (a timeout says nothing about the tool).
    pub(crate) fn answer(&mut self, tool: &Path, measure: impl FnOnce() -> Asked) -> ToolAnswer {
        let key = std::fs::canonicalize(tool)
            .unwrap_or_else(|_| tool.to_path_buf())
            .to_string_lossy()
            .into_owned();
        let stat = Stat::of(tool);
        if let (Some(stat), Some(hit)) = (&stat, self.entries.get(&key))
            && &hit.stat == stat
        {
            return hit.clone();
        }
        let (version, problem, keep) = match measure() {
            Asked::Version(v) => (Some(v), None, true),
            Asked::Failed(e) => (None, Some(e), true),
            Asked::Inconclusive(e) => (None, Some(e), false),
        };
        let Some(stat) = stat else {
            return ToolAnswer {
                stat: Stat::default(),
                version,
                problem,
            };
        };
        let answer = ToolAnswer {
            stat,
            version,
            problem,
        };
        if keep {
            self.entries.insert(key, answer.clone());
            self.dirty = true;
        }
        answer
    }

    /// Write the answers back if they changed, forgetting tools that are
    /// gone; a read-only cache is no error.
    pub(crate) fn save(&mut self) {
        if let (true, Some(path)) = (self.dirty, &self.path) {
            self.entries.retain(|tool, _| Path::new(tool).exists());
            let _ = write(path, &self.entries);
        }
    }
}
