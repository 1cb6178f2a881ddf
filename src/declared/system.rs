//! The facts about a machine that name-level resolution needs, and the
//! `--system k=v,…` overrides that turn `resolve` into a what-if tool.

use super::rules::Rules;
use crate::fingerprint::{Fingerprint, FoundVia, PythonEnv, TorchBuild};
use crate::variant::{Backend, Cpu, OrOther, Os, Version};
use serde::Serialize;

/// What the hub's resolver looks at on a machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct System {
    /// The selected compute backend, with its version where it has one.
    pub backend: Backend,
    /// CPU architecture (`x86_64`, `aarch64`, or another no variant names).
    pub cpu: OrOther<Cpu>,
    /// Operating system as the variant names spell it (`linux`, `darwin`,
    /// `windows`, or another no variant names).
    pub os: OrOther<Os>,
    /// Installed torch major.minor, if any.
    pub torch: Option<Version>,
    /// Whether torch was built with the C++11 ABI (Linux only; `None` elsewhere).
    pub cxx11_abi: Option<bool>,
    /// Installed tvm-ffi major.minor, if any.
    pub tvm_ffi: Option<Version>,
    /// macOS version, on macOS.
    pub macos: Option<Version>,
    /// The Python major.minor kernels load into; `None`: unknown (no
    /// variant is refused for its Python then).
    pub python: Option<Version>,
    /// Whether that Python is a free-threaded build (`python3.13t`), which
    /// loads `abi3t` extensions only.
    pub free_threaded: bool,
    /// Whether MLX is installed there (`mlx-<backend>` variants need it).
    pub mlx: bool,
    /// The `kernels` version installed there, if any: it picks the rules
    /// ([`System::rules`]).
    pub kernels: Option<String>,
}

/// A `--system` override that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystemError {
    /// A key that is not one of [`SYSTEM_KEYS`].
    #[error("unknown --system key {key:?}; known keys: {}", SYSTEM_KEYS.join(", "))]
    UnknownKey {
        /// The key as given.
        key: String,
    },
    /// A value that does not fit its key.
    #[error("invalid --system value {key}={value:?}: {why}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// An item without `=`.
    #[error("invalid --system item {item:?}: expected key=value")]
    NotKeyValue {
        /// The item as given.
        item: String,
    },
    /// A versioned backend whose version is known from nowhere.
    #[error("backend {backend} needs a version: add --system {backend}=X.Y")]
    MissingVersion {
        /// The backend's name.
        backend: &'static str,
    },
}

/// Keys that `--system` accepts.
pub const SYSTEM_KEYS: [&str; 15] = [
    "backend",
    "cuda",
    "rocm",
    "xpu",
    "cann",
    "cpu",
    "os",
    "torch",
    "cxx11",
    "tvm-ffi",
    "macos",
    "python",
    "free-threaded",
    "mlx",
    "kernels",
];

/// The keys whose facts come from the probed environment: a spec that
/// names them all needs no detection.
const DETECTED_KEYS: [&str; 8] = [
    "backend",
    "torch",
    "cxx11",
    "tvm-ffi",
    "python",
    "free-threaded",
    "mlx",
    "kernels",
];

/// The backends `--system backend=…` accepts.
const BACKENDS: &str = "cuda, rocm, xpu, metal, cpu, cann, neuron, tpu";

impl System {
    /// The host's CPU and OS with nothing installed: backend `cpu`, no torch.
    pub fn bare_host() -> System {
        // Rust's arch names for these hosts are the hub's spellings already.
        let cpu = std::env::consts::ARCH;
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            other => other,
        };
        System {
            backend: Backend::Cpu,
            cpu: OrOther::from_name(cpu),
            os: OrOther::from_name(os),
            torch: None,
            cxx11_abi: None,
            tvm_ffi: None,
            macos: None,
            python: None,
            free_threaded: false,
            mlx: false,
            kernels: None,
        }
    }

    /// The loader release whose rules judge this system: the installed
    /// one, else the newest supported.
    pub fn rules(&self) -> Rules {
        Rules::for_installed(self.kernels.as_deref())
    }

    /// The system's backend as a noarch variant names it (`cann` is `npu`).
    pub fn noarch_backend(&self) -> &'static str {
        match self.backend {
            Backend::Cann(_) => "npu",
            other => other.kind(),
        }
    }

    /// Whether the overrides `spec` (`k=v,…`) pin every fact a machine's
    /// environment could tell (backend, torch, cxx11, tvm-ffi, python,
    /// free-threaded, mlx, kernels), so that detecting them would be wasted
    /// time.
    pub fn covers_detected(spec: &str) -> bool {
        let keys: Vec<&str> = spec
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim()))
            .collect();
        DETECTED_KEYS.iter().all(|k| keys.contains(k))
    }

    /// Apply `k=v,…` overrides on top of detected facts.
    ///
    /// A version key (`cuda=12.8`) sets that backend's version, and selects
    /// the backend too unless `backend=` says otherwise; `backend=cuda` keeps
    /// the detected CUDA version, or needs `cuda=X.Y`.
    pub fn with_overrides(mut self, spec: &str) -> Result<System, SystemError> {
        let mut backend_kind: Option<String> = None;
        let mut versions: Vec<(&'static str, Version)> = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| SystemError::NotKeyValue {
                    item: item.to_string(),
                })?;
            let (key, value) = (key.trim(), value.trim());
            let bad = |why: &str| SystemError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
                why: why.to_string(),
            };
            let version = || value.parse::<Version>().map_err(|e| bad(&e));
            let flag = || match value {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("expected true or false")),
            };
            let optional_version = || {
                if value == "none" {
                    Ok(None)
                } else {
                    version().map(Some)
                }
            };
            match key {
                "backend" => {
                    if !BACKENDS.split(", ").any(|b| b == value) {
                        return Err(bad(&format!("expected one of {BACKENDS}")));
                    }
                    backend_kind = Some(value.to_string());
                }
                "cuda" => versions.push(("cuda", version()?)),
                "rocm" => versions.push(("rocm", version()?)),
                "xpu" => versions.push(("xpu", version()?)),
                "cann" => versions.push(("cann", version()?)),
                "cpu" => self.cpu = OrOther::Known(value.parse().map_err(|e: String| bad(&e))?),
                "os" => self.os = OrOther::Known(value.parse().map_err(|e: String| bad(&e))?),
                "torch" => self.torch = optional_version()?,
                "tvm-ffi" => self.tvm_ffi = optional_version()?,
                "macos" => self.macos = optional_version()?,
                "python" => self.python = optional_version()?,
                "free-threaded" => self.free_threaded = flag()?,
                "mlx" => self.mlx = flag()?,
                "kernels" => {
                    self.kernels = match value {
                        "none" => None,
                        v if v.parse::<Version>().is_ok() => Some(v.to_string()),
                        _ => return Err(bad("expected a version such as 0.19.1, or none")),
                    }
                }
                "cxx11" => {
                    self.cxx11_abi = match value {
                        "true" => Some(true),
                        "false" => Some(false),
                        "none" => None,
                        _ => return Err(bad("expected true, false or none")),
                    }
                }
                _ => {
                    return Err(SystemError::UnknownKey {
                        key: key.to_string(),
                    });
                }
            }
        }
        let kind = match backend_kind {
            Some(kind) => kind,
            None => match versions.last() {
                Some((kind, _)) => kind.to_string(),
                None => return Ok(self),
            },
        };
        let version_of = |kind: &'static str| {
            versions
                .iter()
                .rev()
                .find(|(k, _)| *k == kind)
                .map(|(_, v)| *v)
                .or_else(|| {
                    (self.backend.kind() == kind)
                        .then(|| self.backend.version())
                        .flatten()
                })
                .ok_or(SystemError::MissingVersion { backend: kind })
        };
        self.backend = match kind.as_str() {
            "cuda" => Backend::Cuda(version_of("cuda")?),
            "rocm" => Backend::Rocm(version_of("rocm")?),
            "xpu" => Backend::Xpu(version_of("xpu")?),
            "cann" => Backend::Cann(version_of("cann")?),
            "metal" => Backend::Metal,
            "neuron" => Backend::Neuron,
            "tpu" => Backend::Tpu,
            _ => Backend::Cpu,
        };
        Ok(self)
    }
}

impl System {
    /// The system as the hub loader would see it on the machine a fingerprint
    /// describes: the backend torch was built for (CUDA, ROCm, XPU; Metal for
    /// torch on macOS; else CPU), or without torch the CUDA runtime of the
    /// active toolkit, as the hub's `cudart` fallback finds it.
    pub fn from_fingerprint(fp: &Fingerprint) -> System {
        let os = OrOther::from_name(match fp.host.os.as_str() {
            "macos" => "darwin",
            other => other,
        });
        let darwin = os == OrOther::Known(Os::Darwin);
        let python = fp.python.as_ref();
        let package = |name: &str| {
            python
                .and_then(|p| p.packages.get(name).cloned().flatten())
                .and_then(|v| v.parse::<Version>().ok())
        };
        let torch = package("torch");
        let build = python.and_then(|p| p.torch.as_ref());
        let backend = match (torch, build) {
            (Some(_), Some(b)) => torch_backend(b, darwin),
            (Some(_), None) if darwin => Backend::Metal,
            (Some(_), None) => Backend::Cpu,
            (None, _) => active_cudart(fp).map_or(Backend::Cpu, Backend::Cuda),
        };
        System {
            backend,
            cpu: OrOther::from_name(&fp.host.arch),
            cxx11_abi: if os == OrOther::Known(Os::Linux) && torch.is_some() {
                build.and_then(|b| b.cxx11_abi)
            } else {
                None
            },
            os,
            torch,
            tvm_ffi: package("apache-tvm-ffi"),
            macos: None,
            python: python.and_then(|p| p.version.as_deref()?.parse().ok()),
            free_threaded: python.is_some_and(free_threaded),
            mlx: python.is_some_and(|p| p.packages.get("mlx").is_some_and(Option::is_some)),
            kernels: python.and_then(|p| p.packages.get("kernels").cloned().flatten()),
        }
    }
}

/// Whether the environment's Python is a free-threaded build: its
/// site-packages lie in `lib/python3.13t/` (the `t` ABI flag CPython puts
/// in the folder's name).
fn free_threaded(python: &PythonEnv) -> bool {
    python.site_packages.iter().any(|dir| {
        dir.components().any(|c| {
            c.as_os_str().to_str().is_some_and(|name| {
                name.strip_prefix("python")
                    .and_then(|v| v.strip_suffix('t'))
                    .is_some_and(|v| v.parse::<Version>().is_ok())
            })
        })
    })
}

/// The backend torch was built for, checked in the hub's order.
fn torch_backend(build: &TorchBuild, darwin: bool) -> Backend {
    let version = |v: &Option<String>| v.as_deref().and_then(|v| v.split('-').next()?.parse().ok());
    if let Some(v) = version(&build.cuda) {
        Backend::Cuda(v)
    } else if let Some(v) = version(&build.hip) {
        Backend::Rocm(v)
    } else if darwin {
        Backend::Metal
    } else if let Some(v) = build.xpu.as_deref().and_then(xpu_version) {
        Backend::Xpu(v)
    } else {
        Backend::Cpu
    }
}

/// `torch.version.xpu` is `YYYYMMDD…`; the hub reads `YYYY.M` from it
/// (characters 0–3 and 5).
fn xpu_version(s: &str) -> Option<Version> {
    Some(Version::new(
        s.get(0..4)?.parse().ok()?,
        s.get(5..6)?.parse().ok()?,
    ))
}

/// The CUDA runtime of the active system toolkit, if it has one. A pip
/// wheel's runtime is not on the library path, so the hub does not see it.
fn active_cudart(fp: &Fingerprint) -> Option<Version> {
    let active = fp.toolkits.active.as_ref()?;
    let system_toolkit = fp
        .toolkits
        .found
        .iter()
        .any(|t| &t.root == active && t.found_via != FoundVia::PipWheel);
    if !system_toolkit {
        return None;
    }
    fp.toolkits
        .cudart
        .iter()
        .find(|lib| lib.path.starts_with(active))
        .and_then(|lib| lib.version.parse().ok())
}
