//! The Python signature table: an exception the driver reported, read by
//! its class, its attributes (CUDA error code or name, the missing module,
//! the missing file) and then its message — never by what else the process
//! printed, except a failed nvcc's own diagnostics.

use super::stderr::decisive_lines;
use super::text::{Own, between, from_text, missing_module};
use super::{Cause, OutcomeKind, Phase, cuda, hints};
use crate::protocol::ExceptionInfo;

/// The cause of an exception that ended the work in `phase`.
/// `own` names the variant itself; `stderr` is read for nvcc's
/// diagnostics only.
pub(super) fn from_exception(e: &ExceptionInfo, phase: Phase, own: Own<'_>, stderr: &str) -> Cause {
    if let Some(cause) = structured(e, phase, own, stderr) {
        return cause;
    }
    let texts =
        std::iter::once(e.message.as_str()).chain(e.causes.iter().map(|c| c.message.as_str()));
    for text in texts {
        if let Some(cause) = from_text(text, phase) {
            return cause;
        }
    }
    for cause in &e.causes {
        if let Some(found) = structured(cause, phase, own, stderr) {
            return found;
        }
    }
    let what = format!("{}: {}", e.qualified(), e.message);
    if phase <= Phase::Import || e.is_a("ImportError") {
        Cause::new(
            OutcomeKind::ImportError,
            format!("import failed: {what}"),
            hints::IMPORT,
        )
    } else {
        Cause::new(
            OutcomeKind::Exited,
            format!("{} raised {what}", phase.as_str()),
            hints::RAISED,
        )
    }
}

/// Causes read from the exception's class and attributes, not its text.
fn structured(e: &ExceptionInfo, phase: Phase, own: Own<'_>, stderr: &str) -> Option<Cause> {
    if let Some(code) = e.error_code
        && let Some(cause) = cuda::code_cause(code, e.error_name.as_deref(), phase)
    {
        return Some(cause);
    }
    if let Some(cause) = e
        .error_name
        .as_deref()
        .and_then(|n| cuda::from_name(n, phase))
    {
        return Some(cause);
    }
    if e.is_a("OutOfMemoryError") {
        let mut cause = Cause::new(
            OutcomeKind::OutOfMemory,
            format!("{}: {}", e.qualified(), first_line(&e.message)),
            hints::OUT_OF_MEMORY,
        );
        cause.transient = true;
        return Some(cause);
    }
    if e.is_a("ModuleNotFoundError")
        && let Some(name) = e.name.as_deref()
    {
        return Some(missing_module(name, own, e.provider.as_ref()));
    }
    if e.is_a("OSError") && e.filename.as_deref().is_some_and(is_nvcc) {
        return Some(Cause::new(
            OutcomeKind::NvccMissing,
            "nvcc not found",
            hints::NVCC_MISSING,
        ));
    }
    if e.is_a("CalledProcessError") && e.command.as_deref().is_some_and(is_nvcc) {
        return Some(nvcc_failed(e, phase, stderr));
    }
    let jit_module = ["triton", "cutlass", "cuda.bindings", "cupy", "nvrtc"]
        .iter()
        .any(|m| e.module == *m || e.module.starts_with(&format!("{m}.")));
    let jit_type = [
        "CompilationError",
        "OutOfResources",
        "PTXASError",
        "DSLBaseError",
        "CompileException",
        "NVRTCError",
    ]
    .iter()
    .any(|t| e.is_a(t));
    if jit_module && jit_type {
        let said = triton_located(&e.message).unwrap_or_else(|| first_line(&e.message).to_owned());
        return Some(Cause::new(
            OutcomeKind::JitCompileError,
            format!("{}: {said}", e.qualified()),
            hints::JIT,
        ));
    }
    if e.is_a("AttributeError")
        && let Some(module) = own.module
        && let Some(symbol) = between(
            &e.message,
            &format!("module '{module}' has no attribute '"),
            "'",
        )
    {
        return Some(Cause::new(
            OutcomeKind::MissingSymbol,
            format!("the kernel has no attribute `{symbol}`"),
            hints::MISSING_SYMBOL,
        ));
    }
    None
}

/// nvcc exited nonzero: its diagnostics are in the exception when the
/// kernel captured them, else in the error lines of stderr, where nvcc
/// wrote them itself.
fn nvcc_failed(e: &ExceptionInfo, phase: Phase, stderr: &str) -> Cause {
    let said = match &e.output {
        Some(output) => decisive_lines(output),
        None => decisive_lines(stderr),
    };
    let said = said.join("\n");
    from_text(&said, phase).unwrap_or_else(|| {
        let error = said
            .lines()
            .next()
            .map_or_else(|| first_line(&e.message).to_owned(), str::to_owned);
        Cause::new(
            OutcomeKind::JitCompileError,
            format!("nvcc failed: {error}"),
            hints::JIT,
        )
    })
}

fn is_nvcc(path: &str) -> bool {
    path.rsplit('/').next() == Some("nvcc")
}

/// Triton's compile errors put the location first and the reason last
/// (`at 2:14:`, the kernel's source up to that line, a caret line, then the
/// reason), so their first line alone says nothing: the reason, with the
/// location and the offending source line.
fn triton_located(message: &str) -> Option<String> {
    let mut lines = message.lines();
    let at = lines.next()?.trim();
    let location = at.strip_prefix("at ")?.strip_suffix(':')?;
    let rest: Vec<&str> = lines.collect();
    let caret = rest
        .iter()
        .position(|l| !l.trim().is_empty() && l.trim().chars().all(|c| c == '^'))?;
    let reason: Vec<&str> = rest[caret + 1..]
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if reason.is_empty() {
        return None;
    }
    let source = caret
        .checked_sub(1)
        .map(|i| rest[i].trim())
        .filter(|l| !l.is_empty());
    Some(match source {
        Some(source) => format!("{} (at {location}: `{source}`)", reason.join(" ")),
        None => format!("{} (at {location})", reason.join(" ")),
    })
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}
