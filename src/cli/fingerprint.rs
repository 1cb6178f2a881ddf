//! `preflight fingerprint`

use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::fingerprint::{Fingerprint, Hashed, Sources};
use kernel_preflight::report;
use kernel_preflight::run::{Session, SessionOptions};
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
    let fp = if args.full {
        full(args.python, args.packages)?
    } else {
        let mut src = Sources::from_process();
        src.python = args.python;
        src.extra_packages = args.packages;
        Fingerprint::fast(&src, &Cache::from_env())?
    };
    if args.json {
        emit_json(&Hashed::from(&fp));
    } else {
        emit(&report::fingerprint::table(&fp));
    }
    Ok(Answer::Yes)
}

/// The full fingerprint for `python` (`None`: as the fingerprint finds
/// one), with `packages` reported too, measured as a session measures it
/// ([`Session::fingerprint`]: CUDA's facts by this binary's own cuda child,
/// no Python needed), kept in the cache after the first time.
pub(super) fn full(python: Option<PathBuf>, packages: Vec<String>) -> Result<Fingerprint, Failure> {
    let options = SessionOptions {
        python,
        packages,
        ..SessionOptions::default()
    };
    Ok(Session::new(options, Cache::from_env()).fingerprint()?)
}
