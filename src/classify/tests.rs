//! Table-driven classification tests over real message texts.

use super::*;
use crate::protocol::{Channel, ChannelProblems, Event, ExecutorKind};
use crate::sandbox::Termination;
use std::time::Duration;

const HELLO: &str = r#"{"event":"hello","protocol":1,"executor":"python","pid":7,"pgid":7}"#;
const START: &str = r#"{"event":"phase","phase":"start"}"#;
const IMPORT: &str = r#"{"event":"phase","phase":"import","what":"/v"}"#;
const SMOKE: &str = r#"{"event":"phase","phase":"smoke"}"#;
const DONE: &str = r#"{"event":"done","depth":"verified"}"#;

pub(super) fn exited(code: i32) -> Termination {
    Termination::Exited { code }
}

fn signaled(name: &str) -> Termination {
    Termination::Signaled {
        signal: 11,
        name: name.into(),
        core_dumped: false,
    }
}

fn phase(phase: Phase) -> String {
    serde_json::to_string(&Event::Phase { phase, what: None }).unwrap()
}

pub(super) fn failed(phase: Phase, failure: Failure) -> String {
    serde_json::to_string(&Event::Failed { phase, failure }).unwrap()
}

/// An exception failure in `phase` with the given class, module, bases,
/// message and extra attributes (JSON object members).
fn exception(
    at: Phase,
    type_name: &str,
    module: &str,
    bases: &[&str],
    message: &str,
    extra: &str,
) -> String {
    let mut mro = vec![format!("{module}.{type_name}")];
    mro.extend(bases.iter().map(|b| b.to_string()));
    let json = format!(
        r#"{{"type":"{type_name}","module":"{module}","mro":{},"message":{}{extra}}}"#,
        serde_json::to_string(&mro).unwrap(),
        serde_json::to_string(message).unwrap()
    );
    failed(
        at,
        Failure::Exception(Box::new(serde_json::from_str(&json).unwrap())),
    )
}

/// Evidence of a python child that wrote `channel` (after its hello),
/// ended as `termination` and printed `stderr`.
pub(super) fn evidence(termination: Termination, channel: &[String], stderr: &str) -> Evidence {
    let mut text = vec![HELLO.to_owned()];
    text.extend(channel.iter().cloned());
    let channel = Channel::parse(&text.join("\n"));
    Evidence {
        executor: ExecutorKind::Python,
        termination,
        events: channel.events,
        channel: channel.problems,
        stderr: stderr.to_owned(),
        leaked: None,
        wall: Duration::from_millis(5),
        pid: Some(7),
        made: Default::default(),
        exhausted: Vec::new(),
    }
}

struct Case {
    name: &'static str,
    termination: Termination,
    channel: Vec<String>,
    stderr: &'static str,
    kind: OutcomeKind,
    phase: Phase,
    message_has: &'static str,
}

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn with(mut base: Vec<String>, last: String) -> Vec<String> {
    base.push(last);
    base
}

#[rustfmt::skip]
fn cases() -> Vec<Case> {
    let imported = lines(&[
        START,
        IMPORT,
        r#"{"event":"module","name":"_relu_abc"}"#,
    ]);
    let smoking = lines(&[START, IMPORT, SMOKE]);
    vec![
        Case {
            name: "pass, verified",
            termination: exited(0),
            channel: lines(&[START, IMPORT, SMOKE, DONE]),
            stderr: "",
            kind: OutcomeKind::Pass,
            phase: Phase::Done,
            message_has: "verified",
        },
        Case {
            name: "flash-attn3: message then exit(1), no traceback",
            termination: exited(1),
            channel: smoking.clone(),
            stderr: "CUDA error (/tmp/flash-attention/hopper/flash_fwd_launch_template.h:180): no kernel image is available for execution on the device\n",
            kind: OutcomeKind::UnsupportedArch,
            phase: Phase::Smoke,
            message_has: "no kernel image is available",
        },
        Case {
            name: "torch AcceleratorError with error_code 209",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "AcceleratorError", "torch", &["builtins.RuntimeError"],
                "CUDA error: no kernel image is available for execution on the device\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
                r#","error_code":209"#)),
            stderr: "",
            kind: OutcomeKind::UnsupportedArch,
            phase: Phase::Smoke,
            message_has: "209",
        },
        Case {
            name: "plain RuntimeError: CUDA error 222 text",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "RuntimeError", "builtins", &[],
                "CUDA error: the provided PTX was compiled with an unsupported toolchain.\nCUDA kernel errors might be asynchronously reported at some other API call", "")),
            stderr: "",
            kind: OutcomeKind::PtxTooNew,
            phase: Phase::Smoke,
            message_has: "unsupported toolchain",
        },
        Case {
            name: "legacy cuda runtime error (35)",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "RuntimeError", "builtins", &[],
                "cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:50", "")),
            stderr: "",
            kind: OutcomeKind::DriverTooOld,
            phase: Phase::Smoke,
            message_has: "insufficient",
        },
        Case {
            name: "tvm-ffi driver error name, no device",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "RuntimeError", "builtins", &[],
                "CUDA Driver Error: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected", "")),
            stderr: "",
            kind: OutcomeKind::NoDevice,
            phase: Phase::Smoke,
            message_has: "no CUDA-capable device",
        },
        Case {
            name: "CuTe-DSL DSLCudaRuntimeError with ANSI colours",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "DSLCudaRuntimeError", "cutlass.base_dsl.common", &["cutlass.base_dsl.common.DSLRuntimeError", "cutlass.base_dsl.common.DSLBaseError"],
                "\u{1b}[91mCUDA error during kernel load\u{1b}[0m\nError name: CUDA_ERROR_NO_BINARY_FOR_GPU", r#","error_code":209,"error_name":"CUDA_ERROR_NO_BINARY_FOR_GPU""#)),
            stderr: "",
            kind: OutcomeKind::UnsupportedArch,
            phase: Phase::Smoke,
            message_has: "CUDA_ERROR_NO_BINARY_FOR_GPU (209)",
        },
        Case {
            name: "torch OutOfMemoryError",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "OutOfMemoryError", "torch", &["builtins.RuntimeError"],
                "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 3.12 GiB is free.", "")),
            stderr: "",
            kind: OutcomeKind::OutOfMemory,
            phase: Phase::Smoke,
            message_has: "Tried to allocate",
        },
        Case {
            name: "ModuleNotFoundError names the module",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ModuleNotFoundError", "builtins", &["builtins.ImportError"],
                "No module named 'einops'", r#","name":"einops""#)),
            stderr: "",
            kind: OutcomeKind::MissingDependency,
            phase: Phase::Import,
            message_has: "`einops`",
        },
        Case {
            name: "the variant's own missing submodule is an import error",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ModuleNotFoundError", "builtins", &["builtins.ImportError"],
                "No module named '_relu_abc._ops'", r#","name":"_relu_abc._ops""#)),
            stderr: "",
            kind: OutcomeKind::ImportError,
            phase: Phase::Import,
            message_has: "_relu_abc._ops",
        },
        Case {
            name: "undefined symbol names the symbol",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ImportError", "builtins", &[],
                "/root/.cache/huggingface/hub/kernels--kernels-community--activation/snapshots/1/build/torch28-cxx11-cu128-x86_64-linux/_activation_0c3eb4e.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEa", "")),
            stderr: "",
            kind: OutcomeKind::ImportError,
            phase: Phase::Import,
            message_has: "undefined symbol: _ZN3c104cuda9SetDeviceEa",
        },
        Case {
            name: "missing shared library names it",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ImportError", "builtins", &[],
                "libcudart.so.13: cannot open shared object file: No such file or directory", "")),
            stderr: "",
            kind: OutcomeKind::ImportError,
            phase: Phase::Import,
            message_has: "libcudart.so.13",
        },
        Case {
            name: "missing libcuda means no driver",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "OSError", "builtins", &[],
                "libcuda.so.1: cannot open shared object file: No such file or directory", r#","errno":2"#)),
            stderr: "",
            kind: OutcomeKind::NoDevice,
            phase: Phase::Import,
            message_has: "libcuda.so.1",
        },
        Case {
            name: "GLIBC version names it",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ImportError", "builtins", &[],
                "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by /x/_ops.abi3.so)", "")),
            stderr: "",
            kind: OutcomeKind::ImportError,
            phase: Phase::Import,
            message_has: "GLIBC_2.34",
        },
        Case {
            name: "subprocess nvcc absent",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "FileNotFoundError", "builtins", &["builtins.OSError"],
                "[Errno 2] No such file or directory: 'nvcc'", r#","filename":"nvcc","errno":2"#)),
            stderr: "",
            kind: OutcomeKind::NvccMissing,
            phase: Phase::Smoke,
            message_has: "nvcc not found",
        },
        Case {
            name: "nvcc too old for the target arch",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "CalledProcessError", "subprocess", &["subprocess.SubprocessError"],
                "Command '['nvcc', '-arch=sm_103a', 'k.cu']' returned non-zero exit status 1.", r#","command":"nvcc","returncode":1"#)),
            stderr: "nvcc fatal   : Unsupported gpu architecture 'compute_103a'\n",
            kind: OutcomeKind::NvccTooOld,
            phase: Phase::Smoke,
            message_has: "compute_103a",
        },
        Case {
            name: "Triton compilation error",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "CompilationError", "triton.compiler.errors", &["triton.compiler.errors.TritonError"],
                "at 12:4:\n    x = tl.load(ptr)\n    ^\nunsupported", "")),
            stderr: "",
            kind: OutcomeKind::JitCompileError,
            phase: Phase::Smoke,
            message_has: "CompilationError: unsupported (at 12:4: `x = tl.load(ptr)`)",
        },
        Case {
            name: "Triton out of shared memory",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "OutOfResources", "triton.runtime.errors", &["triton.runtime.errors.TritonError"],
                "out of resource: shared memory, Required: 232448, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.", "")),
            stderr: "",
            kind: OutcomeKind::JitCompileError,
            phase: Phase::Smoke,
            message_has: "shared memory",
        },
        Case {
            name: "NVRTC compile failure in text",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "RuntimeError", "builtins", &[],
                "NVRTC_ERROR_COMPILATION: kernel.cu(3): error: identifier \"foo\" is undefined", "")),
            stderr: "",
            kind: OutcomeKind::JitCompileError,
            phase: Phase::Smoke,
            message_has: "NVRTC_ERROR_COMPILATION",
        },
        Case {
            name: "cannot import name from a dependency",
            termination: exited(1),
            channel: with(imported.clone(), exception(Phase::Import, "ImportError", "builtins", &[],
                "cannot import name 'make_fake_compact_tensor' from 'cutlass.cute.runtime' (/site-packages/cutlass/cute/runtime.py)", r#","name":"cutlass.cute.runtime""#)),
            stderr: "",
            kind: OutcomeKind::DependencyVersion,
            phase: Phase::Import,
            message_has: "make_fake_compact_tensor",
        },
        Case {
            name: "kernel lacks the called function",
            termination: exited(1),
            channel: with(with(imported.clone(), phase(Phase::Smoke)), exception(Phase::Smoke, "AttributeError", "builtins", &[],
                "module '_relu_abc' has no attribute 'gelu_fast'", r#","name":"gelu_fast""#)),
            stderr: "",
            kind: OutcomeKind::MissingSymbol,
            phase: Phase::Smoke,
            message_has: "gelu_fast",
        },
        Case {
            name: "wrong result",
            termination: exited(1),
            channel: with(with(lines(&[START, IMPORT, SMOKE]), phase(Phase::Verify)),
                failed(Phase::Verify, Failure::Mismatch { label: None, message: "3 of 16 elements differ beyond rtol=1e-07 atol=1e-07 (max abs diff 1)".into() })),
            stderr: "",
            kind: OutcomeKind::WrongResult,
            phase: Phase::Verify,
            message_has: "3 of 16",
        },
        Case {
            name: "segfault",
            termination: signaled("SIGSEGV"),
            channel: smoking.clone(),
            stderr: "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/v/__init__.py\", line 3 in relu\n",
            kind: OutcomeKind::Crashed,
            phase: Phase::Smoke,
            message_has: "SIGSEGV",
        },
        Case {
            name: "abort after a CUDA message is the CUDA cause",
            termination: signaled("SIGABRT"),
            channel: smoking.clone(),
            stderr: "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: no kernel image is available for execution on the device\n",
            kind: OutcomeKind::UnsupportedArch,
            phase: Phase::Smoke,
            message_has: "no kernel image",
        },
        Case {
            name: "plain nonzero exit",
            termination: exited(3),
            channel: smoking.clone(),
            stderr: "something went wrong\n",
            kind: OutcomeKind::Exited,
            phase: Phase::Smoke,
            message_has: "code 3: something went wrong",
        },
        Case {
            name: "timeout in import",
            termination: Termination::TimedOut { after: Duration::from_secs(5), needed_sigkill: true },
            channel: lines(&[START, IMPORT]),
            stderr: "",
            kind: OutcomeKind::Timeout,
            phase: Phase::Import,
            message_has: "5.0 s",
        },
        Case {
            name: "exit 0 in the import, before a result, is the kernel's",
            termination: exited(0),
            channel: lines(&[START, IMPORT]),
            stderr: "",
            kind: OutcomeKind::Exited,
            phase: Phase::Import,
            message_has: "code 0 in phase import before reporting a result",
        },
        Case {
            name: "driver never started",
            termination: exited(1),
            channel: vec![],
            stderr: "  File \"preflight_driver.py\", line 1\nSyntaxError: invalid syntax\n",
            kind: OutcomeKind::ProbeError,
            phase: Phase::Start,
            message_has: "SyntaxError",
        },
        Case {
            name: "driver bug",
            termination: exited(3),
            channel: with(lines(&[START]), failed(Phase::Start, Failure::Internal { message: "KeyError: 'x'".into(), traceback: None })),
            stderr: "",
            kind: OutcomeKind::ProbeError,
            phase: Phase::Start,
            message_has: "KeyError",
        },
        Case {
            name: "unknown exception in smoke",
            termination: exited(1),
            channel: with(smoking.clone(), exception(Phase::Smoke, "ValueError", "builtins", &[], "bad shape (3, 4)", "")),
            stderr: "",
            kind: OutcomeKind::Exited,
            phase: Phase::Smoke,
            message_has: "ValueError: bad shape",
        },
    ]
}

#[test]
fn classifies_real_failure_texts() {
    let mut failures = Vec::new();
    for case in cases() {
        let outcome = classify(&evidence(
            case.termination.clone(),
            &case.channel,
            case.stderr,
        ));
        if outcome.kind != case.kind
            || outcome.phase != case.phase
            || !outcome.message.contains(case.message_has)
            || outcome.message.contains('\n')
            || outcome.hint.contains('\n')
        {
            failures.push(format!(
                "{}: expected {} in {} with {:?}, got {:?}",
                case.name,
                case.kind,
                case.phase.as_str(),
                case.message_has,
                outcome
            ));
        }
        if case.kind != OutcomeKind::Pass && outcome.hint.is_empty() {
            failures.push(format!("{}: no hint", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn records_exit_code_signal_and_stderr_tail() {
    let stderr: String = (0..50).map(|i| format!("line {i}\n")).collect();
    let outcome = classify(&evidence(signaled("SIGABRT"), &lines(&[SMOKE]), &stderr));
    assert_eq!(outcome.signal.as_deref(), Some("SIGABRT"));
    assert_eq!(outcome.exit_code, None);
    assert_eq!(outcome.stderr_tail.lines().count(), STDERR_TAIL_LINES);
    assert!(outcome.stderr_tail.ends_with("line 49"));
}

#[test]
fn an_unreadable_channel_after_exit_0_is_a_probe_error() {
    let mut e = evidence(exited(0), &[], "");
    e.channel = ChannelProblems {
        unreadable: Some("permission denied".into()),
        ..ChannelProblems::default()
    };
    let outcome = classify(&e);
    assert_eq!(outcome.kind, OutcomeKind::ProbeError);
    assert!(outcome.message.contains("permission denied"));
}

#[test]
fn serde_names_are_snake_case() {
    let json = serde_json::to_value(Outcome::skipped(
        "OS (windows) does not match system OS (linux)",
    ))
    .unwrap();
    assert_eq!(json["kind"], "skipped");
    assert_eq!(json["phase"], "start");
    assert_eq!(json["depth"], serde_json::Value::Null);
    let kinds: Vec<String> = [
        OutcomeKind::NoDevice,
        OutcomeKind::JitCompileError,
        OutcomeKind::OutOfMemory,
    ]
    .iter()
    .map(|k| {
        serde_json::to_value(k)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    })
    .collect();
    assert_eq!(kinds, ["no_device", "jit_compile_error", "out_of_memory"]);
    for kind in [
        OutcomeKind::Pass,
        OutcomeKind::DriverTooOld,
        OutcomeKind::ProbeError,
    ] {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
}

#[test]
fn one_line_strips_colour_and_newlines() {
    assert_eq!(one_line("\u{1b}[91ma\u{1b}[0m\n  b\tc"), "a b c");
    assert!(one_line(&"x".repeat(1000)).chars().count() <= 240);
}

/// Done, then the interpreter would not exit (a thread that is not a
/// daemon, an atexit handler): the evidence stands, with a warning, and it
/// is kept (not transient).
#[test]
fn a_probe_that_does_not_exit_after_done_passes_with_a_warning() {
    let termination = Termination::DidNotExit {
        within: Duration::from_secs(3),
    };
    let done = lines(&[START, IMPORT, SMOKE, DONE]);
    let outcome = classify(&evidence(termination.clone(), &done, ""));
    assert_eq!(outcome.kind, OutcomeKind::Pass);
    assert_eq!(outcome.depth, Some(Depth::Verified));
    assert!(!outcome.transient);
    let warning = outcome.warning.expect("a warning");
    assert!(warning.contains("will not exit by itself"), "{warning}");
    // Without a result it is the hang it looks like.
    let hung = classify(&evidence(termination, &lines(&[START, IMPORT]), ""));
    assert_eq!(hung.kind, OutcomeKind::Timeout);
}

/// A reaper killed or stopped from inside is the variant's outcome.
#[test]
fn a_killed_sandbox_is_a_crash_of_the_variant() {
    for (name, stopped, says) in [
        (
            "SIGKILL",
            false,
            "the kernel killed its sandbox (SIGKILL) in phase import",
        ),
        (
            "SIGSTOP",
            true,
            "the kernel stopped its sandbox (SIGSTOP) in phase import",
        ),
    ] {
        let termination = Termination::SandboxKilled {
            signal: 9,
            name: name.into(),
            stopped,
        };
        let outcome = classify(&evidence(termination, &lines(&[START, IMPORT]), ""));
        assert_eq!(outcome.kind, OutcomeKind::Crashed);
        assert!(outcome.message.contains(says), "{}", outcome.message);
        assert_eq!(outcome.signal.as_deref(), Some(name));
    }
}

#[test]
fn every_kind_says_whose_fault_it_is_and_whether_it_lasts() {
    use super::Fault;
    for &kind in OutcomeKind::ALL {
        assert_eq!(kind.passed(), kind == OutcomeKind::Pass, "{kind}");
        assert_eq!(kind.probed(), kind != OutcomeKind::Skipped, "{kind}");
        let fleeting = matches!(
            kind,
            OutcomeKind::ProbeError | OutcomeKind::Timeout | OutcomeKind::Skipped
        );
        assert_eq!(kind.lasts(), !fleeting, "{kind}");
        assert_eq!(
            kind.fault() == Fault::Preflight,
            kind == OutcomeKind::ProbeError,
            "{kind}"
        );
    }
    // ALL is derived from the enum: the loop above saw the whole taxonomy,
    // each kind under a name of its own, the one serde writes.
    let names: std::collections::BTreeSet<_> =
        OutcomeKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names.len(), OutcomeKind::ALL.len());
    for kind in OutcomeKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
    assert_eq!(OutcomeKind::ALL.first(), Some(&OutcomeKind::Pass));
}

#[test]
fn an_exception_the_child_survived_is_said_as_raised_and_a_death_is_not() {
    let raised = classify(&evidence(
        exited(1),
        &[
            START.to_owned(),
            IMPORT.to_owned(),
            exception(
                Phase::Import,
                "ModuleNotFoundError",
                "builtins",
                &["builtins.ImportError", "builtins.Exception"],
                "No module named 'relu_native'",
                r#","name":"relu_native""#,
            ),
        ],
        "",
    ));
    assert_eq!(raised.kind, OutcomeKind::MissingDependency);
    assert_eq!(
        raised.raised.as_deref(),
        Some("builtins.ModuleNotFoundError")
    );

    // The same CUDA words printed before an exit(1): the child died, the
    // loader's import would end its caller too.
    let died = classify(&evidence(
        exited(1),
        &lines(&[START, IMPORT]),
        "CUDA error (relu.cu:42): no kernel image is available for execution on the device\n",
    ));
    assert_eq!(died.kind, OutcomeKind::UnsupportedArch);
    assert_eq!(died.raised, None);
    let crashed = classify(&evidence(signaled("SIGSEGV"), &lines(&[START, IMPORT]), ""));
    assert_eq!(crashed.raised, None);
}

/// A pass at the device depth of a CUDA variant, on a machine whose
/// fingerprint has no NVIDIA driver and no GPU, cannot be true: refused.
/// Where the machine is not known, or the variant is not CUDA's (ROCm's
/// torch calls its devices `cuda` too), it stands.
#[test]
fn a_pass_the_machine_contradicts_is_refused() {
    use crate::probe::Subject;
    use crate::variant::VariantName;
    let subject = |name: &str| Subject::Variant {
        name: VariantName::parse(name).unwrap(),
        path: name.into(),
    };
    let mut pass = outcome(OutcomeKind::Pass, Phase::Done, "verified", "");
    pass.depth = Some(Depth::Smoke);
    let no_gpu = Machine {
        nvidia: Some(false),
        ..Machine::default()
    };
    for name in ["torch-cuda", "torch29-cxx11-cu128-x86_64-linux"] {
        let refused = against_machine(pass.clone(), &subject(name), &no_gpu);
        assert_eq!(refused.kind, OutcomeKind::ProbeError, "{name}");
        assert!(refused.message.contains("no NVIDIA driver"), "{refused:?}");
        assert_eq!(refused.made, Made::Fresh, "{name}");
    }
    // A forked probe's pass, refused, is still a forked probe's outcome.
    let forked = Outcome {
        made: Made::Forked,
        ..pass.clone()
    };
    let refused = against_machine(forked, &subject("torch-cuda"), &no_gpu);
    assert_eq!(
        (refused.kind, refused.made),
        (OutcomeKind::ProbeError, Made::Forked)
    );
    for (name, machine) in [
        ("torch-rocm", &no_gpu),
        ("torch29-cxx11-rocm63-x86_64-linux", &no_gpu),
        ("torch-cuda", &Machine::default()),
    ] {
        assert_eq!(
            against_machine(pass.clone(), &subject(name), machine),
            pass,
            "{name}"
        );
    }
    let mut load = pass.clone();
    load.depth = Some(Depth::Load);
    assert_eq!(
        against_machine(load.clone(), &subject("torch-cuda"), &no_gpu),
        load
    );
}

/// A probe the out-of-memory killer ended at its own memory bound is
/// `out_of_memory`, named; a SIGKILL with no bound seen reached is a crash
/// whose hint names the killer, not the kernel's authors first; a refused
/// fork keeps the kernel's kind and names the bound. Both depend on what
/// the machine left the probe: transient.
#[test]
fn a_bound_the_probe_reached_is_named() {
    use crate::sandbox::Exhausted;
    let killed = Termination::Signaled {
        signal: libc::SIGKILL,
        name: "SIGKILL".into(),
        core_dumped: false,
    };
    let mut hog = evidence(killed.clone(), &lines(&[START, IMPORT]), "");
    let plain = classify(&hog);
    assert_eq!(plain.kind, OutcomeKind::Crashed);
    assert_eq!(plain.hint, hints::KILLED);
    hog.exhausted = vec![Exhausted::Memory { max: 382 << 20 }];
    let named = classify(&hog);
    assert_eq!(named.kind, OutcomeKind::OutOfMemory);
    assert_eq!(
        named.message,
        "the out-of-memory killer ended it at its memory bound of 382 MiB in phase import (killed by SIGKILL)"
    );
    assert_eq!(named.hint, hints::PROBE_MEMORY);
    assert!(named.transient && !named.lasts());
    let mut bomb = evidence(exited(1), &lines(&[START, IMPORT]), "");
    bomb.exhausted = vec![Exhausted::Pids { max: 73 }];
    let refused = classify(&bomb);
    assert!(
        refused
            .message
            .ends_with("(it reached its bound of 73 processes and threads)"),
        "{refused:?}"
    );
    assert_eq!(refused.hint, hints::PROBE_PIDS);
    assert!(refused.transient);
}
