//! The Python a variant's compiled parts are built for: `cpython-3.12-abi3`
//! in dotted names, implicitly `cpython-3.9-abi3` in legacy ones.

use super::version::Version;
use std::fmt;

/// The stable ABI a variant's extension modules use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Abi {
    /// `abi3`: the stable ABI of Pythons with a GIL.
    Abi3,
    /// `abi3t`: the stable ABI of free-threaded Pythons (PEP 803, 3.15 and
    /// later), which GIL-enabled Pythons of those versions load as well.
    Abi3t,
}

impl Abi {
    /// The spelling in variant names.
    pub fn as_str(self) -> &'static str {
        match self {
            Abi::Abi3 => "abi3",
            Abi::Abi3t => "abi3t",
        }
    }
}

/// The oldest Python `abi3t` exists for.
pub const ABI3T_MIN_PYTHON: Version = Version::new(3, 15);

/// The oldest Python and the ABI a variant's compiled parts need. Only
/// `abi3t` variants for Python 3.15 or later exist (the loader refuses to
/// parse an older one), so every value is one the loader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PythonTag {
    /// The oldest Python that loads it.
    pub min: Version,
    /// Its ABI.
    pub abi: Abi,
}

impl PythonTag {
    /// What every legacy name means: CPython 3.9 or later, `abi3`.
    pub const LEGACY: PythonTag = PythonTag {
        min: Version::new(3, 9),
        abi: Abi::Abi3,
    };

    /// Parse `["cpython", "3.12", "abi3"]`.
    pub(crate) fn parse(parts: &[&str]) -> Result<PythonTag, String> {
        let [marker, version, abi] = parts else {
            return Err(format!(
                "expected cpython-<version>-<abi> before <cpu>-<os>, found {:?}",
                parts.join("-")
            ));
        };
        if *marker != "cpython" {
            return Err(format!("expected \"cpython\", found {marker:?}"));
        }
        let min = Version::parse_dotted(version)
            .ok_or_else(|| format!("Python version {version:?} is not of the form X.Y"))?;
        let abi = match *abi {
            "abi3" => Abi::Abi3,
            "abi3t" => Abi::Abi3t,
            other => {
                return Err(format!(
                    "unknown Python ABI {other:?} (expected abi3 or abi3t)"
                ));
            }
        };
        if abi == Abi::Abi3t && min < ABI3T_MIN_PYTHON {
            return Err(format!(
                "abi3t needs Python {ABI3T_MIN_PYTHON} or later, not {min}"
            ));
        }
        Ok(PythonTag { min, abi })
    }
}

impl fmt::Display for PythonTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpython-{}-{}", self.min, self.abi.as_str())
    }
}
