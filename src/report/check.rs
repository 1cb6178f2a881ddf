//! `preflight check`: probe every variant of some targets in parallel, and
//! show what each variant declares next to what it did.

use crate::classify::{self, Outcome, OutcomeKind, Timings};
use crate::declared::{self, Decision, Rejection, System};
use crate::discover::{Discovery, FoundVariant};
use crate::fingerprint::{Fingerprint, Hashed};
use crate::probe::{self, PythonProbe, SmokeSource};
use crate::sandbox::{Cancel, Limits};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The Python interpreter that probes run in (absolute path).
    pub python: PathBuf,
    /// A smoke file that overrides every other smoke source.
    pub smoke: Option<PathBuf>,
    /// Probe variants for another OS or CPU too.
    pub all: bool,
    /// Probes run at the same time.
    pub jobs: usize,
    /// Limits of each child.
    pub limits: Limits,
}

/// The declared, name-level verdict, as `check --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// Whether the hub loader would accept the variant here by its name.
    pub accepted: bool,
    /// Why not, in the hub's words.
    pub reason: Option<String>,
    /// Why not, in a word or two (for the table).
    #[serde(skip)]
    pub short: Option<&'static str>,
}

/// One variant's row: what it declares, what it did, how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The target as given on the command line.
    pub target: String,
    /// The variant's name.
    pub variant: String,
    /// The variant's directory.
    pub path: String,
    /// The name-level verdict.
    pub declared: Declared,
    /// What probing it showed.
    pub outcome: Outcome,
    /// Where the time went.
    pub timings: Timings,
    /// Processes that outlived the probe and were killed, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaked: Option<String>,
}

impl CheckResult {
    /// Whether the declared verdict and the observed outcome disagree: a
    /// variant accepted by name that fails here, or one rejected that works.
    pub fn disagrees(&self) -> bool {
        match self.outcome.kind {
            OutcomeKind::Pass => !self.declared.accepted,
            OutcomeKind::Skipped | OutcomeKind::ProbeError => false,
            _ => self.declared.accepted,
        }
    }
}

/// The document `check --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The machine the results hold for, with its hash.
    #[serde(serialize_with = "hashed")]
    pub fingerprint: Fingerprint,
    /// One row per variant, targets in the order given, each in the hub's
    /// preference order.
    pub results: Vec<CheckResult>,
}

fn hashed<S: serde::Serializer>(fp: &Fingerprint, s: S) -> Result<S::Ok, S::Error> {
    Hashed::from(fp).serialize(s)
}

impl CheckReport {
    /// Whether every target has at least one passing variant.
    pub fn every_target_passes(&self) -> bool {
        let mut targets: Vec<&str> = self.results.iter().map(|r| r.target.as_str()).collect();
        targets.dedup();
        targets.iter().all(|t| {
            self.results
                .iter()
                .any(|r| r.target == *t && r.outcome.kind.passed())
        })
    }
}

/// A discovered target, with the name it was given.
#[derive(Debug, Clone)]
pub struct Target {
    /// As given on the command line.
    pub given: String,
    /// What is in it.
    pub discovery: Discovery,
}

/// One variant to check, before it runs.
struct Work<'a> {
    target: &'a Target,
    variant: &'a FoundVariant,
    decision: Decision,
}

impl Work<'_> {
    /// Variants for another OS or CPU cannot load here at all.
    fn skip_reason(&self, all: bool) -> Option<String> {
        match &self.decision.rejection {
            Some(r @ (Rejection::Cpu { .. } | Rejection::Os { .. })) if !all => Some(r.to_string()),
            _ => None,
        }
    }
}

/// Number of variants `check` will start children for.
pub fn probe_count(targets: &[Target], fingerprint: &Fingerprint, all: bool) -> usize {
    plan(targets, &System::from_fingerprint(fingerprint))
        .iter()
        .filter(|w| w.skip_reason(all).is_none())
        .count()
}

fn plan<'a>(targets: &'a [Target], system: &System) -> Vec<Work<'a>> {
    let mut work = Vec::new();
    for target in targets {
        let names = target.discovery.variants.iter().map(|v| &v.name);
        for decision in declared::resolve(names, system) {
            if let Some(variant) = target
                .discovery
                .variants
                .iter()
                .find(|v| v.name == decision.variant)
            {
                work.push(Work {
                    target,
                    variant,
                    decision,
                });
            }
        }
    }
    work
}

/// Probe every variant of every target on the machine `fingerprint`
/// describes, `options.jobs` at a time; `each` is called as each result
/// arrives (for progress).
pub fn run(
    targets: &[Target],
    fingerprint: &Fingerprint,
    options: &CheckOptions,
    cancel: &Cancel,
    each: &(dyn Fn(&CheckResult) + Sync),
) -> CheckReport {
    use rayon::prelude::*;
    let work = plan(targets, &System::from_fingerprint(fingerprint));
    let check = |w: &Work| {
        let result = check_one(w, options, cancel);
        each(&result);
        result
    };
    let results = match rayon::ThreadPoolBuilder::new()
        .num_threads(options.jobs.max(1))
        .build()
    {
        Ok(pool) => pool.install(|| work.par_iter().map(check).collect()),
        Err(_) => work.iter().map(check).collect(),
    };
    CheckReport {
        fingerprint: fingerprint.clone(),
        results,
    }
}

fn check_one(work: &Work, options: &CheckOptions, cancel: &Cancel) -> CheckResult {
    let variant = work.variant;
    let row = |outcome: Outcome, timings: Timings, leaked: Option<String>| CheckResult {
        target: work.target.given.clone(),
        variant: variant.name.to_string(),
        path: variant.path.display().to_string(),
        declared: Declared {
            accepted: work.decision.accepted(),
            reason: work.decision.rejection.as_ref().map(ToString::to_string),
            short: work.decision.rejection.as_ref().map(short_reason),
        },
        outcome,
        timings,
        leaked,
    };
    if let Some(reason) = work.skip_reason(options.all) {
        return row(Outcome::skipped(&reason), Timings::default(), None);
    }
    let discovery = &work.target.discovery;
    let kernel = variant
        .metadata
        .metadata()
        .map(|m| m.name.clone())
        .or_else(|| discovery.kernel.clone());
    let prober = PythonProbe {
        python: options.python.clone(),
        smoke: SmokeSource::choose(
            options.smoke.as_deref(),
            repo_dir(&discovery.root),
            kernel.as_deref(),
        ),
        limits: options.limits.clone(),
        env: Vec::new(),
    };
    let start = Instant::now();
    let result = prober.run(&variant.path, probe::device_for(&variant.name), cancel);
    let total_ms = start.elapsed().as_secs_f64() * 1e3;
    match result {
        Ok(run) => {
            let outcome = classify::classify_run(&run);
            let timings = Timings {
                total_ms: round_ms(total_ms),
                import_ms: run.report.import_ms.map(round_ms),
                smoke_ms: run.report.smoke_ms.map(round_ms),
            };
            row(outcome, timings, run.run.leaked)
        }
        Err(e) => row(
            Outcome::probe_error(classify::Phase::Start, &e.to_string()),
            Timings {
                total_ms: round_ms(total_ms),
                ..Timings::default()
            },
            None,
        ),
    }
}

fn short_reason(rejection: &Rejection) -> &'static str {
    match rejection {
        Rejection::Cpu { .. } => "other CPU",
        Rejection::Os { .. } => "other OS",
        Rejection::TorchVersion { .. } => "torch version",
        Rejection::Cxx11Abi { .. } => "C++ ABI",
        Rejection::StableAbiTooNew { .. } => "stable ABI too new",
        Rejection::TvmFfiVersion { .. } => "tvm-ffi version",
        Rejection::CudaVersion { .. } => "CUDA version",
        Rejection::Backend { .. } | Rejection::NoarchBackend { .. } => "backend",
        Rejection::MacosTooOld { .. } => "macOS too old",
    }
}

/// Milliseconds, rounded to the microsecond.
fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}

/// The kernel repo above a directory of variants (`<repo>/build`), where
/// `benchmarks/` lives.
fn repo_dir(variants_root: &Path) -> Option<&Path> {
    (variants_root.file_name()? == "build")
        .then(|| variants_root.parent())
        .flatten()
}

fn ms(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.2} ms"),
    }
}

/// The table `check` prints for people: per target, variant · declared ·
/// observed · depth · smoke · total, then one line per failure.
pub fn table(report: &CheckReport, targets: &[Target]) -> String {
    let mut out = String::new();
    let system = System::from_fingerprint(&report.fingerprint);
    let _ = writeln!(out, "system: {}", super::resolve::system_line(&system));
    for target in targets {
        let rows: Vec<&CheckResult> = report
            .results
            .iter()
            .filter(|r| r.target == target.given)
            .collect();
        let kernel = target.discovery.kernel.as_deref().unwrap_or("kernel");
        let _ = writeln!(
            out,
            "\n{kernel}: {} variants in {}",
            rows.len(),
            target.discovery.root.display()
        );
        let mut table =
            super::table(&["variant", "declared", "observed", "depth", "smoke", "total"]);
        for r in &rows {
            let declared = match r.declared.short {
                None => "accepted".to_string(),
                Some(short) => format!("rejected ({short})"),
            };
            let mark = if r.disagrees() { "≠ " } else { "" };
            table.add_row(vec![
                r.variant.clone(),
                declared,
                format!("{mark}{}", r.outcome.kind),
                r.outcome.depth.map_or("-", |d| d.as_str()).to_string(),
                ms(r.timings.smoke_ms),
                if r.outcome.kind == OutcomeKind::Skipped {
                    "-".into()
                } else {
                    ms(Some(r.timings.total_ms))
                },
            ]);
        }
        let _ = writeln!(out, "{table}");
        for r in &rows {
            let o = &r.outcome;
            if o.kind.passed() && r.leaked.is_none() {
                continue;
            }
            let (mark, where_) = match o.kind {
                OutcomeKind::Skipped => ("–", String::new()),
                OutcomeKind::Pass => ("⚠", String::new()),
                _ => ("✗", format!(" in {}", o.phase.as_str())),
            };
            let _ = writeln!(
                out,
                "{mark} {} — {}{where_}: {}",
                r.variant, o.kind, o.message
            );
            if !o.kind.passed() && !o.hint.is_empty() {
                let _ = writeln!(out, "    hint: {}", o.hint);
            }
            if r.disagrees()
                && let Some(reason) = &r.declared.reason
            {
                let _ = writeln!(out, "    declared: rejected, {reason}");
            }
            if let Some(leak) = &r.leaked {
                let _ = writeln!(out, "    leaked processes were killed: {leak}");
            }
        }
        let passing: Vec<&str> = rows
            .iter()
            .filter(|r| r.outcome.kind.passed())
            .map(|r| r.variant.as_str())
            .collect();
        let _ = write!(
            out,
            "{} of {} variants work here",
            passing.len(),
            rows.len()
        );
        match passing.first() {
            Some(best) => {
                let _ = writeln!(out, "; the best working variant is {best}");
            }
            None => out.push('\n'),
        }
    }
    if report.results.iter().any(CheckResult::disagrees) {
        let _ = writeln!(
            out,
            "≠ observed outcome disagrees with the declared verdict"
        );
    }
    out.trim_end().to_string()
}
