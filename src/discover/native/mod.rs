//! Native module targets: a directory with a `preflight.toml` that names
//! CUDA module files (cubin, PTX, fatbin, or `.cu` source for NVRTC) and
//! smoke launches of their kernels, for programs that load modules through
//! the driver API (cudarc, candle). Discovery reads and validates the file;
//! each module then becomes one job for the cuda executor. The format is
//! documented in `docs/cuda.md`.

pub mod spec;
#[cfg(test)]
mod tests;

pub use spec::{Arg, ElemType, Launch, ModuleKind, ModuleSpec, Tolerance};

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The file that makes a directory a native target.
pub const MANIFEST: &str = "preflight.toml";

/// Default untimed launches before timing.
pub const DEFAULT_WARMUP: u32 = 3;
/// Default timed launches.
pub const DEFAULT_ITERATIONS: u32 = 10;

/// Whether `dir` is a native target (holds a `preflight.toml`).
pub fn is_native_target(dir: &Path) -> bool {
    crate::seen::is_file(&dir.join(MANIFEST))
}

/// A `preflight.toml` that cannot be used: the file, where in it, and why.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The manifest.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not valid TOML, or does not have the expected shape.
    #[error("{}: {message}", Location(path, *line, *column))]
    Syntax {
        /// The manifest.
        path: PathBuf,
        /// 1-based line of the fault, when the parser knows it.
        line: Option<usize>,
        /// 1-based column of the fault, when the parser knows it.
        column: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// A value is out of place: `at` names it (`module[0].launch[1].args[2]`).
    #[error("{}: {at}: {message}", Location(path, *line, None))]
    Invalid {
        /// The manifest.
        path: PathBuf,
        /// 1-based line of the offending value, when it has one.
        line: Option<usize>,
        /// The key path of the offending value.
        at: String,
        /// What was expected.
        message: String,
    },
}

/// `path:line:column`, as compilers write it, with what is known.
struct Location<'a>(&'a Path, Option<usize>, Option<usize>);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.display())?;
        if let Some(line) = self.1 {
            write!(f, ":{line}")?;
            if let Some(column) = self.2 {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// A parsed, validated native target.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeTarget {
    /// The directory.
    pub dir: PathBuf,
    /// Its modules, in file order.
    pub modules: Vec<NativeModule>,
}

/// One module and the launches to run from it.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeModule {
    /// The module as the cuda executor takes it (path inside the target).
    pub spec: ModuleSpec,
    /// Its smoke launches.
    pub launches: Vec<Launch>,
}

impl NativeModule {
    /// The module's file name, as reports show it.
    pub fn name(&self) -> String {
        self.spec.name()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    module: Vec<Spanned<RawModule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    file: Spanned<PathBuf>,
    kind: Option<ModuleKind>,
    #[serde(default)]
    nvrtc_options: Vec<String>,
    target: Option<Spanned<String>>,
    #[serde(default)]
    launch: Vec<Spanned<RawLaunch>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    function: Spanned<String>,
    grid: Spanned<Dims>,
    block: Spanned<Dims>,
    #[serde(default)]
    shared_mem_bytes: u32,
    #[serde(default)]
    args: Vec<Spanned<RawArg>>,
    warmup: Option<u32>,
    iterations: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Dims {
    One(u32),
    Many(Vec<u32>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Values {
    One(f64),
    Many(Vec<f64>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArg {
    scalar: Option<ElemType>,
    buffer: Option<ElemType>,
    value: Option<f64>,
    len: Option<usize>,
    init: Option<Values>,
    expect: Option<Values>,
    atol: Option<f64>,
    rtol: Option<f64>,
}

/// Largest buffer a smoke launch may ask for, in elements.
const MAX_ELEMENTS: usize = 1 << 26;

/// Reads and validates `dir/preflight.toml`; module paths are resolved
/// against `dir` and must exist.
pub fn load(dir: &Path) -> Result<NativeTarget, NativeError> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(|source| NativeError::Read {
        path: path.clone(),
        source,
    })?;
    parse(dir, &path, &text)
}

/// A value that is out of place: its key path, the byte offset where it
/// starts (for the line), and what was expected.
struct Fault {
    at: String,
    offset: Option<usize>,
    message: String,
}

impl Fault {
    fn new(at: impl Into<String>, offset: usize, message: impl Into<String>) -> Fault {
        Fault {
            at: at.into(),
            offset: Some(offset),
            message: message.into(),
        }
    }
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parses manifest `text` (read from `path`) of the target in `dir`.
pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<NativeTarget, NativeError> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| {
        let start = e.span().map(|s| s.start);
        let column = start.map(|s| {
            let line_start = text[..s.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
            text[line_start..s.min(text.len())].chars().count() + 1
        });
        NativeError::Syntax {
            path: path.to_path_buf(),
            line: start.map(|s| line_of(text, s)),
            column,
            message: e.message().split_whitespace().collect::<Vec<_>>().join(" "),
        }
    })?;
    modules(dir, manifest).map_err(|fault| NativeError::Invalid {
        path: path.to_path_buf(),
        line: fault.offset.map(|o| line_of(text, o)),
        at: fault.at,
        message: fault.message,
    })
}

fn modules(dir: &Path, manifest: Manifest) -> Result<NativeTarget, Fault> {
    if manifest.module.is_empty() {
        return Err(Fault {
            at: "module".into(),
            offset: None,
            message: "no [[module]] tables: name at least one module file".into(),
        });
    }
    let mut modules = Vec::new();
    for (m, raw) in manifest.module.into_iter().enumerate() {
        let at = format!("module[{m}]");
        let module_start = raw.span().start;
        let raw = raw.into_inner();
        let file_start = raw.file.span().start;
        let relative = raw.file.into_inner();
        let file = dir.join(&relative);
        let kind = match raw.kind {
            Some(kind) => kind,
            None => relative
                .extension()
                .and_then(|e| e.to_str())
                .and_then(ModuleKind::from_extension)
                .ok_or_else(|| {
                    Fault::new(
                        format!("{at}.file"),
                        file_start,
                        format!(
                            "cannot tell the kind of {:?} from its extension: use .cubin, .ptx, .fatbin or .cu, or set kind",
                            relative.display().to_string()
                        ),
                    )
                })?,
        };
        if !file.is_file() {
            return Err(Fault::new(
                format!("{at}.file"),
                file_start,
                format!("{} does not exist", file.display()),
            ));
        }
        if kind != ModuleKind::Cuda && (raw.target.is_some() || !raw.nvrtc_options.is_empty()) {
            return Err(Fault::new(
                at,
                module_start,
                "target and nvrtc_options apply to CUDA C source (.cu) only",
            ));
        }
        let target = match raw.target {
            Some(t) => {
                let start = t.span().start;
                let t = t.into_inner();
                if !(t.starts_with("sm_") || t.starts_with("compute_")) {
                    return Err(Fault::new(
                        format!("{at}.target"),
                        start,
                        format!("{t:?}: expected sm_XY[a|f] or compute_XY[a|f]"),
                    ));
                }
                Some(t)
            }
            None => None,
        };
        let launches = raw
            .launch
            .into_iter()
            .enumerate()
            .map(|(l, launch)| validate_launch(&format!("{at}.launch[{l}]"), launch))
            .collect::<Result<Vec<_>, Fault>>()?;
        modules.push(NativeModule {
            spec: ModuleSpec {
                path: file,
                kind,
                nvrtc_options: raw.nvrtc_options,
                target,
            },
            launches,
        });
    }
    Ok(NativeTarget {
        dir: dir.to_path_buf(),
        modules,
    })
}

fn dims(at: &str, d: Spanned<Dims>) -> Result<[u32; 3], Fault> {
    let start = d.span().start;
    let v = match d.into_inner() {
        Dims::One(x) => vec![x],
        Dims::Many(v) => v,
    };
    if v.is_empty() || v.len() > 3 || v.contains(&0) {
        return Err(Fault::new(
            at,
            start,
            format!("{v:?}: expected 1 to 3 positive integers (x, y, z)"),
        ));
    }
    Ok([
        v[0],
        v.get(1).copied().unwrap_or(1),
        v.get(2).copied().unwrap_or(1),
    ])
}

fn validate_launch(at: &str, raw: Spanned<RawLaunch>) -> Result<Launch, Fault> {
    let raw = raw.into_inner();
    if raw.function.get_ref().is_empty() {
        return Err(Fault::new(
            format!("{at}.function"),
            raw.function.span().start,
            "must not be empty",
        ));
    }
    let block_start = raw.block.span().start;
    let grid = dims(&format!("{at}.grid"), raw.grid)?;
    let block = dims(&format!("{at}.block"), raw.block)?;
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads > 1024 {
        return Err(Fault::new(
            format!("{at}.block"),
            block_start,
            format!("{threads} threads per block: CUDA allows at most 1024"),
        ));
    }
    let args = raw
        .args
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let start = a.span().start;
            validate_arg(a.into_inner()).map_err(|(key, message)| {
                Fault::new(format!("{at}.args[{i}]{key}"), start, message)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let iterations = match raw.iterations {
        Some(i) if *i.get_ref() == 0 => {
            return Err(Fault::new(
                format!("{at}.iterations"),
                i.span().start,
                "must be at least 1",
            ));
        }
        Some(i) => i.into_inner(),
        None => DEFAULT_ITERATIONS,
    };
    Ok(Launch {
        function: raw.function.into_inner(),
        grid,
        block,
        shared_mem_bytes: raw.shared_mem_bytes,
        args,
        warmup: raw.warmup.unwrap_or(DEFAULT_WARMUP),
        iterations,
    })
}

/// An argument's fault: the key inside the argument (`""`, `.init[1]`) and
/// what was expected.
type ArgFault = (String, String);

fn validate_arg(raw: RawArg) -> Result<Arg, ArgFault> {
    let err = |key: &str, message: String| (key.to_owned(), message);
    let check_all = |key: &str, ty: ElemType, values: &[f64]| {
        values
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| ty.check(*v).map_err(|m| err(&format!(".{key}[{i}]"), m)))
    };
    match (raw.scalar, raw.buffer) {
        (Some(ty), None) => {
            if raw.len.is_some() || raw.init.is_some() || raw.expect.is_some() {
                return Err(err(
                    "",
                    "a scalar takes `value` only (len, init and expect are for buffers)".into(),
                ));
            }
            let value = raw
                .value
                .ok_or_else(|| err("", format!("scalar {} needs a `value`", ty.as_str())))?;
            ty.check(value).map_err(|m| err(".value", m))?;
            Ok(Arg::Scalar { ty, value })
        }
        (None, Some(ty)) => {
            if raw.value.is_some() {
                return Err(err(
                    ".value",
                    "a buffer takes `init` (and `expect`), not `value`".into(),
                ));
            }
            let len = match (&raw.init, raw.len) {
                (Some(Values::Many(v)), Some(len)) if v.len() != len => {
                    return Err(err(
                        ".init",
                        format!("has {} values but len = {len}", v.len()),
                    ));
                }
                (Some(Values::Many(v)), _) => v.len(),
                (_, Some(len)) => len,
                (_, None) => {
                    return Err(err(
                        "",
                        "a buffer needs `len`, or `init` as a list of values".into(),
                    ));
                }
            };
            if len == 0 || len > MAX_ELEMENTS {
                return Err(err(
                    ".len",
                    format!("{len}: expected 1 to {MAX_ELEMENTS} elements"),
                ));
            }
            let fill = |v: Values| match v {
                Values::One(x) => vec![x; len],
                Values::Many(v) => v,
            };
            let init = fill(raw.init.unwrap_or(Values::One(0.0)));
            check_all("init", ty, &init)?;
            let expect = match raw.expect {
                Some(Values::Many(v)) if v.len() != len => {
                    return Err(err(
                        ".expect",
                        format!("has {} values but the buffer has {len}", v.len()),
                    ));
                }
                Some(v) => Some(fill(v)),
                None => None,
            };
            let default = Tolerance::default_for(ty);
            let tolerance = Tolerance {
                atol: raw.atol.unwrap_or(default.atol),
                rtol: raw.rtol.unwrap_or(default.rtol),
            };
            if !(tolerance.atol >= 0.0 && tolerance.rtol >= 0.0) {
                return Err(err("", "atol and rtol must be non-negative".into()));
            }
            if expect.is_none() && (raw.atol.is_some() || raw.rtol.is_some()) {
                return Err(err("", "atol / rtol without `expect`".into()));
            }
            Ok(Arg::Buffer {
                ty,
                init,
                expect,
                tolerance,
            })
        }
        (Some(_), Some(_)) => Err(err("", "either `scalar` or `buffer`, not both".into())),
        (None, None) => Err(err(
            "",
            format!(
                "needs `scalar = TYPE` or `buffer = TYPE` (TYPE: {})",
                ElemType::ALL.map(ElemType::as_str).join(", ")
            ),
        )),
    }
}
