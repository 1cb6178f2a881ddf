//! `preflight warmup`

use super::probing::{ProbeArgs, warn};
use super::{Answer, BadInput, Failure, Internal, emit, emit_json};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kernel_preflight::discover::hub_cache::RevisionSpec;
use kernel_preflight::discover::project::{self, Pinned};
use kernel_preflight::discover::{Named, Target, Targets, hub_cache};
use kernel_preflight::report::warmup;
use kernel_preflight::run::{CheckResult, Job, Reporter, RunEvent};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let pinned = pinned(&args)?;
    let probing = args.probing.validate()?;
    if args.download {
        download(&probing, &pinned)?;
    }
    let mut targets = Targets::new();
    for path in &args.targets {
        targets.add(path.display().to_string(), path)?;
    }
    for (given, pin) in &pinned {
        targets.add_pinned(given.clone(), pin)?;
    }
    if args.targets.is_empty()
        && pinned.is_empty()
        && (!args.lock.is_empty() || !args.project.is_empty())
    {
        emit("the lock files and projects name no kernels");
        return Ok(Answer::Yes);
    }
    if args.targets.is_empty() && pinned.is_empty() {
        let root = hub_cache::cache_root();
        for problem in targets.add_every_cached_ref() {
            eprintln!("preflight: warning: {problem}");
        }
        if targets.is_empty() {
            emit(&format!(
                "no kernels in the hub cache at {}",
                root.display()
            ));
            return Ok(Answer::Yes);
        }
    }
    let targets = targets.into_vec();
    let bars = Bars::new(&targets);
    let start = Instant::now();
    let (plan, report) = probing.warmup(targets, &bars)?;
    bars.finish();
    let summary = warmup::summarize(&plan, &report);
    if args.json {
        emit_json(&summary);
    } else {
        emit(&warmup::table(&summary, start.elapsed()));
    }
    Ok(Answer::Yes)
}

/// The kernels of `--repo`, `--lock` and `--project`
/// ([`project::pins`]).
fn pinned(args: &Args) -> Result<Vec<(String, Pinned)>, Failure> {
    let pins = project::pins(
        &args.repo.repo,
        &args.repo.spec(),
        &args.lock,
        &args.project,
    )?;
    if args.download && pins.is_empty() {
        return Err(BadInput(
            "--download fetches the kernels of --repo, --lock or --project: give one".into(),
        ));
    }
    Ok(pins)
}

/// Fetch each pinned kernel's candidates with the hub's own client, through
/// `kernel_preflight.download` in the probed interpreter (the binary speaks
/// no HTTP; the Python package that ships it does, with the user's token).
fn download(probing: &super::probing::Probing, pins: &[(String, Pinned)]) -> Result<(), Failure> {
    const FETCH: &str = "import sys, kernel_preflight as kp\n\
        repo, kind, pin = sys.argv[1:]\n\
        kp.download(repo, **{kind: int(pin) if kind == 'version' else pin})\n";
    let python = match &probing.python {
        Some(p) => p.clone(),
        None => probing
            .fingerprint()?
            .python
            .as_ref()
            .and_then(|p| kernel_preflight::probe::find_python(&p.interpreter))
            .ok_or_else(|| {
                BadInput("--download needs a Python interpreter: give --python P".into())
            })?,
    };
    for (_, pin) in pins {
        let (kind, value) = match &pin.spec {
            RevisionSpec::Version(v) => ("version", v.to_string()),
            RevisionSpec::Revision(r) => ("revision", r.clone()),
            RevisionSpec::Main => ("revision", "main".to_owned()),
        };
        eprintln!(
            "preflight: fetching {} ({}) from the hub",
            pin.repo, pin.spec
        );
        let out = std::process::Command::new(&python)
            .args(["-c", FETCH, &pin.repo, kind, &value])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Internal(format!("cannot run {}: {e}", python.display())))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            let why = if last.contains("No module named 'kernel_preflight'") {
                format!(
                    "--download needs the Python package kernel_preflight in {} (pip install 'kernel-preflight[hub]', or from a checkout: pip install '.[hub]')",
                    python.display()
                )
            } else {
                format!("cannot fetch {} ({}): {last}", pin.repo, pin.spec)
            };
            return Err(BadInput(why));
        }
    }
    Ok(())
}

/// One progress bar per kernel and an overall one, on stderr when it is a
/// terminal.
struct Bars {
    overall: Option<ProgressBar>,
    per_target: Vec<ProgressBar>,
    _multi: Option<MultiProgress>,
}

impl Bars {
    fn new(targets: &[Named]) -> Bars {
        if !std::io::stderr().is_terminal() {
            return Bars {
                overall: None,
                per_target: Vec::new(),
                _multi: None,
            };
        }
        let multi = MultiProgress::new();
        let style = |template: &str| {
            ProgressStyle::with_template(template)
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
        };
        let jobs = |t: &Named| match &t.target {
            Target::Hub(d) => d.variants.len(),
            Target::Native(n) => n.modules.len(),
        };
        let total: usize = targets.iter().map(jobs).sum();
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(style(
            "{spinner} all kernels [{bar:30}] {pos}/{len} {elapsed}",
        ));
        overall.enable_steady_tick(Duration::from_millis(120));
        let per_target = targets
            .iter()
            .map(|t| {
                let bar = multi.add(ProgressBar::new(jobs(t) as u64));
                bar.set_style(style("  {prefix:30} [{bar:20}] {pos}/{len} {wide_msg}"));
                bar.set_prefix(warmup::label(t));
                bar
            })
            .collect();
        Bars {
            overall: Some(overall),
            per_target,
            _multi: Some(multi),
        }
    }

    fn done(&self, job: &Job, r: &CheckResult) {
        if let Some(bar) = self.per_target.get(job.target.0) {
            bar.inc(1);
            bar.set_message(format!("{} {}", r.variant, r.outcome.kind));
        }
        if let Some(bar) = &self.overall {
            bar.inc(1);
        }
    }

    fn finish(&self) {
        for bar in self.per_target.iter().chain(&self.overall) {
            bar.finish_and_clear();
        }
    }
}

impl Reporter for Bars {
    fn report(&self, event: RunEvent<'_>) {
        match event {
            RunEvent::Skipped { job, result }
            | RunEvent::Cached { job, result }
            | RunEvent::Finished { job, result } => self.done(job, result),
            RunEvent::Warning { message, .. } => warn(self.overall.as_ref(), message),
            RunEvent::Probing { .. } | RunEvent::Started { .. } => {}
        }
    }
}
