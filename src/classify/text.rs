//! Failure signatures in free text: an exception's message, a compiler's
//! output, or the error lines of a child's stderr (REFERENCE.md §1 and §6).

use super::machine::Machine;
use super::{Cause, OutcomeKind, Phase, cuda, hints, nvcc, strip_ansi};
use crate::protocol::Provider;

/// Causes recognised in free text: an exception message or stderr.
pub(super) fn from_text(text: &str, phase: Phase, machine: &Machine) -> Option<Cause> {
    from_tool_text(text, phase, machine, None)
}

/// [`from_text`] for the output of a tool the kernel ran (`tool`: the
/// command, when known: which nvcc refused an architecture).
pub(super) fn from_tool_text(
    text: &str,
    phase: Phase,
    machine: &Machine,
    tool: Option<&str>,
) -> Option<Cause> {
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
        ("CUDA-capable device(s) is/are busy or unavailable", 46),
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
        "No CUDA GPUs are available",
        "CUDA driver initialization failed",
        // Triton found no backend whose device is usable.
        "0 active drivers",
    ] {
        if has_word(t, needle) {
            return Some(Cause::new(
                OutcomeKind::NoDevice,
                line(needle),
                hints::NO_DEVICE,
            ));
        }
    }
    for needle in [
        "Unsupported gpu architecture",
        "is not defined for option 'gpu-name'",
    ] {
        if has(needle) {
            return Some(nvcc::refused_arch(&line(needle), machine, tool));
        }
    }
    if let Some(l) = nvcc::lookup_assertion(t) {
        return Some(nvcc::missing(l, machine));
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
            return Some(nvcc::missing(line(needle), machine));
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
        "NVCC compilation failed",
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
        return Some(missing_module(name, Own::default(), None));
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
            hints::dependency_version(package, None),
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

/// What the child said the variant itself is called: the module id it was
/// imported as, and its kernel's package name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Own<'a> {
    pub module: Option<&'a str>,
    pub package: Option<&'a str>,
}

/// A module that could not be imported: part of the variant itself, the
/// variant's own package imported by absolute name, a part that an
/// installed distribution lacks, or a missing distribution (named as pip
/// knows it when the child or the table knows it).
pub(super) fn missing_module(name: &str, own: Own<'_>, provider: Option<&Provider>) -> Cause {
    let under = |m: &str| name == m || name.starts_with(&format!("{m}."));
    if own.module.is_some_and(under) {
        return Cause::new(
            OutcomeKind::ImportError,
            format!("the variant's own module `{name}` is missing"),
            hints::INCOMPLETE_VARIANT,
        );
    }
    if own.package.is_some_and(under) {
        return Cause::new(
            OutcomeKind::ImportError,
            format!(
                "the variant imports its own package by absolute name: no module named `{name}`"
            ),
            hints::OWN_IMPORT,
        );
    }
    let top = provider.map_or_else(|| name.split('.').next().unwrap_or(name), |p| &p.top);
    let distribution = provider.and_then(|p| p.distribution.as_deref());
    if let Some(p) = provider.filter(|p| p.installed && p.top != name) {
        let dist = distribution.unwrap_or(top);
        let installed = match &p.version {
            Some(version) => format!("`{dist}` {version} is installed"),
            None => format!("`{top}` is installed"),
        };
        return Cause::new(
            OutcomeKind::DependencyVersion,
            format!("{installed} but has no module `{name}`"),
            hints::dependency_version(dist, p.version.as_deref()),
        );
    }
    Cause::new(
        OutcomeKind::MissingDependency,
        format!("missing Python module `{name}`"),
        hints::missing_module(top, distribution),
    )
}

/// A name that `from P import X` (or `P.X`) did not find in the installed
/// distribution providing `P`: the kernel needs another version of it.
pub(super) fn missing_name(module: &str, symbol: &str, p: &Provider) -> Cause {
    let Some(dist) = p.distribution.as_deref() else {
        // No distribution provides it (the standard library, a bare
        // folder on the path): nothing to name but the module.
        return Cause::new(
            OutcomeKind::DependencyVersion,
            format!("`{module}` has no `{symbol}`"),
            hints::dependency_version(&p.top, None),
        );
    };
    let installed = match &p.version {
        Some(version) => format!("`{dist}` {version} is installed"),
        None => format!("`{dist}` is installed"),
    };
    let place = if module == p.top && dist == module {
        String::new()
    } else {
        format!(" (in `{module}`)")
    };
    Cause::new(
        OutcomeKind::DependencyVersion,
        format!("{installed} but has no `{symbol}`{place}"),
        hints::dependency_version(dist, p.version.as_deref()),
    )
}

/// Whether `needle` occurs in `text` not glued to a word or number before
/// it (`0 active drivers`, not `10 active drivers`).
fn has_word(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    })
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
