//! `preflight __reaper -- PROGRAM ARG…`: the sandbox's reaper, started by
//! preflight itself between a probe and its child; not for people.
//!
//! Recognised before the command line is parsed: it starts once per probe,
//! and building the whole clap command costs about 0.5 ms.

use kernel_preflight::sandbox::reaper;
use std::ffi::OsString;
use std::process::ExitCode;

/// Runs the reaper when the arguments ask for it; `None` otherwise.
pub fn run_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != reaper::ARG {
        return None;
    }
    let separator = args.next();
    let command: Vec<OsString> = args.collect();
    let result = match separator {
        Some(s) if s == "--" => reaper::main(&command),
        _ => Err(reaper::NotStarted),
    };
    Some(match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("preflight: error: {e}");
            ExitCode::from(2)
        }
    })
}
