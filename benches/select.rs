//! Warm `preflight select` on a kernel with 20 variants, against a Rust
//! "hello world" built in the same run with the same cargo, rustc and
//! profile (target: at most 1.6× its median, and at most 200 system calls
//! counted by `strace -f -c`), and against a bare `python3 -c pass` of the
//! same interpreter, all interleaved; in wall time and in CPU time (user +
//! system, from `getrusage`), which a loaded machine blurs far less; both
//! binaries as built and as installed copies (`support::installed_copy`); the same with 10,000 other entries in
//! the cache; and cold `preflight warmup` of many probe-bound variants at
//! `--jobs` 1, 2 and 4.
//!
//! `cargo bench --bench select` (rounds: `PREFLIGHT_BENCH_ROUNDS`, default
//! 100; interpreter: `PREFLIGHT_BENCH_PYTHON`, else `.venv/bin/python`).

mod support;

use kernel_preflight::cache::{Cache, JobIdentity, OutcomeKey, OutcomeRecord, VariantFiles};
use kernel_preflight::classify::{Depth, Outcome, Timings};
use kernel_preflight::protocol::{ExecutorKind, PROTOCOL_VERSION};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use support::{
    Quartiles, benchmarking, hello_world, installed_copy, interleave, preflight, rounds, syscalls,
    time,
};

fn python() -> PathBuf {
    std::env::var_os("PREFLIGHT_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"))
}

/// `n` variants of one kernel; each with `so_mb` MiB of shared object (which
/// a warm select must not hash again) and an import that runs `body`.
fn kernel(root: &Path, name: &str, n: usize, so_mb: usize, body: &str) -> PathBuf {
    let arch = std::env::consts::ARCH;
    let repo = root.join(name);
    let mut names = vec!["torch-universal".to_string(), "torch-cpu".to_string()];
    for minor in 0..n {
        names.push(format!("torch2{minor}-cpu-{arch}-linux"));
    }
    names.truncate(n);
    for (i, v) in names.iter().enumerate() {
        let dir = repo.join("build").join(v);
        std::fs::create_dir_all(&dir).expect("variant dir");
        std::fs::write(dir.join("__init__.py"), body).expect("init");
        std::fs::write(dir.join("_ops.so"), vec![i as u8; so_mb << 20]).expect("so");
        let metadata = format!(
            r#"{{"name":"{name}","id":"_{name}_{i}","version":1,"license":"MIT","python-depends":[],"backend":{{"type":"cpu"}}}}"#
        );
        std::fs::write(dir.join("metadata.json"), metadata).expect("metadata");
    }
    repo
}

/// `exe` (preflight, or a copy of it) with `args`, the bench's interpreter
/// and cache.
fn preflight_in(exe: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args)
        .arg("--python")
        .arg(python())
        .env("PREFLIGHT_CACHE", cache);
    c
}

/// Fill the cache with `n` valid entries for other variants.
fn fill(cache: &Path, n: usize) {
    let cache = Cache::at(cache);
    let outcome: Outcome = serde_json::from_value(serde_json::json!({
        "kind": "pass", "phase": "done", "depth": "load", "message": "filler",
        "hint": "", "exit_code": 0, "signal": null, "stderr_tail": ""
    }))
    .expect("outcome");
    for i in 0..n {
        let job = JobIdentity {
            executor: ExecutorKind::Python,
            code: "filler".into(),
            name: "torch-cpu".into(),
            device: "cpu".into(),
            files: VariantFiles {
                content: format!("content:filler-{i}"),
                metadata: None,
            },
            smoke: "load-only".into(),
            depth: Depth::Verified,
            protocol: PROTOCOL_VERSION,
            device_code: None,
            made: Default::default(),
        };
        let record = OutcomeRecord {
            path: PathBuf::from(format!("/nonexistent/{i}")),
            smoke: "load-only".into(),
            outcome: outcome.clone(),
            timings: Timings::default(),
            machine: "filler".into(),
            packages: None,
        };
        let key = OutcomeKey::new(&"0".repeat(64), job);
        cache.outcomes().put(&key, record).expect("fill cache");
    }
}

fn warm_select(rounds: usize, cache: &Path, repo: &Path, hello: &Path, label: &str) -> f64 {
    let installed = cache.parent().expect("cache in a temp dir");
    let ours_installed = installed_copy(&preflight(), installed);
    let hello_installed = installed_copy(hello, installed);
    let select = |exe: &Path| preflight_in(exe, cache, &["select", repo.to_str().expect("path")]);
    let bare = || {
        let mut c = Command::new(python());
        c.args(["-c", "pass"]);
        c
    };
    let ours = preflight();
    let commands: [&dyn Fn() -> Command; 5] = [
        &|| select(&ours),
        &|| Command::new(hello),
        &bare,
        &|| select(&ours_installed),
        &|| Command::new(&hello_installed),
    ];
    // The first call probes everything; later ones are answered from the
    // cache. A file's `stat` vouches for it only once it is older than the
    // file system's clock can blur (2 s, see `cache::warm`): the fixture
    // was just written, so the warm record is kept by a call after that
    // (by each binary: its own `stat` is in the record's key).
    time(&mut select(&ours));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for _ in 0..3 {
        for command in &commands {
            time(&mut command());
        }
    }
    let mut samples = interleave(&commands, rounds);
    let labels = [
        label.to_string(),
        "Rust hello world (same rustc and profile)".to_string(),
        format!("{} -c pass", python().display()),
        "the same select, installed copy".to_string(),
        "Rust hello world, installed copy".to_string(),
    ];
    let mut ratio = 0.0;
    for (what, cpu) in [("wall time", false), ("CPU time", true)] {
        let q: Vec<Quartiles> = samples
            .iter_mut()
            .map(|(wall, cpus)| Quartiles::of(if cpu { cpus } else { wall }))
            .collect();
        println!("  {what}:");
        for (q, label) in q.iter().zip(&labels) {
            println!("{}", q.row(label));
        }
        for (pair, ours, hello) in [("as built", 0, 1), ("installed copies", 3, 4)] {
            ratio = q[ours].median / q[hello].median;
            println!(
                "  {what} ratio to hello world, {pair}: {ratio:.2} (target <= 1.60: {})",
                support::judged(ratio <= 1.6)
            );
        }
        println!(
            "  ratio to python -c pass: {:.3}",
            q[0].median / q[2].median
        );
    }
    let py = python();
    let args = [
        std::ffi::OsStr::new("select"),
        repo.as_os_str(),
        std::ffi::OsStr::new("--python"),
        py.as_os_str(),
    ];
    if let Some(counted) = syscalls(&preflight(), &args, &[("PREFLIGHT_CACHE", cache)]) {
        println!(
            "  system calls: {} (target <= 200: {})",
            counted.line(),
            support::judged(counted.total <= 200)
        );
    }
    if let Some(counted) = syscalls(hello, &[], &[]) {
        println!("  hello world's system calls: {}", counted.line());
    }
    ratio
}

fn main() {
    let rounds = rounds(100);
    let big = benchmarking();
    let root = tempfile::tempdir().expect("temp dir");
    println!("{rounds} interleaved rounds, process wall time and CPU time (ms)");
    println!("{}", support::header());

    let hello = hello_world(root.path());
    let repo = kernel(
        root.path(),
        "twenty",
        20,
        if big { 8 } else { 1 },
        "X = 1\n",
    );
    let cache = root.path().join("cache");
    warm_select(
        rounds,
        &cache,
        &repo,
        &hello,
        "warm select, 20 variants (8 MiB .so each)",
    );
    fill(&cache, if big { 10_000 } else { 100 });
    warm_select(
        rounds,
        &cache,
        &repo,
        &hello,
        "the same, 10,000 other cache entries",
    );

    let slow = kernel(
        root.path(),
        "slow",
        if big { 16 } else { 4 },
        0,
        "import time\ntime.sleep(0.25)\n",
    );
    println!(
        "\ncold warmup of {} variants that each take 0.25 s to import",
        if big { 16 } else { 4 }
    );
    for jobs in ["1", "2", "4"] {
        let cache = root.path().join(format!("cold-{jobs}"));
        let start = Instant::now();
        let status = preflight_in(
            &preflight(),
            &cache,
            &["warmup", slow.to_str().expect("path"), "--jobs", jobs],
        )
        .stdout(std::process::Stdio::null())
        .status()
        .expect("warmup");
        assert!(status.success(), "warmup failed");
        println!("  --jobs {jobs}: {:>8.2} s", start.elapsed().as_secs_f64());
    }
}
