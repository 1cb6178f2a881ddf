//! Diagnosis from the structured error a real child reports, for the
//! failures real kernels from PyPI show in the hub layout: Triton without a
//! GPU, a module newer Triton dropped, CuTe-DSL and Triton compile errors, a
//! kernel importing its own package by name, modules installed under
//! another distribution's name — and torch's harmless NumPy warning, which
//! never decides anything. Packages this machine lacks are stand-ins on the
//! child's PYTHONPATH (`probe_fixtures::fakes`).

mod probe_fixtures;

use kernel_preflight::classify::{Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::SmokeSource;
use probe_fixtures::{Repo, Site, fakes, job, metadata, probe, probe_job, python, quick_limits};
use std::path::Path;

fn with_site(site: &Site, variant: &Path, smoke: SmokeSource) -> Outcome {
    probe_job(
        &site.executor(&python()),
        &job(variant, smoke, quick_limits()),
    )
    .1
}

fn smoke_file(repo: &Repo, body: &str) -> SmokeSource {
    SmokeSource::File(repo.file("smoke.py", &format!("def smoke(kernel, device):\n{body}")))
}

/// torch's warning on a machine without NumPy, as torch prints it.
const NUMPY_WARNING: &str = "import warnings\nwarnings.warn(\"Failed to initialize NumPy: No module named 'numpy' (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:81.)\", UserWarning)\n";

#[test]
fn a_module_an_installed_triton_lacks_is_dependency_version_naming_its_version() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "from triton.tools.experimental_descriptor import create_2d_tma_descriptor\n",
    );
    let site = Site::new();
    fakes::triton(&site, "3.9.0");
    let outcome = with_site(&site, &v, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::DependencyVersion, "{outcome:?}");
    assert_eq!(
        outcome.message,
        "`triton` 3.9.0 is installed but has no module `triton.tools.experimental_descriptor`"
    );
    assert!(outcome.hint.contains("`triton`"), "{}", outcome.hint);
    assert!(
        !outcome.hint.contains("pip install triton"),
        "{}",
        outcome.hint
    );
}

#[test]
fn a_declared_dependency_missing_a_module_is_named_by_its_distribution() {
    // `tvm-ffi` is on the hub's allowlist as the distribution
    // `apache-tvm-ffi`, importable as `tvm_ffi` (here without dist-info).
    let repo = Repo::new();
    let mut m = metadata("torch-universal");
    m["python-depends"] = serde_json::json!(["tvm-ffi"]);
    let v = repo.variant_with("torch-universal", "import tvm_ffi.cpp\n", m);
    let site = Site::new();
    site.file("tvm_ffi/__init__.py", "");
    let outcome = with_site(&site, &v, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::DependencyVersion, "{outcome:?}");
    assert!(
        outcome.hint.contains("`apache-tvm-ffi`"),
        "{}",
        outcome.hint
    );
}

#[test]
fn missing_modules_are_named_by_the_distribution_that_installs_them() {
    for (module, install) in [
        (
            "cutlass",
            "pip install nvidia-cutlass-dsl (it provides `cutlass`)",
        ),
        (
            "yaml_preflight_absent",
            "often: pip install yaml_preflight_absent",
        ),
    ] {
        let repo = Repo::new();
        let v = repo.variant("torch-universal", &format!("import {module}\n"));
        let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
        assert_eq!(outcome.kind, OutcomeKind::MissingDependency, "{outcome:?}");
        assert!(outcome.hint.contains(install), "{module}: {}", outcome.hint);
    }
}

#[test]
fn a_variant_importing_its_own_package_by_name_is_told_to_import_relatively() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "");
    std::fs::remove_file(v.join("__init__.py")).unwrap();
    repo.file(
        "build/torch-universal/fixture/__init__.py",
        "from fixture import ops\n",
    );
    repo.file("build/torch-universal/fixture/ops.py", "");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ImportError, "{outcome:?}");
    assert!(
        outcome.hint.contains(
            "hub variants must import their own modules relatively (`from . import ops`)"
        ),
        "{}",
        outcome.hint
    );
}

#[test]
fn triton_without_a_gpu_is_no_device() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "from triton.runtime import driver\ndef add(a, b):\n    driver.active.get_current_device()\n",
    );
    let site = Site::new();
    fakes::triton(&site, "3.4.0");
    let outcome = with_site(&site, &v, smoke_file(&repo, "    kernel.add([1], [2])\n"));
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Smoke);
    assert!(
        outcome.message.contains("0 active drivers"),
        "{}",
        outcome.message
    );
}

#[test]
fn torchs_numpy_warning_never_decides() {
    let repo = Repo::new();
    // A smoke that raises a plain ValueError after the warning.
    let v = repo.variant(
        "torch-universal",
        &format!(
            "{NUMPY_WARNING}def add(a, b):\n    raise ValueError('shapes (2,) and (3,) differ')\n"
        ),
    );
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.add([1, 2], [1, 2, 3])\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::Exited, "{outcome:?}");
    assert!(
        outcome
            .message
            .contains("ValueError: shapes (2,) and (3,) differ"),
        "{}",
        outcome.message
    );
    assert!(
        outcome.stderr_tail.contains("Failed to initialize NumPy"),
        "{outcome:?}"
    );
    // A child that dies without a report after the warning.
    let v = repo.variant(
        "torch-cpu",
        &format!("{NUMPY_WARNING}import os\nos._exit(3)\n"),
    );
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Exited, "{outcome:?}");
    assert!(!outcome.message.contains("numpy"), "{}", outcome.message);
}

#[test]
fn triton_and_cute_dsl_compile_errors_are_jit_compile_errors() {
    let site = Site::new();
    fakes::triton(&site, "3.4.0");
    fakes::cutlass_dsl(&site);
    for raise in [
        "from triton.compiler.errors import CompilationError\n    raise CompilationError('at 12:8: unsupported tensor index')",
        "from cutlass.base_dsl.common import DSLRuntimeError\n    raise DSLRuntimeError('failed to lower cute.gemm for sm_100a')",
    ] {
        let repo = Repo::new();
        let v = repo.variant("torch-universal", &format!("def add(a, b):\n    {raise}\n"));
        let outcome = with_site(&site, &v, smoke_file(&repo, "    kernel.add([1], [2])\n"));
        assert_eq!(outcome.kind, OutcomeKind::JitCompileError, "{outcome:?}");
        assert_eq!(outcome.phase, Phase::Smoke);
    }
}

#[test]
fn torchs_no_device_messages_are_no_device_and_a_busy_device_is_transient() {
    for (message, transient) in [
        ("No CUDA GPUs are available", false),
        (
            "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            false,
        ),
        (
            "CUDA driver initialization failed, you might not have a CUDA gpu.",
            false,
        ),
        (
            "CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            true,
        ),
    ] {
        let repo = Repo::new();
        let v = repo.variant(
            "torch-universal",
            &format!("def add(a, b):\n    raise RuntimeError({message:?})\n"),
        );
        let (_, outcome) = probe(
            &v,
            smoke_file(&repo, "    kernel.add([1], [2])\n"),
            quick_limits(),
        );
        assert_eq!(
            outcome.kind,
            OutcomeKind::NoDevice,
            "{message}: {outcome:?}"
        );
        assert_eq!(outcome.transient, transient, "{message}");
    }
}

#[test]
fn a_namespace_package_many_wheels_share_is_nobodys_version() {
    // The test environment's NVIDIA wheels (nvcc, NVRTC, the runtime) share
    // the namespace package `nvidia`; cuDNN is not among them.
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "import nvidia.cudnn\n");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::MissingDependency, "{outcome:?}");
    assert!(
        outcome
            .hint
            .contains("the package that provides `nvidia.cudnn`"),
        "{}",
        outcome.hint
    );
}
