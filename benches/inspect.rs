//! How long `inspect` takes on a 1 GiB shared object.
//!
//! Builds a real `.so` with the wheel's nvcc (two gencodes, as in the
//! tests), grows it past 1 GiB with a zero-filled section placed before the
//! section header table (`objcopy --add-section`), then times
//! `embedded::inspect_file` (open, mmap, parse the ELF headers and the
//! `.nv_fatbin` section) with a warm page cache.
//!
//! Run: `cargo bench --bench inspect` (needs `scripts/setup-env.sh` and
//! binutils' objcopy). Under `cargo test --all-targets` (no `--bench`
//! argument) it runs the same steps on a 1 MiB pad, as a smoke test.

use kernel_preflight::declared::embedded;
use kernel_preflight::report::inspect::human_size;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn nvcc() -> PathBuf {
    let venv = std::env::var_os("PREFLIGHT_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .ok()
        .and_then(|dirs| {
            dirs.flatten()
                .map(|d| d.path().join("site-packages/nvidia/cu13/bin/nvcc"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "nvcc not found under {}: run scripts/setup-env.sh",
                lib.display()
            )
        })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (pad_size, runs): (u64, usize) = if bench { (1 << 30, 31) } else { (1 << 20, 3) };
    let dir = tempfile::tempdir().expect("temp dir");
    let small = dir.path().join("small.so");
    let big = dir.path().join("big.so");
    let pad = dir.path().join("pad.bin");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/add.cu");
    run(Command::new(nvcc())
        .args(["-Xcompiler", "-fPIC", "-shared"])
        .args(["-gencode", "arch=compute_80,code=sm_80"])
        .args(["-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]"])
        .arg(&source)
        .arg("-o")
        .arg(&small));
    std::fs::File::create(&pad)
        .and_then(|f| f.set_len(pad_size))
        .expect("sparse pad file");
    run(Command::new("objcopy")
        .arg(format!("--add-section=.preflight_pad={}", pad.display()))
        .arg("--set-section-flags=.preflight_pad=contents,readonly,data")
        .arg(&small)
        .arg(&big));
    std::fs::remove_file(&pad).ok();
    let size = std::fs::metadata(&big).expect("big.so").len();

    let first = embedded::inspect_file(&big).expect("inspect big.so");
    let images = first.images.len();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let found = embedded::inspect_file(&big).expect("inspect big.so");
            let elapsed = start.elapsed();
            assert_eq!(found.images.len(), images);
            elapsed
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "inspect {} shared object ({} images in {} fatbins): median {:.3} ms, min {:.3} ms, max {:.3} ms over {runs} runs",
        human_size(size),
        images,
        first.fatbins,
        ms(times[runs / 2]),
        ms(times[0]),
        ms(times[runs - 1]),
    );
}
