//! `preflight inspect` against its yardstick, `cuobjdump --list-elf
//! --list-ptx`, on the same files in the same run, interleaved round by
//! round, after checking that both list the same images:
//!
//! - a 1 GiB shared object: a real nvcc-built `.so` (two gencodes, stored
//!   uncompressed) grown past 1 GiB with a zero-filled section placed before
//!   the section header table (`objcopy --add-section`); also timed in
//!   process (`embedded::inspect_file`: open, mmap, parse);
//! - a compressed library: nvcc's fatbin of `tests/fixtures/cuda/many.cu`
//!   built with `-Xfatbin -compress-all`, as PyTorch builds (zstd SASS for
//!   sm_80, sm_90a, sm_100f, sm_120 and zstd PTX), its container repeated
//!   2,000 times in the `.nv_fatbin` section of a plain shared object: about
//!   as much compressed code as cuBLASLt 13;
//! - any real library named in `PREFLIGHT_INSPECT_LIBS` (paths separated by
//!   `:`), such as the ones fetched by the command in the README.
//!
//! On each file the header-only read is also checked against decompressing
//! every image (`Depth::Images`), and the peak memory of one run of each
//! tool is shown.
//!
//! Run: `cargo bench --bench inspect` (needs `scripts/setup-env.sh` and
//! binutils' objcopy; rounds: `PREFLIGHT_BENCH_ROUNDS`, default 11). Under
//! `cargo test --all-targets` (no `--bench` argument) it runs the same steps
//! on a 1 MiB pad, 4 copies and two rounds, as a smoke test.

#[path = "../tests/inspect_support/mod.rs"]
mod inspect_support;
mod support;

use inspect_support::{Spec, build, cuda_tool, cuobjdump, in_cuobjdump_terms, run};
use kernel_preflight::declared::embedded::{self, Depth};
use kernel_preflight::report::inspect::human_size;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Case, benchmarking, measure, preflight, print_cases, rounds};

const SHARED: [&str; 3] = ["-Xcompiler", "-fPIC", "-shared"];

/// The two-gencode `.so` of the tests, padded to `pad` bytes.
fn padded_shared_object(dir: &Path, pad: u64) -> PathBuf {
    let small = build(
        &Spec {
            name: "small.so",
            source: "add.cu",
            args: &[
                SHARED[0],
                SHARED[1],
                SHARED[2],
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-gencode",
                "arch=compute_90a,code=[sm_90a,compute_90a]",
            ],
        },
        dir,
    );
    let pad_file = dir.join("pad.bin");
    std::fs::File::create(&pad_file)
        .and_then(|f| f.set_len(pad))
        .expect("sparse pad file");
    let big = dir.join("padded.so");
    run(Command::new("objcopy")
        .arg(format!(
            "--add-section=.preflight_pad={}",
            pad_file.display()
        ))
        .arg("--set-section-flags=.preflight_pad=contents,readonly,data")
        .arg(&small)
        .arg(&big));
    std::fs::remove_file(&pad_file).ok();
    big
}

/// A plain C shared object whose `.nv_fatbin` holds `copies` copies of a
/// compressed nvcc fatbin of `many.cu`.
fn compressed_library(dir: &Path, copies: usize) -> PathBuf {
    let args: &'static [&'static str] = if benchmarking() {
        &[
            "-fatbin",
            "-Xfatbin",
            "-compress-all",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90a,code=[sm_90a,compute_90a]",
            "-gencode",
            "arch=compute_100f,code=sm_100f",
            "-gencode",
            "arch=compute_120,code=[sm_120,compute_120]",
        ]
    } else {
        &[
            "-fatbin",
            "-Xfatbin",
            "-compress-all",
            "-gencode",
            "arch=compute_90a,code=[sm_90a,compute_90a]",
        ]
    };
    let fatbin = build(
        &Spec {
            name: "many.fatbin",
            source: "many.cu",
            args,
        },
        dir,
    );
    let mut one = std::fs::read(&fatbin).expect("read fatbin");
    // Containers start 16-byte aligned, as in nvcc's own sections.
    one.resize(one.len().next_multiple_of(16), 0);
    let section = dir.join("nv_fatbin.bin");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&section).expect("section"));
    for _ in 0..copies {
        out.write_all(&one).expect("write section");
    }
    out.flush().expect("write section");
    drop(out);

    let plain = dir.join("plain.c");
    std::fs::write(&plain, "int answer(void) { return 42; }\n").expect("write C");
    let host = dir.join("plain.so");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&host)
        .arg(&plain));
    let library = dir.join("compressed.so");
    run(Command::new("objcopy")
        .arg(format!("--add-section=.nv_fatbin={}", section.display()))
        .arg("--set-section-flags=.nv_fatbin=contents,readonly,data")
        .arg(&host)
        .arg(&library));
    std::fs::remove_file(&section).ok();
    library
}

/// Peak resident memory of one run of `cmd`, in bytes. The kernel counts
/// in it the high-water mark of the process that spawned it (std spawns
/// with vfork, and exec records the shared memory's peak), so it is only
/// true while this process itself has stayed small.
fn peak_memory(cmd: &mut Command) -> u64 {
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which also returns its resource usage"
    )]
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped; both pointers are live.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 {cmd:?}");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    usage.ru_maxrss as u64 * 1024
}

fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn cuobjdump_cmd(path: &Path) -> Command {
    let mut cmd = Command::new(cuda_tool("cuobjdump"));
    cmd.args(["--list-elf", "--list-ptx"]).arg(path);
    cmd
}

fn preflight_cmd(path: &Path) -> Command {
    let mut cmd = Command::new(preflight());
    cmd.arg("inspect").arg(path);
    cmd
}

/// Both tools on one file: the listing checked, then timed; `memory` is
/// each one's peak, cuobjdump's first.
fn compare(path: &Path, memory: [u64; 2], rounds: usize) {
    let listed = embedded::inspect_file(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        in_cuobjdump_terms(&listed),
        cuobjdump(path),
        "{}: preflight vs cuobjdump (ELF, PTX)",
        path.display()
    );
    let mut cases: Vec<Case> = vec![
        (
            "cuobjdump --list-elf --list-ptx",
            Box::new(|| {
                support::time(&mut cuobjdump_cmd(path));
            }),
        ),
        (
            "preflight inspect",
            Box::new(|| {
                support::time(&mut preflight_cmd(path));
            }),
        ),
    ];
    let samples = measure(&mut cases, rounds);
    let medians: Vec<Duration> = samples
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.sort();
            support::quantile(&s, 0.5)
        })
        .collect();
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let compressed = listed.images.iter().filter(|i| i.compressed.is_some());
    let inflated: u64 = listed.images.iter().map(|i| i.size).sum();
    print_cases(
        &format!(
            "{} ({}; {} images, {} compressed, {} of code once decompressed)",
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            ),
            human_size(size),
            listed.images.len(),
            compressed.count(),
            human_size(inflated),
        ),
        &cases,
        samples,
    );
    // Last: the whole-image read grows this process.
    let started = Instant::now();
    let data = std::fs::read(path).expect("read file");
    let whole =
        embedded::inspect_bytes_with(path, &data, Depth::Images).unwrap_or_else(|e| panic!("{e}"));
    let full_read = started.elapsed();
    assert_eq!(
        whole,
        listed,
        "{}: header-only vs whole-image read",
        path.display()
    );
    println!(
        "\ninspect is {:.1}x faster than cuobjdump (median {} vs {}); peak memory {} vs cuobjdump's {}; decompressing every image instead: {}",
        medians[0].as_secs_f64() / medians[1].as_secs_f64(),
        seconds(medians[1]),
        seconds(medians[0]),
        human_size(memory[1]),
        human_size(memory[0]),
        seconds(full_read),
    );
}

fn main() {
    let bench = benchmarking();
    let rounds = rounds(11);
    let dir = tempfile::tempdir().expect("temp dir");
    let (pad, copies) = if bench { (1 << 30, 2000) } else { (1 << 20, 4) };

    let big = padded_shared_object(dir.path(), pad);
    let first = embedded::inspect_file(&big).expect("inspect padded.so");
    let mut times: Vec<Duration> = (0..rounds.max(31))
        .map(|_| {
            let start = Instant::now();
            let found = embedded::inspect_file(&big).expect("inspect padded.so");
            let elapsed = start.elapsed();
            assert_eq!(found.images.len(), first.images.len());
            elapsed
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "inspect {} shared object in process ({} images in {} fatbins): median {:.3} ms, min {:.3} ms, max {:.3} ms over {} runs",
        human_size(std::fs::metadata(&big).map_or(0, |m| m.len())),
        first.images.len(),
        first.fatbins,
        ms(support::quantile(&times, 0.5)),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len(),
    );

    let mut files = vec![big, compressed_library(dir.path(), copies)];
    if let Some(libs) = std::env::var_os("PREFLIGHT_INSPECT_LIBS") {
        files.extend(std::env::split_paths(&libs).filter(|p| !p.as_os_str().is_empty()));
    }
    // Before anything below reads a large file into this process.
    let memory: Vec<[u64; 2]> = files
        .iter()
        .map(|f| {
            [
                peak_memory(&mut cuobjdump_cmd(f)),
                peak_memory(&mut preflight_cmd(f)),
            ]
        })
        .collect();
    for (file, memory) in files.iter().zip(memory) {
        compare(file, memory, rounds);
    }
}
