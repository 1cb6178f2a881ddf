//! A real SIGINT to the parent cancels a running sandbox: everything under
//! its reaper is killed and the run returns `Cancelled`. A test binary of
//! its own: it installs process-wide signal handlers and signals itself.

mod common;

use kernel_preflight::sandbox::{
    ChildCommand, Limits, Sandbox, Termination, install_interrupt_handler,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

#[test]
fn sigint_cancels_running_sandboxes() {
    let cancel = install_interrupt_handler();
    assert!(!cancel.is_cancelled());
    let sandbox = Sandbox::new()
        .expect("sandbox")
        .with_reaper(Some(common::preflight_bin()));
    // The child announces itself on a file, so the signal is sent only once
    // it is really running; its helper has left the group by then.
    let ready = sandbox.dir().join("ready");
    let helper_pid = sandbox.dir().join("helper.pid");
    // (`setsid` is `sleep` once it has left: wait for that.)
    let script = format!(
        "setsid sleep 3600 & \
         until head -c 5 /proc/$!/cmdline | grep -q '^sleep'; do sleep 0.01; done; \
         echo $! > {}; touch {}; exec sleep 3600",
        helper_pid.display(),
        ready.display()
    );
    let mark = common::mark();
    let cmd = ChildCommand::new("sh")
        .arg("-c")
        .arg(script)
        .env(common::MARK_VAR, &mark);
    let started = Instant::now();
    // The child writes into its own scratch: seen from here while it runs.
    let view = sandbox.view();
    let report = std::thread::scope(|s| {
        let run = s.spawn(|| sandbox.run(&cmd, &Limits::default(), &cancel));
        while !view.path("ready").exists() {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "child never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        kill(Pid::this(), Signal::SIGINT).expect("signal self");
        run.join().expect("run thread")
    })
    .expect("sandbox run");
    assert_eq!(report.termination, Termination::Cancelled);
    assert_eq!(cancel.signal(), Some(libc::SIGINT));
    assert!(started.elapsed() < Duration::from_secs(15));
    let pgid = report.pid.expect("child started");
    // The leader is reaped, so the group is empty once SIGKILL lands.
    let until = Instant::now() + Duration::from_secs(5);
    while kill(Pid::from_raw(-pgid), None).is_ok() {
        assert!(Instant::now() < until, "group {pgid} survived");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The helper in a session of its own went with it, and is reported
    // (by the number it had where it ran).
    common::assert_none_marked(&mark);
    let helper: i32 = std::fs::read_to_string(&helper_pid)
        .expect("helper pid")
        .trim()
        .parse()
        .expect("a pid");
    assert_eq!(
        report
            .leaked
            .iter()
            .map(|l| (l.pid, l.killed))
            .collect::<Vec<_>>(),
        vec![(helper, true)]
    );
    // A second install returns the same flag.
    assert!(install_interrupt_handler().is_cancelled());
}
