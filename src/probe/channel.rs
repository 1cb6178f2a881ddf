//! The result channel: JSON lines the child appends to a file as it goes,
//! read by the parent after the child has ended. Never parsed from stdout.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where a probe was when something happened; a death is attributed to the
/// last phase the child entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The child process started (interpreter up, driver running).
    Start,
    /// Importing the variant's Python module.
    Import,
    /// Loading a native module (cuda executor).
    Load,
    /// Launching a kernel (cuda executor).
    Launch,
    /// Running the smoke workload.
    Smoke,
    /// Comparing the smoke result with its reference.
    Verify,
    /// Everything finished.
    Done,
}

/// How far a passing probe got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Depth {
    /// Imported (loaded) only: no smoke workload was available.
    Load,
    /// A smoke workload ran without a reference to compare with.
    Smoke,
    /// A smoke workload ran and matched its reference.
    Verified,
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

impl Depth {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Depth::Load => "load",
            Depth::Smoke => "smoke",
            Depth::Verified => "verified",
        }
    }
}

/// A Python exception as the driver describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionInfo {
    /// Class name (`ModuleNotFoundError`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Module of the class (`builtins`, `torch`, `triton.compiler.errors`).
    #[serde(default)]
    pub module: String,
    /// Qualified names of the class and its bases, most derived first.
    #[serde(default)]
    pub mro: Vec<String>,
    /// `str(exception)`.
    #[serde(default)]
    pub message: String,
    /// `ImportError.name`: the module that could not be found.
    #[serde(default)]
    pub name: Option<String>,
    /// `OSError.filename`.
    #[serde(default)]
    pub filename: Option<String>,
    /// `OSError.errno`.
    #[serde(default)]
    pub errno: Option<i64>,
    /// A CUDA error code carried by the exception (torch `AcceleratorError`,
    /// CuTe-DSL `DSLCudaRuntimeError`).
    #[serde(default)]
    pub error_code: Option<i64>,
    /// A CUDA error name carried by the exception (`CUDA_ERROR_NO_BINARY_FOR_GPU`).
    #[serde(default)]
    pub error_name: Option<String>,
    /// First word of `CalledProcessError.cmd`.
    #[serde(default)]
    pub command: Option<String>,
    /// The chain of causes (`raise … from e`, or raised while handling), outermost first.
    #[serde(default)]
    pub causes: Vec<ExceptionInfo>,
    /// The last lines of the formatted traceback.
    #[serde(default)]
    pub traceback: Option<String>,
}

impl ExceptionInfo {
    /// Whether the class is, or derives from, a class named `name`
    /// (compared on the unqualified name).
    pub fn is_a(&self, name: &str) -> bool {
        self.type_name == name || self.mro.iter().any(|q| q.rsplit('.').next() == Some(name))
    }

    /// `module.Type`.
    pub fn qualified(&self) -> String {
        if self.module.is_empty() || self.module == "builtins" {
            self.type_name.clone()
        } else {
            format!("{}.{}", self.module, self.type_name)
        }
    }
}

/// What stopped the child, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChildFailure {
    /// The kernel (or its smoke workload) raised.
    Exception(Box<ExceptionInfo>),
    /// The result differed from the reference.
    Mismatch {
        /// How it differed.
        message: String,
    },
    /// The smoke source cannot be used (no `smoke` function, bad return value).
    InvalidSmoke {
        /// Why.
        message: String,
    },
    /// The driver itself failed: a fault of preflight.
    DriverError {
        /// What failed.
        message: String,
    },
}

/// Most bytes of the result channel that are read.
pub const CHANNEL_LIMIT: u64 = 4 << 20;

/// One line of the channel. Unknown fields are ignored so that the driver
/// can report more without breaking older parents.
#[derive(Debug, Deserialize)]
struct Line {
    event: String,
    phase: Phase,
    #[serde(flatten)]
    fields: serde_json::Map<String, serde_json::Value>,
}

/// Everything the child reported, folded into one value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChildReport {
    /// The last phase the child entered, if it reported any.
    pub last_phase: Option<Phase>,
    /// The child's process id and process group, from its `start` event.
    pub pid: Option<u32>,
    /// The child's process group.
    pub pgid: Option<u32>,
    /// The module id the variant was imported as.
    pub module: Option<String>,
    /// The device the smoke ran on (`cuda`, `cpu`, …).
    pub device: Option<String>,
    /// The torch version in the child, when the kernel imported torch.
    pub torch: Option<String>,
    /// Depth reached, from the `done` event.
    pub depth: Option<Depth>,
    /// Import time in milliseconds.
    pub import_ms: Option<f64>,
    /// Smoke time in milliseconds (device events where possible).
    pub smoke_ms: Option<f64>,
    /// The first failure reported.
    pub failure: Option<(Phase, ChildFailure)>,
    /// Lines that could not be parsed (a torn or foreign write).
    pub bad_lines: usize,
}

impl ChildReport {
    /// Whether the child reported reaching `done`.
    pub fn done(&self) -> bool {
        self.last_phase == Some(Phase::Done)
    }

    /// Fold the channel's text into a report.
    pub fn parse(text: &str) -> ChildReport {
        let mut report = ChildReport::default();
        for raw in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Line>(raw) {
                Ok(line) => report.absorb(line),
                Err(_) => report.bad_lines += 1,
            }
        }
        report
    }

    /// Read and fold the channel file; an absent file is an empty report.
    /// Only the first [`CHANNEL_LIMIT`] bytes are read: the driver writes a
    /// few kilobytes, and a child that floods the file must not flood the parent.
    pub fn read(path: &Path) -> std::io::Result<ChildReport> {
        use std::io::Read;
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ChildReport::default());
            }
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.take(CHANNEL_LIMIT).read_to_end(&mut bytes)?;
        Ok(Self::parse(&String::from_utf8_lossy(&bytes)))
    }

    fn absorb(&mut self, line: Line) {
        let f = &line.fields;
        let text = |k: &str| f.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let number = |k: &str| f.get(k).and_then(serde_json::Value::as_f64);
        let id = |k: &str| {
            f.get(k)
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let failure = match line.event.as_str() {
            "phase" => {
                self.last_phase = Some(line.phase);
                self.pid = id("pid").or(self.pid);
                self.pgid = id("pgid").or(self.pgid);
                self.module = text("module").or(self.module.take());
                self.device = text("device").or(self.device.take());
                self.torch = text("torch").or(self.torch.take());
                self.import_ms = number("import_ms").or(self.import_ms);
                self.smoke_ms = number("smoke_ms").or(self.smoke_ms);
                if let Some(depth) = f.get("depth").cloned() {
                    self.depth = serde_json::from_value(depth).ok();
                }
                None
            }
            "exception" => serde_json::from_value(serde_json::Value::Object(line.fields))
                .ok()
                .map(|e| ChildFailure::Exception(Box::new(e))),
            "mismatch" => Some(ChildFailure::Mismatch {
                message: text("message").unwrap_or_default(),
            }),
            "invalid_smoke" => Some(ChildFailure::InvalidSmoke {
                message: text("message").unwrap_or_default(),
            }),
            "driver_error" => Some(ChildFailure::DriverError {
                message: text("message").unwrap_or_default(),
            }),
            _ => None,
        };
        match failure {
            Some(failure) if self.failure.is_none() => self.failure = Some((line.phase, failure)),
            Some(_) => {}
            None if line.event != "phase" => self.bad_lines += 1,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_phases_times_and_the_first_failure() {
        let text = r#"{"event": "phase", "phase": "start", "pid": 10, "pgid": 10}
{"event": "phase", "phase": "import", "variant": "/x"}
{"event": "phase", "phase": "smoke", "import_ms": 1.5, "device": "cpu"}
{"event": "exception", "phase": "smoke", "type": "ModuleNotFoundError", "module": "builtins", "mro": ["builtins.ModuleNotFoundError", "builtins.ImportError"], "message": "No module named 'einops'", "name": "einops"}
{"event": "mismatch", "phase": "verify", "message": "later"}
{"event": "phase", "phase": "sm"#;
        let r = ChildReport::parse(text);
        assert_eq!(r.last_phase, Some(Phase::Smoke));
        assert_eq!((r.pid, r.pgid), (Some(10), Some(10)));
        assert_eq!(r.import_ms, Some(1.5));
        assert_eq!(r.device.as_deref(), Some("cpu"));
        assert_eq!(r.bad_lines, 1, "the torn last line is counted, not fatal");
        let Some((Phase::Smoke, ChildFailure::Exception(e))) = &r.failure else {
            panic!("expected an exception in smoke, got {:?}", r.failure);
        };
        assert_eq!(e.name.as_deref(), Some("einops"));
        assert!(e.is_a("ImportError"));
        assert!(!e.is_a("OSError"));
    }

    #[test]
    fn done_carries_depth_and_timings() {
        let r = ChildReport::parse(
            r#"{"event":"phase","phase":"done","depth":"verified","import_ms":2.0,"smoke_ms":0.25,"module":"_x_1"}"#,
        );
        assert!(r.done());
        assert_eq!(r.depth, Some(Depth::Verified));
        assert_eq!(r.smoke_ms, Some(0.25));
        assert_eq!(r.module.as_deref(), Some("_x_1"));
    }

    #[test]
    fn empty_and_missing_channels_are_empty_reports() {
        assert_eq!(ChildReport::parse(""), ChildReport::default());
        let dir = tempfile::tempdir().unwrap();
        let report = ChildReport::read(&dir.path().join("absent.jsonl")).unwrap();
        assert_eq!(report.last_phase, None);
    }
}
