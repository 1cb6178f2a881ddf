//! The Hugging Face hub cache layout: `kernels--ORG--NAME/{refs,snapshots,blobs}`.

use super::{DiscoverError, RepoId};
use std::path::{Path, PathBuf};

/// The hub cache root: `KERNELS_CACHE`, else `HF_HUB_CACHE`, else
/// `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_root() -> PathBuf {
    let var = |k: &str| {
        crate::seen::env_var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("KERNELS_CACHE")
        .or_else(|| var("HF_HUB_CACHE"))
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
        .unwrap_or_else(|| PathBuf::from(".cache/huggingface/hub"))
}

/// `ORG/NAME` for a cache folder name `kernels--ORG--NAME` (or the older
/// model-type `models--ORG--NAME`).
pub fn repo_id(folder: &str) -> Option<RepoId> {
    let rest = folder
        .strip_prefix("kernels--")
        .or_else(|| folder.strip_prefix("models--"))?;
    let (org, name) = rest.split_once("--")?;
    RepoId::parse(&format!("{org}/{name}")).ok()
}

/// `ORG/NAME` when `dir` is `<cache folder>/snapshots/<revision>`.
pub fn snapshot_repo_id(dir: &Path) -> Option<RepoId> {
    let dir = std::path::absolute(dir).ok()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    repo_id(&snapshots.parent()?.file_name()?.to_string_lossy())
}

/// Whether `repo` is an `ORG/NAME` the hub accepts (`huggingface_hub`'s
/// `validate_repo_id`): each part 1 to 96 of `A-Z a-z 0-9 _ . -`, starting
/// and ending with a letter, digit or `_`; no `--` or `..` (`--` is the
/// cache folder's separator: `a--b/c` and `a/b--c` would name one folder);
/// not ending in `.git`.
pub fn is_repo_id(repo: &str) -> bool {
    let part = |p: &str| {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        (1..=96).contains(&p.len())
            && p.chars().all(|c| word(c) || c == '-' || c == '.')
            && p.starts_with(word)
            && p.ends_with(word)
    };
    repo.split_once('/').is_some_and(|(org, name)| {
        part(org) && part(name) && !repo.contains("--") && !repo.contains("..")
    }) && !repo.ends_with(".git")
}

/// The cache folder of `ORG/NAME` under `root`.
pub fn repo_folder(root: &Path, repo: &str) -> Result<PathBuf, DiscoverError> {
    let Some((org, name)) = repo.split_once('/').filter(|_| is_repo_id(repo)) else {
        return Err(DiscoverError::BadRepoId(repo.to_string()));
    };
    ["kernels", "models"]
        .iter()
        .map(|kind| root.join(format!("{kind}--{org}--{name}")))
        .find(|p| p.is_dir())
        .ok_or_else(|| DiscoverError::NotCached {
            repo: repo.to_string(),
            root: root.to_path_buf(),
        })
}

/// The snapshot to use: the one `refs/main` names, else the newest.
pub fn pick_snapshot(folder: &Path) -> Result<PathBuf, DiscoverError> {
    let snapshots = folder.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(folder.join("refs/main")) {
        let candidate = snapshots.join(rev.trim());
        if !rev.trim().is_empty() && candidate.is_dir() {
            return Ok(candidate);
        }
    }
    let entries = std::fs::read_dir(&snapshots)
        .map_err(|_| DiscoverError::NoSnapshot(folder.to_path_buf()))?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, path)| path)
        .ok_or_else(|| DiscoverError::NoSnapshot(folder.to_path_buf()))
}

/// Every kernel repo in the hub cache at `root`: `kernels--ORG--NAME`
/// folders, and `models--ORG--NAME` folders whose snapshot has `build/`.
pub fn cached_kernels(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match repo_id(&name) {
                Some(_) if name.starts_with("kernels--") => true,
                Some(_) => {
                    pick_snapshot(&e.path()).is_ok_and(|s| super::KernelRepo::at(&s).is_some())
                }
                None => false,
            }
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Which snapshot of a cached kernel to use, as `get_kernel` is asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RevisionSpec {
    /// Nothing pinned: the snapshot `refs/main` names, else the newest
    /// (preflight's own default; `get_kernel` 0.17 requires a pin).
    #[default]
    Main,
    /// `revision=`: a branch, tag or commit hash.
    Revision(String),
    /// `version=`: the commit the cached `refs/vN` names.
    Version(u32),
}

impl std::fmt::Display for RevisionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RevisionSpec::Main => f.write_str("main"),
            RevisionSpec::Revision(r) => f.write_str(r),
            RevisionSpec::Version(v) => write!(f, "v{v}"),
        }
    }
}

/// A pinned revision or version that the hub cache cannot answer. The
/// messages are the hub loader's own (`kernels` 0.17, offline).
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// `version=N` while the cache records no version of the kernel at all.
    #[error(
        "Version {version} of '{repo}' is not available in the local cache and Hugging Face Hub is in offline mode. Download the kernel while online first, or pass an explicit `revision=<commit>`."
    )]
    NoVersions {
        /// `ORG/NAME`.
        repo: String,
        /// The version asked for.
        version: u32,
    },
    /// `version=N` that is not among the cached `refs/v*`.
    #[error("Version {version} not found, available versions: {}", join(.available))]
    VersionNotFound {
        /// The version asked for.
        version: u32,
        /// The cached versions, ascending.
        available: Vec<i64>,
    },
    /// No snapshot folder for the revision (or the version's commit).
    #[error(
        "Cannot find a local snapshot for {repo} (revision: {revision}). When Hugging Face Hub is in offline mode the kernel must already be present in the local cache."
    )]
    NoSnapshot {
        /// `ORG/NAME`.
        repo: String,
        /// The revision looked up (a version's commit hash).
        revision: String,
    },
    /// A revision that would name a path outside the cache folder.
    #[error("invalid revision {0:?}: expected a branch, tag or commit hash")]
    BadRevision(String),
    /// The unpinned choice failed.
    #[error(transparent)]
    Discover(#[from] DiscoverError),
}

fn join(versions: &[i64]) -> String {
    let list: Vec<String> = versions.iter().map(i64::to_string).collect();
    list.join(", ")
}

/// The snapshot folder of the cache folder `folder` (`kernels--ORG--NAME`)
/// that `get_kernel(repo, revision=…, version=…)` loads from offline.
///
/// A version is the commit its `refs/vN` file names, read from the
/// `kernels--` and then the legacy `models--` folder of the same kernel (the
/// latter wins, as in the hub loader); a revision is a commit hash when it
/// looks like one, else the content of `refs/<revision>`, read verbatim.
/// Unlike the hub loader, a snapshot whose cached tree listing
/// (`trees/<commit>.json`) names files that are not downloaded is still
/// used: the hub's own downloads hold one variant, and the others are
/// exactly what preflight is there to probe.
pub fn snapshot_for(folder: &Path, spec: &RevisionSpec) -> Result<PathBuf, RevisionError> {
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let repo = repo_id(&name).map_or_else(|| name.clone(), |r| r.to_string());
    let revision = match spec {
        RevisionSpec::Main => return Ok(pick_snapshot(folder)?),
        RevisionSpec::Revision(r) => r.clone(),
        RevisionSpec::Version(v) => version_commit(folder, &repo, *v)?,
    };
    let relative = Path::new(&revision);
    if revision.is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(RevisionError::BadRevision(revision));
    }
    let commit = if is_commit_hash(&revision) {
        Some(revision.clone())
    } else {
        // huggingface_hub reads the ref without trimming it.
        std::fs::read_to_string(folder.join("refs").join(relative)).ok()
    };
    commit
        .map(|c| folder.join("snapshots").join(c))
        .filter(|snapshot| snapshot.exists())
        .ok_or(RevisionError::NoSnapshot { repo, revision })
}

/// The commit that version `version` names: `refs/vN` of the kernel's
/// `kernels--` and `models--` cache folders.
fn version_commit(folder: &Path, repo: &str, version: u32) -> Result<String, RevisionError> {
    let mut versions: Vec<(i64, String)> = Vec::new();
    let siblings = repo.split_once('/').map(|(org, name)| {
        ["kernels", "models"].map(|kind| folder.with_file_name(format!("{kind}--{org}--{name}")))
    });
    let folders = siblings.map_or_else(|| vec![folder.to_path_buf()], Vec::from);
    for refs in folders.iter().map(|f| f.join("refs")) {
        // Directory order, as Python's iterdir: the last of two refs that
        // name the same version (v1, v01) wins there too.
        let Ok(entries) = std::fs::read_dir(&refs) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let ref_name = entry.file_name().to_string_lossy().into_owned();
            let Some(number) = ref_name.strip_prefix('v').and_then(python_int) else {
                continue;
            };
            if !entry.path().is_file() {
                continue;
            }
            let Ok(commit) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            let commit = commit.trim().to_string();
            match versions.iter_mut().find(|(n, _)| *n == number) {
                Some(slot) => slot.1 = commit,
                None => versions.push((number, commit)),
            }
        }
    }
    if let Some((_, commit)) = versions.iter().find(|(n, _)| *n == i64::from(version)) {
        return Ok(commit.clone());
    }
    if versions.is_empty() {
        return Err(RevisionError::NoVersions {
            repo: repo.to_string(),
            version,
        });
    }
    let mut available: Vec<i64> = versions.iter().map(|(n, _)| *n).collect();
    available.sort_unstable();
    Err(RevisionError::VersionNotFound { version, available })
}

/// Python's `int(text)` for the forms a ref name can take: surrounding
/// whitespace, a sign, digits with single underscores between them.
fn python_int(text: &str) -> Option<i64> {
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let bytes = digits.as_bytes();
    let well_formed = !bytes.is_empty()
        && bytes.first().is_some_and(u8::is_ascii_digit)
        && bytes.last().is_some_and(u8::is_ascii_digit)
        && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'_')
        && !digits.contains("__");
    if !well_formed {
        return None;
    }
    let value: i64 = digits.replace('_', "").parse().ok()?;
    Some(if negative { -value } else { value })
}

/// huggingface_hub's `REGEX_COMMIT_HASH`: 40 lowercase hex digits.
fn is_commit_hash(text: &str) -> bool {
    text.len() == 40
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Every snapshot that a ref of the cache folder `folder` names (`refs/main`,
/// `refs/v1`, …, nested `refs/pr/1` too), each with the refs naming it,
/// sorted by ref; the unpinned choice when no ref names a snapshot.
pub fn ref_snapshots(folder: &Path) -> Result<Vec<(PathBuf, Vec<String>)>, DiscoverError> {
    let mut refs = Vec::new();
    collect_refs(&folder.join("refs"), "", &mut refs);
    refs.sort();
    let mut out: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for name in refs {
        let Ok(snapshot) = snapshot_for(folder, &RevisionSpec::Revision(name.clone())) else {
            continue;
        };
        match out.iter_mut().find(|(s, _)| *s == snapshot) {
            Some((_, names)) => names.push(name),
            None => out.push((snapshot, vec![name])),
        }
    }
    if out.is_empty() {
        out.push((pick_snapshot(folder)?, Vec::new()));
    }
    Ok(out)
}

fn collect_refs(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect_refs(&entry.path(), &format!("{name}/"), out),
            Ok(_) => out.push(name),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_takes_what_int_takes() {
        for (text, want) in [
            ("1", Some(1)),
            ("01", Some(1)),
            ("1_0", Some(10)),
            ("-2", Some(-2)),
            ("+3", Some(3)),
            (" 4 ", Some(4)),
            ("", None),
            ("_1", None),
            ("1_", None),
            ("1__0", None),
            ("x", None),
            ("1.0", None),
            ("-", None),
        ] {
            assert_eq!(python_int(text), want, "{text:?}");
        }
    }

    #[test]
    fn repo_ids_as_the_hub_validates_them() {
        // Each verdict is huggingface_hub 2.4.0's `validate_repo_id` (with
        // the namespace required, as `--repo ORG/NAME` is).
        let long = |n: usize| "x".repeat(n);
        for (id, valid) in [
            ("a/b".to_string(), true),
            ("kernels-community/flash-attn3".into(), true),
            ("a.b/c.d".into(), true),
            ("_a/b_".into(), true),
            (format!("a/{}", long(96)), true),
            (format!("{}/b", long(96)), true),
            (format!("a/{}", long(97)), false),
            (format!("{}/b", long(97)), false),
            ("x".into(), false),
            ("../x".into(), false),
            ("a/..b".into(), false),
            ("a--b/c".into(), false),
            ("a/b--c".into(), false),
            ("a/b-".into(), false),
            ("-a/b".into(), false),
            ("a/b.".into(), false),
            ("a/b.git".into(), false),
            ("a/b/c".into(), false),
            ("a/".into(), false),
            ("/b".into(), false),
            ("é/ü".into(), false),
            ("a b/c".into(), false),
        ] {
            assert_eq!(is_repo_id(&id), valid, "{id}");
        }
    }

    #[test]
    fn commit_hashes_are_forty_lowercase_hex_digits() {
        assert!(is_commit_hash(&"a".repeat(40)));
        assert!(!is_commit_hash(&"A".repeat(40)));
        assert!(!is_commit_hash(&"a".repeat(39)));
        assert!(!is_commit_hash("main"));
    }

    #[test]
    fn revisions_that_leave_the_cache_folder_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("kernels--o--n");
        for bad in ["", "../x", "/etc/passwd", "a/../../b"] {
            let err = snapshot_for(&folder, &RevisionSpec::Revision(bad.into())).unwrap_err();
            assert!(matches!(err, RevisionError::BadRevision(_)), "{bad}: {err}");
        }
    }
}

/// Why a kernel of the hub cache has no snapshot to discover.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// No such kernel, or a malformed `ORG/NAME`.
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// No snapshot for the revision or version asked.
    #[error(transparent)]
    Revision(#[from] RevisionError),
}

/// The folder to discover for `ORG/NAME` at `spec` in the hub cache at
/// `root`: the kernel's cache folder itself for the default (discovery
/// picks `refs/main`, else the newest snapshot), else the snapshot the
/// revision or version names, as `get_kernel(repo, revision=…, version=…)`
/// picks it offline.
pub fn snapshot(root: &Path, repo: &str, spec: &RevisionSpec) -> Result<PathBuf, SnapshotError> {
    let folder = repo_folder(root, repo)?;
    Ok(match spec {
        RevisionSpec::Main => folder,
        _ => snapshot_for(&folder, spec)?,
    })
}

/// The snapshot of every ref of every kernel in the hub cache at `root`,
/// each named `ORG/NAME (refs)` (its path when no ref names it), in
/// folder order, with what could not be read in its place: one broken
/// folder does not stop the others.
pub fn every_cached_ref(root: &Path) -> Vec<Result<(String, PathBuf), String>> {
    let mut found = Vec::new();
    for folder in cached_kernels(root) {
        let snapshots = match ref_snapshots(&folder) {
            Ok(s) => s,
            Err(e) => {
                found.push(Err(e.to_string()));
                continue;
            }
        };
        let repo = folder
            .file_name()
            .and_then(|name| repo_id(&name.to_string_lossy()));
        for (snapshot, refs) in snapshots {
            let given = match &repo {
                Some(repo) if !refs.is_empty() => format!("{repo} ({})", refs.join(", ")),
                _ => snapshot.display().to_string(),
            };
            found.push(Ok((given, snapshot)));
        }
    }
    found
}
