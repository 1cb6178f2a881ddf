//! Native module targets: a directory with a `preflight.toml` that names
//! CUDA module files (cubin, PTX, fatbin, or `.cu` source for NVRTC) and
//! smoke launches of their kernels, for programs that load modules through
//! the driver API (cudarc, candle). Each module is one job for the cuda
//! executor ([`NativeModule::subject`]). The format is documented in
//! `docs/cuda.md`.

use crate::probe::Subject;
use crate::probe::cuda::{Arg, ElemType, Launch, ModuleKind, ModuleSpec, Tolerance};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The file that makes a directory a native target.
pub const MANIFEST: &str = "preflight.toml";

/// Default untimed launches before timing.
pub const DEFAULT_WARMUP: u32 = 3;
/// Default timed launches.
pub const DEFAULT_ITERATIONS: u32 = 10;

/// Whether `dir` is a native target (holds a `preflight.toml`).
pub fn is_native_target(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
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
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The manifest.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is out of place: `at` names it (`module[0].launch[1].args[2]`).
    #[error("{}: {at}: {message}", path.display())]
    Invalid {
        /// The manifest.
        path: PathBuf,
        /// The key path of the offending value.
        at: String,
        /// What was expected.
        message: String,
    },
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
    /// The module as a job's subject.
    pub fn subject(&self) -> Subject {
        Subject::Module {
            spec: self.spec.clone(),
            launches: self.launches.clone(),
        }
    }

    /// The module's file name, as reports show it.
    pub fn name(&self) -> String {
        self.spec.path.file_name().map_or_else(
            || self.spec.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    module: Vec<RawModule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    file: PathBuf,
    kind: Option<ModuleKind>,
    #[serde(default)]
    nvrtc_options: Vec<String>,
    target: Option<String>,
    #[serde(default)]
    launch: Vec<RawLaunch>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    function: String,
    grid: Dims,
    block: Dims,
    #[serde(default)]
    shared_mem_bytes: u32,
    #[serde(default)]
    args: Vec<RawArg>,
    warmup: Option<u32>,
    iterations: Option<u32>,
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

/// Parses manifest `text` (read from `path`) of the target in `dir`.
pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<NativeTarget, NativeError> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| NativeError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_owned(),
    })?;
    let invalid = |at: String, message: String| NativeError::Invalid {
        path: path.to_path_buf(),
        at,
        message,
    };
    if manifest.module.is_empty() {
        return Err(invalid(
            "module".into(),
            "no [[module]] tables: name at least one module file".into(),
        ));
    }
    let mut modules = Vec::new();
    for (m, raw) in manifest.module.into_iter().enumerate() {
        let at = format!("module[{m}]");
        let file = dir.join(&raw.file);
        let kind = match raw.kind {
            Some(kind) => kind,
            None => raw
                .file
                .extension()
                .and_then(|e| e.to_str())
                .and_then(ModuleKind::from_extension)
                .ok_or_else(|| {
                    invalid(
                        format!("{at}.file"),
                        format!(
                            "cannot tell the kind of {:?} from its extension: use .cubin, .ptx, .fatbin or .cu, or set kind",
                            raw.file.display().to_string()
                        ),
                    )
                })?,
        };
        if !file.is_file() {
            return Err(invalid(
                format!("{at}.file"),
                format!("{} does not exist", file.display()),
            ));
        }
        if kind != ModuleKind::Cuda && (raw.target.is_some() || !raw.nvrtc_options.is_empty()) {
            return Err(invalid(
                at.clone(),
                "target and nvrtc_options apply to CUDA C source (.cu) only".into(),
            ));
        }
        if let Some(t) = &raw.target
            && !(t.starts_with("sm_") || t.starts_with("compute_"))
        {
            return Err(invalid(
                format!("{at}.target"),
                format!("{t:?}: expected sm_XY[a|f] or compute_XY[a|f]"),
            ));
        }
        let launches = raw
            .launch
            .into_iter()
            .enumerate()
            .map(|(l, launch)| validate_launch(&format!("{at}.launch[{l}]"), launch))
            .collect::<Result<Vec<_>, (String, String)>>()
            .map_err(|(at, message)| invalid(at, message))?;
        modules.push(NativeModule {
            spec: ModuleSpec {
                path: file,
                kind,
                nvrtc_options: raw.nvrtc_options,
                target: raw.target,
            },
            launches,
        });
    }
    Ok(NativeTarget {
        dir: dir.to_path_buf(),
        modules,
    })
}

type Invalid = (String, String);

fn dims(at: &str, d: Dims) -> Result<[u32; 3], Invalid> {
    let v = match d {
        Dims::One(x) => vec![x],
        Dims::Many(v) => v,
    };
    if v.is_empty() || v.len() > 3 || v.contains(&0) {
        return Err((
            at.to_owned(),
            format!("{v:?}: expected 1 to 3 positive integers (x, y, z)"),
        ));
    }
    Ok([
        v[0],
        v.get(1).copied().unwrap_or(1),
        v.get(2).copied().unwrap_or(1),
    ])
}

fn validate_launch(at: &str, raw: RawLaunch) -> Result<Launch, Invalid> {
    if raw.function.is_empty() {
        return Err((format!("{at}.function"), "must not be empty".into()));
    }
    let grid = dims(&format!("{at}.grid"), raw.grid)?;
    let block = dims(&format!("{at}.block"), raw.block)?;
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads > 1024 {
        return Err((
            format!("{at}.block"),
            format!("{threads} threads per block: CUDA allows at most 1024"),
        ));
    }
    let args = raw
        .args
        .into_iter()
        .enumerate()
        .map(|(i, a)| validate_arg(&format!("{at}.args[{i}]"), a))
        .collect::<Result<Vec<_>, _>>()?;
    let iterations = raw.iterations.unwrap_or(DEFAULT_ITERATIONS);
    if iterations == 0 {
        return Err((format!("{at}.iterations"), "must be at least 1".into()));
    }
    Ok(Launch {
        function: raw.function,
        grid,
        block,
        shared_mem_bytes: raw.shared_mem_bytes,
        args,
        warmup: raw.warmup.unwrap_or(DEFAULT_WARMUP),
        iterations,
    })
}

fn validate_arg(at: &str, raw: RawArg) -> Result<Arg, Invalid> {
    let err = |key: &str, message: String| (format!("{at}{key}"), message);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(files: &[&str], text: &str) -> Result<NativeTarget, NativeError> {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let path = dir.path().join(MANIFEST);
        parse(dir.path(), &path, text)
    }

    fn message(text: &str) -> String {
        parse_in(&["k.cubin", "k.cu", "k.bin"], text)
            .unwrap_err()
            .to_string()
    }

    const GOOD: &str = r#"
[[module]]
file = "k.cubin"

[[module.launch]]
function = "axpy"
grid = 4
block = [256]
args = [
  { scalar = "f32", value = 2.0 },
  { buffer = "f32", init = [1, 2, 3] },
  { buffer = "f32", len = 3, init = 1.0, expect = [3, 5, 7], atol = 1e-6 },
  { scalar = "u32", value = 3 },
]
"#;

    #[test]
    fn a_valid_manifest_becomes_launches() {
        let t = parse_in(&["k.cubin"], GOOD).unwrap();
        assert_eq!(t.modules.len(), 1);
        let m = &t.modules[0];
        assert_eq!(m.spec.kind, ModuleKind::Cubin);
        let l = &m.launches[0];
        assert_eq!((l.grid, l.block), ([4, 1, 1], [256, 1, 1]));
        assert_eq!(
            (l.warmup, l.iterations),
            (DEFAULT_WARMUP, DEFAULT_ITERATIONS)
        );
        assert_eq!(
            l.args[2],
            Arg::Buffer {
                ty: ElemType::F32,
                init: vec![1.0; 3],
                expect: Some(vec![3.0, 5.0, 7.0]),
                tolerance: Tolerance {
                    atol: 1e-6,
                    rtol: 1e-5
                },
            }
        );
    }

    #[test]
    fn errors_name_the_key_and_what_was_expected() {
        for (text, want) in [
            (
                "[[module]]\nfile = 'k.bin'\n",
                "module[0].file: cannot tell the kind",
            ),
            ("[[module]]\nfile = 'gone.cubin'\n", "module[0].file: "),
            ("", "module: no [[module]] tables"),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = [32, 32, 2]\n",
                "module[0].launch[0].block: 2048 threads",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = [1, 0]\nblock = 1\n",
                "module[0].launch[0].grid: [1, 0]",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = 1\nargs = [{ buffer = 'u8', init = [1, 256] }]\n",
                "module[0].launch[0].args[0].init[1]: 256 is out of range for u8",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = 1\nargs = [{ buffer = 'f32' }]\n",
                "module[0].launch[0].args[0]: a buffer needs `len`",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = 1\nargs = [{ buffer = 'f32', len = 2, expect = [1, 2, 3] }]\n",
                "args[0].expect: has 3 values but the buffer has 2",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = 1\nargs = [{ value = 1 }]\n",
                "args[0]: needs `scalar = TYPE` or `buffer = TYPE`",
            ),
            (
                "[[module]]\nfile = 'k.cubin'\ntarget = 'sm_90'\n",
                "module[0]: target and nvrtc_options apply to CUDA C source",
            ),
            (
                "[[module]]\nfile = 'k.cu'\ntarget = '90'\n",
                "module[0].target: \"90\"",
            ),
        ] {
            let got = message(text);
            assert!(got.contains(want), "{text:?}\n got: {got}\nwant: {want}");
        }
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let got = message("[[module]]\nfile = 'k.cubin'\nfunction = 'f'\n");
        assert!(got.contains("line 3"), "{got}");
        assert!(got.contains("unknown field `function`"), "{got}");
        let got = message("[[module]\n");
        assert!(got.contains("line 1"), "{got}");
        let got = message(
            "[[module]]\nfile = 'k.cubin'\n[[module.launch]]\nfunction = 'f'\ngrid = 1\nblock = 1\nargs = [{ scalar = 'f16', value = 1 }]\n",
        );
        assert!(got.contains("line 7"), "{got}");
        assert!(got.contains("f16"), "{got}");
    }
}
