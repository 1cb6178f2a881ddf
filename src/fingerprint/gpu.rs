//! GPUs and the NVIDIA driver, read from `/sys` and `/proc` only: no libcuda,
//! no NVML, nothing that wakes a GPU.

use super::{ComputeCapability, FingerprintError, Sources};
use crate::variant::Version;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The NVIDIA driver and the GPUs on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpus {
    /// Kernel module version (`535.146.02`); `None`: no NVIDIA driver loaded.
    pub driver: Option<String>,
    /// NVIDIA display and 3D controllers, ordered by PCI bus id.
    pub devices: Vec<Gpu>,
    /// CUDA driver API version that libcuda reports (`12.8`); full fingerprint only.
    pub cuda_driver_api: Option<Version>,
    /// What happened when libcuda was loaded; full fingerprint only.
    pub libcuda: Option<Libcuda>,
}

/// One NVIDIA GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// PCI address, `dddd:bb:dd.f` in lower case.
    pub pci_bus_id: String,
    /// PCI device id (`0x2330`).
    pub device_id: String,
    /// Model name from the driver (`NVIDIA H100 80GB HBM3`), when it says.
    #[serde(default)]
    pub model: Option<String>,
    /// Ordinal CUDA gives it after `CUDA_VISIBLE_DEVICES` and
    /// `CUDA_DEVICE_ORDER`; `None`: hidden, or not knowable from files.
    #[serde(default)]
    pub cuda_index: Option<u32>,
    /// Compute capability (`9.0`); full fingerprint only.
    #[serde(default)]
    pub compute_capability: Option<ComputeCapability>,
    /// `GPU-…` UUID from the driver's `information` file: only to resolve
    /// UUID entries of `CUDA_VISIBLE_DEVICES`, never printed nor hashed, so
    /// that identical nodes of a cluster share one fingerprint.
    #[serde(default, skip_serializing)]
    pub uuid: Option<String>,
}

/// The outcome of loading libcuda in the measuring child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Libcuda {
    /// Loaded and initialised.
    Ok,
    /// `libcuda.so.1` is not installed: no NVIDIA driver for CUDA.
    Missing,
    /// Loaded, but `cuInit` failed with this `CUresult`.
    InitFailed {
        /// The `CUresult` code (100: no device).
        code: i64,
    },
    /// The measurement itself did not complete.
    NotMeasured {
        /// Why.
        reason: String,
    },
}

impl Libcuda {
    /// `cuInit` results that say "not now" rather than "not here": the
    /// devices are busy or exclusive to another process
    /// (`CUDA_ERROR_DEVICE_UNAVAILABLE`, 46), or the driver is in an unknown
    /// state (`CUDA_ERROR_UNKNOWN`, 999, e.g. right after a driver update).
    pub const TRANSIENT_INIT_CODES: [i64; 2] = [46, 999];

    /// Whether this outcome may be remembered as what the machine is: a
    /// measurement that did not complete, or a `cuInit` that failed for a
    /// passing reason, is measured again next time instead.
    pub fn is_settled(&self) -> bool {
        match self {
            Libcuda::Ok | Libcuda::Missing => true,
            Libcuda::InitFailed { code } => !Libcuda::TRANSIENT_INIT_CODES.contains(code),
            Libcuda::NotMeasured { .. } => false,
        }
    }
}

/// Read the driver and the GPUs, honouring overrides.
pub(crate) fn detect(src: &Sources) -> Result<Gpus, FingerprintError> {
    let driver = match src.override_opt("PREFLIGHT_NVIDIA_DRIVER") {
        Some(v) => v.map(str::to_string),
        None => driver_version(&src.sys_root, &src.proc_root),
    };
    let mut devices = match src.var("PREFLIGHT_GPUS") {
        Some("none") => Vec::new(),
        Some(json) => {
            serde_json::from_str::<Vec<Gpu>>(json).map_err(|e| FingerprintError::BadOverride {
                var: "PREFLIGHT_GPUS".into(),
                value: json.into(),
                why: format!("expected a JSON array of GPUs: {e}"),
            })?
        }
        None => scan_pci(&src.sys_root, &src.proc_root, &src.dev_root),
    };
    devices.sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));
    apply_visible(&mut devices, src.raw_var("CUDA_VISIBLE_DEVICES"));
    let mut gpus = Gpus {
        driver,
        devices,
        cuda_driver_api: None,
        libcuda: None,
    };
    apply_overrides(src, &mut gpus)?;
    Ok(gpus)
}

/// The overrides of measured facts: `PREFLIGHT_COMPUTE_CAPABILITY` and
/// `PREFLIGHT_CUDA_DRIVER_API`. Applied to the fast fingerprint and again
/// after measuring, so that they win over what was measured.
pub(crate) fn apply_overrides(src: &Sources, gpus: &mut Gpus) -> Result<(), FingerprintError> {
    if let Some(list) = src.var("PREFLIGHT_COMPUTE_CAPABILITY") {
        apply_capabilities(&mut gpus.devices, list)?;
    }
    if let Some(v) = src.override_opt("PREFLIGHT_CUDA_DRIVER_API") {
        gpus.cuda_driver_api = v
            .map(|v| {
                v.parse::<Version>()
                    .map_err(|why| FingerprintError::BadOverride {
                        var: "PREFLIGHT_CUDA_DRIVER_API".into(),
                        value: v.into(),
                        why,
                    })
            })
            .transpose()?;
    }
    Ok(())
}

/// `PREFLIGHT_COMPUTE_CAPABILITY`: one value for every GPU, or one per GPU
/// in bus order.
fn apply_capabilities(devices: &mut [Gpu], list: &str) -> Result<(), FingerprintError> {
    let bad = |why: String| FingerprintError::BadOverride {
        var: "PREFLIGHT_COMPUTE_CAPABILITY".into(),
        value: list.into(),
        why,
    };
    let values = list
        .split(',')
        .map(|v| v.parse::<ComputeCapability>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if values.len() != 1 && values.len() != devices.len() {
        return Err(bad(format!(
            "{} values for {} GPUs: give one for all, or one per GPU",
            values.len(),
            devices.len()
        )));
    }
    for (i, gpu) in devices.iter_mut().enumerate() {
        let v = if values.len() == 1 {
            values[0]
        } else {
            values[i]
        };
        gpu.compute_capability = Some(v);
    }
    Ok(())
}

/// The driver version: `/sys/module/nvidia/version`, else the first line of
/// `/proc/driver/nvidia/version`.
pub fn driver_version(sys: &Path, proc: &Path) -> Option<String> {
    if let Ok(text) = crate::fs::read_small_text(sys.join("module/nvidia/version"))
        && let Some(v) = text
            .split_whitespace()
            .next()
            .filter(|v| looks_like_version(v))
    {
        return Some(v.to_string());
    }
    let text = crate::fs::read_small_text(proc.join("driver/nvidia/version")).ok()?;
    parse_proc_version(&text)
}

/// The version in `/proc/driver/nvidia/version`: the first version-shaped
/// word after `Kernel Module` on the `NVRM version:` line, in both the
/// proprietary (`Kernel Module  535.146.02  …`) and the open
/// (`Open Kernel Module for x86_64  550.54.15  …`) formats. The `GCC version`
/// line is never read.
pub fn parse_proc_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let (_, rest) = line.split_once("Kernel Module")?;
    rest.split_whitespace()
        .find(|w| looks_like_version(w))
        .map(str::to_string)
}

/// `535.146.02`, `550.54`: two or three dot-separated digit groups.
fn looks_like_version(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The display (0x0300) and 3D (0x0302) controllers the NVIDIA driver has
/// bound (the links named by PCI address in `/sys/bus/pci/drivers/nvidia/`)
/// that this process can reach ([`reachable`]). Those are the devices CUDA
/// can number; a GPU bound to another driver (`vfio-pci`, `nouveau`) or to
/// none, or one a container was not given, is invisible to CUDA, so it has
/// no place in its numbering. Listing the driver's folder instead of every
/// PCI device costs one listing on a machine without the driver, and a few
/// reads per GPU with it; the class leaves out the NVSwitch bridges the
/// driver binds too.
fn scan_pci(sys: &Path, proc: &Path, dev: &Path) -> Vec<Gpu> {
    let entries = crate::seen::names(&sys.join("bus/pci/drivers/nvidia"));
    let devices = sys.join("bus/pci/devices");
    let mut gpus = Vec::new();
    for entry in entries {
        let name = entry.to_string_lossy().to_ascii_lowercase();
        // Beside the devices: `bind`, `unbind`, `new_id`, `module`, ….
        if !looks_like_bus_id(&name) {
            continue;
        }
        let dir = devices.join(&name);
        let read = |f: &str| {
            crate::fs::read_small_text(dir.join(f))
                .ok()
                .map(|s| s.trim().to_ascii_lowercase())
        };
        let Some(class) = read("class") else { continue };
        if !(class.starts_with("0x0300") || class.starts_with("0x0302")) {
            continue;
        }
        let information = driver_information(proc, &name);
        if !reachable(proc, dev, &name, information.minor) {
            continue;
        }
        gpus.push(Gpu {
            model: information.model,
            device_id: read("device").unwrap_or_default(),
            pci_bus_id: name,
            cuda_index: None,
            compute_capability: None,
            uuid: information.uuid,
        });
    }
    gpus
}

/// Whether this process can reach the GPU at `bus_id`, whose device minor
/// the driver's `information` file gave. `/sys` is not namespaced: inside a
/// container given one GPU of eight, `/sys/bus/pci/drivers/nvidia` still
/// lists all eight. What the container runtime narrows is the driver's own
/// folder, `/proc/driver/nvidia/gpus/`, which then holds the given GPUs
/// alone, and the device nodes, `/dev/nvidia<minor>` made for those alone.
/// Either says "not here" only where it exists at all: a host without
/// `/dev/nvidiactl` has had no node made yet (`nvidia-modprobe` makes them
/// on first use), and there every GPU counts.
fn reachable(proc: &Path, dev: &Path, bus_id: &str, minor: Option<u32>) -> bool {
    let listed = proc.join("driver/nvidia/gpus");
    if crate::seen::is_dir(&listed) && !crate::seen::is_dir(&listed.join(bus_id)) {
        return false;
    }
    match minor {
        Some(minor) if crate::seen::exists(&dev.join("nvidiactl")) => {
            crate::seen::exists(&dev.join(format!("nvidia{minor}")))
        }
        _ => true,
    }
}

/// `dddd:bb:dd.f`, as sysfs names a PCI function.
fn looks_like_bus_id(name: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let mut parts = name.split([':', '.']);
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(d), Some(b), Some(s), Some(f), None) if hex(d, 4) && hex(b, 2) && hex(s, 2) && hex(f, 1)
    )
}

/// What `/proc/driver/nvidia/gpus/<bus id>/information` says about a GPU.
#[derive(Default)]
struct Information {
    /// `Model:  NVIDIA …`
    model: Option<String>,
    /// `GPU UUID:  GPU-…`
    uuid: Option<String>,
    /// `Device Minor:  N`: its node is `/dev/nvidiaN`.
    minor: Option<u32>,
}

fn driver_information(proc: &Path, bus_id: &str) -> Information {
    let path = proc
        .join("driver/nvidia/gpus")
        .join(bus_id)
        .join("information");
    let Ok(text) = crate::fs::read_small_text(path) else {
        return Information::default();
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Information {
        model: field("Model"),
        uuid: field("GPU UUID"),
        minor: field("Device Minor").and_then(|m| m.parse().ok()),
    }
}

/// Number the GPUs the way CUDA will under `CUDA_VISIBLE_DEVICES` and
/// `CUDA_DEVICE_ORDER`, from files alone.
///
/// CUDA first orders the devices (`CUDA_DEVICE_ORDER`): `PCI_BUS_ID` is bus
/// order; the default, `FASTEST_FIRST`, ranks them by a speed estimate that
/// no file tells, so bus order is used then too (right on machines of one
/// GPU model; the full fingerprint has CUDA's own numbering). Then each
/// entry of `CUDA_VISIBLE_DEVICES` picks a device: an index into that
/// order, or a `GPU-` UUID or a unique prefix of one. Like CUDA, the list
/// stops at the first entry that names no device (or one named before);
/// an entry that files cannot resolve (a `MIG-` UUID, a GPU whose UUID is
/// unknown) stops the numbering there as well, since what follows is not
/// known. The variable itself is part of the fingerprint either way.
pub(crate) fn apply_visible(devices: &mut [Gpu], visible: Option<&str>) {
    for gpu in devices.iter_mut() {
        gpu.cuda_index = None;
    }
    let Some(spec) = visible else {
        for (i, gpu) in devices.iter_mut().enumerate() {
            gpu.cuda_index = u32::try_from(i).ok();
        }
        return;
    };
    for (ordinal, token) in (0u32..).zip(spec.split(',').map(str::trim)) {
        let Some(i) = visible_entry(devices, token) else {
            break;
        };
        if devices[i].cuda_index.is_some() {
            break;
        }
        devices[i].cuda_index = Some(ordinal);
    }
}

/// The device one `CUDA_VISIBLE_DEVICES` entry names, if files tell.
fn visible_entry(devices: &[Gpu], token: &str) -> Option<usize> {
    if let Ok(i) = token.parse::<usize>() {
        return (i < devices.len()).then_some(i);
    }
    let prefix = token.to_ascii_lowercase();
    if !prefix.starts_with("gpu-") {
        return None;
    }
    let mut matching = devices.iter().enumerate().filter(|(_, g)| {
        g.uuid
            .as_deref()
            .is_some_and(|u| u.to_ascii_lowercase().starts_with(&prefix))
    });
    let (i, _) = matching.next()?;
    matching.next().is_none().then_some(i)
}
