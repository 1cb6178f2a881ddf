//! Whole-cache operations: list, prune, export and import.
//!
//! Export and import move outcomes between machines as JSON lines, one entry
//! a line, so that a cluster can share what each kind of machine learned.

use super::key::Key;
use super::store::{CacheError, Entry, Lookup, Store};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// What `prune` removed.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries whose variant is gone, or that did not parse.
    pub entries: usize,
    /// Folders of other schema versions.
    pub schema_dirs: Vec<PathBuf>,
    /// Temp files left by writers that were killed mid-write.
    pub temp_files: usize,
}

/// What `import` did.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct ImportReport {
    /// Entries written (new, or newer than the local one).
    pub imported: usize,
    /// Entries skipped because the local one is as new or newer.
    pub kept_local: usize,
    /// Lines rejected, with their line number and why.
    pub rejected: Vec<(usize, String)>,
}

/// Every valid entry; invalid ones are removed on the way.
pub fn entries<T: DeserializeOwned>(store: &Store) -> Vec<Entry<T>> {
    store
        .keys()
        .into_iter()
        .filter_map(|(key, _)| match store.get(&key) {
            Lookup::Hit(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// Remove entries that `keep` rejects (their variant is gone), entries that
/// do not parse, folders of other schemas, and stale temp files.
pub fn prune<T: DeserializeOwned>(
    store: &Store,
    keep: impl Fn(&Entry<T>) -> bool,
) -> Result<PruneReport, CacheError> {
    let mut report = PruneReport::default();
    for (key, _) in store.keys() {
        match store.get::<T>(&key) {
            Lookup::Hit(e) if keep(&e) => {}
            Lookup::Hit(_) => {
                store.remove(&key)?;
                report.entries += 1;
            }
            Lookup::Corrupt(_) => report.entries += 1,
            Lookup::Miss => {}
        }
    }
    for dir in store.foreign_schema_dirs() {
        std::fs::remove_dir_all(&dir).map_err(|source| CacheError::Io {
            path: dir.clone(),
            source,
        })?;
        report.schema_dirs.push(dir);
    }
    for tmp in store.stale_temp_files() {
        // A temp file is only stale once its writer is surely gone.
        let old = std::fs::metadata(&tmp)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if old && std::fs::remove_file(&tmp).is_ok() {
            report.temp_files += 1;
        }
    }
    Ok(report)
}

/// Write every valid entry as one JSON line; the number written.
pub fn export<T: DeserializeOwned + Serialize>(
    store: &Store,
    mut out: impl Write,
) -> Result<usize, CacheError> {
    let all = entries::<T>(store);
    for e in &all {
        serde_json::to_writer(&mut out, e)?;
        out.write_all(b"\n").map_err(|source| CacheError::Io {
            path: PathBuf::from("<export>"),
            source,
        })?;
    }
    out.flush().map_err(|source| CacheError::Io {
        path: PathBuf::from("<export>"),
        source,
    })?;
    Ok(all.len())
}

/// Read JSON lines of entries; validate each (it parses as an entry of this
/// schema whose key is the hash of its parts) and write it unless the local
/// entry is as new or newer. Nothing is written for an invalid line.
pub fn import<T: DeserializeOwned + Serialize>(
    store: &Store,
    input: impl BufRead,
) -> Result<ImportReport, CacheError> {
    let mut report = ImportReport::default();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|source| CacheError::Io {
            path: PathBuf::from("<import>"),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry<T> = match serde_json::from_str(&line) {
            Ok(e) => e,
            Err(e) => {
                report.rejected.push((n, e.to_string()));
                continue;
            }
        };
        let key: Key = entry.key.clone();
        if !entry.is_valid_for(&key) {
            report
                .rejected
                .push((n, "entry does not match its key or schema".into()));
            continue;
        }
        if let Lookup::Hit(local) = store.get::<T>(&key)
            && local.created >= entry.created
        {
            report.kept_local += 1;
            continue;
        }
        store.put(&entry)?;
        report.imported += 1;
    }
    Ok(report)
}
