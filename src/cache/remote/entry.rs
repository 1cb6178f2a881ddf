//! What travels between nodes: an outcome entry with content identity only
//! (the job's parts: the machine's full fingerprint hash, the hashes of the
//! variant's files and of its `metadata.json`, the smoke source's text, …;
//! never a path, an inode or an mtime), sealed with HMAC-SHA256 under the
//! fleet secret, and the checks an entry passes before it is believed.

use super::super::bucket::{Entry, Parts};
use super::super::job::{OutcomeKey, OutcomeParts};
use super::super::key::Key;
use super::settings::Secret;
use crate::classify::{Outcome, Timings};
use crate::fingerprint::ClassFacts;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What a sealed entry says it is.
const FORMAT: &str = "kernel-preflight/remote-outcome/v1";

/// The part of an outcome record that holds on every node of a machine
/// class: the local record less the variant's path on the publisher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRecord {
    /// The smoke source, for people.
    pub smoke: String,
    /// What probing showed.
    pub outcome: Outcome,
    /// Where the time went on the publisher.
    pub timings: Timings,
    /// The publisher's machine, in one line.
    pub machine: String,
    /// What was installed in the probed environment (see
    /// [`super::super::OutcomeRecord::packages`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<String>,
    /// The publisher's machine class in readable facts (what `fleet ls`
    /// shows); absent in entries of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ClassFacts>,
    /// Which kernel the variant belongs to and where it stood among its
    /// variants on the publisher; absent for a native module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where a variant stands among its kernel's variants, as the publisher
/// judged it: what `fleet ls` makes the same choice from as `select`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The kernel (`ORG/NAME`, or its folder's name).
    pub kernel: String,
    /// Its version: the hub snapshot's revision, when it lies in the hub
    /// cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the hub loader accepts the variant by name on the publisher.
    pub accepted: bool,
    /// Its place in the hub's preference order there (0 first).
    pub preference: u32,
}

/// An entry as the remote store holds it.
pub type SharedEntry = Entry<OutcomeParts, SharedRecord>;

/// The sealed form: the entry's exact text and its MAC.
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    format: String,
    entry: String,
    hmac: String,
}

/// Why an entry read from the remote store was not believed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a sealed entry of this format (truncated, another program's).
    #[error("not a sealed entry: {0}")]
    Malformed(String),
    /// Its MAC is not the fleet secret's over its text.
    #[error("its signature does not verify under the fleet secret")]
    BadSignature,
    /// Its parts do not hash to the key it is stored under.
    #[error("its parts do not hash to its key")]
    WrongKey,
    /// It names another machine's fingerprint.
    #[error("it names another machine (fingerprint {0})")]
    AnotherMachine(String),
    /// It is another job (other files, smoke, depth, executor) than the
    /// key's here.
    #[error("it is another job than this key's here")]
    AnotherJob,
    /// Of another schema of outcomes than this build's.
    #[error("it is of another schema")]
    OtherSchema,
    /// Its outcome does not last (`timeout`, `probe_error`, transient), so
    /// no node publishes it.
    #[error("its outcome ({0}) is never published")]
    NotLasting(String),
}

fn mac(secret: &Secret, text: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&secret.0)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(FORMAT.as_bytes());
    mac.update(b"\n");
    mac.update(text);
    mac
}

/// The bytes to publish for `entry`.
pub fn seal(secret: &Secret, entry: &SharedEntry) -> Result<Vec<u8>, serde_json::Error> {
    let text = serde_json::to_string(entry)?;
    let tag = mac(secret, text.as_bytes()).finalize().into_bytes();
    serde_json::to_vec(&Sealed {
        format: FORMAT.into(),
        hmac: crate::hash::hex(&tag),
        entry: text,
    })
}

/// The entry in `bytes`, stored under `key`, if it is believed: its MAC
/// verifies under `secret`, it is of this schema, its parts hash to `key`,
/// it names the machine `fingerprint` (any machine: `None`, for a view of
/// the fleet), (when given) it is the job
/// `expected` is, and its outcome lasts.
pub fn open(
    secret: &Secret,
    bytes: &[u8],
    key: &Key,
    fingerprint: Option<&str>,
    expected: Option<&OutcomeKey>,
) -> Result<SharedEntry, Refusal> {
    let sealed: Sealed =
        serde_json::from_slice(bytes).map_err(|e| Refusal::Malformed(e.to_string()))?;
    if sealed.format != FORMAT {
        return Err(Refusal::Malformed(format!("format {:?}", sealed.format)));
    }
    let tag = decode_hex(&sealed.hmac).ok_or(Refusal::BadSignature)?;
    mac(secret, sealed.entry.as_bytes())
        .verify_slice(&tag)
        .map_err(|_| Refusal::BadSignature)?;
    let entry: SharedEntry =
        serde_json::from_str(&sealed.entry).map_err(|e| Refusal::Malformed(e.to_string()))?;
    if !entry.parts.is_current() {
        return Err(Refusal::OtherSchema);
    }
    // Asked by key, the fingerprint is named first (the likelier forgery);
    // in a listing, an entry that does not hash to its key is refused
    // before it can pass for another machine class's.
    let keyed = entry.is_valid_for(key);
    if expected.is_none() && !keyed {
        return Err(Refusal::WrongKey);
    }
    if fingerprint.is_some_and(|f| f != entry.parts.fingerprint) {
        return Err(Refusal::AnotherMachine(short(&entry.parts.fingerprint)));
    }
    if !keyed {
        return Err(Refusal::WrongKey);
    }
    if let Some(expected) = expected
        && entry.parts != expected.parts
    {
        return Err(Refusal::AnotherJob);
    }
    if !entry.record.outcome.lasts() {
        return Err(Refusal::NotLasting(entry.record.outcome.kind.to_string()));
    }
    Ok(entry)
}

/// The first 12 digits of a hash, for messages.
pub fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
