//! `preflight __cuda-child REQUEST`: the cuda executor's child mode, started
//! by preflight itself inside a sandbox; not for people.

use kernel_preflight::probe::cuda::child;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of the child mode.
#[derive(clap::Args)]
pub struct Args {
    /// The request file the parent wrote.
    request: PathBuf,
}

/// Runs the child; it records its own failures, so its exit code is its own.
pub fn run(args: &Args) -> ExitCode {
    child::main(&args.request)
}
