//! `doctor --health`: one yes-or-no answer about the node's devices, for a
//! scheduler's health check (Slurm's `HealthCheckProgram`, a Kubernetes
//! liveness probe). A fault is a fault of the node — no device where the
//! PCI bus shows one, a device that fails its probe, a driver older than
//! the CUDA the node's toolkits and torch were built for — never a kernel
//! without a working variant, which is a question of placement (labels),
//! not of health.

use super::{DoctorOptions, Verdict, cuda};
use crate::classify::OutcomeKind;
use crate::fingerprint::Fingerprint;
use crate::sandbox::Cancel;
use serde::Serialize;

/// What a healthy node has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expectation {
    /// NVIDIA GPUs the driver must see.
    pub gpus: usize,
    /// Where that number comes from, for the fault line.
    pub gpus_from: String,
    /// What needs a CUDA major version of the driver: `(what, major)`.
    pub needs: Vec<(String, u64)>,
}

impl Expectation {
    /// What the machine `fingerprint` (fast: files only) promises: the
    /// GPUs on its PCI bus that this process can reach (a container's own,
    /// not the host's) and CUDA may use, or `gpus` when given; the
    /// CUDA major of the toolkit kernels compile with, of the CUDA home a
    /// kernel finds, and of torch's build. A CUDA 12.x toolkit runs on any
    /// 12.x driver (NVIDIA's minor-version compatibility), so only the
    /// major is a need.
    pub fn of(fingerprint: &Fingerprint, gpus: Option<usize>) -> Expectation {
        let (gpus, gpus_from) = match gpus {
            Some(n) => (n, "--expect-gpus".to_owned()),
            None => {
                let devices = &fingerprint.gpus.devices;
                let visible = if fingerprint.env.contains_key("CUDA_VISIBLE_DEVICES") {
                    devices.iter().filter(|g| g.cuda_index.is_some()).count()
                } else {
                    devices.len()
                };
                (visible, "on the PCI bus and reachable here".to_owned())
            }
        };
        let toolkits = &fingerprint.toolkits;
        let mut needs = Vec::new();
        for toolkit in &toolkits.found {
            let used = [&toolkits.active, &toolkits.visible]
                .iter()
                .any(|root| root.as_ref() == Some(&toolkit.root));
            if let (true, Some(major)) = (used, toolkit.version.as_deref().and_then(major)) {
                let what = format!(
                    "the CUDA {} toolkit at {}",
                    toolkit.version.as_deref().unwrap_or("?"),
                    toolkit.root.display()
                );
                if !needs.iter().any(|(w, _)| *w == what) {
                    needs.push((what, major));
                }
            }
        }
        let torch = fingerprint.python.as_ref().and_then(|p| p.torch.as_ref());
        if let Some(cuda) = torch.and_then(|t| t.cuda.as_deref())
            && let Some(m) = major(cuda)
        {
            needs.push((format!("torch (built for CUDA {cuda})"), m));
        }
        Expectation {
            gpus,
            gpus_from,
            needs,
        }
    }
}

fn major(version: &str) -> Option<u64> {
    version.split('.').next()?.trim().parse().ok()
}

/// A fault of the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeFault {
    /// Fewer devices answer than the node has.
    NoDevice,
    /// A device answers but fails its probe.
    DeviceFailed,
    /// The driver supports an older CUDA than the node's software needs.
    DriverTooOld,
}

impl NodeFault {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeFault::NoDevice => "no_device",
            NodeFault::DeviceFailed => "device_failed",
            NodeFault::DriverTooOld => "driver_too_old",
        }
    }
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "health")]
pub enum Health {
    /// The node's devices work (or it has none and none is expected).
    Healthy {
        /// What was checked, on one line.
        message: String,
    },
    /// A fault of the node: drain it.
    Fault {
        /// Which.
        fault: NodeFault,
        /// What, on one line.
        message: String,
    },
    /// The check itself could not run (a fault of preflight, not of the
    /// node: nothing to drain for).
    Unchecked {
        /// Why, on one line.
        message: String,
    },
}

impl Health {
    /// The one line a health check prints.
    pub fn line(&self) -> String {
        match self {
            Health::Healthy { message } => format!("healthy: {message}"),
            Health::Fault { fault, message } => format!("{}: {message}", fault.as_str()),
            Health::Unchecked { message } => format!("unchecked: {message}"),
        }
    }
}

/// Check the node's devices against `expect`: the driver and its device
/// list, its CUDA version against every need, and a PTX kernel
/// JIT-compiled, launched and verified on device 0 (each step in its own
/// sandboxed child, as `doctor` runs them).
pub fn check(options: &DoctorOptions, expect: &Expectation, cancel: &Cancel) -> Health {
    let driver = cuda::driver(options, cancel);
    let said = || driver.check.message.clone();
    let fault = |fault, message: String| Health::Fault { fault, message };
    if driver.check.kind == OutcomeKind::ProbeError {
        return Health::Unchecked { message: said() };
    }
    let Some(device) = driver.device.as_ref() else {
        if driver.check.verdict == Verdict::Fail {
            return fault(
                NodeFault::DeviceFailed,
                format!("the CUDA driver fails its probe: {}", said()),
            );
        }
        if expect.gpus == 0 {
            return Health::Healthy {
                message: "no NVIDIA GPU expected here, and the driver answers none".into(),
            };
        }
        return fault(
            NodeFault::NoDevice,
            format!(
                "{} NVIDIA GPU(s) {}, but the CUDA driver answers none: {}",
                expect.gpus,
                expect.gpus_from,
                said()
            ),
        );
    };
    let count = driver.count.unwrap_or(1) as usize;
    if count < expect.gpus {
        return fault(
            NodeFault::NoDevice,
            format!(
                "{} NVIDIA GPU(s) {}, but the CUDA driver answers {count}",
                expect.gpus, expect.gpus_from
            ),
        );
    }
    let version = driver.version.unwrap_or(0);
    let (driver_major, driver_minor) =
        (u64::from(version / 1000), u64::from((version % 1000) / 10));
    if let Some((what, need)) = expect.needs.iter().find(|(_, m)| *m > driver_major) {
        return fault(
            NodeFault::DriverTooOld,
            format!(
                "the driver supports CUDA {driver_major}.{driver_minor}, {what} needs a CUDA {need}.x driver"
            ),
        );
    }
    let launch = match cuda::Kernels::write() {
        Ok(kernels) => cuda::ptx_jit(options, &kernels, Some(device), cancel),
        Err(e) => {
            return Health::Unchecked {
                message: format!("cannot write the test kernel: {e}"),
            };
        }
    };
    match (launch.verdict, launch.kind) {
        (_, OutcomeKind::ProbeError) => Health::Unchecked {
            message: launch.message,
        },
        (Verdict::Pass, _) => Health::Healthy {
            message: format!(
                "{count} GPU(s), device 0 {} ({}) ran a verified kernel; driver CUDA {driver_major}.{driver_minor}",
                device.name,
                device.sm()
            ),
        },
        _ => fault(
            NodeFault::DeviceFailed,
            format!(
                "device 0 ({}) fails a kernel launch: {}",
                device.name, launch.message
            ),
        ),
    }
}
