//! `preflight fingerprint`

use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::fingerprint::Hashed;
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
    let options = SessionOptions {
        python: args.python,
        packages: args.packages,
        ..SessionOptions::default()
    };
    let session = Session::new(options, Cache::from_env());
    let fp = if args.full {
        session.fingerprint()?
    } else {
        session.fast_fingerprint()?
    };
    if args.json {
        emit_json(&Hashed::from(&fp));
    } else {
        emit(&report::fingerprint::table(&fp));
    }
    Ok(Answer::Yes)
}
