//! The sandbox's own overhead: a no-op child (`/bin/true`) run through
//! `Sandbox::run` against a bare `std::process::Command` spawn + wait, and
//! `python3 -c pass` the same ways; each sandbox case with the reaper (the
//! `preflight` binary, as `preflight` runs probes) and without, and with
//! the reaper both in namespaces of its own (pid, mount, and user when not
//! root: what a probe gets) and without them. Cases are interleaved round
//! by round, their order rotating, so machine drift hits all of them alike.
//!
//! `cargo bench --bench sandbox` (rounds: `PREFLIGHT_BENCH_ROUNDS`, default
//! 400). Under `cargo test --all-targets` it runs two rounds as a smoke test.

mod support;

use kernel_preflight::sandbox::{Cancel, ChildCommand, Isolation, Limits, Sandbox, Termination};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use support::{Case, measure, preflight, print_cases, rounds};

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

/// A run in `sandbox`, or in a fresh one (temporary directory included)
/// under `reaper`, in namespaces of its own when `namespaces` (and a
/// reaper) say so.
fn sandboxed(
    sandbox: Option<&Sandbox>,
    reaper: Option<PathBuf>,
    namespaces: bool,
    cmd: ChildCommand,
) -> impl FnMut() + '_ {
    let limits = Limits::default();
    let cancel = Cancel::new();
    move || {
        let fresh;
        let sandbox = match sandbox {
            Some(sandbox) => sandbox,
            None => {
                fresh = Sandbox::new()
                    .expect("sandbox")
                    .with_reaper(reaper.clone())
                    .with_namespaces(namespaces);
                &fresh
            }
        };
        let report = sandbox.run(&cmd, &limits, &cancel).expect("sandbox run");
        assert_eq!(report.termination, Termination::Exited { code: 0 });
        assert_eq!(report.contained, sandbox.reaper().is_some());
        let namespaced = matches!(report.isolation, Isolation::Namespaces { .. });
        assert_eq!(namespaced, namespaces && sandbox.reaper().is_some());
    }
}

fn main() {
    let rounds = rounds(400);
    let reaper = Some(preflight());
    let reused = Sandbox::new().expect("sandbox");
    let reused_reaped = Sandbox::new()
        .expect("sandbox")
        .with_reaper(reaper.clone())
        .with_namespaces(false);
    let reused_namespaced = Sandbox::new().expect("sandbox").with_reaper(reaper.clone());
    let truth = || ChildCommand::new("/bin/true");

    let mut cases: Vec<Case> = vec![
        (
            "bare Command::output(/bin/true)",
            Box::new(bare("/bin/true", &[])),
        ),
        (
            "Sandbox::run(/bin/true), no reaper",
            Box::new(sandboxed(Some(&reused), None, false, truth())),
        ),
        (
            "Sandbox::run(/bin/true), reaper",
            Box::new(sandboxed(Some(&reused_reaped), None, false, truth())),
        ),
        (
            "Sandbox::run(/bin/true), reaper, namespaces",
            Box::new(sandboxed(Some(&reused_namespaced), None, true, truth())),
        ),
        (
            "Sandbox::new + run(/bin/true), reaper",
            Box::new(sandboxed(None, reaper.clone(), false, truth())),
        ),
        (
            "Sandbox::new + run(/bin/true), reaper, namespaces",
            Box::new(sandboxed(None, reaper.clone(), true, truth())),
        ),
    ];
    let samples = measure(&mut cases, rounds);
    print_cases("no-op child", &cases, samples);

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
    let pass = || ChildCommand::new(python).arg("-c").arg("pass");
    let mut cases: Vec<Case> = vec![
        (
            "bare Command::output(python3 -c pass)",
            Box::new(bare(python, &["-c", "pass"])),
        ),
        (
            "Sandbox::new + run(python3 -c pass), no reaper",
            Box::new(sandboxed(None, None, false, pass())),
        ),
        (
            "Sandbox::new + run(python3 -c pass), reaper",
            Box::new(sandboxed(None, reaper.clone(), false, pass())),
        ),
        (
            "Sandbox::new + run(python3 -c pass), reaper, namespaces",
            Box::new(sandboxed(None, reaper.clone(), true, pass())),
        ),
    ];
    let samples = measure(&mut cases, (rounds / 4).max(2));
    print_cases(&format!("python3 startup ({python})"), &cases, samples);
}
