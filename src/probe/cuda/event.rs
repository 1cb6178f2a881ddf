//! The cuda executor's result channel: one JSON object per line, appended
//! to a file in the sandbox directory as each step starts and ends, so that
//! a child that dies is attributed to the step it was in.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// A step of the cuda executor, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Reading the request, loading libraries.
    Start,
    /// `cuInit`, device count and query, context.
    Driver,
    /// NVRTC compiling CUDA C source.
    Compile,
    /// `cuModuleLoadDataEx`: the driver picks an image, JIT-compiles PTX.
    Load,
    /// Buffers, the first launch and its synchronisation.
    Launch,
    /// Reading buffers back and comparing them with what was expected.
    Verify,
    /// Warm-up and timed launches.
    Time,
}

/// What a device said about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The ordinal probed.
    pub ordinal: u32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// Compute capability major.
    pub major: u32,
    /// Compute capability minor.
    pub minor: u32,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Total memory in bytes.
    pub total_memory: u64,
    /// PCI bus id (`0000:3b:00.0`), when the driver gives one.
    pub pci_bus_id: Option<String>,
}

impl DeviceInfo {
    /// `sm_XY`: the SASS target of this device.
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// Its compute capability.
    pub fn capability(&self) -> crate::fingerprint::ComputeCapability {
        crate::fingerprint::ComputeCapability::new(self.major, self.minor)
    }
}

/// A failure the child observed, as facts; the parent classifies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Failure {
    /// A shared library could not be loaded (`libcuda.so.1`, `libnvrtc.so.N`).
    LibraryMissing {
        /// Which library.
        library: String,
        /// What the loader said.
        detail: String,
    },
    /// A driver or NVRTC entry point is absent from the loaded library
    /// (the library is older than the bindings).
    SymbolMissing {
        /// What the loader (or the panic) said.
        detail: String,
    },
    /// A driver API call returned an error.
    Driver {
        /// The call (`cuInit`, `cuModuleLoadDataEx`, …).
        call: String,
        /// The `CUresult`.
        code: u32,
        /// `cuGetErrorName`, e.g. `CUDA_ERROR_NO_BINARY_FOR_GPU`.
        name: String,
        /// `cuGetErrorString`.
        message: String,
        /// The JIT error log of a module load, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<String>,
    },
    /// NVRTC failed.
    Nvrtc {
        /// The call (`nvrtcCompileProgram`, …).
        call: String,
        /// The `nvrtcResult`.
        code: u32,
        /// `nvrtcGetErrorString`.
        message: String,
        /// The compiler log.
        log: String,
    },
    /// The driver reports no device at the requested ordinal.
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// How many devices the driver sees.
        count: u32,
    },
    /// A buffer came back different from what was expected.
    Mismatch {
        /// The launch's function.
        function: String,
        /// The argument index of the buffer.
        arg: usize,
        /// Elements outside the tolerance.
        mismatched: usize,
        /// Elements compared.
        compared: usize,
        /// The first bad element: index, got, expected.
        first: (usize, f64, f64),
    },
    /// The request or a module file could not be used.
    Input {
        /// What was wrong.
        detail: String,
    },
    /// A panic inside the child: a fault of preflight.
    Panic {
        /// The panic message.
        detail: String,
    },
}

/// What NVRTC produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileInfo {
    /// The target it compiled for (`sm_90`, `compute_90`, or NVRTC's default).
    pub target: String,
    /// What was handed to the driver: `cubin` or `ptx`.
    pub image: String,
    /// Size of that image in bytes.
    pub bytes: usize,
    /// NVRTC's version, `major.minor`.
    pub nvrtc_version: String,
    /// Warnings in the compiler log, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
}

/// How long one launch configuration took, from CUDA events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchTiming {
    /// The function.
    pub function: String,
    /// Untimed launches first.
    pub warmup: u32,
    /// Milliseconds of each timed launch.
    pub samples_ms: Vec<f64>,
}

impl LaunchTiming {
    /// The median sample in milliseconds; `None` without samples.
    pub fn median_ms(&self) -> Option<f64> {
        let mut s = self.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => None,
            n if n % 2 == 1 => Some(s[n / 2]),
            n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
        }
    }
}

/// One line of the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A step began.
    Step {
        /// Which.
        step: Step,
    },
    /// The driver answered: its CUDA version (`13000` for 13.0) and device count.
    Driver {
        /// `cuDriverGetVersion`.
        version: u32,
        /// `cuDeviceGetCount`.
        devices: u32,
    },
    /// The device being probed.
    Device(DeviceInfo),
    /// `cuDriverGetVersion` before `cuInit`, which answers even when
    /// `cuInit` then fails (a device-list request).
    DriverVersion {
        /// `13000` for 13.0.
        version: u32,
    },
    /// Every device the driver enumerates, in ordinal order (a device-list
    /// request).
    Devices {
        /// Each device, as [`Event::Device`] describes one.
        devices: Vec<DeviceInfo>,
    },
    /// NVRTC compiled the source.
    Compiled(CompileInfo),
    /// The module loaded.
    Loaded {
        /// Host time spent in `cuModuleLoadDataEx` (includes any PTX JIT).
        load_ms: f64,
        /// The JIT's info log, if it wrote one.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        info_log: String,
    },
    /// A launch ran and synchronised.
    Launched {
        /// Its function.
        function: String,
    },
    /// A launch's buffers matched what was expected.
    Verified {
        /// Its function.
        function: String,
        /// Elements compared over all its buffers.
        compared: usize,
    },
    /// A launch was timed.
    Timed(LaunchTiming),
    /// The step in progress failed; nothing follows but `done`.
    Failed {
        /// The step.
        step: Step,
        /// What happened.
        failure: Failure,
    },
    /// The child finished normally (after success or a recorded failure).
    Done,
}

/// Appends events to the result file, one `write` per line so that a line
/// is in the file before the next step can crash the process.
#[derive(Debug)]
pub struct EventLog {
    file: std::fs::File,
}

impl EventLog {
    /// Opens (creates) the result file for appending.
    pub fn create(path: &Path) -> std::io::Result<EventLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(EventLog { file })
    }

    /// Writes one event; an error here cannot be reported anywhere else,
    /// so it is ignored and the parent sees a truncated log.
    pub fn emit(&mut self, event: &Event) {
        if let Ok(mut line) = serde_json::to_vec(event) {
            line.push(b'\n');
            let _ = self.file.write_all(&line);
        }
    }
}

/// The events of a result file: every complete line that parses, and how
/// many did not (a line cut by a crash, or garbage).
pub fn read_events(path: &Path) -> (Vec<Event>, usize) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (Vec::new(), 0);
    };
    let mut events = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(e) => events.push(e),
            Err(_) => bad += 1,
        }
    }
    (events, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = EventLog::create(&path).unwrap();
        let events = vec![
            Event::Step { step: Step::Driver },
            Event::Failed {
                step: Step::Load,
                failure: Failure::Driver {
                    call: "cuModuleLoadDataEx".into(),
                    code: 209,
                    name: "CUDA_ERROR_NO_BINARY_FOR_GPU".into(),
                    message: "no kernel image is available".into(),
                    log: None,
                },
            },
            Event::Done,
        ];
        for e in &events {
            log.emit(e);
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"event\":\"step\",\"st")
            .unwrap();
        assert_eq!(read_events(&path), (events, 1));
    }

    #[test]
    fn median_of_samples() {
        let t = |s: &[f64]| LaunchTiming {
            function: "f".into(),
            warmup: 0,
            samples_ms: s.to_vec(),
        };
        assert_eq!(t(&[3.0, 1.0, 2.0]).median_ms(), Some(2.0));
        assert_eq!(t(&[4.0, 1.0, 2.0, 3.0]).median_ms(), Some(2.5));
        assert_eq!(t(&[]).median_ms(), None);
    }
}
