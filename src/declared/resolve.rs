//! Name-level resolution: the same accept/reject decisions and preference
//! order as the hub loader's resolver (`kernels`' `variants.py`), per
//! supported release ([`Release`]), as pure functions over data.

use super::rejection::Rejection;
use super::rules::Release;
use super::system::System;
use crate::variant::{
    Abi, Backend, Framework, NoarchFramework, OrOther, Os, PythonTag, Sdk, VariantName, Version,
};
use serde::ser::{Serialize, SerializeStruct, Serializer};

pub use super::rejection::METAL_MIN_MACOS;

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

/// A name as one release reads it.
enum Read<'a> {
    /// A compiled variant of a framework.
    Arch {
        framework: &'a Framework,
        backend: Backend,
        python: PythonTag,
        cpu: &'a OrOther<crate::variant::Cpu>,
        os: &'a OrOther<Os>,
        /// The backend as the name spells it, for messages.
        spelled: String,
    },
    /// A pure-Python variant; `backend` as the release reads it.
    Noarch {
        framework: NoarchFramework,
        backend: String,
    },
    /// `sdk`.
    SdkAny,
    /// `sdk-<backend>`.
    SdkFor(String),
    /// `sdk[-<backend>]-cpython-…-<cpu>-<os>`.
    SdkCompiled {
        backend: Option<Backend>,
        python: PythonTag,
        cpu: &'a OrOther<crate::variant::Cpu>,
        os: &'a OrOther<Os>,
    },
    /// The release does not parse it.
    NotParsed,
}

/// How `release` reads `name`. Before 0.19, a dotted torch name is a noarch
/// variant whose backend is everything after `torch-` (their noarch rule is
/// "starts with `torch-`"); the other new forms do not parse.
fn read(name: &VariantName, release: Release) -> Read<'_> {
    match name {
        VariantName::Arch {
            framework,
            backend,
            python,
            cpu,
            os,
        } => match python {
            Some(python) if release.dotted_names() => Read::Arch {
                framework,
                backend: *backend,
                python: *python,
                cpu,
                os,
                spelled: backend.dotted(),
            },
            None => {
                let backend = if release.dotted_names() {
                    *backend
                } else {
                    backend.read_before_0_19()
                };
                Read::Arch {
                    framework,
                    backend,
                    python: PythonTag::LEGACY,
                    cpu,
                    os,
                    spelled: backend.to_string(),
                }
            }
            Some(_) => match framework {
                Framework::Torch { .. } => Read::Noarch {
                    framework: NoarchFramework::Torch,
                    backend: name.to_string()["torch-".len()..].to_string(),
                },
                _ => Read::NotParsed,
            },
        },
        VariantName::Noarch { framework, backend }
            if release.dotted_names() || *framework == NoarchFramework::Torch =>
        {
            Read::Noarch {
                framework: *framework,
                backend: backend.to_string(),
            }
        }
        VariantName::Sdk(sdk) if release.dotted_names() => match sdk {
            Sdk::Any => Read::SdkAny,
            Sdk::For(backend) => Read::SdkFor(backend.to_string()),
            Sdk::Compiled {
                backend,
                python,
                cpu,
                os,
            } => Read::SdkCompiled {
                backend: *backend,
                python: *python,
                cpu,
                os,
            },
        },
        _ => Read::NotParsed,
    }
}

/// Judge one variant against a system, by the rules of the release the
/// system's environment has ([`System::rules`]).
pub fn check(variant: &VariantName, system: &System) -> Option<Rejection> {
    let release = system.rules().release;
    match read(variant, release) {
        Read::NotParsed => Some(Rejection::NotParsed { release }),
        Read::Arch {
            framework,
            backend,
            python,
            cpu,
            os,
            spelled,
        } => python_mismatch(python, system, release)
            .or_else(|| system_mismatch(cpu, os, system))
            .or_else(|| framework_mismatch(framework, system))
            .or_else(|| backend_mismatch(backend, spelled, system, release)),
        Read::Noarch { framework, backend } => {
            if framework == NoarchFramework::Mlx && !system.mlx {
                return Some(Rejection::MlxMissing);
            }
            let wanted = noarch_name(system, release);
            (backend != wanted && backend != "universal").then_some(Rejection::NoarchBackend {
                variant: backend,
                system: wanted,
            })
        }
        Read::SdkAny => None,
        Read::SdkFor(backend) => {
            let wanted = system.backend.kind();
            (backend != wanted).then_some(Rejection::SdkBackend {
                variant: backend,
                system: wanted,
            })
        }
        Read::SdkCompiled {
            backend,
            python,
            cpu,
            os,
        } => python_mismatch(python, system, release)
            .or_else(|| system_mismatch(cpu, os, system))
            .or_else(|| backend.and_then(|b| backend_mismatch(b, b.dotted(), system, release))),
    }
}

/// The system's backend as `release` names it for noarch variants: 0.17
/// and 0.18 call a CANN system's `npu`, 0.19 its own name `cann`.
fn noarch_name(system: &System, release: Release) -> &'static str {
    match system.backend {
        Backend::Cann(_) if !release.dotted_names() => "npu",
        other => other.kind(),
    }
}

/// 0.19 first asks whether the Python can load the compiled parts; older
/// releases do not ask. An unknown Python is not held against a variant.
fn python_mismatch(python: PythonTag, system: &System, release: Release) -> Option<Rejection> {
    if !release.dotted_names() {
        return None;
    }
    if python.abi == Abi::Abi3 && system.free_threaded {
        return Some(Rejection::FreeThreaded);
    }
    let sys = system.python?;
    (sys < python.min).then_some(Rejection::PythonTooOld {
        variant: python.min,
        system: sys,
    })
}

fn system_mismatch(
    cpu: &OrOther<crate::variant::Cpu>,
    os: &OrOther<Os>,
    system: &System,
) -> Option<Rejection> {
    if *cpu != system.cpu {
        return Some(Rejection::Cpu {
            variant: cpu.clone(),
            system: system.cpu.clone(),
        });
    }
    (*os != system.os).then(|| Rejection::Os {
        variant: os.clone(),
        system: system.os.clone(),
    })
}

fn framework_mismatch(framework: &Framework, system: &System) -> Option<Rejection> {
    match *framework {
        Framework::Torch { version, cxx11_abi } => {
            if Some(version) != system.torch {
                return Some(Rejection::TorchVersion {
                    variant: version,
                    system: system.torch,
                });
            }
            cxx11_abi
                .filter(|abi| Some(*abi) != system.cxx11_abi)
                .map(|abi| Rejection::Cxx11Abi {
                    variant: abi,
                    system: system.cxx11_abi,
                })
        }
        Framework::TorchStableAbi { version } => system
            .torch
            .is_none_or(|torch| version > torch)
            .then_some(Rejection::StableAbiTooNew {
                variant: version,
                system: system.torch,
            }),
        Framework::TvmFfi { version } => {
            (Some(version) != system.tvm_ffi).then_some(Rejection::TvmFfiVersion {
                variant: version,
                system: system.tvm_ffi,
            })
        }
    }
}

/// CUDA (and, from 0.18, ROCm) variants run within the system's major, up
/// to its minor; any other backend must match exactly; Metal needs macOS 26.
fn backend_mismatch(
    backend: Backend,
    spelled: String,
    system: &System,
    release: Release,
) -> Option<Rejection> {
    let outside = |v: Version, sys: Version| v.major != sys.major || v.minor > sys.minor;
    // Before 0.19 backends are compared by their legacy spelling, so that a
    // `rocm714` read as 71.4 still matches a ROCm 7.14 system.
    let differs = |v: Backend, sys: Backend| {
        if release.dotted_names() {
            v != sys
        } else {
            v.to_string() != sys.to_string()
        }
    };
    match (backend, system.backend) {
        (Backend::Cuda(v), Backend::Cuda(sys)) => {
            outside(v, sys).then_some(Rejection::CudaVersion {
                variant: v,
                system: sys,
            })
        }
        (Backend::Rocm(v), Backend::Rocm(sys)) if release.rocm_within_major() => outside(v, sys)
            .then_some(Rejection::RocmVersion {
                variant: v,
                system: sys,
            }),
        (v, sys) if differs(v, sys) => Some(Rejection::Backend {
            variant: spelled,
            system: sys,
        }),
        (Backend::Metal, _) if system.macos.is_none_or(|m| m < METAL_MIN_MACOS) => {
            Some(Rejection::MacosTooOld {
                system: system.macos,
            })
        }
        _ => None,
    }
}

/// The order of the arch and SDK frameworks, then the noarch and backend
/// SDK groups, in 0.19's preference (older releases: stable ABI, torch,
/// then tvm-ffi and noarch together).
type Key = [i128; 8];

/// The hub's preference key: accepted first; then by framework group, each
/// by the backend's *minor* version descending (as the hub does, ignoring
/// the major), then (0.19) `abi3` before `abi3t` and the newest Python
/// first; names the release does not parse last. Ties keep the input order
/// (the sort is stable).
fn preference(d: &Decision, release: Release) -> Key {
    let rejected = match &d.rejection {
        None => 0,
        Some(Rejection::NotParsed { .. }) => return [2, 0, 0, 0, 0, 0, 0, 0],
        Some(_) => 1,
    };
    let backend_order = |b: &Backend| b.version().map_or(0, |v| -i128::from(v.minor));
    let python_order = |p: PythonTag| {
        let abi = i128::from(p.abi == Abi::Abi3t);
        [abi, -i128::from(p.min.major), -i128::from(p.min.minor)]
    };
    let modern = release.dotted_names();
    match read(&d.variant, release) {
        Read::NotParsed => [2, 0, 0, 0, 0, 0, 0, 0],
        Read::Arch {
            framework,
            backend,
            python,
            ..
        } => {
            let (group, a, b) = match framework {
                Framework::TorchStableAbi { version } => {
                    (0, -i128::from(version.major), -i128::from(version.minor))
                }
                Framework::Torch { cxx11_abi, .. } => (1, 0, i128::from(cxx11_abi.is_some())),
                Framework::TvmFfi { .. } => (2, 0, 0),
            };
            let [abi, major, minor] = if modern { python_order(python) } else { [0; 3] };
            [
                rejected,
                group,
                a,
                b,
                backend_order(&backend),
                abi,
                major,
                minor,
            ]
        }
        Read::SdkCompiled {
            backend, python, ..
        } => {
            let order = backend.as_ref().map_or(1, backend_order);
            let [abi, major, minor] = python_order(python);
            [rejected, 3, 0, 0, order, abi, major, minor]
        }
        Read::Noarch { backend, .. } => {
            let group = if modern { 4 } else { 2 };
            [
                rejected,
                group,
                0,
                0,
                i128::from(backend == "universal"),
                0,
                0,
                0,
            ]
        }
        Read::SdkFor(_) => [rejected, 5, 0, 0, 0, 0, 0, 0],
        Read::SdkAny => [rejected, 6, 0, 0, 0, 0, 0, 0],
    }
}

/// Judge every variant and sort the trace in the hub's preference order:
/// accepted variants first, the most preferred leading; names the release
/// does not parse come last.
pub fn resolve<'a>(
    variants: impl IntoIterator<Item = &'a VariantName>,
    system: &System,
) -> Vec<Decision> {
    let release = system.rules().release;
    let mut trace: Vec<Decision> = variants
        .into_iter()
        .map(|v| Decision {
            variant: v.clone(),
            rejection: check(v, system),
        })
        .collect();
    trace.sort_by_cached_key(|d| preference(d, release));
    trace
}
