//! The cuda executor's evidence, and the same deaths in both executors'
//! evidence shapes, classified.

use super::*;
use crate::protocol::{
    Channel, CudaError, DeviceArch, DeviceInfo, Event, ExecutorKind, NvrtcError, Runtime,
    VersionMismatch,
};
use crate::sandbox::Termination;
use std::time::Duration;

fn evidence(executor: ExecutorKind, termination: Termination, events: Vec<Event>) -> Evidence {
    Evidence {
        executor,
        termination,
        events,
        channel: Default::default(),
        stderr: String::new(),
        leaked: None,
        wall: Duration::from_millis(5),
        pid: Some(1),
        made: Default::default(),
        exhausted: Vec::new(),
    }
}

fn hello(executor: ExecutorKind) -> Event {
    Event::Hello {
        protocol: crate::protocol::PROTOCOL_VERSION,
        executor,
        pid: Some(1),
        pgid: Some(1),
    }
}

fn phase(phase: Phase) -> Event {
    Event::Phase { phase, what: None }
}

fn device() -> Event {
    Event::Device(DeviceInfo {
        ordinal: 0,
        name: "GPU".into(),
        arch: DeviceArch::Cuda { major: 9, minor: 0 },
        sm_count: 132,
        total_memory: 1 << 30,
        pci_bus_id: None,
    })
}

/// A cuda child that failed in `at` with `failure`.
fn cuda_failed(at: Phase, failure: Failure) -> Outcome {
    let events = vec![
        hello(ExecutorKind::Cuda),
        phase(Phase::Start),
        phase(at),
        Event::Failed { phase: at, failure },
    ];
    classify(&evidence(
        ExecutorKind::Cuda,
        Termination::Exited { code: 0 },
        events,
    ))
}

fn driver(code: i64, name: &str) -> Failure {
    Failure::Cuda(CudaError {
        call: "cuModuleLoadDataEx".into(),
        code,
        name: name.into(),
        message: "m".into(),
        log: None,
    })
}

#[test]
fn cuda_results_map_to_the_taxonomy() {
    use OutcomeKind::*;
    for (at, code, name, kind, transient) in [
        (
            Phase::Load,
            209,
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            UnsupportedArch,
            false,
        ),
        (
            Phase::Load,
            222,
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            PtxTooNew,
            false,
        ),
        (
            Phase::Load,
            218,
            "CUDA_ERROR_INVALID_PTX",
            JitCompileError,
            false,
        ),
        (Phase::Start, 100, "CUDA_ERROR_NO_DEVICE", NoDevice, false),
        (
            Phase::Start,
            101,
            "CUDA_ERROR_INVALID_DEVICE",
            NoDevice,
            false,
        ),
        (Phase::Start, 34, "CUDA_ERROR_STUB_LIBRARY", NoDevice, false),
        (
            Phase::Start,
            36,
            "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
            DriverTooOld,
            false,
        ),
        (
            Phase::Load,
            227,
            "CUDA_ERROR_INSUFFICIENT_LOADER_VERSION",
            DriverTooOld,
            false,
        ),
        (
            Phase::Start,
            46,
            "CUDA_ERROR_DEVICE_UNAVAILABLE",
            NoDevice,
            true,
        ),
        (Phase::Start, 999, "CUDA_ERROR_UNKNOWN", NoDevice, true),
        (
            Phase::Launch,
            2,
            "CUDA_ERROR_OUT_OF_MEMORY",
            OutOfMemory,
            true,
        ),
        (
            Phase::Launch,
            500,
            "CUDA_ERROR_NOT_FOUND",
            MissingSymbol,
            false,
        ),
        (
            Phase::Launch,
            913,
            "CUDA_ERROR_FUNCTION_NOT_LOADED",
            ImportError,
            false,
        ),
        (
            Phase::Launch,
            700,
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            Crashed,
            false,
        ),
        (
            Phase::Launch,
            701,
            "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            ProbeError,
            false,
        ),
        (
            Phase::Load,
            200,
            "CUDA_ERROR_INVALID_IMAGE",
            ImportError,
            false,
        ),
        (Phase::Load, 7777, "", Exited, false),
    ] {
        let o = cuda_failed(at, driver(code, name));
        assert_eq!((o.kind, o.transient), (kind, transient), "{code}: {o:?}");
        assert_eq!(o.phase, at);
        assert!(o.message.contains(&format!("({code})")), "{}", o.message);
        assert!(o.message.contains(name), "{}", o.message);
        assert!(!o.hint.is_empty());
    }
}

#[test]
fn nvrtc_failures_carry_the_first_error_line() {
    let o = cuda_failed(
        Phase::Load,
        Failure::Nvrtc(NvrtcError {
            call: "nvrtcCompileProgram".into(),
            code: 6,
            message: "NVRTC_ERROR_COMPILATION".into(),
            log: "k.cu(3): warning: w\nk.cu(4): error: identifier \"q\" is undefined\n".into(),
        }),
    );
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
fn missing_libraries_name_what_is_missing() {
    let o = cuda_failed(
        Phase::Start,
        Failure::LibraryMissing {
            library: "libnvrtc".into(),
            detail: "x".into(),
        },
    );
    assert_eq!(o.kind, OutcomeKind::JitCompileError);
    assert_eq!(o.hint, hints::NVRTC_MISSING);
    let o = cuda_failed(
        Phase::Start,
        Failure::LibraryMissing {
            library: "libcuda.so.1".into(),
            detail: "x".into(),
        },
    );
    assert_eq!(
        (o.kind, o.hint.as_str()),
        (OutcomeKind::NoDevice, hints::NO_DRIVER)
    );
}

#[test]
fn pass_depth_and_message_follow_what_ran() {
    let done = |depth, more: Vec<Event>| {
        let mut events = vec![hello(ExecutorKind::Cuda), phase(Phase::Start), device()];
        events.extend(more);
        events.push(Event::Done { depth });
        classify(&evidence(
            ExecutorKind::Cuda,
            Termination::Exited { code: 0 },
            events,
        ))
    };
    let o = done(Depth::Device, vec![]);
    assert_eq!((o.kind, o.depth), (OutcomeKind::Pass, Some(Depth::Device)));
    assert_eq!(o.message, "driver and device answered on GPU (sm_90)");
    let o = done(
        Depth::Verified,
        vec![
            Event::Loaded {
                info_log: String::new(),
            },
            Event::Launched {
                function: "f".into(),
            },
            Event::Verified {
                label: "f".into(),
                compared: 4,
            },
        ],
    );
    assert_eq!(o.depth, Some(Depth::Verified));
    assert_eq!(o.message, "1 launch(es) verified (4 values) on GPU (sm_90)");
}

#[test]
fn another_protocol_version_is_a_probe_error_naming_both() {
    let mut e = evidence(
        ExecutorKind::Cuda,
        Termination::Exited { code: 0 },
        vec![Event::Done {
            depth: Depth::Device,
        }],
    );
    e.channel.version = Some(VersionMismatch {
        child: 9,
        parent: crate::protocol::PROTOCOL_VERSION,
    });
    let o = classify(&e);
    assert_eq!(o.kind, OutcomeKind::ProbeError);
    assert!(
        o.message.contains("version 9")
            && o.message
                .contains(&format!("version {}", crate::protocol::PROTOCOL_VERSION)),
        "{}",
        o.message
    );
}

#[test]
fn a_failure_kind_from_a_newer_child_is_a_probe_error() {
    let o = cuda_failed(Phase::Load, Failure::Unknown);
    assert_eq!(o.kind, OutcomeKind::ProbeError);
    assert!(o.message.contains("does not know"), "{}", o.message);
}

/// The same death in the shape each executor's evidence has: a python
/// child in its smoke workload, a cuda child loading a module.
fn both(termination: Termination, stderr: &str) -> [Outcome; 2] {
    let python = Channel::parse(
        &[
            r#"{"event":"hello","protocol":1,"executor":"python","pid":3,"pgid":3}"#,
            r#"{"event":"phase","phase":"start"}"#,
            r#"{"event":"runtime","python":"3.12.3","executable":"/usr/bin/python3"}"#,
            r#"{"event":"phase","phase":"import","what":"/v"}"#,
            r#"{"event":"module","name":"_k_1"}"#,
            r#"{"event":"timing","span":"import","ms":3.5}"#,
            r#"{"event":"phase","phase":"smoke","what":"file smoke.py"}"#,
        ]
        .join("\n"),
    );
    let cuda = vec![
        hello(ExecutorKind::Cuda),
        phase(Phase::Start),
        Event::Runtime(Runtime {
            cuda_driver: Some(13000),
            devices: Some(1),
            ..Runtime::default()
        }),
        device(),
        phase(Phase::Load),
    ];
    let with_stderr = |mut e: Evidence| {
        e.stderr = stderr.to_owned();
        classify(&e)
    };
    [
        with_stderr(evidence(
            ExecutorKind::Python,
            termination.clone(),
            python.events,
        )),
        with_stderr(evidence(ExecutorKind::Cuda, termination, cuda)),
    ]
}

#[test]
fn the_same_death_is_classified_alike_whichever_executor_saw_it() {
    let segv = Termination::Signaled {
        signal: 11,
        name: "SIGSEGV".into(),
        core_dumped: false,
    };
    let timeout = Termination::TimedOut {
        after: Duration::from_secs(30),
        needed_sigkill: false,
    };
    let exit1 = Termination::Exited { code: 1 };
    let numpy_warning = "/torch/_subclasses/functional_tensor.py:276: UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:81.)\n  cpu = _conversion_method_template(device=torch.device(\"cpu\"))\n";
    for (name, termination, stderr, kind) in [
        (
            "SIGSEGV with faulthandler's stack",
            segv.clone(),
            "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/v/nvcc_helper.py\", line 3 in relu\n",
            OutcomeKind::Crashed,
        ),
        ("SIGSEGV, silent", segv, "", OutcomeKind::Crashed),
        ("timeout", timeout, "", OutcomeKind::Timeout),
        (
            "exit(1) after no kernel image",
            exit1.clone(),
            "CUDA error (flash_fwd_launch_template.h:180): no kernel image is available for execution on the device\n",
            OutcomeKind::UnsupportedArch,
        ),
        (
            "exit(1) after a warning that quotes a missing module",
            exit1.clone(),
            numpy_warning,
            OutcomeKind::Exited,
        ),
        (
            "exit(1) after a warning, then an error line",
            exit1,
            &format!("{numpy_warning}RuntimeError: CUDA error: out of memory\n"),
            OutcomeKind::OutOfMemory,
        ),
    ] {
        let [python, cuda] = both(termination, stderr);
        assert_eq!(python.kind, kind, "{name} (python): {python:?}");
        assert_eq!(cuda.kind, kind, "{name} (cuda): {cuda:?}");
        assert_eq!(python.hint, cuda.hint, "{name}");
        assert_eq!(python.transient, cuda.transient, "{name}");
        assert_eq!(
            (python.exit_code, &python.signal),
            (cuda.exit_code, &cuda.signal),
            "{name}"
        );
        assert_eq!(
            python.message.replace("smoke", "<phase>"),
            cuda.message.replace("load", "<phase>"),
            "{name}"
        );
        assert!(!python.message.contains("numpy"), "{name}: {python:?}");
    }
}

#[test]
fn a_reported_exception_is_not_overruled_by_a_warning_on_stderr() {
    let text = [
        r#"{"event":"hello","protocol":1,"executor":"python"}"#,
        r#"{"event":"phase","phase":"smoke"}"#,
        r#"{"event":"failed","phase":"smoke","failure":{"error":"exception","type":"ValueError","module":"builtins","message":"bad shape (3, 4)"}}"#,
    ]
    .join("\n");
    let mut e = evidence(
        ExecutorKind::Python,
        Termination::Exited { code: 1 },
        Channel::parse(&text).events,
    );
    e.stderr = "x.py:1: UserWarning: Failed to initialize NumPy: No module named 'numpy'\nTraceback (most recent call last):\n  File \"smoke.py\", line 2\nValueError: bad shape (3, 4)\n".into();
    let o = classify(&e);
    assert_eq!(o.kind, OutcomeKind::Exited, "{o:?}");
    assert!(o.message.contains("ValueError: bad shape"), "{}", o.message);
}
