//! A variant's `metadata.json`, in the hub's format
//! (`kernels-data/src/metadata.rs`); unknown keys are ignored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The kernel metadata a build variant ships.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Metadata {
    /// Kernel name (`flash-attn3`); its Python module name has `-` as `_`.
    pub name: String,
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
    /// Python dependencies, by the hub's curated names (`einops`, `tvm-ffi`, …).
    pub python_depends: Vec<String>,
    /// The backend the variant was built for, and its compute archs.
    pub backend: BackendInfo,
    /// Content digest of the variant's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Build provenance, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<serde_json::Value>,
}

impl Metadata {
    /// The Python module name (`flash_attn3` for `flash-attn3`).
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
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

/// `digest` in `metadata.json`: a base64 sha256 per file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// Hash algorithm (`sha256`).
    pub algorithm: String,
    /// Relative path → base64 digest.
    pub files: BTreeMap<String, String>,
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
