//! The four `libm` functions this binary calls (`cos`, `log`, `log10`,
//! `pow`: the bench's statistics and tables, a progress bar's rates), found
//! in `libm.so.6` the first time one of them is called instead of at every
//! start.
//!
//! Defined here, they satisfy the calls the compiler emits for `f64::cos`,
//! `ln`, `log10` and `powf`, so the linker (which links only the libraries
//! a symbol is taken from) no longer makes the binary need `libm.so.6`.
//! Loading it at start cost every process about 0.2 ms of CPU time on this
//! project's machines, a sixth of a whole "hello world" process, while the
//! commands that must be quick (`select` answered from the cache,
//! `fingerprint`, the cuda child) never compute one of these functions.
//! Each call goes to the very function the dynamic loader would have bound
//! (`dlsym` gives a symbol's default version, as linking does), so every
//! result is bit for bit what it was. Because the C math library is on the
//! link line, the linker also exports these four names, as it does for any
//! symbol a shared library defines: a library loaded later (libcuda in the
//! cuda child) that calls `pow` reaches the same libm function through
//! here.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

type Unary = unsafe extern "C" fn(f64) -> f64;
type Binary = unsafe extern "C" fn(f64, f64) -> f64;

/// The functions, bound once for the life of the process.
struct Libm {
    cos: Unary,
    log: Unary,
    log10: Unary,
    pow: Binary,
}

fn libm() -> &'static Libm {
    static LIBM: OnceLock<Libm> = OnceLock::new();
    LIBM.get_or_init(|| {
        // SAFETY: dlopen with a valid C string; the handle is kept for the
        // life of the process, so the function pointers stay valid.
        let handle = unsafe { libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW) };
        if handle.is_null() {
            missing("libm.so.6");
        }
        let symbol = |name: &CStr| -> *mut c_void {
            // SAFETY: a live dlopen handle and a C string.
            let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if address.is_null() {
                missing(&name.to_string_lossy());
            }
            address
        };
        // SAFETY: each symbol is the C function of that name in libm, whose
        // signature is the one it is transmuted to.
        unsafe {
            Libm {
                cos: std::mem::transmute::<*mut c_void, Unary>(symbol(c"cos")),
                log: std::mem::transmute::<*mut c_void, Unary>(symbol(c"log")),
                log10: std::mem::transmute::<*mut c_void, Unary>(symbol(c"log10")),
                pow: std::mem::transmute::<*mut c_void, Binary>(symbol(c"pow")),
            }
        }
    })
}

/// No C math library: nothing can compute the value asked for, and there
/// is no caller to return an error to (the compiler emitted the call).
fn missing(what: &str) -> ! {
    eprintln!("preflight: internal error: cannot load {what} from the C math library");
    std::process::abort()
}

/// `f64::cos`.
#[unsafe(no_mangle)]
pub extern "C" fn cos(x: f64) -> f64 {
    // SAFETY: libm's `cos`, bound above.
    unsafe { (libm().cos)(x) }
}

/// `f64::ln`.
#[unsafe(no_mangle)]
pub extern "C" fn log(x: f64) -> f64 {
    // SAFETY: libm's `log`, bound above.
    unsafe { (libm().log)(x) }
}

/// `f64::log10`.
#[unsafe(no_mangle)]
pub extern "C" fn log10(x: f64) -> f64 {
    // SAFETY: libm's `log10`, bound above.
    unsafe { (libm().log10)(x) }
}

/// `f64::powf`.
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    // SAFETY: libm's `pow`, bound above.
    unsafe { (libm().pow)(x, y) }
}

#[cfg(test)]
mod tests {
    // Through the `f64` methods, as the code calls them: the compiler turns
    // each into a call to the function of that name, defined above.
    #[test]
    fn the_methods_reach_libm() {
        let x = std::hint::black_box(1000.0_f64);
        assert_eq!(x.log10(), 3.0);
        assert_eq!(std::hint::black_box(1.0_f64).ln(), 0.0);
        assert_eq!(std::hint::black_box(0.0_f64).cos(), 1.0);
        assert_eq!(std::hint::black_box(2.0_f64).powf(10.0), 1024.0);
        assert_eq!(
            std::hint::black_box(std::f64::consts::E).ln().to_bits(),
            1.0_f64.to_bits()
        );
        // Not a constant the compiler folded: a value only libm gives.
        assert_eq!(std::hint::black_box(0.5_f64).cos(), 0.8775825618903728);
    }
}
