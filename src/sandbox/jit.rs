//! Each kernel's own JIT caches, kept between its probes: the store
//! `preflight` names (its outcome cache's `jit/`), one folder per kernel,
//! and in each the record of whose it is, so that whoever prunes the store
//! can tell a kernel that is gone from one that is not (the key is a hash
//! of where the kernel's files are, which cannot be read back).
//!
//! ```text
//! <store>/<key>/kernel       the kernel's files, as a path (raw bytes)
//! <store>/<key>/<cache>/     a JIT cache (`triton`, `nv`, ...): bound into its probes
//! ```
//!
//! A probe sees only its kernel's cache folders, never the record.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file of a kernel's folder in the store that names its files.
const OWNER: &str = "kernel";

static STORE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Keeps the JIT caches of every kernel probed from now on in `dir`, one
/// folder per kernel ([`crate::sandbox::Sandbox::jit_caches_of`]): what a
/// kernel's probes compile there, its later probes find; no other
/// kernel's probe, and none of the user's own programs, ever sees it.
/// `preflight` keeps them in its outcome cache (`jit/`).
pub fn keep_jit_caches_in(dir: impl Into<PathBuf>) {
    if let Ok(mut store) = STORE.lock() {
        *store = Some(dir.into());
    }
}

/// One kernel's folder in the store.
#[derive(Debug, Clone)]
pub(crate) struct KernelJit {
    /// `<store>/<key>`.
    pub(crate) dir: PathBuf,
    /// The kernel's files, which its record names.
    pub(crate) owner: PathBuf,
}

impl KernelJit {
    /// The folder of the kernel `key` whose files are `owner`, in the store
    /// [`keep_jit_caches_in`] named; `None` without a store.
    pub(crate) fn of(key: &str, owner: &Path) -> Option<KernelJit> {
        let store = STORE.lock().ok()?.clone()?;
        Some(KernelJit {
            dir: store.join(key),
            owner: owner.to_path_buf(),
        })
    }

    /// The cache folder `name` of this kernel, made (0700) with the record
    /// of whose it is. The record is written before any cache folder, so
    /// that a folder with caches and no record is one a pruner may remove.
    pub(crate) fn cache(&self, name: &str) -> std::io::Result<PathBuf> {
        let record = self.dir.join(OWNER);
        if !record.is_file() {
            private_dirs(&self.dir)?;
            crate::fs::write_atomic(&record, self.owner.as_os_str().as_bytes(), ".tmp", 0o600)?;
        }
        let dir = self.dir.join(name);
        private_dirs(&dir)?;
        Ok(dir)
    }
}

fn private_dirs(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Whose files the kernel folder `dir` of a JIT store keeps caches for;
/// `None` when it has no readable record (a folder made by an older
/// `preflight`, a write cut short, or not a kernel's folder at all).
pub fn jit_owner(dir: &Path) -> Option<PathBuf> {
    let bytes = std::fs::read(dir.join(OWNER)).ok()?;
    (!bytes.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}
