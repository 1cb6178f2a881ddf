//! Cache keys: sha256 over a stable serialization of what decides a record.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// A 64-digit lowercase hex sha256.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Key(String);

impl Key {
    /// Parse a key as a person or a file name writes it.
    pub fn parse(s: &str) -> Result<Key, super::CacheError> {
        if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Key(s.to_ascii_lowercase()))
        } else {
            Err(super::CacheError::BadKey(s.to_string()))
        }
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// sha256 of bytes, as a key.
    pub fn of_bytes(bytes: &[u8]) -> Key {
        Key(crate::hash::sha256_hex(bytes))
    }

    /// sha256 of several fields, each length-prefixed so that no two
    /// different lists of fields hash alike.
    pub fn of_fields<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> Key {
        let mut h = Sha256::new();
        for field in fields {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field);
        }
        Key(crate::hash::hex(&h.finalize()))
    }
}

impl TryFrom<String> for Key {
    type Error = super::CacheError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Key::parse(&s)
    }
}

impl From<Key> for String {
    fn from(k: Key) -> String {
        k.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
