//! Cache: probe outcomes stored under a hash of everything they depend on —
//! the machine's full fingerprint, the variant's identity, the smoke source
//! and the schema version — so that later loads are answered instantly.

pub mod identity;
pub mod key;
pub mod ops;
pub mod outcomes;
pub mod store;

pub use identity::Identities;
pub use key::{Key, KeyParts};
pub use store::{CacheError, Entry, Lookup, SCHEMA, Store};

#[cfg(test)]
mod tests;
