//! The sandbox's own overhead: a no-op child (`/bin/true`) run through
//! `Sandbox::run` against a bare `std::process::Command` spawn + wait, and
//! `python3 -c pass` the same two ways. Cases are interleaved round by
//! round, their order rotating, so machine drift hits all of them alike.
//!
//! `cargo bench --bench sandbox` (rounds: `PREFLIGHT_BENCH_ROUNDS`, default
//! 400). Under `cargo test --all-targets` it runs two rounds as a smoke test.

mod support;

use kernel_preflight::sandbox::{Cancel, ChildCommand, Limits, Sandbox, Termination};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{Case, measure, quantile};

/// Spawn + wait with both outputs captured, as a caller without a sandbox would.
fn bare(program: &'static str, args: &'static [&'static str]) -> impl FnMut() {
    move || {
        let status = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("bare spawn")
            .status;
        assert!(status.success());
    }
}

/// A run in `sandbox`, or in a fresh one (temporary directory included).
fn sandboxed(sandbox: Option<&Sandbox>, cmd: ChildCommand) -> impl FnMut() + '_ {
    let limits = Limits::default();
    let cancel = Cancel::new();
    move || {
        let fresh;
        let sandbox = match sandbox {
            Some(sandbox) => sandbox,
            None => {
                fresh = Sandbox::new().expect("sandbox");
                &fresh
            }
        };
        let report = sandbox.run(&cmd, &limits, &cancel).expect("sandbox run");
        assert_eq!(report.termination, Termination::Exited { code: 0 });
    }
}

/// Prints quartiles per case; the first case is the baseline.
fn report(title: &str, cases: &[Case], samples: Vec<Vec<Duration>>) {
    println!("\n{title}");
    println!(
        "{:<38} {:>5} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "case", "n", "q1", "median", "q3", "min", "median Δ"
    );
    let mut baseline = None;
    for ((name, _), mut times) in cases.iter().zip(samples) {
        times.sort();
        let median = quantile(&times, 0.5);
        let base = *baseline.get_or_insert(median);
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        println!(
            "{:<38} {:>5} {:>10} {:>10} {:>10} {:>10} {:>+9.3} ms",
            name,
            times.len(),
            ms(quantile(&times, 0.25)),
            ms(median),
            ms(quantile(&times, 0.75)),
            ms(times[0]),
            (median.as_secs_f64() - base.as_secs_f64()) * 1e3,
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not,
    // and then two rounds show that every case still runs.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let rounds: usize = match benchmarking {
        true => std::env::var("PREFLIGHT_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(400),
        false => 2,
    }
    .max(2);
    let reused = Sandbox::new().expect("sandbox");

    let mut cases: Vec<Case> = vec![
        (
            "bare Command::output(/bin/true)",
            Box::new(bare("/bin/true", &[])),
        ),
        (
            "Sandbox::run(/bin/true)",
            Box::new(sandboxed(Some(&reused), ChildCommand::new("/bin/true"))),
        ),
        (
            "Sandbox::new + run(/bin/true)",
            Box::new(sandboxed(None, ChildCommand::new("/bin/true"))),
        ),
    ];
    let samples = measure(&mut cases, rounds);
    report("no-op child", &cases, samples);

    // The interpreter itself, not a version manager's shim in front of it.
    let python: &'static str = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 on PATH")
            .stdout,
    )
    .expect("UTF-8 path")
    .trim()
    .to_owned()
    .leak();
    let mut cases: Vec<Case> = vec![
        (
            "bare Command::output(python3 -c pass)",
            Box::new(bare(python, &["-c", "pass"])),
        ),
        (
            "Sandbox::new + run(python3 -c pass)",
            Box::new(sandboxed(
                None,
                ChildCommand::new(python).arg("-c").arg("pass"),
            )),
        ),
    ];
    let samples = measure(&mut cases, (rounds / 4).max(2));
    report(&format!("python3 startup ({python})"), &cases, samples);
}
