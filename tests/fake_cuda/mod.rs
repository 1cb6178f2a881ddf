//! The stand-in libcuda of `tests/fixtures/native/fake_libcuda.c`, built
//! once per test binary with the system C compiler.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds the shared library `name` in a new folder from
/// `tests/fixtures/native/SOURCE` with the system C compiler.
fn build(source: &str, name: &str, flags: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/native")
        .join(source);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC"])
        .args(flags)
        .arg("-o")
        .arg(dir.path().join(name))
        .arg(src)
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success(), "cc {source}");
    dir
}

/// The fake driver, compiled once per test binary.
pub fn fake_libcuda() -> &'static Path {
    static LIB: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &LIB.get_or_init(|| {
        let dir = build(
            "fake_libcuda.c",
            "libcuda.so.1",
            &["-Wl,-soname,libcuda.so"],
        );
        let lib = dir.path().join("libcuda.so.1");
        (dir, lib)
    })
    .1
}

/// A folder holding the stand-in `libnvidia-ml.so.1`
/// (`tests/fixtures/native/fake_nvml.c`), for `LD_LIBRARY_PATH`; built
/// once per test binary.
pub fn fake_nvml_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| build("fake_nvml.c", "libnvidia-ml.so.1", &[]))
        .path()
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

/// The launch of `tests/fixtures/native/axpy` (`y = a·x + y`, `a = 2`) as
/// kernel `function` over `n` elements: `x = 0, 1, …`, `y` all ones, and
/// `y` expected to come back as `2x + 1` (the stand-in computes it for
/// every `preflight_axpy*` function); no warm-up, one iteration (a caller
/// sets others with `Launch { warmup, ..axpy(…) }`).
pub fn axpy(function: &str, n: u32) -> kernel_preflight::probe::cuda::Launch {
    use kernel_preflight::probe::cuda::{Arg, ElemType, Launch, Tolerance};
    let x: Vec<f64> = (0..n).map(f64::from).collect();
    let block = n.clamp(1, 128);
    Launch {
        function: function.into(),
        grid: [n.div_ceil(block), 1, 1],
        block: [block, 1, 1],
        shared_mem_bytes: 0,
        args: vec![
            Arg::Scalar {
                ty: ElemType::F32,
                value: 2.0,
            },
            Arg::Buffer {
                ty: ElemType::F32,
                init: x.clone(),
                expect: None,
                tolerance: Tolerance::EXACT,
            },
            Arg::Buffer {
                ty: ElemType::F32,
                init: vec![1.0; n as usize],
                expect: Some(x.iter().map(|v| 2.0 * v + 1.0).collect()),
                tolerance: Tolerance::default_for(ElemType::F32),
            },
            Arg::Scalar {
                ty: ElemType::U32,
                value: f64::from(n),
            },
        ],
        warmup: 0,
        iterations: 1,
    }
}
