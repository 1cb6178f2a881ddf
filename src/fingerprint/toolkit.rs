//! CUDA toolkits (nvcc, ptxas), NVRTC and the CUDA runtime library, found
//! where kernels look for them. Versions come from files; nvcc is asked
//! only when its `stat` changed since it was last asked.

use super::child;
use super::facts::{Asked, ToolAnswers};
use super::packages::dist_version;
use super::sources::Listings;
use super::{FingerprintError, Sources};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every toolkit found, the active one, and the CUDA libraries beside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolkits {
    /// Root of the first toolkit with an nvcc in lookup order, pip wheels
    /// included (the one preflight itself compiles with); `None`: no nvcc.
    pub active: Option<PathBuf>,
    /// The CUDA home a kernel finds when it looks the usual way (torch's
    /// and DeepGEMM's `_find_cuda_home`: `CUDA_HOME`, else `CUDA_PATH`,
    /// else the folder above the `nvcc` on `PATH`, else `/usr/local/cuda`
    /// if it exists); `None`: such a kernel finds none. An nvcc only in a
    /// pip wheel is never visible this way. Hashed: whether a run-time
    /// compiling kernel works here depends on it, and neither `PATH` nor
    /// how a toolkit was found is hashed otherwise.
    #[serde(default)]
    pub visible: Option<PathBuf>,
    /// Toolkits in lookup order, each root once.
    pub found: Vec<Toolkit>,
    /// NVRTC libraries (`libnvrtc.so.N`) in the toolkits and wheels.
    pub nvrtc: Vec<Library>,
    /// CUDA runtime libraries (`libcudart.so.N`) in the toolkits and wheels.
    pub cudart: Vec<Library>,
}

/// One CUDA toolkit (or pip wheel layout).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolkit {
    /// The toolkit root (the folder holding `bin/`).
    pub root: PathBuf,
    /// Where the lookup found it.
    pub found_via: FoundVia,
    /// `bin/nvcc`, if present.
    pub nvcc: Option<PathBuf>,
    /// `bin/ptxas`, if present.
    pub ptxas: Option<PathBuf>,
    /// The toolkit version (`12.8.93`, or `12.8` from `cuda.h`).
    pub version: Option<String>,
    /// Which source gave the version.
    pub version_from: Option<VersionFrom>,
    /// Why this toolkit is unusable or doubtful, said plainly.
    pub problem: Option<String>,
}

/// How a toolkit was found, in the order kernels look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundVia {
    /// `PREFLIGHT_NVCC`.
    Override,
    /// `CUDA_HOME`.
    CudaHome,
    /// `CUDA_PATH`.
    CudaPath,
    /// `nvcc` on `PATH`.
    Path,
    /// `/usr/local/cuda` (or `PREFLIGHT_CUDA_DEFAULT_ROOT`).
    DefaultRoot,
    /// A pip wheel in the Python environment (`nvidia/cu13`, `nvidia/cuda_nvcc`).
    PipWheel,
}

/// The source of a toolkit version, most exact first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionFrom {
    /// `PREFLIGHT_CUDA_VERSION`.
    Override,
    /// `version.json` (`cuda_nvcc`, else `cuda`).
    VersionJson,
    /// `version.txt` (CUDA 10 and older).
    VersionTxt,
    /// `nvcc --version`, cached under nvcc's `stat`.
    Nvcc,
    /// The `nvidia-cuda-nvcc` wheel's `*.dist-info`.
    DistInfo,
    /// `CUDA_VERSION` in `include/cuda.h` (major.minor only).
    CudaH,
}

/// A shared library found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Library {
    /// The `libX.so.N` file.
    pub path: PathBuf,
    /// Its version: from the file the link points to, the wheel's
    /// `*.dist-info`, a sibling such as `libnvrtc-builtins.so.13.5`, else
    /// the soname's major number.
    pub version: String,
}

const NVCC_TIMEOUT: Duration = Duration::from_secs(20);

struct Candidate {
    root: PathBuf,
    via: FoundVia,
    /// The site-packages folder of a wheel layout.
    site: Option<PathBuf>,
}

/// Find toolkits and libraries; `site_packages` are the active Python's.
pub(crate) fn detect(
    src: &Sources,
    site_packages: &[PathBuf],
    tools: &ToolAnswers,
    listings: &Listings,
) -> Result<Toolkits, FingerprintError> {
    let mut found: Vec<Toolkit> = Vec::new();
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::BTreeSet::new();
    for c in candidates(src, site_packages) {
        // One `stat` tells whether the root was seen already and whether it
        // is a folder. A root that does not exist is still described (its
        // problem is a fact).
        let meta = crate::seen::metadata(&c.root).ok();
        if let Some(m) = &meta
            && !seen.insert((m.dev(), m.ino()))
        {
            continue;
        }
        let is_dir = meta.as_ref().is_some_and(std::fs::Metadata::is_dir);
        found.push(describe(&c, is_dir, tools, listings));
    }
    let mut active = found
        .iter()
        .find(|t| t.nvcc.is_some())
        .map(|t| t.root.clone());
    let visible = match src.override_opt("PREFLIGHT_NVCC") {
        Some(None) => None,
        Some(Some(nvcc)) => Some(root_of(Path::new(nvcc))),
        None => cuda_home(src),
    };
    apply_overrides(src, &mut found, &mut active)?;
    let lib_dirs = library_dirs(&found, site_packages);
    let mut nvrtc = libraries(&lib_dirs, "libnvrtc", "nvidia_cuda_nvrtc", listings);
    let mut cudart = libraries(&lib_dirs, "libcudart", "nvidia_cuda_runtime", listings);
    override_library(src, "PREFLIGHT_NVRTC_VERSION", &mut nvrtc)?;
    override_library(src, "PREFLIGHT_CUDART_VERSION", &mut cudart)?;
    Ok(Toolkits {
        active,
        visible,
        found,
        nvrtc,
        cudart,
    })
}

/// `PREFLIGHT_NVCC=none` leaves no active toolkit (a path was already put
/// first by [`candidates`]); `PREFLIGHT_CUDA_VERSION` sets the active
/// toolkit's version.
fn apply_overrides(
    src: &Sources,
    found: &mut [Toolkit],
    active: &mut Option<PathBuf>,
) -> Result<(), FingerprintError> {
    if let Some(None) = src.override_opt("PREFLIGHT_NVCC") {
        *active = None;
    }
    let Some(v) = src.override_parsed("PREFLIGHT_CUDA_VERSION", |v| {
        v.parse::<crate::variant::Version>()?;
        Ok(v.to_string())
    })?
    else {
        return Ok(());
    };
    let toolkit = found
        .iter_mut()
        .find(|t| Some(&t.root) == active.as_ref())
        .ok_or_else(|| FingerprintError::BadOverride {
            var: "PREFLIGHT_CUDA_VERSION".into(),
            value: v.clone(),
            why: "there is no active toolkit to apply it to (set PREFLIGHT_NVCC too)".into(),
        })?;
    toolkit.version = Some(v);
    toolkit.version_from = Some(VersionFrom::Override);
    Ok(())
}

/// The CUDA home as torch's `_find_cuda_home` (and DeepGEMM's copy of it)
/// finds it: a set variable is taken whether or not it holds an nvcc; the
/// `nvcc` on `PATH` gives the folder above its `bin/`, links not resolved.
fn cuda_home(src: &Sources) -> Option<PathBuf> {
    let set = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .find_map(|k| src.var(k).filter(|v| !v.is_empty()));
    if let Some(home) = set {
        return Some(std::path::absolute(home).unwrap_or_else(|_| PathBuf::from(home)));
    }
    let on_path = src.var("PATH").and_then(|path| {
        super::sources::path_dirs(path)
            .into_iter()
            .map(|d| d.join("nvcc"))
            .find(|p| is_executable(p))
    });
    if let Some(nvcc) = on_path {
        let nvcc = std::path::absolute(&nvcc).unwrap_or(nvcc);
        return nvcc.parent().and_then(Path::parent).map(Path::to_path_buf);
    }
    let default = src
        .var("PREFLIGHT_CUDA_DEFAULT_ROOT")
        .unwrap_or("/usr/local/cuda");
    crate::seen::is_dir(Path::new(default)).then(|| PathBuf::from(default))
}

impl Toolkits {
    /// The active toolkit's nvcc (the one a kernel compiling at run time
    /// would use first), with the toolkit's version when known.
    pub fn active_nvcc(&self) -> Option<(PathBuf, Option<String>)> {
        self.found
            .iter()
            .find(|t| Some(&t.root) == self.active.as_ref())
            .and_then(|t| Some((t.nvcc.clone()?, t.version.clone())))
    }

    /// The toolkit at the [`Toolkits::visible`] CUDA home, when the lookup
    /// described it.
    pub fn visible_toolkit(&self) -> Option<&Toolkit> {
        let visible = self.visible.as_deref()?;
        let same = |t: &&Toolkit| {
            t.root == visible
                || crate::fs::canonicalize(&t.root).ok() == crate::fs::canonicalize(visible).ok()
        };
        self.found.iter().find(same)
    }

    /// The nvcc a kernel that looks the usual way runs (`<CUDA home>/bin/nvcc`), if there is one.
    pub fn visible_nvcc(&self) -> Option<PathBuf> {
        let nvcc = self.visible.as_deref()?.join("bin/nvcc");
        is_executable(&nvcc).then_some(nvcc)
    }

    /// A toolkit with an nvcc that only a pip wheel holds (`nvidia/cu13`):
    /// present, but invisible to a kernel that looks the usual way.
    pub fn wheel_nvcc(&self) -> Option<&Toolkit> {
        self.found
            .iter()
            .find(|t| t.found_via == FoundVia::PipWheel && t.nvcc.is_some())
    }
}

/// Candidate roots in the order kernels look: CUDA_HOME, CUDA_PATH, nvcc on
/// PATH, /usr/local/cuda, then the wheels of the Python environment.
fn candidates(src: &Sources, site_packages: &[PathBuf]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut push = |root: PathBuf, via, site| {
        let root = std::path::absolute(&root).unwrap_or(root);
        out.push(Candidate { root, via, site })
    };
    if let Some(Some(nvcc)) = src.override_opt("PREFLIGHT_NVCC") {
        push(root_of(Path::new(nvcc)), FoundVia::Override, None);
    }
    if let Some(home) = src.var("CUDA_HOME") {
        push(PathBuf::from(home), FoundVia::CudaHome, None);
    }
    if let Some(path) = src.var("CUDA_PATH") {
        push(PathBuf::from(path), FoundVia::CudaPath, None);
    }
    if let Some(path) = src.var("PATH")
        && let Some(nvcc) = super::sources::path_dirs(path)
            .into_iter()
            .map(|d| d.join("nvcc"))
            .find(|p| is_executable(p))
    {
        push(root_of(&nvcc), FoundVia::Path, None);
    }
    let default = src
        .var("PREFLIGHT_CUDA_DEFAULT_ROOT")
        .unwrap_or("/usr/local/cuda");
    if crate::seen::is_dir(Path::new(default)) {
        push(PathBuf::from(default), FoundVia::DefaultRoot, None);
    }
    for site in site_packages {
        let nvidia = site.join("nvidia");
        // Newest layout first: cu14, cu13, … then the CUDA 11 / 12
        // `cuda_nvcc` layout.
        let mut layouts: Vec<(u32, String)> = crate::seen::names(&nvidia)
            .into_iter()
            .filter_map(|name| {
                let name = name.into_string().ok()?;
                let rank = if name == "cuda_nvcc" {
                    0
                } else {
                    name.strip_prefix("cu")?.parse::<u32>().ok()?
                };
                Some((rank, name))
            })
            .collect();
        layouts.sort_by(|a, b| b.cmp(a));
        let names = layouts.into_iter().map(|(_, name)| name);
        for name in names {
            push(nvidia.join(name), FoundVia::PipWheel, Some(site.clone()));
        }
    }
    out
}

/// The toolkit root of an nvcc binary: `<root>/bin/nvcc`, links resolved.
fn root_of(nvcc: &Path) -> PathBuf {
    let real = crate::fs::canonicalize(nvcc).unwrap_or_else(|_| nvcc.to_path_buf());
    real.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or(real)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    crate::seen::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `is_dir`: whether the root is a folder, as its `stat` in [`detect`] said.
fn describe(c: &Candidate, is_dir: bool, tools: &ToolAnswers, listings: &Listings) -> Toolkit {
    let file = |rel: &str| Some(c.root.join(rel)).filter(|p| crate::seen::is_file(p));
    let nvcc = file("bin/nvcc");
    let ptxas = file("bin/ptxas");
    let mut problem = None;
    if !is_dir {
        problem = Some(format!("{} is not a directory", c.root.display()));
    } else if nvcc.is_none() && ptxas.is_none() {
        problem = Some("no bin/nvcc or bin/ptxas in it".to_string());
    }
    let mut version = None;
    if let Some(v) = version_json(&c.root) {
        version = Some((v, VersionFrom::VersionJson));
    } else if let Some(v) = version_txt(&c.root) {
        version = Some((v, VersionFrom::VersionTxt));
    } else if let Some(nvcc) = &nvcc {
        let answer = tools.answer(nvcc, || ask_version(nvcc));
        match answer.version {
            Some(v) => version = Some((v, VersionFrom::Nvcc)),
            None => {
                problem = Some(format!(
                    "nvcc --version failed: {}",
                    answer.problem.unwrap_or_else(|| "no version".into())
                ))
            }
        }
    }
    if version.is_none() {
        version = c
            .site
            .as_deref()
            .and_then(|site| wheel_version(site, &c.root, listings))
            .map(|v| (v, VersionFrom::DistInfo))
            .or_else(|| cuda_h_version(&c.root).map(|v| (v, VersionFrom::CudaH)));
    }
    Toolkit {
        root: c.root.clone(),
        found_via: c.via,
        nvcc,
        ptxas,
        version_from: version.as_ref().map(|(_, from)| *from),
        version: version.map(|(v, _)| v),
        problem,
    }
}

/// The version of the nvcc wheel that installed a layout: `nvidia/cu13`
/// comes from `nvidia-cuda-nvcc` 13.x, `nvidia/cuda_nvcc` from
/// `nvidia-cuda-nvcc-cu12` (or `-cu11`). Both may be installed side by side,
/// so the major version must match the layout.
fn wheel_version(site: &Path, root: &Path, listings: &Listings) -> Option<String> {
    let layout = root.file_name()?.to_str()?;
    let matches = |v: &String, major: &str| v.split('.').next() == Some(major);
    match layout
        .strip_prefix("cu")
        .filter(|m| m.parse::<u32>().is_ok())
    {
        Some(major) => {
            dist_version(site, "nvidia-cuda-nvcc", listings).filter(|v| matches(v, major))
        }
        None => ["12", "11"].iter().find_map(|major| {
            dist_version(site, &format!("nvidia-cuda-nvcc-cu{major}"), listings)
                .filter(|v| matches(v, major))
        }),
    }
}

/// Run `nvcc --version` and read its `release X.Y, VX.Y.Z` line.
fn ask_version(nvcc: &Path) -> Asked {
    match child::ask(nvcc, &["--version"], NVCC_TIMEOUT) {
        Ok(said) => match parse_nvcc_version(&said) {
            Some(v) => Asked::Version(v),
            None => Asked::Failed("its output has no `release X.Y, VX.Y.Z` line".to_string()),
        },
        Err(asked) => asked,
    }
}

/// The version in `nvcc --version` (`Cuda compilation tools, release 12.8,
/// V12.8.93` → `12.8.93`; `release 12.8` alone → `12.8`).
pub fn parse_nvcc_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("release "))?;
    let (_, rest) = line.split_once("release ")?;
    let mut parts = rest.split(',').map(str::trim);
    let release = parts.next()?;
    let full = parts
        .next()
        .and_then(|v| v.strip_prefix('V'))
        .map(|v| v.split_whitespace().next().unwrap_or(v));
    let pick = full.filter(|f| f.starts_with(release)).unwrap_or(release);
    pick.parse::<crate::variant::Version>().ok()?;
    Some(pick.to_string())
}

fn version_json(root: &Path) -> Option<String> {
    let bytes = crate::fs::read_small(&root.join("version.json")).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    ["cuda_nvcc", "cuda"]
        .iter()
        .find_map(|k| value.get(k)?.get("version")?.as_str())
        .map(str::to_string)
}

fn version_txt(root: &Path) -> Option<String> {
    let text = crate::fs::read_small_text(root.join("version.txt")).ok()?;
    let v = text
        .split("CUDA Version")
        .nth(1)?
        .split_whitespace()
        .next()?;
    Some(v.to_string())
}

/// `#define CUDA_VERSION 12080` → `12.8`.
fn cuda_h_version(root: &Path) -> Option<String> {
    let text = crate::fs::read_small_text(root.join("include/cuda.h")).ok()?;
    let n: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define CUDA_VERSION"))?
        .trim()
        .parse()
        .ok()?;
    Some(format!("{}.{}", n / 1000, (n % 1000) / 10))
}

/// Folders that hold the CUDA libraries: each toolkit's `lib64` and `lib`,
/// and the NVRTC / runtime wheels. Each pairs with the site-packages whose
/// `*.dist-info` may name the version.
fn library_dirs(found: &[Toolkit], site_packages: &[PathBuf]) -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut dirs = Vec::new();
    for t in found {
        let site = (t.found_via == FoundVia::PipWheel)
            .then(|| t.root.parent()?.parent().map(Path::to_path_buf))
            .flatten();
        for sub in ["lib64", "lib"] {
            dirs.push((t.root.join(sub), site.clone()));
        }
    }
    for site in site_packages {
        for sub in ["nvidia/cuda_nvrtc/lib", "nvidia/cuda_runtime/lib"] {
            dirs.push((site.join(sub), Some(site.clone())));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|(d, _)| super::sources::place_id(d).is_some_and(|id| seen.insert(id)));
    dirs
}

/// `<stem>.so.N` files in `dirs`, with the best version each can tell.
fn libraries(
    dirs: &[(PathBuf, Option<PathBuf>)],
    stem: &str,
    dist: &str,
    listings: &Listings,
) -> Vec<Library> {
    let prefix = format!("{stem}.so.");
    let mut out = Vec::new();
    for (dir, site) in dirs {
        let mut names: Vec<String> = listings
            .names(dir)
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names.iter().filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        }) {
            let path = dir.join(name);
            let soname_major = &name[prefix.len()..];
            let from_link = crate::fs::canonicalize(&path).ok().and_then(|real| {
                let real = real.file_name()?.to_string_lossy().into_owned();
                let v = real.strip_prefix(&prefix)?.to_string();
                v.contains('.').then_some(v)
            });
            let from_sibling = || {
                let builtins = format!("{stem}-builtins.so.{soname_major}.");
                names
                    .iter()
                    .find_map(|n| n.strip_prefix(&builtins))
                    .map(|minor| format!("{soname_major}.{minor}"))
            };
            let from_dist = || {
                let site = site.as_deref()?;
                dist_version(site, dist, listings)
                    .or_else(|| dist_version(site, &format!("{dist}_cu{soname_major}"), listings))
                    .filter(|v| v.split('.').next() == Some(soname_major))
            };
            let version = from_link
                .or_else(from_dist)
                .or_else(from_sibling)
                .unwrap_or_else(|| soname_major.to_string());
            out.push(Library { path, version });
        }
    }
    out
}

fn override_library(
    src: &Sources,
    var: &str,
    libs: &mut Vec<Library>,
) -> Result<(), FingerprintError> {
    let Some(v) = src.override_opt(var) else {
        return Ok(());
    };
    match v {
        None => libs.clear(),
        Some(v) => {
            v.parse::<crate::variant::Version>()
                .map_err(|why| FingerprintError::BadOverride {
                    var: var.into(),
                    value: v.into(),
                    why,
                })?;
            if libs.is_empty() {
                libs.push(Library {
                    path: PathBuf::from(format!("<{var}>")),
                    version: String::new(),
                });
            }
            for lib in libs.iter_mut() {
                lib.version = v.to_string();
            }
        }
    }
    Ok(())
}
