//! Hundreds of probes in one `preflight check` or `warmup`: every run,
//! whatever its end, must give back its descriptors and its children. A test
//! binary of its own, so that no other test opens descriptors meanwhile.

mod common;

use kernel_preflight::sandbox::{Cancel, ChildCommand, Limits, Sandbox};
use std::time::Duration;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Children of this process that are still around, zombies included.
fn children() -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            stat.rfind(')')
                .and_then(|at| stat[at + 1..].split_whitespace().nth(1))
                == Some(me.as_str())
        })
        .collect()
}

#[test]
fn runs_leak_no_descriptors_and_no_children() {
    // With the reaper (as in `preflight`) and without (a library user).
    for reaper in [Some(common::preflight_bin()), None] {
        runs_of_every_kind_give_everything_back(
            Sandbox::new().expect("sandbox").with_reaper(reaper),
        );
    }
}

fn runs_of_every_kind_give_everything_back(sandbox: Sandbox) {
    let quick = Limits {
        timeout: Duration::from_millis(300),
        grace: Duration::from_millis(100),
        pipe_close_wait: Duration::from_millis(100),
        ..Limits::default()
    };
    let cancelled = Cancel::new();
    cancelled.cancel();
    let sh = |script: &str| ChildCommand::new("sh").arg("-c").arg(script);
    // Warm up whatever the first run allocates once (the locale, …).
    sandbox
        .run(&sh("true"), &quick, &Cancel::new())
        .expect("run");
    let before = open_fds();
    for _ in 0..4 {
        for cmd in [
            sh("echo out; echo err >&2"),
            sh("exit 7"),
            sh("kill -SEGV $$"),
            sh("exec sleep 60"),
            sh("trap '' TERM; while :; do sleep 1; done"),
            sh("sleep 60 & echo started"),
        ]
        .into_iter()
        // A daemon escapes a sandbox without reaper: only the reaper's runs get one.
        .chain(
            sandbox
                .reaper()
                .map(|_| sh("(exec >&- 2>&-; setsid sleep 60 &); echo daemon")),
        ) {
            sandbox.run(&cmd, &quick, &Cancel::new()).expect("run");
        }
        let missing = ChildCommand::new("/nonexistent/program");
        assert!(sandbox.run(&missing, &quick, &Cancel::new()).is_err());
        sandbox.run(&sh("true"), &quick, &cancelled).expect("run");
    }
    assert_eq!(
        open_fds(),
        before,
        "descriptors leaked (reaper: {:?})",
        sandbox.reaper()
    );
    assert_eq!(
        children(),
        Vec::<String>::new(),
        "children left unreaped (reaper: {:?})",
        sandbox.reaper()
    );
}
