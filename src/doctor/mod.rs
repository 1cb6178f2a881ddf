//! `preflight doctor`: what this machine can do for compute kernels, each
//! capability probed in its own sandboxed child — the CUDA driver and
//! devices, NVRTC, nvcc, the PTX JIT, bf16 / fp8 / wgmma feature kernels,
//! and the Python stack (torch, Triton, CuTe-DSL) — with a verdict, the time
//! it took and, when something is missing or broken, what to do about it.

mod cuda;
pub mod health;
mod python;

use crate::classify::OutcomeKind;
use crate::fingerprint::Fingerprint;
use crate::probe::cuda::CudaExecutor;
use crate::protocol::DeviceInfo;
use crate::run::{Executors, Session, SessionError};
use crate::sandbox::{Cancel, Isolation, Limits};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What doctor needs to know about the machine before it starts children.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Runs the CUDA capability probes (its NVRTC library included).
    pub executor: CudaExecutor,
    /// Limits of the CUDA probes.
    pub cuda_limits: Limits,
    /// The nvcc a kernel would use, with its version when known.
    pub nvcc: Option<(PathBuf, Option<String>)>,
    /// The Python interpreter for the torch / Triton / CuTe-DSL probes.
    pub python: Option<PathBuf>,
    /// Limits of the Python probes (an import of torch or a first Triton
    /// compile can take many seconds).
    pub python_limits: Limits,
    /// Limits of nvcc.
    pub nvcc_limits: Limits,
}

/// How a capability fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It works here.
    Pass,
    /// Not tried: something it needs is absent (no GPU, an older GPU).
    Skipped,
    /// Not installed (driver, nvcc, NVRTC, a Python package).
    Missing,
    /// Present but not working.
    Fail,
}

impl Verdict {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Skipped => "skipped",
            Verdict::Missing => "missing",
            Verdict::Fail => "fail",
        }
    }
}

/// One capability probe's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// Stable identifier (`driver`, `nvrtc`, `nvcc`, `ptx_jit`, `bf16`,
    /// `fp8`, `wgmma`, `torch`, `triton`, `cute_dsl`).
    pub name: &'static str,
    /// What was probed, for people.
    pub title: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// The outcome in the design's taxonomy (`pass`, `no_device`,
    /// `nvcc_too_old`, …; `skipped` when not tried).
    pub kind: OutcomeKind,
    /// What happened, on one line.
    pub message: String,
    /// What to do about it (empty on a pass).
    pub hint: String,
    /// Wall time of the probe's children, in milliseconds.
    pub time_ms: f64,
}

impl Check {
    fn new(name: &'static str, title: &'static str) -> Check {
        Check {
            name,
            title,
            verdict: Verdict::Skipped,
            kind: OutcomeKind::Skipped,
            message: String::new(),
            hint: String::new(),
            time_ms: 0.0,
        }
    }

    fn skipped(mut self, why: impl Into<String>) -> Check {
        self.verdict = Verdict::Skipped;
        self.kind = OutcomeKind::Skipped;
        self.message = why.into();
        self
    }

    fn verdict(
        mut self,
        verdict: Verdict,
        kind: OutcomeKind,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        self.verdict = verdict;
        self.kind = kind;
        self.message = crate::classify::one_line(&message.into());
        self.hint = crate::classify::one_line(&hint.into());
        self
    }

    fn took(mut self, ms: f64) -> Check {
        self.time_ms = (ms * 1e3).round() / 1e3;
        self
    }
}

/// Everything doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    /// The device probed (ordinal 0), when the driver answered.
    pub device: Option<DeviceInfo>,
    /// The CUDA version the driver supports (`13.0`), when it answered.
    pub driver_cuda: Option<String>,
    /// The verdict in one sentence: the first thing a reader needs.
    pub summary: String,
    /// Each capability, in the order probed.
    pub checks: Vec<Check>,
    /// How its probes (and `check`'s) are isolated here; `None` when not
    /// known (no child could be made at all).
    pub isolation: Option<Isolation>,
    /// The walls of a probe's file system, one a line, as a bubblewrap
    /// command line reads (`crate::sandbox::Plan`); empty without
    /// namespaces.
    pub walls: Vec<String>,
}

impl DoctorReport {
    /// Whether a capability that is present does not work (exit status 1).
    pub fn any_failure(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
    }
}

/// `doctor` as the library's front door answers it.
impl Session {
    /// `doctor`: every capability probe, each child stopped after
    /// `timeout`, on the machine the fast fingerprint describes (the cuda
    /// executor [`Executors::cuda`] makes, the active toolkit's nvcc, the
    /// session's interpreter, else the fingerprint's).
    pub fn doctor(&self, timeout: Duration, cancel: &Cancel) -> Result<DoctorReport, SessionError> {
        let fingerprint = self.fast_fingerprint()?;
        let options = doctor_options(&fingerprint, timeout)?;
        Ok(run(&options, cancel, &|_| {}))
    }

    /// `doctor --health`: whether the node's devices work
    /// ([`health::check`]), on the machine the fast fingerprint describes,
    /// expecting `gpus` NVIDIA GPUs (default: those on its PCI bus that
    /// CUDA may use); each child stopped after `timeout`.
    pub fn health(
        &self,
        timeout: Duration,
        gpus: Option<usize>,
        cancel: &Cancel,
    ) -> Result<health::Health, SessionError> {
        let fingerprint = self.fast_fingerprint()?;
        let options = doctor_options(&fingerprint, timeout)?;
        let expect = health::Expectation::of(&fingerprint, gpus);
        Ok(health::check(&options, &expect, cancel))
    }
}

/// The probes of `doctor` on the machine `fingerprint` describes: the
/// cuda executor [`Executors::cuda`] makes, the active toolkit's nvcc, the
/// fingerprint's interpreter; each child stopped after `timeout`.
fn doctor_options(
    fingerprint: &Fingerprint,
    timeout: Duration,
) -> Result<DoctorOptions, SessionError> {
    let limits = Limits {
        timeout,
        ..Limits::default()
    };
    Ok(DoctorOptions {
        executor: Executors::cuda(fingerprint)?,
        cuda_limits: limits.clone(),
        nvcc: fingerprint.toolkits.active_nvcc(),
        python: fingerprint.python.as_ref().map(|p| p.interpreter.clone()),
        python_limits: limits.clone(),
        nvcc_limits: limits,
    })
}

/// Runs every capability probe, one child (or two: nvcc, then the load)
/// each; `each` is called as each check finishes (for progress).
pub fn run(options: &DoctorOptions, cancel: &Cancel, each: &dyn Fn(&Check)) -> DoctorReport {
    let mut checks = Vec::new();
    let mut push = |check: Check| {
        each(&check);
        checks.push(check);
    };
    let kernels = cuda::Kernels::write();
    let cuda::Driver {
        check: driver,
        device,
        version: driver_version,
        ..
    } = cuda::driver(options, cancel);
    let has_gpu = device.is_some();
    push(driver);
    match &kernels {
        Ok(k) => {
            let d = device.as_ref();
            push(cuda::nvrtc(options, k, d, cancel));
            push(cuda::nvcc(options, k, d, cancel));
            push(cuda::ptx_jit(options, k, d, cancel));
            for feature in cuda::Feature::ALL {
                push(cuda::feature(options, k, feature, d, cancel));
            }
        }
        Err(e) => push(Check::new("kernels", "doctor's test kernels").verdict(
            Verdict::Fail,
            OutcomeKind::ProbeError,
            format!("cannot write the test kernels: {e}"),
            "a fault of preflight: check TMPDIR is writable",
        )),
    }
    for probe in python::Probe::ALL {
        push(python::run(options, probe, has_gpu, cancel));
    }
    let driver_cuda = driver_version.map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let summary = summary(device.as_ref(), driver_cuda.as_deref(), &checks);
    DoctorReport {
        device,
        driver_cuda,
        summary,
        checks,
        isolation: crate::sandbox::isolation(),
        walls: walls(),
    }
}

/// The walls a probe gets here, where probes run in namespaces.
fn walls() -> Vec<String> {
    if !matches!(
        crate::sandbox::isolation(),
        Some(Isolation::Namespaces { .. })
    ) {
        return Vec::new();
    }
    crate::sandbox::Sandbox::new()
        .and_then(|s| s.plan())
        .map(|plan| plan.to_string().lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn summary(device: Option<&DeviceInfo>, driver: Option<&str>, checks: &[Check]) -> String {
    let count = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    let tally = format!(
        "{} pass, {} fail, {} missing, {} skipped",
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Missing),
        count(Verdict::Skipped)
    );
    match device {
        Some(d) => format!(
            "{} ({}, {} SMs, {:.0} GiB), CUDA driver {}: {tally}",
            d.name,
            d.sm(),
            d.sm_count,
            d.total_memory as f64 / (1u64 << 30) as f64,
            driver.unwrap_or("?")
        ),
        None => format!("no usable NVIDIA GPU on this machine: GPU checks were skipped ({tally})"),
    }
}
