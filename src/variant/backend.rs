//! The compute backend part of an arch variant name (`cu128`, `rocm64`, …;
//! `cuda-12.8`, `rocm-6.4` in dotted names).

use super::version::{Split, Version};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A compute backend as written in an arch variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", content = "version", rename_all = "lowercase")]
pub enum Backend {
    /// `cpu`
    Cpu,
    /// `cuXY`: CUDA X.Y (`cu128` → 12.8).
    Cuda(Version),
    /// `rocmXY`: ROCm X.Y.
    Rocm(Version),
    /// `xpuYYYYN`: Intel oneAPI YYYY.N.
    Xpu(Version),
    /// `cannXY`: Ascend CANN X.Y.
    Cann(Version),
    /// `metal`
    Metal,
    /// `neuron`
    Neuron,
    /// `tpu`
    Tpu,
}

impl Backend {
    /// The backend's short name (`cuda`, `rocm`, …), as the hub's `Backend.name`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda(_) => "cuda",
            Backend::Rocm(_) => "rocm",
            Backend::Xpu(_) => "xpu",
            Backend::Cann(_) => "cann",
            Backend::Metal => "metal",
            Backend::Neuron => "neuron",
            Backend::Tpu => "tpu",
        }
    }

    /// The backend's version, for versioned backends.
    pub fn version(&self) -> Option<Version> {
        match self {
            Backend::Cuda(v) | Backend::Rocm(v) | Backend::Xpu(v) | Backend::Cann(v) => Some(*v),
            _ => None,
        }
    }

    /// A legacy name's backend as kernels 0.17 and 0.18 read it: their
    /// `rocm(\d+)(\d+)` takes only the last digit as the minor, so that
    /// `rocm714` (ROCm 7.14 to kernels 0.19) is 71.4.
    pub fn read_before_0_19(self) -> Backend {
        match self {
            Backend::Rocm(v) if v.minor >= 10 => {
                let digits = format!("{}{}", v.major, v.minor);
                Version::parse_fused(&digits, Split::OneDigitMinor).map_or(self, Backend::Rocm)
            }
            other => other,
        }
    }

    /// The backend as dotted names write it: `cuda-12.8`, `rocm-6.4`, `cpu`.
    pub fn dotted(&self) -> String {
        match self.version() {
            Some(v) => format!("{}-{v}", self.kind()),
            None => self.kind().to_string(),
        }
    }

    /// Parse the backend parts of a dotted name: `["cuda", "12.8"]`, `["cpu"]`.
    pub(crate) fn parse_dotted(parts: &[&str]) -> Result<Backend, String> {
        let unknown = || format!("unknown backend {:?}", parts.join("-"));
        let make: fn(Version) -> Backend = match parts.first().copied() {
            Some("cuda") => Backend::Cuda,
            Some("rocm") => Backend::Rocm,
            Some("xpu") => Backend::Xpu,
            Some("cann") => Backend::Cann,
            Some(name @ ("cpu" | "metal" | "neuron" | "tpu")) if parts.len() == 1 => {
                return name.parse();
            }
            _ => return Err(unknown()),
        };
        match parts {
            [name, version] => Version::parse_dotted(version).map(make).ok_or_else(|| {
                format!("backend {name} needs a version of the form X.Y, found {version:?}")
            }),
            _ => Err(unknown()),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = match self {
            Backend::Cuda(_) => "cu",
            Backend::Rocm(_) => "rocm",
            Backend::Xpu(_) => "xpu",
            Backend::Cann(_) => "cann",
            other => return f.write_str(other.kind()),
        };
        let v = self.version().expect("versioned backend");
        write!(f, "{prefix}{}{}", v.major, v.minor)
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let versioned = |digits: &str, make: fn(Version) -> Backend| {
            Version::parse_fused(digits, Split::OneDigitMinor)
                .map(make)
                .ok_or_else(|| format!("backend {s:?} needs a version of two or more digits"))
        };
        match s {
            "cpu" => Ok(Backend::Cpu),
            "metal" => Ok(Backend::Metal),
            "neuron" => Ok(Backend::Neuron),
            "tpu" => Ok(Backend::Tpu),
            _ => {
                if let Some(d) = s.strip_prefix("cu") {
                    versioned(d, Backend::Cuda)
                } else if let Some(d) = s.strip_prefix("rocm") {
                    // kernels 0.19 reads `rocm714` as ROCm 7.14, the one
                    // two-digit minor; older releases read 71.4
                    // (`Rules::legacy_rocm`).
                    if d == "714" {
                        Ok(Backend::Rocm(Version::new(7, 14)))
                    } else {
                        versioned(d, Backend::Rocm)
                    }
                } else if let Some(d) = s.strip_prefix("xpu") {
                    versioned(d, Backend::Xpu)
                } else if let Some(d) = s.strip_prefix("cann") {
                    versioned(d, Backend::Cann)
                } else {
                    Err(format!("unknown backend {s:?}"))
                }
            }
        }
    }
}
