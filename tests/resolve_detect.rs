//! `resolve` judges against the system the fingerprint describes: the
//! backend torch was built for, its version and C++ ABI, tvm-ffi.

mod common;
#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

use kernel_preflight::declared::{Release, System};
use kernel_preflight::variant::{Backend, OrOther, Os, Version};
use machine::*;
use serde_json::Value;

#[test]
fn system_from_a_fingerprint_of_a_cuda_torch_environment() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    let site = venv_site(&venv);
    m.dist(&site, "torch-2.9.0+cu128.dist-info");
    m.dist(&site, "apache_tvm_ffi-0.1.0b2.dist-info");
    m.write(
        "venv/lib/python3.12/site-packages/torch/version.py",
        "__version__ = '2.9.0+cu128'\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
    );
    m.write(
        "venv/lib/python3.12/site-packages/torch/share/cmake/Torch/TorchConfig.cmake",
        "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")\n",
    );
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let s = System::from_fingerprint(&fp);
    assert_eq!(s.backend, Backend::Cuda(Version::new(12, 8)));
    assert_eq!(s.torch, Some(Version::new(2, 9)));
    assert_eq!(s.cxx11_abi, Some(true));
    assert_eq!(s.tvm_ffi, Some(Version::new(0, 1)));
    assert_eq!(
        (s.cpu.to_string(), s.os),
        (
            std::env::consts::ARCH.to_string(),
            OrOther::Known(Os::Linux)
        )
    );

    // A ROCm build.
    m.write(
        "venv/lib/python3.12/site-packages/torch/version.py",
        "__version__ = '2.9.0+rocm6.4'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.4.43482-0f2d60242'\n",
    );
    let s = System::from_fingerprint(&m.fingerprint(&[]).0);
    assert_eq!(s.backend, Backend::Rocm(Version::new(6, 4)));
}

#[test]
fn python_free_threading_mlx_and_the_kernels_release_come_from_the_environment() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let s = System::from_fingerprint(&m.fingerprint(&[]).0);
    assert_eq!(s.python, Some(Version::new(3, 12)));
    assert!(!s.free_threaded && !s.mlx);
    assert_eq!(s.kernels, None);
    assert_eq!(s.rules().release, Release::NEWEST);

    let site = venv_site(&venv);
    m.dist(&site, "kernels-0.18.3.dist-info");
    m.dist(&site, "mlx-0.29.0.dist-info");
    let s = System::from_fingerprint(&m.fingerprint(&[]).0);
    assert_eq!(s.kernels.as_deref(), Some("0.18.3"));
    assert_eq!(s.rules().release, Release::V0_18);
    assert!(s.mlx);

    // A release outside the range: the newest rules, and it says so.
    std::fs::remove_dir_all(site.join("kernels-0.18.3.dist-info")).unwrap();
    m.dist(&site, "kernels-0.20.0.dist-info");
    let rules = System::from_fingerprint(&m.fingerprint(&[]).0).rules();
    assert_eq!(rules.release, Release::NEWEST);
    assert!(!rules.installed_is_supported());
    assert!(
        rules
            .to_string()
            .contains("0.20.0 is installed, outside the supported"),
        "{rules}"
    );

    // A free-threaded build keeps its packages in lib/python3.13t/.
    let mut m = Machine::new();
    let venv = m.venv("ft", "3.13.1");
    std::fs::rename(venv.join("lib/python3.13"), venv.join("lib/python3.13t")).unwrap();
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let s = System::from_fingerprint(&m.fingerprint(&[]).0);
    assert!(s.free_threaded, "{:?}", s);
    assert_eq!(s.python, Some(Version::new(3, 13)));
}

#[test]
fn resolve_uses_the_environment_without_overrides() {
    // The test environment has no torch: torch variants are rejected for
    // lack of torch; the wheel's CUDA runtime is not on the library path,
    // so (like the hub) the backend is cpu.
    let out = common::preflight_cmd()
        .args([
            "resolve",
            "--variants",
            "torch29-cpu-x86_64-linux,torch-cpu",
            "--json",
        ])
        .args(["--python", common::venv_python().to_str().unwrap()])
        .env("PREFLIGHT_CACHE", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["system"]["torch"], Value::Null);
    assert_eq!(doc["system"]["backend"]["type"], "cpu");
    assert_eq!(doc["decisions"][0]["variant"], "torch-cpu");
    assert_eq!(doc["decisions"][1]["accepted"], false);
    // The release installed there (scripts/requirements-test.txt) picks
    // the rules.
    assert_eq!(doc["system"]["kernels"], "0.17.2");
    assert_eq!(doc["rules"]["release"], "0.17.2");
    assert_eq!(doc["rules"]["installed_supported"], true);
    // A Python that does not exist is bad input.
    let out = common::preflight(&[
        "resolve",
        "--variants",
        "torch-cpu",
        "--python",
        "/nonexistent/python3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("no such Python interpreter"));
}
