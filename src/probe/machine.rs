//! Measuring this machine for the full fingerprint: what only a child
//! process can tell. The CUDA facts (compute capability and CUDA's own
//! numbering of every device, the driver API version, whether `cuInit`
//! works) come from the cuda executor's child asked for the device list
//! ([`Subject::Devices`]: the `preflight` binary itself, libcuda loaded
//! dynamically), so no Python is needed for them; the
//! Python facts (its exact version, torch's C++ ABI) come from the
//! interpreter, only when there is one. Both run in the sandbox with a time
//! limit, side by side; whatever goes wrong is a fact, never an error.

use super::cuda::CudaExecutor;
use super::{Executor, Job, Subject};
use crate::fingerprint::child::{self, NotRun};
use crate::fingerprint::full::{self, normalize_bus_id};
use crate::fingerprint::{
    FactStore, Fingerprint, FingerprintError, Libcuda, Measured, MeasuredDevice, PythonMeasured,
    Sources,
};
use crate::protocol::{DeviceInfo, Failure};
use crate::sandbox::{Cancel, Limits, Termination, is_secret_name};
use crate::variant::Version;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The full fingerprint of the machine `src` describes: the fast one with
/// the measured facts, from `store` or measured now and kept there when
/// they are settled ([`Measured::is_settled`]). `preflight` is the binary
/// whose hidden child mode measures CUDA (`std::env::current_exe()` inside
/// preflight).
pub fn full_fingerprint(
    src: &Sources,
    store: &dyn FactStore,
    preflight: &Path,
) -> Result<Fingerprint, FingerprintError> {
    let timeout = full::timeout(src)?;
    let fast = Fingerprint::fast(src, store)?;
    let measured = match full::cached(src, store, &fast) {
        Some(hit) => hit,
        None => {
            let measured = measure(src, &fast, preflight, timeout);
            full::remember(src, store, &fast, &measured);
            measured
        }
    };
    fast.with_measured(measured, src)
}

/// Measure now, without the cache: CUDA through `preflight`'s cuda child,
/// Python through the interpreter of `fast` if it has one; both at once,
/// each within `timeout`.
pub fn measure(src: &Sources, fast: &Fingerprint, preflight: &Path, timeout: Duration) -> Measured {
    let interpreter = fast.python.as_ref().map(|p| p.interpreter.as_path());
    // torch's ABI is asked of an imported torch (seconds) only when its
    // files did not say it.
    let ask_torch = fast
        .python
        .as_ref()
        .and_then(|p| p.torch.as_ref())
        .is_some_and(|t| t.cxx11_abi.is_none());
    let (cuda, python) = std::thread::scope(|scope| {
        let measure_python = || interpreter.map(|i| python(src, i, ask_torch, timeout));
        // No thread to spare (a process limit reached) is no reason to
        // panic: then one after the other.
        let spawned = std::thread::Builder::new().spawn_scoped(scope, measure_python);
        let cuda = cuda(src, preflight, timeout);
        let python = match spawned {
            Ok(thread) => thread.join().unwrap_or_else(|_| {
                Some(PythonMeasured::NotMeasured {
                    reason: "the thread measuring Python panicked".into(),
                })
            }),
            Err(_) => measure_python(),
        };
        (cuda, python)
    });
    Measured {
        libcuda: cuda.libcuda,
        cuda_driver_api: cuda.driver_api,
        devices: cuda.devices,
        python,
    }
}

/// What the cuda child said.
struct CudaFacts {
    libcuda: Libcuda,
    driver_api: Option<Version>,
    devices: Vec<MeasuredDevice>,
}

impl CudaFacts {
    fn not_measured(reason: String) -> CudaFacts {
        CudaFacts {
            libcuda: Libcuda::NotMeasured { reason },
            driver_api: None,
            devices: Vec::new(),
        }
    }
}

/// A device-list job for the cuda executor, in the environment kernels see
/// (`CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` decide its ordinals),
/// without credentials.
fn cuda(src: &Sources, preflight: &Path, timeout: Duration) -> CudaFacts {
    let mut executor = CudaExecutor::new(preflight);
    // The child works in its own folder: a relative path would move.
    executor.libcuda = src
        .var(full::LIBCUDA_VAR)
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| PathBuf::from(p)));
    executor.env = src
        .env
        .iter()
        .filter(|(k, _)| !is_secret_name(OsStr::new(k)))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let job = Job {
        limits: Limits {
            timeout,
            grace: Duration::from_secs(2),
            ..Limits::default()
        },
        ..Job::new(Subject::Devices)
    };
    let evidence = match executor.run(&job, &Cancel::new()) {
        Ok(evidence) => evidence,
        Err(e) => return CudaFacts::not_measured(format!("cannot run the cuda child: {e}")),
    };
    let report = evidence.report();
    let libcuda = match &report.failure {
        Some((_, Failure::LibraryMissing { .. })) => Libcuda::Missing,
        Some((_, Failure::Cuda(e))) if e.call == "cuInit" => Libcuda::InitFailed { code: e.code },
        Some((_, other)) => Libcuda::NotMeasured {
            reason: said(other),
        },
        None if report.done() => Libcuda::Ok,
        None => Libcuda::NotMeasured {
            reason: ended(
                "the cuda child",
                &evidence.termination,
                last_line(&evidence.stderr),
            ),
        },
    };
    CudaFacts {
        libcuda,
        driver_api: report.runtime.cuda_driver.map(api_version),
        devices: report.devices.into_iter().map(measured_device).collect(),
    }
}

/// `cuDriverGetVersion`'s `12080` → 12.8.
fn api_version(v: u32) -> Version {
    Version::new(u64::from(v / 1000), u64::from(v % 1000 / 10))
}

fn measured_device(d: DeviceInfo) -> MeasuredDevice {
    MeasuredDevice {
        ordinal: d.ordinal,
        pci_bus_id: normalize_bus_id(d.pci_bus_id.as_deref().unwrap_or_default()),
        compute_capability: d.capability(),
        name: d.name,
    }
}

/// A failure other than a missing library or `cuInit`, in one line.
fn said(failure: &Failure) -> String {
    match failure {
        Failure::Cuda(e) => format!("{}: {} ({})", e.call, e.name, e.code),
        Failure::LibraryMissing { detail, .. } | Failure::SymbolMissing { detail } => {
            detail.clone()
        }
        Failure::InvalidInput { message } | Failure::Internal { message, .. } => message.clone(),
        other => format!("the cuda child failed: {other:?}"),
    }
}

/// The last line a child printed that says something.
fn last_line(output: &str) -> &str {
    output
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
}

/// How a child that gave no answer ended, with the last line it printed.
fn ended(what: &str, termination: &Termination, last: &str) -> String {
    if last.is_empty() {
        format!("{what} {termination}")
    } else {
        format!("{what} {termination}: {last}")
    }
}

/// Runs in the Python child: the exact version, then, when its argument
/// is `torch`, torch's ABI if torch imports. Writes one JSON object (a
/// [`PythonMeasured`]) to `$PREFLIGHT_RESULT`.
const PYTHON_SCRIPT: &str = r#"
import json, os, platform, sys
out = {"status": "ok", "version": platform.python_version(), "torch_cxx11_abi": None}
try:
    if sys.argv[1:] == ["torch"]:
        import torch
        out["torch_cxx11_abi"] = bool(torch.compiled_with_cxx11_abi())
except Exception:
    pass
with open(os.environ["PREFLIGHT_RESULT"], "w") as f:
    json.dump(out, f)
"#;

fn python(src: &Sources, interpreter: &Path, ask_torch: bool, timeout: Duration) -> PythonMeasured {
    let not_measured = |reason| PythonMeasured::NotMeasured { reason };
    // Not `-I`: the child must see PYTHONPATH and the user site as kernels
    // do. The sandbox's fresh working directory keeps a stray `torch/`
    // folder from shadowing the installed one.
    let args: &[&str] = if ask_torch {
        &["-c", PYTHON_SCRIPT, "torch"]
    } else {
        &["-c", PYTHON_SCRIPT]
    };
    let ran = match child::run(interpreter, args, None, &src.env, timeout) {
        Ok(ran) => ran,
        Err(NotRun::Unusable(why) | NotRun::Sandbox(why)) => return not_measured(why),
    };
    if ran.report.termination != (Termination::Exited { code: 0 }) {
        let last = ran.report.stderr.tail_lines(1);
        return not_measured(ended(
            "the Python child",
            &ran.report.termination,
            last.trim(),
        ));
    }
    match ran.result.map(|bytes| serde_json::from_slice(&bytes)) {
        Some(Ok(answer @ PythonMeasured::Ok { .. })) => answer,
        Some(Ok(PythonMeasured::NotMeasured { .. }) | Err(_)) => {
            not_measured("the Python child wrote an unreadable result".into())
        }
        None => not_measured("the Python child wrote no result".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_as_major_minor() {
        assert_eq!(api_version(12080), Version::new(12, 8));
        assert_eq!(api_version(13000), Version::new(13, 0));
        assert_eq!(api_version(11040), Version::new(11, 4));
    }
}
