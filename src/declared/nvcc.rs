//! Which GPU architectures each nvcc release knows, and what it means when
//! nvcc refuses one (`nvcc fatal : Unsupported gpu architecture
//! 'compute_89a'`): an nvcc older than the architecture, or an architecture
//! (with its `a` / `f` suffix) that this GPU does not have in any release.
//!
//! The table follows the CUDA release notes (REFERENCE §3: the first
//! toolkit of each capability; 12.0 added `90a`, 12.8 the Blackwell parts,
//! 12.9 the `f` family targets, 13.0 renamed 10.1 to 11.0 and dropped
//! offline compilation for sm_50–sm_72). It is checked against the real
//! architecture lists of CUDA 13.5's nvcc and CUDA 12.2's ptxas in
//! `tests/nvcc_arch.rs`, and covers every capability of the hub builder's
//! list (`cuda_supported_archs.json`, REFERENCE §7).

use super::arch::{Suffix, Target};
use crate::variant::Version;
use std::fmt;

/// The capabilities the hub's kernel builder knows
/// (`../shared/reference/cuda_supported_archs.json`).
pub const HUB_BUILDER_ARCHS: &str = include_str!("cuda_supported_archs.json");

/// A CUDA release, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
}

impl Release {
    const fn new(major: u32, minor: u32) -> Release {
        Release { major, minor }
    }

    /// The release of a toolkit version (`12.2.140` → 12.2).
    pub fn of(version: &str) -> Option<Release> {
        let v: Version = version.parse().ok()?;
        Some(Release::new(
            u32::try_from(v.major).ok()?,
            u32::try_from(v.minor).ok()?,
        ))
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One capability: the first release that knows it plainly, with `a`, with
/// `f`, and the last release that still compiles for it.
struct Known {
    sm: u32,
    plain: Release,
    arch_specific: Option<Release>,
    family: Option<Release>,
    last: Option<Release>,
}

const fn known(
    sm: u32,
    plain: (u32, u32),
    arch_specific: Option<(u32, u32)>,
    family: Option<(u32, u32)>,
    last: Option<(u32, u32)>,
) -> Known {
    const fn r(v: Option<(u32, u32)>) -> Option<Release> {
        match v {
            Some((a, b)) => Some(Release::new(a, b)),
            None => None,
        }
    }
    Known {
        sm,
        plain: Release::new(plain.0, plain.1),
        arch_specific: r(arch_specific),
        family: r(family),
        last: r(last),
    }
}

/// Every capability nvcc has compiled for since CUDA 10, oldest first. The
/// first release of 8.8 and 10.7 is not documented in REFERENCE; 13.5 is
/// the first release seen to know them.
const TABLE: &[Known] = &[
    known(50, (10, 0), None, None, Some((12, 9))),
    known(52, (10, 0), None, None, Some((12, 9))),
    known(53, (10, 0), None, None, Some((12, 9))),
    known(60, (10, 0), None, None, Some((12, 9))),
    known(61, (10, 0), None, None, Some((12, 9))),
    known(62, (10, 0), None, None, Some((12, 9))),
    known(70, (10, 0), None, None, Some((12, 9))),
    known(72, (10, 0), None, None, Some((12, 9))),
    known(75, (10, 0), None, None, None),
    known(80, (11, 0), None, None, None),
    known(86, (11, 1), None, None, None),
    known(87, (11, 4), None, None, None),
    known(88, (13, 5), None, None, None),
    known(89, (11, 8), None, None, None),
    known(90, (11, 8), Some((12, 0)), None, None),
    known(100, (12, 8), Some((12, 8)), Some((12, 9)), None),
    known(101, (12, 8), Some((12, 8)), Some((12, 9)), Some((12, 9))),
    known(103, (12, 9), Some((12, 9)), Some((12, 9)), None),
    known(107, (13, 5), Some((13, 5)), Some((13, 5)), None),
    known(110, (13, 0), Some((13, 0)), Some((13, 0)), None),
    known(120, (12, 8), Some((12, 8)), Some((12, 9)), None),
    known(121, (12, 9), Some((12, 9)), Some((12, 9)), None),
];

/// What the table says of a target an nvcc release refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No release has this target (`sm_89a`: 8.9 has no arch-specific
    /// variant): the GPU lacks what the kernel is built to use.
    NoSuchTarget {
        /// The first release that knows the capability without the suffix.
        plain: Release,
    },
    /// A newer release has it: this nvcc is too old.
    NewerRelease {
        /// The first release that knows the target.
        first: Release,
    },
    /// Older releases had it; this one no longer compiles for it (the GPU
    /// is older than the toolkit supports).
    Dropped {
        /// The last release that knew it.
        last: Release,
    },
    /// The table does not know this capability at all (newer than every
    /// release it lists, or not a GPU).
    Unknown,
}

/// The first release that knows `target`, if any.
fn first_release(target: &Target) -> Option<(Release, Option<Release>)> {
    let k = TABLE.iter().find(|k| k.sm == target.sm)?;
    let first = match target.suffix {
        Suffix::None => Some(k.plain),
        Suffix::ArchSpecific => k.arch_specific,
        Suffix::Family => k.family,
    }?;
    Some((first, k.last))
}

/// The SM numbers the table describes (`50` … `121`).
pub fn known_sms() -> impl Iterator<Item = u32> {
    TABLE.iter().map(|k| k.sm)
}

/// Whether nvcc of `release` knows `target` (`None`: the table cannot say).
pub fn knows(release: Release, target: &Target) -> Option<bool> {
    if TABLE.iter().all(|k| k.sm != target.sm) {
        return None;
    }
    Some(
        first_release(target)
            .is_some_and(|(first, last)| release >= first && last.is_none_or(|l| release <= l)),
    )
}

/// Why an nvcc of `release` (`None`: unknown) refused `target`.
pub fn refusal(release: Option<Release>, target: &Target) -> Refusal {
    let Some(entry) = TABLE.iter().find(|k| k.sm == target.sm) else {
        return Refusal::Unknown;
    };
    let Some((first, last)) = first_release(target) else {
        return Refusal::NoSuchTarget { plain: entry.plain };
    };
    match (release, last) {
        (Some(r), Some(last)) if r > last => Refusal::Dropped { last },
        (Some(r), _) if r < first => Refusal::NewerRelease { first },
        // Known to this release by the table, refused anyway: the newer
        // side is the safer advice.
        (Some(_), _) => Refusal::NewerRelease { first },
        (None, Some(last)) if first <= Release::new(10, 0) => Refusal::Dropped { last },
        (None, _) => Refusal::NewerRelease { first },
    }
}

/// The `sm_XY…` / `compute_XY…` target in a line of nvcc's (or ptxas')
/// refusal: `Unsupported gpu architecture 'compute_89a'`, `Value 'sm_100a'
/// is not defined for option 'gpu-name'`.
pub fn refused_target(line: &str) -> Option<Target> {
    let quoted = line.split('\'').skip(1).step_by(2);
    quoted.filter_map(|q| q.parse::<Target>().ok()).next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declared::arch::ComputeCapability;

    fn t(s: &str) -> Target {
        s.parse().unwrap()
    }

    #[test]
    fn the_table_covers_every_capability_the_hub_builder_knows() {
        let archs: Vec<String> = serde_json::from_str(HUB_BUILDER_ARCHS).unwrap();
        assert!(!archs.is_empty());
        for arch in archs {
            let cap: ComputeCapability = arch.parse().unwrap();
            assert!(
                TABLE.iter().any(|k| k.sm == cap.sm()),
                "{arch} is not in the table"
            );
        }
    }

    #[test]
    fn refusals_name_the_side_that_is_wrong() {
        let r = |s: &str| Release::of(s);
        assert_eq!(
            refusal(r("13.5.37"), &t("compute_89a")),
            Refusal::NoSuchTarget {
                plain: Release::new(11, 8)
            }
        );
        assert_eq!(
            refusal(r("12.2.140"), &t("sm_100a")),
            Refusal::NewerRelease {
                first: Release::new(12, 8)
            }
        );
        assert_eq!(
            refusal(r("12.8"), &t("sm_100f")),
            Refusal::NewerRelease {
                first: Release::new(12, 9)
            }
        );
        assert_eq!(
            refusal(r("13.0"), &t("compute_70")),
            Refusal::Dropped {
                last: Release::new(12, 9)
            }
        );
        assert_eq!(
            refusal(None, &t("compute_72")),
            Refusal::Dropped {
                last: Release::new(12, 9)
            }
        );
        assert_eq!(refusal(None, &t("sm_990")), Refusal::Unknown);
        assert_eq!(knows(Release::new(12, 2), &t("sm_90a")), Some(true));
        assert_eq!(knows(Release::new(11, 8), &t("sm_90a")), Some(false));
        assert_eq!(knows(Release::new(13, 0), &t("sm_101")), Some(false));
    }

    #[test]
    fn the_refused_target_is_read_from_nvcc_and_ptxas_lines() {
        assert_eq!(
            refused_target("nvcc fatal   : Unsupported gpu architecture 'compute_89a'"),
            Some(t("compute_89a"))
        );
        assert_eq!(
            refused_target("ptxas fatal   : Value 'sm_100a' is not defined for option 'gpu-name'"),
            Some(t("sm_100a"))
        );
        assert_eq!(refused_target("nvcc fatal : something else"), None);
    }
}
