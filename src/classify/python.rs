//! The Python signature table: an exception the driver reported, read by
//! its class, its attributes (CUDA error code or name, the missing module,
//! the missing file) and then its message — never by what else the process
//! printed, except a failed nvcc's own diagnostics.

use super::machine::Machine;
use super::stderr::decisive_lines;
use super::text::{Own, between, from_text, from_tool_text, missing_module, missing_name};
use super::{Cause, OutcomeKind, Phase, cuda, guard, hints, nvcc};
use crate::protocol::{ExceptionInfo, Report};

/// What an exception is read against: the variant's own names, the
/// child's stderr (for nvcc's diagnostics only), the child's other reports
/// (the device state after a failed import) and the machine's facts.
pub(super) struct Context<'a> {
    pub own: Own<'a>,
    pub stderr: &'a str,
    pub report: &'a Report,
    pub machine: &'a Machine,
}

/// The cause of an exception that ended the work in `phase`.
pub(super) fn from_exception(e: &ExceptionInfo, phase: Phase, cx: &Context<'_>) -> Cause {
    if let Some(cause) = structured(e, phase, cx) {
        return cause;
    }
    let texts =
        std::iter::once(e.message.as_str()).chain(e.causes.iter().map(|c| c.message.as_str()));
    for text in texts {
        if let Some(cause) = from_text(text, phase, cx.machine) {
            return cause;
        }
    }
    for cause in &e.causes {
        if let Some(found) = structured(cause, phase, cx) {
            return found;
        }
    }
    if let Some(cause) = guard::import_guard(e, phase, cx.report, cx.machine)
        .or_else(|| guard::unsupported_here(e, cx.report, cx.machine))
    {
        return cause;
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
fn structured(e: &ExceptionInfo, phase: Phase, cx: &Context<'_>) -> Option<Cause> {
    let own = cx.own;
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
    if e.is_a("ImportError")
        && !e.is_a("ModuleNotFoundError")
        && let Some(cause) = name_not_found(e, own)
    {
        return Some(cause);
    }
    if e.is_a("OSError") && e.filename.as_deref().is_some_and(is_nvcc) {
        return Some(nvcc::missing("nvcc not found", cx.machine));
    }
    if let Some(cause) = nvcc::lookup_failed(e, cx.machine) {
        return Some(cause);
    }
    if e.is_a("CalledProcessError") && e.command.as_deref().is_some_and(is_nvcc) {
        return Some(nvcc_failed(e, phase, cx));
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
    if e.is_a("AttributeError") {
        return missing_attribute(e, own);
    }
    None
}

/// An attribute missing from a module: the variant's own (the symbol the
/// caller needs, named by its dotted path below the kernel:
/// `utils.per_token_cast_to_fp8`), or an installed dependency's (its
/// distribution and version named). The module is `AttributeError.obj`
/// as the child reported it, else the one the message names.
fn missing_attribute(e: &ExceptionInfo, own: Own<'_>) -> Option<Cause> {
    let owner = e
        .owner
        .as_deref()
        .or_else(|| between(&e.message, "module '", "' has no attribute '"))?;
    let attribute = e
        .name
        .as_deref()
        .or_else(|| between(&e.message, "has no attribute '", "'"))?;
    let below = own.module.and_then(|module| {
        if owner == module {
            Some("")
        } else {
            owner.strip_prefix(module).and_then(|r| r.strip_prefix('.'))
        }
    });
    if let Some(below) = below {
        let mut dotted = if below.is_empty() {
            attribute.to_owned()
        } else {
            format!("{below}.{attribute}")
        };
        if let Some(rest) = e
            .raised_in()
            .and_then(|f| chain_after(&f.source, attribute))
        {
            dotted.push_str(&rest);
        }
        return Some(Cause::new(
            OutcomeKind::MissingSymbol,
            format!("the kernel has no attribute `{dotted}`"),
            hints::MISSING_SYMBOL,
        ));
    }
    let provider = e.provider.as_ref().filter(|p| p.installed)?;
    Some(missing_name(owner, attribute, provider))
}

/// The attribute chain that follows `name` in a source line, reached as an
/// attribute (`kernel.utils.per_token_cast_to_fp8(x)`) or in a dotted
/// string (`attrgetter("utils.per_token_cast_to_fp8")`): after `utils`,
/// `.per_token_cast_to_fp8` — what the caller was reaching for below a
/// missing module attribute.
fn chain_after(source: &str, name: &str) -> Option<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let at = source.match_indices(name).find_map(|(at, _)| {
        let before = source[..at].chars().next_back();
        let end = at + name.len();
        let after = source[end..].chars().next();
        (matches!(before, Some('.' | '"' | '\'')) && after == Some('.')).then_some(end)
    })?;
    let rest: String = source[at..]
        .chars()
        .take_while(|c| ident(*c) || *c == '.')
        .collect();
    let rest = rest.trim_end_matches('.');
    (rest.len() > 1).then(|| rest.to_owned())
}

/// `from P import X` where `P` has no `X`: `ImportError.name` is `P`, and
/// the child reported what provides it. The variant's own module lacking
/// a name is an incomplete variant; an installed dependency lacking it is
/// another version than the kernel needs.
fn name_not_found(e: &ExceptionInfo, own: Own<'_>) -> Option<Cause> {
    let module = e.name.as_deref()?;
    let symbol = e
        .name_from
        .as_deref()
        .or_else(|| between(&e.message, "cannot import name '", "'"))?;
    let under = |m: &str| module == m || module.starts_with(&format!("{m}."));
    if own.module.is_some_and(under) {
        return Some(Cause::new(
            OutcomeKind::ImportError,
            format!("the variant's own module `{module}` has no `{symbol}`"),
            hints::INCOMPLETE_VARIANT,
        ));
    }
    let provider = e.provider.as_ref().filter(|p| p.installed)?;
    Some(missing_name(module, symbol, provider))
}

/// nvcc exited nonzero: its diagnostics are in the exception when the
/// kernel captured them, else in the error lines of stderr, where nvcc
/// wrote them itself.
fn nvcc_failed(e: &ExceptionInfo, phase: Phase, cx: &Context<'_>) -> Cause {
    let said = match &e.output {
        Some(output) => decisive_lines(output),
        None => decisive_lines(cx.stderr),
    };
    let said = said.join("\n");
    from_tool_text(&said, phase, cx.machine, e.command.as_deref()).unwrap_or_else(|| {
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
