//! Which release of the hub loader's rules a resolution follows.
//!
//! The releases preflight supports parse and decide differently:
//! - 0.17: legacy names only; a ROCm variant needs exactly the system's
//!   ROCm; `torch-npu` is the noarch name of a CANN system.
//! - 0.18: as 0.17, but a ROCm variant runs within the system's ROCm major,
//!   up to its minor (as CUDA does).
//! - 0.19: dotted names (`torch-2.10-cuda-12.8-cpython-3.9-abi3-…`), MLX
//!   and SDK variants; every compiled variant is judged by the Python it
//!   needs first; `torch-cann` is the noarch name of a CANN system; noarch
//!   variants come after every compiled one; `rocm714` is ROCm 7.14.
//!
//! The release installed in the probed Python picks the rules; without one,
//! or with one outside the range, the newest supported release's rules
//! apply, and the output says so.

use crate::variant::Version;
use serde::Serialize;
use std::fmt;

/// A release of the hub loader whose decisions preflight follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    /// kernels 0.17.
    V0_17,
    /// kernels 0.18.
    V0_18,
    /// kernels 0.19.
    V0_19,
}

impl Release {
    /// Every supported release, oldest first.
    pub const ALL: [Release; 3] = [Release::V0_17, Release::V0_18, Release::V0_19];

    /// The newest supported release: its rules apply where no supported
    /// release is installed.
    pub const NEWEST: Release = Release::V0_19;

    /// The release of this line that preflight is tested against.
    pub fn tested(self) -> &'static str {
        match self {
            Release::V0_17 => "0.17.2",
            Release::V0_18 => "0.18.3",
            Release::V0_19 => "0.19.1",
        }
    }

    /// The supported release line an installed version (`0.18.3`,
    /// `0.19.0rc1`) belongs to; `None` outside the supported range.
    pub fn of(version: &str) -> Option<Release> {
        let v: Version = version.parse().ok()?;
        Release::ALL
            .into_iter()
            .find(|r| r.tested().parse::<Version>().ok() == Some(v))
    }

    /// Whether this release parses dotted, MLX and SDK names.
    pub fn dotted_names(self) -> bool {
        self >= Release::V0_19
    }

    /// Whether ROCm variants run within the system's ROCm major (else they
    /// need its exact version).
    pub fn rocm_within_major(self) -> bool {
        self >= Release::V0_18
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernels {}", self.tested())
    }
}

impl Serialize for Release {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.tested())
    }
}

/// The rules a resolution follows, and why those.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rules {
    /// The release whose decisions are followed.
    pub release: Release,
    /// The kernels version installed in the probed Python (or named by
    /// `--system kernels=`), if any.
    pub installed: Option<String>,
}

impl Rules {
    /// The rules for an environment with `installed` kernels (or none).
    pub fn for_installed(installed: Option<&str>) -> Rules {
        Rules {
            release: installed.and_then(Release::of).unwrap_or(Release::NEWEST),
            installed: installed.map(str::to_string),
        }
    }

    /// Whether the installed release is one preflight follows.
    pub fn installed_is_supported(&self) -> bool {
        self.installed.as_deref().and_then(Release::of).is_some()
    }
}

impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.installed {
            Some(v) if self.installed_is_supported() => {
                write!(f, "{} (kernels {v} is installed)", self.release)
            }
            Some(v) => write!(
                f,
                "{} (kernels {v} is installed, outside the supported {}–{}: the newest supported rules apply)",
                self.release,
                Release::ALL[0].tested(),
                Release::NEWEST.tested()
            ),
            None => write!(
                f,
                "{} (kernels is not installed: the newest supported release's rules apply)",
                self.release
            ),
        }
    }
}
