//! `preflight doctor` on a machine without a GPU (or with libcuda hidden
//! through `PREFLIGHT_LIBCUDA`): it says so plainly, still shows what the
//! toolchain can do (the wheel's NVRTC and nvcc compile), and exits 0.

mod common;
mod fake_cuda;

use common::{preflight_cmd, stderr, stdout, venv};
use fake_cuda::cu13;

fn doctor(json: bool) -> std::process::Output {
    let mut cmd = preflight_cmd();
    cmd.arg("doctor")
        .env("PREFLIGHT_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("CUDA_HOME", cu13())
        .env("PREFLIGHT_CACHE", tempfile::tempdir().unwrap().keep())
        .args(["--python", venv().join("bin/python").to_str().unwrap()]);
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("run doctor")
}

#[test]
fn without_a_gpu_doctor_says_so_and_exits_0() {
    let out = doctor(false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("no usable NVIDIA GPU on this machine"),
        "{text}"
    );
    assert!(text.contains("install the NVIDIA driver"), "{text}");
}

#[test]
fn without_a_gpu_doctor_still_tries_the_compilers() {
    let out = doctor(true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert!(json["device"].is_null());
    let check = |name: &str| {
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check"))
            .clone()
    };
    let driver = check("driver");
    assert_eq!(driver["verdict"], "missing");
    assert_eq!(driver["kind"], "no_device");
    let nvrtc = check("nvrtc");
    assert_eq!(nvrtc["verdict"], "skipped");
    assert!(
        nvrtc["message"]
            .as_str()
            .unwrap()
            .contains("NVRTC 13.5 works"),
        "{nvrtc}"
    );
    let nvcc = check("nvcc");
    assert_eq!(nvcc["verdict"], "skipped");
    assert!(
        nvcc["message"]
            .as_str()
            .unwrap()
            .contains("compiled a cubin for sm_75"),
        "{nvcc}"
    );
    for name in ["ptx_jit", "bf16", "fp8", "wgmma"] {
        assert_eq!(check(name)["message"], "needs a GPU");
    }
    let torch = check("torch");
    assert_eq!(torch["verdict"], "missing", "the test venv has no torch");
    assert!(
        torch["hint"]
            .as_str()
            .unwrap()
            .contains("pip install torch")
    );
    for c in json["checks"].as_array().unwrap() {
        assert_ne!(c["verdict"], "fail", "{c}");
    }
}

#[test]
fn without_nvcc_or_nvrtc_doctor_says_how_to_install_them() {
    let out = preflight_cmd()
        .args(["doctor", "--json"])
        .env("PREFLIGHT_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("PREFLIGHT_CACHE", tempfile::tempdir().unwrap().keep())
        .env("PREFLIGHT_CUDA_DEFAULT_ROOT", "/nonexistent")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let checks = json["checks"].as_array().unwrap();
    let nvcc = checks.iter().find(|c| c["name"] == "nvcc").unwrap();
    assert_eq!(nvcc["kind"], "nvcc_missing");
    assert!(
        nvcc["hint"]
            .as_str()
            .unwrap()
            .contains("pip install nvidia-cuda-nvcc")
    );
}

#[test]
#[ignore = "needs a GPU: run scripts/gpu-check.sh"]
fn on_a_gpu_doctor_runs_the_cuda_capabilities() {
    let out = preflight_cmd().args(["doctor", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert!(!json["device"].is_null(), "{json}");
    for c in json["checks"].as_array().unwrap() {
        if ["driver", "ptx_jit"].contains(&c["name"].as_str().unwrap()) {
            assert_eq!(c["verdict"], "pass", "{c}");
        }
    }
}
