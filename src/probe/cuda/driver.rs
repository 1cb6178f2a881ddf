//! Child side: the CUDA driver API calls the executor needs, each returning
//! the `CUresult` as a [`Failure`] fact instead of a Rust error type.
//!
//! Only the primary context and entry points that every driver since CUDA
//! 11 exports are used, so that an older driver than the bindings' 13.0
//! still answers (a missing entry point becomes [`Failure::SymbolMissing`]
//! through the child's panic guard).

use super::event::{DeviceInfo, Failure};
use super::request::ModuleKind;
use cudarc::driver::sys::{self, CUresult};
use std::ffi::{CStr, c_void};
use std::path::Path;

/// A failed driver call as a [`Failure`].
fn fail(call: &str, code: CUresult, log: Option<String>) -> Failure {
    Failure::Driver {
        call: call.to_owned(),
        code: code as u32,
        name: error_text(code, sys::cuGetErrorName),
        message: error_text(code, sys::cuGetErrorString),
        log: log.filter(|l| !l.trim().is_empty()),
    }
}

type ErrorTextFn = unsafe fn(CUresult, *mut *const std::ffi::c_char) -> CUresult;

fn error_text(code: CUresult, f: ErrorTextFn) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver writes a pointer to a static string, or fails.
    let ok = unsafe { f(code, &mut text) } == CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: a NUL-terminated string owned by the driver.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("CUresult {}", code as u32)
    }
}

fn check(call: &str, code: CUresult) -> Result<(), Failure> {
    match code {
        CUresult::CUDA_SUCCESS => Ok(()),
        _ => Err(fail(call, code, None)),
    }
}

/// Loads the driver library (`libcuda.so.1`, or `path` when given) and
/// keeps it loaded for the process; cudarc's own loader then finds it by
/// its soname instead of panicking.
pub fn load_library(path: Option<&Path>, soname: &str) -> Result<(), Failure> {
    let name = path.map_or_else(|| soname.to_owned(), |p| p.display().to_string());
    let Ok(cname) = std::ffi::CString::new(name.clone()) else {
        return Err(Failure::Input {
            detail: format!("library path {name:?} contains a NUL byte"),
        });
    };
    // SAFETY: dlopen with a valid C string; the handle is deliberately kept
    // for the life of the process.
    let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns NULL or a thread-local C string.
        let err = unsafe { libc::dlerror() };
        let detail = if err.is_null() {
            format!("cannot load {name}")
        } else {
            // SAFETY: see above.
            unsafe { CStr::from_ptr(err) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(Failure::LibraryMissing {
            library: soname.to_owned(),
            detail,
        });
    }
    Ok(())
}

/// An initialised driver with the primary context of one device current;
/// only [`Driver::open`] makes one.
#[derive(Debug)]
pub struct Driver(());

/// The driver's version and device count, before a device is chosen.
pub fn init() -> Result<(u32, u32), Failure> {
    // SAFETY: plain driver calls with out-pointers to locals.
    unsafe {
        check("cuInit", sys::cuInit(0))?;
        let mut version = 0;
        check("cuDriverGetVersion", sys::cuDriverGetVersion(&mut version))?;
        let mut count = 0;
        check("cuDeviceGetCount", sys::cuDeviceGetCount(&mut count))?;
        Ok((version.max(0) as u32, count.max(0) as u32))
    }
}

/// `cuDriverGetVersion`, which needs no `cuInit`: the driver's CUDA version
/// even when initialisation then fails.
pub fn version() -> Result<u32, Failure> {
    let mut version = 0;
    // SAFETY: a plain driver call with an out-pointer to a local.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    Ok(version.max(0) as u32)
}

/// The device at `ordinal`, and what it says about itself; no context is
/// created (after [`init`]).
pub fn describe(ordinal: u32) -> Result<(sys::CUdevice, DeviceInfo), Failure> {
    // SAFETY: driver calls with out-pointers to locals and buffers of the
    // sizes passed.
    unsafe {
        let mut device = 0;
        check(
            "cuDeviceGet",
            sys::cuDeviceGet(&mut device, ordinal as std::ffi::c_int),
        )?;
        let mut name = [0 as std::ffi::c_char; 256];
        check(
            "cuDeviceGetName",
            sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device),
        )?;
        let attr = |a: sys::CUdevice_attribute| -> Result<u32, Failure> {
            let mut v = 0;
            check(
                "cuDeviceGetAttribute",
                sys::cuDeviceGetAttribute(&mut v, a, device),
            )?;
            Ok(v.max(0) as u32)
        };
        use sys::CUdevice_attribute::*;
        let major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let mut total = 0usize;
        check(
            "cuDeviceTotalMem",
            sys::cuDeviceTotalMem_v2(&mut total, device),
        )?;
        let mut bus = [0 as std::ffi::c_char; 32];
        let pci_bus_id = (sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 32, device)
            == CUresult::CUDA_SUCCESS)
            .then(|| CStr::from_ptr(bus.as_ptr()).to_string_lossy().into_owned());
        let info = DeviceInfo {
            ordinal,
            name: CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned(),
            major,
            minor,
            sm_count,
            total_memory: total as u64,
            pci_bus_id,
        };
        Ok((device, info))
    }
}

impl Driver {
    /// Describes device `ordinal` and makes its primary context current.
    pub fn open(ordinal: u32) -> Result<(Driver, DeviceInfo), Failure> {
        let (device, info) = describe(ordinal)?;
        // SAFETY: driver calls with an out-pointer to a local and a context
        // the driver just returned.
        unsafe {
            let mut ctx = std::ptr::null_mut();
            check(
                "cuDevicePrimaryCtxRetain",
                sys::cuDevicePrimaryCtxRetain(&mut ctx, device),
            )?;
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(ctx))?;
        }
        Ok((Driver(()), info))
    }

    /// Loads a module image (cubin, fatbin, or PTX) with the JIT's error
    /// and info logs captured.
    pub fn load(&self, image: &[u8], kind: ModuleKind) -> Result<(Module, String), Failure> {
        let mut owned;
        let image = if kind == ModuleKind::Ptx && image.last() != Some(&0) {
            owned = image.to_vec();
            owned.push(0);
            &owned[..]
        } else {
            image
        };
        const LOG: usize = 64 * 1024;
        let mut error_log = vec![0u8; LOG];
        let mut info_log = vec![0u8; LOG];
        use sys::CUjit_option::*;
        let mut options = [
            CU_JIT_ERROR_LOG_BUFFER,
            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_INFO_LOG_BUFFER,
            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: [*mut c_void; 4] = [
            error_log.as_mut_ptr().cast(),
            LOG as *mut c_void,
            info_log.as_mut_ptr().cast(),
            LOG as *mut c_void,
        ];
        let mut module = std::ptr::null_mut();
        // SAFETY: the image outlives the call; the option values are a
        // buffer pointer and its size, as the driver API documents.
        let code = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let text = |buf: &[u8]| {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).trim().to_owned()
        };
        if code != CUresult::CUDA_SUCCESS {
            return Err(fail("cuModuleLoadDataEx", code, Some(text(&error_log))));
        }
        Ok((Module(module), text(&info_log)))
    }

    /// Allocates `bytes` of device memory and copies `init` into it.
    pub fn upload(&self, init: &[u8]) -> Result<DeviceBuffer, Failure> {
        let mut ptr = 0;
        // SAFETY: allocation of at least one byte; copy of `init.len()`
        // bytes into an allocation of that size.
        unsafe {
            check(
                "cuMemAlloc",
                sys::cuMemAlloc_v2(&mut ptr, init.len().max(1)),
            )?;
            let buffer = DeviceBuffer {
                ptr,
                len: init.len(),
            };
            if !init.is_empty() {
                check(
                    "cuMemcpyHtoD",
                    sys::cuMemcpyHtoD_v2(ptr, init.as_ptr().cast(), init.len()),
                )?;
            }
            Ok(buffer)
        }
    }

    /// Copies a device buffer back to the host.
    pub fn download(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>, Failure> {
        let mut out = vec![0u8; buffer.len];
        if buffer.len > 0 {
            // SAFETY: `out` has exactly the buffer's size.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), buffer.ptr, buffer.len)
            })?;
        }
        Ok(out)
    }

    /// Launches `function` on the default stream; `params` point at each
    /// argument's value.
    pub fn launch(
        &self,
        function: sys::CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem_bytes: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), Failure> {
        // SAFETY: the caller passes a function of a loaded module and one
        // pointer per kernel parameter, each valid until synchronisation.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_mem_bytes,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Waits for all work on the context.
    pub fn synchronize(&self) -> Result<(), Failure> {
        // SAFETY: no arguments.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }

    /// Creates a CUDA event.
    pub fn event(&self) -> Result<Event, Failure> {
        let mut e = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, 0) })?;
        Ok(Event(e))
    }
}

/// A loaded module (unloaded when the process exits).
#[derive(Debug)]
pub struct Module(sys::CUmodule);

impl Module {
    /// Looks up a kernel by name.
    pub fn function(&self, name: &str) -> Result<sys::CUfunction, Failure> {
        let cname = std::ffi::CString::new(name).map_err(|_| Failure::Input {
            detail: format!("function name {name:?} contains a NUL byte"),
        })?;
        let mut f = std::ptr::null_mut();
        // SAFETY: a loaded module and a valid C string.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, self.0, cname.as_ptr())
        })?;
        Ok(f)
    }
}

/// A device allocation (freed when the process exits).
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl DeviceBuffer {
    /// The device address, as a kernel parameter takes it.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }
}

/// A CUDA event for timing.
#[derive(Debug)]
pub struct Event(sys::CUevent);

impl Event {
    /// Records the event on the default stream.
    pub fn record(&self) -> Result<(), Failure> {
        // SAFETY: a live event.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.0, std::ptr::null_mut())
        })
    }

    /// Milliseconds from `start` to this event (both recorded, this one
    /// synchronised).
    pub fn since(&self, start: &Event) -> Result<f64, Failure> {
        let mut ms = 0f32;
        let elapsed = elapsed_time_fn().ok_or_else(|| Failure::SymbolMissing {
            detail: "libcuda exports neither cuEventElapsedTime_v2 nor cuEventElapsedTime".into(),
        })?;
        // SAFETY: live events; out-pointer to a local; the function has
        // the documented signature of both symbol versions.
        unsafe {
            check("cuEventSynchronize", sys::cuEventSynchronize(self.0))?;
            check("cuEventElapsedTime", elapsed(&mut ms, start.0, self.0))?;
        }
        Ok(ms as f64)
    }
}

type ElapsedTimeFn = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> CUresult;

/// `cuEventElapsedTime_v2` (CUDA 12.8+), else the original entry point:
/// the bindings only know the version their CUDA release made the default.
fn elapsed_time_fn() -> Option<ElapsedTimeFn> {
    for name in [c"cuEventElapsedTime_v2", c"cuEventElapsedTime"] {
        // SAFETY: libcuda was loaded RTLD_GLOBAL by `load_library`.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if !f.is_null() {
            // SAFETY: both symbols have this signature.
            return Some(unsafe { std::mem::transmute::<*mut c_void, ElapsedTimeFn>(f) });
        }
    }
    None
}
