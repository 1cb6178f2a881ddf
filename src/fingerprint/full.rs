//! The full fingerprint's measured facts: what only libcuda or Python can
//! tell (compute capability, CUDA's own device numbering, the CUDA driver
//! API version, the exact Python version, torch's C++ ABI).
//!
//! Measuring starts child processes, which is the probe layer's work
//! (`probe::machine`); this module holds what is measured, how it joins the
//! fast fingerprint ([`super::Fingerprint::with_measured`]), and how it is
//! kept in a [`FactStore`] under the fast fingerprint's hash.

use super::facts::{FactStore, MeasuredFacts, Stat};
use super::gpu::Libcuda;
use super::python::PythonMeasured;
use super::{ComputeCapability, Fingerprint, FingerprintError, Sources};
use crate::variant::Version;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the measuring children reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    /// The outcome of loading libcuda (in the cuda executor's child).
    pub libcuda: Libcuda,
    /// `cuDriverGetVersion`, which answers even when `cuInit` fails.
    pub cuda_driver_api: Option<Version>,
    /// The devices CUDA enumerates, in its ordinal order.
    pub devices: Vec<MeasuredDevice>,
    /// What the Python child said; `None`: no interpreter to ask.
    pub python: Option<PythonMeasured>,
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
    /// Compute capability (attributes 75 and 76).
    pub compute_capability: ComputeCapability,
}

impl Measured {
    /// Whether these facts may be kept as what the machine is: libcuda's
    /// outcome is settled ([`Libcuda::is_settled`]) and Python, if there is
    /// one, answered. Anything else is reported now and measured again next
    /// time.
    pub fn is_settled(&self) -> bool {
        self.libcuda.is_settled()
            && !matches!(self.python, Some(PythonMeasured::NotMeasured { .. }))
    }
}

/// Default limit for each measuring child (importing torch can take a
/// while on a cold file system, `cuInit` on a large machine too);
/// `PREFLIGHT_FULL_TIMEOUT` sets another, in seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// `PREFLIGHT_FULL_TIMEOUT` in seconds, else [`DEFAULT_TIMEOUT`].
pub fn timeout(src: &Sources) -> Result<Duration, FingerprintError> {
    let t = src.override_parsed("PREFLIGHT_FULL_TIMEOUT", |s| {
        s.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| "expected a positive number of seconds".to_string())
    })?;
    Ok(t.unwrap_or(DEFAULT_TIMEOUT))
}

/// Variable naming the driver library to load instead of `libcuda.so.1`
/// (the cuda executor's `PREFLIGHT_LIBCUDA`).
pub const LIBCUDA_VAR: &str = "PREFLIGHT_LIBCUDA";

/// The `stat`s of what tells the measured facts of the machine `fast`
/// describes: its interpreter, and the driver library named by
/// [`LIBCUDA_VAR`]. Kept with the facts, so that a replaced one is asked
/// again.
fn witnesses(src: &Sources, fast: &Fingerprint) -> (Option<Stat>, Option<Stat>) {
    let interpreter = fast.python.as_ref().and_then(|p| Stat::of(&p.interpreter));
    let libcuda = src.var(LIBCUDA_VAR).and_then(|p| Stat::of(Path::new(p)));
    (interpreter, libcuda)
}

/// The facts measured before for the machine `fast` describes, as kept in
/// `store`, if the interpreter and driver library that told them are
/// unchanged.
pub fn cached(src: &Sources, store: &dyn FactStore, fast: &Fingerprint) -> Option<Measured> {
    let hit = store.measured(&fast.hash())?;
    let (interpreter, libcuda) = witnesses(src, fast);
    (hit.interpreter == interpreter && hit.libcuda == libcuda).then_some(hit.measured)
}

/// The interpreters of this machine, other than `fast`'s, whose
/// environment was measured and kept in `store` and is unchanged since (its
/// interpreter's `stat` the same), sorted: where `labels` can point a user
/// whose own environment was never measured.
pub fn measured_elsewhere(store: &dyn FactStore, fast: &Fingerprint) -> Vec<PathBuf> {
    let own = fast.python.as_ref().map(|p| &p.interpreter);
    let mut found: Vec<PathBuf> = store
        .every_measured()
        .into_iter()
        .filter_map(|facts| {
            let path = facts.interpreter_path?;
            let unchanged = facts.interpreter.is_some() && Stat::of(&path) == facts.interpreter;
            (unchanged && Some(&path) != own).then_some(path)
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Keep `measured` in `store` for the machine `fast` describes, if it is
/// settled ([`Measured::is_settled`]); a store that cannot write forgets.
pub fn remember(src: &Sources, store: &dyn FactStore, fast: &Fingerprint, measured: &Measured) {
    if !measured.is_settled() {
        return;
    }
    let (interpreter, libcuda) = witnesses(src, fast);
    let facts = MeasuredFacts {
        interpreter,
        libcuda,
        measured: measured.clone(),
        interpreter_path: fast.python.as_ref().map(|p| p.interpreter.clone()),
    };
    store.keep_measured(&fast.hash(), &facts);
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
