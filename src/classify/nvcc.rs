//! Kernels that compile at run time with nvcc (DeepGEMM's JIT, torch's
//! extension builder): a toolkit lookup that found nothing, and an
//! architecture nvcc refused — too new for this nvcc, or one this GPU does
//! not have in any release. Decided with the machine's facts: the CUDA
//! home a kernel sees, the release of the nvcc that ran, the GPU.

use super::machine::Machine;
use super::{Cause, OutcomeKind, hints};
use crate::declared::nvcc::{self, Refusal};
use crate::protocol::{ExceptionInfo, Frame};

/// Names a toolkit lookup reads, as they appear in its code.
const LOOKUP_NAMES: &[&str] = &["cuda_home", "cuda_path", "nvcc"];

fn names_lookup(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    LOOKUP_NAMES.iter().any(|n| lower.contains(n))
}

/// Whether a frame belongs to a toolkit lookup: its function is named for
/// one (`_find_cuda_home`), reads `CUDA_HOME` / `CUDA_PATH` or runs `nvcc`,
/// or its failing line names them (`assert cuda_home is not None`).
fn is_lookup(frame: &Frame) -> bool {
    names_lookup(&frame.function)
        || names_lookup(&frame.source)
        || frame
            .strings
            .iter()
            .any(|s| matches!(s.as_str(), "CUDA_HOME" | "CUDA_PATH") || s.ends_with("nvcc"))
}

/// A failed assertion of a toolkit lookup: DeepGEMM's `_find_cuda_home`
/// ends in `assert cuda_home is not None`, torch-style lookups the same
/// way. The structured exception says so (its type, the function and line
/// it was raised in); `None` when it is something else, or when the
/// machine's facts contradict it (a kernel looking the usual way does find
/// an nvcc here).
pub(super) fn lookup_failed(e: &ExceptionInfo, machine: &Machine) -> Option<Cause> {
    if !e.is_a("AssertionError") {
        return None;
    }
    let frame = e.raised_in().filter(|f| is_lookup(f))?;
    if machine.sees_nvcc() == Some(true) {
        return None;
    }
    let what = match (frame.source.is_empty(), e.message.trim()) {
        (false, "") => format!("`{}`", frame.source),
        (false, message) => format!("`{}`: {message}", frame.source),
        (true, message) => message.to_owned(),
    };
    Some(missing(
        format!(
            "the kernel's CUDA toolkit lookup failed ({what} in {}): no nvcc where a kernel looks (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda)",
            frame.function
        ),
        machine,
    ))
}

/// A C++ assertion of a JIT compiler about its toolkit, as DeepGEMM's
/// `DG_HOST_ASSERT` reports one (`Assertion error (compiler.hpp:199):
/// std::filesystem::exists(nvcc_path)`, `not cuda_home.empty()`): the
/// line, when `text` holds one.
pub(super) fn lookup_assertion(text: &str) -> Option<String> {
    text.lines()
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("assert") && (lower.contains("nvcc_path") || lower.contains("cuda_home"))
        })
        .map(|l| l.trim().to_owned())
}

/// nvcc missing, with the hint the machine's facts allow: the exact
/// `CUDA_HOME=` when an nvcc is present only inside a pip wheel.
pub(super) fn missing(message: impl Into<String>, machine: &Machine) -> Cause {
    let (home, wheel) = machine.nvcc_places();
    Cause::new(
        OutcomeKind::NvccMissing,
        message,
        hints::nvcc_missing(home, wheel),
    )
}

/// nvcc (or ptxas) refused an architecture (`line`): too old when a newer
/// release knows the target, the GPU's side when no release has it (an
/// `a` variant of a capability that has none) or when this release no
/// longer compiles for it. `tool` is the command that ran, when known.
pub(super) fn refused_arch(line: &str, machine: &Machine, tool: Option<&str>) -> Cause {
    let Some(target) = nvcc::refused_target(line) else {
        return Cause::new(OutcomeKind::NvccTooOld, line, hints::NVCC_TOO_OLD);
    };
    let ran = machine.release_of(tool);
    let release = ran.as_ref().map(|(r, _)| *r);
    let which = match &ran {
        Some((r, root)) => format!("nvcc {r} ({})", root.display()),
        None => "nvcc".to_owned(),
    };
    let gpu = machine
        .capability
        .map(|c| format!("; this GPU is sm_{}", c.sm()))
        .unwrap_or_default();
    match nvcc::refusal(release, &target) {
        Refusal::NoSuchTarget { plain } => {
            let own = machine.capability.is_none_or(|c| c == target.capability());
            let message = format!(
                "{which} refused {target}: no CUDA release has it (compute capability {} exists since CUDA {plain}, without the `{}` features){gpu}",
                target.capability(),
                target.suffix.letter()
            );
            if own {
                Cause::new(OutcomeKind::UnsupportedArch, message, hints::ARCH_FEATURES)
            } else {
                // Asked for an architecture that is neither real nor this
                // GPU's: the kernel's build is wrong, not the machine.
                Cause::new(OutcomeKind::JitCompileError, message, hints::JIT)
            }
        }
        Refusal::NewerRelease { first } => Cause::new(
            OutcomeKind::NvccTooOld,
            format!("{which} does not know {target} (CUDA {first} is the first that does){gpu}"),
            hints::nvcc_too_old(Some(first)),
        ),
        Refusal::Dropped { last } => Cause::new(
            OutcomeKind::UnsupportedArch,
            format!(
                "{which} no longer compiles for {target} (CUDA {last} was the last release that did){gpu}"
            ),
            hints::arch_dropped(last),
        ),
        Refusal::Unknown => Cause::new(
            OutcomeKind::NvccTooOld,
            format!("{which} refused {target}, an architecture preflight does not know{gpu}"),
            hints::NVCC_TOO_OLD,
        ),
    }
}
