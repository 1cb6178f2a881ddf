//! Classify: turn how a probe's child ended (exit status, signal, deadline),
//! what it reported on its result channel and what it printed on stderr into
//! one [`Outcome`], as pure functions.
//!
//! The structured report wins over text: an exception's type, its CUDA error
//! code or name and the module a `ModuleNotFoundError` names are used first;
//! stderr text only when the child died without reporting (flash-attn3 prints
//! `no kernel image is available …` and calls `exit(1)`).

mod signatures;
#[cfg(test)]
mod tests;

pub use crate::probe::channel::{ChildFailure, ChildReport, Depth, ExceptionInfo, Phase};

use crate::probe::ProbeRun;
use crate::sandbox::Termination;
use serde::{Deserialize, Serialize};
use signatures::Cause;
use std::fmt;

/// What happened to a variant, from the design's taxonomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// It loaded, and its smoke workload (if any) ran and matched.
    Pass,
    /// Not probed: it cannot load here at all (another OS or CPU).
    Skipped,
    /// No usable GPU (no device, no driver, a stub libcuda, a CPU-only torch).
    NoDevice,
    /// The driver is older than the variant's CUDA runtime needs.
    DriverTooOld,
    /// No SASS for this GPU and no PTX it can JIT.
    UnsupportedArch,
    /// PTX newer than the driver can JIT.
    PtxTooNew,
    /// The kernel compiles at run time and there is no nvcc.
    NvccMissing,
    /// The kernel compiles at run time and nvcc is too old.
    NvccTooOld,
    /// Run-time compilation failed (NVRTC, nvcc, Triton, CuTe-DSL, PTX JIT).
    JitCompileError,
    /// A Python module the kernel imports is not installed.
    MissingDependency,
    /// An installed dependency has an incompatible version.
    DependencyVersion,
    /// The variant cannot be imported (undefined symbol, ABI mismatch,
    /// missing shared library, unusable `metadata.json`).
    ImportError,
    /// The kernel lacks a function or symbol that is called.
    MissingSymbol,
    /// It ran, but its result differs from the reference.
    WrongResult,
    /// The child was killed by a signal.
    Crashed,
    /// The child exited with a nonzero code.
    Exited,
    /// The child did not finish before the deadline.
    Timeout,
    /// Host or device memory ran out.
    OutOfMemory,
    /// A fault of preflight itself (or of the smoke source): never blamed on the kernel.
    ProbeError,
}

impl OutcomeKind {
    /// The snake_case name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Pass => "pass",
            OutcomeKind::Skipped => "skipped",
            OutcomeKind::NoDevice => "no_device",
            OutcomeKind::DriverTooOld => "driver_too_old",
            OutcomeKind::UnsupportedArch => "unsupported_arch",
            OutcomeKind::PtxTooNew => "ptx_too_new",
            OutcomeKind::NvccMissing => "nvcc_missing",
            OutcomeKind::NvccTooOld => "nvcc_too_old",
            OutcomeKind::JitCompileError => "jit_compile_error",
            OutcomeKind::MissingDependency => "missing_dependency",
            OutcomeKind::DependencyVersion => "dependency_version",
            OutcomeKind::ImportError => "import_error",
            OutcomeKind::MissingSymbol => "missing_symbol",
            OutcomeKind::WrongResult => "wrong_result",
            OutcomeKind::Crashed => "crashed",
            OutcomeKind::Exited => "exited",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::OutOfMemory => "out_of_memory",
            OutcomeKind::ProbeError => "probe_error",
        }
    }

    /// Whether the variant works here.
    pub fn passed(self) -> bool {
        self == OutcomeKind::Pass
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one variant: what happened, where, why, and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// What happened.
    pub kind: OutcomeKind,
    /// The phase it happened in (`done` for a pass).
    pub phase: Phase,
    /// How far a passing probe got; `None` unless it passed.
    pub depth: Option<Depth>,
    /// The cause, on one line.
    pub message: String,
    /// What to do about it, on one line (empty for a pass).
    pub hint: String,
    /// The child's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the child (`SIGSEGV`), when one did.
    pub signal: Option<String>,
    /// The last lines of the child's stderr.
    pub stderr_tail: String,
}

impl Outcome {
    fn new(kind: OutcomeKind, phase: Phase, message: impl Into<String>) -> Outcome {
        Outcome {
            kind,
            phase,
            depth: None,
            message: one_line(&message.into()),
            hint: String::new(),
            exit_code: None,
            signal: None,
            stderr_tail: String::new(),
        }
    }

    fn from_cause(cause: Cause, phase: Phase) -> Outcome {
        let mut outcome = Outcome::new(cause.kind, phase, cause.message);
        outcome.hint = one_line(&cause.hint);
        outcome
    }

    /// A variant that was not probed because it cannot load here.
    pub fn skipped(reason: &str) -> Outcome {
        let mut outcome = Outcome::new(OutcomeKind::Skipped, Phase::Start, reason);
        outcome.hint = "it cannot load on this OS / CPU; probe it anyway with --all".into();
        outcome
    }

    /// A fault of preflight itself (sandbox, driver, channel).
    pub fn probe_error(phase: Phase, message: &str) -> Outcome {
        let mut outcome = Outcome::new(OutcomeKind::ProbeError, phase, message);
        outcome.hint = "a fault of preflight, not of the kernel: please report it".into();
        outcome
    }
}

/// Time spent on one probe, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// From spawning the child to collecting its result.
    pub total_ms: f64,
    /// Importing the variant, as the child measured it.
    pub import_ms: Option<f64>,
    /// Running the smoke workload (device events when torch drives a GPU).
    pub smoke_ms: Option<f64>,
}

/// Everything known about how one probe's child ended.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// How the process ended.
    pub termination: &'a Termination,
    /// What it reported on the result channel.
    pub report: &'a ChildReport,
    /// Why the result channel could not be read, if it could not.
    pub channel_error: Option<&'a str>,
    /// Its captured stderr (head and tail).
    pub stderr: &'a str,
}

/// Classify what a python probe collected.
pub fn classify_run(run: &ProbeRun) -> Outcome {
    classify(&Evidence {
        termination: &run.run.termination,
        report: &run.report,
        channel_error: run.channel_error.as_deref(),
        stderr: &run.run.stderr.text(),
    })
}

/// Lines of stderr kept in an outcome.
pub const STDERR_TAIL_LINES: usize = 20;

/// Classify one probe.
pub fn classify(evidence: &Evidence) -> Outcome {
    let mut outcome = decide(evidence);
    match evidence.termination {
        Termination::Exited { code } => outcome.exit_code = Some(*code),
        Termination::Signaled { name, .. } => outcome.signal = Some(name.clone()),
        Termination::TimedOut { .. } | Termination::Cancelled => {}
    }
    outcome.stderr_tail = tail_lines(&strip_ansi(evidence.stderr), STDERR_TAIL_LINES);
    outcome
}

fn decide(evidence: &Evidence) -> Outcome {
    let report = evidence.report;
    let phase = report.last_phase.unwrap_or(Phase::Start);
    if let Some((at, failure)) = &report.failure {
        return from_failure(*at, failure, report, evidence.stderr);
    }
    match evidence.termination {
        Termination::TimedOut { after, .. } => Outcome::from_cause(
            Cause::new(
                OutcomeKind::Timeout,
                format!(
                    "no result within {:.1} s (still in phase {})",
                    after.as_secs_f64(),
                    phase.as_str()
                ),
                "raise --timeout if the first run compiles or downloads; otherwise the kernel hangs here",
            ),
            phase,
        ),
        Termination::Cancelled => {
            let mut outcome = Outcome::probe_error(phase, "probe cancelled (interrupted)");
            outcome.hint = "run preflight check again to finish this probe".into();
            outcome
        }
        Termination::Signaled { name, .. } => match signatures::from_text(evidence.stderr) {
            Some(cause) => Outcome::from_cause(cause, phase),
            None => Outcome::from_cause(signatures::crashed(name, phase), phase),
        },
        Termination::Exited { code: 0 } if report.done() => {
            let mut outcome = Outcome::new(OutcomeKind::Pass, Phase::Done, pass_message(report));
            outcome.depth = Some(report.depth.unwrap_or(Depth::Load));
            outcome
        }
        Termination::Exited { code: 0 } => Outcome::probe_error(
            phase,
            &match evidence.channel_error {
                Some(why) => format!("child exited 0 but its result channel is unreadable: {why}"),
                None => format!(
                    "child exited 0 without reporting a result (last phase: {})",
                    phase.as_str()
                ),
            },
        ),
        Termination::Exited { code } if report.last_phase.is_none() => Outcome::probe_error(
            Phase::Start,
            &format!(
                "the python driver did not start (exit {code}): {}",
                last_line(evidence.stderr).unwrap_or("no output")
            ),
        ),
        Termination::Exited { code } => match signatures::from_text(evidence.stderr) {
            Some(cause) => Outcome::from_cause(cause, phase),
            None => {
                Outcome::from_cause(signatures::exited(*code, last_line(evidence.stderr)), phase)
            }
        },
    }
}

fn from_failure(
    phase: Phase,
    failure: &ChildFailure,
    report: &ChildReport,
    stderr: &str,
) -> Outcome {
    match failure {
        ChildFailure::Exception(e) => Outcome::from_cause(
            signatures::from_exception(e, phase, report.module.as_deref(), stderr),
            phase,
        ),
        ChildFailure::Mismatch { message } => Outcome::from_cause(
            Cause::new(
                OutcomeKind::WrongResult,
                format!("result differs from the reference: {message}"),
                "the kernel runs but computes wrong values here: do not use this variant; report it to the kernel's authors",
            ),
            phase,
        ),
        ChildFailure::InvalidSmoke { message } => {
            let mut outcome =
                Outcome::probe_error(phase, &format!("unusable smoke source: {message}"));
            outcome.hint = "fix the smoke file: def smoke(kernel, device) returning None, (actual, expected) or a dict".into();
            outcome
        }
        ChildFailure::DriverError { message } => {
            Outcome::probe_error(phase, &format!("the python driver failed: {message}"))
        }
    }
}

fn pass_message(report: &ChildReport) -> String {
    let depth = match report.depth {
        Some(Depth::Verified) => "smoke workload verified against its reference",
        Some(Depth::Smoke) => "smoke workload ran (no reference to verify against)",
        Some(Depth::Load) | None => "imported (no smoke workload)",
    };
    match &report.device {
        Some(device) => format!("{depth} on {device}"),
        None => depth.to_string(),
    }
}

/// Remove ANSI escape sequences (CuTe-DSL colours its messages).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

/// Longest message kept on one line.
const LINE_LIMIT: usize = 240;

/// Collapse text to one line of bounded length, without ANSI codes.
pub fn one_line(text: &str) -> String {
    let flat = strip_ansi(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() <= LINE_LIMIT {
        return flat;
    }
    let mut cut: String = flat.chars().take(LINE_LIMIT - 1).collect();
    cut.push('…');
    cut
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
