//! Declared checks: what a variant claims, judged without running it.

pub mod arch;
pub mod embedded;
pub mod fatbin;
mod image;
mod inflate;
pub mod nvcc;
mod rejection;
pub mod resolve;
pub mod rules;
pub mod system;

pub use rejection::Rejection;
pub use resolve::{Decision, resolve};
pub use rules::{Release, Rules};
pub use system::{System, SystemError};

#[cfg(test)]
mod tests;
