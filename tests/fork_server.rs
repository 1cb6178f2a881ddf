//! The fork server as an attack surface (src/probe/fork.rs,
//! probes/python/fork_server.py): what a hostile kernel, or a local user,
//! can do to it, and how a forked probe differs from a fresh one where a
//! kernel can look. Each test is one attack or one such difference; the
//! probes are forked from a server holding a stand-in torch.

mod common;
mod probe_fixtures;

use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::probe::{PRELOAD_ENV, PythonExecutor, SmokeSource};
use kernel_preflight::protocol::Made;
use probe_fixtures::{
    Repo, Site, fakes, job, probe_as_it_goes, probe_job_fresh, python, quick_limits,
};
use std::time::{Duration, Instant};

fn forking(site: &Site) -> PythonExecutor {
    kernel_preflight::sandbox::set_default_reaper(env!("CARGO_BIN_EXE_preflight").into());
    site.executor(&python()).forked_always()
}

fn torch_site() -> Site {
    let site = Site::new();
    fakes::torch(&site, None, 0);
    site
}

/// The processes whose parent is `pid` (any of its threads).
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .flat_map(|task| {
            std::fs::read_to_string(task.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// This test process's fork servers: its children running the server.
fn servers() -> Vec<u32> {
    children(std::process::id())
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("preflight_fork_server.py"))
        })
        .collect()
}

/// Probes `init` forked (and asserts it was), returning the outcome.
fn forked_outcome(executor: &PythonExecutor, init: &str) -> kernel_preflight::classify::Outcome {
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", init);
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_as_it_goes(executor, &job);
    assert_eq!(run.evidence.made, Made::Forked, "{outcome:?}");
    outcome
}

/// No name to find: no abstract socket of preflight's in `/proc/net/unix`
/// (from the host or from a probe), nothing in the server's command line
/// or in the environment a forked probe inherits that would reach it, and
/// a probe's stdin is `/dev/null`, as a fresh probe's is.
#[test]
fn the_server_has_no_name_and_a_probe_holds_no_way_to_it() {
    let site = torch_site();
    let executor = forking(&site);
    let outcome = forked_outcome(
        &executor,
        "import os, stat\n\
         names = [l.split()[-1] for l in open('/proc/net/unix') if 'preflight' in l]\n\
         environ = open('/proc/self/environ', 'rb').read().decode('latin-1')\n\
         leaks = [k for k in ('PREFLIGHT_FORK_SERVER', 'PREFLIGHT_FORK_NONCE') if k in environ]\n\
         null = os.path.samestat(os.fstat(0), os.stat('/dev/null'))\n\
         sockets = [fd for fd in map(int, os.listdir('/proc/self/fd'))\n\
                    if fd != 3 and os.path.exists('/proc/self/fd/%d' % fd)\n\
                    and stat.S_ISSOCK(os.stat('/proc/self/fd/%d' % fd).st_mode)]\n\
         if names or leaks or not null or sockets:\n\
         \x20   raise RuntimeError('reachable: %r %r stdin null %r sockets %r' % (names, leaks, null, sockets))\n",
    );
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    assert!(!unix.contains("preflight"), "{unix}");
    for server in servers() {
        let cmdline = std::fs::read(format!("/proc/{server}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .collect();
        assert_eq!(args.len(), 3, "python -B SCRIPT, nothing else: {args:?}");
    }
}

/// Nothing the server forks outlives the probe it was forked for: its
/// helpers end once the probe is handed over, and the server itself, and
/// anything it still had, ends with the executor.
#[test]
fn nothing_of_the_server_outlives_the_run() {
    let site = torch_site();
    let mut executor = forking(&site);
    // Tests run side by side: this one's server is the one with its mark.
    let mark = format!("PREFLIGHT_TEST_MARK=outlives-{}", std::process::id());
    executor.env.push((
        "PREFLIGHT_TEST_MARK".into(),
        mark["PREFLIGHT_TEST_MARK=".len()..].into(),
    ));
    for _ in 0..3 {
        let outcome = forked_outcome(&executor, "X = 1\n");
        assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    }
    let marked = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == mark.as_bytes()))
    };
    let mine: Vec<u32> = servers().into_iter().filter(marked).collect();
    assert_eq!(mine.len(), 1, "one server: {mine:?}");
    let server = mine[0];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !children(server).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(children(server), Vec::<u32>::new(), "no helper is left");
    drop(executor);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{server}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Reaped by the executor's drop: no zombie, no process.
    assert!(!std::path::Path::new(&format!("/proc/{server}")).exists());
}

/// A forked probe ends as a fresh one does, wherever a kernel can look:
/// its parent is its namespace's pid 1 (the reaper), SIGKILL is the same
/// end (not an error of the client), its signal dispositions are a fresh
/// interpreter's (all but Python's own default: 32 and 33 too), its
/// capability sets and `no_new_privs` a fresh probe's (none, set), its own
/// `KeyboardInterrupt` is its import error, and a process it leaves behind
/// is reported as its leak.
#[test]
fn a_forked_probe_ends_as_a_fresh_one_does() {
    let site = torch_site();
    let executor = forking(&site);
    let repo = Repo::new();
    let cases = [
        (
            "ppid",
            "import os\nassert os.getppid() == 1, 'parent %d' % os.getppid()\n",
        ),
        (
            "sigkill",
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        ),
        ("exit", "import os\nos._exit(7)\n"),
        ("interrupt", "raise KeyboardInterrupt\n"),
        (
            "signals",
            "import signal\n\
             raise ImportError(repr([signal.getsignal(s) for s in (signal.SIGINT, signal.SIGPIPE,\n\
             \x20   signal.SIGXFSZ, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP)]))\n",
        ),
        (
            "status",
            "raise ImportError(repr([l for l in open('/proc/self/status')\n\
             \x20   if l.split(':')[0] in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb',\n\
             \x20   'NoNewPrivs', 'SigIgn', 'SigBlk')]))\n",
        ),
        (
            "leak",
            "import os, time\n\
             if os.fork() == 0:\n\
             \x20   os.setsid()\n\
             \x20   time.sleep(60)\n\
             \x20   os._exit(0)\n",
        ),
    ];
    for (what, init) in cases {
        let dir = Repo::new();
        let variant = dir.variant("torch-universal", init);
        let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
        let (forked_run, forked) = probe_as_it_goes(&executor, &job);
        let (fresh_run, fresh) = probe_job_fresh(&site.executor(&python()), &job);
        assert_eq!(forked_run.evidence.made, Made::Forked, "{what}");
        let same = |mut o: kernel_preflight::classify::Outcome| {
            o.made = Made::Fresh;
            o.stderr_tail.clear();
            o
        };
        assert_eq!(same(forked.clone()), same(fresh), "{what}");
        if what == "leak" {
            assert_eq!(
                forked_run.evidence.leaked.is_some(),
                fresh_run.evidence.leaked.is_some(),
                "{what}: {:?} / {:?}",
                forked_run.evidence.leaked,
                fresh_run.evidence.leaked
            );
            assert!(forked_run.evidence.leaked.is_some(), "{what}: reported");
        }
        if what == "sigkill" {
            assert_eq!(forked.kind, OutcomeKind::Crashed, "{forked:?}");
            assert_eq!(forked.signal.as_deref(), Some("SIGKILL"));
        }
    }
    drop(repo);
    assert_eq!(executor.fork_fallback(), None);
}

/// A file a probe leaves in its folder switches nothing: forking stays on
/// for the probes after it.
#[test]
fn a_probe_cannot_switch_forking_off() {
    let site = torch_site();
    let executor = forking(&site);
    for init in [
        "open('preflight_fork_refused', 'w').write('\\x1b[2Jforged refusal')\n",
        "X = 1\n",
    ] {
        let outcome = forked_outcome(&executor, init);
        assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    }
    assert_eq!(executor.fork_fallback(), None);
}

/// The server's start (an import of torch and `kernels`, seconds) counts
/// against the probe's timeout: a server that is not ready within it is
/// given up (said, with the time), and the probe runs fresh.
#[test]
fn a_server_slower_to_start_than_the_timeout_is_given_up() {
    let site = torch_site();
    site.file("preflight_slow.py", "import time\ntime.sleep(30)\n");
    let mut executor = forking(&site);
    executor
        .env
        .push((PRELOAD_ENV.into(), "preflight_slow".into()));
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "X = 1\n");
    let mut limits = quick_limits();
    limits.timeout = Duration::from_secs(2);
    let job = job(&variant, SmokeSource::LoadOnly, limits);
    let (run, outcome) = probe_as_it_goes(&executor, &job);
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Fresh);
    let why = executor.fork_fallback().expect("given up");
    assert!(why.contains("within 2.0 s"), "{why}");
}

/// In a pids-limited cgroup (a container, systemd's `TasksMax`), a run
/// whose probes are forked and whose kernel forks all it can leaves
/// nothing behind: once `check` returns, the cgroup is empty (no server,
/// no helper, no probe), and the run said what the kernel did. Needs root
/// and a writable cgroup v1 `pids` hierarchy; says so and does nothing
/// where the machine has neither.
#[test]
fn in_a_pids_limited_cgroup_nothing_of_a_run_stays() {
    let hierarchy = std::path::Path::new("/sys/fs/cgroup/pids");
    let group = hierarchy.join(format!("preflight-test-{}", std::process::id()));
    if !nix::unistd::geteuid().is_root() || std::fs::create_dir(&group).is_err() {
        eprintln!(
            "not applicable here: needs root and a writable {}",
            hierarchy.display()
        );
        return;
    }
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _remove = Remove(group.clone());
    std::fs::write(group.join("pids.max"), "150").expect("pids.max");
    let repo = Repo::new();
    repo.variant(
        "torch-universal",
        "import os, time\n\
         born = 0\n\
         for _ in range(400):\n\
         \x20   try:\n\
         \x20       if os.fork() == 0:\n\
         \x20           os.setsid()\n\
         \x20           time.sleep(60)\n\
         \x20           os._exit(0)\n\
         \x20       born += 1\n\
         \x20   except OSError:\n\
         \x20       break\n\
         raise ImportError('forked %d before the limit' % born)\n",
    );
    let script = format!("echo $$ > {}/cgroup.procs && exec \"$@\"", group.display());
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args(["check", "--timeout", "30", "--json", "--python"])
        .arg(python())
        .arg(repo.root())
        .env("PREFLIGHT_FORK", "1")
        .env("PREFLIGHT_CACHE", common::fresh_dir("pids-cache"))
        .output()
        .expect("check runs");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", common::stderr(&output)));
    let outcome = &json["results"][0]["outcome"];
    assert_eq!(outcome["made"], "forked", "{json:#}");
    assert_eq!(outcome["kind"], "import_error", "{json:#}");
    let procs = || std::fs::read_to_string(group.join("cgroup.procs")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !procs().trim().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        procs().trim(),
        "",
        "processes of the run left in the cgroup"
    );
}

/// A fork the machine refuses the server (its cgroup holds all the
/// processes it may) is a refusal the server says, not its end (which
/// left the kernel `probe_error: did not start: BrokenPipeError`): the
/// probe runs fresh and passes, and the reason is kept. Needs root and a
/// writable cgroup v1 `pids` hierarchy; says so and does nothing where
/// the machine has neither.
#[test]
fn a_fork_the_server_is_refused_runs_the_probe_fresh() {
    let hierarchy = std::path::Path::new("/sys/fs/cgroup/pids");
    let group = hierarchy.join(format!("preflight-refused-{}", std::process::id()));
    if !nix::unistd::geteuid().is_root() || std::fs::create_dir(&group).is_err() {
        eprintln!(
            "not applicable here: needs root and a writable {}",
            hierarchy.display()
        );
        return;
    }
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _remove = Remove(group.clone());
    let site = torch_site();
    let executor = forking(&site);
    assert_eq!(executor.start_fork_server(), None);
    // Ours among the servers of the tests running beside it: the one
    // whose environment names this test's site.
    let site_dir = site.dir.path().to_string_lossy().into_owned();
    let ours: Vec<u32> = servers()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| String::from_utf8_lossy(&e).contains(&site_dir))
        })
        .collect();
    let [server] = ours[..] else {
        panic!("one server of this test: {ours:?} of {:?}", servers());
    };
    // The server alone, with no room for another process.
    std::fs::write(group.join("pids.max"), "1").expect("pids.max");
    std::fs::write(group.join("cgroup.procs"), server.to_string()).expect("move the server");
    let repo = Repo::new();
    let variant = repo.variant("torch-universal", "X = 1\n");
    let job = job(&variant, SmokeSource::LoadOnly, quick_limits());
    let (run, outcome) = probe_as_it_goes(&executor, &job);
    let events = std::fs::read_to_string(group.join("pids.events")).unwrap_or_default();
    // Back where it came from before the cgroup goes.
    let _ = std::fs::write(hierarchy.join("cgroup.procs"), server.to_string());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(run.evidence.made, Made::Fresh);
    let why = executor.fork_fallback().expect("the refusal, kept");
    assert!(why.contains("the fork server's fork failed"), "{why}");
    assert!(
        events.starts_with("max ") && events.trim() != "max 0",
        "{events}"
    );
}
