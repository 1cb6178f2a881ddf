//! `preflight check`

use super::{Answer, BadInput, emit, emit_json};
use kernel_preflight::declared::detect;
use kernel_preflight::discover;
use kernel_preflight::fingerprint::{Fingerprint, Sources};
use kernel_preflight::probe::cuda::{self, CudaExecutor};
use kernel_preflight::probe::{self, native};
use kernel_preflight::report::check::{
    self, CheckOptions, CheckReport, CheckResult, FingerprintRef, Target,
};
use kernel_preflight::sandbox::{self, Cancel, Limits};
use std::io::IsTerminal;
use std::path::PathBuf;
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
    /// Python interpreter the probes run in.
    #[arg(long, default_value = "python3", value_name = "P")]
    python: PathBuf,
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
    let (native_dirs, hub): (Vec<PathBuf>, Vec<PathBuf>) = args
        .targets
        .iter()
        .cloned()
        .partition(|p| native::is_native_target(p));
    let natives = native_dirs
        .iter()
        .map(|dir| Ok((dir.display().to_string(), native::load(dir)?)))
        .collect::<Result<Vec<_>, BadInput>>()?;
    let cancel = sandbox::install_interrupt_handler();
    let (mut report, mut text, mut answer) = if hub.is_empty() {
        (
            CheckReport {
                fingerprint: FingerprintRef::default(),
                results: Vec::new(),
            },
            String::new(),
            true,
        )
    } else {
        hub_check(&args, &hub, limits.clone(), &cancel)?
    };
    if !natives.is_empty() {
        let toolkits = Fingerprint::fast(&Sources::from_process())
            .map(|fp| fp.toolkits)
            .map_err(|e| BadInput(e.to_string()))?;
        let executor = CudaExecutor::current()
            .map_err(|e| BadInput(format!("cannot find the preflight binary: {e}")))?
            .with_nvrtc(cuda::nvrtc_library(&toolkits));
        let executor = CudaExecutor { limits, ..executor };
        for (given, target) in &natives {
            let probed = native::probe(target, &executor, 0, &cancel)
                .map_err(|e| BadInput(format!("{given}: {e}")))?;
            answer &= probed.outcome.kind.passed();
            report
                .results
                .extend(kernel_preflight::report::native::rows(given, &probed));
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&kernel_preflight::report::native::table(given, &probed));
        }
    }
    if let Some(signal) = cancel.signal() {
        eprintln!("preflight: interrupted; every probe was stopped");
        std::process::exit(128 + signal);
    }
    if args.json {
        emit_json(&report);
    } else {
        emit(&text);
    }
    Ok(if answer { Answer::Yes } else { Answer::No })
}

/// Checks the hub targets (kernel repos, variant directories, hub cache
/// folders): the report, its table, and whether every target has a
/// working variant.
fn hub_check(
    args: &Args,
    hub: &[PathBuf],
    limits: Limits,
    cancel: &Cancel,
) -> Result<(CheckReport, String, bool), BadInput> {
    let python = probe::find_python(&args.python).ok_or_else(|| {
        BadInput(format!(
            "--python {}: no such executable (give a path, or a name on PATH)",
            args.python.display()
        ))
    })?;
    if let Some(smoke) = &args.smoke
        && !smoke.is_file()
    {
        return Err(BadInput(format!(
            "--smoke {}: no such file (expected a Python file with def smoke(kernel, device))",
            smoke.display()
        )));
    }
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
    let system = detect::detect(&python, Duration::from_secs(60));
    let probes = check::probe_count(&targets, &system, args.all);
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
    let report = check::run(&targets, &system, &options, cancel, &on_result);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let text = check::table(&report, &targets, &system);
    let passes = report.every_target_passes();
    Ok((report, text, passes))
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
