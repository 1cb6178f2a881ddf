//! Parent side: the cuda executor's events and the way its process ended,
//! turned into one [`Outcome`]. The child reports facts (`CUresult` codes,
//! NVRTC logs, mismatches); the meaning is decided here, with the codes that
//! name a cause by themselves shared with the python executor
//! ([`classify::from_cuda_error`]).

use super::event::{CompileInfo, DeviceInfo, Event, Failure, LaunchTiming, Step};
use crate::classify::{self, Depth, Outcome, OutcomeKind, Phase, Timings};
use crate::sandbox::{RunReport, Termination};

/// What the events of one child say, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The last step the child entered.
    pub last_step: Option<Step>,
    /// `cuDriverGetVersion` (`13000` for 13.0).
    pub driver_version: Option<u32>,
    /// Devices the driver sees.
    pub device_count: Option<u32>,
    /// The device probed.
    pub device: Option<DeviceInfo>,
    /// What NVRTC produced.
    pub compiled: Option<CompileInfo>,
    /// Host time of the module load, in milliseconds.
    pub load_ms: Option<f64>,
    /// Launches that ran, in order.
    pub launched: Vec<String>,
    /// Elements compared against expectations, over all launches.
    pub compared: usize,
    /// Timed launches.
    pub timings: Vec<LaunchTiming>,
    /// The recorded failure.
    pub failure: Option<(Step, Failure)>,
    /// Whether the child wrote `done`.
    pub done: bool,
}

impl Facts {
    /// Folds events in order.
    pub fn from_events(events: &[Event]) -> Facts {
        let mut f = Facts::default();
        for event in events {
            match event {
                Event::Step { step } => f.last_step = Some(*step),
                Event::Driver { version, devices } => {
                    f.driver_version = Some(*version);
                    f.device_count = Some(*devices);
                }
                Event::Device(d) => f.device = Some(d.clone()),
                Event::Compiled(c) => f.compiled = Some(c.clone()),
                Event::Loaded { load_ms, .. } => f.load_ms = Some(*load_ms),
                Event::Launched { function } => f.launched.push(function.clone()),
                Event::Verified { compared, .. } => f.compared += compared,
                Event::Timed(t) => f.timings.push(t.clone()),
                Event::Failed { step, failure } => f.failure = Some((*step, failure.clone())),
                Event::Done => f.done = true,
            }
        }
        f
    }

    /// Timings: total wall time, module load, and the median of the first
    /// timed launch (device events).
    pub fn timings(&self, wall_ms: f64) -> Timings {
        // Rounded to the microsecond, as `check` reports every timing.
        let round = |ms: f64| (ms * 1e3).round() / 1e3;
        Timings {
            total_ms: round(wall_ms),
            import_ms: self.load_ms.map(round),
            smoke_ms: self
                .timings
                .first()
                .and_then(LaunchTiming::median_ms)
                .map(round),
        }
    }
}

/// The phase of the design's taxonomy a step belongs to.
pub fn phase(step: Step) -> Phase {
    match step {
        Step::Start | Step::Driver => Phase::Start,
        Step::Compile | Step::Load => Phase::Load,
        Step::Launch | Step::Time => Phase::Launch,
        Step::Verify => Phase::Verify,
    }
}

const HINT_NO_DRIVER: &str = "no NVIDIA driver here (libcuda.so.1 is not loadable): install the driver, or run where a GPU is (set PREFLIGHT_LIBCUDA for an unusual location)";
const HINT_NVRTC: &str =
    "install NVRTC (pip install nvidia-cuda-nvrtc, or a CUDA toolkit) and point CUDA_HOME at it";
const HINT_SOURCE: &str = "fix the CUDA source (see the compiler log in the stderr tail), or the NVRTC options in preflight.toml";
const HINT_DEVICE_FAULT: &str = "the kernel faulted on the device: run it alone under compute-sanitizer; if it is a released kernel, report it to its authors";
const HINT_LAUNCH: &str = "the launch was refused: check grid, block, shared_mem_bytes and the argument list in preflight.toml against the kernel";
const HINT_BAD_IMAGE: &str = "the module file is not an image this driver can load: rebuild it, and check it with `preflight inspect`";
const HINT_WRONG: &str = "the kernel runs but computes wrong values here: check the expected values in preflight.toml; otherwise do not use this build";

/// Classify one cuda executor run.
pub fn classify(facts: &Facts, run: &RunReport) -> Outcome {
    let mut outcome = decide(facts, run);
    match &run.termination {
        Termination::Exited { code } => outcome.exit_code = Some(*code),
        Termination::Signaled { name, .. } => outcome.signal = Some(name.clone()),
        Termination::TimedOut { .. } | Termination::Cancelled => {}
    }
    let stderr = classify::strip_ansi(&run.stderr.text());
    let lines: Vec<&str> = stderr.lines().collect();
    outcome.stderr_tail =
        lines[lines.len().saturating_sub(classify::STDERR_TAIL_LINES)..].join("\n");
    outcome
}

fn decide(facts: &Facts, run: &RunReport) -> Outcome {
    if let Some((step, failure)) = &facts.failure {
        return from_failure(*step, failure);
    }
    let phase = phase(facts.last_step.unwrap_or(Step::Start));
    match &run.termination {
        Termination::Exited { code: 0 } if facts.done => pass(facts),
        Termination::TimedOut { after, .. } => classify::outcome(
            OutcomeKind::Timeout,
            phase,
            &format!(
                "no result within {:.1} s (still in phase {})",
                after.as_secs_f64(),
                phase.as_str()
            ),
            "the kernel hangs here, or the first load JIT-compiles for longer than the timeout: raise --timeout",
        ),
        Termination::Cancelled => classify::outcome(
            OutcomeKind::ProbeError,
            phase,
            "probe cancelled (interrupted)",
            "run it again to finish this probe",
        ),
        Termination::Signaled { name, .. } => classify::outcome(
            OutcomeKind::Crashed,
            phase,
            &format!("killed by {name} in phase {}", phase.as_str()),
            "the process died inside the CUDA driver or the kernel: run it alone (CUDA_LAUNCH_BLOCKING=1, a debugger)",
        ),
        Termination::Exited { code } => classify::Outcome::probe_error(
            phase,
            &format!(
                "the cuda executor exited {code} without a result (last phase: {}): {}",
                phase.as_str(),
                run.stderr.tail_lines(1).trim()
            ),
        ),
    }
}

fn pass(facts: &Facts) -> Outcome {
    let depth = if facts.compared > 0 {
        Depth::Verified
    } else if !facts.launched.is_empty() {
        Depth::Smoke
    } else {
        Depth::Load
    };
    let what = match depth {
        Depth::Verified => format!(
            "{} launch(es) verified ({} values)",
            facts.launched.len(),
            facts.compared
        ),
        Depth::Smoke => format!(
            "{} launch(es) ran (nothing to verify)",
            facts.launched.len()
        ),
        Depth::Load if facts.load_ms.is_some() => "module loaded (no launches)".to_owned(),
        Depth::Load => "driver and device answered".to_owned(),
    };
    let on = facts.device.as_ref().map_or_else(String::new, |d| {
        format!(" on {} (sm_{}{})", d.name, d.major, d.minor)
    });
    let mut outcome = classify::outcome(OutcomeKind::Pass, Phase::Done, &format!("{what}{on}"), "");
    outcome.depth = Some(depth);
    outcome
}

/// The first line of a compiler log that reports an error, else its first line.
pub fn first_error(log: &str) -> Option<&str> {
    let lines = log.lines().map(str::trim).filter(|l| !l.is_empty());
    lines
        .clone()
        .find(|l| l.contains("error"))
        .or_else(|| lines.clone().next())
}

fn from_failure(step: Step, failure: &Failure) -> Outcome {
    let phase = phase(step);
    let out = |kind, message: &str, hint: &str| classify::outcome(kind, phase, message, hint);
    match failure {
        Failure::LibraryMissing { library, detail } if library.contains("nvrtc") => out(
            OutcomeKind::JitCompileError,
            &format!("NVRTC is not loadable: {detail}"),
            HINT_NVRTC,
        ),
        Failure::LibraryMissing { library, detail } => out(
            OutcomeKind::NoDevice,
            &format!("{library} is not loadable: {detail}"),
            HINT_NO_DRIVER,
        ),
        Failure::SymbolMissing { detail } => out(
            OutcomeKind::DriverTooOld,
            &format!("a CUDA library lacks an entry point preflight uses: {detail}"),
            "upgrade the NVIDIA driver (or the CUDA library named)",
        ),
        Failure::NoSuchDevice { ordinal, count } => out(
            OutcomeKind::NoDevice,
            &format!("no device {ordinal}: the driver sees {count} device(s)"),
            "check CUDA_VISIBLE_DEVICES and nvidia-smi",
        ),
        Failure::Nvrtc {
            code, message, log, ..
        } => {
            let detail = first_error(log).unwrap_or(message);
            out(
                OutcomeKind::JitCompileError,
                &format!("NVRTC: {message} ({code}): {detail}"),
                HINT_SOURCE,
            )
        }
        Failure::Driver {
            call,
            code,
            name,
            message,
            log,
        } => from_driver(phase, call, *code, name, message, log.as_deref()),
        Failure::Mismatch {
            function,
            arg,
            mismatched,
            compared,
            first: (index, got, want),
        } => out(
            OutcomeKind::WrongResult,
            &format!(
                "{function}: argument {arg} has {mismatched} of {compared} values outside the tolerance; first at [{index}]: got {got}, expected {want}"
            ),
            HINT_WRONG,
        ),
        Failure::Input { detail } => classify::Outcome::probe_error(phase, detail),
        Failure::Panic { detail } => {
            classify::Outcome::probe_error(phase, &format!("the cuda executor panicked: {detail}"))
        }
    }
}

fn from_driver(
    phase: Phase,
    call: &str,
    code: u32,
    name: &str,
    message: &str,
    log: Option<&str>,
) -> Outcome {
    let label = format!("{call}: {name} ({code}): {message}");
    let jit = log
        .and_then(first_error)
        .map(|l| format!("; {l}"))
        .unwrap_or_default();
    let out = |kind, hint: &str| classify::outcome(kind, phase, &format!("{label}{jit}"), hint);
    if let Some(mut outcome) = classify::from_cuda_error(code.into(), Some(name), phase) {
        outcome.message = classify::one_line(&format!("{label}{jit}"));
        return outcome;
    }
    match code {
        // not initialized, deinitialized, device unavailable, driver mismatch
        3 | 4 | 46 | 803 => out(
            OutcomeKind::NoDevice,
            "the driver is installed but no device is usable: check nvidia-smi, the driver and the compute mode",
        ),
        200 | 300 => out(OutcomeKind::ImportError, HINT_BAD_IMAGE),
        223 => out(
            OutcomeKind::JitCompileError,
            "PTX JIT is disabled (CUDA_DISABLE_PTX_JIT?): enable it, or use a build with SASS for this GPU",
        ),
        702 => out(
            OutcomeKind::Timeout,
            "the kernel ran into the display watchdog: use a GPU without a display",
        ),
        // illegal address, assert, hardware stack error, illegal instruction,
        // misaligned address, invalid address space, invalid pc, launch failed
        700 | 710 | 714 | 715 | 716 | 717 | 718 | 719 => {
            out(OutcomeKind::Crashed, HINT_DEVICE_FAULT)
        }
        1 | 701 if phase == Phase::Launch => out(OutcomeKind::ProbeError, HINT_LAUNCH),
        _ => out(
            OutcomeKind::Exited,
            "an unexpected CUDA error: see the message; report it if the kernel should run here",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Captured;
    use std::time::Duration;

    fn run(termination: Termination) -> RunReport {
        RunReport {
            termination,
            stdout: Captured::default(),
            stderr: Captured::default(),
            leaked: Vec::new(),
            contained: true,
            wall: Duration::from_millis(5),
            pid: Some(1),
        }
    }

    fn failed(step: Step, failure: Failure) -> Facts {
        Facts::from_events(&[
            Event::Step { step },
            Event::Failed { step, failure },
            Event::Done,
        ])
    }

    fn driver(code: u32, name: &str) -> Failure {
        Failure::Driver {
            call: "cuModuleLoadDataEx".into(),
            code,
            name: name.into(),
            message: "m".into(),
            log: None,
        }
    }

    #[test]
    fn cuda_results_map_to_the_taxonomy() {
        let exited = run(Termination::Exited { code: 0 });
        for (step, code, name, kind) in [
            (
                Step::Load,
                209,
                "CUDA_ERROR_NO_BINARY_FOR_GPU",
                OutcomeKind::UnsupportedArch,
            ),
            (
                Step::Load,
                222,
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                OutcomeKind::PtxTooNew,
            ),
            (
                Step::Load,
                218,
                "CUDA_ERROR_INVALID_PTX",
                OutcomeKind::JitCompileError,
            ),
            (
                Step::Driver,
                100,
                "CUDA_ERROR_NO_DEVICE",
                OutcomeKind::NoDevice,
            ),
            (
                Step::Driver,
                34,
                "CUDA_ERROR_STUB_LIBRARY",
                OutcomeKind::NoDevice,
            ),
            (
                Step::Driver,
                35,
                "CUDA_ERROR_INSUFFICIENT_DRIVER",
                OutcomeKind::DriverTooOld,
            ),
            (
                Step::Launch,
                2,
                "CUDA_ERROR_OUT_OF_MEMORY",
                OutcomeKind::OutOfMemory,
            ),
            (
                Step::Launch,
                500,
                "CUDA_ERROR_NOT_FOUND",
                OutcomeKind::MissingSymbol,
            ),
            (
                Step::Launch,
                700,
                "CUDA_ERROR_ILLEGAL_ADDRESS",
                OutcomeKind::Crashed,
            ),
            (
                Step::Launch,
                701,
                "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                OutcomeKind::ProbeError,
            ),
            (
                Step::Load,
                200,
                "CUDA_ERROR_INVALID_IMAGE",
                OutcomeKind::ImportError,
            ),
            (Step::Driver, 999, "CUDA_ERROR_UNKNOWN", OutcomeKind::Exited),
        ] {
            let o = classify(&failed(step, driver(code, name)), &exited);
            assert_eq!(o.kind, kind, "{code}");
            assert!(o.message.contains(name), "{}", o.message);
            assert!(!o.hint.is_empty());
        }
    }

    #[test]
    fn phases_follow_steps() {
        let exited = run(Termination::Exited { code: 0 });
        let o = classify(&failed(Step::Load, driver(209, "X")), &exited);
        assert_eq!(o.phase, Phase::Load);
        let o = classify(&failed(Step::Time, driver(700, "X")), &exited);
        assert_eq!(o.phase, Phase::Launch);
    }

    #[test]
    fn a_death_is_attributed_to_the_last_step() {
        let facts = Facts::from_events(&[
            Event::Step { step: Step::Driver },
            Event::Step { step: Step::Load },
        ]);
        let o = classify(
            &facts,
            &run(Termination::Signaled {
                signal: 11,
                name: "SIGSEGV".into(),
                core_dumped: false,
            }),
        );
        assert_eq!((o.kind, o.phase), (OutcomeKind::Crashed, Phase::Load));
        assert_eq!(o.signal.as_deref(), Some("SIGSEGV"));
        let o = classify(
            &facts,
            &run(Termination::TimedOut {
                after: Duration::from_secs(3),
                needed_sigkill: false,
            }),
        );
        assert_eq!((o.kind, o.phase), (OutcomeKind::Timeout, Phase::Load));
        let o = classify(&facts, &run(Termination::Exited { code: 0 }));
        assert_eq!(o.kind, OutcomeKind::ProbeError);
    }

    #[test]
    fn nvrtc_failures_carry_the_first_error_line() {
        let facts = failed(
            Step::Compile,
            Failure::Nvrtc {
                call: "nvrtcCompileProgram".into(),
                code: 6,
                message: "NVRTC_ERROR_COMPILATION".into(),
                log: "k.cu(3): warning: w\nk.cu(4): error: identifier \"q\" is undefined\n".into(),
            },
        );
        let o = classify(&facts, &run(Termination::Exited { code: 0 }));
        assert_eq!(
            (o.kind, o.phase),
            (OutcomeKind::JitCompileError, Phase::Load)
        );
        assert!(
            o.message.contains("identifier \"q\" is undefined"),
            "{}",
            o.message
        );
    }

    #[test]
    fn pass_depth_follows_what_ran() {
        let exited = run(Termination::Exited { code: 0 });
        let facts = Facts::from_events(&[Event::Step { step: Step::Driver }, Event::Done]);
        assert_eq!(classify(&facts, &exited).depth, Some(Depth::Load));
        let facts = Facts::from_events(&[
            Event::Launched {
                function: "f".into(),
            },
            Event::Verified {
                function: "f".into(),
                compared: 4,
            },
            Event::Done,
        ]);
        let o = classify(&facts, &exited);
        assert_eq!(
            (o.kind, o.depth),
            (OutcomeKind::Pass, Some(Depth::Verified))
        );
    }
}
