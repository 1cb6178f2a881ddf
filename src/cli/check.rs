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
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    events: EventsArgs,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    if args.cached && args.probing.no_cache {
        return Err(Failure::BadInput(
            "--cached answers from the outcome cache, which --no-cache turns off".into(),
        ));
    }
    let probing = args.probing.validate()?;
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
