//! The conditions transformers' integrations check by hand (deepgemm.py,
//! sonicmoe.py, …), as the python driver reports them, classified with and
//! without the machine's facts.

use super::tests::{evidence, exited, failed};
use super::*;
use crate::fingerprint::{ComputeCapability, FoundVia, Toolkit, Toolkits};
use crate::protocol::{DeviceState, Event, ExceptionInfo, Frame, Provider};
use std::path::PathBuf;

fn module(name: &str) -> String {
    serde_json::to_string(&Event::Module {
        name: name.into(),
        package: Some("deep_gemm".into()),
    })
    .unwrap()
}

fn phase(phase: Phase) -> String {
    serde_json::to_string(&Event::Phase { phase, what: None }).unwrap()
}

fn state(state: DeviceState) -> String {
    serde_json::to_string(&Event::DeviceState(state)).unwrap()
}

fn raised(e: ExceptionInfo, at: Phase, before: &[String], machine: &Machine) -> Outcome {
    let mut channel = vec![module("_deep_gemm_0c3eb4e"), phase(at)];
    channel.extend(before.iter().cloned());
    channel.push(failed(at, Failure::Exception(Box::new(e))));
    classify_on(&evidence(exited(1), &channel, ""), machine)
}

fn exception(type_name: &str, message: &str) -> ExceptionInfo {
    ExceptionInfo {
        type_name: type_name.into(),
        module: "builtins".into(),
        mro: vec![format!("builtins.{type_name}"), "builtins.Exception".into()],
        message: message.into(),
        ..ExceptionInfo::default()
    }
}

fn toolkit(root: &str, via: FoundVia, nvcc: bool, version: &str) -> Toolkit {
    Toolkit {
        root: PathBuf::from(root),
        found_via: via,
        nvcc: nvcc.then(|| PathBuf::from(format!("{root}/bin/nvcc"))),
        ptxas: None,
        version: Some(version.into()),
        version_from: None,
        problem: None,
    }
}

/// A machine whose only nvcc is inside the CUDA 13 wheels of a venv.
fn wheel_only() -> Machine {
    let root = "/venv/lib/python3.12/site-packages/nvidia/cu13";
    Machine {
        toolkits: Some(Toolkits {
            active: Some(root.into()),
            visible: None,
            found: vec![toolkit(root, FoundVia::PipWheel, true, "13.5.37")],
            nvrtc: vec![],
            cudart: vec![],
        }),
        capability: Some(ComputeCapability::new(9, 0)),
        nvidia: Some(true),
    }
}

/// DeepGEMM's `_find_cuda_home`, as its hub build raised it.
fn cuda_home_assert() -> ExceptionInfo {
    ExceptionInfo {
        frames: vec![Frame {
            file: "/v/deep_gemm/__init__.py".into(),
            function: "_find_cuda_home".into(),
            line: 770,
            source: "assert cuda_home is not None".into(),
            strings: vec![
                "CUDA_HOME".into(),
                "CUDA_PATH".into(),
                "which".into(),
                "nvcc".into(),
            ],
        }],
        ..exception("AssertionError", "")
    }
}

#[test]
fn a_toolkit_lookups_failed_assertion_is_nvcc_missing_with_the_wheels_cuda_home() {
    let outcome = raised(cuda_home_assert(), Phase::Smoke, &[], &wheel_only());
    assert_eq!(outcome.kind, OutcomeKind::NvccMissing, "{outcome:?}");
    assert!(
        outcome.message.contains("`assert cuda_home is not None`"),
        "{}",
        outcome.message
    );
    assert!(
        outcome.message.contains("_find_cuda_home"),
        "{}",
        outcome.message
    );
    assert!(
        outcome
            .hint
            .contains("set CUDA_HOME=/venv/lib/python3.12/site-packages/nvidia/cu13"),
        "{}",
        outcome.hint
    );
    assert!(outcome.hint.contains("CUDA 13.5.37"), "{}", outcome.hint);

    // Without the machine's facts: the same cause, the general hint.
    let bare = raised(cuda_home_assert(), Phase::Smoke, &[], &Machine::default());
    assert_eq!(bare.kind, OutcomeKind::NvccMissing);
    assert_eq!(bare.hint, hints::NVCC_MISSING);

    // A machine where a kernel does see an nvcc: the assertion is about
    // something else, and no nvcc_missing is claimed.
    let mut seen = wheel_only();
    let toolkits = seen.toolkits.as_mut().unwrap();
    let home = tempfile::tempdir().unwrap();
    let nvcc = home.path().join("bin/nvcc");
    std::fs::create_dir_all(nvcc.parent().unwrap()).unwrap();
    std::fs::write(&nvcc, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    toolkits.visible = Some(home.path().to_path_buf());
    let other = raised(cuda_home_assert(), Phase::Smoke, &[], &seen);
    assert_eq!(other.kind, OutcomeKind::Exited, "{other:?}");

    // An assertion elsewhere is not a toolkit lookup.
    let mut unrelated = cuda_home_assert();
    unrelated.frames[0] = Frame {
        function: "check_shapes".into(),
        source: "assert x.shape == y.shape".into(),
        ..Frame::default()
    };
    assert_eq!(
        raised(unrelated, Phase::Smoke, &[], &wheel_only()).kind,
        OutcomeKind::Exited
    );
}

#[test]
fn deep_gemms_jit_assertions_name_the_toolkit_problem() {
    let cases = [
        (
            "Assertion error (/src/deep_gemm/csrc/jit/compiler.hpp:199): std::filesystem::exists(nvcc_path)",
            OutcomeKind::NvccMissing,
        ),
        (
            "Assertion error (csrc/jit/compiler.hpp:61): not cuda_home.empty()",
            OutcomeKind::NvccMissing,
        ),
        (
            "Assertion error (csrc/jit/compiler.hpp:211): (major > 12 or (major == 12 and minor >= 3)) and \"NVCC version should be >= 12.3\"",
            OutcomeKind::NvccTooOld,
        ),
        (
            "Assertion error (csrc/jit/compiler.hpp:252): false and \"NVCC compilation failed\"",
            OutcomeKind::JitCompileError,
        ),
    ];
    for (message, kind) in cases {
        let outcome = raised(
            exception("RuntimeError", message),
            Phase::Smoke,
            &[],
            &wheel_only(),
        );
        assert_eq!(outcome.kind, kind, "{message}: {outcome:?}");
    }
    let outcome = raised(
        exception("RuntimeError", cases[0].0),
        Phase::Smoke,
        &[],
        &wheel_only(),
    );
    assert!(outcome.hint.contains("CUDA_HOME=/venv"), "{}", outcome.hint);
}

fn nvcc_refused(target: &str, command: &str, machine: &Machine) -> Outcome {
    let e = ExceptionInfo {
        command: Some(command.into()),
        returncode: Some(1),
        output: Some(format!(
            "nvcc fatal   : Unsupported gpu architecture '{target}'\n"
        )),
        ..exception(
            "CalledProcessError",
            "Command '['nvcc', …]' returned non-zero exit status 1.",
        )
    };
    raised(e, Phase::Smoke, &[], machine)
}

fn with_release(version: &str, capability: Option<ComputeCapability>) -> Machine {
    let root = "/opt/cuda";
    Machine {
        toolkits: Some(Toolkits {
            active: Some(root.into()),
            visible: Some(root.into()),
            found: vec![toolkit(root, FoundVia::CudaHome, true, version)],
            nvrtc: vec![],
            cudart: vec![],
        }),
        capability,
        nvidia: Some(true),
    }
}

#[test]
fn an_architecture_nvcc_refused_blames_the_older_side() {
    let ada = Some(ComputeCapability::new(8, 9));
    let b200 = Some(ComputeCapability::new(10, 0));
    let volta = Some(ComputeCapability::new(7, 0));
    // This release knows 8.9; no release has an `a` variant of it: the GPU.
    let o = nvcc_refused(
        "sm_89a",
        "/opt/cuda/bin/nvcc",
        &with_release("13.5.37", ada),
    );
    assert_eq!(o.kind, OutcomeKind::UnsupportedArch, "{o:?}");
    assert!(o.message.contains("nvcc 13.5 (/opt/cuda)"), "{}", o.message);
    assert!(o.message.contains("this GPU is sm_89"), "{}", o.message);
    assert_eq!(o.hint, hints::ARCH_FEATURES);
    // 12.2 does not know sm_100a; 12.8 does: nvcc is too old.
    let o = nvcc_refused(
        "compute_100a",
        "/opt/cuda/bin/nvcc",
        &with_release("12.2.140", b200),
    );
    assert_eq!(o.kind, OutcomeKind::NvccTooOld, "{o:?}");
    assert!(
        o.message.contains("CUDA 12.8 is the first"),
        "{}",
        o.message
    );
    assert!(o.hint.contains("12.8 or newer"), "{}", o.hint);
    // 13.0 dropped sm_70: the GPU is older than the toolkit supports.
    let o = nvcc_refused("compute_70", "nvcc", &with_release("13.0.88", volta));
    assert_eq!(o.kind, OutcomeKind::UnsupportedArch, "{o:?}");
    assert!(o.hint.contains("CUDA 12.9"), "{}", o.hint);
    // Without the machine: decided by the architecture alone.
    let o = nvcc_refused("compute_89a", "nvcc", &Machine::default());
    assert_eq!(o.kind, OutcomeKind::UnsupportedArch, "{o:?}");
    let o = nvcc_refused("sm_100f", "nvcc", &Machine::default());
    assert_eq!(o.kind, OutcomeKind::NvccTooOld, "{o:?}");
    // Raised from the nvcc failure (`raise RuntimeError(...) from e`): the
    // cause carries the command and its output.
    let cause = ExceptionInfo {
        command: Some("/opt/cuda/bin/nvcc".into()),
        output: Some("nvcc fatal   : Unsupported gpu architecture 'sm_100a'\n".into()),
        ..exception("CalledProcessError", "returned non-zero exit status 1.")
    };
    let e = ExceptionInfo {
        causes: vec![cause],
        ..exception("RuntimeError", "Error building extension 'jit_gemm'")
    };
    let o = raised(e, Phase::Smoke, &[], &with_release("12.2.140", b200));
    assert_eq!(o.kind, OutcomeKind::NvccTooOld, "{o:?}");
    // A non-existent target that is not this GPU's: the kernel's build.
    let o = nvcc_refused(
        "sm_89a",
        "nvcc",
        &with_release("13.5.37", Some(ComputeCapability::new(9, 0))),
    );
    assert_eq!(o.kind, OutcomeKind::JitCompileError, "{o:?}");
}

#[test]
fn a_symbol_missing_below_the_kernels_top_level_is_named_by_its_dotted_path() {
    // `kernel.utils.per_token_cast_to_fp8(x)`: `utils` is there, the
    // function is not.
    let e = ExceptionInfo {
        name: Some("per_token_cast_to_fp8".into()),
        owner: Some("_deep_gemm_0c3eb4e.utils".into()),
        ..exception(
            "AttributeError",
            "module '_deep_gemm_0c3eb4e.utils' has no attribute 'per_token_cast_to_fp8'",
        )
    };
    let o = raised(e, Phase::Smoke, &[], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::MissingSymbol, "{o:?}");
    assert_eq!(
        o.message,
        "the kernel has no attribute `utils.per_token_cast_to_fp8`"
    );
    // `utils` itself is missing: the rest of the chain comes from the line
    // that asked for it, written as an attribute chain or as a dotted
    // string (`resolve_internal_import`-style lookups); a chain that stops
    // at the missing name adds nothing.
    for (source, attribute) in [
        (
            "q, s = kernel.utils.per_token_cast_to_fp8(x, use_ue8m0=False)",
            "utils.per_token_cast_to_fp8",
        ),
        (
            "cast = operator.attrgetter(\"utils.per_token_cast_to_fp8\")(kernel)",
            "utils.per_token_cast_to_fp8",
        ),
        ("u = kernel.utils", "utils"),
    ] {
        let e = ExceptionInfo {
            name: Some("utils".into()),
            owner: Some("_deep_gemm_0c3eb4e".into()),
            frames: vec![Frame {
                source: source.into(),
                ..Frame::default()
            }],
            ..exception(
                "AttributeError",
                "module '_deep_gemm_0c3eb4e' has no attribute 'utils'",
            )
        };
        let o = raised(e, Phase::Smoke, &[], &Machine::default());
        assert_eq!(
            o.message,
            format!("the kernel has no attribute `{attribute}`"),
            "{source}"
        );
    }
    // Python before 3.10: no `obj`, the message says it.
    let e = exception(
        "AttributeError",
        "module '_deep_gemm_0c3eb4e.utils' has no attribute 'per_token_cast_to_fp8'",
    );
    let o = raised(e, Phase::Smoke, &[], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::MissingSymbol, "{o:?}");
    assert!(
        o.message.contains("utils.per_token_cast_to_fp8"),
        "{}",
        o.message
    );
}

fn installed(top: &str, dist: &str, version: &str) -> Provider {
    Provider {
        top: top.into(),
        installed: true,
        distribution: Some(dist.into()),
        version: Some(version.into()),
    }
}

#[test]
fn a_name_an_installed_dependency_lacks_names_the_distribution_and_its_version() {
    let e = ExceptionInfo {
        name: Some("einops".into()),
        provider: Some(installed("einops", "einops", "0.5.0")),
        ..exception(
            "ImportError",
            "cannot import name 'pack' from 'einops' (/site/einops/__init__.py)",
        )
    };
    let o = raised(e, Phase::Import, &[], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::DependencyVersion, "{o:?}");
    assert_eq!(o.message, "`einops` 0.5.0 is installed but has no `pack`");
    assert!(o.hint.contains("`einops` 0.5.0"), "{}", o.hint);
    // An attribute of an installed module (CuTe-DSL / tvm-ffi API drift).
    let e = ExceptionInfo {
        name: Some("structural_equal".into()),
        owner: Some("tvm_ffi".into()),
        provider: Some(installed("tvm_ffi", "apache-tvm-ffi", "0.1.0")),
        ..exception(
            "AttributeError",
            "module 'tvm_ffi' has no attribute 'structural_equal'",
        )
    };
    let o = raised(e, Phase::Smoke, &[], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::DependencyVersion, "{o:?}");
    assert_eq!(
        o.message,
        "`apache-tvm-ffi` 0.1.0 is installed but has no `structural_equal` (in `tvm_ffi`)"
    );
}

#[test]
fn import_guards_are_judged_by_the_device_the_child_found() {
    let guard = || {
        let mut e = exception(
            "ImportError",
            "sonic-moe kernel requires CUDA, but CUDA is not available.",
        );
        e.frames = vec![Frame {
            source:
                "raise ImportError(\"sonic-moe kernel requires CUDA, but CUDA is not available.\")"
                    .into(),
            ..Frame::default()
        }];
        e
    };
    let unusable = state(DeviceState {
        device: "cuda".into(),
        usable: false,
        said: Some("torch 2.9.0+cpu sees no cuda device".into()),
        ..DeviceState::default()
    });
    let o = raised(
        guard(),
        Phase::Import,
        std::slice::from_ref(&unusable),
        &Machine::default(),
    );
    assert_eq!(o.kind, OutcomeKind::NoDevice, "{o:?}");
    assert!(
        o.message
            .contains("requires CUDA, but CUDA is not available"),
        "{}",
        o.message
    );
    assert!(
        o.message.contains("torch 2.9.0+cpu sees no cuda device"),
        "{}",
        o.message
    );
    // The device usable: the guard's words alone decide nothing.
    let usable = state(DeviceState {
        device: "cuda".into(),
        usable: true,
        capability: Some(ComputeCapability::new(9, 0)),
        ..DeviceState::default()
    });
    let o = raised(guard(), Phase::Import, &[usable], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::ImportError, "{o:?}");
    // An import failure that names no device is not a device guard.
    let o = raised(
        exception("ImportError", "bad build"),
        Phase::Import,
        &[unusable],
        &Machine::default(),
    );
    assert_eq!(o.kind, OutcomeKind::ImportError, "{o:?}");

    // The same shape for an architecture, on a GPU below it.
    let hopper = || exception("RuntimeError", "this kernel requires SM90 / Hopper");
    let ampere = |usable| {
        state(DeviceState {
            device: "cuda".into(),
            usable,
            capability: Some(ComputeCapability::new(8, 0)),
            seen_by: Some("driver".into()),
            ..DeviceState::default()
        })
    };
    let o = raised(
        hopper(),
        Phase::Import,
        &[ampere(false)],
        &Machine::default(),
    );
    assert_eq!(o.kind, OutcomeKind::UnsupportedArch, "{o:?}");
    assert!(o.message.contains("sm_80"), "{}", o.message);
    assert!(
        o.message.contains("requires SM90 / Hopper"),
        "{}",
        o.message
    );
    let h100 = state(DeviceState {
        device: "cuda".into(),
        usable: true,
        capability: Some(ComputeCapability::new(9, 0)),
        ..DeviceState::default()
    });
    let o = raised(hopper(), Phase::Import, &[h100], &Machine::default());
    assert_eq!(o.kind, OutcomeKind::ImportError, "{o:?}");
}

#[test]
fn a_kernel_that_says_this_architecture_is_unsupported_is_unsupported_arch_on_a_known_gpu() {
    let e = exception(
        "RuntimeError",
        "Assertion error (csrc/apis/gemm.hpp:99): Unsupported architecture or scaling factor types",
    );
    let ada = Machine {
        capability: Some(ComputeCapability::new(8, 9)),
        ..Machine::default()
    };
    let o = raised(e.clone(), Phase::Smoke, &[], &ada);
    assert_eq!(o.kind, OutcomeKind::UnsupportedArch, "{o:?}");
    assert!(o.message.contains("sm_89"), "{}", o.message);
    assert_eq!(
        raised(e, Phase::Smoke, &[], &Machine::default()).kind,
        OutcomeKind::Exited
    );
}
