//! `preflight fingerprint --json` against a Rust "hello world" built in the
//! same run with the same cargo, rustc and profile (target: at most 1.3×
//! its median), and against a bare `python3 -c pass` of the interpreter
//! the fingerprint describes: process wall time and CPU time (user +
//! system, from `getrusage`), interleaved so that machine drift hits all
//! alike; and the system calls of each, counted by `strace -f -c`.
//!
//! `cargo bench --bench fingerprint` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 200). Cargo builds the release binary; the bench builds the
//! hello world.

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::{Quartiles, hello_world, preflight, rounds, syscalls, time, time_cpu};

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

fn main() {
    let rounds = rounds(200);
    let python = interpreter();
    let dir = tempfile::tempdir().expect("temp dir");
    let hello = hello_world(dir.path());
    let fingerprint = || {
        let mut c = Command::new(preflight());
        c.args(["fingerprint", "--json"]);
        c
    };
    let floor = || Command::new(&hello);
    let bare = || {
        let mut c = Command::new(&python);
        c.args(["-c", "pass"]);
        c
    };
    // Warm up: page cache, the tool-version cache, Python's bytecode cache.
    for _ in 0..5 {
        time(&mut fingerprint());
        time(&mut floor());
        time(&mut bare());
    }
    let (mut ours, mut hellos, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_cpu, mut hellos_cpu, mut theirs_cpu) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Rotate the order, so that none always runs on a warmer CPU.
        for i in 0..3 {
            let (wall, cpu, cpus) = match (i + round) % 3 {
                0 => (&mut ours, &mut ours_cpu, time_cpu(&mut fingerprint())),
                1 => (&mut hellos, &mut hellos_cpu, time_cpu(&mut floor())),
                _ => (&mut theirs, &mut theirs_cpu, time_cpu(&mut bare())),
            };
            wall.push(cpus.0);
            cpu.push(cpus.1);
        }
    }
    for (what, ours, hellos, theirs) in [
        ("wall time", &mut ours, &mut hellos, &mut theirs),
        ("CPU time", &mut ours_cpu, &mut hellos_cpu, &mut theirs_cpu),
    ] {
        let a = Quartiles::of(ours);
        let h = Quartiles::of(hellos);
        let b = Quartiles::of(theirs);
        println!("{rounds} interleaved rounds, process {what} (ms)");
        println!("{}", support::header());
        println!("{}", a.row("preflight fingerprint --json"));
        println!("{}", h.row("Rust hello world (same rustc and profile)"));
        println!("{}", b.row(&format!("{} -c pass", python.display())));
        let ratio = a.median / h.median;
        println!(
            "{what} ratio to hello world: {ratio:.2} (target <= 1.30: {})",
            if ratio <= 1.3 { "met" } else { "NOT met" }
        );
        println!("ratio to python -c pass: {:.3}", a.median / b.median);
    }
    let args = [
        std::ffi::OsStr::new("fingerprint"),
        std::ffi::OsStr::new("--json"),
    ];
    if let Some(counted) = syscalls(&preflight(), &args, &[]) {
        println!("system calls: {}", counted.line());
    }
    if let Some(counted) = syscalls(&hello, &[], &[]) {
        println!("hello world's system calls: {}", counted.line());
    }
}
