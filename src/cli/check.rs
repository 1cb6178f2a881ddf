//! `preflight check`

use super::probing::{EventsArgs, ProbeArgs, Watchers};
use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::discover::Targets;
use kernel_preflight::report::check;
use kernel_preflight::report::progress::Bars;
use kernel_preflight::run::CheckOptions;
use std::path::PathBuf;

/// Arguments of `preflight check`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repos, variant directories, hub cache folders, or native
    /// module directories (with a preflight.toml).
    #[arg(required_unless_present = "repo", value_name = "TARGET")]
    targets: Vec<PathBuf>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    #[command(flatten)]
    probing: ProbeArgs,
    /// Probe variants for another OS or CPU too.
    #[arg(long)]
    all: bool,
    /// Answer from the outcome cache alone: a variant it does not hold is
    /// reported as skipped, and nothing is probed.
    #[arg(long)]
    cached: bool,
    /// With --cached: write to FILE, beside a cached pass of one variant,
    /// every input the answer depended on, for the Python package to
    /// re-check without running preflight (removed when there is none).
    #[arg(long, value_name = "FILE", requires = "cached")]
    ticket: Option<PathBuf>,
    /// The hub's acceptance as the caller's own loader judged it, one JSON
    /// line per variant (the Python flag's; probes/python/judge.py): each
    /// probe replays the line of its variant instead of judging it again.
    #[arg(long, value_name = "FILE", hide = true)]
    verdicts: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    events: EventsArgs,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    if args.ticket.is_some() {
        // Before anything of the check is read.
        kernel_preflight::run::ticket::begin();
    }
    if args.cached && args.probing.no_cache {
        return Err(Failure::BadInput(
            "--cached answers from the outcome cache, which --no-cache turns off".into(),
        ));
    }
    let mut probing = args.probing.validate()?;
    if let Some(path) = &args.verdicts {
        let bytes = kernel_preflight::fs::read_small(path).map_err(|e| {
            Failure::BadInput(format!(
                "--verdicts {}: {e}",
                kernel_preflight::fs::shown(path)
            ))
        })?;
        probing = probing.with_verdicts(&bytes);
    }
    let mut targets = Targets::new();
    for path in &args.targets {
        targets.add(path.display().to_string(), path)?;
    }
    args.repo.add_to(&mut targets)?;
    let options = CheckOptions {
        every_platform: args.all,
        judge_embedded: true,
        cached_only: args.cached,
    };
    let (plan, report) = Watchers::new(Bars::Probes, &args.events)?.watch(|listener| {
        probing.interruptible(|session, cancel| {
            session.check(targets.into_vec(), &options, cancel, listener)
        })
    })?;
    if let Some(path) = &args.ticket {
        let argv = without_ticket(
            std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned()),
        );
        match kernel_preflight::run::ticket::finish(path, &argv, &report) {
            Ok(None) => {}
            Ok(Some(why)) => eprintln!("preflight: no ticket: {why}"),
            // The answer stands; only the shortcut to it is lost.
            Err(why) => eprintln!("preflight: warning: {why}"),
        }
    }
    if args.json {
        emit_json(&report);
    } else {
        emit(&check::table(&report, &plan));
    }
    Ok(if report.every_target_passes() {
        Answer::Yes
    } else {
        Answer::No
    })
}

/// The arguments with `--ticket FILE` (or `--ticket=FILE`) left out.
fn without_ticket(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for arg in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == "--ticket" {
            skip = true;
        } else if !arg.starts_with("--ticket=") {
            out.push(arg);
        }
    }
    out
}
