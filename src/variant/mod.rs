//! Build variant names exactly as the kernel hub writes them.
//!
//! Forms (the hub's `kernels` loader, `variants.py`):
//! - legacy arch: `torchXY[-cxx11|-cxx98]-<backend>-<cpu>-<os>`,
//!   `torch-stable-abiXY-…`, `tvm-ffiXY-…` (`cu128`, `rocm64`, `xpu20252`);
//!   the compiled parts are for CPython 3.9 or later, `abi3`.
//! - dotted arch (kernels 0.19): `torch-X.Y[-cxx11|-cxx98]-<backend>-cpython-<X.Y>-<abi3|abi3t>-<cpu>-<os>`,
//!   `torch-stable-abi-X.Y-…`, `tvm-ffi-X.Y-…` (`cuda-12.8`, `rocm-6.4`, `cpu`).
//! - noarch: `torch-<backend>` (`cuda`, `universal`, …), `mlx-<backend>`
//!   (kernels 0.19).
//! - SDK (kernels 0.19): `sdk`, `sdk-<backend>`,
//!   `sdk[-<backend>]-cpython-<X.Y>-<abi>-<cpu>-<os>`.
//!
//! Which release parses which form, and what it decides, is
//! `declared::rules`. A [`VariantName`] that exists is valid; its `Display`
//! is the canonical name, and parsing a canonical name gives back the same
//! value.

mod backend;
mod parse;
mod platform;
mod python;
mod version;

pub use backend::Backend;
pub use platform::{Cpu, OrOther, Os};
pub use python::{ABI3T_MIN_PYTHON, Abi, PythonTag};
pub use version::Version;

use serde::{Deserialize, Serialize};
use serde_with::{DeserializeFromStr, SerializeDisplay};
use std::fmt;
use std::str::FromStr;

/// The forms a variant name can take, for error messages.
pub const NAME_FORMS: &str = "torchXY[-cxx11|-cxx98]-<backend>-<cpu>-<os>, \
torch-stable-abiXY-…, tvm-ffiXY-… (backends cu128, rocm64, xpu20252, cann81, cpu, metal, \
neuron, tpu); torch-X.Y[-cxx11|-cxx98]-<backend>-cpython-<X.Y>-<abi3|abi3t>-<cpu>-<os>, \
torch-stable-abi-X.Y-…, tvm-ffi-X.Y-… (backends cuda-12.8, rocm-6.4, xpu-2025.2, cann-8.1, cpu, \
metal, neuron, tpu); noarch torch-<backend> or mlx-<backend>; sdk, sdk-<backend>, \
sdk[-<backend>]-cpython-<X.Y>-<abi>-<cpu>-<os>";

/// A variant name that does not fit any form the hub uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid variant name {name:?}: {why}; expected one of: {NAME_FORMS}")]
pub struct InvalidVariantName {
    /// The name as given.
    pub name: String,
    /// What part of it did not fit.
    pub why: String,
}

/// The framework an arch variant was built against.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Framework {
    /// `torchXY` / `torch-X.Y`, optionally tagged with the C++ ABI (`-cxx11`
    /// true, `-cxx98` false).
    Torch {
        /// Torch major.minor.
        version: Version,
        /// `Some(true)` for `-cxx11`, `Some(false)` for `-cxx98`, `None` untagged.
        cxx11_abi: Option<bool>,
    },
    /// `torch-stable-abiXY` / `torch-stable-abi-X.Y`: runs on any torch at
    /// least this new.
    TorchStableAbi {
        /// Stable ABI major.minor.
        version: Version,
    },
    /// `tvm-ffiXY` / `tvm-ffi-X.Y`: needs exactly this tvm-ffi major.minor.
    TvmFfi {
        /// tvm-ffi major.minor.
        version: Version,
    },
}

impl Framework {
    /// The framework part of a name: legacy (`torch29-cxx11`) or dotted
    /// (`torch-2.9-cxx11`).
    fn write(&self, f: &mut fmt::Formatter<'_>, dotted: bool) -> fmt::Result {
        let (prefix, version) = match self {
            Framework::Torch { version, .. } => ("torch", version),
            Framework::TorchStableAbi { version } => ("torch-stable-abi", version),
            Framework::TvmFfi { version } => ("tvm-ffi", version),
        };
        if dotted {
            write!(f, "{prefix}-{version}")?;
        } else {
            write!(f, "{prefix}{}{}", version.major, version.minor)?;
        }
        match self {
            Framework::Torch {
                cxx11_abi: Some(true),
                ..
            } => f.write_str("-cxx11"),
            Framework::Torch {
                cxx11_abi: Some(false),
                ..
            } => f.write_str("-cxx98"),
            _ => Ok(()),
        }
    }
}

/// A backend as noarch and SDK names spell it (`torch-cuda`, `sdk-rocm`); a
/// name the loader parses but no backend uses is an `OrOther::Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoarchBackend {
    /// `torch-cpu`
    Cpu,
    /// `torch-cuda`
    Cuda,
    /// `torch-metal`
    Metal,
    /// `torch-neuron`
    Neuron,
    /// `torch-rocm`
    Rocm,
    /// `torch-tpu`
    Tpu,
    /// `torch-xpu`
    Xpu,
    /// `torch-npu` (Ascend, the `cann` backend)
    Npu,
    /// `torch-universal`: pure Python, runs anywhere (older kernels).
    Universal,
}

impl NoarchBackend {
    /// Every noarch backend, in the order the docs list them.
    pub const ALL: [NoarchBackend; 9] = [
        NoarchBackend::Cpu,
        NoarchBackend::Cuda,
        NoarchBackend::Metal,
        NoarchBackend::Neuron,
        NoarchBackend::Rocm,
        NoarchBackend::Tpu,
        NoarchBackend::Xpu,
        NoarchBackend::Npu,
        NoarchBackend::Universal,
    ];

    /// The spelling used in variant names.
    pub fn as_str(self) -> &'static str {
        match self {
            NoarchBackend::Cpu => "cpu",
            NoarchBackend::Cuda => "cuda",
            NoarchBackend::Metal => "metal",
            NoarchBackend::Neuron => "neuron",
            NoarchBackend::Rocm => "rocm",
            NoarchBackend::Tpu => "tpu",
            NoarchBackend::Xpu => "xpu",
            NoarchBackend::Npu => "npu",
            NoarchBackend::Universal => "universal",
        }
    }
}

impl FromStr for NoarchBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| format!("unknown noarch backend {s:?}"))
    }
}

impl fmt::Display for NoarchBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The framework of a noarch variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoarchFramework {
    /// `torch-<backend>`
    Torch,
    /// `mlx-<backend>` (kernels 0.19): needs MLX installed.
    Mlx,
}

impl NoarchFramework {
    /// The spelling in variant names.
    pub fn as_str(self) -> &'static str {
        match self {
            NoarchFramework::Torch => "torch",
            NoarchFramework::Mlx => "mlx",
        }
    }
}

/// An SDK variant (kernels 0.19): a library kernels depend on, for no
/// framework.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Sdk {
    /// `sdk`: for any backend, nothing compiled.
    Any,
    /// `sdk-<backend>`: for one backend, nothing compiled.
    For(OrOther<NoarchBackend>),
    /// `sdk[-<backend>]-cpython-<X.Y>-<abi>-<cpu>-<os>`: compiled parts, for
    /// one backend (version included) or, without one, for any.
    Compiled {
        /// The backend, if it is for one.
        backend: Option<Backend>,
        /// The Python its compiled parts need.
        python: PythonTag,
        /// CPU architecture.
        cpu: OrOther<Cpu>,
        /// Operating system.
        os: OrOther<Os>,
    },
}

/// A parsed build variant name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, SerializeDisplay, DeserializeFromStr)]
pub enum VariantName {
    /// A compiled variant for one framework, backend, Python, CPU and OS.
    Arch {
        /// Framework and its version.
        framework: Framework,
        /// Compute backend and its version.
        backend: Backend,
        /// `None` in a legacy name (whose compiled parts are
        /// [`PythonTag::LEGACY`]); `Some` in a dotted one.
        python: Option<PythonTag>,
        /// CPU architecture.
        cpu: OrOther<Cpu>,
        /// Operating system.
        os: OrOther<Os>,
    },
    /// A pure-Python `torch-<name>` or `mlx-<name>` variant.
    Noarch {
        /// `torch` or `mlx`.
        framework: NoarchFramework,
        /// The backend it is meant for.
        backend: OrOther<NoarchBackend>,
    },
    /// An SDK variant.
    Sdk(Sdk),
}

impl VariantName {
    /// Parse a variant name, following the hub's own split rules.
    pub fn parse(name: &str) -> Result<Self, InvalidVariantName> {
        parse::name(name).map_err(|why| InvalidVariantName {
            name: name.to_string(),
            why,
        })
    }

    /// A noarch `torch-<backend>` name.
    pub fn torch_noarch(backend: NoarchBackend) -> VariantName {
        VariantName::Noarch {
            framework: NoarchFramework::Torch,
            backend: OrOther::Known(backend),
        }
    }

    /// The backend, for compiled variants that name one.
    pub fn backend(&self) -> Option<&Backend> {
        match self {
            VariantName::Arch { backend, .. } => Some(backend),
            VariantName::Sdk(Sdk::Compiled { backend, .. }) => backend.as_ref(),
            _ => None,
        }
    }

    /// The kind of backend the variant is for (`cuda`, `rocm`, `cann`,
    /// `npu`, `universal`, …), whatever the form; `None` for an SDK for any.
    pub fn backend_kind(&self) -> Option<String> {
        match self {
            VariantName::Noarch { backend, .. } | VariantName::Sdk(Sdk::For(backend)) => {
                Some(backend.to_string())
            }
            _ => self.backend().map(|b| b.kind().to_string()),
        }
    }

    /// Whether the variant is for CUDA, by its name.
    pub fn is_cuda(&self) -> bool {
        self.backend_kind().as_deref() == Some("cuda")
    }

    /// The Python a compiled variant's parts need (implicit in legacy names).
    pub fn python(&self) -> Option<PythonTag> {
        match self {
            VariantName::Arch { python, .. } => Some(python.unwrap_or(PythonTag::LEGACY)),
            VariantName::Sdk(Sdk::Compiled { python, .. }) => Some(*python),
            _ => None,
        }
    }
}

impl FromStr for VariantName {
    type Err = InvalidVariantName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for VariantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VariantName::Arch {
                framework,
                backend,
                python,
                cpu,
                os,
            } => {
                framework.write(f, python.is_some())?;
                match python {
                    Some(python) => write!(f, "-{}-{python}", backend.dotted())?,
                    None => write!(f, "-{backend}")?,
                }
                write!(f, "-{cpu}-{os}")
            }
            VariantName::Noarch { framework, backend } => {
                write!(f, "{}-{backend}", framework.as_str())
            }
            VariantName::Sdk(Sdk::Any) => f.write_str("sdk"),
            VariantName::Sdk(Sdk::For(backend)) => write!(f, "sdk-{backend}"),
            VariantName::Sdk(Sdk::Compiled {
                backend,
                python,
                cpu,
                os,
            }) => {
                f.write_str("sdk")?;
                if let Some(backend) = backend {
                    write!(f, "-{}", backend.dotted())?;
                }
                write!(f, "-{python}-{cpu}-{os}")
            }
        }
    }
}

#[cfg(test)]
mod tests;
