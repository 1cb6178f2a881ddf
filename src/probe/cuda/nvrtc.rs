//! Child side: CUDA C source to a loadable image with NVRTC.
//!
//! NVRTC needs no GPU, so this also runs on machines without one; the
//! compiler log travels with any failure.

use super::request::ModuleKind;
use crate::protocol::{Failure, NvrtcError};
use cudarc::nvrtc::sys::{self, nvrtcResult};
use std::ffi::{CStr, CString, c_char};

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

fn fail(call: &str, code: nvrtcResult, log: String) -> Failure {
    // SAFETY: returns a static NUL-terminated string.
    let message = unsafe { CStr::from_ptr(sys::nvrtcGetErrorString(code)) }
        .to_string_lossy()
        .into_owned();
    Failure::Nvrtc(NvrtcError {
        call: call.to_owned(),
        code: code as i64,
        message,
        log,
    })
}

fn check(call: &str, code: nvrtcResult) -> Result<(), Failure> {
    match code {
        nvrtcResult::NVRTC_SUCCESS => Ok(()),
        _ => Err(fail(call, code, String::new())),
    }
}

/// NVRTC's version, `major.minor`.
pub fn version() -> Result<String, Failure> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-pointers to locals.
    check("nvrtcVersion", unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    })?;
    Ok(format!("{major}.{minor}"))
}

/// The file the NVRTC calls of this child are bound to: where the
/// `nvrtcVersion` that cudarc resolved lives (after [`version`] answered,
/// so that the library is loaded).
pub fn bound_library() -> Option<std::path::PathBuf> {
    // SAFETY: the library is loaded already (cudarc keeps it for the
    // process), so `culib` returns it without searching again; the symbol
    // is only used for its address.
    let lib = unsafe { sys::culib() };
    let f = unsafe { lib.get::<unsafe extern "C" fn()>(b"nvrtcVersion\0") }.ok()?;
    super::driver::library_of(*f as *const std::ffi::c_void)
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
    let mut prog = std::ptr::null_mut();
    // SAFETY: valid C strings that outlive the program; no headers.
    check("nvrtcCreateProgram", unsafe {
        sys::nvrtcCreateProgram(
            &mut prog,
            csource.as_ptr(),
            cname.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    let program = Program(prog);
    // SAFETY: a live program and one pointer per option.
    let code =
        unsafe { sys::nvrtcCompileProgram(program.0, pointers.len() as i32, pointers.as_ptr()) };
    let log = program.log();
    if code != nvrtcResult::NVRTC_SUCCESS {
        return Err(fail("nvrtcCompileProgram", code, log));
    }
    let image = match kind {
        ModuleKind::Cubin => {
            program.output("nvrtcGetCUBIN", sys::nvrtcGetCUBINSize, sys::nvrtcGetCUBIN)?
        }
        _ => program.output("nvrtcGetPTX", sys::nvrtcGetPTXSize, sys::nvrtcGetPTX)?,
    };
    Ok(Compiled {
        image,
        kind,
        target: target.unwrap_or("nvrtc default").to_owned(),
        log,
        version,
    })
}

type SizeFn = unsafe fn(sys::nvrtcProgram, *mut usize) -> nvrtcResult;
type GetFn = unsafe fn(sys::nvrtcProgram, *mut c_char) -> nvrtcResult;

/// A program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Program {
    fn output(&self, call: &str, size: SizeFn, get: GetFn) -> Result<Vec<u8>, Failure> {
        let mut n = 0usize;
        // SAFETY: a compiled program; the buffer has the size NVRTC asked for.
        unsafe {
            check(call, size(self.0, &mut n))?;
            let mut out = vec![0u8; n];
            check(call, get(self.0, out.as_mut_ptr().cast()))?;
            Ok(out)
        }
    }

    fn log(&self) -> String {
        self.output(
            "nvrtcGetProgramLog",
            sys::nvrtcGetProgramLogSize,
            sys::nvrtcGetProgramLog,
        )
        .map(|bytes| {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).trim().to_owned()
        })
        .unwrap_or_default()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created and is destroyed once.
        unsafe {
            sys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}
