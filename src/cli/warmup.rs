//! `preflight warmup`

use super::probing::{ProbeArgs, warn};
use super::{Answer, Failure, emit, emit_json};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::discover::{Named, Target, Targets, hub_cache};
use kernel_preflight::report;
use kernel_preflight::run::{CheckReport, CheckResult, Job, Plan, Reporter, RunEvent, TargetId};
use serde::Serialize;
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
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    probing: ProbeArgs,
}

/// One kernel's line in the summary.
#[derive(Debug, Serialize)]
struct KernelSummary {
    target: String,
    kernel: String,
    variants: usize,
    probed: usize,
    cached: usize,
    skipped: usize,
    passed: usize,
    best: Option<String>,
    #[serde(skip)]
    native: bool,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let probing = args.probing.validate()?;
    let mut targets = Targets::new();
    for path in &args.targets {
        targets.add(path.display().to_string(), path)?;
    }
    args.repo.add_to(&mut targets)?;
    if args.targets.is_empty() && args.repo.repo.is_empty() {
        let root = hub_cache::cache_root();
        for problem in super::repo::add_every_cached_ref(&mut targets) {
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
    let (plan, report) = probing.run(targets, false, false, &bars)?;
    bars.finish();
    let summary = summarize(&plan, &report);
    if args.json {
        emit_json(&summary);
    } else {
        let mut table = report::table(&[
            "kernel",
            "variants",
            "probed",
            "cached",
            "skipped",
            "work here",
            "best",
        ]);
        for s in &summary {
            table.add_row(vec![
                s.kernel.clone(),
                s.variants.to_string(),
                s.probed.to_string(),
                s.cached.to_string(),
                s.skipped.to_string(),
                s.passed.to_string(),
                match (&s.best, s.native) {
                    (Some(best), _) => best.clone(),
                    (None, true) => "- (native modules)".into(),
                    (None, false) => "none".into(),
                },
            ]);
        }
        let probed: usize = summary.iter().map(|s| s.probed).sum();
        emit(&format!(
            "{table}\n{} kernels, {probed} variants probed in {:.1} s, {} answered from the cache",
            summary.len(),
            start.elapsed().as_secs_f64(),
            summary.iter().map(|s| s.cached).sum::<usize>()
        ));
    }
    Ok(Answer::Yes)
}

fn summarize(plan: &Plan, report: &CheckReport) -> Vec<KernelSummary> {
    plan.targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let rows: Vec<&CheckResult> = report.rows(TargetId(i)).collect();
            let skipped = rows
                .iter()
                .filter(|r| r.outcome.kind == OutcomeKind::Skipped)
                .count();
            let cached = rows.iter().filter(|r| r.cached).count();
            let native = matches!(t.target, Target::Native(_));
            KernelSummary {
                target: t.given.clone(),
                kernel: label(t),
                variants: rows.len(),
                probed: rows.len() - skipped - cached,
                cached,
                skipped,
                passed: rows.iter().filter(|r| r.outcome.kind.passed()).count(),
                // Every module of a native target is needed: none is "best".
                best: rows
                    .iter()
                    .find(|r| !native && r.outcome.kind.passed())
                    .map(|r| r.variant.clone()),
                native,
            }
        })
        .collect()
}

/// What a target is called in the summary: the kernel's name, else the
/// name it was given; a name given as the kernel's with more after it
/// (`acme/relu (main, v2)`, a snapshot of the hub cache named by its refs)
/// is kept whole.
fn label(t: &Named) -> String {
    match &t.target {
        Target::Hub(d) => d.kernel.clone().map(|kernel| {
            if t.given.starts_with(&kernel) {
                t.given.clone()
            } else {
                kernel
            }
        }),
        Target::Native(_) => None,
    }
    .unwrap_or_else(|| t.given.clone())
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
                bar.set_prefix(label(t));
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
