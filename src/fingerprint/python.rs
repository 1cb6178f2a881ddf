//! The Python environment kernels would be loaded into, read from disk:
//! the interpreter, its version, its site-packages and the versions of the
//! packages that decide whether kernels run. Python is started here only
//! to check an interpreter the user named (`--python`, `PREFLIGHT_PYTHON`),
//! once per `stat` of it.

use super::child;
use super::facts::{Asked, ToolAnswers};
use super::packages::{installed, torch_build};
use super::{FingerprintError, Sources};
use crate::variant::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use super::packages::{distributions_digest, normalize, parse_dist_dir, version_py_field};

/// Packages whose versions are always part of the fingerprint (distribution
/// names, normalized).
pub const TRACKED_PACKAGES: [&str; 7] = [
    "torch",
    "triton",
    "nvidia-cutlass-dsl",
    "apache-tvm-ffi",
    "einops",
    "kernels",
    "mlx",
];

/// A Python environment.
///
/// Its identity (what the hash covers) is the interpreter's real path, its
/// version, its import folders and packages; `interpreter`, `found_via` and
/// `measured` say how it was reached and asked, and are left out of the
/// hash, so that one interpreter reached through `--python`, `VIRTUAL_ENV`,
/// `PATH` or a link to it is one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonEnv {
    /// The interpreter as found (links not resolved: a venv's `python` is a
    /// link to its base interpreter, and the link is what makes the venv);
    /// the one a child runs.
    pub interpreter: PathBuf,
    /// How it was chosen.
    pub found_via: PythonVia,
    /// The interpreter's real path, every link resolved.
    pub real_path: PathBuf,
    /// `3.11.7` when a file says so, else `3.11`; `None`: unknown.
    pub version: Option<String>,
    /// Import folders in `sys.path` order: `PYTHONPATH`, the user site, the
    /// environment's site-packages.
    pub site_packages: Vec<PathBuf>,
    /// Tracked packages (and any asked for) → installed version; `None`:
    /// not installed.
    pub packages: BTreeMap<String, Option<String>>,
    /// How the installed torch was built, if torch is installed.
    pub torch: Option<TorchBuild>,
    /// What the Python child said; full fingerprint only. Its facts are
    /// already in `version` and `torch`.
    #[serde(default)]
    pub measured: Option<PythonMeasured>,
    /// [`distributions_digest`] of `site_packages` when this fingerprint
    /// was taken, from the listings detection made anyway (a second listing
    /// of a large site-packages costs a warm `select` a tenth of its time).
    /// Not in the hash: each outcome record carries the digest it was found
    /// under. `None` in a fingerprint read back from JSON of an older
    /// version: [`PythonEnv::installed_digest`] lists again.
    #[serde(default)]
    pub installed: Option<String>,
}

impl PythonEnv {
    /// The digest of what is installed in the import folders: the one taken
    /// with this fingerprint, else listed now.
    pub fn installed_digest(&self) -> String {
        self.installed
            .clone()
            .unwrap_or_else(|| distributions_digest(&self.site_packages))
    }
}

/// What the Python child of the full fingerprint said about its interpreter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum PythonMeasured {
    /// It answered.
    Ok {
        /// `platform.python_version()`.
        version: String,
        /// `torch.compiled_with_cxx11_abi()`; `None`: torch did not import.
        torch_cxx11_abi: Option<bool>,
    },
    /// It did not answer (could not start, failed, timed out): what the
    /// files say stands, and it is asked again next time.
    NotMeasured {
        /// Why.
        reason: String,
    },
}

/// How the interpreter was chosen, in order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonVia {
    /// `--python`.
    Flag,
    /// `PREFLIGHT_PYTHON`.
    Override,
    /// `$VIRTUAL_ENV/bin/python`.
    VirtualEnv,
    /// `$CONDA_PREFIX/bin/python`.
    CondaPrefix,
    /// `python3` on `PATH`.
    Path,
}

/// What torch was built with, from `torch/version.py` and its CMake config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchBuild {
    /// `torch.version.cuda` (`12.8`); `None` for CPU or ROCm builds.
    pub cuda: Option<String>,
    /// `torch.version.hip`; `None` unless a ROCm build.
    pub hip: Option<String>,
    /// `torch.version.xpu`; `None` unless an XPU build.
    pub xpu: Option<String>,
    /// Built with the C++11 ABI (`_GLIBCXX_USE_CXX11_ABI=1`); `None`: unknown.
    pub cxx11_abi: Option<bool>,
}

/// The oldest Python the probes' driver runs on (`requires-python` in
/// `pyproject.toml`).
pub const MIN_PYTHON: Version = Version::new(3, 9);

/// What a named interpreter is asked: valid Python 2 and 3, so that an old
/// Python is told apart from a program that is not Python at all.
const ASK_PYTHON: &str =
    "import sys; sys.stdout.write('python %d.%d.%d' % tuple(sys.version_info[:3]))";

/// How long a named interpreter may take to say its version.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// Find and describe the Python environment; `None`: no interpreter. An
/// interpreter the user named is asked its version first (or the answer
/// it gave for this `stat` is read from `tools`): a program that is not a
/// Python the probes can run in is an error, never a guess from its path.
pub(crate) fn detect(
    src: &Sources,
    listings: &super::sources::Listings,
    tools: &ToolAnswers,
) -> Result<Option<PythonEnv>, FingerprintError> {
    // Checked even when there is no Python, so that a typo is reported.
    src.override_parsed("PREFLIGHT_TORCH_CXX11_ABI", parse_bool)?;
    let Some((interpreter, found_via)) = interpreter(src)? else {
        return Ok(None);
    };
    let interpreter = std::path::absolute(&interpreter).unwrap_or(interpreter);
    let interpreter = pyenv_target(src, &interpreter).unwrap_or(interpreter);
    let said = match found_via {
        PythonVia::Flag | PythonVia::Override => Some(check_named(&interpreter, tools)?),
        _ => None,
    };
    let real_path = crate::fs::canonicalize(&interpreter).unwrap_or_else(|_| interpreter.clone());
    // Python's own rule (`getpath`): a `pyvenv.cfg` beside the interpreter
    // as reached, or one folder up, makes a virtual environment there;
    // otherwise the installation is where the real interpreter lives.
    let (prefix, venv) = match venv_of(&interpreter) {
        Some((prefix, cfg)) => (prefix, Some(cfg)),
        None => (
            real_path
                .parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            None,
        ),
    };
    let mut version = venv
        .as_ref()
        .and_then(|v| v.version.clone())
        .or_else(|| minor_from_name(&real_path))
        .or_else(|| minor_from_lib(&prefix));
    if let Some(minor) = version.as_deref().filter(|v| v.matches('.').count() == 1) {
        let base = venv
            .as_ref()
            .and_then(|v| v.home.as_deref()?.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| prefix.clone());
        if let Some(exact) = patchlevel(&base, minor) {
            version = Some(exact);
        }
    }
    // The files' version stands unless the interpreter itself says
    // otherwise (or they say nothing): one interpreter, however it is
    // reached, is one machine.
    if let Some(said) = said
        && !version
            .as_deref()
            .is_some_and(|v| said == v || said.starts_with(&format!("{v}.")))
    {
        version = Some(said);
    }
    let site_packages = match src.var("PREFLIGHT_SITE_PACKAGES") {
        Some(list) => std::env::split_paths(list).collect(),
        None => site_dirs(src, &prefix, venv.as_ref(), version.as_deref()),
    };
    let mut names: Vec<String> = TRACKED_PACKAGES.iter().map(|s| s.to_string()).collect();
    names.extend(src.extra_packages.iter().map(|n| normalize(n)));
    let installed = installed(&site_packages, listings, &names);
    let mut packages = BTreeMap::new();
    for name in names {
        let key = format!(
            "PREFLIGHT_PKG_{}",
            name.to_ascii_uppercase().replace('-', "_")
        );
        let v = match src.override_opt(&key) {
            Some(v) => v.map(str::to_string),
            None => installed.get(&name).cloned(),
        };
        packages.insert(name, v);
    }
    let torch = packages
        .get("torch")
        .and_then(Option::as_ref)
        .map(|_| torch_build(&site_packages));
    let digest = super::packages::digest_of(&site_packages, listings);
    let mut env = PythonEnv {
        interpreter,
        found_via,
        real_path,
        version,
        site_packages,
        packages,
        torch,
        measured: None,
        installed: Some(digest),
    };
    apply_overrides(src, &mut env)?;
    Ok(Some(env))
}

/// The version of an interpreter the user named, asked of it; an error
/// that says what it is when it is not a Python the probes can run in.
fn check_named(interpreter: &Path, tools: &ToolAnswers) -> Result<String, FingerprintError> {
    let not_python = |why: String| FingerprintError::NotPython {
        path: interpreter.to_path_buf(),
        why,
    };
    let answer = tools.answer(interpreter, || ask_python(interpreter));
    let version = match (answer.version, answer.problem) {
        (Some(v), _) => v,
        (None, problem) => {
            return Err(not_python(
                problem.unwrap_or_else(|| "it did not say its version".into()),
            ));
        }
    };
    match version.parse::<Version>() {
        Ok(v) if v >= MIN_PYTHON => Ok(version),
        _ => Err(not_python(format!(
            "it is Python {version}; probes need Python {MIN_PYTHON} or newer"
        ))),
    }
}

/// Ask `python` for its version (`3.11.2`).
fn ask_python(python: &Path) -> Asked {
    use std::os::unix::fs::PermissionsExt;
    if crate::seen::metadata(python).is_ok_and(|m| m.permissions().mode() & 0o111 == 0) {
        return Asked::Failed("not executable".into());
    }
    match child::ask(python, &["-E", "-s", "-S", "-c", ASK_PYTHON], ASK_TIMEOUT) {
        Ok(said) => match said.trim().strip_prefix("python ") {
            Some(v) if v.parse::<Version>().is_ok() => Asked::Version(v.to_string()),
            _ => {
                let said: String = said.trim().chars().take(80).collect();
                Asked::Failed(if said.is_empty() {
                    "not a Python interpreter (asked its version, it printed nothing)".into()
                } else {
                    format!("not a Python interpreter (asked its version, it printed {said:?})")
                })
            }
        },
        Err(Asked::Failed(why)) => Asked::Failed(format!(
            "not a Python interpreter that works (asked its version: {why})"
        )),
        Err(other) => other,
    }
}

/// The overrides of facts that measuring may also set: the Python version
/// and torch's build. Applied again after measuring, so that they win.
pub(crate) fn apply_overrides(src: &Sources, env: &mut PythonEnv) -> Result<(), FingerprintError> {
    if let Some(v) = src.override_opt("PREFLIGHT_PYTHON_VERSION") {
        env.version = v.map(str::to_string);
    }
    let abi = src.override_parsed("PREFLIGHT_TORCH_CXX11_ABI", parse_bool)?;
    if let Some(t) = env.torch.as_mut() {
        if let Some(v) = src.override_opt("PREFLIGHT_TORCH_CUDA") {
            t.cuda = v.map(str::to_string);
        }
        if let Some(v) = src.override_opt("PREFLIGHT_TORCH_HIP") {
            t.hip = v.map(str::to_string);
        }
        if let Some(abi) = abi {
            t.cxx11_abi = abi;
        }
    }
    Ok(())
}

fn parse_bool(v: &str) -> Result<Option<bool>, String> {
    match v {
        "true" | "1" => Ok(Some(true)),
        "false" | "0" => Ok(Some(false)),
        "none" => Ok(None),
        _ => Err("expected true, false or none".into()),
    }
}

/// The interpreter: `--python`, `PREFLIGHT_PYTHON`, `VIRTUAL_ENV`,
/// `CONDA_PREFIX`, else `python3` on `PATH`.
fn interpreter(src: &Sources) -> Result<Option<(PathBuf, PythonVia)>, FingerprintError> {
    if let Some(p) = &src.python {
        return resolve_given(src, p, PythonVia::Flag).map(Some);
    }
    if let Some(p) = src.override_opt("PREFLIGHT_PYTHON") {
        return match p {
            None => Ok(None),
            Some(p) => resolve_given(src, Path::new(p), PythonVia::Override).map(Some),
        };
    }
    for (var, via) in [
        ("VIRTUAL_ENV", PythonVia::VirtualEnv),
        ("CONDA_PREFIX", PythonVia::CondaPrefix),
    ] {
        if let Some(prefix) = src.var(var) {
            let bin = Path::new(prefix).join("bin");
            if let Some(p) = ["python", "python3"]
                .iter()
                .map(|n| bin.join(n))
                .find(|p| crate::seen::is_file(p))
            {
                return Ok(Some((p, via)));
            }
        }
    }
    Ok(src
        .var("PATH")
        .and_then(|path| on_path(path, "python3"))
        .map(|p| (p, PythonVia::Path)))
}

/// The interpreter a pyenv shim (`$PYENV_ROOT/shims/python3`) runs:
/// `$PYENV_VERSION`, else the global `$PYENV_ROOT/version` file. (A
/// `.python-version` file in the working directory is not consulted: the
/// fingerprint does not depend on where it is run.)
fn pyenv_target(src: &Sources, shim: &Path) -> Option<PathBuf> {
    let shims = shim.parent()?;
    if shims.file_name()? != "shims" {
        return None;
    }
    let root = shims.parent()?;
    let version = match src.var("PYENV_VERSION") {
        Some(v) => v.to_string(),
        None => crate::fs::read_small_text(root.join("version"))
            .ok()?
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))?
            .to_string(),
    };
    let version = version.split(':').next()?;
    if version == "system" {
        return None;
    }
    let target = root
        .join("versions")
        .join(version)
        .join("bin")
        .join(shim.file_name()?);
    crate::seen::is_file(&target).then_some(target)
}

/// A given interpreter: a path, or a bare name looked up on `PATH`.
fn resolve_given(
    src: &Sources,
    p: &Path,
    via: PythonVia,
) -> Result<(PathBuf, PythonVia), FingerprintError> {
    let found = if p.components().count() == 1 && !crate::seen::is_file(p) {
        src.var("PATH")
            .and_then(|path| on_path(path, &p.to_string_lossy()))
    } else {
        Some(p.to_path_buf()).filter(|p| crate::seen::is_file(p))
    };
    found
        .map(|f| (f, via))
        .ok_or_else(|| FingerprintError::NoSuchPython(p.to_path_buf()))
}

fn on_path(path: &str, name: &str) -> Option<PathBuf> {
    super::sources::path_dirs(path)
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| crate::seen::is_file(p))
}

struct PyvenvCfg {
    home: Option<PathBuf>,
    version: Option<String>,
    system_site: bool,
}

/// The virtual environment an interpreter path makes: the folder of its
/// `pyvenv.cfg`, looked for beside it, then one folder up.
fn venv_of(interpreter: &Path) -> Option<(PathBuf, PyvenvCfg)> {
    let bin = interpreter.parent()?;
    [Some(bin), bin.parent()]
        .into_iter()
        .flatten()
        .find_map(|dir| Some((dir.to_path_buf(), read_pyvenv_cfg(dir)?)))
}

/// `pyvenv.cfg` of a virtual environment (`home`, `version` or
/// `version_info`, `include-system-site-packages`).
fn read_pyvenv_cfg(prefix: &Path) -> Option<PyvenvCfg> {
    let text = crate::fs::read_small_text(prefix.join("pyvenv.cfg")).ok()?;
    let mut cfg = PyvenvCfg {
        home: None,
        version: None,
        system_site: false,
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "home" => cfg.home = Some(PathBuf::from(v)),
            "version" | "version_info" => {
                let parts: Vec<&str> = v.split('.').take(3).collect();
                if parts.len() >= 2 && parts.iter().all(|p| p.parse::<u32>().is_ok()) {
                    cfg.version = Some(parts.join("."));
                }
            }
            "include-system-site-packages" => cfg.system_site = v.eq_ignore_ascii_case("true"),
            _ => {}
        }
    }
    Some(cfg)
}

/// `python3.11` (the real file's name) → `3.11`.
fn minor_from_name(real_path: &Path) -> Option<String> {
    let v = real_path.file_name()?.to_str()?.strip_prefix("python")?;
    let (major, minor) = v.split_once('.')?;
    (major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok()).then(|| v.to_string())
}

/// The one `lib/python3.X` folder of a prefix, when there is exactly one.
fn minor_from_lib(prefix: &Path) -> Option<String> {
    let mut found = crate::seen::names(&prefix.join("lib"))
        .into_iter()
        .filter_map(|name| {
            let name = name.into_string().ok()?;
            let v = name.strip_prefix("python")?.to_string();
            let (a, b) = v.split_once('.')?;
            (a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok()).then_some(v)
        });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// `include/python3.11/patchlevel.h` → `3.11.7`.
fn patchlevel(prefix: &Path, minor: &str) -> Option<String> {
    let text =
        crate::fs::read_small_text(prefix.join(format!("include/python{minor}/patchlevel.h")))
            .ok()?;
    let v = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define PY_VERSION"))?
        .trim()
        .trim_matches('"');
    v.starts_with(minor).then(|| v.to_string())
}

/// Import folders in `sys.path` order, those that exist, each once, by
/// their real paths (a folder reached through a link is the same folder).
fn site_dirs(
    src: &Sources,
    prefix: &Path,
    venv: Option<&PyvenvCfg>,
    version: Option<&str>,
) -> Vec<PathBuf> {
    let minor = version.map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."));
    let mut dirs: Vec<PathBuf> = Vec::new();
    // A free-threaded build's folders carry its ABI flag: `python3.13t`.
    let own = |dirs: &mut Vec<PathBuf>, prefix: &Path, m: &str| {
        for lib in ["lib", "lib64"] {
            for flag in ["", "t"] {
                dirs.push(prefix.join(format!("{lib}/python{m}{flag}/site-packages")));
            }
        }
    };
    if let Some(pp) = src.var("PYTHONPATH") {
        dirs.extend(std::env::split_paths(pp));
    }
    let system = |dirs: &mut Vec<PathBuf>, prefix: &Path| {
        if let Some(m) = &minor {
            dirs.push(prefix.join(format!("local/lib/python{m}/dist-packages")));
            dirs.push(prefix.join("lib/python3/dist-packages"));
            own(dirs, prefix, m);
        }
    };
    match venv {
        Some(cfg) => {
            if let Some(m) = &minor {
                own(&mut dirs, prefix, m);
            }
            if cfg.system_site
                && let Some(base) = cfg.home.as_deref().and_then(Path::parent)
            {
                system(&mut dirs, base);
            }
        }
        None => {
            if src.var("PYTHONNOUSERSITE").is_none()
                && let (Some(home), Some(m)) = (src.var("HOME"), &minor)
            {
                dirs.push(Path::new(home).join(format!(".local/lib/python{m}/site-packages")));
            }
            system(&mut dirs, prefix);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| super::sources::place_id(d).is_some_and(|id| seen.insert(id)));
    dirs.into_iter()
        .map(|d| crate::fs::canonicalize(&d).unwrap_or(d))
        .collect()
}
