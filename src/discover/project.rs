//! What a Python project pins: the kernels of its `kernels.lock` (as
//! `kernels lock` writes it and `load_kernel` reads it) and of the
//! `[tool.kernels.dependencies]` table of its `pyproject.toml` (as
//! `kernels lock` reads it), each a kernel in the hub cache at a revision,
//! so that `warmup` can probe what the project will load.

use super::hub_cache::RevisionSpec;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One kernel a project loads, and which snapshot of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// `ORG/NAME`.
    pub repo: String,
    /// A lock's commit, or a project's version.
    pub spec: RevisionSpec,
}

/// A lock file or project that cannot be read as pins.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The file does not exist or cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Something other than a regular file where one is expected (a FIFO
    /// would block the reader forever).
    #[error("{}: not a regular file", .0.display())]
    NotAFile(PathBuf),
    /// `--project DIR` without a `pyproject.toml`.
    #[error("{}: no pyproject.toml in this directory (expected a project with [tool.kernels.dependencies])", .0.display())]
    NoPyproject(PathBuf),
    /// A lock file that is not what `kernels lock` writes.
    #[error("{}: not a kernels.lock: {message} (expected a JSON list of {{\"dependency\": {{\"repo-id\": …, \"version\"|\"revision\": …}}, \"lock\": {{\"commit\": …}}}}, as `kernels lock` writes it)", path.display())]
    BadLock {
        /// The file.
        path: PathBuf,
        /// What the parser said, with line and column.
        message: String,
    },
    /// A `pyproject.toml` that does not parse.
    #[error("{}: not valid TOML: {message}", path.display())]
    BadToml {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A project without the table `kernels lock` reads.
    #[error("{}: no [tool.kernels.dependencies] table (the kernels a project loads, as `kernels lock` reads them: \"ORG/NAME\" = VERSION)", .0.display())]
    NoKernels(PathBuf),
    /// An entry of `[tool.kernels.dependencies]` that is not `"ORG/NAME" = N`.
    #[error("{}: [tool.kernels.dependencies] {repo:?} = {value}: expected a version number (an integer ≥ 0)", path.display())]
    BadVersion {
        /// The file.
        path: PathBuf,
        /// The key.
        repo: String,
        /// The value as written.
        value: String,
    },
}

#[derive(Deserialize)]
struct LockEntry {
    dependency: Dependency,
    lock: Lock,
}

#[derive(Deserialize)]
struct Dependency {
    #[serde(rename = "repo-id")]
    repo_id: String,
}

#[derive(Deserialize)]
struct Lock {
    commit: String,
}

/// The kernels a `kernels.lock` pins, each at its locked commit (what
/// `load_kernel` and `get_locked_kernel` load), in the file's order.
pub fn read_lock(path: &Path) -> Result<Vec<Pinned>, ProjectError> {
    let text = read_regular(path)?;
    let entries: Vec<LockEntry> =
        serde_json::from_str(&text).map_err(|e| ProjectError::BadLock {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    Ok(entries
        .into_iter()
        .map(|e| Pinned {
            repo: e.dependency.repo_id,
            spec: RevisionSpec::Revision(e.lock.commit),
        })
        .collect())
}

/// The kernels the project in `dir` depends on, each at its version (what
/// `get_kernel(repo, version=N)` loads), by repo id.
pub fn read_project(dir: &Path) -> Result<Vec<Pinned>, ProjectError> {
    let path = dir.join("pyproject.toml");
    if !crate::seen::exists(&path) {
        return Err(ProjectError::NoPyproject(dir.to_path_buf()));
    }
    let text = read_regular(&path)?;
    let doc: toml::Table = toml::from_str(&text).map_err(|e| ProjectError::BadToml {
        path: path.clone(),
        message: e.message().to_owned(),
    })?;
    let table = doc
        .get("tool")
        .and_then(|t| t.get("kernels"))
        .and_then(|t| t.get("dependencies"))
        .and_then(toml::Value::as_table)
        .ok_or_else(|| ProjectError::NoKernels(path.clone()))?;
    table
        .iter()
        .map(|(repo, value)| {
            let version = value
                .as_integer()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| ProjectError::BadVersion {
                    path: path.clone(),
                    repo: repo.clone(),
                    value: value.to_string(),
                })?;
            Ok(Pinned {
                repo: repo.clone(),
                spec: RevisionSpec::Version(version),
            })
        })
        .collect()
}

/// A small regular file as text; anything else (a folder, a FIFO, a
/// device) is refused before it is opened.
fn read_regular(path: &Path) -> Result<String, ProjectError> {
    let unreadable = |source| ProjectError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    if !crate::seen::metadata(path).map_err(unreadable)?.is_file() {
        return Err(ProjectError::NotAFile(path.to_path_buf()));
    }
    crate::fs::read_small_text(path).map_err(unreadable)
}

/// The kernels a warmup prepares: each of `repos` at `spec` (named as
/// given), then those the `locks` and `projects` pin (named
/// `ORG/NAME (pin)`), each with the snapshot it names; a kernel named
/// twice at one pin is kept once, under its first name.
pub fn pins(
    repos: &[String],
    spec: &RevisionSpec,
    locks: &[PathBuf],
    projects: &[PathBuf],
) -> Result<Vec<(String, Pinned)>, ProjectError> {
    let mut pins: Vec<(String, Pinned)> = repos
        .iter()
        .map(|repo| {
            let pin = Pinned {
                repo: repo.clone(),
                spec: spec.clone(),
            };
            (repo.clone(), pin)
        })
        .collect();
    let mut from_files = Vec::new();
    for lock in locks {
        from_files.extend(read_lock(lock)?);
    }
    for dir in projects {
        from_files.extend(read_project(dir)?);
    }
    pins.extend(
        from_files
            .into_iter()
            .map(|pin| (format!("{} ({})", pin.repo, pin.spec), pin)),
    );
    let mut seen = std::collections::HashSet::new();
    pins.retain(|(_, p)| seen.insert((p.repo.clone(), p.spec.to_string())));
    Ok(pins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_lock_pins_each_kernel_at_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let lock = write(
            dir.path(),
            "kernels.lock",
            r#"[{"dependency": {"repo-id": "acme/relu", "version": 1}, "lock": {"commit": "abc"}},
                {"dependency": {"repo-id": "acme/moe", "revision": "ep-support"}, "lock": {"commit": "def"}}]"#,
        );
        assert_eq!(
            read_lock(&lock).unwrap(),
            vec![
                Pinned {
                    repo: "acme/relu".into(),
                    spec: RevisionSpec::Revision("abc".into())
                },
                Pinned {
                    repo: "acme/moe".into(),
                    spec: RevisionSpec::Revision("def".into())
                },
            ]
        );
    }

    #[test]
    fn pins_name_repos_as_given_and_pinned_kernels_by_their_pin_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let lock = write(
            dir.path(),
            "kernels.lock",
            r#"[{"dependency": {"repo-id": "acme/relu", "version": 1}, "lock": {"commit": "abc"}},
                {"dependency": {"repo-id": "acme/relu", "version": 1}, "lock": {"commit": "abc"}},
                {"dependency": {"repo-id": "acme/moe"}, "lock": {"commit": "def"}}]"#,
        );
        let repos = ["acme/moe".to_owned()];
        let spec = RevisionSpec::Revision("def".into());
        let pins = pins(&repos, &spec, &[lock], &[]).unwrap();
        let names: Vec<&str> = pins.iter().map(|(given, _)| given.as_str()).collect();
        // acme/moe at def is named by --repo first; the lock's copy goes.
        assert_eq!(names, ["acme/moe", "acme/relu (abc)"]);
        let missing = pins_of_missing_lock(dir.path());
        assert!(missing.contains("cannot read"), "{missing}");
    }

    fn pins_of_missing_lock(dir: &Path) -> String {
        pins(&[], &RevisionSpec::Main, &[dir.join("absent.lock")], &[])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_lock_that_is_not_one_says_where() {
        let dir = tempfile::tempdir().unwrap();
        for text in ["{not json", r#"{"a": 1}"#, r#"[{"dependency": {}}]"#] {
            let lock = write(dir.path(), "kernels.lock", text);
            let e = read_lock(&lock).unwrap_err().to_string();
            assert!(e.contains("kernels.lock: not a kernels.lock: "), "{e}");
            assert!(e.contains("line 1"), "{e}");
        }
    }

    #[test]
    fn a_project_pins_each_dependency_at_its_version() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "pyproject.toml",
            "[project]\nname = \"x\"\n[tool.kernels.dependencies]\n\"acme/relu\" = 1\n\"acme/moe\" = 3\n",
        );
        let pins = read_project(dir.path()).unwrap();
        assert_eq!(
            pins.iter()
                .map(|p| (p.repo.as_str(), p.spec.to_string()))
                .collect::<Vec<_>>(),
            [
                ("acme/moe", "v3".to_owned()),
                ("acme/relu", "v1".to_owned())
            ]
        );
    }

    #[test]
    fn a_project_without_kernels_or_with_a_bad_version_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_project(dir.path()).unwrap_err().to_string();
        assert!(e.contains("no pyproject.toml"), "{e}");
        write(dir.path(), "pyproject.toml", "[project]\nname = \"x\"\n");
        let e = read_project(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("pyproject.toml: no [tool.kernels.dependencies]"),
            "{e}"
        );
        write(
            dir.path(),
            "pyproject.toml",
            "[tool.kernels.dependencies]\n\"acme/relu\" = \"1\"\n",
        );
        let e = read_project(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("\"acme/relu\" = \"1\": expected a version number"),
            "{e}"
        );
        write(dir.path(), "pyproject.toml", "[tool.kernels\n");
        let e = read_project(dir.path()).unwrap_err().to_string();
        assert!(e.contains("pyproject.toml: not valid TOML"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("kernels.lock");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_lock(&fifo).unwrap_err().to_string();
        assert!(e.ends_with("kernels.lock: not a regular file"), "{e}");
    }
}
