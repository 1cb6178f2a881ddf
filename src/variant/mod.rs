//! Build variant names exactly as the kernel hub writes them.
//!
//! Forms (the hub's `kernels/src/kernels/variants.py`):
//! - `torchXY[-cxx11|-cxx98]-<backend>-<cpu>-<os>`
//! - `torch-stable-abiXY-<backend>-<cpu>-<os>`
//! - `tvm-ffiXY-<backend>-<cpu>-<os>`
//! - noarch `torch-<name>` (`cpu`, `cuda`, `metal`, `neuron`, `rocm`, `tpu`,
//!   `xpu`, `npu`, `universal`)
//!
//! A [`VariantName`] that exists is valid; its `Display` is the canonical name,
//! and parsing a canonical name gives back the same value.

mod backend;
mod version;

pub use backend::Backend;
pub use version::Version;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The forms a variant name can take, for error messages.
pub const NAME_FORMS: &str = "torchXY[-cxx11|-cxx98]-<backend>-<cpu>-<os>, \
torch-stable-abiXY-<backend>-<cpu>-<os>, tvm-ffiXY-<backend>-<cpu>-<os>, or noarch \
torch-<cpu|cuda|metal|neuron|rocm|tpu|xpu|npu|universal>; backends: cpu, cuXY, rocmXY, \
xpuYYYYN, cannXY, metal, neuron, tpu; cpu: x86_64, aarch64; os: linux, darwin, windows";

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
    /// `torchXY`, optionally tagged with the C++ ABI (`-cxx11` true, `-cxx98` false).
    Torch {
        /// Torch major.minor.
        version: Version,
        /// `Some(true)` for `-cxx11`, `Some(false)` for `-cxx98`, `None` untagged.
        cxx11_abi: Option<bool>,
    },
    /// `torch-stable-abiXY`: runs on any torch at least this new.
    TorchStableAbi {
        /// Stable ABI major.minor.
        version: Version,
    },
    /// `tvm-ffiXY`: needs exactly this tvm-ffi major.minor.
    TvmFfi {
        /// tvm-ffi major.minor.
        version: Version,
    },
}

impl fmt::Display for Framework {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Framework::Torch { version, cxx11_abi } => {
                write!(f, "torch{}{}", version.major, version.minor)?;
                match cxx11_abi {
                    Some(true) => f.write_str("-cxx11"),
                    Some(false) => f.write_str("-cxx98"),
                    None => Ok(()),
                }
            }
            Framework::TorchStableAbi { version } => {
                write!(f, "torch-stable-abi{}{}", version.major, version.minor)
            }
            Framework::TvmFfi { version } => write!(f, "tvm-ffi{}{}", version.major, version.minor),
        }
    }
}

/// CPU architecture in a variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cpu {
    /// `x86_64`
    X86_64,
    /// `aarch64`
    Aarch64,
}

impl Cpu {
    /// The spelling used in variant names.
    pub fn as_str(self) -> &'static str {
        match self {
            Cpu::X86_64 => "x86_64",
            Cpu::Aarch64 => "aarch64",
        }
    }
}

impl FromStr for Cpu {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "x86_64" => Ok(Cpu::X86_64),
            "aarch64" => Ok(Cpu::Aarch64),
            _ => Err(format!("unknown CPU {s:?} (expected x86_64 or aarch64)")),
        }
    }
}

impl fmt::Display for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Operating system in a variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// `linux`
    Linux,
    /// `darwin`
    Darwin,
    /// `windows`
    Windows,
}

impl Os {
    /// The spelling used in variant names.
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Darwin => "darwin",
            Os::Windows => "windows",
        }
    }
}

impl FromStr for Os {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "linux" => Ok(Os::Linux),
            "darwin" => Ok(Os::Darwin),
            "windows" => Ok(Os::Windows),
            _ => Err(format!(
                "unknown OS {s:?} (expected linux, darwin or windows)"
            )),
        }
    }
}

impl fmt::Display for Os {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A machine's CPU or OS in the words of variant names: one of them, or
/// another (`riscv64`, `freebsd`) kept by its own name, so that a rejection
/// can say it; no arch variant names an `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde_with::SerializeDisplay)]
pub enum OrOther<T> {
    /// A value variant names spell.
    Known(T),
    /// Any other, as the machine names it.
    Other(String),
}

impl<T: FromStr> OrOther<T> {
    /// `name` as a known value if it is one, else kept as it is.
    pub fn from_name(name: &str) -> OrOther<T> {
        name.parse()
            .map_or_else(|_| OrOther::Other(name.to_string()), OrOther::Known)
    }
}

impl<T: fmt::Display> fmt::Display for OrOther<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrOther::Known(v) => v.fmt(f),
            OrOther::Other(name) => f.write_str(name),
        }
    }
}

/// Backend of a noarch (`torch-<name>`) variant.
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

/// A parsed build variant name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "kebab-case")]
pub enum VariantName {
    /// A compiled variant for one framework, backend, CPU and OS.
    Arch {
        /// Framework and its version.
        framework: Framework,
        /// Compute backend and its version.
        backend: Backend,
        /// CPU architecture.
        cpu: Cpu,
        /// Operating system.
        os: Os,
    },
    /// A pure-Python `torch-<name>` variant.
    Noarch {
        /// The backend it is meant for.
        backend: NoarchBackend,
    },
}

impl VariantName {
    /// Parse a variant name, following the hub's own split rules.
    pub fn parse(name: &str) -> Result<Self, InvalidVariantName> {
        parse_name(name).map_err(|why| InvalidVariantName {
            name: name.to_string(),
            why,
        })
    }

    /// The backend, for arch variants.
    pub fn backend(&self) -> Option<&Backend> {
        match self {
            VariantName::Arch { backend, .. } => Some(backend),
            VariantName::Noarch { .. } => None,
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
                cpu,
                os,
            } => write!(f, "{framework}-{backend}-{cpu}-{os}"),
            VariantName::Noarch { backend } => write!(f, "torch-{}", backend.as_str()),
        }
    }
}

fn parse_name(name: &str) -> Result<VariantName, String> {
    let parts: Vec<&str> = name.split('-').collect();
    let (framework, arch) = if let Some(rest) = name.strip_prefix("torch-stable-abi") {
        let digits = rest.split('-').next().unwrap_or_default();
        let version = Version::parse_fused(digits, version::Split::OneDigitMajor)
            .ok_or_else(|| format!("stable ABI version {digits:?} is not two or more digits"))?;
        (
            Framework::TorchStableAbi { version },
            &parts[3.min(parts.len())..],
        )
    } else if parts[0] == "torch" {
        let rest = &name["torch-".len().min(name.len())..];
        let backend = rest.parse::<NoarchBackend>()?;
        return Ok(VariantName::Noarch { backend });
    } else if let Some(digits) = parts[0].strip_prefix("torch") {
        let version = Version::parse_fused(digits, version::Split::OneDigitMajor)
            .ok_or_else(|| format!("torch version {digits:?} is not two or more digits"))?;
        match parts.get(1) {
            Some(&"cxx11") | Some(&"cxx98") => (
                Framework::Torch {
                    version,
                    cxx11_abi: Some(parts[1] == "cxx11"),
                },
                &parts[2..],
            ),
            _ => (
                Framework::Torch {
                    version,
                    cxx11_abi: None,
                },
                &parts[1..],
            ),
        }
    } else if parts[0] == "tvm" && parts.get(1).is_some_and(|p| p.starts_with("ffi")) {
        let digits = &parts[1]["ffi".len()..];
        let version = Version::parse_fused(digits, version::Split::OneDigitMajor)
            .ok_or_else(|| format!("tvm-ffi version {digits:?} is not two or more digits"))?;
        (Framework::TvmFfi { version }, &parts[2..])
    } else {
        return Err("unknown framework (expected torch, torch-stable-abi or tvm-ffi)".into());
    };
    let [backend, cpu, os] = arch else {
        return Err(format!(
            "expected <backend>-<cpu>-<os> after the framework, found {:?}",
            arch.join("-")
        ));
    };
    Ok(VariantName::Arch {
        framework,
        backend: backend.parse()?,
        cpu: cpu.parse()?,
        os: os.parse()?,
    })
}

#[cfg(test)]
mod tests;
