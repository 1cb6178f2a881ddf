//! `preflight select`

use super::probing::{ProbeArgs, progress_bar};
use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::discover;
use kernel_preflight::report::check;
use kernel_preflight::run::select::{Rank, Selection};
use kernel_preflight::run::{self, CheckResult, Target};
use kernel_preflight::sandbox;
use std::path::PathBuf;

/// Arguments of `preflight select`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repo, directory of variants, or hub cache folder.
    #[arg(required_unless_present = "repo", conflicts_with = "repo")]
    target: Option<PathBuf>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    /// Pick the variant with the shortest measured smoke time instead of the
    /// hub loader's preference.
    #[arg(long)]
    fastest: bool,
    /// Print JSON: the choice, its outcome, and every alternative.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    probing: ProbeArgs,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let probing = args.probing.validate()?;
    let (given, discovery) = match (&args.target, args.repo.single("select")?) {
        // Absolute, so that the printed path can be loaded from anywhere.
        (Some(path), _) => (
            path.display().to_string(),
            discover::discover(
                &std::path::absolute(path)
                    .map_err(|e| BadInput(format!("{}: {e}", path.display())))?,
            )?,
        ),
        (None, Some(repo)) => (
            repo.to_string(),
            super::repo::discover_repo(repo, &args.repo.spec())?,
        ),
        (None, None) => return Err(BadInput("select needs a TARGET or --repo ORG/NAME".into())),
    };
    for warning in &discovery.warnings {
        eprintln!("preflight: warning: {warning}");
    }
    let targets = [Target { given, discovery }];
    let fingerprint = probing.fingerprint()?;
    let probes = run::probe_count(&targets, &fingerprint, false);
    let options = probing.options(&fingerprint, probes, false)?;
    let cancel = sandbox::install_interrupt_handler();
    let progress = progress_bar(probes, "probing");
    let each = |r: &CheckResult| {
        if let Some(bar) = &progress
            && !r.cached
        {
            bar.inc(1);
        }
    };
    let report = run::run(&targets, &fingerprint, &options, &cancel, &each);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    super::exit_if_interrupted(&cancel, "every probe was stopped");
    let rank = if args.fastest {
        Rank::Fastest
    } else {
        Rank::Preference
    };
    let selection = Selection::new(&report.results, rank);
    let found = selection.path.is_some();
    if args.json {
        emit_json(&selection);
    } else if let Some(path) = selection.path {
        emit(path);
    } else {
        eprintln!("preflight: no variant works here\n");
        eprintln!("{}", check::table(&report, &targets));
    }
    Ok(if found { Answer::Yes } else { Answer::No })
}
