//! Failure signatures in free text: an exception's message, a compiler's
//! output, or the error lines of a child's stderr (REFERENCE.md §1 and §6).

use super::{Cause, OutcomeKind, Phase, cuda, hints, strip_ansi};

/// Causes recognised in free text: an exception message or stderr.
pub(super) fn from_text(text: &str, phase: Phase) -> Option<Cause> {
    let text = strip_ansi(text);
    let t = text.as_str();
    let has = |needle: &str| t.contains(needle);
    let line = |needle: &str| line_with(t, needle);

    if has("CUDA out of memory")
        || has("HIP out of memory")
        || has("CUDA error: out of memory")
        || has("OutOfMemoryError")
    {
        let needle = ["HIP out of memory", "out of memory", "OutOfMemoryError"]
            .into_iter()
            .find(|n| has(n))
            .unwrap_or("out of memory");
        let mut cause = Cause::new(OutcomeKind::OutOfMemory, line(needle), hints::OUT_OF_MEMORY);
        cause.transient = true;
        return Some(cause);
    }
    for (needle, code) in [
        (
            "no kernel image is available for execution on the device",
            209,
        ),
        (
            "the provided PTX was compiled with an unsupported toolchain",
            222,
        ),
        ("CUDA driver version is insufficient", 35),
        ("no CUDA-capable device is detected", 100),
        ("CUDA driver is a stub library", 34),
        ("a PTX JIT compilation failed", 218),
        ("PTX JIT compiler library not found", 221),
        ("named symbol not found", 500),
    ] {
        if has(needle) {
            let cause = cuda::code_cause(code, None, phase)?;
            return Some(Cause {
                message: line(needle),
                ..cause
            });
        }
    }
    if let Some(cause) = cuda::from_name(t, phase) {
        return Some(cause);
    }
    if let Some(code) = numbered_cuda_error(t)
        && let Some(cause) = cuda::code_cause(code, None, phase)
    {
        return Some(cause);
    }
    for needle in [
        "Found no NVIDIA driver on your system",
        "Torch not compiled with CUDA enabled",
        "libcuda.so.1: cannot open shared object file",
    ] {
        if has(needle) {
            return Some(Cause::new(
                OutcomeKind::NoDevice,
                line(needle),
                hints::NO_DEVICE,
            ));
        }
    }
    if has("Unsupported gpu architecture") {
        return Some(Cause::new(
            OutcomeKind::NvccTooOld,
            line("Unsupported gpu architecture"),
            hints::NVCC_TOO_OLD,
        ));
    }
    if let Some(l) = t.lines().find(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("nvcc") && (l.contains("too old") || l.contains(">=") || l.contains("at least"))
    }) {
        return Some(Cause::new(
            OutcomeKind::NvccTooOld,
            l.trim(),
            hints::NVCC_TOO_OLD,
        ));
    }
    for needle in [
        "nvcc: not found",
        "nvcc: command not found",
        "No such file or directory: 'nvcc'",
        "Could not find nvcc",
        "nvcc not found",
        "CUDA_HOME environment variable is not set",
    ] {
        if has(needle) {
            return Some(Cause::new(
                OutcomeKind::NvccMissing,
                line(needle),
                hints::NVCC_MISSING,
            ));
        }
    }
    for needle in [
        "CompilationError",
        "PTXASError",
        "ptxas fatal",
        "out of resource: shared memory",
        "NVRTC_ERROR",
        "nvrtc: error",
        "DSLRuntimeError",
        "DSLAstPreprocessorError",
        "nvcc fatal",
    ] {
        if has(needle) {
            return Some(Cause::new(
                OutcomeKind::JitCompileError,
                line(needle),
                hints::JIT,
            ));
        }
    }
    if let Some(name) = between(t, "No module named '", "'") {
        return Some(missing_module(name, None));
    }
    if let Some(symbol) = after_word(t, "undefined symbol: ") {
        return Some(Cause::new(
            OutcomeKind::ImportError,
            format!("undefined symbol: {symbol}"),
            hints::ABI,
        ));
    }
    if let Some(at) = t.find(": cannot open shared object file") {
        let library = t[..at]
            .rsplit(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            .next()
            .unwrap_or_default();
        return Some(Cause::new(
            OutcomeKind::ImportError,
            format!("cannot open shared library {library}"),
            hints::shared_library(library),
        ));
    }
    if let Some(version) = between(t, "version `", "' not found") {
        return Some(Cause::new(
            OutcomeKind::ImportError,
            format!("{version} not found: {}", line("' not found")),
            hints::library_version(version),
        ));
    }
    if let (Some(symbol), Some(package)) = (
        between(t, "cannot import name '", "'"),
        between(t, "' from '", "'"),
    ) {
        return Some(Cause::new(
            OutcomeKind::DependencyVersion,
            format!("`{package}` has no `{symbol}`"),
            hints::dependency_version(package),
        ));
    }
    if has("is not compatible with the current PyTorch installation") {
        return Some(Cause::new(
            OutcomeKind::UnsupportedArch,
            line("is not compatible with the current PyTorch installation"),
            hints::ARCH,
        ));
    }
    None
}

/// `cuda runtime error (35)`, `CUDA error 209`, `CUDA error: … (222)`.
fn numbered_cuda_error(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    for prefix in ["cuda runtime error (", "cuda error ", "cuda driver error "] {
        if let Some(at) = lower.find(prefix) {
            let digits: String = lower[at + prefix.len()..]
                .chars()
                .skip_while(|c| *c == '(')
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(code) = digits.parse() {
                return Some(code);
            }
        }
    }
    None
}

pub(super) fn missing_module(name: &str, variant_module: Option<&str>) -> Cause {
    let own = variant_module.is_some_and(|m| name == m || name.starts_with(&format!("{m}.")));
    if own {
        return Cause::new(
            OutcomeKind::ImportError,
            format!("the variant's own module `{name}` is missing"),
            hints::INCOMPLETE_VARIANT,
        );
    }
    let top = name.split('.').next().unwrap_or(name);
    Cause::new(
        OutcomeKind::MissingDependency,
        format!("missing Python module `{name}`"),
        hints::missing_module(top),
    )
}

/// The trimmed line of `text` that contains `needle`.
pub(super) fn line_with(text: &str, needle: &str) -> String {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or(needle)
        .trim()
        .to_string()
}

/// The text between the first `start` and the next `end`.
pub(super) fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(&text[from..from + len]).filter(|s| !s.is_empty() && !s.contains('\n'))
}

/// The whitespace-delimited word after `start`.
fn after_word<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    text[from..]
        .split(|c: char| c.is_whitespace() || c == '\'' || c == '"')
        .next()
        .filter(|s| !s.is_empty())
}
