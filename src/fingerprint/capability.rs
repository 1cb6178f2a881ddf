//! A GPU's compute capability as a type: the fingerprint measures it, the
//! declared checks judge embedded images against it, the cuda executor
//! reports it. It lives here, in the lowest layer that needs it.

use serde_with::{DeserializeFromStr, SerializeDisplay};
use std::fmt;
use std::str::FromStr;

/// A GPU's compute capability, `major.minor` (`9.0`, `10.3`, `12.1`); JSON
/// spells it as the string `"9.0"`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, SerializeDisplay, DeserializeFromStr,
)]
pub struct ComputeCapability {
    /// Major version: the architecture generation.
    pub major: u32,
    /// Minor version within the generation.
    pub minor: u32,
}

impl ComputeCapability {
    /// The capability `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        ComputeCapability { major, minor }
    }

    /// The capability an SM number names (`90` → 9.0, `121` → 12.1).
    pub const fn from_sm(sm: u32) -> Self {
        ComputeCapability::new(sm / 10, sm % 10)
    }

    /// The SM number of this capability (9.0 → 90).
    pub const fn sm(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// Tegra (Jetson / DRIVE) parts, whose SASS is not interchangeable with
    /// desktop and data-center parts of the same major version.
    pub fn is_tegra(self) -> bool {
        matches!(
            (self.major, self.minor),
            (5, 3) | (6, 2) | (7, 2) | (8, 7) | (10, 1) | (11, _)
        )
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A `major.minor` string that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {given:?}: expected {expected}")]
pub struct ParseArchError {
    pub(crate) what: &'static str,
    pub(crate) given: String,
    pub(crate) expected: &'static str,
}

/// `9.0` → (9, 0); a major of 1–99 and a single-digit minor, as every
/// compute capability and PTX ISA version is written.
pub(crate) fn parse_major_minor(s: &str, what: &'static str) -> Result<(u32, u32), ParseArchError> {
    let err = || ParseArchError {
        what,
        given: s.to_string(),
        expected: "MAJOR.MINOR such as 9.0",
    };
    let (major, minor) = s.trim().split_once('.').ok_or_else(err)?;
    let major: u32 = major.parse().map_err(|_| err())?;
    let minor: u32 = minor.parse().map_err(|_| err())?;
    if major == 0 || major > 99 || minor > 9 {
        return Err(err());
    }
    Ok((major, minor))
}

impl FromStr for ComputeCapability {
    type Err = ParseArchError;

    /// Parse `9.0`, `10.3`; `sm_90` and `90` are accepted too.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.strip_prefix("sm_").unwrap_or(t);
        if !digits.contains('.')
            && let Ok(sm) = digits.parse::<u32>()
            && (10..1000).contains(&sm)
        {
            return Ok(ComputeCapability::from_sm(sm));
        }
        let (major, minor) = parse_major_minor(t, "compute capability")?;
        Ok(ComputeCapability::new(major, minor))
    }
}
