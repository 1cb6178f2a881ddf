//! Whole-cache operations over every bucket — clear and prune — and moving
//! outcomes between machines — export and import, as JSON lines, one entry a
//! line, so that a cluster can share what each kind of machine learned.

use super::bucket::{Bucket, Entry, Found, Lookup, Parts, Shelf};
use super::facts::{MeasuredParts, ToolParts};
use super::identity::{DirParts, DirRecord};
use super::job::OutcomeParts;
use super::outcomes::{OutcomeEntry, OutcomeRecord};
use super::warm::{WarmParts, WarmRecord};
use super::{Cache, CacheError, JIT, io, write_atomic};
use crate::fingerprint::{MeasuredFacts, ToolAnswer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A temp file is only stale once its writer is surely gone.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// What `clear` removed.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct ClearReport {
    /// Files removed, in every bucket.
    pub files: usize,
    /// Bucket folders removed (of every version), and the kernels' JIT
    /// store (`jit/`) when there was one.
    pub folders: Vec<PathBuf>,
}

/// What `prune` removed.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries whose subject is gone (a variant directory, a directory of
    /// variants, a tool), that did not parse, or that were not entries.
    pub entries: usize,
    /// Folders of other versions.
    pub schema_dirs: Vec<PathBuf>,
    /// Temp files left by writers that were killed mid-write.
    pub temp_files: usize,
    /// Kernels' JIT caches (`jit/<key>/`) whose kernel is gone, or that
    /// say of no kernel whose they are.
    pub jit_stores: usize,
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

impl Cache {
    /// The bucket folders under the root, of every version.
    fn bucket_folders(&self) -> Vec<(PathBuf, bool)> {
        let mut out: Vec<(PathBuf, bool)> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let current = Bucket::ALL.iter().any(|b| b.folder() == name);
                let other = Bucket::ALL.iter().any(|b| b.is_other_version(&name));
                (current || other).then(|| (e.path(), current))
            })
            .collect();
        out.sort();
        out
    }

    /// Remove every bucket, of every version, and every kernel's JIT
    /// caches; the root and its `CACHEDIR.TAG` stay.
    pub fn clear(&self) -> Result<ClearReport, CacheError> {
        let mut report = ClearReport::default();
        let extra = [JIT, super::TICKETS]
            .map(|name| self.root.join(name))
            .into_iter()
            .filter(|f| std::fs::symlink_metadata(f).is_ok());
        for folder in self
            .bucket_folders()
            .into_iter()
            .map(|(f, _)| f)
            .chain(extra)
        {
            report.files += count_files(&folder);
            remove_all(&folder)?;
            report.folders.push(folder);
        }
        Ok(report)
    }

    /// Remove, in every bucket, entries whose subject is gone, entries that
    /// do not parse or do not match their key, files that are not entries,
    /// and stale temp files; every folder of another version; and the JIT
    /// caches of kernels that are gone, by the same rule (see `prune_jit`).
    pub fn prune(&self) -> Result<PruneReport, CacheError> {
        let mut report = PruneReport {
            jit_stores: self.prune_jit()?,
            ..PruneReport::default()
        };
        self.prune_shelf::<OutcomeParts, OutcomeRecord>(&mut report, |e| !e.record.path.is_dir())?;
        self.prune_shelf::<DirParts, DirRecord>(&mut report, |e| !e.parts.dir.is_dir())?;
        self.prune_shelf::<WarmParts, WarmRecord>(&mut report, |e| !e.parts.root.is_dir())?;
        // Measured facts have no path to check; a new machine has a new
        // fast hash, and the old entry is small.
        self.prune_shelf::<MeasuredParts, MeasuredFacts>(&mut report, |_| false)?;
        self.prune_shelf::<ToolParts, ToolAnswer>(&mut report, |e| !e.parts.tool.exists())?;
        // What the typed shelves above do not cover: files loose in a
        // bucket, and bench results (kept until their type prunes them).
        let loose = Shelf {
            bucket: Bucket::Fingerprints,
            kind: None,
        };
        for shelf in [loose, Shelf::BENCH] {
            self.prune_files(shelf, &mut report)?;
        }
        report.entries += self.prune_tickets();
        for (folder, current) in self.bucket_folders() {
            if !current {
                remove_all(&folder)?;
                report.schema_dirs.push(folder);
            }
        }
        for stray in std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
        {
            if stray
                .file_name()
                .to_string_lossy()
                .starts_with(super::bucket::TEMP_PREFIX)
            {
                report.temp_files += usize::from(remove_if_stale(&stray.path()));
            }
        }
        Ok(report)
    }

    /// Remove the tickets that no binary can use any more: made by a
    /// binary that is gone or replaced, or not a ticket at all. (One whose
    /// other inputs changed is left: the package writes it anew.)
    fn prune_tickets(&self) -> usize {
        #[derive(serde::Deserialize)]
        struct Binary {
            path: PathBuf,
            stat: crate::seen::Seen,
        }
        #[derive(serde::Deserialize)]
        struct Ticket {
            binary: Binary,
        }
        let holds = |path: &Path| {
            let Ok(bytes) = crate::fs::read_small(path) else {
                return false;
            };
            serde_json::from_slice::<Ticket>(&bytes).is_ok_and(|t| {
                std::fs::metadata(&t.binary.path)
                    .is_ok_and(|m| crate::seen::Seen::of(&m) == t.binary.stat)
            })
        };
        let mut removed = 0;
        let shards = std::fs::read_dir(self.root.join(super::TICKETS));
        for shard in shards.into_iter().flatten().flatten() {
            for file in std::fs::read_dir(shard.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = file.path();
                let stale = if path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(".ticket-"))
                {
                    remove_if_stale(&path)
                } else if holds(&path) {
                    false
                } else {
                    std::fs::remove_file(&path).is_ok()
                };
                removed += usize::from(stale);
            }
        }
        removed
    }

    /// Remove the JIT caches of each kernel whose files are gone, as an
    /// outcome goes with its variant; a folder that says of no kernel
    /// whose it is (an older `preflight`'s, a cut-short write, a stray
    /// file) goes once it is over an hour old, as a killed writer's temp
    /// file does, so that a probe making its kernel's folder right now
    /// keeps it. The number removed.
    fn prune_jit(&self) -> Result<usize, CacheError> {
        let mut removed = 0;
        let store = self.root.join(JIT);
        for found in std::fs::read_dir(&store).into_iter().flatten().flatten() {
            let path = found.path();
            let gone = match crate::sandbox::jit_owner(&path) {
                Some(kernel) => !kernel.exists(),
                None => is_stale(&path),
            };
            if gone {
                remove_all(&path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn prune_shelf<P: Parts, R: DeserializeOwned>(
        &self,
        report: &mut PruneReport,
        gone: impl Fn(&Entry<P, R>) -> bool,
    ) -> Result<(), CacheError> {
        for key in self.keys(P::SHELF) {
            match self.read::<P, R>(&key) {
                Lookup::Hit(e) if gone(&e) => {
                    self.remove(P::SHELF, &key)?;
                    report.entries += 1;
                }
                Lookup::Corrupt(_) => report.entries += 1,
                Lookup::Hit(_) | Lookup::Miss => {}
            }
        }
        self.prune_files(P::SHELF, report)
    }

    /// Remove stale temp files and files that are not entries.
    fn prune_files(&self, shelf: Shelf, report: &mut PruneReport) -> Result<(), CacheError> {
        for found in self.scan(shelf) {
            match found {
                Found::Temp(path) => report.temp_files += usize::from(remove_if_stale(&path)),
                Found::Stray(path) => {
                    remove_all(&path)?;
                    report.entries += 1;
                }
                Found::Entry(_) => {}
            }
        }
        Ok(())
    }
}

fn count_files(dir: &Path) -> usize {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    count_files(&e.path())
                } else {
                    1
                }
            })
            .sum(),
        // A bucket folder that is a file counts as one.
        Err(_) => usize::from(dir.exists()),
    }
}

/// Remove a folder or a file; already gone is no error (another process
/// pruned it first).
fn remove_all(path: &Path) -> Result<(), CacheError> {
    let result = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path)(e)),
        _ => Ok(()),
    }
}

/// Whether `path` was last changed over [`STALE_TEMP`] ago.
fn is_stale(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > STALE_TEMP)
}

fn remove_if_stale(path: &Path) -> bool {
    is_stale(path) && std::fs::remove_file(path).is_ok()
}

fn bundle(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Bundle {
        path: path.to_path_buf(),
        source,
    }
}

/// Write every valid outcome entry as one JSON line; the number written.
pub fn export(cache: &Cache, mut out: impl Write) -> Result<usize, CacheError> {
    let all = cache.outcomes().entries();
    let stdout = Path::new("-");
    for e in &all {
        serde_json::to_writer(&mut out, e)?;
        out.write_all(b"\n").map_err(bundle(stdout))?;
    }
    out.flush().map_err(bundle(stdout))?;
    Ok(all.len())
}

/// [`export`] to a file, written atomically: a failed export leaves no
/// partial file.
pub fn export_file(cache: &Cache, file: &Path) -> Result<usize, CacheError> {
    let mut bytes = Vec::new();
    let n = export(cache, &mut bytes)?;
    write_atomic(file, &bytes).map_err(bundle(file))?;
    Ok(n)
}

/// Read JSON lines of outcome entries (`source` names them in errors);
/// validate each (an entry of the current version whose key is the hash of
/// its parts) and write it unless the local entry is as new or newer.
/// Nothing is written for an invalid line.
pub fn import(
    cache: &Cache,
    source: &Path,
    input: impl BufRead,
) -> Result<ImportReport, CacheError> {
    let mut report = ImportReport::default();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(bundle(source))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: OutcomeEntry = match serde_json::from_str(&line) {
            Ok(e) => e,
            Err(e) => {
                report.rejected.push((n, e.to_string()));
                continue;
            }
        };
        if !entry.is_valid_for(&entry.key) {
            report
                .rejected
                .push((n, "entry does not match its key or schema".into()));
            continue;
        }
        if let Some(local) = cache.outcomes().entry(&entry.key).hit()
            && local.created >= entry.created
        {
            report.kept_local += 1;
            continue;
        }
        cache.write(&entry)?;
        report.imported += 1;
    }
    Ok(report)
}
