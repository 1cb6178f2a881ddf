//! What a probe may not keep, and what it may not take (issue 39):
//!
//! - no capability and `no_new_privs`, as a sandboxed child sees its own
//!   `/proc/self/status`, fresh and forked (`scripts/test-forked.sh`),
//!   root and `nobody` (`scripts/test-unprivileged.sh`, and as root once
//!   more through `setpriv`);
//! - the signal dispositions of a fresh interpreter, forked or not;
//! - a fork bomb and a memory hog probed beside a good kernel (`--jobs
//!   2`) inside a cgroup this test bounds (150 processes, 768 MiB): each
//!   gets its own outcome, named, the good kernel passes, and the exit
//!   status is the verdicts' (1), as root and as `nobody`.

mod common;
mod hostile;
mod probe_fixtures;

use hostile::{bounded, is_root, kernel, nobody_python, open_up, outcomes};
use kernel_preflight::sandbox::{Cancel, ChildCommand, Sandbox, Termination};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The fields of a `/proc/PID/status` text.
fn status(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// Every capability set empty, and `no_new_privs` set. The bounding set
/// too where the child could drop it (`bounding`: it had a capability to,
/// as root or in a user namespace); elsewhere `no_new_privs` keeps any
/// `execve` from granting from it.
fn assert_powerless(fields: &BTreeMap<String, String>, who: &str, bounding: bool) {
    let sets: &[&str] = if bounding {
        &["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]
    } else {
        &["CapInh", "CapPrm", "CapEff", "CapAmb"]
    };
    for &set in sets {
        assert_eq!(
            fields.get(set).map(String::as_str),
            Some("0000000000000000"),
            "{who}: {set} in {fields:#?}"
        );
    }
    assert_eq!(
        fields.get("NoNewPrivs").map(String::as_str),
        Some("1"),
        "{who}"
    );
}

#[test]
fn a_sandboxed_child_holds_no_capability_and_ignores_no_signal() {
    let reaper = Some(common::preflight_bin());
    for (held, reaper) in [("by its reaper", reaper), ("alone", None)] {
        let reaper_held = reaper.is_some();
        let sandbox = Sandbox::new().expect("sandbox").with_reaper(reaper);
        let cmd = ChildCommand::new("cat").arg("/proc/self/status");
        let run = sandbox
            .run(&cmd, &probe_fixtures::quick_limits(), &Cancel::new())
            .expect("run");
        assert_eq!(run.termination, Termination::Exited { code: 0 }, "{held}");
        let fields = status(&run.stdout.text());
        assert_powerless(&fields, held, reaper_held || is_root());
        // Nothing ignored, nothing blocked: not SIGPIPE (Rust ignores it
        // here), nor 32 and 33 (`posix_spawn` ignores them in the test
        // harness's children).
        for set in ["SigIgn", "SigBlk"] {
            assert_eq!(
                fields.get(set).map(String::as_str),
                Some("0000000000000000"),
                "{held}: {set}"
            );
        }
    }
}

/// `preflight check --jobs 2 --json` of `targets`, as `setpriv` makes it
/// (`nobody`) when `as_nobody`, joining `cgroups` (their `cgroup.procs`)
/// first when given; its probes may write into `writable` (past the
/// walls: `PREFLIGHT_PROBE_WRITABLE`).
fn check(
    targets: &[&Path],
    as_nobody: bool,
    cgroups: &[PathBuf],
    writable: Option<&Path>,
) -> (Output, Value) {
    // From wherever the checkout is (root's 0700 home included).
    let copy = as_nobody.then(common::nobody::ForNobody::new);
    let python = match &copy {
        Some(_) => nobody_python().expect("a Python interpreter nobody may run"),
        None => probe_fixtures::python(),
    };
    let mut cmd = match &copy {
        Some(copy) => {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(copy.preflight());
            cmd
        }
        None => Command::new(common::preflight_bin()),
    };
    let base = common::preflight_cmd();
    cmd.envs(base.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let cache = common::fresh_dir("bounds-cache");
    open_up(&cache);
    if let Some(folder) = writable {
        cmd.env("PREFLIGHT_PROBE_WRITABLE", folder);
    }
    cmd.env("PREFLIGHT_CACHE", &cache)
        .env("HOME", &cache)
        .arg("check")
        .arg("--python")
        .arg(&python)
        .args(["--timeout", "60", "--jobs", "2", "--json"])
        .args(targets);
    let procs: Vec<std::fs::File> = cgroups
        .iter()
        .map(|dir| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .expect("cgroup.procs")
        })
        .collect();
    let fds: Vec<i32> = procs.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
    // SAFETY: one `write` per descriptor, before the exec.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, c"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let out = bounded(cmd, Duration::from_secs(240));
    drop((procs, copy));
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check --json printed no JSON ({e}): {}\n{}",
            common::stdout(&out),
            common::stderr(&out)
        )
    });
    (out, json)
}

fn made() -> &'static str {
    if probe_fixtures::forked() {
        "forked"
    } else {
        "fresh"
    }
}

/// A probed kernel reads its own status: no capability, `no_new_privs`,
/// and Python's own ignored signals only (SIGPIPE, SIGXFSZ), whichever
/// way its probe was made and as whom.
#[test]
fn a_probed_kernel_holds_no_capability_fresh_or_forked_root_or_not() {
    let report = common::fresh_dir("bounds-status");
    open_up(&report);
    let init = format!(
        "open({:?}, 'w').write(open('/proc/self/status').read())\n",
        report.join("status").display().to_string()
    );
    let repo = kernel(&init);
    let users: &[bool] = if is_root() { &[false, true] } else { &[false] };
    for &as_nobody in users {
        let _ = std::fs::remove_file(report.join("status"));
        let (out, json) = check(&[&repo.root()], as_nobody, &[], Some(&report));
        let who = if as_nobody { "nobody" } else { "this user" };
        assert!(out.status.success(), "{who}: {json:#}");
        let outcome = outcomes(&json)[0];
        assert_eq!(outcome["made"].as_str().unwrap_or("fresh"), made(), "{who}");
        let text = std::fs::read_to_string(report.join("status")).expect("the kernel's status");
        let fields = status(&text);
        assert_powerless(&fields, who, true);
        let python_ignores = (1u64 << (libc::SIGPIPE - 1)) | (1u64 << (libc::SIGXFSZ - 1));
        assert_eq!(
            fields.get("SigIgn").map(String::as_str),
            Some(format!("{python_ignores:016x}").as_str()),
            "{who}"
        );
    }
}

const FORK_BOMB: &str = "import os, time\n\
while True:\n    \
    if os.fork() == 0:\n        \
        time.sleep(120)\n        \
        os._exit(0)\n";

const MEMORY_HOG: &str = "held = []\n\
while True:\n    \
    held.append(b'x' * (32 << 20))\n";

/// A cgroup this test makes below its own (in the `pids` and `memory`
/// hierarchies, one folder under cgroup v2), bounded, removed when dropped.
struct Bounded {
    dirs: Vec<PathBuf>,
}

impl Bounded {
    fn make(pids: u64, memory: u64) -> Result<Bounded, String> {
        use kernel_preflight::sandbox::own_cgroup;
        let name = format!("preflight-bounds-test-{}", std::process::id());
        let pids_own = own_cgroup("pids").ok_or("no pids hierarchy")?;
        let memory_own = own_cgroup("memory").ok_or("no memory hierarchy")?;
        let unified = pids_own == memory_own;
        let mut made = Bounded { dirs: Vec::new() };
        for own in [&pids_own, &memory_own]
            .into_iter()
            .take(if unified { 1 } else { 2 })
        {
            let dir = own.join(&name);
            std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            made.dirs.push(dir);
        }
        let write = |file: PathBuf, value: u64| {
            std::fs::write(&file, value.to_string()).map_err(|e| format!("{}: {e}", file.display()))
        };
        write(made.dirs[0].join("pids.max"), pids)?;
        let memory_dir = made.dirs.last().expect("a folder");
        if unified {
            write(memory_dir.join("memory.max"), memory)?;
        } else {
            write(memory_dir.join("memory.limit_in_bytes"), memory)?;
        }
        for dir in &made.dirs {
            let mode = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(dir, mode).map_err(|e| e.to_string())?;
        }
        Ok(made)
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        for dir in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// In a cgroup of 150 processes and 768 MiB shared with preflight, a
/// kernel that forks until refused and one that fills memory, probed two
/// at a time beside a good kernel: each gets its own outcome, named; the
/// good kernel passes; the run exits 1 (a kernel failed), with its JSON.
/// As root (a cgroup of its own per probe) and as `nobody` (who cannot
/// make one: its probe's user namespace bounds its processes, and the
/// machine's out-of-memory killer finds the hog).
#[test]
fn a_fork_bomb_and_a_memory_hog_end_alone_beside_a_good_kernel() {
    if !is_root() {
        eprintln!("needs root to make the bounded cgroup it runs preflight in; skipped");
        return;
    }
    let bounded = match Bounded::make(150, 768 << 20) {
        Ok(bounded) => bounded,
        Err(why) => panic!("cannot make a bounded cgroup here: {why}"),
    };
    let bomb = kernel(FORK_BOMB);
    let hog = kernel(MEMORY_HOG);
    let good = kernel("X = 1\n");
    for as_nobody in [false, true] {
        let who = if as_nobody { "nobody" } else { "root" };
        let (out, json) = check(
            &[&bomb.root(), &hog.root(), &good.root()],
            as_nobody,
            &bounded.dirs,
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{who}: {json:#}\n{}",
            common::stderr(&out)
        );
        let rows = outcomes(&json);
        let (bomb, hog, good) = (rows[0], rows[1], rows[2]);
        assert_eq!(good["kind"], "pass", "{who}: {good:#}");
        assert_eq!(good["made"].as_str().unwrap_or("fresh"), made(), "{who}");
        assert_eq!(bomb["kind"], "import_error", "{who}: {bomb:#}");
        assert!(
            bomb["message"]
                .as_str()
                .unwrap_or("")
                .contains("BlockingIOError"),
            "{who}: {bomb:#}"
        );
        if as_nobody {
            // No cgroup of its own: the machine's killer, named in the hint.
            assert_eq!(hog["kind"], "crashed", "{who}: {hog:#}");
            assert!(
                hog["hint"]
                    .as_str()
                    .unwrap_or("")
                    .contains("out-of-memory killer"),
                "{who}: {hog:#}"
            );
        } else {
            assert!(
                bomb["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("processes and threads"),
                "{who}: {bomb:#}"
            );
            assert_eq!(hog["kind"], "out_of_memory", "{who}: {hog:#}");
            assert!(
                hog["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("memory bound"),
                "{who}: {hog:#}"
            );
        }
    }
}

/// As root: the tests above once more as `nobody` (the user-namespace
/// path), but the one that needs root to bound its cgroup.
#[test]
fn the_bounds_hold_for_an_unprivileged_user_too() {
    if !is_root() {
        eprintln!("already unprivileged: the tests above ran as this user");
        return;
    }
    hostile::as_nobody(
        &[
            "the_bounds_hold_for_an_unprivileged_user_too",
            "a_fork_bomb_and_a_memory_hog_end_alone_beside_a_good_kernel",
        ],
        2,
    );
}
