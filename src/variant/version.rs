//! The `major.minor` versions that variant names and systems carry.

use serde_with::{DeserializeFromStr, SerializeDisplay};
use std::fmt;
use std::str::FromStr;

/// A `major.minor` version, ordered numerically (`2.10 > 2.9`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, SerializeDisplay, DeserializeFromStr,
)]
pub struct Version {
    /// Major part.
    pub major: u64,
    /// Minor part.
    pub minor: u64,
}

/// How a fused digit string (`128` in `cu128`) splits into major and minor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Split {
    /// The first digit is the major (`torch210` → 2.10, `tvm-ffi01` → 0.1).
    OneDigitMajor,
    /// The last digit is the minor (`cu128` → 12.8, `xpu20252` → 2025.2).
    OneDigitMinor,
}

impl Version {
    /// A version from its parts.
    pub const fn new(major: u64, minor: u64) -> Self {
        Version { major, minor }
    }

    /// `major.minor` as the dotted names of kernels 0.19 write it (`12.8`,
    /// `2025.2`): one or more digits on each side of one dot.
    pub(crate) fn parse_dotted(text: &str) -> Option<Self> {
        let (major, minor) = text.split_once('.')?;
        let number = |p: &str| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        Some(Version {
            major: number(major)?,
            minor: number(minor)?,
        })
    }

    /// Split a fused digit string the way the hub's regular expressions do.
    pub(crate) fn parse_fused(digits: &str, split: Split) -> Option<Self> {
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let at = match split {
            Split::OneDigitMajor => 1,
            Split::OneDigitMinor => digits.len() - 1,
        };
        Some(Version {
            major: digits[..at].parse().ok()?,
            minor: digits[at..].parse().ok()?,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Parses `x.y`, also `x.y.z`, `x.y.z+local` or `x.y.devN`: like the hub, only
/// major and minor are kept.
impl FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a version of the form x.y");
        let mut parts = s.split(['.', '+']);
        let major = parts.next().ok_or_else(bad)?;
        let minor = parts.next().ok_or_else(bad)?;
        let number = |p: &str| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                Err(bad())
            } else {
                p.parse::<u64>().map_err(|_| bad())
            }
        };
        let minor_digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
        Ok(Version {
            major: number(major)?,
            minor: number(&minor_digits)?,
        })
    }
}
