//! The hub loader's refusals, unusable devices and missing modules, as the
//! python driver reports them.

use super::tests::{evidence, exited, failed};
use super::*;
use crate::protocol::{Event, ExceptionInfo, Provider, Runtime};

fn runtime(acceptance: &str) -> String {
    serde_json::to_string(&Event::Runtime(Runtime {
        acceptance: Some(acceptance.into()),
        ..Runtime::default()
    }))
    .unwrap()
}

fn refused(acceptance: &str, validator: HubCheck, message: &str, package: Option<&str>) -> Outcome {
    let failure = Failure::HubRefused {
        validator,
        message: message.into(),
        package: package.map(str::to_owned),
    };
    classify(&evidence(
        exited(1),
        &[runtime(acceptance), failed(Phase::Import, failure)],
        "",
    ))
}

#[test]
fn hub_refusals_keep_the_hubs_words_and_map_to_the_taxonomy() {
    let parse = "Cannot parse metadata from `\"/home/u/.cache/huggingface/hub/kernels--org--k/snapshots/0123456789abcdef0123456789abcdef01234567/build/torch28-cxx11-cu128-x86_64-linux/metadata.json\"`: missing field `license` at line 1 column 103";
    let cases = [
        (
            HubCheck::Metadata,
            parse,
            None,
            OutcomeKind::ImportError,
            "Cannot parse metadata from metadata.json: missing field `license` at line 1 column 103",
            hints::METADATA.to_owned(),
        ),
        (
            HubCheck::Dependencies,
            "Kernel module `k` requires Python dependency `einops`. Please install with: pip install einops",
            Some("einops"),
            OutcomeKind::MissingDependency,
            "requires Python dependency `einops`",
            hints::install("einops"),
        ),
        (
            HubCheck::Dependencies,
            "Kernel module `k` uses unsupported kernel dependency: numpy",
            None,
            OutcomeKind::ImportError,
            "unsupported kernel dependency: numpy",
            hints::UNSUPPORTED_DEPENDENCY.to_owned(),
        ),
        (
            HubCheck::Minver,
            "Kernel 'k' variant 'torch-cuda' requires kernels>=0.18.0, but version 0.17.2 is installed. Upgrade with: pip install --upgrade kernels",
            None,
            OutcomeKind::DependencyVersion,
            "requires kernels>=0.18.0",
            hints::KERNELS_MINVER.to_owned(),
        ),
        (
            HubCheck::Arch,
            "Kernel 'k' variant 'torch-cuda' does not support the current device: CUDA capability 8.0 …",
            None,
            OutcomeKind::UnsupportedArch,
            "CUDA capability 8.0",
            hints::ARCH.to_owned(),
        ),
        (
            HubCheck::Digest,
            "Kernel 'k' variant 'torch-cpu': the files do not match the digest in the metadata, so they may have been modified:\n__init__.py: …",
            None,
            OutcomeKind::ImportError,
            "do not match the digest",
            hints::DIGEST.to_owned(),
        ),
        (
            HubCheck::Other,
            "a new validator says no",
            None,
            OutcomeKind::ImportError,
            "a new validator says no",
            hints::HUB_REFUSED.to_owned(),
        ),
    ];
    for (check, message, package, kind, quoted, hint) in cases {
        let outcome = refused("kernels 0.17.2", check, message, package);
        assert_eq!(
            (outcome.kind, outcome.phase),
            (kind, Phase::Import),
            "{check:?}"
        );
        assert!(
            outcome
                .message
                .starts_with("hub loader (kernels 0.17.2) refuses it: "),
            "{}",
            outcome.message
        );
        assert!(
            outcome.message.contains(quoted),
            "{check:?}: {}",
            outcome.message
        );
        assert_eq!(outcome.hint, hint);
    }
    let outcome = refused("preflight", HubCheck::Metadata, parse, None);
    assert!(
        outcome.message.starts_with(
            "hub rules (applied by preflight: no `kernels` here) refuse it: Cannot parse"
        ),
        "{}",
        outcome.message
    );
    // A `kernels` release the child has no adapter for: preflight's rules
    // judged, and the message says why, never blaming the kernel's loader.
    let unknown = "preflight: kernels 0.20.0 is a release preflight does not know (it knows 0.17.2, 0.18.3, 0.19.1)";
    let outcome = refused(unknown, HubCheck::Metadata, parse, None);
    assert!(
        outcome.message.starts_with(
            "hub rules (applied by preflight: kernels 0.20.0 is a release preflight does not know (it knows 0.17.2, 0.18.3, 0.19.1)) refuse it: Cannot parse"
        ),
        "{}",
        outcome.message
    );
    assert_eq!(unknown_loader("kernels 0.19.1"), None);
}

#[test]
fn an_unusable_device_is_no_device_with_a_hint_for_its_kind() {
    for (device, hint) in [("cuda:1", "nvidia-smi"), ("xpu", "no usable xpu device")] {
        let failure = Failure::DeviceUnusable {
            device: device.into(),
            message: "torch 2.8.0+cpu sees no device".into(),
        };
        let outcome = classify(&evidence(exited(1), &[failed(Phase::Load, failure)], ""));
        assert_eq!(
            (outcome.kind, outcome.phase),
            (OutcomeKind::NoDevice, Phase::Load)
        );
        assert!(
            outcome
                .message
                .contains(&format!("the {device} device is not usable: torch")),
            "{}",
            outcome.message
        );
        assert!(outcome.hint.contains(hint), "{}", outcome.hint);
        assert!(!outcome.transient);
    }
}

#[test]
fn cuda_error_3_in_a_forked_probe_is_the_forks_never_no_device() {
    // torch's warning when its cudaGetDeviceCount meets a driver started
    // before the fork, then the device check's answer.
    let stderr = "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 3: initialization error";
    let failure = || Failure::DeviceUnusable {
        device: "cuda".into(),
        message: "torch 2.8.0 sees no cuda device: torch.cuda.is_available() is False".into(),
    };
    let fresh = evidence(exited(1), &[failed(Phase::Load, failure())], stderr);
    assert_eq!(classify(&fresh).kind, OutcomeKind::NoDevice);
    let forked = Evidence {
        made: Made::Forked,
        ..fresh
    };
    let outcome = classify(&forked);
    assert_eq!(
        (outcome.kind, outcome.phase, outcome.made),
        (OutcomeKind::ProbeError, Phase::Load, Made::Forked),
        "{outcome:?}"
    );
    assert!(
        outcome.message.contains("CUDA error 3"),
        "{}",
        outcome.message
    );
    assert_eq!(outcome.hint, hints::FORKED_DRIVER);
    assert!(!outcome.lasts());
    // Another reason for no device stays no_device, forked or not.
    let other = Evidence {
        made: Made::Forked,
        ..evidence(exited(1), &[failed(Phase::Load, failure())], "")
    };
    assert_eq!(classify(&other).kind, OutcomeKind::NoDevice);
}

/// A ModuleNotFoundError for `name` in the import of the kernel `fixture`
/// (module id `_fixture_0`), with what the child found for its package.
fn missing(name: &str, provider: Option<Provider>) -> Outcome {
    let module = r#"{"event":"module","name":"_fixture_0","package":"fixture"}"#.to_owned();
    let failure = Failure::Exception(Box::new(ExceptionInfo {
        type_name: "ModuleNotFoundError".into(),
        module: "builtins".into(),
        mro: vec![
            "builtins.ModuleNotFoundError".into(),
            "builtins.ImportError".into(),
        ],
        message: format!("No module named '{name}'"),
        name: Some(name.into()),
        provider,
        ..ExceptionInfo::default()
    }));
    classify(&evidence(
        exited(1),
        &[module, failed(Phase::Import, failure)],
        "",
    ))
}

#[test]
fn a_missing_module_is_named_by_what_provides_it() {
    let triton = Provider {
        top: "triton".into(),
        installed: true,
        distribution: Some("triton".into()),
        version: Some("3.9.0".into()),
    };
    let outcome = missing("triton.tools.experimental_descriptor", Some(triton));
    assert_eq!(outcome.kind, OutcomeKind::DependencyVersion);
    assert_eq!(
        outcome.message,
        "`triton` 3.9.0 is installed but has no module `triton.tools.experimental_descriptor`"
    );
    assert_eq!(
        outcome.hint,
        hints::dependency_version("triton", Some("3.9.0"))
    );

    let declared = Provider {
        top: "tvm_ffi".into(),
        distribution: Some("apache-tvm-ffi".into()),
        ..Provider::default()
    };
    let outcome = missing("tvm_ffi", Some(declared));
    assert_eq!(outcome.kind, OutcomeKind::MissingDependency);
    assert!(
        outcome
            .hint
            .starts_with("pip install apache-tvm-ffi (it provides `tvm_ffi`)"),
        "{}",
        outcome.hint
    );

    for (top, dist) in [
        ("cutlass", "nvidia-cutlass-dsl"),
        ("cv2", "opencv-python"),
        ("sklearn", "scikit-learn"),
        ("yaml", "pyyaml"),
        ("PIL", "pillow"),
        ("tvm_ffi", "apache-tvm-ffi"),
    ] {
        let outcome = missing(
            top,
            Some(Provider {
                top: top.into(),
                ..Provider::default()
            }),
        );
        assert!(
            outcome.hint.starts_with(&format!("pip install {dist} ")),
            "{top}: {}",
            outcome.hint
        );
    }
    let outcome = missing("einops", None);
    assert_eq!(outcome.hint, hints::missing_module("einops", None));
}

#[test]
fn the_variants_own_package_by_absolute_name_is_an_import_error() {
    for name in ["fixture", "fixture.ops"] {
        let outcome = missing(
            name,
            Some(Provider {
                top: "fixture".into(),
                ..Provider::default()
            }),
        );
        assert_eq!(outcome.kind, OutcomeKind::ImportError, "{name}");
        assert_eq!(outcome.hint, hints::OWN_IMPORT);
    }
    // A package that merely starts with the kernel's name is someone else's.
    assert_eq!(
        missing("fixture_utils", None).kind,
        OutcomeKind::MissingDependency
    );
}

#[test]
fn no_device_texts_of_torch_and_triton() {
    for (text, transient) in [
        (
            "RuntimeError: 0 active drivers ([]). There should only be one.",
            false,
        ),
        ("RuntimeError: No CUDA GPUs are available", false),
        (
            "CUDA driver initialization failed, you might not have a CUDA gpu.",
            false,
        ),
        (
            "CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            true,
        ),
    ] {
        let outcome = from_text(text, Phase::Smoke).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            (outcome.kind, outcome.transient),
            (OutcomeKind::NoDevice, transient),
            "{text}"
        );
    }
    assert!(
        from_text(
            "RuntimeError: 10 active drivers ([a, b]). There should only be one.",
            Phase::Smoke
        )
        .is_none()
    );
}
