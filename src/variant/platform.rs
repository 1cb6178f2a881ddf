//! The CPU and OS parts of variant names, and of the machines they are
//! judged for.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

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
