//! Cache: one component that owns the cache root and its typed buckets —
//! probe outcomes, variant identities, the fingerprint's facts and bench
//! results — each versioned in its folder name, all written by one atomic
//! write, so that later loads are answered instantly.
//!
//! Layout (`<root>`: see [`Cache::from_env`]):
//!
//! ```text
//! <root>/CACHEDIR.TAG
//! <root>/outcomes-v2/<ab>/<key>.json              probe outcomes
//! <root>/identities-v2/<ab>/<key>.json            stat records of a directory of variants
//! <root>/identities-v2/warm/<ab>/<key>.json       warm records: a plan and its stats
//! <root>/fingerprints-v2/measured/<ab>/<key>.json full-fingerprint facts, by fast hash
//! <root>/fingerprints-v2/tools/<ab>/<key>.json    tool versions, by the tool's path
//! <root>/bench-v1/<ab>/<key>.json                 bench results
//! <root>/jit/<key>/kernel, <root>/jit/<key>/<cache>/  each kernel's own JIT caches
//! <root>/tickets/<ab>/<key>.json                 the Python flag's tickets (`check --cached --ticket`)
//! ```
//!
//! `jit/` is the sandbox's store (`crate::sandbox::keep_jit_caches_in`):
//! the walls write it, this component clears and prunes it.
//!
//! A path is built from typed pieces (bucket → shard → entry, see
//! `bucket.rs`); a folder of another version is never read, and `prune`
//! removes it. Directories are 0700, files 0600.

// The surface outside the crate: the cache itself (`Cache`, its root,
// `clear` and `prune`), its errors, its outcome entries as `cache ls`,
// `show`, `export` and `import` handle them (the bundle format), and
// `ops`. Buckets, bench results, identities and warm records are the
// crate's, and inside the crate `run`'s seam (`run/cached/`) is their only
// user (`scripts/layers.sh`).
pub(crate) mod bench;
pub(crate) mod bucket;
mod facts;
pub(crate) mod identity;
mod job;
mod key;
pub mod ops;
pub(crate) mod outcomes;
pub(crate) mod remote;
pub(crate) mod warm;

pub(crate) use bench::BenchKey;
pub(crate) use bucket::Bucket;
pub use bucket::Lookup;
pub(crate) use identity::IdentityWitness;
pub use job::{JobIdentity, OutcomeKey, OutcomeParts, VariantFiles};
pub use key::Key;
pub use outcomes::{Kept, OutcomeEntry, OutcomeRecord, Outcomes};

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The folder of the root that holds each kernel's own JIT caches.
const JIT: &str = "jit";

/// The folder of the root where the Python package keeps the tickets of
/// `check --cached --ticket` (`kernel_preflight/_ticket.py`): shortcuts to
/// outcomes, removed with them.
pub const TICKETS: &str = "tickets";

const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by kernel-preflight.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// A cache operation that failed. Each variant says whose fault it is: the
/// command line maps the user's side to exit 2 and preflight's to exit 3.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The user's side: the cache root cannot be a directory (a path
    /// component is a file, or it cannot be created), so the setting that
    /// chose it (`PREFLIGHT_CACHE`, `XDG_CACHE_HOME`, `HOME`) is wrong.
    #[error(
        "cache directory {}: {source} (set PREFLIGHT_CACHE to a directory you can write)",
        path.display()
    )]
    Root {
        /// The root.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Preflight's side: reading or writing inside a usable cache root
    /// failed (permissions changed under it, a full disk, a damaged layout).
    #[error("cache {}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The user's side: a variant's files or a smoke file that cannot be
    /// read for their identity.
    #[error("{}: cannot read for its identity: {source}", path.display())]
    Unreadable {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The user's side: an `export` / `import` bundle that cannot be written
    /// or read.
    #[error("{}: {source}", path.display())]
    Bundle {
        /// The bundle (`-` for stdin or stdout).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Preflight's side: a record that cannot be serialized.
    #[error("cannot encode cache entry: {0}")]
    Encode(#[from] serde_json::Error),
    /// The user's side: a key given by a person that is not a 64-digit hex
    /// string.
    #[error("invalid cache key {0:?}: expected 64 hex digits (see `preflight cache ls`)")]
    BadKey(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The cache at one root: the only owner of its files.
#[derive(Debug)]
pub struct Cache {
    root: PathBuf,
    /// Stat records of variant directories read so far.
    identities: identity::Memo,
    /// The remote tier, when a fleet shares one.
    remote: Option<std::sync::Arc<remote::Remote>>,
}

impl Cache {
    /// The cache at the root this process is configured with:
    /// `PREFLIGHT_CACHE`, else `$XDG_CACHE_HOME/kernel-preflight`, else
    /// `~/.cache/kernel-preflight` (empty variables count as unset). The
    /// user's default cache is hidden from probes even when
    /// `PREFLIGHT_CACHE` names another: it is evidence all the same.
    pub fn from_env() -> Cache {
        let var = |k: &str| {
            crate::seen::env_var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let default = var("XDG_CACHE_HOME")
            .map(|d| d.join("kernel-preflight"))
            .or_else(|| var("HOME").map(|h| h.join(".cache/kernel-preflight")))
            .unwrap_or_else(|| std::env::temp_dir().join("kernel-preflight"));
        crate::sandbox::hide_by_default(default.clone());
        Cache::at(var("PREFLIGHT_CACHE").unwrap_or(default))
    }

    /// The cache at `root`; nothing is created until the first write.
    /// No probe started from now on sees it: a probe must not rewrite the
    /// evidence about another kernel (see
    /// [`crate::sandbox::hide_by_default`]). Its `jit/` holds each kernel's
    /// own JIT caches ([`crate::sandbox::keep_jit_caches_in`]).
    pub fn at(root: impl Into<PathBuf>) -> Cache {
        let root = root.into();
        let absolute = std::path::absolute(&root).unwrap_or_else(|_| root.clone());
        crate::sandbox::hide_by_default(absolute.clone());
        crate::sandbox::keep_jit_caches_in(absolute.join(JIT));
        Cache {
            root,
            identities: identity::Memo::default(),
            remote: None,
        }
    }

    /// This cache with the remote tier `remote` behind it.
    pub(crate) fn with_remote(mut self, remote: remote::Remote) -> Cache {
        self.remote = Some(std::sync::Arc::new(remote));
        self
    }

    /// The remote tier, if there is one.
    pub(crate) fn remote(&self) -> Option<&std::sync::Arc<remote::Remote>> {
        self.remote.as_ref()
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the root can be a cache: a directory, or nothing yet (then
    /// nothing is cached). Anything else — a file, a path through a file,
    /// a folder this user may not read — is the setting that chose it at
    /// fault ([`CacheError::Root`]), never an empty cache.
    pub fn check_root(&self) -> Result<(), CacheError> {
        let root = |source| CacheError::Root {
            path: self.root.clone(),
            source,
        };
        match std::fs::metadata(&self.root) {
            Ok(meta) if meta.is_dir() => std::fs::read_dir(&self.root).map(drop).map_err(root),
            Ok(_) => Err(root(std::io::Error::from_raw_os_error(libc::ENOTDIR))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(root(e)),
        }
    }

    /// Create the root (0700) with its `CACHEDIR.TAG`.
    pub fn ensure(&self) -> Result<(), CacheError> {
        if !self.root.is_dir() {
            private_dirs(&self.root).map_err(|source| CacheError::Root {
                path: self.root.clone(),
                source,
            })?;
        }
        let tag = self.root.join("CACHEDIR.TAG");
        if !tag.exists() {
            write_atomic(&tag, TAG.as_bytes()).map_err(io(&tag))?;
        }
        Ok(())
    }

    /// Create a folder inside the root, and the root first.
    fn ensure_dir(&self, dir: &Path) -> Result<(), CacheError> {
        if dir.is_dir() {
            return Ok(());
        }
        self.ensure()?;
        private_dirs(dir).map_err(io(dir))
    }
}

/// Create `dir` and its missing parents, each private (0700).
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The one way a file of the cache (or an export bundle) is written:
/// [`crate::fs::write_atomic`], 0600, with the temp prefix that clean-up
/// knows.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::fs::write_atomic(path, bytes, bucket::TEMP_PREFIX, 0o600)
}

#[cfg(test)]
mod tests;
