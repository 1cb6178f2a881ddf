//! What is installed in a Python environment, read from its import folders:
//! distribution names and versions (`*.dist-info`, `*.egg-info`) and how
//! torch was built (`torch/version.py`, its CMake config).

use super::python::TorchBuild;
use super::sources::Listings;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A distribution name as PEP 503 compares them: lower case, runs of
/// `-`, `_`, `.` as one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// `name-version.dist-info` / `name-version[-pyX.Y].egg-info` → (normalized
/// name, version).
pub fn parse_dist_dir(dir_name: &str) -> Option<(String, String)> {
    let (name, version) = dist_dir_parts(dir_name)?;
    Some((normalize(name), version.to_string()))
}

/// [`parse_dist_dir`]'s name as written and version, borrowed.
fn dist_dir_parts(dir_name: &str) -> Option<(&str, &str)> {
    let stem = dir_name
        .strip_suffix(".dist-info")
        .or_else(|| dir_name.strip_suffix(".egg-info"))?;
    let mut parts = stem.split('-');
    let name = parts.next().filter(|n| !n.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((name, version))
}

/// Whether `normalize(raw) == normalized`, without building the string: a
/// site-packages folder holds hundreds of entries, of which a fingerprint
/// wants a few.
fn normalizes_to(raw: &str, normalized: &str) -> bool {
    let mut want = normalized.chars();
    let mut separator = false;
    for c in raw.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !separator && want.next() != Some('-') {
                return false;
            }
            separator = true;
        } else {
            separator = false;
            if want.next() != Some(c.to_ascii_lowercase()) {
                return false;
            }
        }
    }
    want.next().is_none()
}

/// The installed versions of the distributions `wanted` (normalized names)
/// in the folders, the first folder winning; those not installed are left
/// out.
pub(crate) fn installed(
    site_packages: &[PathBuf],
    listings: &Listings,
    wanted: &[String],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for dir in site_packages {
        for entry in listings.names(dir).iter() {
            let Some((name, version)) = entry.to_str().and_then(dist_dir_parts) else {
                continue;
            };
            if let Some(want) = wanted.iter().find(|w| normalizes_to(name, w)) {
                out.entry(want.clone())
                    .or_insert_with(|| version.to_string());
            }
        }
    }
    out
}

/// The version of distribution `name` in one site-packages folder.
pub(crate) fn dist_version(site: &Path, name: &str, listings: &Listings) -> Option<String> {
    let want = normalize(name);
    listings.names(site).iter().find_map(|e| {
        let (n, v) = dist_dir_parts(e.to_str()?)?;
        normalizes_to(n, &want).then(|| v.to_string())
    })
}

/// torch's build, from the first `torch/` in import order.
pub(crate) fn torch_build(site_packages: &[PathBuf]) -> TorchBuild {
    let torch = site_packages
        .iter()
        .map(|d| d.join("torch"))
        .find(|t| t.join("version.py").is_file());
    let text = torch
        .as_ref()
        .and_then(|t| crate::fs::read_small_text(t.join("version.py")).ok())
        .unwrap_or_default();
    let cxx11_abi = torch.as_ref().and_then(|t| {
        let cmake =
            crate::fs::read_small_text(t.join("share/cmake/Torch/TorchConfig.cmake")).ok()?;
        let (_, rest) = cmake.split_once("_GLIBCXX_USE_CXX11_ABI=")?;
        match rest.as_bytes().first() {
            Some(b'1') => Some(true),
            Some(b'0') => Some(false),
            _ => None,
        }
    });
    TorchBuild {
        cuda: version_py_field(&text, "cuda"),
        hip: version_py_field(&text, "hip"),
        xpu: version_py_field(&text, "xpu"),
        cxx11_abi,
    }
}

/// A string field of `torch/version.py` (`cuda: Optional[str] = '12.8'`,
/// `cuda = None`).
pub fn version_py_field(text: &str, field: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?;
        if !rest.starts_with([' ', ':', '=']) {
            return None;
        }
        let (_, value) = rest.split_once('=')?;
        let value = value.trim();
        let quoted = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))?;
        Some(quoted.to_string())
    })
}

/// A digest of what is installed in the import folders `site_packages`:
/// the names of their entries (distributions, packages, modules, `.pth`
/// files), not their contents. An install, an upgrade (a new `dist-info`
/// name) or a removal changes it; importing does not (`__pycache__` is left
/// out). It vouches for outcomes about the environment's packages: a
/// missing module may be installed by a distribution that no fingerprint
/// tracks. A fingerprint takes it from the listings it made anyway
/// ([`super::PythonEnv::installed_digest`]).
pub fn distributions_digest(site_packages: &[PathBuf]) -> String {
    digest_of(site_packages, &Listings::default())
}

/// [`distributions_digest`] from the folders as `listings` lists them.
pub(crate) fn digest_of(site_packages: &[PathBuf], listings: &Listings) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for dir in site_packages {
        let listed = listings.names(dir);
        let mut names: Vec<&std::ffi::OsStr> = listed
            .iter()
            .map(std::ffi::OsString::as_os_str)
            .filter(|n| *n != "__pycache__")
            .collect();
        names.sort_unstable();
        hasher.update(dir.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        for name in names {
            hasher.update(name.as_encoded_bytes());
            hasher.update([0]);
        }
        hasher.update([1]);
    }
    crate::hash::hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::{normalize, normalizes_to};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn normalizes_to_agrees_with_normalize(raw in "[aA_.-]{0,8}", other in "[aA_.-]{0,8}") {
            prop_assert!(normalizes_to(&raw, &normalize(&raw)));
            prop_assert_eq!(normalizes_to(&raw, &other), normalize(&raw) == other);
            prop_assert_eq!(normalizes_to(&raw, &normalize(&other)), normalize(&raw) == normalize(&other));
        }
    }
}
