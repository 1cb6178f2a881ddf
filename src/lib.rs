//! kernel-preflight: will this build variant of a compute kernel actually run
//! here, and how fast?
//!
//! The library follows the layers of the design, top to bottom; a lower layer
//! never imports a higher one:
//! [`variant`] (names) → [`discover`] (variants on disk) → [`declared`]
//! (name-level and metadata checks) → … The `preflight` binary is a thin shell
//! over this API.
#![warn(missing_docs)]

pub mod bench;
pub mod cache;
pub mod classify;
pub mod declared;
pub mod discover;
pub mod doctor;
pub mod fingerprint;
pub mod fs;
pub mod hash;
pub mod labels;
pub mod probe;
pub mod protocol;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod seen;
pub mod stats;
pub mod text;
pub mod variant;
