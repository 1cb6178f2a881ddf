//! `preflight check`

use super::probing::{ProbeArgs, Probing, progress_bar};
use super::{Answer, Failure, Internal, emit, emit_json};
use kernel_preflight::declared::embedded::Judge;
use kernel_preflight::discover;
use kernel_preflight::fingerprint::Fingerprint;
use kernel_preflight::probe::cuda::{self, CudaExecutor};
use kernel_preflight::probe::native;
use kernel_preflight::report::check;
use kernel_preflight::report::native as native_report;
use kernel_preflight::run::{self, CheckReport, CheckResult, Target, native as native_run};
use kernel_preflight::sandbox;
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
    let mut paths = args.targets.clone();
    // A target named twice is checked once.
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    let (native_dirs, hub): (Vec<&PathBuf>, Vec<&PathBuf>) =
        paths.iter().partition(|p| native::is_native_target(p));
    let natives = native_dirs
        .iter()
        .map(|dir| Ok((dir.display().to_string(), native::load(dir)?)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut targets = hub
        .iter()
        .map(|path| {
            Ok(Target {
                given: path.display().to_string(),
                discovery: discover::discover(path)?,
            })
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    targets.extend(args.repo.targets()?);
    for warning in targets.iter().flat_map(|t| &t.discovery.warnings) {
        eprintln!("preflight: warning: {warning}");
    }
    let fingerprint = probing.fingerprint()?;
    let cancel = sandbox::install_interrupt_handler();
    let mut report = CheckReport {
        fingerprint: fingerprint.clone(),
        results: Vec::new(),
    };
    let mut text = Vec::new();
    let mut answer = true;
    if !targets.is_empty() {
        let hub = hub_check(&probing, args.all, &targets, &fingerprint, &cancel)?;
        answer = hub.every_target_passes();
        text.push(check::table(&hub, &targets));
        report.results = hub.results;
    }
    if !natives.is_empty() {
        let executor = CudaExecutor::current()
            .map_err(|e| Internal(format!("cannot find the preflight binary: {e}")))?
            .with_nvrtc(cuda::nvrtc_library(&fingerprint.toolkits));
        let judge = Judge::from_fingerprint(&fingerprint);
        for (given, target) in &natives {
            // A probe that could not run at all is preflight's fault.
            let probed = native_run::probe(target, &executor, &probing.limits, 0, &cancel)
                .map_err(|e| Internal(format!("{given}: {e}")))?;
            answer &= probed.outcome.kind.passed();
            let rows = native_report::rows(given, &probed, judge);
            text.push(native_report::table(given, &probed, &rows));
            report.results.extend(rows);
        }
    }
    super::exit_if_interrupted(&cancel, "every probe was stopped");
    if args.json {
        emit_json(&report);
    } else {
        emit(&text.join("\n\n"));
    }
    Ok(if answer { Answer::Yes } else { Answer::No })
}

/// Probes the hub targets (kernel repos, variant directories, hub cache
/// folders) in the Python executor.
fn hub_check(
    probing: &Probing,
    all: bool,
    targets: &[Target],
    fingerprint: &Fingerprint,
    cancel: &sandbox::Cancel,
) -> Result<CheckReport, Failure> {
    let probes = run::probe_count(targets, fingerprint, all);
    let mut options = probing.options(fingerprint, probes, all)?;
    // Declared side by side with observed: what the variant's shared objects
    // can run on this GPU, before any launch.
    options.judge = Some(Judge::from_fingerprint(fingerprint));
    let progress = progress_bar(probes, "probing");
    let on_result = |r: &CheckResult| {
        if let Some(bar) = &progress
            && r.outcome.kind != kernel_preflight::classify::OutcomeKind::Skipped
        {
            bar.inc(1);
            bar.set_message(format!("{} {}", r.variant, r.outcome.kind));
        }
    };
    let report = run::run(targets, fingerprint, &options, cancel, &on_result);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    Ok(report)
}
