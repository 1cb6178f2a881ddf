//! Evidence: everything known about how one probe's child ended, as every
//! executor returns it and as `classify` reads it.

use super::{
    ChannelProblems, CompileInfo, Depth, DeviceInfo, DeviceState, EmbeddedLoad, Event,
    ExecutorKind, Failure, Phase, Runtime, Sample, Span,
};
use crate::sandbox::Termination;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What one executor run observed, uninterpreted.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The executor that ran the child.
    pub executor: ExecutorKind,
    /// How the process ended.
    pub termination: Termination,
    /// The events the child wrote on its channel, in order (unknown kinds
    /// and unparsable lines are counted in `channel`).
    pub events: Vec<Event>,
    /// What was wrong with the channel.
    pub channel: ChannelProblems,
    /// The child's stderr: its head and tail, with a marker where bytes were dropped.
    pub stderr: String,
    /// Processes that outlived the child and were killed, if any.
    pub leaked: Option<String>,
    /// Wall time from just before the fork until the group was reaped.
    pub wall: Duration,
    /// The child's pid (also its process group); `None` when the run was
    /// cancelled before it started.
    pub pid: Option<i32>,
    /// How the child was made: a fresh interpreter, or forked from the
    /// executor's fork server.
    pub made: Made,
    /// The bounds on its processes and memory the child reached.
    pub exhausted: Vec<crate::sandbox::Exhausted>,
}

/// How a probe child was made. A forked child and a fresh one are
/// different evidence: the forked one started from an interpreter that
/// had imported torch and `kernels` (docs/forked.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Made {
    /// A fresh process (`python -B driver.py …`).
    #[default]
    Fresh,
    /// Forked from the fork server, inside the same sandbox.
    Forked,
}

impl Made {
    /// Whether this is the fresh process every probe was before forking.
    pub fn is_fresh(&self) -> bool {
        *self == Made::Fresh
    }
}

impl Evidence {
    /// The events, folded.
    pub fn report(&self) -> Report {
        Report::fold(&self.events)
    }

    /// Where the time went, each value rounded to the microsecond.
    pub fn timings(&self) -> Timings {
        self.report().timings(self.wall.as_secs_f64() * 1e3)
    }
}

/// What one probe cost: its time, in milliseconds, and the child's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// From spawning the child to collecting its result.
    pub total_ms: f64,
    /// Importing the variant (python) or loading the module (cuda), as the
    /// child measured it.
    pub import_ms: Option<f64>,
    /// Running the smoke workload (device events where the child has them;
    /// the median of the first timed launch for native modules).
    pub smoke_ms: Option<f64>,
    /// The child's memory at the end of its probe, when it reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

/// A probe child's memory at the end of its probe (`/proc/self/smaps_rollup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// Resident, in kB.
    pub rss_kb: u64,
    /// Proportional share of the resident pages, in kB.
    pub pss_kb: u64,
}

/// A child's events folded into one value: the last phase it entered, what
/// it learnt, and the failure or the depth it ended with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// The executor the hello named.
    pub executor: Option<ExecutorKind>,
    /// The child's process id, from its hello.
    pub pid: Option<u32>,
    /// The child's process group, from its hello.
    pub pgid: Option<u32>,
    /// The last phase the child entered.
    pub last_phase: Option<Phase>,
    /// The module id the variant was imported as.
    pub module: Option<String>,
    /// The kernel's Python package name.
    pub package: Option<String>,
    /// What the child knows of its runtime, merged.
    pub runtime: Runtime,
    /// The GPU probed.
    pub device: Option<DeviceInfo>,
    /// Every device the driver enumerates, when the job asked for the list.
    pub devices: Vec<DeviceInfo>,
    /// The variant's device as the python child found it after a failed
    /// import.
    pub device_state: Option<DeviceState>,
    /// What run-time compilation produced.
    pub compiled: Option<CompileInfo>,
    /// Whether a module was loaded on the device.
    pub loaded: bool,
    /// The CUDA code embedded in a variant's shared objects, per file, as
    /// loaded on the device.
    pub embedded: Vec<EmbeddedLoad>,
    /// Import time.
    pub import_ms: Option<f64>,
    /// Module load time.
    pub load_ms: Option<f64>,
    /// Smoke time.
    pub smoke_ms: Option<f64>,
    /// Launches that ran, in order.
    pub launched: Vec<String>,
    /// Elements compared against references, over all verifications.
    pub compared: u64,
    /// Whether anything was verified.
    pub verified: bool,
    /// Timed runs, in order.
    pub samples: Vec<Sample>,
    /// The failure the child reported, with the phase it happened in.
    pub failure: Option<(Phase, Failure)>,
    /// The depth the child reported when it finished.
    pub done: Option<Depth>,
    /// The deepest depth the phases the child left behind amount to (see
    /// `completed`): how far a probe that failed got.
    pub reached: Option<Depth>,
}

/// The depth a phase amounts to once the child has moved on past it: the
/// import done is `load`; the device confirmed, or a module loaded on it,
/// is `device`; a smoke workload or launches that ran are `smoke`.
pub fn completed(phase: Phase) -> Option<Depth> {
    match phase {
        Phase::Start => None,
        Phase::Import => Some(Depth::Load),
        Phase::Load => Some(Depth::Device),
        Phase::Launch | Phase::Smoke => Some(Depth::Smoke),
        Phase::Verify | Phase::Done => Some(Depth::Verified),
    }
}

impl Report {
    /// Fold events in order; the first failure is the one that counts.
    pub fn fold(events: &[Event]) -> Report {
        let mut r = Report::default();
        for event in events {
            match event {
                Event::Hello {
                    executor,
                    pid,
                    pgid,
                    ..
                } => {
                    r.executor = Some(*executor);
                    r.pid = *pid;
                    r.pgid = *pgid;
                }
                Event::Phase { phase, .. } => {
                    // Only a later phase leaves the one before it behind:
                    // a phase entered again (a second module's load, a
                    // bench's verification after timing) finishes nothing.
                    if let Some(last) = r.last_phase.filter(|last| phase > last) {
                        r.reached = r.reached.max(completed(last));
                    }
                    r.last_phase = Some(*phase);
                }
                Event::Runtime(runtime) => r.runtime.merge(runtime),
                Event::Module { name, package } => {
                    r.module = Some(name.clone());
                    r.package.clone_from(package);
                }
                Event::Device(d) => r.device = Some(d.clone()),
                Event::Devices { devices } => r.devices.clone_from(devices),
                Event::DeviceState(state) => r.device_state = Some(state.clone()),
                Event::Compiled(c) => r.compiled = Some(c.clone()),
                Event::Loaded { .. } => r.loaded = true,
                Event::Embedded(load) => r.embedded.push(load.clone()),
                Event::Timing { span, ms } => match span {
                    Span::Import => r.import_ms = Some(*ms),
                    Span::Load => r.load_ms = Some(*ms),
                    Span::Smoke => r.smoke_ms = Some(*ms),
                },
                Event::Launched { function } => r.launched.push(function.clone()),
                Event::Verified { compared, .. } => {
                    r.verified = true;
                    r.compared += compared;
                }
                Event::Sample(s) => r.samples.push(s.clone()),
                Event::Failed { phase, failure } => {
                    if r.failure.is_none() {
                        r.failure = Some((*phase, failure.clone()));
                    }
                }
                Event::Done { depth } => r.done = Some(*depth),
                Event::Bench(_) | Event::Unknown => {}
            }
        }
        r
    }

    /// Whether the child reported finishing.
    pub fn done(&self) -> bool {
        self.done.is_some() && self.failure.is_none()
    }

    /// The median of the samples labelled `label`, in milliseconds.
    pub fn median_ms(&self, label: &str) -> Option<f64> {
        let mut ms: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.label == label)
            .map(|s| s.ms)
            .collect();
        ms.sort_by(f64::total_cmp);
        match ms.len() {
            0 => None,
            n if n % 2 == 1 => Some(ms[n / 2]),
            n => Some((ms[n / 2 - 1] + ms[n / 2]) / 2.0),
        }
    }

    /// The median of the first label's samples (the first timed launch).
    pub fn first_median_ms(&self) -> Option<f64> {
        self.samples.first().and_then(|s| self.median_ms(&s.label))
    }

    /// Timings with `wall_ms` as the total, rounded to the microsecond.
    pub fn timings(&self, wall_ms: f64) -> Timings {
        let round = |ms: f64| (ms * 1e3).round() / 1e3;
        Timings {
            total_ms: round(wall_ms),
            import_ms: self.import_ms.or(self.load_ms).map(round),
            smoke_ms: self.smoke_ms.or_else(|| self.first_median_ms()).map(round),
            memory: match (self.runtime.rss_kb, self.runtime.pss_kb) {
                (Some(rss_kb), Some(pss_kb)) => Some(Memory { rss_kb, pss_kb }),
                _ => None,
            },
        }
    }
}
