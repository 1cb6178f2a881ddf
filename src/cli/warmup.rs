//! `preflight warmup`

use super::probing::{EventsArgs, ProbeArgs, Watchers};
use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::discover::project;
use kernel_preflight::report::progress::Bars;
use kernel_preflight::report::warmup;
use kernel_preflight::run::warmup::{Warmed, WarmupOptions};
use std::path::PathBuf;

/// Arguments of `preflight warmup`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repos, directories of variants, hub cache folders or native
    /// module directories (default: every kernel in the hub cache).
    #[arg(value_name = "TARGET")]
    targets: Vec<PathBuf>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    /// The kernels a `kernels.lock` pins, each at its locked commit (what
    /// `load_kernel` and `get_locked_kernel` load).
    #[arg(long, value_name = "FILE")]
    lock: Vec<PathBuf>,
    /// The kernels of a project's pyproject.toml [tool.kernels.dependencies],
    /// each at its version (what `get_kernel(repo, version=N)` loads).
    #[arg(long, value_name = "DIR")]
    project: Vec<PathBuf>,
    /// Fetch the candidates of each --repo, --lock and --project kernel
    /// from the hub first (every variant the hub accepts by name here, and
    /// the repository's benchmarks/), with the Python package
    /// kernel_preflight and `kernels` in the probed interpreter.
    #[arg(long)]
    download: bool,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    probing: ProbeArgs,
    #[command(flatten)]
    events: EventsArgs,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    // The kernels of `--repo`, `--lock` and `--project`.
    let pinned = project::pins(
        &args.repo.repo,
        &args.repo.spec(),
        &args.lock,
        &args.project,
    )?;
    let pins_asked = !args.lock.is_empty() || !args.project.is_empty();
    let options = WarmupOptions::new(args.targets, pinned, pins_asked, args.download)?;
    let probing = args.probing.validate()?;
    let warmed = Watchers::new(Bars::PerKernel, &args.events)?.watch(|listener| {
        probing.interruptible(|session, cancel| session.warmup(&options, cancel, listener))
    })?;
    match warmed {
        Warmed::Nothing(why) => emit(&why),
        Warmed::Ran {
            plan,
            report,
            elapsed,
        } => {
            let summary = warmup::summarize(&plan, &report);
            if args.json {
                emit_json(&summary);
            } else {
                emit(&warmup::table(&summary, elapsed));
            }
        }
    }
    Ok(Answer::Yes)
}
