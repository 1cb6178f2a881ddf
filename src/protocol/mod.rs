//! Protocol: the one typed language every probe child speaks to its parent.
//!
//! A child (the python driver `probes/python/driver.py`, the cuda child
//! [`crate::probe::cuda::child`], a future ROCm child) appends one JSON
//! [`Event`] per line to a channel file in its sandbox directory, each with
//! one `write(2)`, so that a line is complete before the next step can crash
//! the process. The first line is a [`Event::Hello`] naming the protocol
//! version and the executor; then phases as they are entered, facts as they
//! are learnt (timings, the device, what was compiled, bench samples), and
//! at most one [`Failure`] or one [`Event::Done`].
//!
//! This module sits below both `probe` (which runs children and collects
//! [`Evidence`]) and `classify` (which turns evidence into an outcome), so
//! that neither depends on the other. Its JSON shapes are pinned by
//! `tests/fixtures/protocol/golden.jsonl`, which the Rust tests and the
//! driver's self-check both read.

mod channel;
mod event;
mod evidence;
#[cfg(test)]
mod tests;

pub use channel::{CHANNEL_LIMIT, Channel, ChannelProblems, EventLog, Tail, VersionMismatch};
pub use event::{
    BenchSetup, CompileInfo, CudaError, DeviceArch, DeviceInfo, DeviceState, EmbeddedLoad, Event,
    ExceptionInfo, Failure, Frame, HubCheck, NvrtcError, Provider, Runtime, Sample, Span,
};
pub use evidence::{Evidence, Made, Memory, Report, Timings};

use serde::{Deserialize, Serialize};

/// The version of the event shapes. A child that speaks another version is
/// not understood: its run is a `probe_error` naming both versions.
///
/// Raise it when an event changes shape or meaning; adding a new event kind
/// does not need it (a parent counts kinds it does not know).
pub const PROTOCOL_VERSION: u32 = 1;

/// Environment variable that names the channel file in a child.
pub const CHANNEL_ENV: &str = "PREFLIGHT_RESULT_FILE";

/// Which kind of child produced the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// A Python interpreter running the driver: hub variants, imported the
    /// way the hub loader imports them.
    Python,
    /// The `preflight` binary in its cuda child mode: CUDA modules loaded and
    /// launched through the driver API.
    Cuda,
}

impl ExecutorKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Python => "python",
            ExecutorKind::Cuda => "cuda",
        }
    }
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a probe was when something happened; a death is attributed to the
/// last phase the child entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The child process started (libraries, the driver, the device).
    Start,
    /// Importing the variant's Python module.
    Import,
    /// Loading (or compiling, then loading) a module onto the device, or
    /// confirming that the device is usable at all.
    Load,
    /// Launching a kernel and timing it.
    Launch,
    /// Running the smoke workload.
    Smoke,
    /// Comparing a result with its reference.
    Verify,
    /// Everything finished.
    Done,
}

impl Phase {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Import => "import",
            Phase::Load => "load",
            Phase::Launch => "launch",
            Phase::Smoke => "smoke",
            Phase::Verify => "verify",
            Phase::Done => "done",
        }
    }
}

/// How far a probe got (or is asked to go), weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Depth {
    /// Imported (loaded) only: no device was used and no workload ran.
    Load,
    /// The device answered and the code was loaded on it; nothing launched.
    Device,
    /// A smoke workload ran, without a reference to compare with.
    Smoke,
    /// A smoke workload ran and matched its reference.
    Verified,
}

impl Depth {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Depth::Load => "load",
            Depth::Device => "device",
            Depth::Smoke => "smoke",
            Depth::Verified => "verified",
        }
    }
}
