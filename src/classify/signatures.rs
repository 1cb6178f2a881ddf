//! Failure signatures: structured exceptions first (type, CUDA error code or
//! name, missing module), then message text (REFERENCE.md §1 and §6).

use super::{OutcomeKind, Phase};
use crate::probe::channel::ExceptionInfo;

/// A recognised cause: its kind, a message naming what failed, and a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cause {
    pub kind: OutcomeKind,
    pub message: String,
    pub hint: String,
}

impl Cause {
    pub fn new(kind: OutcomeKind, message: impl Into<String>, hint: impl Into<String>) -> Cause {
        Cause {
            kind,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

const HINT_ARCH: &str = "no SASS for this GPU and no PTX it can JIT: use a variant built for this compute capability (see `preflight inspect`), or rebuild with this arch or +PTX";
const HINT_PTX: &str = "the variant's PTX is newer than this driver can JIT: upgrade the NVIDIA driver, or use a variant built with an older CUDA toolkit";
const HINT_DRIVER: &str =
    "upgrade the NVIDIA driver, or use a variant built for an older CUDA version";
const HINT_NO_DEVICE: &str = "no usable GPU here: check nvidia-smi, the driver, CUDA_VISIBLE_DEVICES and a CUDA build of torch, or use a CPU variant";
const HINT_NVCC: &str = "this kernel compiles at run time: install the CUDA toolkit (or the nvidia-cuda-nvcc wheel) and put nvcc on PATH or set CUDA_HOME";
const HINT_NVCC_OLD: &str = "this kernel compiles at run time with a newer nvcc: install a newer CUDA toolkit and point CUDA_HOME at it";
const HINT_JIT: &str = "run-time compilation failed here: use the compiler and dependency versions the kernel supports (triton, nvidia-cutlass-dsl, CUDA toolkit)";
const HINT_OOM: &str =
    "free device memory (other processes, CUDA_VISIBLE_DEVICES) or use a smaller smoke workload";
const HINT_SYMBOL: &str =
    "the kernel lacks what is called: check the kernel version the caller expects";

/// CUDA runtime / driver error codes that name a cause by themselves.
fn from_cuda_code(code: i64) -> Option<(OutcomeKind, &'static str, &'static str)> {
    Some(match code {
        209 => (
            OutcomeKind::UnsupportedArch,
            "no kernel image is available for execution on the device",
            HINT_ARCH,
        ),
        222 => (
            OutcomeKind::PtxTooNew,
            "the provided PTX was compiled with an unsupported toolchain",
            HINT_PTX,
        ),
        35 => (
            OutcomeKind::DriverTooOld,
            "CUDA driver version is insufficient for CUDA runtime version",
            HINT_DRIVER,
        ),
        100 => (
            OutcomeKind::NoDevice,
            "no CUDA-capable device is detected",
            HINT_NO_DEVICE,
        ),
        34 => (
            OutcomeKind::NoDevice,
            "CUDA driver is a stub library",
            HINT_NO_DEVICE,
        ),
        2 => (OutcomeKind::OutOfMemory, "out of memory", HINT_OOM),
        218 => (
            OutcomeKind::JitCompileError,
            "a PTX JIT compilation failed",
            HINT_JIT,
        ),
        221 => (
            OutcomeKind::JitCompileError,
            "PTX JIT compiler library not found",
            HINT_JIT,
        ),
        500 => (
            OutcomeKind::MissingSymbol,
            "named symbol not found",
            HINT_SYMBOL,
        ),
        _ => return None,
    })
}

/// Names of CUDA errors (driver `CUDA_ERROR_*`, runtime `cudaError*`) and the
/// code they stand for.
const CUDA_NAMES: &[(&str, i64)] = &[
    ("CUDA_ERROR_NO_BINARY_FOR_GPU", 209),
    ("cudaErrorNoKernelImageForDevice", 209),
    ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 222),
    ("cudaErrorUnsupportedPtxVersion", 222),
    ("cudaErrorInsufficientDriver", 35),
    ("CUDA_ERROR_NO_DEVICE", 100),
    ("cudaErrorNoDevice", 100),
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
];

fn from_cuda_name(text: &str) -> Option<Cause> {
    CUDA_NAMES
        .iter()
        .find(|(name, _)| contains_word(text, name))
        .and_then(|&(name, code)| code_cause(code, Some(name)))
}

fn code_cause(code: i64, name: Option<&str>) -> Option<Cause> {
    let (kind, text, hint) = from_cuda_code(code)?;
    let label = name.map_or_else(|| format!("CUDA error {code}"), |n| format!("{n} ({code})"));
    Some(Cause::new(kind, format!("{label}: {text}"), hint))
}

/// Classify an exception the child reported.
pub(super) fn from_exception(
    e: &ExceptionInfo,
    phase: Phase,
    variant_module: Option<&str>,
    stderr: &str,
) -> Cause {
    if let Some(cause) = structured(e, variant_module, stderr) {
        return cause;
    }
    let texts =
        std::iter::once(e.message.as_str()).chain(e.causes.iter().map(|c| c.message.as_str()));
    for text in texts {
        if let Some(cause) = from_text(text) {
            return cause;
        }
    }
    for cause in &e.causes {
        if let Some(found) = structured(cause, variant_module, stderr) {
            return found;
        }
    }
    if let Some(cause) = from_text(stderr) {
        return cause;
    }
    let what = format!("{}: {}", e.qualified(), e.message);
    if phase <= Phase::Import || e.is_a("ImportError") {
        Cause::new(
            OutcomeKind::ImportError,
            format!("import failed: {what}"),
            "the variant cannot be imported here; see the traceback in the stderr tail",
        )
    } else {
        Cause::new(
            OutcomeKind::Exited,
            format!("{} raised {what}", phase.as_str()),
            "the kernel raised while running its smoke workload; see the traceback in the stderr tail",
        )
    }
}

/// Causes read from the exception's class and attributes, not its text.
fn structured(e: &ExceptionInfo, variant_module: Option<&str>, stderr: &str) -> Option<Cause> {
    if e.module == "preflight" && e.type_name == "MetadataError" {
        return Some(Cause::new(
            OutcomeKind::ImportError,
            e.message.clone(),
            "the hub loader refuses this variant too: fix or re-download its metadata.json",
        ));
    }
    if let Some(code) = e.error_code
        && let Some(cause) = code_cause(code, e.error_name.as_deref())
    {
        return Some(cause);
    }
    if let Some(cause) = e.error_name.as_deref().and_then(from_cuda_name) {
        return Some(cause);
    }
    if e.is_a("OutOfMemoryError") {
        return Some(Cause::new(
            OutcomeKind::OutOfMemory,
            format!("{}: {}", e.qualified(), first_line(&e.message)),
            HINT_OOM,
        ));
    }
    if e.is_a("ModuleNotFoundError")
        && let Some(name) = e.name.as_deref()
    {
        return Some(missing_module(name, variant_module));
    }
    if e.is_a("OSError") && e.filename.as_deref().is_some_and(is_nvcc) {
        return Some(nvcc_missing());
    }
    if e.is_a("CalledProcessError") && e.command.as_deref().is_some_and(is_nvcc) {
        return Some(from_text(stderr).unwrap_or_else(|| {
            let error = stderr
                .lines()
                .find(|l| l.contains("error"))
                .map_or_else(|| first_line(&e.message), str::trim);
            Cause::new(
                OutcomeKind::JitCompileError,
                format!("nvcc failed: {error}"),
                HINT_JIT,
            )
        }));
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
        return Some(Cause::new(
            OutcomeKind::JitCompileError,
            format!("{}: {}", e.qualified(), first_line(&e.message)),
            HINT_JIT,
        ));
    }
    if e.is_a("AttributeError")
        && let Some(module) = variant_module
        && let Some(symbol) = between(
            &e.message,
            &format!("module '{module}' has no attribute '"),
            "'",
        )
    {
        return Some(Cause::new(
            OutcomeKind::MissingSymbol,
            format!("the kernel has no attribute `{symbol}`"),
            HINT_SYMBOL,
        ));
    }
    None
}

fn missing_module(name: &str, variant_module: Option<&str>) -> Cause {
    let own = variant_module.is_some_and(|m| name == m || name.starts_with(&format!("{m}.")));
    if own {
        return Cause::new(
            OutcomeKind::ImportError,
            format!("the variant's own module `{name}` is missing"),
            "the variant directory is incomplete: re-download or rebuild it",
        );
    }
    let top = name.split('.').next().unwrap_or(name);
    Cause::new(
        OutcomeKind::MissingDependency,
        format!("missing Python module `{name}`"),
        format!(
            "install the package that provides `{top}` (often: pip install {top}) into the probed Python environment"
        ),
    )
}

fn nvcc_missing() -> Cause {
    Cause::new(OutcomeKind::NvccMissing, "nvcc not found", HINT_NVCC)
}

fn is_nvcc(path: &str) -> bool {
    path.rsplit('/').next() == Some("nvcc")
}

/// Causes recognised in free text: an exception message or stderr.
pub(super) fn from_text(text: &str) -> Option<Cause> {
    let text = super::strip_ansi(text);
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
        return Some(Cause::new(OutcomeKind::OutOfMemory, line(needle), HINT_OOM));
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
            let (kind, _, hint) = from_cuda_code(code)?;
            return Some(Cause::new(kind, line(needle), hint));
        }
    }
    if let Some(cause) = from_cuda_name(t) {
        return Some(cause);
    }
    if let Some(code) = numbered_cuda_error(t)
        && let Some(cause) = code_cause(code, None)
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
                HINT_NO_DEVICE,
            ));
        }
    }
    if has("Unsupported gpu architecture") {
        return Some(Cause::new(
            OutcomeKind::NvccTooOld,
            line("Unsupported gpu architecture"),
            HINT_NVCC_OLD,
        ));
    }
    if let Some(l) = t.lines().find(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("nvcc") && (l.contains("too old") || l.contains(">=") || l.contains("at least"))
    }) {
        return Some(Cause::new(OutcomeKind::NvccTooOld, l.trim(), HINT_NVCC_OLD));
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
                HINT_NVCC,
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
                HINT_JIT,
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
            "the variant was built against another ABI (torch, CUDA or C++ library version): use the variant built for this environment",
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
            format!(
                "install the package that provides {library}, or add its directory to LD_LIBRARY_PATH"
            ),
        ));
    }
    if let Some(version) = between(t, "version `", "' not found") {
        return Some(Cause::new(
            OutcomeKind::ImportError,
            format!("{version} not found: {}", line("' not found")),
            format!(
                "the variant needs {version}, newer than this system's library: use a variant built for an older toolchain, or a newer OS image"
            ),
        ));
    }
    if let (Some(symbol), Some(package)) = (
        between(t, "cannot import name '", "'"),
        between(t, "' from '", "'"),
    ) {
        return Some(Cause::new(
            OutcomeKind::DependencyVersion,
            format!("`{package}` has no `{symbol}`"),
            format!(
                "the installed `{package}` is a version this kernel does not support: install the version it was built for"
            ),
        ));
    }
    if has("is not compatible with the current PyTorch installation") {
        return Some(Cause::new(
            OutcomeKind::UnsupportedArch,
            line("is not compatible with the current PyTorch installation"),
            HINT_ARCH,
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

pub(super) fn crashed(signal: &str, phase: Phase) -> Cause {
    Cause::new(
        OutcomeKind::Crashed,
        format!("killed by {signal} in phase {}", phase.as_str()),
        "the process died without a Python error: run the variant alone (CUDA_LAUNCH_BLOCKING=1, a debugger) and report it to the kernel's authors",
    )
}

pub(super) fn exited(code: i32, last_line: Option<&str>) -> Cause {
    let message = match last_line {
        Some(line) => format!("exited with code {code}: {line}"),
        None => format!("exited with code {code} without a message"),
    };
    Cause::new(
        OutcomeKind::Exited,
        message,
        "the process exited without a Python error; see the stderr tail",
    )
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The trimmed line of `text` that contains `needle`.
fn line_with(text: &str, needle: &str) -> String {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or(needle)
        .trim()
        .to_string()
}

/// The text between the first `start` and the next `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
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

/// `name` as a whole word (not a prefix of a longer identifier).
fn contains_word(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let next = text[at + name.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}
