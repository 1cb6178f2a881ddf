//! `--repo ORG/NAME [--revision R | --version N]`: kernels in the hub cache,
//! pinned the way `get_kernel(repo, revision=…, version=…)` pins them; one
//! set of options for `resolve`, `check`, `select` and `warmup`.

use super::{BadInput, Failure};
use kernel_preflight::discover::hub_cache::{self, RevisionSpec};
use kernel_preflight::discover::{self, Discovery};
use kernel_preflight::run::Target;

/// Kernels in the hub cache, and which snapshot of them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RepoArgs {
    /// A kernel in the hub cache, as ORG/NAME.
    #[arg(long, value_name = "ORG/NAME")]
    pub repo: Vec<String>,
    /// The branch, tag or commit of --repo, as get_kernel(revision=…) takes
    /// it offline (default: refs/main, else the newest snapshot).
    #[arg(long, value_name = "R", requires = "repo", conflicts_with = "version")]
    pub revision: Option<String>,
    /// The version of --repo, as get_kernel(version=N) takes it offline:
    /// the snapshot refs/vN names.
    #[arg(long, value_name = "N", requires = "repo")]
    pub version: Option<u32>,
}

impl RepoArgs {
    /// The snapshot asked for.
    pub fn spec(&self) -> RevisionSpec {
        match (&self.revision, self.version) {
            (Some(revision), _) => RevisionSpec::Revision(revision.clone()),
            (None, Some(version)) => RevisionSpec::Version(version),
            (None, None) => RevisionSpec::Main,
        }
    }

    /// One target per `--repo`, named as given.
    pub fn targets(&self) -> Result<Vec<Target>, Failure> {
        let spec = self.spec();
        self.repo
            .iter()
            .map(|repo| {
                Ok(Target {
                    given: repo.clone(),
                    discovery: discover_repo(repo, &spec)?,
                })
            })
            .collect()
    }

    /// The `--repo` of a command that takes one kernel.
    pub fn single(&self, command: &str) -> Result<Option<&str>, Failure> {
        match self.repo.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(BadInput(format!("{command} takes one --repo"))),
        }
    }
}

impl From<hub_cache::RevisionError> for Failure {
    fn from(e: hub_cache::RevisionError) -> Self {
        BadInput(e.to_string())
    }
}

/// The variants of `ORG/NAME`'s snapshot that `spec` names.
pub fn discover_repo(repo: &str, spec: &RevisionSpec) -> Result<Discovery, Failure> {
    if *spec == RevisionSpec::Main {
        return Ok(discover::discover_repo(repo)?);
    }
    let folder = hub_cache::repo_folder(&hub_cache::cache_root(), repo)?;
    let snapshot = hub_cache::snapshot_for(&folder, spec)?;
    Ok(discover::discover(&snapshot)?)
}

/// Every snapshot that a ref of a kernel in the hub cache names, as
/// targets, and what could not be read (one broken folder does not stop
/// the others).
pub fn every_cached_ref() -> (Vec<Target>, Vec<String>) {
    let mut targets = Vec::new();
    let mut problems = Vec::new();
    for folder in hub_cache::cached_kernels(&hub_cache::cache_root()) {
        let snapshots = match hub_cache::ref_snapshots(&folder) {
            Ok(s) => s,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        for (snapshot, refs) in snapshots {
            match discover::discover(&snapshot) {
                Ok(mut discovery) => {
                    if let Some(kernel) = &mut discovery.kernel
                        && !refs.is_empty()
                    {
                        kernel.push_str(&format!(" ({})", refs.join(", ")));
                    }
                    targets.push(Target {
                        given: snapshot.display().to_string(),
                        discovery,
                    });
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    (targets, problems)
}
