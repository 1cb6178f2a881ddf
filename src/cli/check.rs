//! `preflight check`

use super::probing::{ProbeArgs, Progress};
use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::discover::Targets;
use kernel_preflight::report::check;
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
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let probing = args.probing.validate()?;
    let mut targets = Targets::new();
    for path in &args.targets {
        targets.add(path.display().to_string(), path)?;
    }
    args.repo.add_to(&mut targets)?;
    let progress = Progress::new();
    // Declared side by side with observed: what each job's embedded CUDA
    // images can run on this GPU, before any launch.
    let (plan, mut report) = probing.run(targets.into_vec(), args.all, true, &progress)?;
    progress.finish();
    // Answered from the cache: say what a probe would have run in.
    if report.isolation.is_none() {
        report.isolation = kernel_preflight::sandbox::isolation();
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
