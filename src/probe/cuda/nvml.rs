//! Child side: the SM clock and NVML's clock-event (throttle) reasons of
//! the device a bench child times, read after each sample as `bench.py`
//! reads them for torch variants. NVML is loaded dynamically
//! (`libnvidia-ml.so.1`, which the driver installs); where it is absent or
//! does not know the device, samples carry no clock facts.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_ulonglong, c_void};

/// The clock-event reasons that slow the clock down, as `bench.py` counts
/// them: a software power cap (0x4), a hardware slowdown (0x8), software
/// and hardware thermal limits (0x20, 0x40), a power brake (0x80). Idle,
/// application and display clocks are not slowdowns.
pub const THROTTLING: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
/// `NVML_CLOCK_SM`.
const CLOCK_SM: c_int = 1;

type Device = *mut c_void;
type ClockInfo = unsafe extern "C" fn(Device, c_int, *mut c_uint) -> c_int;
type Reasons = unsafe extern "C" fn(Device, *mut c_ulonglong) -> c_int;

/// NVML, open on one device.
pub struct Nvml {
    device: Device,
    clock: ClockInfo,
    reasons: Reasons,
}

/// What NVML says right after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clocks {
    /// The SM clock (MHz).
    pub sm_mhz: u32,
    /// The clock-event reasons, a bit mask.
    pub reasons: u64,
}

impl Clocks {
    /// Whether a reason slowed the clock down (see [`THROTTLING`]).
    pub fn throttled(self) -> bool {
        self.reasons & THROTTLING != 0
    }
}

impl Nvml {
    /// NVML on the device at PCI address `bus_id` (as the CUDA driver
    /// names it, `0000:41:00.0`); `None` where NVML cannot be loaded or
    /// read for it.
    pub fn open(bus_id: &str) -> Option<Nvml> {
        let bus = CString::new(bus_id).ok()?;
        // SAFETY: dlopen with a valid C string; the handle is kept for the
        // life of the process, so the entry points stay valid.
        let lib = unsafe { libc::dlopen(c"libnvidia-ml.so.1".as_ptr(), libc::RTLD_NOW) };
        if lib.is_null() {
            return None;
        }
        let symbol = |name: &CStr| {
            // SAFETY: a live handle and a C string.
            let f = unsafe { libc::dlsym(lib, name.as_ptr()) };
            (!f.is_null()).then_some(f)
        };
        // SAFETY: each entry point has the signature of nvml.h it is
        // transmuted to, with `int` for `nvmlReturn_t`.
        unsafe {
            let init = std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(symbol(
                c"nvmlInit_v2",
            )?);
            let by_bus = std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*const c_char, *mut Device) -> c_int,
            >(symbol(c"nvmlDeviceGetHandleByPciBusId_v2")?);
            let clock =
                std::mem::transmute::<*mut c_void, ClockInfo>(symbol(c"nvmlDeviceGetClockInfo")?);
            // The older name of the same call, for drivers before 535.
            let reasons = std::mem::transmute::<*mut c_void, Reasons>(
                symbol(c"nvmlDeviceGetCurrentClocksEventReasons")
                    .or_else(|| symbol(c"nvmlDeviceGetCurrentClocksThrottleReasons"))?,
            );
            if init() != 0 {
                return None;
            }
            let mut device: Device = std::ptr::null_mut();
            if by_bus(bus.as_ptr(), &mut device) != 0 {
                return None;
            }
            let nvml = Nvml {
                device,
                clock,
                reasons,
            };
            nvml.read().map(|_| nvml)
        }
    }

    /// The clocks now; `None` when NVML does not answer.
    pub fn read(&self) -> Option<Clocks> {
        let (mut mhz, mut reasons): (c_uint, c_ulonglong) = (0, 0);
        // SAFETY: a handle NVML gave and out-pointers to locals.
        let ok = unsafe {
            (self.clock)(self.device, CLOCK_SM, &mut mhz) == 0
                && (self.reasons)(self.device, &mut reasons) == 0
        };
        ok.then_some(Clocks {
            sm_mhz: mhz,
            reasons,
        })
    }
}
