//! What the parent asks the cuda executor to do: the request file the child
//! reads. The module and its launches are what discovery found and
//! validated ([`crate::discover::native`]); the child only checks what
//! depends on the device.

pub use crate::discover::native::spec::{Arg, ElemType, Launch, ModuleKind, ModuleSpec, Tolerance};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One job for the cuda executor: query a device, optionally load one
/// module and run smoke launches from it, or load the CUDA code embedded in
/// a variant's shared objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaRequest {
    /// Device ordinal (as the driver counts, after `CUDA_VISIBLE_DEVICES`).
    #[serde(default)]
    pub device: u32,
    /// The module to load; `None`: driver and device query only.
    #[serde(default)]
    pub module: Option<ModuleSpec>,
    /// Smoke launches, run in order after the module is loaded.
    #[serde(default)]
    pub launches: Vec<Launch>,
    /// `libnvrtc.so.N` to load by full path before NVRTC is used, so that
    /// a toolkit or wheel outside the loader's search path is found.
    #[serde(default)]
    pub nvrtc_library: Option<PathBuf>,
    /// The driver library by full path; `None`: `libcuda.so.1` from the
    /// loader's search path.
    #[serde(default)]
    pub libcuda: Option<PathBuf>,
    /// A hub variant's directory: load every fatbin embedded in its shared
    /// objects on the device (the device depth of a compiled variant)
    /// instead of a module.
    #[serde(default)]
    pub variant: Option<PathBuf>,
    /// Where the child appends its JSON-lines events.
    pub events: PathBuf,
    /// Describe every device the driver enumerates (in CUDA's ordinal
    /// order, after `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`) without
    /// creating a context on any, instead of running the request: what the
    /// full fingerprint measures.
    #[serde(default)]
    pub list_devices: bool,
    /// Bench mode: load these modules, verify their launches once, then
    /// time all of them together on command, instead of `module` and
    /// `launches`.
    #[serde(default)]
    pub bench: Option<BenchRequest>,
}

/// What the cuda child times in bench mode: a native target's modules and
/// launches, all of them in each sample (a target needs every module), and
/// the FIFOs it is driven through (see `crate::probe::BenchChild`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRequest {
    /// The modules, each with its launches, in the order they run.
    pub modules: Vec<BenchModule>,
    /// What the samples are labelled.
    pub label: String,
    /// Flush the L2 cache before each sample.
    pub flush_l2: bool,
    /// The FIFO of round commands (`{"round": N, "samples": K}`).
    pub commands: PathBuf,
    /// The FIFO the child writes a line to when it is ready and after each round.
    pub replies: PathBuf,
}

/// One module of a bench request and its launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchModule {
    /// The module file.
    pub module: ModuleSpec,
    /// Its launches, in order.
    pub launches: Vec<Launch>,
}
