//! The Python capability probes of `doctor`: torch (import, `torch.cuda`,
//! one op), Triton (compile + launch), CuTe-DSL (import + a tiny kernel),
//! each in its own sandboxed interpreter running `probes/doctor/doctor.py`.

use super::{Check, DoctorOptions, Verdict};
use crate::classify::{self, OutcomeKind, Phase};
use crate::sandbox::{Cancel, ChildCommand, Sandbox, Termination};
use serde::Deserialize;

/// The child-side script, embedded so that an installed binary needs no data files.
const SCRIPT: &str = include_str!("../../probes/doctor/doctor.py");
const RESULT_ENV: &str = "PREFLIGHT_RESULT_FILE";

/// One Python probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    /// `import torch`, `torch.cuda.is_available()`, one op.
    Torch,
    /// A Triton kernel compiled and launched.
    Triton,
    /// A CuTe-DSL kernel compiled and launched.
    CuteDsl,
}

impl Probe {
    pub(super) const ALL: [Probe; 3] = [Probe::Torch, Probe::Triton, Probe::CuteDsl];

    fn name(self) -> &'static str {
        match self {
            Probe::Torch => "torch",
            Probe::Triton => "triton",
            Probe::CuteDsl => "cute_dsl",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Probe::Torch => "torch import + torch.cuda + one op",
            Probe::Triton => "Triton compile + launch",
            Probe::CuteDsl => "CuTe-DSL import + tiny kernel",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Probe::Torch => "torch",
            Probe::Triton => "triton",
            Probe::CuteDsl => "cute",
        }
    }

    /// The failure kind of an error the text does not explain.
    fn default_kind(self) -> OutcomeKind {
        match self {
            Probe::Torch => OutcomeKind::Exited,
            Probe::Triton | Probe::CuteDsl => OutcomeKind::JitCompileError,
        }
    }
}

/// How to install a package the probes need.
fn install_hint(package: &str) -> String {
    match package {
        "torch" => {
            "pip install torch (a CUDA build: see https://pytorch.org/get-started/locally/)".into()
        }
        "triton" => {
            "pip install triton (Linux x86_64 / aarch64; torch's CUDA wheels bring it)".into()
        }
        "nvidia-cutlass-dsl" => "pip install nvidia-cutlass-dsl".into(),
        other => format!("pip install {other}"),
    }
}

/// What the script writes.
#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    message: String,
    #[serde(default)]
    package: Option<String>,
    #[serde(default, rename = "type")]
    type_name: Option<String>,
}

/// Runs one probe; `has_gpu`: the driver found a device, so a Python stack
/// that sees none is broken rather than merely without a GPU.
pub(super) fn run(options: &DoctorOptions, probe: Probe, has_gpu: bool, cancel: &Cancel) -> Check {
    let check = Check::new(probe.name(), probe.title());
    let Some(python) = &options.python else {
        return check.verdict(
            Verdict::Missing,
            OutcomeKind::MissingDependency,
            "no Python interpreter found (python3 on PATH, VIRTUAL_ENV, CONDA_PREFIX, PREFLIGHT_PYTHON)",
            "install Python 3 or pass --python",
        );
    };
    let fail = |check: Check, e: &dyn std::fmt::Display| {
        check.verdict(
            Verdict::Fail,
            OutcomeKind::ProbeError,
            format!("the probe could not run: {e}"),
            "a fault of preflight, not of this machine: please report it",
        )
    };
    let sandbox = match Sandbox::new() {
        Ok(s) => s,
        Err(e) => return fail(check, &e),
    };
    let script = sandbox.dir().join("preflight_doctor.py");
    let result = sandbox.dir().join("preflight_doctor.json");
    if let Err(e) = std::fs::write(&script, SCRIPT) {
        return fail(check, &e);
    }
    let command = ChildCommand::new(python)
        .arg("-B")
        .arg(&script)
        .arg(probe.arg())
        .env(RESULT_ENV, &result)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let run = match sandbox.run(&command, &options.python_limits, cancel) {
        Ok(r) => r,
        Err(e) => return fail(check, &e),
    };
    let check = check.took(run.wall.as_secs_f64() * 1e3);
    let stderr = run.stderr.text();
    let answer: Option<Answer> = std::fs::read(&result)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(answer) = answer else {
        let (kind, what) = match &run.termination {
            Termination::TimedOut { .. } => (OutcomeKind::Timeout, "did not finish".to_owned()),
            Termination::Signaled { name, .. } => {
                (OutcomeKind::Crashed, format!("was killed by {name}"))
            }
            other => (OutcomeKind::Exited, format!("{other} without a result")),
        };
        let last = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("");
        return check.verdict(
            Verdict::Fail,
            kind,
            format!("{} ({}) {what}: {last}", probe.name(), python.display()),
            "run the same import in that Python to see the full error",
        );
    };
    match answer.status.as_str() {
        "pass" => check.verdict(Verdict::Pass, OutcomeKind::Pass, answer.message, ""),
        "missing" => {
            let package = answer.package.unwrap_or_else(|| probe.name().into());
            check.verdict(
                Verdict::Missing,
                OutcomeKind::MissingDependency,
                format!("{package} is not installed in {}", python.display()),
                install_hint(&package),
            )
        }
        "no_device" if !has_gpu => check.skipped(format!("{}; there is no GPU here", answer.message)),
        "no_device" => check.verdict(
            Verdict::Fail,
            OutcomeKind::NoDevice,
            answer.message,
            "the driver sees a GPU but torch does not: install a CUDA build of torch that this driver supports",
        ),
        "wrong" => check.verdict(
            Verdict::Fail,
            OutcomeKind::WrongResult,
            answer.message,
            "a computation gave a wrong result on this GPU: report it with `preflight doctor --json`",
        ),
        _ => {
            let text = format!(
                "{} {}\n{stderr}",
                answer.type_name.as_deref().unwrap_or(""),
                answer.message
            );
            let (kind, hint) = match classify::from_text(&text, Phase::Smoke) {
                Some(o) => (o.kind, o.hint),
                None => (
                    probe.default_kind(),
                    "see the error; check the versions of torch, triton and nvidia-cutlass-dsl against this driver".into(),
                ),
            };
            check.verdict(Verdict::Fail, kind, answer.message, hint)
        }
    }
}
