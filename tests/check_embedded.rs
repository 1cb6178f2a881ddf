//! `check` judges each variant's embedded CUDA images against this machine's
//! GPU before any launch, and shows that beside what the probe observed.

mod common;
#[path = "inspect_support/mod.rs"]
mod inspect_support;

use common::{kernel_repo, preflight_cmd, stderr};
use serde_json::Value;
use std::process::Command;

fn shared_object(out: &std::path::Path, gencode: &str) {
    let status = Command::new(inspect_support::cuda_tool("nvcc"))
        .args(["-Xcompiler", "-fPIC", "-shared", "-gencode", gencode])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/cuda/add.cu"
        ))
        .arg("-o")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "nvcc failed");
}

#[test]
fn images_that_no_gpu_of_this_machine_can_run_are_a_declared_rejection() {
    let tmp = tempfile::tempdir().unwrap();
    let names = common::variant_names(2); // torch-universal, torch-cpu
    let repo = kernel_repo(tmp.path(), "tiny", &names, "X = 1\n");
    shared_object(
        &repo.join("build/torch-universal/_ops.so"),
        "arch=compute_90a,code=sm_90a",
    );
    shared_object(
        &repo.join("build/torch-cpu/_ops.so"),
        "arch=compute_80,code=sm_80",
    );
    let out = preflight_cmd()
        .args(["check", repo.to_str().unwrap(), "--json", "--python"])
        .arg(common::venv_python())
        // An H100 with a 580 driver, as the fingerprint overrides describe it.
        .env(
            "PREFLIGHT_GPUS",
            r#"[{"pci_bus_id":"0000:01:00.0","device_id":"0x2330","model":"NVIDIA H100"}]"#,
        )
        .env("PREFLIGHT_COMPUTE_CAPABILITY", "9.0")
        .env("PREFLIGHT_NVIDIA_DRIVER", "580.65.06")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_variant = |v: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["variant"] == v)
            .unwrap()
            .clone()
    };
    let fits = by_variant("torch-universal");
    assert_eq!(fits["declared"]["accepted"], true, "{fits}");
    let foreign = by_variant("torch-cpu");
    assert_eq!(foreign["declared"]["accepted"], false, "{foreign}");
    let reason = foreign["declared"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("_ops.so: SASS for sm_80, no PTX; this GPU is sm_90"),
        "{reason}"
    );
    // The variant's Python loads anyway (the .so is never opened here):
    // declared and observed disagree, and the table says so.
    assert_eq!(foreign["outcome"]["kind"], "pass");
    let table = preflight_cmd()
        .args(["check", repo.to_str().unwrap(), "--python"])
        .arg(common::venv_python())
        .env(
            "PREFLIGHT_GPUS",
            r#"[{"pci_bus_id":"0000:01:00.0","device_id":"0x2330","model":"NVIDIA H100"}]"#,
        )
        .env("PREFLIGHT_COMPUTE_CAPABILITY", "9.0")
        .env("PREFLIGHT_NVIDIA_DRIVER", "580.65.06")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("rejected (no image fits)"), "{text}");
    assert!(text.contains("≠ pass"), "{text}");
}
