//! `preflight fingerprint --json` against a bare `python3 -c pass` of the
//! interpreter the fingerprint describes: process wall time, interleaved so
//! that machine drift hits both alike. Target: at most 1/4 of Python's.
//!
//! `cargo bench --bench fingerprint` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 200). Builds nothing itself; cargo builds the release binary.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn preflight() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preflight"))
}

fn time(cmd: &mut Command) -> Duration {
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

/// The interpreter the fingerprint chose, read from its own JSON.
fn interpreter() -> PathBuf {
    let out = Command::new(preflight())
        .args(["fingerprint", "--json"])
        .output()
        .expect("run preflight");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    json["python"]["interpreter"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

struct Summary {
    q1: f64,
    median: f64,
    q3: f64,
}

fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort();
    let ms = |q: f64| {
        let i = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    Summary {
        q1: ms(0.25),
        median: ms(0.5),
        q3: ms(0.75),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is understood.
    let rounds: usize = std::env::var("PREFLIGHT_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(200);
    let python = interpreter();
    let fingerprint = || {
        let mut c = Command::new(preflight());
        c.args(["fingerprint", "--json"]);
        c
    };
    let bare = || {
        let mut c = Command::new(&python);
        c.args(["-c", "pass"]);
        c
    };
    // Warm up: page cache, the tool-version cache, Python's bytecode cache.
    for _ in 0..5 {
        time(&mut fingerprint());
        time(&mut bare());
    }
    let mut ours = Vec::with_capacity(rounds);
    let mut theirs = Vec::with_capacity(rounds);
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer CPU.
        if round % 2 == 0 {
            ours.push(time(&mut fingerprint()));
            theirs.push(time(&mut bare()));
        } else {
            theirs.push(time(&mut bare()));
            ours.push(time(&mut fingerprint()));
        }
    }
    let a = summarize(&mut ours);
    let b = summarize(&mut theirs);
    println!("{rounds} interleaved rounds, process wall time (ms)");
    println!("{:<44} {:>8} {:>8} {:>8}", "", "q1", "median", "q3");
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "preflight fingerprint --json", a.q1, a.median, a.q3
    );
    let label = format!("{} -c pass", python.display());
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        label, b.q1, b.median, b.q3
    );
    let ratio = a.median / b.median;
    println!(
        "ratio of medians: {ratio:.3} (target <= 0.250: {})",
        if ratio <= 0.25 { "met" } else { "NOT met" }
    );
}
