//! The full fingerprint's measured facts: what only libcuda or Python can
//! tell (compute capability, CUDA driver API version, the exact Python
//! version, torch's C++ ABI). Measured once in a sandboxed child with a time
//! limit, then cached under the fast fingerprint's hash.

use super::child::{self, NotRun};
use super::facts::{FactStore, MeasuredFacts, Stat};
use super::gpu::Libcuda;
use super::{FingerprintError, Sources};
use crate::sandbox::Termination;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// What the measuring child reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    /// The outcome of loading libcuda.
    pub libcuda: Libcuda,
    /// `cuDriverGetVersion` as `major.minor`.
    pub cuda_driver_api: Option<String>,
    /// The devices CUDA enumerates.
    pub devices: Vec<MeasuredDevice>,
    /// The interpreter's exact version (`platform.python_version()`).
    pub python_version: Option<String>,
    /// `torch.compiled_with_cxx11_abi()`, if torch imports.
    pub torch_cxx11_abi: Option<bool>,
}

/// One device as the CUDA driver API sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredDevice {
    /// CUDA's ordinal for it (after `CUDA_VISIBLE_DEVICES` and
    /// `CUDA_DEVICE_ORDER`).
    pub ordinal: u32,
    /// `cuDeviceGetPCIBusId`, normalized to `dddd:bb:dd.f`.
    pub pci_bus_id: String,
    /// `cuDeviceGetName`.
    pub name: String,
    /// Compute capability `major.minor` (attributes 75 and 76).
    pub compute_capability: String,
}

/// Default limit for the measuring child (importing torch can take a while
/// on a cold file system); `PREFLIGHT_FULL_TIMEOUT` sets another, in seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs in the child. Loads libcuda with ctypes; its absence is a fact, not
/// an error. Writes one JSON object to `$PREFLIGHT_RESULT`.
const SCRIPT: &str = r#"
import ctypes, json, os, platform
out = {"libcuda": {"status": "missing"}, "cuda_driver_api": None, "devices": [],
       "python_version": platform.python_version(), "torch_cxx11_abi": None}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    cuda = None
if cuda is not None:
    v = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(v)) == 0:
        out["cuda_driver_api"] = "%d.%d" % (v.value // 1000, (v.value % 1000) // 10)
    rc = cuda.cuInit(0)
    if rc != 0:
        out["libcuda"] = {"status": "init_failed", "code": rc}
    else:
        out["libcuda"] = {"status": "ok"}
        n = ctypes.c_int(0)
        cuda.cuDeviceGetCount(ctypes.byref(n))
        for i in range(n.value):
            dev = ctypes.c_int(0)
            if cuda.cuDeviceGet(ctypes.byref(dev), i) != 0:
                continue
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
            cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
            name = ctypes.create_string_buffer(256)
            cuda.cuDeviceGetName(name, 256, dev)
            bus = ctypes.create_string_buffer(64)
            cuda.cuDeviceGetPCIBusId(bus, 64, dev)
            out["devices"].append({"ordinal": i, "pci_bus_id": bus.value.decode(errors="replace"),
                                   "name": name.value.decode(errors="replace"),
                                   "compute_capability": "%d.%d" % (major.value, minor.value)})
try:
    import torch
    out["torch_cxx11_abi"] = bool(torch.compiled_with_cxx11_abi())
except Exception:
    pass
with open(os.environ["PREFLIGHT_RESULT"], "w") as f:
    json.dump(out, f)
"#;

/// The measured facts for the machine whose fast fingerprint hashes to
/// `fast_hash`: from `store`, else measured now with `python` (within
/// `timeout`) and kept there.
pub(crate) fn measured(
    src: &Sources,
    store: &dyn FactStore,
    python: Option<&Path>,
    fast_hash: &str,
    timeout: Duration,
) -> Measured {
    let interpreter = python.and_then(Stat::of);
    if let Some(hit) = store.measured(fast_hash)
        && hit.interpreter == interpreter
    {
        return hit.measured;
    }
    let result = match python {
        Some(python) => measure(src, python, timeout),
        None => Err("no Python interpreter to load libcuda with".to_string()),
    };
    match result {
        Ok(measured) => {
            let facts = MeasuredFacts {
                interpreter,
                measured,
            };
            store.keep_measured(fast_hash, &facts);
            facts.measured
        }
        // A failed measurement is not cached: the next call tries again.
        Err(reason) => Measured {
            libcuda: Libcuda::NotMeasured { reason },
            cuda_driver_api: None,
            devices: Vec::new(),
            python_version: None,
            torch_cxx11_abi: None,
        },
    }
}

/// `PREFLIGHT_FULL_TIMEOUT` in seconds, else [`DEFAULT_TIMEOUT`].
pub(crate) fn timeout(src: &Sources) -> Result<Duration, FingerprintError> {
    let t = src.override_parsed("PREFLIGHT_FULL_TIMEOUT", |s| {
        s.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| "expected a positive number of seconds".to_string())
    })?;
    Ok(t.unwrap_or(DEFAULT_TIMEOUT))
}

fn measure(src: &Sources, python: &Path, timeout: Duration) -> Result<Measured, String> {
    // Not `-I`: the child must see PYTHONPATH and the user site as kernels
    // do. The sandbox's fresh working directory keeps a stray `torch/`
    // folder from shadowing the installed one.
    let ran = child::run(python, &["-c", SCRIPT], &src.env, timeout).map_err(|e| match e {
        NotRun::Unusable(why) | NotRun::Sandbox(why) => why,
    })?;
    let report = &ran.report;
    if report.termination != (Termination::Exited { code: 0 }) {
        let said = report.stderr.tail_lines(1).trim().to_string();
        let ended = format!("measuring child {}", report.termination);
        return Err(if said.is_empty() {
            ended
        } else {
            format!("{ended}: {said}")
        });
    }
    let bytes = ran
        .result
        .ok_or_else(|| "measuring child wrote no result".to_string())?;
    let mut m: Measured = serde_json::from_slice(&bytes)
        .map_err(|e| format!("measuring child wrote an unreadable result ({e})"))?;
    for d in &mut m.devices {
        d.pci_bus_id = normalize_bus_id(&d.pci_bus_id);
    }
    Ok(m)
}

/// `00000000:3B:00.0` or `0000:3b:00.0` → `0000:3b:00.0`, as sysfs names it.
pub fn normalize_bus_id(id: &str) -> String {
    let parse = || {
        let (domain, rest) = id.trim().split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (dev, func) = rest.split_once('.')?;
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        Some(format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            hex(domain)?,
            hex(bus)?,
            hex(dev)?,
            hex(func)?
        ))
    };
    parse().unwrap_or_else(|| id.trim().to_ascii_lowercase())
}
