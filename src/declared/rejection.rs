//! Why the hub loader refuses a variant by its name, in its own words.

use super::rules::Release;
use crate::variant::{Backend, Cpu, OrOther, Os, Version};
use std::fmt;

/// Metal kernels are built with `-std=metal4.0`, which needs macOS 26.
pub const METAL_MIN_MACOS: Version = Version::new(26, 0);

/// Why a variant cannot be used on a system, judged by its name alone.
///
/// The `Display` text is the hub loader's own wording, so that a person who
/// compares the two traces sees the same reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The release whose rules apply does not parse the name: the loader
    /// skips the directory (with a warning) as if it were not there.
    NotParsed {
        /// The release.
        release: Release,
    },
    /// An `abi3` variant on a free-threaded Python, which loads only
    /// `abi3t` extensions.
    FreeThreaded,
    /// The variant needs a newer Python.
    PythonTooOld {
        /// The oldest Python the variant's name allows.
        variant: Version,
        /// The Python it would load into.
        system: Version,
    },
    /// The variant's CPU is not the system's.
    Cpu {
        /// CPU in the name.
        variant: OrOther<Cpu>,
        /// CPU of the system.
        system: OrOther<Cpu>,
    },
    /// The variant's OS is not the system's.
    Os {
        /// OS in the name.
        variant: OrOther<Os>,
        /// OS of the system.
        system: OrOther<Os>,
    },
    /// `torchXY` needs exactly torch X.Y.
    TorchVersion {
        /// Version in the name.
        variant: Version,
        /// Installed torch, if any.
        system: Option<Version>,
    },
    /// The `-cxx11` / `-cxx98` tag differs from torch's C++ ABI.
    Cxx11Abi {
        /// Tag in the name.
        variant: bool,
        /// ABI of the installed torch, if known.
        system: Option<bool>,
    },
    /// `torch-stable-abiXY` needs torch X.Y or newer.
    StableAbiTooNew {
        /// Stable ABI version in the name.
        variant: Version,
        /// Installed torch, if any.
        system: Option<Version>,
    },
    /// `tvm-ffiXY` needs exactly tvm-ffi X.Y.
    TvmFfiVersion {
        /// Version in the name.
        variant: Version,
        /// Installed tvm-ffi, if any.
        system: Option<Version>,
    },
    /// CUDA variants run only within the system's CUDA major, up to its minor.
    CudaVersion {
        /// CUDA version in the name.
        variant: Version,
        /// CUDA version of the system.
        system: Version,
    },
    /// ROCm variants run only within the system's ROCm major, up to its
    /// minor (kernels 0.18 and later).
    RocmVersion {
        /// ROCm version in the name.
        variant: Version,
        /// ROCm version of the system.
        system: Version,
    },
    /// Any other backend (and version) must match exactly.
    Backend {
        /// The backend as the name spells it (`cu126`, `rocm-6.4`).
        variant: String,
        /// Backend of the system.
        system: Backend,
    },
    /// Metal variants need macOS 26 or later.
    MacosTooOld {
        /// macOS version of the system, if any.
        system: Option<Version>,
    },
    /// An MLX variant where MLX is not installed.
    MlxMissing,
    /// A noarch variant for another backend.
    NoarchBackend {
        /// Backend in the name, as the release reads it.
        variant: String,
        /// The system's backend as that release names it for noarch
        /// variants (`npu` or `cann` for a CANN system).
        system: &'static str,
    },
    /// An `sdk-<backend>` variant for another backend.
    SdkBackend {
        /// Backend in the name.
        variant: String,
        /// The system's backend.
        system: &'static str,
    },
}

impl Rejection {
    /// A stable machine-readable code for the kind of rejection.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::NotParsed { .. } => "not_parsed",
            Rejection::FreeThreaded => "free_threaded",
            Rejection::PythonTooOld { .. } => "python_version",
            Rejection::Cpu { .. } => "cpu",
            Rejection::Os { .. } => "os",
            Rejection::TorchVersion { .. } => "torch_version",
            Rejection::Cxx11Abi { .. } => "cxx11_abi",
            Rejection::StableAbiTooNew { .. } => "stable_abi_too_new",
            Rejection::TvmFfiVersion { .. } => "tvm_ffi_version",
            Rejection::CudaVersion { .. } => "cuda_version",
            Rejection::RocmVersion { .. } => "rocm_version",
            Rejection::Backend { .. } => "backend",
            Rejection::MacosTooOld { .. } => "macos_too_old",
            Rejection::MlxMissing => "mlx_missing",
            Rejection::NoarchBackend { .. } | Rejection::SdkBackend { .. } => "noarch_backend",
        }
    }

    /// A few words for a table column.
    pub fn short(&self) -> &'static str {
        match self {
            Rejection::NotParsed { .. } => "name not parsed",
            Rejection::FreeThreaded => "free-threaded Python",
            Rejection::PythonTooOld { .. } => "Python version",
            Rejection::Cpu { .. } => "other CPU",
            Rejection::Os { .. } => "other OS",
            Rejection::TorchVersion { .. } => "torch version",
            Rejection::Cxx11Abi { .. } => "C++ ABI",
            Rejection::StableAbiTooNew { .. } => "stable ABI too new",
            Rejection::TvmFfiVersion { .. } => "tvm-ffi version",
            Rejection::CudaVersion { .. } => "CUDA version",
            Rejection::RocmVersion { .. } => "ROCm version",
            Rejection::Backend { .. }
            | Rejection::NoarchBackend { .. }
            | Rejection::SdkBackend { .. } => "backend",
            Rejection::MacosTooOld { .. } => "macOS too old",
            Rejection::MlxMissing => "no MLX",
        }
    }
}

/// Python's `str()` of an optional value, as the hub's messages print it.
struct Py<T>(Option<T>);

impl<T: fmt::Display> fmt::Display for Py<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("None"),
        }
    }
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotParsed { release } => write!(
                f,
                "{release} does not parse this name: it skips the directory"
            ),
            Rejection::FreeThreaded => {
                f.write_str("abi3 is not supported on free-threaded Python, abi3t is required")
            }
            Rejection::PythonTooOld { variant, system } => write!(
                f,
                "Python {variant} or later is required, system Python version is {system}"
            ),
            Rejection::Cpu { variant, system } => {
                write!(f, "CPU ({variant}) does not match system CPU ({system})")
            }
            Rejection::Os { variant, system } => {
                write!(f, "OS ({variant}) does not match system OS ({system})")
            }
            Rejection::TorchVersion { variant, system } => write!(
                f,
                "Torch version ({variant}) does not match environment Torch version ({})",
                Py(*system)
            ),
            Rejection::Cxx11Abi { variant, system } => write!(
                f,
                "Torch CXX11 ABI ({}) does not match environment Torch CXX11 ABI ({})",
                py_bool(*variant),
                Py(system.map(py_bool))
            ),
            Rejection::StableAbiTooNew { variant, system } => write!(
                f,
                "Torch stable ABI version ({variant}) is too new for environment Torch version ({})",
                Py(*system)
            ),
            Rejection::TvmFfiVersion { variant, system } => write!(
                f,
                "tvm-ffi version ({variant}) does not match environment tvm-ffi version ({})",
                Py(*system)
            ),
            Rejection::CudaVersion { variant, system } => write!(
                f,
                "CUDA version ({variant}) is not compatible with system CUDA version ({system})"
            ),
            Rejection::RocmVersion { variant, system } => write!(
                f,
                "ROCm version ({variant}) is not compatible with system ROCm version ({system})"
            ),
            Rejection::Backend { variant, system } => write!(
                f,
                "backend ({variant}) does not match selected backend ({system})"
            ),
            Rejection::MacosTooOld { system } => write!(
                f,
                "Metal kernels require macOS {METAL_MIN_MACOS} or later, system macOS version is {}",
                Py(*system)
            ),
            Rejection::MlxMissing => f.write_str("MLX is not installed in the environment"),
            Rejection::NoarchBackend { variant, system } => write!(
                f,
                "backend ({variant}) does not match system backend ({system}) and is not universal"
            ),
            Rejection::SdkBackend { variant, system } => write!(
                f,
                "backend ({variant}) does not match system backend ({system})"
            ),
        }
    }
}
