//! Compute capabilities, image targets (`sm_90a`, `compute_80`, …) and the
//! rule that decides which embedded image a GPU can run.
//!
//! The rule follows NVIDIA's binary-compatibility guide (REFERENCE §3); it is
//! a pure function over parsed targets so that `inspect`, `check` and
//! `resolve` give the same answer before anything is launched.

use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

use crate::fingerprint::capability::parse_major_minor;
pub use crate::fingerprint::capability::{ComputeCapability, ParseArchError};

/// A PTX ISA version (`.version 9.5` in PTX text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxIsa {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl PtxIsa {
    /// The ISA `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        PtxIsa { major, minor }
    }
}

impl fmt::Display for PtxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for PtxIsa {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for PtxIsa {
    type Err = ParseArchError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (major, minor) = parse_major_minor(s, "PTX ISA version")?;
        Ok(PtxIsa::new(major, minor))
    }
}

/// Driver (GA release) → the newest PTX ISA it JIT-compiles, from the CUDA
/// release notes (REFERENCE §2), oldest first.
const DRIVER_PTX: [((u32, u32, u32), PtxIsa); 14] = [
    ((520, 61, 5), PtxIsa::new(7, 8)),
    ((525, 60, 13), PtxIsa::new(8, 0)),
    ((530, 30, 2), PtxIsa::new(8, 1)),
    ((535, 54, 3), PtxIsa::new(8, 2)),
    ((545, 23, 6), PtxIsa::new(8, 3)),
    ((550, 54, 14), PtxIsa::new(8, 4)),
    ((555, 42, 2), PtxIsa::new(8, 5)),
    ((560, 28, 3), PtxIsa::new(8, 5)),
    ((570, 26, 0), PtxIsa::new(8, 7)),
    ((575, 51, 3), PtxIsa::new(8, 8)),
    ((580, 65, 6), PtxIsa::new(9, 0)),
    ((590, 44, 1), PtxIsa::new(9, 1)),
    ((595, 45, 4), PtxIsa::new(9, 2)),
    ((610, 43, 2), PtxIsa::new(9, 3)),
];

/// The newest PTX ISA a Linux driver version (`550.54.15`, `580.65`) can
/// JIT-compile, or `None` when the version does not parse or predates 520.
///
/// A version written without its patch (`580.65`) or minor number stands
/// for every driver it prefixes, as a user means it: it matches the release
/// whose floor it names (580.65 is 580.65.06's release, ISA 9.0), where
/// filling the missing parts with 0 would make it older than that floor.
/// Drivers newer than the last published floor get that floor's ISA (9.3):
/// the table only grows with confirmed releases.
pub fn driver_max_ptx_isa(driver: &str) -> Option<PtxIsa> {
    let mut parts = driver.trim().split('.');
    let number = |p: &str| -> Option<u32> {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let major = number(parts.next()?)?;
    let mut next = || parts.next().map_or(Some(u32::MAX), number);
    let version = (major, next()?, next()?);
    DRIVER_PTX
        .iter()
        .rev()
        .find(|(floor, _)| version >= *floor)
        .map(|(_, isa)| *isa)
}

/// Whether an image is machine code or PTX for the driver's JIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    /// SASS machine code in a cubin (an ELF file).
    Sass,
    /// PTX text, JIT-compiled by the driver at load time.
    Ptx,
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageKind::Sass => "SASS",
            ImageKind::Ptx => "PTX",
        })
    }
}

/// The feature-set suffix of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Suffix {
    /// No suffix: portable within the major version (SASS) or upward (PTX).
    None,
    /// `a`: arch-specific features, runs only on exactly this capability.
    ArchSpecific,
    /// `f`: family-specific features (CUDA 12.9+), runs within the family.
    Family,
}

impl Suffix {
    /// `a`, `f`, or nothing.
    pub fn letter(self) -> &'static str {
        match self {
            Suffix::None => "",
            Suffix::ArchSpecific => "a",
            Suffix::Family => "f",
        }
    }
}

/// What an image was built for: kind, SM number and suffix (`sm_90a`,
/// `compute_100f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// SASS (`sm_…`) or PTX (`compute_…`).
    pub kind: ImageKind,
    /// The SM number: 80, 90, 100, 121.
    pub sm: u32,
    /// The `a` / `f` suffix, if any.
    pub suffix: Suffix,
}

impl Target {
    /// The capability this target is named after.
    pub fn capability(&self) -> ComputeCapability {
        ComputeCapability::from_sm(self.sm)
    }

    /// Whether a device of capability `gpu` can use this image at all,
    /// ignoring the PTX ISA version (see [`verdict`] for that).
    pub fn runs_on(&self, gpu: ComputeCapability) -> bool {
        let own = self.capability();
        let same_family = own.major == gpu.major && gpu.minor >= own.minor;
        match (self.kind, self.suffix) {
            (_, Suffix::ArchSpecific) => own == gpu,
            // Family members so far are exactly the later minors of the same
            // major (100f → 10.0, 10.3; 120f → 12.0, 12.1).
            (_, Suffix::Family) => same_family && own.is_tegra() == gpu.is_tegra(),
            (ImageKind::Sass, Suffix::None) => same_family && own.is_tegra() == gpu.is_tegra(),
            (ImageKind::Ptx, Suffix::None) => gpu >= own,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = match self.kind {
            ImageKind::Sass => "sm",
            ImageKind::Ptx => "compute",
        };
        write!(f, "{prefix}_{}{}", self.sm, self.suffix.letter())
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Target {
    type Err = ParseArchError;

    /// Parse `sm_90a`, `compute_100f`, `sm_80`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseArchError {
            what: "target",
            given: s.to_string(),
            expected: "sm_XY[a|f] or compute_XY[a|f]",
        };
        let (kind, rest) = if let Some(rest) = s.strip_prefix("sm_") {
            (ImageKind::Sass, rest)
        } else if let Some(rest) = s.strip_prefix("compute_") {
            (ImageKind::Ptx, rest)
        } else {
            return Err(err());
        };
        let (digits, suffix) = match rest.as_bytes().last() {
            Some(b'a') => (&rest[..rest.len() - 1], Suffix::ArchSpecific),
            Some(b'f') => (&rest[..rest.len() - 1], Suffix::Family),
            _ => (rest, Suffix::None),
        };
        if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let sm: u32 = digits.parse().map_err(|_| err())?;
        if sm < 10 {
            return Err(err());
        }
        Ok(Target { kind, sm, suffix })
    }
}

/// How a GPU would run an image set, or why it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Runnable {
    /// The driver loads this SASS image directly.
    Sass {
        /// The image it picks.
        target: Target,
    },
    /// No SASS fits; the driver JIT-compiles this PTX.
    PtxJit {
        /// The PTX image it compiles.
        target: Target,
        /// Its ISA version, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        isa: Option<PtxIsa>,
    },
    /// Nothing fits: no SASS for this GPU and no PTX it can JIT
    /// (`unsupported_arch`).
    UnsupportedArch,
    /// PTX would fit, but it is newer than the driver's JIT (`ptx_too_new`).
    PtxTooNew {
        /// The PTX image that would fit.
        target: Target,
        /// Its ISA version.
        isa: PtxIsa,
        /// The newest ISA the driver supports.
        driver_max: PtxIsa,
    },
    /// The image set holds no CUDA code at all.
    NoImages,
}

/// The compatibility rule's answer for one image set on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The GPU judged.
    pub gpu: ComputeCapability,
    /// The driver's newest PTX ISA, when it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_ptx: Option<PtxIsa>,
    /// Whether some image can run.
    pub runnable: bool,
    /// Which image runs, or why none can.
    #[serde(flatten)]
    pub how: Runnable,
    /// One sentence for people: what the images are and what happens here.
    pub summary: String,
}

/// Decide whether a GPU of capability `gpu`, with a driver whose JIT takes
/// PTX up to `driver_ptx` (unknown: `None`), can run one of `images`
/// (target and, for PTX, ISA version).
///
/// Preference follows the driver: a fitting SASS image, best match first
/// (exact `a` > highest SM), else the newest fitting PTX.
pub fn verdict(
    images: &[(Target, Option<PtxIsa>)],
    gpu: ComputeCapability,
    driver_ptx: Option<PtxIsa>,
) -> Verdict {
    let sass = images
        .iter()
        .filter(|(t, _)| t.kind == ImageKind::Sass && t.runs_on(gpu))
        .max_by_key(|(t, _)| (t.sm, t.suffix == Suffix::ArchSpecific, t.suffix));
    let ptx_fits: Vec<&(Target, Option<PtxIsa>)> = images
        .iter()
        .filter(|(t, _)| t.kind == ImageKind::Ptx && t.runs_on(gpu))
        .collect();
    let isa_ok = |isa: &Option<PtxIsa>| match (isa, driver_ptx) {
        (Some(isa), Some(max)) => *isa <= max,
        _ => true,
    };
    let how = if images.is_empty() {
        Runnable::NoImages
    } else if let Some((t, _)) = sass {
        Runnable::Sass { target: *t }
    } else if let Some((t, isa)) = ptx_fits
        .iter()
        .filter(|(_, isa)| isa_ok(isa))
        .max_by_key(|(t, isa)| (t.sm, *isa))
    {
        Runnable::PtxJit {
            target: *t,
            isa: *isa,
        }
    } else if let (Some((t, Some(isa))), Some(max)) =
        (ptx_fits.iter().min_by_key(|(_, isa)| *isa), driver_ptx)
    {
        Runnable::PtxTooNew {
            target: *t,
            isa: *isa,
            driver_max: max,
        }
    } else {
        Runnable::UnsupportedArch
    };
    let runnable = matches!(how, Runnable::Sass { .. } | Runnable::PtxJit { .. });
    let summary = summary(images, gpu, driver_ptx, &how);
    Verdict {
        gpu,
        driver_ptx,
        runnable,
        how,
        summary,
    }
}

/// `sm_80`, `sm_80 and sm_90a`, `sm_80, sm_86 and sm_90a`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Describe an image set: "SASS for sm_80 and sm_90a, no PTX".
pub fn describe_images(images: &[(Target, Option<PtxIsa>)]) -> String {
    if images.is_empty() {
        return "no CUDA images".to_string();
    }
    let targets = |kind: ImageKind| {
        let mut ts: Vec<Target> = images
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| t.kind == kind)
            .collect();
        ts.sort();
        ts.dedup();
        ts.iter().map(Target::to_string).collect::<Vec<_>>()
    };
    let sass = targets(ImageKind::Sass);
    let ptx = targets(ImageKind::Ptx);
    let sass = if sass.is_empty() {
        "no SASS".to_string()
    } else {
        format!("SASS for {}", join_and(&sass))
    };
    let ptx = if ptx.is_empty() {
        "no PTX".to_string()
    } else {
        format!("PTX for {}", join_and(&ptx))
    };
    format!("{sass}, {ptx}")
}

fn summary(
    images: &[(Target, Option<PtxIsa>)],
    gpu: ComputeCapability,
    driver_ptx: Option<PtxIsa>,
    how: &Runnable,
) -> String {
    let here = format!("this GPU is sm_{}", gpu.sm());
    let outcome = match how {
        Runnable::NoImages => return format!("no CUDA images; {here}: nothing to run"),
        Runnable::Sass { target } => format!("runs the {target} SASS"),
        Runnable::PtxJit { target, isa } => {
            let isa = isa.map(|i| format!(" (ISA {i})")).unwrap_or_default();
            let caveat = match driver_ptx {
                None => ", if the driver supports that ISA",
                Some(_) => "",
            };
            format!("no SASS fits; the driver JIT-compiles the {target} PTX{isa}{caveat}")
        }
        Runnable::UnsupportedArch => "no image can run here".to_string(),
        Runnable::PtxTooNew {
            target,
            isa,
            driver_max,
        } => format!(
            "no SASS fits and the {target} PTX (ISA {isa}) is newer than this driver's JIT ({driver_max}): it cannot run here"
        ),
    };
    format!("{}; {here}: {outcome}", describe_images(images))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_text() {
        for s in ["sm_80", "sm_90a", "sm_100f", "compute_90", "compute_121f"] {
            let t: Target = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        for bad in ["sm_", "sm_9", "compute_90x", "gfx90a", "sm_1000", "sm_a"] {
            assert!(bad.parse::<Target>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn driver_table_lookup() {
        assert_eq!(driver_max_ptx_isa("550.54.15"), Some(PtxIsa::new(8, 4)));
        assert_eq!(driver_max_ptx_isa("550.54.13"), Some(PtxIsa::new(8, 3)));
        assert_eq!(driver_max_ptx_isa("580.65.06"), Some(PtxIsa::new(9, 0)));
        assert_eq!(driver_max_ptx_isa("570.26"), Some(PtxIsa::new(8, 7)));
        // Without a patch, every patch of the release: 580.65 is 580.65.06.
        assert_eq!(driver_max_ptx_isa("580.65"), Some(PtxIsa::new(9, 0)));
        assert_eq!(driver_max_ptx_isa("550.54"), Some(PtxIsa::new(8, 4)));
        assert_eq!(driver_max_ptx_isa("580.64"), Some(PtxIsa::new(8, 8)));
        assert_eq!(driver_max_ptx_isa("580"), Some(PtxIsa::new(9, 0)));
        assert_eq!(driver_max_ptx_isa("520"), Some(PtxIsa::new(7, 8)));
        assert_eq!(driver_max_ptx_isa("580.x"), None);
        assert_eq!(driver_max_ptx_isa("999.1"), Some(PtxIsa::new(9, 3)));
        assert_eq!(driver_max_ptx_isa("470.1"), None);
        assert_eq!(driver_max_ptx_isa("banana"), None);
    }
}
