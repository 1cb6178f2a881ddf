//! Descendants that escape the child's process group and its pipes — a
//! helper in a process group of its own, a daemon, a grandchild that closed
//! its output — are held by the reaper: when `Sandbox::run` returns they
//! are dead, and the report names each one with its command line. Without
//! a reaper the run says it was not contained.

mod common;
mod probe_fixtures;

use kernel_preflight::sandbox::{
    Cancel, ChildCommand, Isolation, Leak, Limits, Place, RunReport, Sandbox, Termination,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    common::fixtures().join("sandbox").join(name)
}

fn reaper() -> Option<PathBuf> {
    Some(common::preflight_bin())
}

fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(2),
        ..Limits::default()
    }
}

/// Runs `cmd` marked ([`common::mark`]); the mark, to find what outlived it.
fn run_marked(
    reaper: Option<PathBuf>,
    cmd: &ChildCommand,
    limits: &Limits,
) -> (Sandbox, RunReport, String) {
    let sandbox = Sandbox::new().expect("sandbox").with_reaper(reaper);
    let mark = common::mark();
    let cmd = cmd.clone().env(common::MARK_VAR, &mark);
    let report = sandbox
        .run(&cmd, limits, &Cancel::new())
        .expect("sandbox run");
    (sandbox, report, mark)
}

/// [`run_marked`] under the reaper, which must leave nothing alive.
fn run_with(reaper: Option<PathBuf>, cmd: &ChildCommand, limits: &Limits) -> (Sandbox, RunReport) {
    let contained = reaper.is_some();
    let (sandbox, report, mark) = run_marked(reaper, cmd, limits);
    if contained {
        common::assert_none_marked(&mark);
    }
    (sandbox, report)
}

fn sh(script: &str) -> ChildCommand {
    ChildCommand::new("sh").arg("-c").arg(script)
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .is_some_and(|at| !stat[at + 1..].trim_start().starts_with('Z'))
    })
}

fn read_pid(dir: &Path, file: &str) -> i32 {
    let text = std::fs::read_to_string(dir.join(file)).expect("pid file");
    text.trim().parse().expect("a pid")
}

/// The one leak of `report`, which must be `pid`.
fn only_leak(report: &RunReport, pid: i32) -> &Leak {
    match &report.leaked[..] {
        [leak] if leak.pid == pid => leak,
        other => panic!("expected one leak, pid {pid}: {other:?}"),
    }
}

#[test]
fn helper_in_its_own_process_group_is_killed_and_reported() {
    let cmd = ChildCommand::new("python3").arg(fixture("process_group_helper.py"));
    let (sandbox, report) = run_with(reaper(), &cmd, &quick());
    let helper = read_pid(sandbox.dir(), "helper.pid");
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert!(report.contained);
    let leak = only_leak(&report, helper);
    assert_eq!(leak.cmdline, "sleep 300");
    assert_eq!(leak.place, Place::OwnGroup);
    // It inherited the child's stdout and stderr.
    assert!(leak.held_output && leak.killed, "{leak:?}");
    assert!(
        report
            .leak_summary()
            .is_some_and(|s| s.contains(&format!("pid {helper} (sleep 300)"))),
        "{:?}",
        report.leak_summary()
    );
}

#[test]
fn daemon_with_closed_streams_is_killed_and_reported() {
    let cmd = ChildCommand::new("python3").arg(fixture("daemon.py"));
    let started = Instant::now();
    let (sandbox, report) = run_with(reaper(), &cmd, &quick());
    let daemon = read_pid(sandbox.dir(), "daemon.pid");
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.text(), "child exits, daemon started\n");
    let leak = only_leak(&report, daemon);
    assert_eq!(leak.cmdline, "sleep 301");
    assert_eq!(leak.place, Place::OwnSession);
    assert!(!leak.held_output && leak.killed, "{leak:?}");
    // Nothing held the pipes, so nothing waited for them.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn grandchild_that_closed_its_pipes_is_killed_and_reported() {
    // The child waits until its grandchild is `sleep`, so that the report
    // can name it so.
    let cmd = sh("(exec >/dev/null 2>&1; exec sleep 302) & \
         until grep -qs 302 /proc/$!/cmdline; do sleep 0.01; done; echo $! > grandchild.pid");
    let (sandbox, report) = run_with(reaper(), &cmd, &quick());
    let grandchild = read_pid(sandbox.dir(), "grandchild.pid");
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    let leak = only_leak(&report, grandchild);
    assert_eq!(leak.cmdline, "sleep 302");
    assert_eq!(leak.place, Place::ChildGroup);
    assert!(!leak.held_output && leak.killed, "{leak:?}");
}

#[test]
fn timeout_kills_the_group_and_the_escaped_helper_too() {
    // The background sleep stays in the child's group and dies with the
    // probe; the setsid one left it and is a leak.
    // (`setsid` is `sleep` once it has left: the child waits for that.)
    let cmd = sh("sleep 303 & echo $! > member.pid; setsid sleep 304 & \
         until head -c 5 /proc/$!/cmdline | grep -q '^sleep'; do sleep 0.01; done; \
         echo $! > escaped.pid; exec sleep 3600");
    let limits = Limits {
        timeout: Duration::from_secs(2),
        ..quick()
    };
    let (sandbox, report) = run_with(reaper(), &cmd, &limits);
    assert!(
        matches!(report.termination, Termination::TimedOut { .. }),
        "{:?}",
        report.termination
    );
    let escaped = read_pid(sandbox.dir(), "escaped.pid");
    let leak = only_leak(&report, escaped);
    assert_eq!(leak.cmdline, "sleep 304");
    assert_eq!(leak.place, Place::OwnSession);
}

#[test]
fn exit_status_and_signals_are_relayed_exactly() {
    // (script, exit code, signal)
    for (script, code, signal) in [
        ("exit 0", Some(0), None),
        ("exit 42", Some(42), None),
        ("kill -SEGV $$", None, Some(libc::SIGSEGV)),
        ("kill -USR1 $$", None, Some(libc::SIGUSR1)),
    ] {
        let (_sandbox, with) = run_with(reaper(), &sh(script), &quick());
        let (_sandbox, without) = run_with(None, &sh(script), &quick());
        let ended = match &with.termination {
            Termination::Exited { code } => (Some(*code), None),
            Termination::Signaled { signal, .. } => (None, Some(*signal)),
            other => panic!("{script}: {other:?}"),
        };
        assert_eq!(ended, (code, signal), "{script}");
        // The same as the kernel reports it to a parent without reaper,
        // core dump flag included.
        assert_eq!(with.termination, without.termination, "{script}");
        assert_eq!((with.leaked, with.contained), (vec![], true));
        assert_eq!((without.leaked, without.contained), (vec![], false));
    }
}

/// In its own pid namespace the child cannot touch its reaper (pid 1
/// there); without one a child that kills or stops its reaper ends its own
/// run, as a verdict on the child, never as an error of the sandbox.
#[test]
fn a_child_that_kills_or_stops_its_reaper_ends_only_its_own_run() {
    for (signal, stopped) in [("KILL", false), ("STOP", true)] {
        let script = format!("kill -{signal} $PPID; sleep 1");
        let sandbox = Sandbox::new().expect("sandbox").with_reaper(reaper());
        let report = sandbox
            .run(&sh(&script), &quick(), &Cancel::new())
            .expect("the run is reported");
        if let Isolation::Namespaces { .. } = report.isolation {
            assert_eq!(report.termination, Termination::Exited { code: 0 });
        }
        let started = Instant::now();
        let sandbox = Sandbox::new()
            .expect("sandbox")
            .with_reaper(reaper())
            .with_namespaces(false);
        let report = sandbox
            .run(&sh(&script), &quick(), &Cancel::new())
            .expect("the run is reported");
        assert!(
            matches!(
                &report.termination,
                Termination::SandboxKilled { name, stopped: s, .. }
                    if *name == format!("SIG{signal}") && *s == stopped
            ),
            "{:?}",
            report.termination
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

/// The reaper holds the exec status pipe open until it has started the
/// child, so a child can stop it first (`kill -STOP $PPID`, a race seen
/// once in about five suite runs): the wait on that pipe must notice, or
/// the run hangs forever. A stand-in reaper that stops itself at once
/// makes the race certain.
#[test]
fn a_reaper_stopped_before_it_started_the_child_does_not_hang_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let stand_in = dir.path().join("stopping-reaper");
    std::fs::write(&stand_in, "#!/bin/sh\nkill -STOP $$\nsleep 60\n").unwrap();
    std::fs::set_permissions(
        &stand_in,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let started = Instant::now();
    let sandbox = Sandbox::new()
        .expect("sandbox")
        .with_reaper(Some(stand_in))
        .with_namespaces(false);
    let result = sandbox.run(&sh("exit 0"), &quick(), &Cancel::new());
    assert!(result.is_err(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_reaper_that_cannot_be_executed_is_named() {
    let sandbox = Sandbox::new()
        .expect("sandbox")
        .with_reaper(Some("/nonexistent/preflight".into()));
    let err = sandbox
        .run(&sh("exit 0"), &quick(), &Cancel::new())
        .expect_err("no reaper to run");
    assert_eq!(
        err.to_string(),
        "cannot execute /nonexistent/preflight: No such file or directory (os error 2)"
    );
}

#[test]
fn reaper_by_hand_is_refused() {
    let out = std::process::Command::new(common::preflight_bin())
        .args(["__reaper", "--", "true"])
        .output()
        .expect("run preflight");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("started by preflight's sandbox"),
        "{stderr}"
    );
}

/// Without a reaper the sandbox holds the group only, and says so: a
/// grandchild holding the output is still found, named and killed; one that
/// left the group is named and left running.
#[test]
fn without_a_reaper_the_run_is_not_contained_and_says_so() {
    let cmd = sh(
        "sleep 305 & until grep -qs 305 /proc/$!/cmdline; do sleep 0.01; done; \
         echo $! > member.pid; echo started",
    );
    let (sandbox, report) = run_with(None, &cmd, &quick());
    assert!(!report.contained);
    let member = read_pid(sandbox.dir(), "member.pid");
    let leak = only_leak(&report, member);
    assert_eq!(leak.cmdline, "sleep 305");
    assert_eq!(leak.place, Place::ChildGroup);
    assert!(leak.held_output && leak.killed, "{leak:?}");

    let limits = Limits {
        pipe_close_wait: Duration::from_millis(200),
        ..quick()
    };
    let cmd = ChildCommand::new("python3").arg(fixture("escaped_grandchild.py"));
    let (sandbox, report, mark) = run_marked(None, &cmd, &limits);
    let escaped = read_pid(sandbox.dir(), "escaped.pid");
    let still_running = alive(escaped);
    for pid in common::marked(&mark) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(still_running, "without a reaper nothing can reach it");
    let leak = only_leak(&report, escaped);
    assert_eq!(leak.place, Place::OwnSession);
    assert!(leak.held_output && !leak.killed, "{leak:?}");
}

/// The parent of a sandbox (a copy of this test binary running the helper
/// below) is SIGKILLed while its child and the child's daemon run: the
/// reaper takes both down.
#[test]
fn daemon_dies_when_the_parent_is_killed() {
    let dir = common::fresh_dir("daemon-parent");
    let mark = common::mark();
    let mut helper = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "daemon_parent_helper", "--test-threads=1"])
        .env("PREFLIGHT_DAEMON_HELPER_DIR", &dir)
        .env(common::MARK_VAR, &mark)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the helper");
    let until = Instant::now() + Duration::from_secs(15);
    while !(dir.join("child.pid").exists() && dir.join("daemon.pid").exists()) {
        assert!(Instant::now() < until, "the helper's child never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let helper_pid = helper.id() as i32;
    let running: Vec<i32> = common::marked(&mark)
        .into_iter()
        .filter(|pid| *pid != helper_pid)
        .collect();
    assert!(running.len() >= 2, "child and daemon run: {running:?}");
    helper.kill().expect("SIGKILL the helper");
    helper.wait().expect("reap the helper");
    common::assert_none_marked(&mark);
}

#[test]
fn daemon_parent_helper() {
    let Some(dir) = std::env::var_os("PREFLIGHT_DAEMON_HELPER_DIR") else {
        return;
    };
    let script = r#"(exec >&- 2>&- </dev/null; setsid sleep 306 & echo $! > "$DIR/daemon.pid.tmp"; mv "$DIR/daemon.pid.tmp" "$DIR/daemon.pid") &
echo $$ > "$DIR/child.pid.tmp" && mv "$DIR/child.pid.tmp" "$DIR/child.pid" && exec sleep 3600"#;
    // Past the walls: the test waits for the pids in this folder.
    let sandbox = Sandbox::new()
        .expect("sandbox")
        .with_reaper(reaper())
        .writable(&dir);
    let _ = sandbox.run(&sh(script).env("DIR", dir), &quick(), &Cancel::new());
}

/// End to end, as a new user meets it: `preflight check` on two hub-layout
/// kernels whose import starts a helper in a process group of its own, or
/// daemonizes one. When `check` returns, both helpers are gone and each
/// outcome names its leak.
#[test]
fn check_kills_and_reports_what_a_variant_import_leaves_behind() {
    let pids = common::fresh_dir("check-leaks");
    let helper_file = pids.join("helper.pid");
    let daemon_file = pids.join("daemon.pid");
    let mark = common::mark();
    let popen = probe_fixtures::Repo::new();
    popen.variant(
        "torch-universal",
        &format!(
            "import subprocess\n\
             helper = subprocess.Popen(['sleep', '307'], process_group=0)\n\
             open({:?}, 'w').write(str(helper.pid))\n",
            helper_file.display().to_string()
        ),
    );
    let daemonize = probe_fixtures::Repo::new();
    daemonize.variant(
        "torch-universal",
        &format!(
            "import os\n\
             first = os.fork()\n\
             if first == 0:\n    \
                 os.setsid()\n    \
                 daemon = os.fork()\n    \
                 if daemon == 0:\n        \
                     os.closerange(0, 3)\n        \
                     os.execvp('sleep', ['sleep', '308'])\n    \
                 while b'308' not in open(f'/proc/{{daemon}}/cmdline', 'rb').read():\n        \
                     pass\n    \
                 open({:?}, 'w').write(str(daemon))\n    \
                 os._exit(0)\n\
             os.waitpid(first, 0)\n",
            daemon_file.display().to_string()
        ),
    );
    let out = common::preflight_cmd()
        .arg("check")
        .arg("--python")
        .arg(probe_fixtures::python())
        .arg(popen.root())
        .arg(daemonize.root())
        .arg("--json")
        .env(common::MARK_VAR, &mark)
        // Past the walls: the kernels write their helpers' pids here.
        .env("PREFLIGHT_PROBE_WRITABLE", &pids)
        .output()
        .expect("run preflight check");
    common::assert_none_marked(&mark);
    let helper = read_pid(&pids, "helper.pid");
    let daemon = read_pid(&pids, "daemon.pid");

    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{doc:#}");
    for (result, pid, sleep) in [
        (&results[0], helper, "sleep 307"),
        (&results[1], daemon, "sleep 308"),
    ] {
        assert_eq!(result["outcome"]["kind"], "pass", "{result:#}");
        let leaked = result["leaked"]
            .as_str()
            .unwrap_or_else(|| panic!("no leak: {result:#}"));
        assert!(
            leaked.contains(&format!("pid {pid} ({sleep})")) && leaked.contains("killed"),
            "{leaked}"
        );
    }
}
