//! preflight's own smoke workloads for the hub kernels transformers loads
//! (`probes/kernels/`): each is found by its kernel's name, parses as
//! Python, and, on this machine without a GPU or torch, fails cleanly —
//! `no_device` for a cuda variant (the device step comes before any
//! workload), `missing_dependency` on torch where the workload itself runs.
//! Their real runs are in `scripts/gpu-check.sh`.

mod probe_fixtures;

use kernel_preflight::classify::{OutcomeKind, Phase};
use kernel_preflight::probe::{Job, Placement, SmokeSource, Subject, library};
use kernel_preflight::protocol::Depth;
use kernel_preflight::variant::VariantName;
use probe_fixtures::{Repo, metadata, probe_job, python, quick_limits};
use std::process::Command;

/// The hub kernels transformers' integrations load, by the names the hub
/// (and transformers) give them.
const KERNELS: &[&str] = &[
    "deep-gemm",
    "finegrained-fp8",
    "sonic-moe",
    "flash-attn2",
    "flash-attn3",
    "vllm-flash-attn3",
    "nvfp4-gemm",
    "nvfp4",
    "gpt-oss-triton-kernels",
    "triton-kernels",
];

#[test]
fn every_kernel_transformers_loads_has_a_smoke_that_parses() {
    for kernel in KERNELS {
        let source = library::smoke_for(kernel).unwrap_or_else(|| panic!("no smoke for {kernel}"));
        assert!(source.contains("def smoke(kernel, device)"), "{kernel}");
        let out = Command::new(python())
            .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(source.as_bytes())?;
                child.wait_with_output()
            })
            .expect("python runs");
        assert!(
            out.status.success(),
            "{kernel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn probe(kernel: &str, variant: &str) -> kernel_preflight::classify::Outcome {
    let repo = Repo::new();
    let mut m = metadata(variant);
    m["name"] = kernel.into();
    let path = repo.variant_with(variant, "ENTRY = 1\n", m);
    let smoke = SmokeSource::choose(None, None, Some(kernel));
    assert!(
        matches!(&smoke, SmokeSource::Library { kernel: k, .. } if k == kernel),
        "{kernel}: {smoke:?}"
    );
    let job = Job {
        subject: Subject::Variant {
            name: VariantName::parse(variant).unwrap(),
            path,
        },
        device: Placement::Default,
        smoke,
        depth: Depth::Verified,
        limits: quick_limits(),
    };
    probe_job(
        &kernel_preflight::probe::PythonExecutor::new(python()),
        &job,
    )
    .1
}

#[test]
fn without_a_gpu_each_smoke_fails_cleanly() {
    for kernel in KERNELS {
        let outcome = probe(kernel, "torch-cuda");
        assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{kernel}: {outcome:?}");
        assert_eq!(outcome.phase, Phase::Load, "{kernel}: {outcome:?}");
    }
    // Where the workload itself runs (a universal variant on the cpu), it
    // stops at the `import torch` this machine cannot satisfy.
    for kernel in ["deep-gemm", "flash-attn3", "triton-kernels"] {
        let outcome = probe(kernel, "torch-universal");
        assert_eq!(
            outcome.kind,
            OutcomeKind::MissingDependency,
            "{kernel}: {outcome:?}"
        );
        assert_eq!(outcome.phase, Phase::Smoke, "{kernel}: {outcome:?}");
        assert!(outcome.message.contains("`torch`"), "{kernel}: {outcome:?}");
    }
}
