//! `preflight check`

use super::{Answer, BadInput, emit, emit_json};
use kernel_preflight::cache::Store;
use kernel_preflight::cache::outcomes::OutcomeCache;
use kernel_preflight::declared::arch::driver_max_ptx_isa;
use kernel_preflight::discover;
use kernel_preflight::fingerprint::{Fingerprint, Sources};
use kernel_preflight::probe::cuda::{self, CudaExecutor};
use kernel_preflight::probe::{self, native};
use kernel_preflight::report::check;
use kernel_preflight::report::native as native_report;
use kernel_preflight::run::{self, CheckOptions, CheckReport, CheckResult, Target};
use kernel_preflight::sandbox::{self, Limits};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `preflight check`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repos, variant directories, hub cache folders, or native
    /// module directories (with a preflight.toml).
    #[arg(required = true, value_name = "TARGET")]
    targets: Vec<PathBuf>,
    /// Probes at the same time (default: min(variants, CPUs, 4)).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: Option<u32>,
    /// Seconds each probe may run before it is stopped.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    timeout: f64,
    /// Seconds between SIGTERM and SIGKILL when a probe is stopped.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    grace: f64,
    /// The Python interpreter the probes run in (default: $VIRTUAL_ENV,
    /// $CONDA_PREFIX, python3 on PATH, as for the fingerprint).
    #[arg(long, value_name = "P")]
    python: Option<PathBuf>,
    /// Smoke file with `def smoke(kernel, device)`, instead of the repo's
    /// benchmarks or preflight's own smoke library.
    #[arg(long, value_name = "FILE")]
    smoke: Option<PathBuf>,
    /// Probe variants for another OS or CPU too.
    #[arg(long)]
    all: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Probe every variant again, and keep no outcome.
    #[arg(long)]
    no_cache: bool,
}

fn seconds(name: &str, value: f64) -> Result<Duration, BadInput> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            BadInput(format!(
                "--{name} {value}: expected a positive number of seconds"
            ))
        })
}

pub fn run(args: Args) -> Result<Answer, BadInput> {
    let limits = Limits {
        timeout: seconds("timeout", args.timeout)?,
        grace: seconds("grace", args.grace)?,
        ..Limits::default()
    };
    let given = match &args.python {
        Some(p) => Some(probe::find_python(p).ok_or_else(|| {
            BadInput(format!(
                "--python {}: no such executable (give a path, or a name on PATH)",
                p.display()
            ))
        })?),
        None => None,
    };
    if let Some(smoke) = &args.smoke
        && !smoke.is_file()
    {
        return Err(BadInput(format!(
            "--smoke {}: no such file (expected a Python file with def smoke(kernel, device))",
            smoke.display()
        )));
    }
    let mut paths = args.targets.clone();
    // A target named twice is checked once.
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    let (native_dirs, hub): (Vec<&PathBuf>, Vec<&PathBuf>) =
        paths.iter().partition(|p| native::is_native_target(p));
    let natives = native_dirs
        .iter()
        .map(|dir| Ok((dir.display().to_string(), native::load(dir)?)))
        .collect::<Result<Vec<_>, BadInput>>()?;
    let targets = hub
        .iter()
        .map(|path| {
            Ok(Target {
                given: path.display().to_string(),
                discovery: discover::discover(path)?,
            })
        })
        .collect::<Result<Vec<_>, BadInput>>()?;
    for warning in targets.iter().flat_map(|t| &t.discovery.warnings) {
        eprintln!("preflight: warning: {warning}");
    }
    let mut sources = Sources::from_process();
    sources.python = given.clone();
    let fingerprint = Fingerprint::full(&sources)?;
    let cancel = sandbox::install_interrupt_handler();
    let mut report = CheckReport {
        fingerprint: fingerprint.clone(),
        results: Vec::new(),
    };
    let mut text = Vec::new();
    let mut answer = true;
    if !targets.is_empty() {
        let hub = hub_check(
            &args,
            given,
            &targets,
            &fingerprint,
            limits.clone(),
            &cancel,
        )?;
        answer = hub.every_target_passes();
        text.push(check::table(&hub, &targets));
        report.results = hub.results;
    }
    if !natives.is_empty() {
        let executor = CudaExecutor {
            limits,
            ..CudaExecutor::current()
                .map_err(|e| BadInput(format!("cannot find the preflight binary: {e}")))?
                .with_nvrtc(cuda::nvrtc_library(&fingerprint.toolkits))
        };
        let judge = native_report::Judge {
            gpu: fingerprint
                .gpus
                .devices
                .iter()
                .find_map(|g| g.compute_capability.as_deref()?.parse().ok()),
            driver_ptx: fingerprint
                .gpus
                .driver
                .as_deref()
                .and_then(driver_max_ptx_isa),
        };
        for (given, target) in &natives {
            let probed = native::probe(target, &executor, 0, &cancel)
                .map_err(|e| BadInput(format!("{given}: {e}")))?;
            answer &= probed.outcome.kind.passed();
            let rows = native_report::rows(given, &probed, judge);
            text.push(native_report::table(given, &probed, &rows));
            report.results.extend(rows);
        }
    }
    if let Some(signal) = cancel.signal() {
        eprintln!("preflight: interrupted; every probe was stopped");
        std::process::exit(128 + signal);
    }
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
    args: &Args,
    given: Option<PathBuf>,
    targets: &[Target],
    fingerprint: &Fingerprint,
    limits: Limits,
    cancel: &sandbox::Cancel,
) -> Result<CheckReport, BadInput> {
    let python = given
        .or_else(|| {
            let found = fingerprint.python.as_ref()?;
            probe::find_python(&found.interpreter)
        })
        .ok_or_else(|| BadInput("no Python interpreter found: give --python P".into()))?;
    let probes = run::probe_count(targets, fingerprint, args.all);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let jobs = match args.jobs {
        Some(n) => n as usize,
        None => probes.min(cpus).clamp(1, 4),
    };
    let options = CheckOptions {
        python,
        smoke: args.smoke.clone(),
        all: args.all,
        jobs,
        limits,
        cache: (!args.no_cache)
            .then(|| Arc::new(OutcomeCache::new(&Store::default_root(), fingerprint))),
    };
    let progress = progress_bar(probes);
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

/// A progress bar on stderr, only when stderr is a terminal.
fn progress_bar(probes: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || probes == 0 {
        return None;
    }
    let bar = indicatif::ProgressBar::new(probes as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} probing [{bar:30}] {pos}/{len} {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    Some(bar)
}
