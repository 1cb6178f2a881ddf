//! Child side: the CUDA driver API calls the executor needs, each returning
//! the `CUresult` as a [`Failure`] fact instead of a Rust error type.
//!
//! Entry points are looked up by name in the loaded driver library and
//! declared to return a plain `int`: a driver newer than this build may
//! return codes no Rust enum of ours lists, and those must stay integers.
//! Only the primary context and entry points that every driver since CUDA
//! 11 exports are used; a missing one is [`Failure::SymbolMissing`].

use super::request::ModuleKind;
use crate::protocol::{CudaError, DeviceArch, DeviceInfo, Failure};
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// `CUresult`, as the driver returns it.
type CuResult = c_int;
const SUCCESS: CuResult = 0;

type Ptr = *mut c_void;
/// `CUdeviceptr`.
type DevicePtr = u64;

/// The driver library's handle (a `dlopen` handle, kept for the process).
static LIBCUDA: OnceLock<usize> = OnceLock::new();

/// `dlopen`s `path` (else `soname`) for the life of the process.
pub fn load_library(path: Option<&Path>, soname: &str) -> Result<Ptr, Failure> {
    let name = path.map_or_else(|| soname.to_owned(), |p| p.display().to_string());
    let Ok(cname) = CString::new(name.clone()) else {
        return Err(Failure::InvalidInput {
            message: format!("library path {name:?} contains a NUL byte"),
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
    Ok(handle)
}

/// Loads the driver library (`libcuda.so.1`, or `path` when given).
pub fn load_driver(path: Option<&Path>) -> Result<(), Failure> {
    let handle = load_library(path, "libcuda.so.1")?;
    LIBCUDA.get_or_init(|| handle as usize);
    Ok(())
}

/// The address of a driver entry point.
fn entry(name: &CStr) -> Result<Ptr, Failure> {
    let missing = || Failure::SymbolMissing {
        detail: format!("libcuda exports no {}", name.to_string_lossy()),
    };
    let handle = *LIBCUDA.get().ok_or_else(missing)? as Ptr;
    // SAFETY: a live dlopen handle and a C string.
    let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if f.is_null() { Err(missing()) } else { Ok(f) }
}

/// Calls driver entry point `$name` with the C signature `($ty, …)`, whose
/// result is a `CUresult`; `?`s a [`Failure`] when it is not `CUDA_SUCCESS`.
macro_rules! cu {
    ($name:ident ( $($arg:expr => $ty:ty),* $(,)? )) => {{
        let f = entry(
            // SAFETY: the literal has no interior NUL and ends in one.
            unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
        )?;
        // SAFETY: the entry point has this signature in cuda.h.
        let f = unsafe {
            std::mem::transmute::<Ptr, unsafe extern "C" fn($($ty),*) -> CuResult>(f)
        };
        // SAFETY: the caller passes arguments valid for the call.
        check(stringify!($name), unsafe { f($($arg),*) })
    }};
}

fn error_text(code: CuResult, getter: &CStr) -> Option<String> {
    let f = entry(getter).ok()?;
    // SAFETY: `cuGetErrorName` / `cuGetErrorString` take (CUresult, const char**).
    let f = unsafe {
        std::mem::transmute::<Ptr, unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>(
            f,
        )
    };
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: the driver writes a pointer to a static string, or fails
    // (for a code it does not know).
    let ok = unsafe { f(code, &mut text) } == SUCCESS;
    // SAFETY: a NUL-terminated string owned by the driver.
    (ok && !text.is_null()).then(|| {
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    })
}

/// A failed driver call as a [`Failure`]; the code is kept as it came.
fn fail(call: &str, code: CuResult, log: Option<String>) -> Failure {
    Failure::Cuda(CudaError {
        call: call.to_owned(),
        code: code.into(),
        name: error_text(code, c"cuGetErrorName").unwrap_or_default(),
        message: error_text(code, c"cuGetErrorString")
            .unwrap_or_else(|| format!("CUresult {code}")),
        log: log.filter(|l| !l.trim().is_empty()),
    })
}

fn check(call: &str, code: CuResult) -> Result<(), Failure> {
    match code {
        SUCCESS => Ok(()),
        _ => Err(fail(call, code, None)),
    }
}

/// `cuDriverGetVersion` (`13000` for 13.0), which needs no `cuInit`: the
/// driver's version is known even when initialisation then fails.
pub fn version() -> Result<u32, Failure> {
    let mut version: c_int = 0;
    cu!(cuDriverGetVersion(&mut version => *mut c_int))?;
    Ok(version.max(0) as u32)
}

/// The driver's version and device count, before a device is chosen.
pub fn init() -> Result<(u32, u32), Failure> {
    cu!(cuInit(0 => c_uint))?;
    let version = version()?;
    let mut count: c_int = 0;
    cu!(cuDeviceGetCount(&mut count => *mut c_int))?;
    Ok((version, count.max(0) as u32))
}

/// The device at `ordinal` (after [`init`]) and what it says about itself;
/// no context is created on it.
pub fn describe(ordinal: u32) -> Result<DeviceInfo, Failure> {
    query(ordinal).map(|(_, info)| info)
}

/// The driver's handle of device `ordinal`, and its description.
fn query(ordinal: u32) -> Result<(c_int, DeviceInfo), Failure> {
    let mut device: c_int = 0;
    cu!(cuDeviceGet(&mut device => *mut c_int, ordinal as c_int => c_int))?;
    let mut name = [0 as c_char; 256];
    cu!(cuDeviceGetName(name.as_mut_ptr() => *mut c_char, name.len() as c_int => c_int, device => c_int))?;
    let attr = |a: c_int| -> Result<u32, Failure> {
        let mut v: c_int = 0;
        cu!(cuDeviceGetAttribute(&mut v => *mut c_int, a => c_int, device => c_int))?;
        Ok(v.max(0) as u32)
    };
    let major = attr(ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sm_count = attr(ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let mut total: usize = 0;
    cu!(cuDeviceTotalMem_v2(&mut total => *mut usize, device => c_int))?;
    let mut bus = [0 as c_char; 32];
    let bus_id = (|| cu!(cuDeviceGetPCIBusId(bus.as_mut_ptr() => *mut c_char, 32 => c_int, device => c_int)))(
    );
    let text = |buf: &[c_char]| {
        // SAFETY: the driver wrote a NUL-terminated string into the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    let info = DeviceInfo {
        ordinal,
        name: text(&name),
        arch: DeviceArch::Cuda { major, minor },
        sm_count,
        total_memory: total as u64,
        pci_bus_id: bus_id.ok().map(|()| text(&bus)),
    };
    Ok((device, info))
}

/// An initialised driver with the primary context of one device current;
/// only [`Driver::open`] makes one.
#[derive(Debug)]
pub struct Driver {
    /// The driver's handle of the device.
    device: c_int,
}

/// A module the driver loaded, with what its JIT said.
#[derive(Debug)]
pub struct Loaded {
    /// The module.
    pub module: Module,
    /// The JIT's info log (empty when it wrote none).
    pub info_log: String,
    /// What the driver reports as time spent in its JIT compiler and
    /// linker (`CU_JIT_WALL_TIME`), in milliseconds: near 0 for SASS and
    /// for PTX found in the JIT cache.
    pub jit_ms: f64,
}

/// The file the dynamic loader mapped the code at `address` from, as it
/// names it (`dladdr`).
pub fn library_of(address: *const c_void) -> Option<std::path::PathBuf> {
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let found = unsafe { libc::dladdr(address, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
        name.to_bytes(),
    )))
}

/// The file the driver's calls are bound to: where the `cuInit` this
/// child calls lives (after [`load_driver`]).
pub fn bound_library() -> Option<std::path::PathBuf> {
    library_of(entry(c"cuInit").ok()?)
}

const ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
const ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;
/// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`.
pub const ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`.
pub const ATTRIBUTE_COMPUTE_MODE: c_int = 20;
/// `CU_COMPUTEMODE_EXCLUSIVE_PROCESS`: one process's context at a time.
pub const COMPUTEMODE_EXCLUSIVE_PROCESS: i64 = 3;
/// `CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE`, in bytes.
pub const ATTRIBUTE_L2_CACHE_SIZE: c_int = 38;
/// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: a kernel's static shared memory.
pub const FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;

const JIT_WALL_TIME: c_int = 2;
const JIT_INFO_LOG_BUFFER: c_int = 3;
const JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
const JIT_ERROR_LOG_BUFFER: c_int = 5;
const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

impl Driver {
    /// Describes device `ordinal` and makes its primary context current.
    pub fn open(ordinal: u32) -> Result<(Driver, DeviceInfo), Failure> {
        let (device, info) = query(ordinal)?;
        let mut ctx: Ptr = std::ptr::null_mut();
        cu!(cuDevicePrimaryCtxRetain(&mut ctx => *mut Ptr, device => c_int))?;
        cu!(cuCtxSetCurrent(ctx => Ptr))?;
        Ok((Driver { device }, info))
    }

    /// An attribute of the device (`cuDeviceGetAttribute`).
    pub fn attribute(&self, attribute: c_int) -> Result<i64, Failure> {
        let mut v: c_int = 0;
        cu!(cuDeviceGetAttribute(&mut v => *mut c_int, attribute => c_int, self.device => c_int))?;
        Ok(i64::from(v))
    }

    /// Loads a module image (cubin, fatbin, or PTX) with the JIT's error
    /// and info logs captured and its compile time measured.
    pub fn load(&self, image: &[u8], kind: ModuleKind) -> Result<Loaded, Failure> {
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
        let mut options = [
            JIT_ERROR_LOG_BUFFER,
            JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            JIT_INFO_LOG_BUFFER,
            JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            JIT_WALL_TIME,
        ];
        let mut values: [Ptr; 5] = [
            error_log.as_mut_ptr().cast(),
            LOG as Ptr,
            info_log.as_mut_ptr().cast(),
            LOG as Ptr,
            std::ptr::null_mut(),
        ];
        let mut module: Ptr = std::ptr::null_mut();
        // The image outlives the call; the option values are a buffer
        // pointer and its size, as the driver API documents.
        let loaded = cu!(cuModuleLoadDataEx(
            &mut module => *mut Ptr,
            image.as_ptr().cast() => *const c_void,
            options.len() as c_uint => c_uint,
            options.as_mut_ptr() => *mut c_int,
            values.as_mut_ptr() => *mut Ptr,
        ));
        let text = |buf: &[u8]| {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).trim().to_owned()
        };
        if let Err(Failure::Cuda(mut error)) = loaded {
            let log = text(&error_log);
            error.log = (!log.is_empty()).then_some(log);
            return Err(Failure::Cuda(error));
        }
        loaded?;
        // The driver writes the wall time as a float into the option's slot.
        let jit_ms = f32::from_bits(values[4] as usize as u32);
        Ok(Loaded {
            module: Module(module),
            info_log: text(&info_log),
            jit_ms: if jit_ms.is_finite() {
                f64::from(jit_ms.max(0.0))
            } else {
                0.0
            },
        })
    }

    /// Allocates device memory and copies `init` into it.
    pub fn upload(&self, init: &[u8]) -> Result<DeviceBuffer, Failure> {
        let mut ptr: DevicePtr = 0;
        cu!(cuMemAlloc_v2(&mut ptr => *mut DevicePtr, init.len().max(1) => usize))?;
        if !init.is_empty() {
            cu!(cuMemcpyHtoD_v2(ptr => DevicePtr, init.as_ptr().cast() => *const c_void, init.len() => usize))?;
        }
        Ok(DeviceBuffer {
            ptr,
            len: init.len(),
        })
    }

    /// Copies `bytes` into the start of a device buffer (its initial
    /// contents again, before a launch is verified once more).
    pub fn write(&self, buffer: &DeviceBuffer, bytes: &[u8]) -> Result<(), Failure> {
        let n = bytes.len().min(buffer.len);
        if n > 0 {
            cu!(cuMemcpyHtoD_v2(buffer.ptr => DevicePtr, bytes.as_ptr().cast() => *const c_void, n => usize))?;
        }
        Ok(())
    }

    /// Allocates `bytes` of device memory, left as the driver gives it.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, Failure> {
        let mut ptr: DevicePtr = 0;
        cu!(cuMemAlloc_v2(&mut ptr => *mut DevicePtr, bytes.max(1) => usize))?;
        Ok(DeviceBuffer { ptr, len: bytes })
    }

    /// Fills a device buffer with `value`, on the default stream: in
    /// stream order before whatever is launched next.
    pub fn memset(&self, buffer: &DeviceBuffer, value: u8) -> Result<(), Failure> {
        cu!(cuMemsetD8_v2(buffer.ptr => DevicePtr, value => u8, buffer.len => usize))
    }

    /// Copies a device buffer back to the host.
    pub fn download(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>, Failure> {
        let mut out = vec![0u8; buffer.len];
        if buffer.len > 0 {
            cu!(cuMemcpyDtoH_v2(out.as_mut_ptr().cast() => *mut c_void, buffer.ptr => DevicePtr, buffer.len => usize))?;
        }
        Ok(out)
    }

    /// Launches `function` on the default stream; `params` point at each
    /// argument's value, each valid until synchronisation.
    pub fn launch(
        &self,
        function: Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem_bytes: u32,
        params: &mut [Ptr],
    ) -> Result<(), Failure> {
        cu!(cuLaunchKernel(
            function.0 => Ptr,
            grid[0] => c_uint, grid[1] => c_uint, grid[2] => c_uint,
            block[0] => c_uint, block[1] => c_uint, block[2] => c_uint,
            shared_mem_bytes => c_uint,
            std::ptr::null_mut() => Ptr,
            params.as_mut_ptr() => *mut Ptr,
            std::ptr::null_mut() => *mut Ptr,
        ))
    }

    /// Waits for all work on the context.
    pub fn synchronize(&self) -> Result<(), Failure> {
        cu!(cuCtxSynchronize())
    }

    /// Creates a CUDA event.
    pub fn event(&self) -> Result<Event, Failure> {
        let mut e: Ptr = std::ptr::null_mut();
        cu!(cuEventCreate(&mut e => *mut Ptr, 0 => c_uint))?;
        Ok(Event(e))
    }
}

/// A loaded module (unloaded when the process exits).
#[derive(Debug)]
pub struct Module(Ptr);

/// A kernel of a loaded module.
#[derive(Debug, Clone, Copy)]
pub struct Function(Ptr);

impl Module {
    /// Looks up a kernel by name.
    pub fn function(&self, name: &str) -> Result<Function, Failure> {
        let cname = CString::new(name).map_err(|_| Failure::InvalidInput {
            message: format!("function name {name:?} contains a NUL byte"),
        })?;
        let mut f: Ptr = std::ptr::null_mut();
        cu!(cuModuleGetFunction(&mut f => *mut Ptr, self.0 => Ptr, cname.as_ptr() => *const c_char))?;
        Ok(Function(f))
    }

    /// Unloads the module, freeing its code on the device.
    pub fn unload(self) -> Result<(), Failure> {
        cu!(cuModuleUnload(self.0 => Ptr))
    }
}

impl Function {
    /// An attribute of the kernel (`cuFuncGetAttribute`).
    pub fn attribute(&self, attribute: c_int) -> Result<i64, Failure> {
        let mut v: c_int = 0;
        cu!(cuFuncGetAttribute(&mut v => *mut c_int, attribute => c_int, self.0 => Ptr))?;
        Ok(i64::from(v))
    }

    /// Sets an attribute of the kernel (`cuFuncSetAttribute`).
    pub fn set_attribute(&self, attribute: c_int, value: i64) -> Result<(), Failure> {
        let value = c_int::try_from(value).map_err(|_| Failure::InvalidInput {
            message: format!("kernel attribute {attribute}: {value} does not fit an int"),
        })?;
        cu!(cuFuncSetAttribute(self.0 => Ptr, attribute => c_int, value => c_int))
    }
}

/// A device allocation (freed when the process exits).
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: DevicePtr,
    len: usize,
}

impl DeviceBuffer {
    /// The device address, as a kernel parameter takes it.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.len
    }
}

/// A CUDA event for timing.
#[derive(Debug)]
pub struct Event(Ptr);

impl Event {
    /// Records the event on the default stream.
    pub fn record(&self) -> Result<(), Failure> {
        cu!(cuEventRecord(self.0 => Ptr, std::ptr::null_mut() => Ptr))
    }

    /// Milliseconds from `start` to this event (both recorded, this one
    /// synchronised). `cuEventElapsedTime_v2` (CUDA 12.8+) first, else the
    /// original entry point, which older drivers export alone.
    pub fn since(&self, start: &Event) -> Result<f64, Failure> {
        cu!(cuEventSynchronize(self.0 => Ptr))?;
        let mut ms = 0f32;
        match cu!(cuEventElapsedTime_v2(&mut ms => *mut f32, start.0 => Ptr, self.0 => Ptr)) {
            Err(Failure::SymbolMissing { .. }) => {
                cu!(cuEventElapsedTime(&mut ms => *mut f32, start.0 => Ptr, self.0 => Ptr))?
            }
            other => other?,
        }
        Ok(f64::from(ms))
    }
}
