//! Parsing only the subcommand that was asked for. Building the parser of
//! every subcommand (each argument, help text and relation) is a visible
//! share of a short command's time: `select` answered from the cache and
//! `fingerprint` run in a loop cost little more than a process start, and
//! the cuda child starts once per probe. The parser of the one subcommand
//! named first is built alone; anything it does not accept as a plain run
//! (an error, `--help`, an unknown name) is left to the whole parser, which
//! says it exactly as before.

use super::Command;
use clap::{Args, FromArgMatches};
use std::ffi::OsString;

/// The command, parsed by its own subcommand's parser alone; `None`: parse
/// the whole command line instead.
pub(super) fn command() -> Option<Command> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let name = args.get(1)?.to_str()?;
    // The subcommand's own arguments, after its name.
    let rest = &args[1..];
    Some(match name {
        "select" => Command::Select(one("select", rest)?),
        "fingerprint" => Command::Fingerprint(one("fingerprint", rest)?),
        "resolve" => Command::Resolve(one("resolve", rest)?),
        "check" => Command::Check(one("check", rest)?),
        "inspect" => Command::Inspect(one("inspect", rest)?),
        "__cuda-child" => Command::CudaChild(one("__cuda-child", rest)?),
        _ => return None,
    })
}

/// `A` parsed from `args` (its name first) by a parser of `A` alone.
fn one<A: Args + FromArgMatches>(name: &'static str, args: &[OsString]) -> Option<A> {
    let parser = A::augment_args(clap::Command::new(name));
    let matches = parser.try_get_matches_from(args).ok()?;
    A::from_arg_matches(&matches).ok()
}
