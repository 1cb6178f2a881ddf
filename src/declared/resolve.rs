//! Name-level resolution: the same accept/reject decisions and preference
//! order as the hub loader's resolver (`kernels` 0.17,
//! `kernels/src/kernels/variants.py`), as pure functions over data.

use super::system::System;
use crate::variant::{Backend, Cpu, Framework, NoarchBackend, OrOther, Os, VariantName, Version};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt;

/// Metal kernels are built with `-std=metal4.0`, which needs macOS 26.
pub const METAL_MIN_MACOS: Version = Version::new(26, 0);

/// Why a variant cannot be used on a system, judged by its name alone.
///
/// The `Display` text is the hub loader's own wording, so that a person who
/// compares the two traces sees the same reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The variant's CPU is not the system's.
    Cpu {
        /// CPU in the name.
        variant: Cpu,
        /// CPU of the system.
        system: OrOther<Cpu>,
    },
    /// The variant's OS is not the system's.
    Os {
        /// OS in the name.
        variant: Os,
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
    /// Any other backend (and version) must match exactly.
    Backend {
        /// Backend in the name.
        variant: Backend,
        /// Backend of the system.
        system: Backend,
    },
    /// Metal variants need macOS 26 or later.
    MacosTooOld {
        /// macOS version of the system, if any.
        system: Option<Version>,
    },
    /// A noarch variant for another backend.
    NoarchBackend {
        /// Backend in the name.
        variant: NoarchBackend,
        /// The system's backend as a noarch name (`npu` for `cann`).
        system: &'static str,
    },
}

impl Rejection {
    /// A stable machine-readable code for the kind of rejection.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Cpu { .. } => "cpu",
            Rejection::Os { .. } => "os",
            Rejection::TorchVersion { .. } => "torch_version",
            Rejection::Cxx11Abi { .. } => "cxx11_abi",
            Rejection::StableAbiTooNew { .. } => "stable_abi_too_new",
            Rejection::TvmFfiVersion { .. } => "tvm_ffi_version",
            Rejection::CudaVersion { .. } => "cuda_version",
            Rejection::Backend { .. } => "backend",
            Rejection::MacosTooOld { .. } => "macos_too_old",
            Rejection::NoarchBackend { .. } => "noarch_backend",
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
            Rejection::Backend { variant, system } => write!(
                f,
                "backend ({variant}) does not match selected backend ({system})"
            ),
            Rejection::MacosTooOld { system } => write!(
                f,
                "Metal kernels require macOS {METAL_MIN_MACOS} or later, system macOS version is {}",
                Py(*system)
            ),
            Rejection::NoarchBackend { variant, system } => write!(
                f,
                "backend ({}) does not match system backend ({system}) and is not universal",
                variant.as_str()
            ),
        }
    }
}

/// The name-level verdict on one variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The variant judged.
    pub variant: VariantName,
    /// `None` when accepted, else why not.
    pub rejection: Option<Rejection>,
}

impl Decision {
    /// Whether the variant can be used on the system, by its name.
    pub fn accepted(&self) -> bool {
        self.rejection.is_none()
    }
}

impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Decision", 4)?;
        st.serialize_field("variant", &self.variant.to_string())?;
        st.serialize_field("accepted", &self.accepted())?;
        st.serialize_field("reason", &self.rejection.as_ref().map(ToString::to_string))?;
        st.serialize_field("rejection", &self.rejection.as_ref().map(Rejection::code))?;
        st.end()
    }
}

/// Judge one variant against a system.
pub fn check(variant: &VariantName, system: &System) -> Option<Rejection> {
    match variant {
        VariantName::Arch {
            framework,
            backend,
            cpu,
            os,
        } => check_arch(framework, backend, *cpu, *os, system),
        VariantName::Noarch { backend } => {
            let wanted = system.noarch_backend();
            (backend.as_str() != wanted && *backend != NoarchBackend::Universal).then_some(
                Rejection::NoarchBackend {
                    variant: *backend,
                    system: wanted,
                },
            )
        }
    }
}

fn check_arch(
    framework: &Framework,
    backend: &Backend,
    cpu: Cpu,
    os: Os,
    system: &System,
) -> Option<Rejection> {
    if system.cpu != OrOther::Known(cpu) {
        return Some(Rejection::Cpu {
            variant: cpu,
            system: system.cpu.clone(),
        });
    }
    if system.os != OrOther::Known(os) {
        return Some(Rejection::Os {
            variant: os,
            system: system.os.clone(),
        });
    }
    match *framework {
        Framework::Torch { version, cxx11_abi } => {
            if Some(version) != system.torch {
                return Some(Rejection::TorchVersion {
                    variant: version,
                    system: system.torch,
                });
            }
            if let Some(abi) = cxx11_abi
                && Some(abi) != system.cxx11_abi
            {
                return Some(Rejection::Cxx11Abi {
                    variant: abi,
                    system: system.cxx11_abi,
                });
            }
        }
        Framework::TorchStableAbi { version } => {
            if system.torch.is_none_or(|torch| version > torch) {
                return Some(Rejection::StableAbiTooNew {
                    variant: version,
                    system: system.torch,
                });
            }
        }
        Framework::TvmFfi { version } => {
            if Some(version) != system.tvm_ffi {
                return Some(Rejection::TvmFfiVersion {
                    variant: version,
                    system: system.tvm_ffi,
                });
            }
        }
    }
    match (backend, &system.backend) {
        (Backend::Cuda(v), Backend::Cuda(sys)) => (v.major != sys.major || v.minor > sys.minor)
            .then_some(Rejection::CudaVersion {
                variant: *v,
                system: *sys,
            }),
        (v, sys) if v != sys => Some(Rejection::Backend {
            variant: *v,
            system: *sys,
        }),
        (Backend::Metal, _) if system.macos.is_none_or(|m| m < METAL_MIN_MACOS) => {
            Some(Rejection::MacosTooOld {
                system: system.macos,
            })
        }
        _ => None,
    }
}

/// The hub's preference key: accepted first; stable ABI (newest first), then
/// torch (untagged before tagged), then tvm-ffi arch variants, each by the
/// backend's minor version descending; then noarch, `universal` last.
///
/// The key deliberately looks only at the backend's *minor* version, as the
/// hub does; ties keep the input order (the sort is stable).
fn preference(d: &Decision) -> (u8, u8, i128, i128, i128) {
    let rejected = u8::from(!d.accepted());
    match &d.variant {
        VariantName::Arch {
            framework, backend, ..
        } => {
            let (order, a, b) = match framework {
                Framework::TorchStableAbi { version } => {
                    (0, -i128::from(version.major), -i128::from(version.minor))
                }
                Framework::Torch { cxx11_abi, .. } => (1, 0, i128::from(cxx11_abi.is_some())),
                Framework::TvmFfi { .. } => (2, 0, 0),
            };
            let backend_order = backend.version().map_or(0, |v| -i128::from(v.minor));
            (rejected, order, a, b, backend_order)
        }
        VariantName::Noarch { backend } => (
            rejected,
            2,
            0,
            0,
            i128::from(*backend == NoarchBackend::Universal),
        ),
    }
}

/// Judge every variant and sort the trace in the hub's preference order:
/// accepted variants first, the most preferred leading.
pub fn resolve<'a>(
    variants: impl IntoIterator<Item = &'a VariantName>,
    system: &System,
) -> Vec<Decision> {
    let mut trace: Vec<Decision> = variants
        .into_iter()
        .map(|v| Decision {
            variant: v.clone(),
            rejection: check(v, system),
        })
        .collect();
    trace.sort_by_key(preference);
    trace
}
