//! What to do about each cause, defined once: every outcome, whichever
//! executor's evidence it came from, and every `doctor` check take their
//! hint from here.

use crate::declared::nvcc::Release;
use std::path::Path;

/// No SASS for this GPU and no PTX it can JIT.
pub const ARCH: &str = "no SASS for this GPU and no PTX it can JIT: use a variant built for this compute capability (see `preflight inspect`), or rebuild with this arch or +PTX";
/// PTX newer than the driver's JIT.
pub const PTX_TOO_NEW: &str = "the PTX is newer than this driver can JIT: upgrade the NVIDIA driver, or use a build made with an older CUDA toolkit";
/// The driver is older than the code needs.
pub const DRIVER_TOO_OLD: &str =
    "upgrade the NVIDIA driver, or use a variant built for an older CUDA version";
/// No usable GPU.
pub const NO_DEVICE: &str = "no usable GPU here: check nvidia-smi, the driver, CUDA_VISIBLE_DEVICES and a CUDA build of torch, or use a CPU variant";
/// No NVIDIA driver library at all.
pub const NO_DRIVER: &str = "install the NVIDIA driver (nvidia-smi must list the GPU); in a container, run with --gpus all (NVIDIA Container Toolkit); set PREFLIGHT_LIBCUDA for an unusual location";
/// A driver that answers but no device is usable.
pub const DEVICE_UNUSABLE: &str = "the driver is installed but no device is usable: check nvidia-smi, the driver and the compute mode";
/// A device ordinal the driver does not have.
pub const NO_SUCH_DEVICE: &str = "check CUDA_VISIBLE_DEVICES and nvidia-smi";
/// nvcc is absent.
pub const NVCC_MISSING: &str = "this kernel compiles at run time: install nvcc (a CUDA toolkit, or pip install nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt) and put it on PATH or set CUDA_HOME";
/// nvcc is too old.
pub const NVCC_TOO_OLD: &str = "this kernel compiles at run time with a newer nvcc: install a newer CUDA toolkit and point CUDA_HOME at it";
/// Run-time compilation failed.
pub const JIT: &str = "run-time compilation failed here: use the compiler and dependency versions the kernel supports (triton, nvidia-cutlass-dsl, CUDA toolkit)";
/// The PTX JIT is switched off.
pub const JIT_DISABLED: &str =
    "PTX JIT is disabled (CUDA_DISABLE_PTX_JIT?): enable it, or use a build with SASS for this GPU";
/// NVRTC cannot be loaded.
pub const NVRTC_MISSING: &str = "install NVRTC: pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12, or a CUDA toolkit with CUDA_HOME pointing at it";
/// CUDA C source that NVRTC rejects.
pub const NVRTC_SOURCE: &str = "fix the CUDA source (see the compiler log in the stderr tail), or the NVRTC options in preflight.toml";
/// Memory ran out.
pub const OUT_OF_MEMORY: &str =
    "free device memory (other processes, CUDA_VISIBLE_DEVICES) or use a smaller smoke workload";
/// The kernel lacks what is called.
pub const MISSING_SYMBOL: &str =
    "the kernel lacks what is called: check the kernel version the caller expects";
/// A module file the driver cannot load.
pub const BAD_IMAGE: &str = "the module is not an image this driver can load: rebuild it, and check it with `preflight inspect`";
/// A function the driver could not load (lazy loading).
pub const FUNCTION_NOT_LOADED: &str = "the kernel's function could not be loaded on the device: rebuild the module, or load it eagerly (CUDA_MODULE_LOADING=EAGER)";
/// The kernel faulted on the device.
pub const DEVICE_FAULT: &str = "the kernel faulted on the device: run it alone under compute-sanitizer; if it is a released kernel, report it to its authors";
/// The driver refused the launch configuration.
pub const LAUNCH_REFUSED: &str = "the launch was refused: check grid, block, shared_mem_bytes and the argument list in preflight.toml against the kernel";
/// The display watchdog killed the kernel.
pub const WATCHDOG: &str = "the kernel ran into the display watchdog: use a GPU without a display";
/// A CUDA error with no known cause.
pub const UNEXPECTED_CUDA: &str =
    "an unexpected CUDA error: see the message; report it if the kernel should run here";
/// The result differs from the reference.
pub const WRONG_RESULT: &str = "the kernel runs but computes wrong values here: check the reference (smoke file, expected values in preflight.toml); otherwise do not use this build, and report it to the kernel's authors";
/// The deadline passed.
pub const TIMEOUT: &str = "the kernel hangs here, or its first run compiles (JIT) or downloads for longer than the timeout: raise --timeout";
/// A signal killed the child.
pub const CRASHED: &str = "the process died without an error report: run it alone (CUDA_LAUNCH_BLOCKING=1, a debugger) and report it to the kernel's authors";
/// A nonzero exit without a report.
pub const EXITED: &str = "the process exited without an error report; see the stderr tail";
/// An exit with status 0 before the probe was done: the kernel ended the
/// interpreter (`sys.exit(0)`, `os._exit(0)`) while it was being loaded.
pub const EXITED_EARLY: &str = "loading this variant ends the program (an exit call while it loads): a program that loads it stops there; report it to the kernel's authors";
/// The probe's sandbox itself was killed or stopped from inside.
pub const SANDBOX_KILLED: &str = "the kernel killed or stopped the sandbox holding it: it is hostile or badly broken; do not use it";
/// A pass whose interpreter would not exit afterwards.
pub const WILL_NOT_EXIT: &str = "a program that loads this variant will not exit by itself (a thread that is not a daemon, or an atexit handler, keeps it running)";
/// The variant cannot be imported.
pub const IMPORT: &str =
    "the variant cannot be imported here; see the traceback in the stderr tail";
/// The workload raised something unrecognised.
pub const RAISED: &str =
    "the kernel raised while running its smoke workload; see the traceback in the stderr tail";
/// metadata.json the hub loader refuses.
pub const METADATA: &str =
    "the hub loader refuses this variant: fix or re-download its metadata.json";
/// The installed `kernels` is older than the variant's `kernels-minver`.
pub const KERNELS_MINVER: &str =
    "upgrade the hub loader (pip install --upgrade kernels), or use an older build of the kernel";
/// A `python-depends` entry the hub does not allow on this backend.
pub const UNSUPPORTED_DEPENDENCY: &str = "the hub loader does not allow this python-depends entry on this machine's backend: a newer `kernels` may allow it; otherwise use a variant that does not need it";
/// Files that differ from the digest the variant's metadata records.
pub const DIGEST: &str = "the variant's files differ from the digest its metadata.json records (the hub loader refuses to load it): fetch it again, or ask the kernel's authors";
/// A hub validator this preflight does not know.
pub const HUB_REFUSED: &str =
    "the hub loader refuses this variant here; see its message, and check the kernels version";
/// A variant that imports its own package by absolute name.
pub const OWN_IMPORT: &str = "hub variants must import their own modules relatively (`from . import ops`), not by the package name: report it to the kernel's authors";
/// The variant's own module is missing.
pub const INCOMPLETE_VARIANT: &str =
    "the variant directory is incomplete: re-download or rebuild it";
/// Built against another ABI.
pub const ABI: &str = "the variant was built against another ABI (torch, CUDA or C++ library version): use the variant built for this environment";
/// A forked probe that inherited a CUDA driver started before the fork.
pub const FORKED_DRIVER: &str = "not the machine's fault and not cached: the fork server should have refused to fork once the driver was loaded; run with PREFLIGHT_FORK=0 and report the import that started the driver";
/// A verdict the probe's child reported that the machine contradicts.
pub const CONTRADICTED: &str = "the child's report says what this machine cannot have measured: code the probe ran (the kernel, or what it loaded) wrote its result; not cached, probe again after checking the variant";
/// A fault of preflight.
pub const PROBE_ERROR: &str = "a fault of preflight, not of the kernel: please report it";
/// The probe was interrupted.
pub const CANCELLED: &str = "run it again to finish this probe";
/// The smoke source is unusable.
pub const SMOKE: &str =
    "fix the smoke file: def smoke(kernel, device) returning None, (actual, expected) or a dict";
/// The job's input is unusable.
pub const INPUT: &str = "the job's input cannot be used: check the files preflight.toml names";
/// Another protocol version.
pub const PROTOCOL: &str =
    "the child comes from another preflight version: reinstall preflight so that its parts match";
/// Not probed: another OS or CPU.
pub const SKIPPED: &str = "it cannot load on this OS / CPU; probe it anyway with --all";

/// A distribution to install.
pub fn install(distribution: &str) -> String {
    format!("pip install {distribution} into the probed Python environment")
}

/// A Python module is missing; `distribution` is the one known to provide
/// it, if any.
pub fn missing_module(top: &str, distribution: Option<&str>) -> String {
    match distribution.or_else(|| distribution_of(top)) {
        Some(dist) if dist == top => install(dist),
        Some(dist) => {
            format!("pip install {dist} (it provides `{top}`) into the probed Python environment")
        }
        // A part of a namespace package (`nvidia.cudnn`): no guess.
        None if top.contains('.') => {
            format!("install the package that provides `{top}` into the probed Python environment")
        }
        None => format!(
            "install the package that provides `{top}` (often: pip install {top}) into the probed Python environment"
        ),
    }
}

/// Distributions whose import name is not their own name, for the common
/// ones kernels import.
const DISTRIBUTIONS: &[(&str, &str)] = &[
    ("cutlass", "nvidia-cutlass-dsl"),
    ("tvm_ffi", "apache-tvm-ffi"),
    ("cv2", "opencv-python"),
    ("sklearn", "scikit-learn"),
    ("yaml", "pyyaml"),
    ("PIL", "pillow"),
];

/// The distribution that provides the top-level module `top`, when it is
/// not named like it.
pub fn distribution_of(top: &str) -> Option<&'static str> {
    DISTRIBUTIONS
        .iter()
        .find(|(module, _)| *module == top)
        .map(|(_, dist)| *dist)
}

/// A device the variant's backend needs and nothing here can use.
pub fn device_unusable(device: &str) -> String {
    match device.split(':').next().unwrap_or(device) {
        "cuda" => NO_DEVICE.to_owned(),
        kind => format!(
            "no usable {kind} device here: check its driver and a torch build for it, or use a CPU variant"
        ),
    }
}

/// A shared library is missing.
pub fn shared_library(library: &str) -> String {
    format!("install the package that provides {library}, or add its directory to LD_LIBRARY_PATH")
}

/// A system library (glibc, libstdc++) is too old.
pub fn library_version(version: &str) -> String {
    format!(
        "the variant needs {version}, newer than this system's library: use a variant built for an older toolchain, or a newer OS image"
    )
}

/// A dependency of another version than the kernel supports, with the
/// installed version when the child could tell it.
pub fn dependency_version(package: &str, version: Option<&str>) -> String {
    match version {
        Some(version) => format!(
            "the installed `{package}` {version} lacks what this kernel uses: install the version of `{package}` the kernel was built for (often a newer one: pip install --upgrade {package})"
        ),
        None => format!(
            "the installed `{package}` is a version this kernel does not support: install the version it was built for"
        ),
    }
}

/// nvcc is missing where a kernel looks for it. `home` is the CUDA home
/// such a kernel finds (CUDA_HOME, CUDA_PATH, `nvcc` on PATH,
/// /usr/local/cuda), `wheel` the root (and version) of an nvcc that only a
/// pip wheel holds: the exact `CUDA_HOME=` that makes it visible.
pub fn nvcc_missing(home: Option<&Path>, wheel: Option<(&Path, Option<&str>)>) -> String {
    let Some((root, version)) = wheel else {
        return NVCC_MISSING.to_owned();
    };
    let release = version.map(|v| format!(" (CUDA {v})")).unwrap_or_default();
    let looked = match home {
        Some(home) => format!("the CUDA home kernels find, {}, has none", home.display()),
        None => "kernels looking in CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda do not see it"
            .to_owned(),
    };
    format!(
        "set CUDA_HOME={}: its nvcc{release} is only in a pip wheel, and {looked}",
        root.display()
    )
}

/// nvcc does not know an architecture that a newer release does.
pub fn nvcc_too_old(first: Option<Release>) -> String {
    match first {
        Some(first) => format!(
            "this kernel compiles at run time for an architecture nvcc knows from CUDA {first} on: install a CUDA toolkit of {first} or newer and point CUDA_HOME at it"
        ),
        None => NVCC_TOO_OLD.to_owned(),
    }
}

/// The kernel is built for architecture-specific features (`sm_90a`,
/// `sm_100a`) that this GPU does not have.
pub const ARCH_FEATURES: &str = "the kernel needs architecture-specific features this GPU does not have: run it on a GPU it supports (see its README), or use another kernel for this GPU";

/// The toolkit no longer compiles for this (older) GPU.
pub fn arch_dropped(last: Release) -> String {
    format!(
        "this GPU is older than the CUDA toolkit supports: point CUDA_HOME at a CUDA {last} (or older) toolkit, or use a newer GPU"
    )
}

/// The kernel's own check refuses this GPU.
pub const GUARD_ARCH: &str = "the kernel refuses this GPU: run it on a GPU of the architecture it names, or use another kernel (or variant) that supports this one";
