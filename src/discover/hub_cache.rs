//! The Hugging Face hub cache layout: `kernels--ORG--NAME/{refs,snapshots,blobs}`.

use super::DiscoverError;
use std::path::{Path, PathBuf};

/// The hub cache root: `KERNELS_CACHE`, else `HF_HUB_CACHE`, else
/// `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_root() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
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
pub fn repo_id(folder: &str) -> Option<String> {
    let rest = folder
        .strip_prefix("kernels--")
        .or_else(|| folder.strip_prefix("models--"))?;
    let (org, name) = rest.split_once("--")?;
    (!org.is_empty() && !name.is_empty()).then(|| format!("{org}/{name}"))
}

/// `ORG/NAME` when `dir` is `<cache folder>/snapshots/<revision>`.
pub fn snapshot_repo_id(dir: &Path) -> Option<String> {
    let dir = std::path::absolute(dir).ok()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    repo_id(&snapshots.parent()?.file_name()?.to_string_lossy())
}

/// The cache folder of `ORG/NAME` under `root`.
pub fn repo_folder(root: &Path, repo: &str) -> Result<PathBuf, DiscoverError> {
    let Some((org, name)) = repo.split_once('/') else {
        return Err(DiscoverError::BadRepoId(repo.to_string()));
    };
    if org.is_empty() || name.is_empty() || name.contains('/') {
        return Err(DiscoverError::BadRepoId(repo.to_string()));
    }
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
                Some(_) => pick_snapshot(&e.path()).is_ok_and(|s| s.join("build").is_dir()),
                None => false,
            }
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}
