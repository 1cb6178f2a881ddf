//! The sandbox against real misbehaving children: each test runs a fixture
//! from `tests/fixtures/sandbox/` under the reaper (the `preflight` binary,
//! as in production) and checks the report and that no process of the
//! child's group, nor any process descended from the child, is left
//! afterwards.

mod common;

use kernel_preflight::sandbox::{
    Cancel, ChildCommand, Isolation, Limits, Place, RunReport, Sandbox, SandboxError, Termination,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    common::fixtures().join("sandbox").join(name)
}

fn python(script: &str) -> ChildCommand {
    ChildCommand::new("python3").arg(fixture(script))
}

fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(30),
        grace: Duration::from_secs(2),
        ..Limits::default()
    }
}

/// A sandbox whose children run under the reaper, as `preflight`'s do.
fn sandbox() -> Sandbox {
    Sandbox::new()
        .expect("sandbox directory")
        .with_reaper(Some(common::preflight_bin()))
}

/// Runs `cmd` marked ([`common::mark`]), and checks that nothing it
/// started is alive afterwards.
fn run(cmd: &ChildCommand, limits: &Limits) -> (Sandbox, RunReport) {
    let sandbox = sandbox();
    let mark = common::mark();
    let cmd = cmd.clone().env(common::MARK_VAR, &mark);
    let report = sandbox
        .run(&cmd, limits, &Cancel::new())
        .expect("sandbox run");
    assert_group_gone(&report);
    common::assert_none_marked(&mark);
    (sandbox, report)
}

/// Live (non-zombie) processes whose process group is `pgid`, from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            found.push(pid);
        }
    }
    found
}

/// SIGKILL is delivered asynchronously, so allow the kernel a moment to
/// finish the kill; the bound is generous and only proves the kill happened.
fn assert_group_gone(report: &RunReport) {
    let Some(pgid) = report.pid else { return };
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left = live_members(pgid);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= until {
            for pid in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("processes of group {pgid} outlived the run: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(sandbox: &Sandbox, file: &str) -> i32 {
    let text = std::fs::read_to_string(sandbox.dir().join(file)).expect("pid file");
    text.trim().parse().expect("a pid")
}

#[test]
fn passing_child_is_captured() {
    let cmd = ChildCommand::new("sh")
        .arg("-c")
        .arg("echo out; echo err >&2; exit 0");
    let (_sandbox, report) = run(&cmd, &quick());
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.text(), "out\n");
    assert_eq!(report.stderr.text(), "err\n");
    assert!(!report.stdout.truncated());
    assert_eq!(report.leaked, vec![]);
    assert!(report.contained);
}

#[test]
fn cuda_no_kernel_image_exit_1() {
    let (_sandbox, report) = run(&python("no_kernel_image.py"), &quick());
    assert_eq!(report.termination, Termination::Exited { code: 1 });
    assert!(
        report
            .stderr
            .text()
            .contains("no kernel image is available for execution on the device"),
        "{}",
        report.stderr.text()
    );
    assert_eq!(report.stdout.text(), "loading variant\n");
}

#[test]
fn segfault_by_signal_is_sigsegv() {
    let (_sandbox, report) = run(&python("segfault.py"), &quick());
    let Termination::Signaled { signal, name, .. } = &report.termination else {
        panic!("expected a signal, got {:?}", report.termination);
    };
    assert_eq!((*signal, name.as_str()), (libc::SIGSEGV, "SIGSEGV"));
    assert_eq!(report.stdout.text(), "about to crash\n");
}

#[test]
fn real_segfault_in_c_is_sigsegv_without_core_file() {
    let build = tempfile::tempdir().expect("build dir");
    let binary = build.path().join("segfault");
    let status = std::process::Command::new("cc")
        .arg("-O0")
        .arg("-o")
        .arg(&binary)
        .arg(fixture("segfault.c"))
        .status()
        .expect("cc must be installed to build the segfault fixture");
    assert!(status.success(), "cc failed");

    let (sandbox, report) = run(&ChildCommand::new(&binary), &quick());
    let Termination::Signaled {
        name, core_dumped, ..
    } = &report.termination
    else {
        panic!("expected a signal, got {:?}", report.termination);
    };
    assert_eq!(name, "SIGSEGV");
    assert!(!core_dumped, "RLIMIT_CORE=0 must prevent a core dump");
    assert_eq!(report.stdout.text(), "about to dereference NULL\n");
    let core_files: Vec<_> = std::fs::read_dir(sandbox.dir())
        .expect("sandbox dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("core"))
        .collect();
    assert!(core_files.is_empty(), "{core_files:?}");
}

#[test]
fn abort_is_sigabrt() {
    let (_sandbox, report) = run(&python("abort.py"), &quick());
    let Termination::Signaled { name, .. } = &report.termination else {
        panic!("expected a signal, got {:?}", report.termination);
    };
    assert_eq!(name, "SIGABRT");
}

#[test]
fn hang_times_out_and_sigterm_suffices() {
    // Timeouts leave a loaded machine time to start Python and print.
    let limits = Limits {
        timeout: Duration::from_secs(3),
        grace: Duration::from_secs(10),
        ..Limits::default()
    };
    let (_sandbox, report) = run(&python("hang.py"), &limits);
    let Termination::TimedOut {
        after,
        needed_sigkill,
    } = report.termination
    else {
        panic!("expected a timeout, got {:?}", report.termination);
    };
    assert!(!needed_sigkill);
    assert!(after >= Duration::from_secs(3));
    assert!(report.wall < Duration::from_secs(13), "{:?}", report.wall);
    assert_eq!(report.stdout.text(), "hanging\n");
}

#[test]
fn child_ignoring_sigterm_needs_sigkill() {
    // Long enough for Python to start and ignore SIGTERM before it comes.
    let limits = Limits {
        timeout: Duration::from_secs(3),
        grace: Duration::from_millis(500),
        ..Limits::default()
    };
    let (_sandbox, report) = run(&python("ignore_sigterm.py"), &limits);
    assert!(
        matches!(
            report.termination,
            Termination::TimedOut {
                needed_sigkill: true,
                ..
            }
        ),
        "{:?}",
        report.termination
    );
    assert!(report.wall < Duration::from_secs(15), "{:?}", report.wall);
    assert_eq!(report.stdout.text(), "ignoring SIGTERM\n");
}

#[test]
fn grandchild_holding_stdout_is_killed_and_reported() {
    let cmd = ChildCommand::new("sh").arg(fixture("grandchild.sh"));
    let started = Instant::now();
    let (sandbox, report) = run(&cmd, &quick());
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert!(report.stdout.text().starts_with("child exits"));
    // `run` found it dead; the report names it by the number it had.
    let grandchild = read_pid(&sandbox, "grandchild.pid");
    let [leak] = &report.leaked[..] else {
        panic!("one leak expected: {:?}", report.leaked);
    };
    assert_eq!(leak.pid, grandchild);
    assert_eq!(leak.cmdline, "sleep 3600");
    assert_eq!(leak.place, Place::ChildGroup);
    assert!(leak.held_output && leak.killed, "{leak:?}");
}

#[test]
fn grandchild_escaping_the_group_does_not_hang_the_parent() {
    let limits = Limits {
        pipe_close_wait: Duration::from_millis(200),
        ..quick()
    };
    let started = Instant::now();
    let (sandbox, report) = run(&python("escaped_grandchild.py"), &limits);
    // Group kills cannot reach it; the reaper does (`run` found it dead).
    let escaped = read_pid(&sandbox, "escaped.pid");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    let [leak] = &report.leaked[..] else {
        panic!("one leak expected: {:?}", report.leaked);
    };
    assert_eq!(leak.pid, escaped);
    assert_eq!(leak.place, Place::OwnSession);
    assert!(leak.cmdline.contains("escaped_grandchild.py"), "{leak:?}");
    assert!(leak.held_output && leak.killed, "{leak:?}");
}

#[test]
fn flood_of_500_mb_is_bounded_in_memory() {
    let limits = Limits {
        timeout: Duration::from_secs(120),
        ..quick()
    };
    let (_sandbox, report) = run(&python("flood.py"), &limits);
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.total_bytes, 500_000_000);
    assert!(report.stdout.truncated());
    assert_eq!(report.stdout.head.len(), limits.output_head);
    assert_eq!(report.stdout.tail.len(), limits.output_tail);
    assert!(report.stdout.text().contains("bytes omitted"));
    assert_eq!(report.stdout.tail_lines(1), "last line");
    let peak_kib = peak_rss_kib();
    assert!(
        peak_kib < 100 * 1024,
        "parent peak RSS {peak_kib} KiB during a 500 MB flood"
    );
}

/// The test process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn missing_program_is_a_precise_error() {
    let sandbox = sandbox();
    let cancel = Cancel::new();

    let err = sandbox
        .run(
            &ChildCommand::new("/nonexistent/preflight-probe"),
            &quick(),
            &cancel,
        )
        .expect_err("cannot run a missing file");
    assert!(matches!(err, SandboxError::Exec { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot execute /nonexistent/preflight-probe: No such file or directory (os error 2)"
    );

    let err = sandbox
        .run(
            &ChildCommand::new("preflight-no-such-program"),
            &quick(),
            &cancel,
        )
        .expect_err("cannot run a missing name");
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot execute preflight-no-such-program: not found in PATH ("),
        "{err}"
    );
}

#[test]
fn non_executable_file_is_permission_denied() {
    let sandbox = sandbox();
    let script = sandbox.dir().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write script");
    let err = sandbox
        .run(&ChildCommand::new(&script), &quick(), &Cancel::new())
        .expect_err("not executable");
    assert!(
        err.to_string().ends_with("Permission denied (os error 13)"),
        "{err}"
    );
}

#[test]
fn child_sees_the_sandbox_not_the_parent() {
    let sandbox = sandbox();
    let result = sandbox.dir().join("result.json");
    let cmd = python("inspect.py")
        .env("PREFLIGHT_RESULT", &result)
        .env("EXTRA_VAR", "given");
    let report = sandbox
        .run(&cmd, &quick(), &Cancel::new())
        .expect("sandbox run");
    assert_group_gone(&report);
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.text(), "inspected\n");

    let text = std::fs::read_to_string(&result).expect("result file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("result JSON");
    let dir = sandbox.dir().canonicalize().expect("canonical dir");
    assert_eq!(v["cwd"], dir.to_string_lossy().as_ref());
    assert_eq!(v["tmpdir"], sandbox.dir().to_string_lossy().as_ref());
    assert_eq!(v["pwd"], sandbox.dir().to_string_lossy().as_ref());
    assert_eq!(v["rlimit_core"], serde_json::json!([0, 0]));
    let nofile = v["rlimit_nofile"][0].as_u64().expect("nofile");
    assert!(nofile <= 4096, "{nofile}");
    let env: Vec<&str> = v["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(env.contains(&"EXTRA_VAR"));
    // Own group, led by the child, in a session of its own that the
    // reaper leads.
    assert_eq!(v["pgid"], v["pid"]);
    let parent_sid = nix::unistd::getsid(None).expect("getsid").as_raw();
    assert_ne!(v["sid"].as_i64(), Some(i64::from(parent_sid)));
    assert_ne!(v["sid"], v["pid"]);
    match report.isolation {
        // The reaper is pid 1 of the child's pid namespace, and its
        // session's leader.
        Isolation::Namespaces { .. } => {
            assert_eq!((v["pid"].as_i64(), v["sid"].as_i64()), (Some(2), Some(1)));
            assert!(report.pid.is_some_and(|pid| pid != 2), "{:?}", report.pid);
        }
        Isolation::Session { .. } => {
            assert_eq!(Some(v["pid"].as_i64().expect("pid") as i32), report.pid)
        }
    }
    assert_eq!(v["stdin_eof"], true);
    // 0, 1, 2, and the descriptor listdir itself opened: nothing inherited.
    let fds: Vec<u64> = v["fds"]
        .as_array()
        .expect("fds")
        .iter()
        .filter_map(|f| f.as_u64())
        .collect();
    assert!(fds.len() <= 4 && fds.iter().all(|fd| *fd <= 3), "{fds:?}");
}

#[test]
fn cancel_from_another_thread_kills_the_child() {
    let sandbox = sandbox();
    let cancel = Cancel::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            cancel.cancel();
        })
    };
    let started = Instant::now();
    let report = sandbox
        .run(&python("ignore_sigterm.py"), &quick(), &cancel)
        .expect("sandbox run");
    canceller.join().expect("canceller thread");
    assert_group_gone(&report);
    assert_eq!(report.termination, Termination::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn already_cancelled_starts_nothing() {
    let sandbox = sandbox();
    let cancel = Cancel::new();
    cancel.cancel();
    let report = sandbox
        .run(&python("hang.py"), &quick(), &cancel)
        .expect("sandbox run");
    assert_eq!(report.termination, Termination::Cancelled);
    assert_eq!(report.pid, None);
}

#[test]
fn sandbox_directory_is_removed_on_drop() {
    let sandbox = sandbox();
    let dir = sandbox.dir().to_path_buf();
    assert!(dir.is_dir());
    drop(sandbox);
    assert!(!dir.exists());
}

#[test]
fn both_streams_flooding_at_once_do_not_deadlock() {
    // Far more than a pipe buffer on stderr before stdout: a parent that read
    // only one stream at a time would block forever.
    let script = "head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero; echo done >&2";
    let cmd = ChildCommand::new("sh").arg("-c").arg(script);
    let (_sandbox, report) = run(&cmd, &quick());
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.total_bytes, 3_000_000);
    assert_eq!(report.stderr.total_bytes, 3_000_005);
    assert!(report.stderr.tail.ends_with(b"\0done\n"));
}

#[test]
fn child_that_closes_its_output_and_hangs_still_times_out() {
    let limits = Limits {
        timeout: Duration::from_secs(2),
        ..quick()
    };
    let cmd = ChildCommand::new("sh")
        .arg("-c")
        .arg("echo bye; exec >&- 2>&-; exec sleep 3600");
    let (_sandbox, report) = run(&cmd, &limits);
    assert!(
        matches!(report.termination, Termination::TimedOut { .. }),
        "{:?}",
        report.termination
    );
    assert_eq!(report.stdout.text(), "bye\n");
    assert_eq!(report.leaked, vec![]);
}

#[test]
fn stdin_is_empty() {
    // `cat` would wait forever on an inherited terminal or pipe.
    let (_sandbox, report) = run(&ChildCommand::new("cat"), &quick());
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert!(report.wall < Duration::from_secs(15));
}

#[test]
fn failed_setup_step_is_reported_precisely() {
    let sandbox = sandbox();
    std::fs::remove_dir(sandbox.dir()).expect("remove the sandbox dir");
    let err = sandbox
        .run(&ChildCommand::new("sh"), &quick(), &Cancel::new())
        .expect_err("chdir must fail");
    assert!(matches!(err, SandboxError::ChildSetup { .. }), "{err:?}");
    assert!(
        err.to_string().ends_with(
            "chdir to the sandbox directory failed: No such file or directory (os error 2)"
        ),
        "{err}"
    );
}

#[test]
fn parallel_sandboxes_do_not_hold_each_others_pipes() {
    // Every fork on another thread briefly holds this run's pipe ends; they
    // must be closed before exec, or runs would see late EOFs and false leaks.
    let limits = Limits {
        pipe_close_wait: Duration::from_secs(5),
        ..quick()
    };
    std::thread::scope(|s| {
        for worker in 0..4 {
            let limits = &limits;
            s.spawn(move || {
                for round in 0..10 {
                    let text = format!("{worker}-{round}");
                    let cmd = ChildCommand::new("sh")
                        .arg("-c")
                        .arg(format!("echo {text}; sleep 0.05"));
                    let (_sandbox, report) = run(&cmd, limits);
                    assert_eq!(report.termination, Termination::Exited { code: 0 });
                    assert_eq!(report.stdout.text(), format!("{text}\n"));
                    assert_eq!(report.leaked, vec![]);
                    assert!(report.wall < Duration::from_secs(5), "{:?}", report.wall);
                }
            });
        }
    });
}

/// Runs the helper below in a copy of this test binary, where it closes
/// descriptors 0 and 1 so that the sandbox's own pipes land on them (the Rust
/// runtime reopens closed standard descriptors at start, so only an
/// explicit close gets there).
#[test]
fn works_when_the_parent_has_no_stdin_or_stdout() {
    let exe = std::env::current_exe().expect("test binary");
    let output = std::process::Command::new(exe)
        .args(["--exact", "closed_stdin_helper", "--test-threads=1"])
        .env("PREFLIGHT_CLOSED_STDIN_HELPER", "1")
        .output()
        .expect("run the helper");
    assert!(
        output.status.success(),
        "helper failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn closed_stdin_helper() {
    if std::env::var_os("PREFLIGHT_CLOSED_STDIN_HELPER").is_none() {
        return;
    }
    // SAFETY: this process runs only this test; its result travels in the
    // exit status, and std ignores writes to a closed stdout.
    assert_eq!(unsafe { libc::close(0) + libc::close(1) }, 0);
    let cmd = ChildCommand::new("sh").arg("-c").arg("echo ok; cat");
    let (_sandbox, report) = run(&cmd, &quick());
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    assert_eq!(report.stdout.text(), "ok\n");
}

#[test]
fn unbounded_limits_mean_no_deadline() {
    let limits = Limits {
        timeout: Duration::MAX,
        grace: Duration::MAX,
        pipe_close_wait: Duration::MAX,
        ..Limits::default()
    };
    let (_sandbox, report) = run(&ChildCommand::new("true"), &limits);
    assert_eq!(report.termination, Termination::Exited { code: 0 });
}

/// The parent of a sandbox (a copy of this test binary running the helper
/// below) is SIGKILLed mid-run: its child must die with it.
#[test]
fn child_dies_when_the_parent_is_killed() {
    let dir = common::fresh_dir("orphan");
    let pid_file = dir.join("child.pid");
    let mark = common::mark();
    let mut helper = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "orphaned_child_helper", "--test-threads=1"])
        .env("PREFLIGHT_ORPHAN_HELPER_PID_FILE", &pid_file)
        .env(common::MARK_VAR, &mark)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the helper");
    let until = Instant::now() + Duration::from_secs(15);
    while !pid_file.exists() {
        assert!(Instant::now() < until, "the helper's child never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let helper_pid = helper.id() as i32;
    assert!(
        common::marked(&mark).iter().any(|pid| *pid != helper_pid),
        "the child runs"
    );
    helper.kill().expect("SIGKILL the helper");
    helper.wait().expect("reap the helper");
    common::assert_none_marked(&mark);
}

#[test]
fn orphaned_child_helper() {
    let Some(pid_file) = std::env::var_os("PREFLIGHT_ORPHAN_HELPER_PID_FILE") else {
        return;
    };
    let cmd = ChildCommand::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$PID_FILE.tmp" && mv "$PID_FILE.tmp" "$PID_FILE" && exec sleep 3600"#)
        .env("PID_FILE", &pid_file);
    // Past the walls: the test waits for the pid in this folder.
    let folder = Path::new(&pid_file)
        .parent()
        .expect("the pid file's folder");
    let _ = sandbox()
        .writable(folder)
        .run(&cmd, &quick(), &Cancel::new());
}
