//! Discover: find what to probe behind a path, as typed targets —
//! [`Target::Hub`], the build variants of a hub kernel (a kernel repo
//! directory, a directory of variants, one variant, or a hub cache entry),
//! and [`Target::Native`], the CUDA modules a `preflight.toml` names.

pub mod hub_cache;
pub mod metadata;
pub mod native;
pub mod project;
pub mod repo;
mod repo_id;

pub use metadata::{Metadata, MetadataStatus};
pub use native::{NativeError, NativeModule, NativeTarget};
pub use repo::KernelRepo;
pub use repo_id::RepoId;

use crate::variant::VariantName;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A target that cannot be read as variants.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// The path does not exist.
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    /// The path is a file, not a directory.
    #[error("{}: is a file, not a directory (expected a kernel repo, a variant directory or a hub cache folder)", .0.display())]
    NotADirectory(PathBuf),
    /// The directory cannot be listed.
    #[error("{}: cannot read directory: {source}", path.display())]
    Unreadable {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Nothing in it looks like a variant.
    #[error("{}: no build variants found (expected build/<variant>/, variant directories such as torch29-cxx11-cu128-x86_64-linux, or a hub cache folder kernels--ORG--NAME)", .0.display())]
    NoVariants(PathBuf),
    /// A hub cache folder without a usable snapshot.
    #[error("{}: hub cache folder has no snapshot (expected snapshots/<revision>/)", .0.display())]
    NoSnapshot(PathBuf),
    /// `--repo ORG/NAME` that is not in the hub cache.
    #[error("kernel {repo} is not in the hub cache at {} (looked for kernels--{org_name} and models--{org_name}; download it first, e.g. with get_kernel or `hf download {repo} --repo-type kernel`)", root.display(), org_name = repo.replace('/', "--"))]
    NotCached {
        /// `ORG/NAME`.
        repo: String,
        /// The cache root searched.
        root: PathBuf,
    },
    /// `--repo` that is not `ORG/NAME`.
    #[error(
        "invalid repo id {0:?}: expected ORG/NAME, as the hub spells them (letters, digits, '_', '-' and '.', at most 96 each, starting and ending with a letter, digit or '_'; no '--' or '..')"
    )]
    BadRepoId(String),
    /// A `preflight.toml` that cannot be used.
    #[error(transparent)]
    Native(#[from] NativeError),
    /// A pinned kernel without a snapshot for its revision or version.
    #[error(transparent)]
    Revision(Box<hub_cache::RevisionError>),
}

/// What a path holds: the two kinds of thing preflight probes.
#[derive(Debug, Clone)]
pub enum Target {
    /// Build variants of a hub kernel, probed by the python executor.
    Hub(Discovery),
    /// CUDA modules named by a `preflight.toml`, probed by the cuda executor.
    Native(NativeTarget),
}

/// A discovered target with the name it was given: a path as typed, or
/// `ORG/NAME` for a kernel looked up in the hub cache.
#[derive(Debug, Clone)]
pub struct Named {
    /// As given (what reports show).
    pub given: String,
    /// What is in it.
    pub target: Target,
}

/// Find what `path` holds: a native target when it has a `preflight.toml`,
/// else the variants of a hub kernel.
pub fn discover(path: &Path) -> Result<Target, DiscoverError> {
    if native::is_native_target(path) {
        return Ok(Target::Native(native::load(path)?));
    }
    discover_hub(path).map(Target::Hub)
}

/// Targets in the order given, each discovered once: a directory named twice
/// (`k`, `./k/`, a symlink to it, `--repo` and its cache folder) is the
/// same target, and only its first name is kept.
#[derive(Debug, Default)]
pub struct Targets {
    list: Vec<Named>,
    seen: HashSet<PathBuf>,
}

impl Targets {
    /// No targets yet.
    pub fn new() -> Targets {
        Targets::default()
    }

    /// Discover `path`, named `given`, unless it was already discovered.
    pub fn add(&mut self, given: impl Into<String>, path: &Path) -> Result<(), DiscoverError> {
        // A path that cannot be resolved is reported by discovery itself.
        let identity = crate::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.seen.contains(&identity) {
            return Ok(());
        }
        let target = discover(path)?;
        self.seen.insert(identity);
        self.list.push(Named {
            given: given.into(),
            target,
        });
        Ok(())
    }

    /// Discover the kernel `ORG/NAME` in the hub cache, named by its repo id.
    pub fn add_repo(&mut self, repo: &str) -> Result<(), DiscoverError> {
        let folder = hub_cache::repo_folder(&hub_cache::cache_root(), repo)?;
        self.add(repo, &folder)
    }

    /// Discover the snapshot of the hub cache that `pin` names (its repo
    /// at its revision or version, [`hub_cache::snapshot`]), named `given`.
    pub fn add_pinned(
        &mut self,
        given: impl Into<String>,
        pin: &project::Pinned,
    ) -> Result<(), DiscoverError> {
        let snapshot = hub_cache::snapshot(&hub_cache::cache_root(), &pin.repo, &pin.spec)
            .map_err(|e| match e {
                hub_cache::SnapshotError::Discover(e) => e,
                hub_cache::SnapshotError::Revision(e) => DiscoverError::Revision(Box::new(e)),
            })?;
        self.add(given, &snapshot)
    }

    /// Discover the snapshot of every ref of every kernel in the hub cache,
    /// named `ORG/NAME (refs)` ([`hub_cache::every_cached_ref`]); returns
    /// what could not be read (one broken folder does not stop the others).
    pub fn add_every_cached_ref(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for found in hub_cache::every_cached_ref(&hub_cache::cache_root()) {
            match found {
                Ok((given, snapshot)) => {
                    if let Err(e) = self.add(given, &snapshot) {
                        problems.push(e.to_string());
                    }
                }
                Err(problem) => problems.push(problem),
            }
        }
        problems
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The targets, in the order they were first named.
    pub fn into_vec(self) -> Vec<Named> {
        self.list
    }
}

/// How a target was understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A directory with `build/<variant>/`.
    KernelRepo,
    /// A directory whose children are variants.
    VariantsDir,
    /// One variant directory.
    Variant,
    /// A hub cache folder `kernels--ORG--NAME` (or one of its snapshots).
    HubCache,
}

/// One build variant found on disk.
#[derive(Debug, Clone, Serialize)]
pub struct FoundVariant {
    /// Its parsed name.
    pub name: VariantName,
    /// Its directory (symlinks not resolved).
    pub path: PathBuf,
    /// What its `metadata.json` said.
    pub metadata: MetadataStatus,
}

/// Everything a target holds.
#[derive(Debug, Clone, Serialize)]
pub struct Discovery {
    /// The target as given (or the cache folder a `--repo` named).
    pub target: PathBuf,
    /// How it was understood.
    pub kind: TargetKind,
    /// The kernel's name, when the layout tells it (`ORG/NAME` for the hub cache).
    pub kernel: Option<String>,
    /// The hub repository the kernel is a snapshot of, when its place in
    /// the hub cache says so; `None` for a folder elsewhere, whatever its
    /// name.
    pub repo_id: Option<RepoId>,
    /// The directory whose children are the variants.
    pub root: PathBuf,
    /// Variants, sorted by directory name.
    pub variants: Vec<FoundVariant>,
    /// Entries that are not variants, and similar non-fatal findings.
    pub warnings: Vec<String>,
}

/// Find the variants of a hub kernel behind a path.
pub fn discover_hub(target: &Path) -> Result<Discovery, DiscoverError> {
    locate_hub(target)?.list()
}

/// Where a hub kernel's variants lie, found without listing them: what a
/// record of the listing, vouched for by the folder's `stat`, is looked up
/// by ([`Located::list`] lists them).
#[derive(Debug, Clone)]
pub struct Located {
    /// The target as given (or the cache folder a `--repo` named).
    pub target: PathBuf,
    /// How it was understood.
    pub kind: TargetKind,
    /// The kernel's name, when the layout tells it.
    pub kernel: Option<String>,
    /// The hub repository, when the hub cache layout tells it.
    pub repo_id: Option<RepoId>,
    /// The directory whose children are the variants.
    pub root: PathBuf,
    /// A single variant: the target itself, named so.
    variant: Option<VariantName>,
}

/// Where the variants of a hub kernel behind a path lie.
pub fn locate_hub(target: &Path) -> Result<Located, DiscoverError> {
    let meta = crate::seen::metadata(target).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DiscoverError::NotFound(target.to_path_buf()),
        _ => DiscoverError::Unreadable {
            path: target.to_path_buf(),
            source: e,
        },
    })?;
    if !meta.is_dir() {
        return Err(DiscoverError::NotADirectory(target.to_path_buf()));
    }
    let file_name = dir_name(target);
    if let Ok(name) = VariantName::parse(&file_name) {
        return Ok(Located {
            target: target.to_path_buf(),
            kind: TargetKind::Variant,
            kernel: target.parent().and_then(kernel_name_above),
            repo_id: target.parent().and_then(repo_id_above),
            root: target.parent().unwrap_or(target).to_path_buf(),
            variant: Some(name),
        });
    }
    let (repo_dir, kind, repo_id) = if let Some(repo) = hub_cache::repo_id(&file_name) {
        (
            hub_cache::pick_snapshot(target)?,
            TargetKind::HubCache,
            Some(repo),
        )
    } else if let Some(repo) = hub_cache::snapshot_repo_id(target) {
        (target.to_path_buf(), TargetKind::HubCache, Some(repo))
    } else if KernelRepo::at(target).is_some() {
        (target.to_path_buf(), TargetKind::KernelRepo, None)
    } else {
        return Ok(Located {
            target: target.to_path_buf(),
            kind: TargetKind::VariantsDir,
            kernel: kernel_name_above(target),
            repo_id: repo_id_above(target),
            root: target.to_path_buf(),
            variant: None,
        });
    };
    let Some(root) = KernelRepo::at(&repo_dir).map(|r| r.variants()) else {
        return Err(DiscoverError::NoVariants(repo_dir));
    };
    Ok(Located {
        target: target.to_path_buf(),
        kind,
        kernel: Some(repo_id.as_ref().map_or(file_name, RepoId::to_string)),
        repo_id,
        root,
        variant: None,
    })
}

impl Located {
    /// List the variants (and read each one's `metadata.json`).
    pub fn list(self) -> Result<Discovery, DiscoverError> {
        if let Some(name) = self.variant {
            let variant = FoundVariant {
                name,
                metadata: MetadataStatus::read(&self.target),
                path: self.target.clone(),
            };
            return Ok(Discovery {
                target: self.target,
                kind: self.kind,
                kernel: self.kernel,
                repo_id: self.repo_id,
                root: self.root,
                variants: vec![variant],
                warnings: Vec::new(),
            });
        }
        let (variants, warnings) = list_variants(&self.root)?;
        if variants.is_empty() {
            return Err(DiscoverError::NoVariants(match self.kind {
                TargetKind::VariantsDir => self.target,
                _ => self.root,
            }));
        }
        Ok(Discovery {
            target: self.target,
            kind: self.kind,
            kernel: self.kernel,
            repo_id: self.repo_id,
            root: self.root,
            variants,
            warnings,
        })
    }
}

/// Find the variants of `ORG/NAME` in the hub cache.
pub fn discover_repo(repo: &str) -> Result<Discovery, DiscoverError> {
    let root = hub_cache::cache_root();
    let folder = hub_cache::repo_folder(&root, repo)?;
    discover_hub(&folder)
}

/// Variant directories under `dir`, and a warning for each other entry.
fn list_variants(dir: &Path) -> Result<(Vec<FoundVariant>, Vec<String>), DiscoverError> {
    let unreadable = |source| DiscoverError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .collect::<Result<_, _>>()
        .map_err(unreadable)?;
    crate::seen::listing(dir, None);
    entries.sort_by_key(|e| e.file_name());
    let mut variants = Vec::new();
    let mut warnings = Vec::new();
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // The listing tells folders apart; only a symlink needs a stat.
        let is_dir = match entry.file_type() {
            Ok(t) if t.is_symlink() => crate::seen::is_dir(&path),
            Ok(t) => t.is_dir(),
            Err(_) => crate::seen::is_dir(&path),
        };
        if !is_dir {
            if !name.starts_with('.') {
                warnings.push(format!(
                    "{}: not a directory, ignored",
                    crate::fs::shown(&path)
                ));
            }
            continue;
        }
        match VariantName::parse(&name) {
            Ok(parsed) => variants.push(FoundVariant {
                name: parsed,
                metadata: MetadataStatus::read(&path),
                path,
            }),
            Err(e) => warnings.push(format!(
                "{}: not a variant, ignored ({})",
                crate::fs::shown(&path),
                e.why
            )),
        }
    }
    Ok((variants, warnings))
}

fn dir_name(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute
        .components()
        .rfind(|c| !matches!(c, std::path::Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The kernel's name for a directory of variants: `build/`'s parent, or a
/// hub cache snapshot's repo id.
fn kernel_name_above(dir: &Path) -> Option<String> {
    let dir = std::path::absolute(dir).ok()?;
    let repo = KernelRepo::above_variants(&dir)?;
    let repo = repo.dir();
    Some(hub_cache::snapshot_repo_id(repo).map_or_else(|| dir_name(repo), |id| id.to_string()))
}

/// The hub repository a directory of variants belongs to: the repo id of
/// the hub cache snapshot above it, if it is in one.
fn repo_id_above(dir: &Path) -> Option<RepoId> {
    let dir = std::path::absolute(dir).ok()?;
    hub_cache::snapshot_repo_id(KernelRepo::above_variants(&dir)?.dir())
}
