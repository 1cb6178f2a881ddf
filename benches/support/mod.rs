//! What the process-timing benchmarks share: how many rounds, timing one
//! command, quartiles, the Rust "hello world" yardstick and system-call
//! counts.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The interpreter the probe benchmarks use: `PREFLIGHT_BENCH_PYTHON`, else
/// the test environment's `.venv`, else `python3` from `PATH`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PREFLIGHT_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    kernel_preflight::probe::find_python(Path::new("python3")).expect("python3 on PATH")
}

/// A named case of an interleaved benchmark.
pub type Case<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// Rounds to run: `PREFLIGHT_BENCH_ROUNDS` (else `default`) under
/// `cargo bench`, which passes `--bench`; 2 under `cargo test --all-targets`,
/// which only shows that every case still runs.
pub fn rounds(default: usize) -> usize {
    if !benchmarking() {
        return 2;
    }
    std::env::var("PREFLIGHT_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
        .max(2)
}

/// Whether this is a real benchmark run (`cargo bench`).
pub fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// How a figure stands against its target: `met` or `NOT met` in a real
/// benchmark run (`cargo bench`, release profile); a smoke run (two rounds
/// of a debug build under `cargo test --all-targets`) is not judged.
pub fn judged(met: bool) -> &'static str {
    if !benchmarking() {
        "smoke run, not judged"
    } else if met {
        "met"
    } else {
        "NOT met"
    }
}

/// The `preflight` binary cargo built for this benchmark.
pub fn preflight() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preflight"))
}

/// Wall time of one run of `cmd`, which must succeed. Run without the
/// `LD_LIBRARY_PATH` cargo gives a benchmark (its own and the toolchain's
/// library folders), which a user's process does not have: the dynamic
/// loader would search each of them for every library, in every process.
pub fn time(cmd: &mut Command) -> Duration {
    cmd.env_remove("LD_LIBRARY_PATH");
    let start = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let elapsed = start.elapsed();
    match status {
        Ok(s) if s.success() => elapsed,
        other => panic!("{cmd:?} failed: {other:?}"),
    }
}

/// First quartile, median and third quartile, in milliseconds.
pub struct Quartiles {
    /// 25th percentile.
    pub q1: f64,
    /// 50th percentile.
    pub median: f64,
    /// 75th percentile.
    pub q3: f64,
}

impl Quartiles {
    /// The quartiles of some samples.
    pub fn of(samples: &mut [Duration]) -> Quartiles {
        samples.sort();
        let ms = |q: f64| {
            let i = ((samples.len() - 1) as f64 * q).round() as usize;
            samples[i].as_secs_f64() * 1e3
        };
        Quartiles {
            q1: ms(0.25),
            median: ms(0.5),
            q3: ms(0.75),
        }
    }

    /// One table row: label, q1, median, q3.
    pub fn row(&self, label: &str) -> String {
        format!(
            "{label:<52} {:>8.2} {:>8.2} {:>8.2}",
            self.q1, self.median, self.q3
        )
    }
}

/// The table header matching [`Quartiles::row`].
pub fn header() -> String {
    format!("{:<52} {:>8} {:>8} {:>8}", "", "q1", "median", "q3")
}

/// Runs every case once per round, in an order that rotates each round,
/// after a warm-up of a tenth of the rounds.
pub fn measure(cases: &mut [Case], rounds: usize) -> Vec<Vec<Duration>> {
    for _ in 0..rounds.div_ceil(10) {
        for (_, run) in cases.iter_mut() {
            run();
        }
    }
    let mut samples = vec![Vec::with_capacity(rounds); cases.len()];
    for round in 0..rounds {
        for i in 0..cases.len() {
            let at = (i + round) % cases.len();
            let started = Instant::now();
            (cases[at].1)();
            samples[at].push(started.elapsed());
        }
    }
    samples
}

/// Linear interpolation between the closest ranks of sorted samples.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    let frac = at - lo as f64;
    sorted[lo].mul_f64(1.0 - frac) + sorted[hi].mul_f64(frac)
}

/// Print one Markdown row per case (n, q1, median, q3, min, and the median's
/// difference from the first case, the baseline), under `title`.
pub fn print_cases(title: &str, cases: &[Case], samples: Vec<Vec<Duration>>) {
    println!("\n{title}\n");
    println!("| case | n | q1 | median | q3 | min | median Δ |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut baseline = None;
    for ((name, _), mut times) in cases.iter().zip(samples) {
        times.sort();
        let median = quantile(&times, 0.5);
        let base = *baseline.get_or_insert(median);
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {:+.3} ms |",
            times.len(),
            ms(quantile(&times, 0.25)),
            ms(median),
            ms(quantile(&times, 0.75)),
            ms(times[0]),
            (median.as_secs_f64() - base.as_secs_f64()) * 1e3,
        );
    }
}

/// A Rust "hello world" built now, into `dir`, by the cargo (and its rustc)
/// that runs this benchmark, with this package's `[profile.*]` tables and
/// the profile this benchmark was built with: the floor any process of ours
/// can reach on this machine, measured in the same run.
pub fn hello_world(dir: &Path) -> PathBuf {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let ours: toml::Table = manifest.parse().expect("parse Cargo.toml");
    let mut hello = toml::Table::new();
    hello.insert(
        "package".into(),
        toml::Value::Table(toml::toml! {
            name = "hello"
            version = "0.0.0"
            edition = "2024"
        }),
    );
    // Its own workspace, whatever folder the temp dir is in.
    hello.insert("workspace".into(), toml::Value::Table(toml::Table::new()));
    if let Some(profiles) = ours.get("profile") {
        hello.insert("profile".into(), profiles.clone());
    }
    let crate_dir = dir.join("hello");
    std::fs::create_dir_all(crate_dir.join("src")).expect("hello dir");
    std::fs::write(crate_dir.join("Cargo.toml"), hello.to_string()).expect("hello manifest");
    std::fs::write(
        crate_dir.join("src/main.rs"),
        "fn main() {\n    println!(\"hello world\");\n}\n",
    )
    .expect("hello source");
    let cargo = std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
    let mut build = Command::new(&cargo);
    // The rustc beside that cargo: the toolchain that built preflight.
    if let Some(rustc) = cargo
        .parent()
        .map(|bin| bin.join("rustc"))
        .filter(|r| r.is_file())
    {
        build.env("RUSTC", rustc);
    }
    let profile = if benchmarking() { "bench" } else { "test" };
    let status = build
        .args([
            "build",
            "--quiet",
            "--offline",
            "--profile",
            profile,
            "--manifest-path",
        ])
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(dir.join("target"))
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .status()
        .expect("run cargo to build hello world");
    assert!(status.success(), "building hello world failed: {status}");
    // Cargo puts what the test profile builds in `debug/`, the bench
    // profile's (which inherits release) in `release/`.
    let out = if profile == "test" {
        "debug"
    } else {
        "release"
    };
    let exe = dir.join("target").join(out).join("hello");
    assert!(exe.is_file(), "no {}", exe.display());
    exe
}

/// What `strace -f -c` counted for one run of a command.
pub struct Syscalls {
    /// Every call, of every process the command started.
    pub total: u64,
    /// Calls by name, most frequent first.
    pub by_kind: Vec<(String, u64)>,
}

impl Syscalls {
    /// The counts in one line: `575 (106 openat, 115 statx, …)`.
    pub fn line(&self) -> String {
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        format!("{} ({})", self.total, kinds.join(", "))
    }
}

/// The system calls of one successful run of `program args…`, counted by
/// `strace -f -c`; `None` (with the reason on stdout) when strace cannot
/// run here.
pub fn syscalls(
    program: &Path,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &Path)],
) -> Option<Syscalls> {
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-c", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(program)
        .args(args)
        // As [`time`] runs it.
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            println!(
                "  strace -f -c {}: {s} (system calls not counted)",
                program.display()
            );
            return None;
        }
        Err(e) => {
            println!("  strace: {e} (system calls not counted; install strace)");
            return None;
        }
    }
    let text = std::fs::read_to_string(out.path()).expect("strace output");
    parse_strace_summary(&text)
}

/// The rows of the table `strace -c` writes: `% time, seconds,
/// usecs/call, calls, [errors], syscall`; the total is their sum (the
/// `total` row's columns differ between strace versions).
fn parse_strace_summary(text: &str) -> Option<Syscalls> {
    let mut by_kind = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&name, numbers)) = words.split_last() else {
            continue;
        };
        if name == "total" || numbers.len() < 4 || numbers.iter().any(|w| w.parse::<f64>().is_err())
        {
            continue;
        }
        by_kind.push((name.to_string(), numbers[3].parse::<u64>().ok()?));
    }
    by_kind.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total = by_kind.iter().map(|(_, n)| n).sum();
    (!by_kind.is_empty()).then_some(Syscalls { total, by_kind })
}

/// CPU time (user + system) of every child this process has waited for so
/// far (`getrusage(RUSAGE_CHILDREN)`).
pub fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall time and CPU time of one run of `cmd` (as [`time`] runs it): the
/// CPU time is what the process itself cost, which other work on a loaded
/// machine lengthens far less than its wall time.
pub fn time_cpu(cmd: &mut Command) -> (Duration, Duration) {
    let before = children_cpu();
    let wall = time(cmd);
    (wall, children_cpu().saturating_sub(before))
}

/// A copy of the binary `exe` in `dir`, as installing it leaves it (`cargo
/// install` and a wheel's installer copy the file): the same bytes as the
/// file the linker wrote, but on this project's machines a copy starts
/// faster (12 fewer page faults and about 0.4 ms less CPU time for
/// preflight; presumably the page cache holds a file written in one go in
/// larger pieces than one the linker wrote through a mapping).
pub fn installed_copy(exe: &Path, dir: &Path) -> PathBuf {
    let name = exe.file_name().expect("a file name");
    let installed = dir.join("installed");
    std::fs::create_dir_all(&installed).expect("install dir");
    let copy = installed.join(name);
    std::fs::copy(exe, &copy).expect("copy the binary");
    copy
}

/// The wall and CPU times of each command, run once per round in an order
/// that rotates each round, so that none always runs on a warmer CPU.
pub fn interleave(
    commands: &[&dyn Fn() -> Command],
    rounds: usize,
) -> Vec<(Vec<Duration>, Vec<Duration>)> {
    let mut samples = vec![(Vec::new(), Vec::new()); commands.len()];
    for round in 0..rounds {
        for i in 0..commands.len() {
            let at = (i + round) % commands.len();
            let (wall, cpu) = time_cpu(&mut commands[at]());
            samples[at].0.push(wall);
            samples[at].1.push(cpu);
        }
    }
    samples
}
