//! Classify: turn an executor's [`Evidence`] — how its child ended, what it
//! reported on its channel, what it printed on stderr — into one
//! [`Outcome`], as pure functions, the same way for every executor.
//!
//! The decisive error is the structured one the child reported (an
//! exception's class and attributes, a `CUresult`, an NVRTC log); stderr is
//! read only when the child died without a report (flash-attn3 prints
//! `no kernel image is available …` and calls `exit(1)`), and then only its
//! error lines, never its warnings. How a child ended (exit code, signal,
//! deadline, cancel) is handled once, in `termination.rs`; what a reported
//! failure means comes from one signature table per executor (`python.rs`,
//! `cuda.rs`) and free text (`text.rs`); every hint is defined once, in
//! [`hints`].

mod cuda;
#[cfg(test)]
mod cuda_tests;
#[cfg(test)]
mod device_tests;
mod guard;
pub mod hints;
#[cfg(test)]
mod hub_tests;
mod machine;
mod nvcc;
mod python;
mod stderr;
mod termination;
#[cfg(test)]
mod tests;
mod text;
#[cfg(test)]
mod transformers_tests;

pub use crate::protocol::{Depth, ExceptionInfo, Made, Phase, Timings};
pub use cuda::first_error;
pub use machine::Machine;

use crate::probe::Subject;
use crate::protocol::{EmbeddedLoad, Evidence, Failure, HubCheck, Report};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What happened to a variant, from the design's taxonomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::VariantArray)]
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

    /// Whose fault an outcome of this kind is: the one place each kind is
    /// decided (a new kind does not compile until it is placed here).
    pub fn fault(self) -> Fault {
        match self {
            OutcomeKind::Pass => Fault::None,
            OutcomeKind::Skipped => Fault::NotProbed,
            OutcomeKind::ProbeError => Fault::Preflight,
            OutcomeKind::NoDevice
            | OutcomeKind::DriverTooOld
            | OutcomeKind::UnsupportedArch
            | OutcomeKind::PtxTooNew
            | OutcomeKind::NvccMissing
            | OutcomeKind::NvccTooOld
            | OutcomeKind::JitCompileError
            | OutcomeKind::MissingDependency
            | OutcomeKind::DependencyVersion
            | OutcomeKind::ImportError
            | OutcomeKind::MissingSymbol
            | OutcomeKind::WrongResult
            | OutcomeKind::Crashed
            | OutcomeKind::Exited
            | OutcomeKind::Timeout
            | OutcomeKind::OutOfMemory => Fault::Here,
        }
    }

    /// Whether an outcome of this kind is lasting evidence about the
    /// variant on this machine, worth keeping in a cache. Not: a fault of
    /// preflight, a deadline (often a busy machine), a variant that was not
    /// probed. (A lasting kind may still be [`Outcome::transient`] by its
    /// cause: see [`Outcome::lasts`].)
    pub fn lasts(self) -> bool {
        match self {
            OutcomeKind::ProbeError | OutcomeKind::Timeout | OutcomeKind::Skipped => false,
            OutcomeKind::Pass
            | OutcomeKind::NoDevice
            | OutcomeKind::DriverTooOld
            | OutcomeKind::UnsupportedArch
            | OutcomeKind::PtxTooNew
            | OutcomeKind::NvccMissing
            | OutcomeKind::NvccTooOld
            | OutcomeKind::JitCompileError
            | OutcomeKind::MissingDependency
            | OutcomeKind::DependencyVersion
            | OutcomeKind::ImportError
            | OutcomeKind::MissingSymbol
            | OutcomeKind::WrongResult
            | OutcomeKind::Crashed
            | OutcomeKind::Exited
            | OutcomeKind::OutOfMemory => true,
        }
    }

    /// Whether the variant works here.
    pub fn passed(self) -> bool {
        self.fault() == Fault::None
    }

    /// Whether the variant was probed at all (not skipped).
    pub fn probed(self) -> bool {
        self.fault() != Fault::NotProbed
    }

    /// Every kind, in taxonomy order (declaration order; tests, the
    /// Python mirror's check). Derived (`strum::VariantArray`), so a new
    /// kind is in it without anyone listing it.
    pub const ALL: &'static [OutcomeKind] = <OutcomeKind as strum::VariantArray>::VARIANTS;
}

/// Whose fault an outcome is: what a report marks it with, and whether a
/// declared verdict it contradicts is a disagreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Nothing went wrong: the variant works here.
    None,
    /// Not probed: the variant cannot load here at all (another OS or CPU),
    /// which its name already says.
    NotProbed,
    /// The variant does not work here: its code, its dependencies, or what
    /// this machine lacks for it.
    Here,
    /// A fault of preflight itself (or of the smoke source): never blamed
    /// on the kernel.
    Preflight,
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
    /// How far the probe got: for a pass, the depth it reported; for a
    /// failure, the depth of the phases it finished before it failed
    /// (`None`: it failed before its import was done).
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
    /// Whether the cause may pass by itself (a busy device, memory taken by
    /// another process, an interrupted probe): such an outcome says nothing
    /// lasting about the variant, and caches must not keep it.
    #[serde(default)]
    pub transient: bool,
    /// The CUDA code embedded in a compiled variant's shared objects, per
    /// file, as the device depth loaded it (empty for other jobs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embedded: Vec<EmbeddedLoad>,
    /// What a user of a passing variant should still know, on one line (a
    /// program that loads it does not exit by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// How the probe's child was made (absent: a fresh process).
    #[serde(default, skip_serializing_if = "Made::is_fresh")]
    pub made: Made,
    /// The Python exception the variant's code raised (`builtins.ImportError`),
    /// when the failure was one it raised and the child survived, as opposed
    /// to one that ended the child (an exit, a signal, a deadline). The hub
    /// loader, importing the same variant in its caller, raises rather than
    /// dies: `KERNEL_PREFLIGHT=1` relies on this to keep the loader's own
    /// exception types (docs/flag.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised: Option<String>,
}

impl Outcome {
    /// Whether this outcome is lasting evidence that a cache may keep: a
    /// lasting kind ([`OutcomeKind::lasts`]) whose cause does not pass by
    /// itself ([`Outcome::transient`]).
    pub fn lasts(&self) -> bool {
        self.kind.lasts() && !self.transient
    }

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
            transient: false,
            embedded: Vec::new(),
            warning: None,
            made: Made::Fresh,
            raised: None,
        }
    }

    fn from_cause(cause: Cause, phase: Phase) -> Outcome {
        let mut outcome = Outcome::new(cause.kind, phase, cause.message);
        outcome.hint = one_line(&cause.hint);
        outcome.transient = cause.transient;
        outcome
    }

    /// A variant that was not probed because it cannot load here.
    pub fn skipped(reason: &str) -> Outcome {
        let mut outcome = Outcome::new(OutcomeKind::Skipped, Phase::Start, reason);
        outcome.hint = hints::SKIPPED.into();
        outcome
    }

    /// A fault of preflight itself (sandbox, driver, channel).
    pub fn probe_error(phase: Phase, message: &str) -> Outcome {
        let mut outcome = Outcome::new(OutcomeKind::ProbeError, phase, message);
        outcome.hint = hints::PROBE_ERROR.into();
        outcome
    }
}

/// A recognised cause: its kind, a message naming what failed, a hint, and
/// whether it may pass by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cause {
    kind: OutcomeKind,
    message: String,
    hint: String,
    transient: bool,
}

impl Cause {
    fn new(kind: OutcomeKind, message: impl Into<String>, hint: impl Into<String>) -> Cause {
        Cause {
            kind,
            message: message.into(),
            hint: hint.into(),
            transient: false,
        }
    }
}

/// Lines of stderr kept in an outcome.
pub const STDERR_TAIL_LINES: usize = 20;

/// Classify one executor run, knowing nothing of the machine beyond the
/// evidence (see [`classify_on`]).
pub fn classify(evidence: &Evidence) -> Outcome {
    classify_on(evidence, &Machine::default())
}

/// Classify one executor run on the machine `machine` describes (from its
/// full fingerprint): the facts that tell two causes of one failure apart
/// (the nvcc a kernel sees, the GPU) and make hints exact.
pub fn classify_on(evidence: &Evidence, machine: &Machine) -> Outcome {
    let report = evidence.report();
    let mut outcome = decide(evidence, &report, machine);
    if let Some(why) = contradiction(&outcome, &report, machine) {
        outcome = contradicted(outcome.phase, &why);
    }
    if evidence.made == Made::Forked
        && !outcome.kind.passed()
        && let Some(why) = cuda::lost_in_fork(&outcome.message, &evidence.stderr)
    {
        let phase = outcome.phase;
        outcome = Outcome::probe_error(phase, &why);
        outcome.hint = hints::FORKED_DRIVER.into();
    }
    if !outcome.kind.passed() {
        outcome.depth = report.reached;
    }
    termination::record(&mut outcome, evidence);
    outcome.embedded = report.embedded;
    outcome.made = evidence.made;
    if let Some((_, Failure::Exception(e))) = &report.failure
        && !outcome.kind.passed()
        && outcome.kind != OutcomeKind::ProbeError
    {
        outcome.raised = Some(e.qualified_name());
    }
    printable(outcome)
}

/// `outcome` with the text that came from the child made safe to print
/// ([`crate::text`]): whatever shows it later shows it escaped.
fn printable(mut outcome: Outcome) -> Outcome {
    use crate::text::{printable, printable_line};
    let line = |text: &mut String| {
        if let std::borrow::Cow::Owned(safe) = printable_line(text) {
            *text = safe;
        }
    };
    line(&mut outcome.message);
    line(&mut outcome.hint);
    if let std::borrow::Cow::Owned(safe) = printable(&outcome.stderr_tail) {
        outcome.stderr_tail = safe;
    }
    outcome.warning.iter_mut().for_each(line);
    outcome.raised.iter_mut().for_each(line);
    outcome
}

/// Why a pass cannot be true on this machine, whatever the child said: a
/// child's result channel is written by its own process, so code the
/// probe ran can forge one (docs/sandbox.md), but not the machine
/// preflight measured. A pass at the device depth or deeper on a CUDA
/// device where the fingerprint found no NVIDIA driver and no GPU is such
/// a contradiction: the child's own account of its device says CUDA (and
/// its torch is not a ROCm build, whose devices torch also calls `cuda`).
/// [`against_machine`] adds what the job itself says of the variant.
fn contradiction(outcome: &Outcome, report: &Report, machine: &Machine) -> Option<String> {
    let device = report.runtime.device.as_deref()?;
    let cuda = device == "cuda" || device.starts_with("cuda:");
    let rocm = report
        .runtime
        .torch
        .as_deref()
        .is_some_and(|v| v.contains("rocm"));
    (cuda && !rocm)
        .then(|| impossible_on(outcome, device, machine))
        .flatten()
}

/// The contradiction of a pass on `device` at the device depth or deeper
/// with a machine that has no NVIDIA driver and no NVIDIA GPU.
fn impossible_on(outcome: &Outcome, device: &str, machine: &Machine) -> Option<String> {
    if !outcome.kind.passed()
        || outcome.depth < Some(Depth::Device)
        || machine.nvidia != Some(false)
    {
        return None;
    }
    Some(format!(
        "the child reported a pass at the {} depth on {device}, but this machine has no NVIDIA driver and no NVIDIA GPU",
        outcome.depth.map_or("device", Depth::as_str)
    ))
}

/// `outcome` of `subject`, refused as a `probe_error` when it cannot be
/// true on `machine` whatever the child reported: a CUDA variant (by its
/// name: `cuXY`, `torch-cuda`) that passed at the device depth or deeper
/// on a machine with no NVIDIA driver and no NVIDIA GPU. (The child's own
/// account is checked by [`classify_on`].)
pub fn against_machine(outcome: Outcome, subject: &Subject, machine: &Machine) -> Outcome {
    let Subject::Variant { name, .. } = subject else {
        return outcome;
    };
    let cuda = name.is_cuda();
    match cuda.then(|| impossible_on(&outcome, "a CUDA variant", machine)) {
        Some(Some(why)) => contradicted(outcome.phase, &why),
        _ => outcome,
    }
}

fn contradicted(phase: Phase, why: &str) -> Outcome {
    let mut outcome = Outcome::probe_error(phase, why);
    outcome.hint = hints::CONTRADICTED.into();
    outcome
}

/// The outcome of a compiled CUDA variant from its two probes: `import`
/// (the hub's acceptance, the import, the device confirmed usable, the
/// smoke) and `device` (the cuda executor loading the code embedded in its
/// shared objects). Whatever stopped the import before the device depth
/// (a refusal, a missing dependency, no usable device) is the answer; then
/// a load the driver refused, found before any smoke and with no knowledge
/// of the kernel's API; else the import's outcome, which has then reached
/// at least the device depth. The per-file loads travel with the answer.
pub fn with_device_code(import: Outcome, device: Outcome) -> Outcome {
    let stopped_early = !import.kind.passed() && import.phase <= Phase::Load;
    let mut outcome = if stopped_early || device.kind.passed() {
        let mut outcome = import;
        if outcome.kind.passed() {
            outcome.depth = outcome.depth.max(Some(Depth::Device));
            let loaded: u32 = device.embedded.iter().map(|l| l.loaded).sum();
            outcome.message = one_line(&format!(
                "{}; its embedded CUDA code loaded ({loaded} fatbin(s))",
                outcome.message
            ));
        }
        outcome
    } else {
        // The driver refused the embedded code: whatever the import
        // showed, the variant's code never got past loading.
        let mut outcome = device.clone();
        outcome.depth = import.depth.min(Some(Depth::Load));
        outcome
    };
    outcome.embedded = device.embedded;
    outcome
}

fn decide(evidence: &Evidence, report: &Report, machine: &Machine) -> Outcome {
    let phase = report.last_phase.unwrap_or(Phase::Start);
    if let Some(v) = evidence.channel.version {
        let mut outcome = Outcome::probe_error(
            phase,
            &format!(
                "the {} child speaks protocol version {}, this preflight speaks version {}",
                evidence.executor, v.child, v.parent
            ),
        );
        outcome.hint = hints::PROTOCOL.into();
        return outcome;
    }
    match &report.failure {
        Some((at, failure)) => from_failure(*at, failure, report, evidence, machine),
        None => termination::decide(evidence, report, machine),
    }
}

/// What a reported failure means, from the table of the executor that
/// reports it, or the same for all.
fn from_failure(
    phase: Phase,
    failure: &Failure,
    report: &Report,
    evidence: &Evidence,
    machine: &Machine,
) -> Outcome {
    let cause = match failure {
        Failure::Exception(e) => {
            let cx = python::Context {
                own: text::Own {
                    module: report.module.as_deref(),
                    package: report.package.as_deref(),
                },
                stderr: &evidence.stderr,
                report,
                machine,
            };
            python::from_exception(e, phase, &cx)
        }
        Failure::HubRefused {
            validator,
            message,
            package,
        } => hub_refused(*validator, message, package.as_deref(), report),
        Failure::DeviceUnusable { device, message } => Cause::new(
            OutcomeKind::NoDevice,
            format!("the {device} device is not usable: {message}"),
            hints::device_unusable(device),
        ),
        Failure::Mismatch { label, message } => Cause::new(
            OutcomeKind::WrongResult,
            match label {
                Some(label) => format!("result differs from the reference: {label}: {message}"),
                None => format!("result differs from the reference: {message}"),
            },
            hints::WRONG_RESULT,
        ),
        Failure::InvalidSmoke { message } => Cause::new(
            OutcomeKind::ProbeError,
            format!("unusable smoke source: {message}"),
            hints::SMOKE,
        ),
        Failure::InvalidInput { message } => {
            Cause::new(OutcomeKind::ProbeError, message.clone(), hints::INPUT)
        }
        Failure::Internal { message, .. } => Cause::new(
            OutcomeKind::ProbeError,
            format!("the {} child failed: {message}", evidence.executor),
            hints::PROBE_ERROR,
        ),
        Failure::Unknown => Cause::new(
            OutcomeKind::ProbeError,
            format!(
                "the {} child reported a failure this preflight does not know (a newer child?)",
                evidence.executor
            ),
            hints::PROTOCOL,
        ),
        Failure::Cuda(e) => cuda::driver_error(e, phase),
        Failure::Nvrtc(e) => cuda::nvrtc(e),
        Failure::LibraryMissing { library, detail } => cuda::library_missing(library, detail),
        Failure::SymbolMissing { detail } => cuda::symbol_missing(detail),
        Failure::NoSuchDevice { ordinal, count } => cuda::no_such_device(*ordinal, *count),
    };
    Outcome::from_cause(cause, phase)
}

/// The hub loader's refusal, in the taxonomy's terms, with its own message
/// quoted and who applied its rules.
fn hub_refused(check: HubCheck, message: &str, package: Option<&str>, report: &Report) -> Cause {
    let said = match report.runtime.acceptance.as_deref() {
        Some("preflight") | None => format!(
            "hub rules (applied by preflight: no `kernels` here) refuse it: {}",
            short_paths(message)
        ),
        Some(judge) => match unknown_loader(judge) {
            Some(why) => format!(
                "hub rules (applied by preflight: {why}) refuse it: {}",
                short_paths(message)
            ),
            None => format!("hub loader ({judge}) refuses it: {}", short_paths(message)),
        },
    };
    match (check, package) {
        (HubCheck::Metadata, _) => Cause::new(OutcomeKind::ImportError, said, hints::METADATA),
        (HubCheck::Dependencies, Some(package)) => Cause::new(
            OutcomeKind::MissingDependency,
            said,
            hints::install(package),
        ),
        (HubCheck::Dependencies, None) => Cause::new(
            OutcomeKind::ImportError,
            said,
            hints::UNSUPPORTED_DEPENDENCY,
        ),
        (HubCheck::Minver, _) => {
            Cause::new(OutcomeKind::DependencyVersion, said, hints::KERNELS_MINVER)
        }
        (HubCheck::Arch, _) => Cause::new(OutcomeKind::UnsupportedArch, said, hints::ARCH),
        (HubCheck::Digest, _) => Cause::new(OutcomeKind::ImportError, said, hints::DIGEST),
        (HubCheck::Other, _) => Cause::new(OutcomeKind::ImportError, said, hints::HUB_REFUSED),
    }
}

/// Why preflight judged in place of an installed `kernels` it has no
/// adapter for: the child labels that judgment `preflight: <why>`
/// (probes/python/acceptance.py).
pub(crate) fn unknown_loader(judge: &str) -> Option<&str> {
    judge.strip_prefix("preflight: ")
}

/// The hub's parser names the file it read as `` `"/…/metadata.json"` ``;
/// a variant's path is long enough to push the reason itself out of a
/// one-line message, so only its file name is kept.
fn short_paths(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find("`\"") {
        let Some(len) = rest[start + 2..].find("\"`") else {
            break;
        };
        let path = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push_str(path.rsplit('/').next().unwrap_or(path));
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The outcome a known failure signature in free text (a compiler's output,
/// a log) stands for, if the text holds one.
pub fn from_text(text: &str, phase: Phase) -> Option<Outcome> {
    text::from_text(text, phase, &Machine::default()).map(|cause| Outcome::from_cause(cause, phase))
}

/// An outcome from its parts, for verdicts built from other outcomes (a
/// native target's summary of its modules).
pub fn outcome(kind: OutcomeKind, phase: Phase, message: &str, hint: &str) -> Outcome {
    let mut outcome = Outcome::new(kind, phase, message);
    outcome.hint = one_line(hint);
    outcome
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
