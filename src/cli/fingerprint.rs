//! `preflight fingerprint`

use super::{Answer, Failure, Internal, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::fingerprint::{FactStore, Fingerprint, Hashed, Sources};
use kernel_preflight::probe::machine;
use kernel_preflight::report;
use std::path::PathBuf;

/// Arguments of `preflight fingerprint`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON (every field and the hash) instead of a table.
    #[arg(long)]
    json: bool,
    /// Add the facts measured in child processes (compute capability and
    /// CUDA's device numbering, CUDA driver API version, Python's exact
    /// version, torch's ABI); cached after the first time.
    #[arg(long)]
    full: bool,
    /// The Python interpreter whose environment kernels load into (default:
    /// $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Also report this package's version (a variant's python-depends);
    /// repeatable.
    #[arg(long = "package", value_name = "NAME")]
    packages: Vec<String>,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let mut src = Sources::from_process();
    src.python = args.python;
    src.extra_packages = args.packages;
    let cache = Cache::from_env();
    let fp = if args.full {
        full(&src, &cache)?
    } else {
        Fingerprint::fast(&src, &cache)?
    };
    if args.json {
        emit_json(&Hashed::from(&fp));
    } else {
        emit(&report::fingerprint::table(&fp));
    }
    Ok(Answer::Yes)
}

/// The full fingerprint, its CUDA facts measured by this binary's own cuda
/// child (no Python needed), kept in `store` after the first time.
pub(super) fn full(src: &Sources, store: &dyn FactStore) -> Result<Fingerprint, Failure> {
    let preflight = kernel_preflight::fs::current_exe()
        .ok_or_else(|| Internal("cannot find the preflight binary (/proc/self/exe)".into()))?;
    Ok(machine::full_fingerprint(src, store, &preflight)?)
}
