//! A variant's `metadata.json`, in the hub's format
//! (`kernels-data/src/metadata.rs`), with the strictness of kernels 0.19's
//! own parser (`kernels._rust.Metadata`): what it refuses is a finding here,
//! what it accepts parses (tests/metadata_oracle.rs holds the two side by
//! side); unknown keys are ignored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The kernel metadata a build variant ships.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Metadata {
    /// Kernel name (`flash-attn3`); its Python module name has `-` as `_`.
    pub name: KernelName,
    /// Identifier unique to the kernel version and backend; the module is
    /// registered in `sys.modules` under it.
    pub id: String,
    /// Kernel version.
    pub version: u64,
    /// License.
    pub license: String,
    /// Upstream source repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Where the kernel's source lies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The oldest `kernels` that loads this variant (`0.19.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels_minver: Option<MinVersion>,
    /// How the variant's files are laid out (kernels 0.19; absent: files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_layout: Option<BuildLayout>,
    /// Other hub kernels this one loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_depends: Vec<KernelDependency>,
    /// Python dependencies, by the hub's curated names (`einops`, `tvm-ffi`, …).
    pub python_depends: Vec<String>,
    /// The backend the variant was built for, and its compute archs.
    pub backend: BackendInfo,
    /// Content digest of the variant's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Build provenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// A kernel name as the loader accepts it: a lowercase letter, then
/// lowercase letters, digits and dashes, ending in a letter or digit, two
/// characters at least.
#[derive(
    Debug, Clone, PartialEq, Eq, serde_with::SerializeDisplay, serde_with::DeserializeFromStr,
)]
pub struct KernelName(String);

impl KernelName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for KernelName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let b = s.as_bytes();
        let ok = b.len() >= 2
            && b[0].is_ascii_lowercase()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b.last()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if ok {
            Ok(KernelName(s.to_string()))
        } else {
            Err(format!(
                "Invalid kernel name `{s}`: it must start with a lowercase letter, \
                 contain only lowercase letters, digits and dashes, end with a letter or digit, \
                 and be at least 2 characters long"
            ))
        }
    }
}

impl std::fmt::Display for KernelName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `kernels-minver`: three numbers, `0.19.0` (spaces around allowed, as
/// the loader allows them).
#[derive(
    Debug, Clone, PartialEq, Eq, serde_with::SerializeDisplay, serde_with::DeserializeFromStr,
)]
pub struct MinVersion(pub [u64; 3]);

impl std::str::FromStr for MinVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        let [a, b, c] = parts[..] else {
            return Err(format!(
                "Version has {} components, expected 3",
                parts.len()
            ));
        };
        let n = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| format!("Version must consist of numbers: {s}"))
        };
        Ok(MinVersion([n(a)?, n(b)?, n(c)?]))
    }
}

impl std::fmt::Display for MinVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c] = self.0;
        write!(f, "{a}.{b}.{c}")
    }
}

/// `build-layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildLayout {
    /// The variant's files lie in its folder.
    Files,
    /// They lie in a zip archive.
    Zip,
}

/// One entry of `kernel-depends`: a hub kernel, by version or revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "DependencyRepr")]
pub struct KernelDependency {
    /// `org/name`.
    pub repo_id: String,
    /// The kernel version, when it is pinned by version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The revision, when it is pinned by revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct DependencyRepr {
    repo_id: String,
    version: Option<u64>,
    revision: Option<String>,
}

impl TryFrom<DependencyRepr> for KernelDependency {
    type Error = &'static str;
    fn try_from(d: DependencyRepr) -> Result<Self, Self::Error> {
        match (&d.version, &d.revision) {
            (None, None) => Err("either `version` or `revision` must be specified"),
            (Some(_), Some(_)) => Err("`version` and `revision` are mutually exclusive"),
            _ => Ok(KernelDependency {
                repo_id: d.repo_id,
                version: d.version,
                revision: d.revision,
            }),
        }
    }
}

/// `provenance`: which kernel-builder built the variant, and what else the
/// build wrote, kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// `kernel-builder`.
    #[serde(rename = "kernel-builder")]
    pub kernel_builder: KernelBuilder,
    /// The other keys.
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

/// `provenance.kernel-builder`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelBuilder {
    /// Its version.
    pub version: String,
    /// The other keys.
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

impl Metadata {
    /// The Python module name (`flash_attn3` for `flash-attn3`).
    pub fn python_name(&self) -> String {
        self.name.as_str().replace('-', "_")
    }
}

/// `backend` in `metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// `cuda`, `rocm`, `cpu`, `metal`, `xpu`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Compute capabilities or GPU targets (`8.0`, `9.0a`, `10.0+PTX`, `gfx942`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
}

/// `digest` in `metadata.json`: a base64 hash per file, which the loader
/// checks the files against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// Hash algorithm.
    pub algorithm: DigestAlgorithm,
    /// Relative path → base64 digest.
    pub files: BTreeMap<String, String>,
}

/// The hash algorithms a digest may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DigestAlgorithm {
    /// `sha256`
    Sha256,
    /// `sha512`
    Sha512,
}

/// What reading a variant's `metadata.json` found: a finding, never an abort.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MetadataStatus {
    /// Parsed.
    Ok {
        /// The metadata.
        metadata: Box<Metadata>,
    },
    /// There is no `metadata.json`.
    Missing,
    /// It exists but cannot be used.
    Invalid {
        /// Why, with line and column for syntax and schema errors.
        why: String,
    },
}

impl MetadataStatus {
    /// Read `dir/metadata.json`, following symlinks (hub cache blobs).
    pub fn read(dir: &Path) -> MetadataStatus {
        let path = dir.join("metadata.json");
        match crate::fs::read_small(&path) {
            Ok(bytes) => Self::parse(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => MetadataStatus::Missing,
            Err(e) => MetadataStatus::Invalid {
                why: format!("cannot read {}: {e}", path.display()),
            },
        }
    }

    /// Parse the bytes of a `metadata.json`.
    pub fn parse(bytes: &[u8]) -> MetadataStatus {
        match serde_json::from_slice::<Metadata>(bytes) {
            Ok(metadata) => MetadataStatus::Ok {
                metadata: Box::new(metadata),
            },
            Err(e) => MetadataStatus::Invalid { why: e.to_string() },
        }
    }

    /// The metadata, when it parsed.
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            MetadataStatus::Ok { metadata } => Some(metadata),
            _ => None,
        }
    }

    /// One line for people: `metadata missing`, or a broken one in the
    /// words `check` reports it in (the hub loader's: `Cannot parse
    /// metadata from metadata.json: …`); `None` when it parsed.
    pub fn finding(&self) -> Option<String> {
        match self {
            MetadataStatus::Ok { .. } => None,
            MetadataStatus::Missing => Some("metadata missing".into()),
            MetadataStatus::Invalid { why } => {
                Some(format!("Cannot parse metadata from metadata.json: {why}"))
            }
        }
    }
}
