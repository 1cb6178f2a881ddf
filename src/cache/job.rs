//! Job identity: everything that went into one probe, and the outcome key
//! made from it. Two jobs that could end differently never share a key:
//! `torch-cuda` and `torch-universal` with identical files are two jobs (the
//! name picks the backend and the device), and so is one variant before and
//! after its `metadata.json` changed.

use super::bucket::{Bucket, Parts, Shelf};
use super::key::Key;
use crate::protocol::{Depth, ExecutorKind, Made};
use serde::{Deserialize, Serialize};

/// What a variant's (or a module's) files are, independent of where they lie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantFiles {
    /// `digest:<sha256>` when the files match their `metadata.json` digest
    /// (stable across machines and copies), else `content:<sha256>` of every
    /// file's hash.
    pub content: String,
    /// sha256 (base64) of the `metadata.json` bytes; `None`: there is none.
    /// Apart from `content`, since a digest identity does not cover the
    /// metadata itself (its dependencies, its backend).
    pub metadata: Option<String>,
}

/// Everything that went into one probe.
///
/// A plain struct with public fields, filled by `run` as a struct literal:
/// the compiler refuses a job with a field left out, which a builder with
/// optional setters could not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobIdentity {
    /// Which executor ran it.
    pub executor: ExecutorKind,
    /// That executor's own code (`crate::probe::code_identity`): a new
    /// driver or cuda child may reach another verdict on the same job.
    #[serde(default)]
    pub code: String,
    /// The variant's name (`torch29-cxx11-cu128-x86_64-linux`) or the native
    /// module's name.
    pub name: String,
    /// The device the probe ran on (`cuda`, `cpu`, `auto`, a CUDA ordinal).
    pub device: String,
    /// The variant's files and its `metadata.json`.
    pub files: VariantFiles,
    /// The smoke source's identity (see `outcomes.rs`: `smoke_identity`).
    pub smoke: String,
    /// The depth the probe was asked to reach.
    pub depth: Depth,
    /// The version of the protocol the child spoke
    /// ([`crate::protocol::PROTOCOL_VERSION`]).
    pub protocol: u32,
    /// What loaded a compiled variant's embedded CUDA code on the device
    /// (`cuda 0.1.0`: the cuda executor's code identity), when the job
    /// did; absent otherwise, so that other jobs keep their keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_code: Option<String>,
    /// How the probe's child is made: absent for a fresh process (the keys
    /// of every probe before forked ones), `forked` for one forked from the
    /// python executor's fork server. A fresh and a forked probe are
    /// different evidence.
    #[serde(default, skip_serializing_if = "Made::is_fresh")]
    pub made: Made,
}

/// What an outcome's key is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeParts {
    /// The outcome bucket's version when the entry was made.
    pub schema: u32,
    /// Hash of the machine's full fingerprint.
    pub fingerprint: String,
    /// The job.
    pub job: JobIdentity,
}

impl Parts for OutcomeParts {
    const SHELF: Shelf = Shelf::OUTCOMES;

    /// sha256(full fingerprint hash ‖ job identity ‖ schema), each field
    /// length-prefixed; the job as compact JSON of its fields in declared
    /// order, which is stable.
    fn key(&self) -> Key {
        // Serializing a job cannot fail: no maps, no floats, no custom
        // serializers.
        let job = serde_json::to_vec(&self.job).unwrap_or_default();
        Key::of_fields([
            self.fingerprint.as_bytes(),
            &job,
            &self.schema.to_le_bytes(),
        ])
    }

    fn is_current(&self) -> bool {
        self.schema == Bucket::Outcomes.version()
    }
}

/// An outcome's key, with what it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeKey {
    /// The key.
    pub key: Key,
    /// Its inputs.
    pub parts: OutcomeParts,
}

impl OutcomeKey {
    /// The key of `job` on the machine whose full fingerprint hashes to
    /// `fingerprint`.
    pub fn new(fingerprint: &str, job: JobIdentity) -> OutcomeKey {
        let parts = OutcomeParts {
            schema: Bucket::Outcomes.version(),
            fingerprint: fingerprint.to_string(),
            job,
        };
        OutcomeKey {
            key: parts.key(),
            parts,
        }
    }
}
