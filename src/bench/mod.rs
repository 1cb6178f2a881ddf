//! Benchmark mode: the working variants of one kernel timed side by side.
//!
//! A native target (a directory with a `preflight.toml`) is timed as a
//! whole — every launch of every module in each sample — and several are
//! compared side by side like variants (`native.rs`).
//!
//! A client of `run`'s plan: the variants are probed (or answered from the
//! cache) first, and only those that pass are timed, each in a bench child
//! of its own that stays alive across interleaved rounds
//! ([`session::bench`]). The results rank the variants with bootstrap
//! verdicts ([`result::BenchReport::rank`]) and go to the cache's bench
//! bucket (`store.rs`, through `run`'s seam to the cache), where `select --fastest` finds them.

mod native;
pub mod result;
mod rounds;
pub mod session;
mod store;

pub use crate::run::{BenchEvent, BenchReporter};
pub use session::{BenchOptions, Benched, bench};
use store::store;

use crate::probe::ProbeError;
use crate::run::SessionError;

/// Why a bench could not be run: bad input (see [`BenchError::is_bad_input`]),
/// or a fault of preflight or the machine.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `--variants` names a variant the target does not have.
    #[error("--variants: no variant {variant} (variants: {})", known.join(", "))]
    UnknownVariant {
        /// The name given.
        variant: String,
        /// The target's variants.
        known: Vec<String>,
    },
    /// The variants have no workload to time.
    #[error(
        "no workload to time: give --smoke FILE (def smoke(kernel, device)) or a kernel repo with benchmarks/benchmark*.py"
    )]
    NoWorkload,
    /// `--workload` names no `benchmark_<workload>` of the repo's scripts.
    #[error("--workload {workload}: no benchmark_{workload} in {} (workloads: {})", dir.display(), if known.is_empty() { "none".to_owned() } else { known.join(", ") })]
    UnknownWorkload {
        /// The workload given.
        workload: String,
        /// The `benchmarks/` folder.
        dir: std::path::PathBuf,
        /// The workloads its scripts define.
        known: Vec<String>,
    },
    /// `--workload` was given, but the workload is a smoke file.
    #[error(
        "--workload {0}: workloads are those of the repo's benchmarks/benchmark*.py, and the workload here is a smoke file"
    )]
    WorkloadWithoutBenchmarks(String),
    /// Several targets that are not all native: a bench compares the
    /// variants of one hub kernel, or native targets side by side.
    #[error(
        "bench takes one hub kernel (its variants are compared), or native targets (directories with a preflight.toml, compared with each other); not several hub kernels, nor a mix"
    )]
    SeveralKernels,
    /// An option that only applies to hub variants, given for native targets.
    #[error(
        "{0} applies to hub variants; native targets are timed on their preflight.toml launches"
    )]
    HubOnly(&'static str),
    /// One native target given twice.
    #[error("{0} is given twice")]
    GivenTwice(String),
    /// The executor a participant needs was not provided.
    #[error("no {0} executor to time with")]
    NoExecutor(&'static str),
    /// A child could not be run at all.
    #[error("{0}")]
    Probe(ProbeError),
    /// The user interrupted the bench.
    #[error("interrupted")]
    Interrupted,
    /// The check before the bench could not answer.
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl BenchError {
    /// Whether the user can fix it (exit 2) rather than preflight (exit 3).
    pub fn is_bad_input(&self) -> bool {
        match self {
            BenchError::Session(e) => e.is_bad_input(),
            BenchError::Probe(_) | BenchError::Interrupted | BenchError::NoExecutor(_) => false,
            BenchError::UnknownVariant { .. }
            | BenchError::NoWorkload
            | BenchError::UnknownWorkload { .. }
            | BenchError::WorkloadWithoutBenchmarks(_)
            | BenchError::SeveralKernels
            | BenchError::HubOnly(_)
            | BenchError::GivenTwice(_) => true,
        }
    }
}
