//! `preflight fingerprint --json` against a bare `python3 -c pass` of the
//! interpreter the fingerprint describes: process wall time, interleaved so
//! that machine drift hits both alike. Target: at most 1/4 of Python's.
//!
//! `cargo bench --bench fingerprint` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 200). Builds nothing itself; cargo builds the release binary.

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::{Quartiles, preflight, rounds, time};

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
    let a = Quartiles::of(&mut ours);
    let b = Quartiles::of(&mut theirs);
    println!("{rounds} interleaved rounds, process wall time (ms)");
    println!("{}", support::header());
    println!("{}", a.row("preflight fingerprint --json"));
    println!("{}", b.row(&format!("{} -c pass", python.display())));
    let ratio = a.median / b.median;
    println!(
        "ratio of medians: {ratio:.3} (target <= 0.250: {})",
        if ratio <= 0.25 { "met" } else { "NOT met" }
    );
}
