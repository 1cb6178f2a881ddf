//! Child side: CUDA C source to a loadable image with NVRTC.
//!
//! NVRTC needs no GPU, so this also runs on machines without one; the
//! compiler log travels with any failure. cudarc finds and loads the
//! library; its entry points are looked up here and declared to return a
//! plain `int`, as on the driver side: an NVRTC newer than this build may
//! return codes no Rust enum lists, and those must stay integers.

use super::request::ModuleKind;
use crate::protocol::{Failure, NvrtcError};
use cudarc::nvrtc::sys;
use std::ffi::{CStr, CString, c_char, c_int, c_void};

/// `nvrtcResult`, as NVRTC returns it.
type NvrtcResult = c_int;
const SUCCESS: NvrtcResult = 0;
/// `nvrtcProgram`.
type Prog = *mut c_void;

/// An image NVRTC produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The bytes to hand to the driver.
    pub image: Vec<u8>,
    /// [`ModuleKind::Cubin`] for an `sm_` target, [`ModuleKind::Ptx`] for
    /// a `compute_` target.
    pub kind: ModuleKind,
    /// The target compiled for.
    pub target: String,
    /// The compiler log (warnings), possibly empty.
    pub log: String,
    /// NVRTC's version, `major.minor`.
    pub version: String,
}

/// NVRTC's entry point `name` (NUL-terminated) with the C signature `F`.
///
/// # Safety
/// `F` must be the entry point's signature in `nvrtc.h`, with `int` for
/// `nvrtcResult`.
unsafe fn entry<F: Copy>(name: &[u8]) -> Result<F, Failure> {
    // SAFETY: cudarc loads the library once for the process and keeps it.
    let lib = unsafe { sys::culib() };
    // SAFETY: the caller names the symbol's type.
    match unsafe { lib.get::<F>(name) } {
        Ok(f) => Ok(*f),
        Err(e) => Err(Failure::SymbolMissing {
            detail: format!(
                "libnvrtc exports no {}: {e}",
                String::from_utf8_lossy(name.strip_suffix(b"\0").unwrap_or(name))
            ),
        }),
    }
}

fn fail(call: &str, code: NvrtcResult, log: String) -> Failure {
    // SAFETY: nvrtcGetErrorString's signature; it returns a static
    // NUL-terminated string, for a code it does not know too.
    let text = unsafe {
        entry::<unsafe extern "C" fn(NvrtcResult) -> *const c_char>(b"nvrtcGetErrorString\0")
    }
    .ok()
    .map(|f| unsafe { f(code) })
    .filter(|p| !p.is_null())
    // SAFETY: see above.
    .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    Failure::Nvrtc(NvrtcError {
        call: call.to_owned(),
        code: code.into(),
        message: text.unwrap_or_else(|| format!("nvrtcResult {code}")),
        log,
    })
}

fn check(call: &str, code: NvrtcResult) -> Result<(), Failure> {
    match code {
        SUCCESS => Ok(()),
        _ => Err(fail(call, code, String::new())),
    }
}

/// NVRTC's version, `major.minor`.
pub fn version() -> Result<String, Failure> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: nvrtcVersion(int*, int*).
    let f = unsafe {
        entry::<unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult>(b"nvrtcVersion\0")
    }?;
    // SAFETY: out-pointers to locals.
    check("nvrtcVersion", unsafe { f(&mut major, &mut minor) })?;
    Ok(format!("{major}.{minor}"))
}

/// The file the NVRTC calls of this child are bound to: where the
/// `nvrtcVersion` that cudarc resolved lives (after [`version`] answered,
/// so that the library is loaded).
pub fn bound_library() -> Option<std::path::PathBuf> {
    // SAFETY: the symbol is only used for its address.
    let f = unsafe { entry::<unsafe extern "C" fn()>(b"nvrtcVersion\0") }.ok()?;
    super::driver::library_of(f as *const c_void)
}

/// Compiles `source` for `target` (`sm_90`, `sm_90a`, `compute_80`, …):
/// a cubin for an `sm_` target, PTX for a `compute_` target or for
/// NVRTC's default target when `target` is `None`.
pub fn compile(
    source: &str,
    name: &str,
    target: Option<&str>,
    options: &[String],
) -> Result<Compiled, Failure> {
    let kind = if target.is_some_and(|t| t.starts_with("sm_")) {
        ModuleKind::Cubin
    } else {
        ModuleKind::Ptx
    };
    let input = |what: &str| Failure::InvalidInput {
        message: format!("{what} contains a NUL byte"),
    };
    let csource = CString::new(source).map_err(|_| input("the source"))?;
    let cname = CString::new(name).map_err(|_| input("the source name"))?;
    let mut all: Vec<String> = target
        .map(|t| format!("--gpu-architecture={t}"))
        .into_iter()
        .collect();
    all.extend(options.iter().cloned());
    let coptions = all
        .iter()
        .map(|o| CString::new(o.as_str()).map_err(|_| input("an NVRTC option")))
        .collect::<Result<Vec<_>, _>>()?;
    let pointers: Vec<*const c_char> = coptions.iter().map(|o| o.as_ptr()).collect();
    let version = version()?;
    type Create = unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult;
    type Compile = unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> NvrtcResult;
    // SAFETY: the signatures of nvrtc.h.
    let (create, compile) = unsafe {
        (
            entry::<Create>(b"nvrtcCreateProgram\0")?,
            entry::<Compile>(b"nvrtcCompileProgram\0")?,
        )
    };
    let mut prog: Prog = std::ptr::null_mut();
    // SAFETY: valid C strings that outlive the program; no headers.
    check("nvrtcCreateProgram", unsafe {
        create(
            &mut prog,
            csource.as_ptr(),
            cname.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    let program = Program(prog);
    let count = c_int::try_from(pointers.len()).map_err(|_| input("the option list"))?;
    // SAFETY: a live program and one pointer per option.
    let code = unsafe { compile(program.0, count, pointers.as_ptr()) };
    let log = program.log();
    if code != SUCCESS {
        return Err(fail("nvrtcCompileProgram", code, log));
    }
    let image = match kind {
        ModuleKind::Cubin => program.output(b"nvrtcGetCUBINSize\0", b"nvrtcGetCUBIN\0")?,
        _ => program.output(b"nvrtcGetPTXSize\0", b"nvrtcGetPTX\0")?,
    };
    Ok(Compiled {
        image,
        kind,
        target: target.unwrap_or("nvrtc default").to_owned(),
        log,
        version,
    })
}

type SizeFn = unsafe extern "C" fn(Prog, *mut usize) -> NvrtcResult;
type GetFn = unsafe extern "C" fn(Prog, *mut c_char) -> NvrtcResult;

/// A program, destroyed on drop.
struct Program(Prog);

impl Program {
    /// One of the program's outputs, through its `…Size` and getter entry
    /// points (NUL-terminated names).
    fn output(&self, size_name: &[u8], get_name: &[u8]) -> Result<Vec<u8>, Failure> {
        let call = String::from_utf8_lossy(get_name.strip_suffix(b"\0").unwrap_or(get_name));
        // SAFETY: the signatures of nvrtc.h; a compiled program; the buffer
        // has the size NVRTC asked for.
        unsafe {
            let size = entry::<SizeFn>(size_name)?;
            let get = entry::<GetFn>(get_name)?;
            let mut n = 0usize;
            check(&call, size(self.0, &mut n))?;
            let mut out = vec![0u8; n];
            check(&call, get(self.0, out.as_mut_ptr().cast()))?;
            Ok(out)
        }
    }

    fn log(&self) -> String {
        self.output(b"nvrtcGetProgramLogSize\0", b"nvrtcGetProgramLog\0")
            .map(|bytes| {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                String::from_utf8_lossy(&bytes[..end]).trim().to_owned()
            })
            .unwrap_or_default()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: nvrtcDestroyProgram(nvrtcProgram*); the program was
        // created and is destroyed once.
        if let Ok(destroy) = unsafe {
            entry::<unsafe extern "C" fn(*mut Prog) -> NvrtcResult>(b"nvrtcDestroyProgram\0")
        } {
            unsafe {
                destroy(&mut self.0);
            }
        }
    }
}
