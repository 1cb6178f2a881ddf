//! `preflight warmup`

use super::probing::ProbeArgs;
use super::{Answer, Failure, emit, emit_json};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::discover::{self, hub_cache};
use kernel_preflight::report;
use kernel_preflight::run::{self, CheckResult, Target};
use kernel_preflight::sandbox;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Arguments of `preflight warmup`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repos, directories of variants or hub cache folders (default:
    /// the snapshot of every ref of every kernel in the hub cache).
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
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let probing = args.probing.validate()?;
    let mut targets = Vec::new();
    for path in &args.targets {
        targets.push(Target {
            given: path.display().to_string(),
            discovery: discover::discover(path)?,
        });
    }
    targets.extend(args.repo.targets()?);
    if args.targets.is_empty() && args.repo.repo.is_empty() {
        let root = hub_cache::cache_root();
        let (cached, problems) = super::repo::every_cached_ref();
        for problem in problems {
            eprintln!("preflight: warning: {problem}");
        }
        targets = cached;
        if targets.is_empty() {
            emit(&format!(
                "no kernels in the hub cache at {}",
                root.display()
            ));
            return Ok(Answer::Yes);
        }
    }
    for warning in targets.iter().flat_map(|t| &t.discovery.warnings) {
        eprintln!("preflight: warning: {warning}");
    }
    let fingerprint = probing.fingerprint()?;
    let probes = run::probe_count(&targets, &fingerprint, false);
    let options = probing.options(&fingerprint, probes, false)?;
    let cancel = sandbox::install_interrupt_handler();
    let bars = Bars::new(&targets);
    let start = Instant::now();
    let report = run::run(&targets, &fingerprint, &options, &cancel, &|r| bars.done(r));
    bars.finish();
    super::exit_if_interrupted(&cancel, "outcomes probed so far are cached");
    let summary = summarize(&targets, &report.results);
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
                s.best.clone().unwrap_or_else(|| "none".into()),
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

fn summarize(targets: &[Target], results: &[CheckResult]) -> Vec<KernelSummary> {
    targets
        .iter()
        .map(|t| {
            let rows: Vec<&CheckResult> = results.iter().filter(|r| r.target == t.given).collect();
            let skipped = rows
                .iter()
                .filter(|r| r.outcome.kind == OutcomeKind::Skipped)
                .count();
            let cached = rows.iter().filter(|r| r.cached).count();
            KernelSummary {
                target: t.given.clone(),
                kernel: t
                    .discovery
                    .kernel
                    .clone()
                    .unwrap_or_else(|| t.given.clone()),
                variants: rows.len(),
                probed: rows.len() - skipped - cached,
                cached,
                skipped,
                passed: rows.iter().filter(|r| r.outcome.kind.passed()).count(),
                best: rows
                    .iter()
                    .find(|r| r.outcome.kind.passed())
                    .map(|r| r.variant.clone()),
            }
        })
        .collect()
}

/// One progress bar per kernel and an overall one, on stderr when it is a
/// terminal.
struct Bars {
    overall: Option<ProgressBar>,
    per_target: BTreeMap<String, ProgressBar>,
    _multi: Option<MultiProgress>,
}

impl Bars {
    fn new(targets: &[Target]) -> Bars {
        if !std::io::stderr().is_terminal() {
            return Bars {
                overall: None,
                per_target: BTreeMap::new(),
                _multi: None,
            };
        }
        let multi = MultiProgress::new();
        let style = |template: &str| {
            ProgressStyle::with_template(template)
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
        };
        let total: usize = targets.iter().map(|t| t.discovery.variants.len()).sum();
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(style(
            "{spinner} all kernels [{bar:30}] {pos}/{len} {elapsed}",
        ));
        overall.enable_steady_tick(Duration::from_millis(120));
        let per_target = targets
            .iter()
            .map(|t| {
                let bar = multi.add(ProgressBar::new(t.discovery.variants.len() as u64));
                bar.set_style(style("  {prefix:30} [{bar:20}] {pos}/{len} {wide_msg}"));
                bar.set_prefix(
                    t.discovery
                        .kernel
                        .clone()
                        .unwrap_or_else(|| t.given.clone()),
                );
                (t.given.clone(), bar)
            })
            .collect();
        Bars {
            overall: Some(overall),
            per_target,
            _multi: Some(multi),
        }
    }

    fn done(&self, r: &CheckResult) {
        if let Some(bar) = self.per_target.get(&r.target) {
            bar.inc(1);
            bar.set_message(format!("{} {}", r.variant, r.outcome.kind));
        }
        if let Some(bar) = &self.overall {
            bar.inc(1);
        }
    }

    fn finish(&self) {
        for bar in self.per_target.values().chain(&self.overall) {
            bar.finish_and_clear();
        }
    }
}
