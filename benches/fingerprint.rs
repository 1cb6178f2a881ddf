//! `preflight fingerprint --json` against a Rust "hello world" built in the
//! same run with the same cargo, rustc and profile (target: at most 1.3×
//! its median), and against a bare `python3 -c pass` of the interpreter
//! the fingerprint describes: process wall time and CPU time (user +
//! system, from `getrusage`), interleaved so that machine drift hits all
//! alike; and the system calls of each, counted by `strace -f -c`. Both
//! binaries are timed as built and as installed copies (see
//! `support::installed_copy`).
//!
//! `cargo bench --bench fingerprint` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 200). Cargo builds the release binary; the bench builds the
//! hello world.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{
    Quartiles, hello_world, installed_copy, interleave, preflight, rounds, syscalls, time,
};

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
    let ours = preflight();
    let ours_installed = installed_copy(&ours, dir.path());
    let hello_installed = installed_copy(&hello, dir.path());
    let fingerprint = |exe: &Path| {
        let mut c = Command::new(exe);
        c.args(["fingerprint", "--json"]);
        c
    };
    let bare = || {
        let mut c = Command::new(&python);
        c.args(["-c", "pass"]);
        c
    };
    let commands: [&dyn Fn() -> Command; 5] = [
        &|| fingerprint(&ours),
        &|| Command::new(&hello),
        &bare,
        &|| fingerprint(&ours_installed),
        &|| Command::new(&hello_installed),
    ];
    // Warm up: page cache, the tool-version cache, Python's bytecode cache.
    for _ in 0..5 {
        for command in &commands {
            time(&mut command());
        }
    }
    let mut samples = interleave(&commands, rounds);
    let labels = [
        "preflight fingerprint --json".to_string(),
        "Rust hello world (same rustc and profile)".to_string(),
        format!("{} -c pass", python.display()),
        "preflight fingerprint --json, installed copy".to_string(),
        "Rust hello world, installed copy".to_string(),
    ];
    for (what, cpu) in [("wall time", false), ("CPU time", true)] {
        let q: Vec<Quartiles> = samples
            .iter_mut()
            .map(|(wall, cpus)| Quartiles::of(if cpu { cpus } else { wall }))
            .collect();
        println!("{rounds} interleaved rounds, process {what} (ms)");
        println!("{}", support::header());
        for (q, label) in q.iter().zip(&labels) {
            println!("{}", q.row(label));
        }
        for (pair, ours, hello) in [("as built", 0, 1), ("installed copies", 3, 4)] {
            let ratio = q[ours].median / q[hello].median;
            println!(
                "{what} ratio to hello world, {pair}: {ratio:.2} (target <= 1.30: {})",
                support::judged(ratio <= 1.3)
            );
        }
        println!("ratio to python -c pass: {:.3}", q[0].median / q[2].median);
    }
    let args = [
        std::ffi::OsStr::new("fingerprint"),
        std::ffi::OsStr::new("--json"),
    ];
    if let Some(counted) = syscalls(&ours, &args, &[]) {
        println!("system calls: {}", counted.line());
    }
    if let Some(counted) = syscalls(&hello, &[], &[]) {
        println!("hello world's system calls: {}", counted.line());
    }
}
