//! The compute backend part of an arch variant name (`cu128`, `rocm64`, …).

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
                    versioned(d, Backend::Rocm)
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
