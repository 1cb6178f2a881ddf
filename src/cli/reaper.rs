//! `preflight __reaper -- PROGRAM ARG…`: the sandbox's reaper, started by
//! preflight itself between a probe and its child; not for people.

use kernel_preflight::sandbox::reaper;
use std::ffi::OsString;
use std::process::ExitCode;

/// Arguments of the reaper.
#[derive(clap::Args)]
pub struct Args {
    /// The child's program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<OsString>,
}

/// Runs the reaper; its set-up failures go to the sandbox, not to stderr.
pub fn run(args: &Args) -> ExitCode {
    match reaper::main(&args.command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("preflight: error: {e}");
            ExitCode::from(2)
        }
    }
}
