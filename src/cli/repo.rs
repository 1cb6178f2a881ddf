//! `--repo ORG/NAME [--revision R | --version N]`: kernels in the hub cache,
//! pinned the way `get_kernel(repo, revision=…, version=…)` pins them; one
//! set of options for `resolve`, `check`, `select` and `warmup`.

use super::{BadInput, Failure};
use kernel_preflight::discover::hub_cache::{self, RevisionSpec};
use kernel_preflight::discover::{self, Discovery, Targets};

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

    /// Adds one target per `--repo`, named as given: the snapshot the
    /// revision or version names.
    pub fn add_to(&self, targets: &mut Targets) -> Result<(), Failure> {
        let spec = self.spec();
        for repo in &self.repo {
            targets.add(repo.clone(), &snapshot(repo, &spec)?)?;
        }
        Ok(())
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

impl From<hub_cache::SnapshotError> for Failure {
    fn from(e: hub_cache::SnapshotError) -> Self {
        BadInput(e.to_string())
    }
}

/// The folder to discover for `ORG/NAME` at `spec` ([`hub_cache::snapshot`]).
pub fn snapshot(repo: &str, spec: &RevisionSpec) -> Result<std::path::PathBuf, Failure> {
    Ok(hub_cache::snapshot(&hub_cache::cache_root(), repo, spec)?)
}

/// Where the variants of `ORG/NAME`'s snapshot that `spec` names lie.
pub fn locate_repo(repo: &str, spec: &RevisionSpec) -> Result<discover::Located, Failure> {
    Ok(discover::locate_hub(&snapshot(repo, spec)?)?)
}

/// The variants of `ORG/NAME`'s snapshot that `spec` names.
pub fn discover_repo(repo: &str, spec: &RevisionSpec) -> Result<Discovery, Failure> {
    Ok(discover::discover_hub(&snapshot(repo, spec)?)?)
}

/// The one target of a command that takes a TARGET or one `--repo`. A path
/// is made absolute, so that a printed path can be loaded from anywhere.
pub fn one_kernel(
    target: Option<&std::path::Path>,
    repo: &RepoArgs,
    command: &str,
) -> Result<discover::Named, Failure> {
    Ok(match (target, repo.single(command)?) {
        (Some(path), _) => discover::Named {
            given: path.display().to_string(),
            target: discover::discover(
                &std::path::absolute(path)
                    .map_err(|e| BadInput(format!("{}: {e}", path.display())))?,
            )?,
        },
        (None, Some(repo_name)) => discover::Named {
            given: repo_name.to_string(),
            target: discover::Target::Hub(discover_repo(repo_name, &repo.spec())?),
        },
        (None, None) => {
            return Err(BadInput(format!(
                "{command} needs a TARGET or --repo ORG/NAME"
            )));
        }
    })
}
