//! The stand-in libcuda of `tests/fixtures/native/fake_libcuda.c`, built
//! once per test binary with the system C compiler.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The fake driver, compiled once per test binary.
pub fn fake_libcuda() -> &'static Path {
    static LIB: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &LIB.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcuda.so.1");
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/fake_libcuda.c");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so", "-o"])
            .arg(&lib)
            .arg(src)
            .status()
            .expect("a C compiler (cc)");
        assert!(status.success(), "cc fake_libcuda.c");
        (dir, lib)
    })
    .1
}

/// The CUDA 13 wheel layout of the test environment (`scripts/setup-env.sh`).
pub fn cu13() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    std::fs::read_dir(&venv)
        .expect("the test venv: run scripts/setup-env.sh")
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13"))
        .find(|p| p.is_dir())
        .expect("the nvidia-cuda-* 13 wheels in the test venv")
}
