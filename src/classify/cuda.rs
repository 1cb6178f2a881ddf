//! The CUDA signature table: driver `CUresult` and runtime `cudaError_t`
//! codes (the same numbers for every code listed here), their names, and the
//! native executor's own failures (NVRTC, missing libraries, devices).
//! Codes and names are from CUDA 13's `cuda.h` / `driver_types.h`.

use super::{Cause, OutcomeKind, Phase, hints};
use crate::protocol::{CudaError, NvrtcError};

/// One row: what a code means by itself.
struct Code {
    kind: OutcomeKind,
    text: &'static str,
    hint: &'static str,
    transient: bool,
}

const fn row(kind: OutcomeKind, text: &'static str, hint: &'static str) -> Code {
    Code {
        kind,
        text,
        hint,
        transient: false,
    }
}

/// The cause a CUDA error code names by itself; `phase` decides the codes
/// whose blame depends on where they happened.
fn code(code: i64, phase: Phase) -> Option<Code> {
    use OutcomeKind::*;
    Some(match code {
        2 => Code {
            transient: true,
            ..row(OutOfMemory, "out of memory", hints::OUT_OF_MEMORY)
        },
        3 | 4 | 803 => row(
            NoDevice,
            "the driver cannot initialise or is shutting down",
            hints::DEVICE_UNUSABLE,
        ),
        34 => row(NoDevice, "CUDA driver is a stub library", hints::NO_DEVICE),
        35 => row(
            DriverTooOld,
            "CUDA driver version is insufficient for CUDA runtime version",
            hints::DRIVER_TOO_OLD,
        ),
        36 => row(
            DriverTooOld,
            "the call requires a newer CUDA driver",
            hints::DRIVER_TOO_OLD,
        ),
        46 => Code {
            transient: true,
            ..row(
                NoDevice,
                "CUDA-capable device(s) is/are busy or unavailable",
                hints::DEVICE_UNUSABLE,
            )
        },
        100 => row(
            NoDevice,
            "no CUDA-capable device is detected",
            hints::NO_DEVICE,
        ),
        101 => row(NoDevice, "invalid device ordinal", hints::NO_SUCH_DEVICE),
        200 | 300 => row(
            ImportError,
            "device kernel image is invalid",
            hints::BAD_IMAGE,
        ),
        209 => row(
            UnsupportedArch,
            "no kernel image is available for execution on the device",
            hints::ARCH,
        ),
        218 => row(JitCompileError, "a PTX JIT compilation failed", hints::JIT),
        221 => row(
            JitCompileError,
            "PTX JIT compiler library not found",
            hints::JIT,
        ),
        222 => row(
            PtxTooNew,
            "the provided PTX was compiled with an unsupported toolchain",
            hints::PTX_TOO_NEW,
        ),
        223 => row(
            JitCompileError,
            "PTX JIT compilation was disabled",
            hints::JIT_DISABLED,
        ),
        227 => row(
            DriverTooOld,
            "the CUDA driver is older than the loader requires",
            hints::DRIVER_TOO_OLD,
        ),
        500 => row(
            MissingSymbol,
            "named symbol not found",
            hints::MISSING_SYMBOL,
        ),
        700 | 710 | 714..=719 => row(
            Crashed,
            "the kernel faulted on the device",
            hints::DEVICE_FAULT,
        ),
        702 => row(Timeout, "the launch timed out", hints::WATCHDOG),
        913 => row(
            ImportError,
            "the function is not loaded",
            hints::FUNCTION_NOT_LOADED,
        ),
        999 => Code {
            transient: true,
            ..row(NoDevice, "unknown error", hints::DEVICE_UNUSABLE)
        },
        1 | 701 if phase == Phase::Launch => row(
            ProbeError,
            "the launch configuration was refused",
            hints::LAUNCH_REFUSED,
        ),
        _ => return None,
    })
}

/// Names of CUDA errors (driver `CUDA_ERROR_*`, runtime `cudaError*`) and
/// the code they stand for.
const NAMES: &[(&str, i64)] = &[
    ("CUDA_ERROR_NO_BINARY_FOR_GPU", 209),
    ("cudaErrorNoKernelImageForDevice", 209),
    ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 222),
    ("cudaErrorUnsupportedPtxVersion", 222),
    ("cudaErrorInsufficientDriver", 35),
    ("CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", 36),
    ("cudaErrorCallRequiresNewerDriver", 36),
    ("CUDA_ERROR_INSUFFICIENT_LOADER_VERSION", 227),
    ("CUDA_ERROR_NO_DEVICE", 100),
    ("cudaErrorNoDevice", 100),
    ("CUDA_ERROR_INVALID_DEVICE", 101),
    ("cudaErrorInvalidDevice", 101),
    ("CUDA_ERROR_DEVICE_UNAVAILABLE", 46),
    ("cudaErrorDevicesUnavailable", 46),
    ("CUDA_ERROR_STUB_LIBRARY", 34),
    ("cudaErrorStubLibrary", 34),
    ("CUDA_ERROR_OUT_OF_MEMORY", 2),
    ("cudaErrorMemoryAllocation", 2),
    ("CUDA_ERROR_INVALID_PTX", 218),
    ("cudaErrorInvalidPtx", 218),
    ("CUDA_ERROR_JIT_COMPILER_NOT_FOUND", 221),
    ("cudaErrorJitCompilerNotFound", 221),
    ("CUDA_ERROR_NOT_FOUND", 500),
    ("cudaErrorSymbolNotFound", 500),
    ("CUDA_ERROR_FUNCTION_NOT_LOADED", 913),
    ("cudaErrorFunctionNotLoaded", 913),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", 700),
    ("cudaErrorIllegalAddress", 700),
];

/// The cause a CUDA error code names by itself, labelled with `name` (or
/// `CUDA error N` without one).
pub(super) fn code_cause(value: i64, name: Option<&str>, phase: Phase) -> Option<Cause> {
    let row = code(value, phase)?;
    let label = match name.filter(|n| !n.is_empty()) {
        Some(n) => format!("{n} ({value})"),
        None => format!("CUDA error {value}"),
    };
    let mut cause = Cause::new(row.kind, format!("{label}: {}", row.text), row.hint);
    cause.transient = row.transient;
    Some(cause)
}

/// The cause named by the first CUDA error name in `text`, as a whole word.
pub(super) fn from_name(text: &str, phase: Phase) -> Option<Cause> {
    NAMES
        .iter()
        .find(|(name, _)| contains_word(text, name))
        .and_then(|&(name, value)| code_cause(value, Some(name), phase))
}

/// What a child says when CUDA refuses it with error 3: the driver's and
/// the runtime's names, and the runtime's text as torch prints it (its
/// warning, its exception).
const NOT_INITIALIZED: [&str; 4] = [
    "CUDA_ERROR_NOT_INITIALIZED",
    "cudaErrorInitializationError",
    "Error 3: initialization error",
    "CUDA error: initialization error",
];

/// Why a failure of a forked probe is the fork's, when it is: CUDA error 3
/// there means the fork server's process had started the driver (an
/// import's `torch.cuda.is_available()` calls `cuInit`) and the child
/// inherited a driver it cannot use, which says nothing of the machine.
pub(super) fn lost_in_fork(message: &str, stderr: &str) -> Option<String> {
    NOT_INITIALIZED
        .iter()
        .any(|n| message.contains(n) || stderr.contains(n))
        .then(|| {
            "CUDA error 3 in a probe forked from the fork server: the server's process had started the CUDA driver, which a forked child cannot use".to_owned()
        })
}

/// A failed driver call: the code decides, the message names the call.
pub(super) fn driver_error(e: &CudaError, phase: Phase) -> Cause {
    let name = if e.name.is_empty() {
        "CUresult".to_owned()
    } else {
        e.name.clone()
    };
    let jit = e
        .log
        .as_deref()
        .and_then(first_error)
        .map(|l| format!("; {l}"))
        .unwrap_or_default();
    let message = format!("{}: {name} ({}): {}{jit}", e.call, e.code, e.message);
    match code_cause(e.code, Some(&e.name), phase) {
        Some(cause) => Cause { message, ..cause },
        None => Cause::new(OutcomeKind::Exited, message, hints::UNEXPECTED_CUDA),
    }
}

/// NVRTC rejected the source: its first error line says why.
pub(super) fn nvrtc(e: &NvrtcError) -> Cause {
    Cause::new(
        OutcomeKind::JitCompileError,
        format!(
            "NVRTC: {} ({}): {}",
            e.message,
            e.code,
            first_error(&e.log).unwrap_or(&e.message)
        ),
        hints::NVRTC_SOURCE,
    )
}

/// A library that would not load: NVRTC, else the driver.
pub(super) fn library_missing(library: &str, detail: &str) -> Cause {
    if library.contains("nvrtc") {
        Cause::new(
            OutcomeKind::JitCompileError,
            format!("NVRTC is not loadable: {detail}"),
            hints::NVRTC_MISSING,
        )
    } else {
        Cause::new(
            OutcomeKind::NoDevice,
            format!("{library} is not loadable: {detail}"),
            hints::NO_DRIVER,
        )
    }
}

/// A library older than the entry points preflight calls.
pub(super) fn symbol_missing(detail: &str) -> Cause {
    Cause::new(
        OutcomeKind::DriverTooOld,
        format!("a CUDA library lacks an entry point preflight uses: {detail}"),
        hints::DRIVER_TOO_OLD,
    )
}

/// A device ordinal beyond what the driver sees.
pub(super) fn no_such_device(ordinal: u32, count: u32) -> Cause {
    Cause::new(
        OutcomeKind::NoDevice,
        format!("no device {ordinal}: the driver sees {count} device(s)"),
        hints::NO_SUCH_DEVICE,
    )
}

/// The first line of a compiler log that reports an error, else its first line.
pub fn first_error(log: &str) -> Option<&str> {
    let mut lines = log.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next();
    lines.find(|l| l.contains("error")).or(first)
}

/// `name` as a whole word (not a prefix of a longer identifier).
pub(super) fn contains_word(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let next = text[at + name.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}
