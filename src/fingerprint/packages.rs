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
        .find(|t| crate::seen::is_file(&t.join("version.py")));
    let text = torch
        .as_ref()
        .and_then(|t| crate::fs::read_small_text(t.join("version.py")).ok())
        .unwrap_or_default();
    let cxx11_abi = torch
        .as_ref()
        .and_then(|t| cmake_abi(t).or_else(|| library_abi(t)));
    TorchBuild {
        cuda: version_py_field(&text, "cuda"),
        hip: version_py_field(&text, "hip"),
        xpu: version_py_field(&text, "xpu"),
        cxx11_abi,
    }
}

/// The ABI torch's CMake config compiles extensions with (torch before
/// 2.7 says it there).
fn cmake_abi(torch: &Path) -> Option<bool> {
    let cmake =
        crate::fs::read_small_text(torch.join("share/cmake/Torch/TorchConfig.cmake")).ok()?;
    let (_, rest) = cmake.split_once("_GLIBCXX_USE_CXX11_ABI=")?;
    match rest.as_bytes().first() {
        Some(b'1') => Some(true),
        Some(b'0') => Some(false),
        _ => None,
    }
}

/// The ABI of torch's smallest C++ library, `lib/libc10.so`, from the names
/// it exports: the C++11 ABI's strings are `std::__cxx11::basic_string`
/// (mangled `St7__cxx11`), the old one's `std::string` (`Ss`). Reading it
/// costs milliseconds; importing torch to ask costs seconds.
fn library_abi(torch: &Path) -> Option<bool> {
    const LIMIT: u64 = 64 << 20;
    let path = torch.join("lib/libc10.so");
    // Its `stat` vouches for the bytes read next.
    if crate::seen::metadata(&path).ok()?.len() > LIMIT {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if has(b"St7__cxx11") {
        Some(true)
    } else if has(b"_ZNKSs") || has(b"_ZNSs") {
        Some(false)
    } else {
        None
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
    use super::{normalize, normalizes_to, torch_build};
    use proptest::prelude::*;

    /// A site-packages folder whose torch has `version.py` and, when given,
    /// a `lib/libc10.so` holding `library` and a CMake config holding `cmake`.
    fn site(library: Option<&[u8]>, cmake: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("site");
        let torch = dir.path().join("torch");
        std::fs::create_dir_all(torch.join("lib")).expect("lib");
        std::fs::write(torch.join("version.py"), "cuda = '13.0'\n").expect("version.py");
        if let Some(bytes) = library {
            std::fs::write(torch.join("lib/libc10.so"), bytes).expect("libc10");
        }
        if let Some(text) = cmake {
            std::fs::create_dir_all(torch.join("share/cmake/Torch")).expect("cmake");
            std::fs::write(torch.join("share/cmake/Torch/TorchConfig.cmake"), text)
                .expect("config");
        }
        dir
    }

    #[test]
    fn torch_abi_from_its_files_without_importing_it() {
        let abi =
            |library, cmake| torch_build(&[site(library, cmake).path().to_path_buf()]).cxx11_abi;
        let cxx11: &[u8] = b"\x7fELF..._ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\0";
        let old: &[u8] = b"\x7fELF..._ZN3c106detail14torchCheckFailEPKcS2_jRKSs\0_ZNKSs4sizeEv\0";
        assert_eq!(abi(Some(cxx11), None), Some(true));
        assert_eq!(abi(Some(old), None), Some(false));
        assert_eq!(abi(Some(b"\x7fELF no strings"), None), None);
        assert_eq!(abi(None, None), None);
        // The CMake config, where a torch has one, is said first.
        let config = "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")";
        assert_eq!(abi(Some(cxx11), Some(config)), Some(false));
    }

    proptest! {
        #[test]
        fn normalizes_to_agrees_with_normalize(raw in "[aA_.-]{0,8}", other in "[aA_.-]{0,8}") {
            prop_assert!(normalizes_to(&raw, &normalize(&raw)));
            prop_assert_eq!(normalizes_to(&raw, &other), normalize(&raw) == other);
            prop_assert_eq!(normalizes_to(&raw, &normalize(&other)), normalize(&raw) == normalize(&other));
        }
    }
}
