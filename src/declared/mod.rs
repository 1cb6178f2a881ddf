//! Declared checks: what a variant claims, judged without running it.

pub mod arch;
pub mod embedded;
pub mod fatbin;
mod image;
mod inflate;
pub mod nvcc;
pub mod resolve;
pub mod system;

pub use resolve::{Decision, Rejection, resolve};
pub use system::{System, SystemError};

#[cfg(test)]
mod tests;
