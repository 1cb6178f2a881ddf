//! Hostile kernels against `preflight` itself: one fixture per class of
//! what a kernel under probe must not be able to do (tests/fixtures/hostile/),
//! each run by the real binary on a hub-layout kernel, in real namespaces.
//!
//! - seeing outside the sandbox: preflight's processes, their environment
//!   and memory, their standard output, the hub token file;
//! - forging other variants' evidence: the outcome cache, another probe's
//!   result channel;
//! - stopping or ending the run: its reaper or preflight stopped, killed
//!   or interrupted;
//! - odd but legal kernels: an interpreter that does not exit after the
//!   probe is done, an exit with status 0 during the import, a file
//!   rewritten in place with its stat put back;
//! - bad input: a FIFO where a regular file is expected, a cache root that
//!   is a file;
//! - gigabytes written into the sandbox.
//!
//! As root, the same tests run once more as `nobody` (the user-namespace
//! path), and the classes that still apply run where Linux refuses every
//! namespace (the fallback, said out loud).

mod common;
mod hostile;
mod probe_fixtures;

use hostile::{
    bounded, check, fixture, found, is_root, kernel, namespaced, nobody_python, open_up, outcomes,
    report_dir,
};

use kernel_preflight::sandbox::{Cancel, ChildCommand, Isolation, Limits, Sandbox, Termination};
use serde_json::Value;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

#[test]
fn a_probe_sees_nothing_of_preflight_nor_the_hub_token() {
    let report = report_dir();
    let repo = kernel(&fixture("look_outside.py"));
    let hf_home = common::fresh_dir("hf-home");
    std::fs::write(hf_home.join("token"), "hf_hostile_token_file").expect("token");
    open_up(&hf_home);
    let mark = common::mark();
    let (out, json) = check(
        &[&repo.root()],
        &[
            ("HOSTILE_REPORT", report.as_os_str()),
            ("HF_TOKEN", OsStr::new("hf_hostile_token_variable")),
            ("HF_HOME", hf_home.as_os_str()),
            (common::MARK_VAR, OsStr::new(&mark)),
        ],
    );
    // The JSON parsed: nothing was written into preflight's stdout.
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert_eq!(outcomes(&json)[0]["kind"], "pass", "{json:#}");
    assert!(namespaced(&json), "{json:#}");
    let seen = found(&report, "look_outside.json");
    // Only its reaper, pid 1 of its pid namespace.
    assert_eq!(seen["visible"], serde_json::json!([1]), "{seen:#}");
    for what in ["mem", "wrote", "preflight"] {
        assert_eq!(seen[what], serde_json::json!([]), "{what}: {seen:#}");
    }
    assert_eq!(seen["token"], "", "the token file reads as empty: {seen:#}");
    assert_eq!(seen["env_token"], Value::Null);
    common::assert_none_marked(&mark);
}

#[test]
fn a_probe_cannot_forge_the_cache_or_another_probes_result() {
    let report = report_dir();
    let cache = common::fresh_dir("shared-cache");
    let shared = [
        ("HOSTILE_REPORT", report.as_os_str()),
        ("PREFLIGHT_CACHE", cache.as_os_str()),
    ];
    let broken = kernel("raise ImportError('this kernel is broken')\n");
    let (_, json) = check(&[&broken.root()], &shared);
    assert_eq!(outcomes(&json)[0]["kind"], "import_error", "{json:#}");
    let entries = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut all = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    all.push((e.path(), std::fs::read(e.path()).unwrap_or_default()));
                }
            }
        }
        all.sort();
        all
    };
    let before = entries(&cache);

    // The forger runs beside a slow broken probe whose result channel it
    // tries to complete with `done`.
    let slow = kernel("import time\ntime.sleep(2)\nraise ImportError('slow and broken')\n");
    let forger = kernel(&fixture("forge_evidence.py"));
    let (out, json) = check(&[&slow.root(), &forger.root()], &shared);
    assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
    let [slow_outcome, forger_outcome] = outcomes(&json)[..] else {
        panic!("two results: {json:#}");
    };
    assert_eq!(slow_outcome["kind"], "import_error", "{json:#}");
    assert_eq!(forger_outcome["kind"], "pass", "{json:#}");
    // The cache was out of its sight. (What it appended to other probes'
    // files, if it found any, went into its own private /tmp: the slow
    // probe's verdict above stands.)
    let managed = found(&report, "forge_evidence.json");
    for what in ["rewrote", "planted"] {
        assert_eq!(managed[what], serde_json::json!([]), "{what}: {managed:#}");
    }
    // Every entry the cache had is as it was.
    let after = entries(&cache);
    for entry in &before {
        assert!(after.contains(entry), "changed: {}", entry.0.display());
    }
    let (_, json) = check(&[&broken.root()], &shared);
    assert_eq!(outcomes(&json)[0]["kind"], "import_error", "{json:#}");
    assert_eq!(json["results"][0]["cached"], true, "{json:#}");
}

#[test]
fn a_probe_cannot_stop_kill_or_interrupt_the_run() {
    let good = kernel("X = 1\n");
    for signals in ["STOP", "KILL", "INT,TERM,HUP"] {
        let hostile = kernel(&fixture("stop_the_run.py"));
        let started = Instant::now();
        let (out, json) = check(
            &[&hostile.root(), &good.root()],
            &[("HOSTILE_SIGNALS", OsStr::new(signals))],
        );
        assert!(namespaced(&json), "{json:#}");
        // Its reaper is pid 1 of its namespace, and preflight is out of
        // sight: nothing it sent arrived.
        assert_eq!(
            out.status.code(),
            Some(0),
            "{signals}: {}",
            common::stderr(&out)
        );
        for outcome in outcomes(&json) {
            assert_eq!(outcome["kind"], "pass", "{signals}: {json:#}");
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{signals}");
    }
}

#[test]
fn a_probe_that_does_not_exit_after_done_passes_with_a_warning_and_is_cached() {
    let cache = common::fresh_dir("linger-cache");
    for name in ["linger_thread.py", "linger_atexit.py"] {
        let repo = kernel(&fixture(name));
        let started = Instant::now();
        let (out, json) = check(&[&repo.root()], &[("PREFLIGHT_CACHE", cache.as_os_str())]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            common::stderr(&out)
        );
        // The linger (3 s), not the timeout (30 s).
        assert!(started.elapsed() < Duration::from_secs(20), "{name}");
        let outcome = outcomes(&json)[0];
        assert_eq!(outcome["kind"], "pass", "{name}: {json:#}");
        let warning = outcome["warning"].as_str().unwrap_or_default();
        assert!(
            warning.contains("will not exit by itself"),
            "{name}: {json:#}"
        );
        let started = Instant::now();
        let (_, json) = check(&[&repo.root()], &[("PREFLIGHT_CACHE", cache.as_os_str())]);
        assert_eq!(json["results"][0]["cached"], true, "{name}: {json:#}");
        assert_eq!(outcomes(&json)[0]["warning"], outcome["warning"]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name}: cached"
        );
    }
}

#[test]
fn an_exit_with_status_0_during_the_import_is_the_kernels_fault() {
    for hard in ["", "1"] {
        let repo = kernel(&fixture("exit_zero.py"));
        let (out, json) = check(&[&repo.root()], &[("HOSTILE_HARD_EXIT", OsStr::new(hard))]);
        assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
        let outcome = outcomes(&json)[0];
        assert_eq!(outcome["kind"], "exited", "{json:#}");
        assert_eq!(outcome["exit_code"], 0, "{json:#}");
        assert_eq!(outcome["phase"], "import", "{json:#}");
    }
}

/// A file rewritten in place, its size, inode and modification time put
/// back: the cached pass no longer stands.
#[test]
fn a_file_rewritten_with_its_stat_put_back_is_probed_again() {
    use std::os::unix::fs::MetadataExt;
    let cache = common::fresh_dir("rewrite-cache");
    let env = [("PREFLIGHT_CACHE", cache.as_os_str())];
    let repo = kernel("X = 1  # a kernel that works, for now\n");
    let broken = "raise ImportError('swapped')  # no...\n";
    assert_eq!(
        broken.len(),
        "X = 1  # a kernel that works, for now\n".len()
    );
    let (_, json) = check(&[&repo.root()], &env);
    assert_eq!(outcomes(&json)[0]["kind"], "pass", "{json:#}");
    let init = repo.root().join("build/torch-universal/__init__.py");
    let meta = std::fs::metadata(&init).expect("stat");
    // The same length, written in place (same inode), its times put back.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&init)
        .and_then(|mut f| f.write_all(broken.as_bytes()))
        .expect("rewrite");
    let times = [
        nix::sys::time::TimeSpec::new(meta.atime(), meta.atime_nsec()),
        nix::sys::time::TimeSpec::new(meta.mtime(), meta.mtime_nsec()),
    ];
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &init,
        &times[0],
        &times[1],
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .expect("utimensat");
    let now = std::fs::metadata(&init).expect("stat");
    assert_eq!(
        (now.len(), now.ino(), now.mtime(), now.mtime_nsec()),
        (meta.len(), meta.ino(), meta.mtime(), meta.mtime_nsec())
    );
    let (_, json) = check(&[&repo.root()], &env);
    assert_eq!(outcomes(&json)[0]["kind"], "import_error", "{json:#}");
}

/// A FIFO where `metadata.json` should be hangs nothing; nor does
/// `inspect` on a FIFO; a cache root that is a file is named.
#[test]
fn bad_input_never_blocks_and_is_named() {
    let repo = probe_fixtures::Repo::new();
    let variant = repo.variant("torch-universal", "X = 1\n");
    let metadata = variant.join("metadata.json");
    std::fs::remove_file(&metadata).expect("rm");
    nix::unistd::mkfifo(&metadata, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let python = probe_fixtures::python();
    let root = repo.root();
    let runs: [&[&OsStr]; 3] = [
        &[
            "check".as_ref(),
            "--python".as_ref(),
            python.as_os_str(),
            root.as_os_str(),
        ],
        &["resolve".as_ref(), root.as_os_str()],
        &[
            "select".as_ref(),
            "--python".as_ref(),
            python.as_os_str(),
            root.as_os_str(),
        ],
    ];
    for args in runs {
        let mut cmd = common::preflight_cmd();
        cmd.args(args);
        // Far below the probe's timeout (60 s): nothing waited on the FIFO.
        let out = bounded(cmd, Duration::from_secs(30));
        // `resolve` judges names only, and warns.
        let expected = if args[0] == "resolve" { 0 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{args:?}: {}",
            common::stderr(&out)
        );
        let said = common::stdout(&out) + &common::stderr(&out);
        assert!(said.contains("not a regular file"), "{args:?}: {said}");
    }
    let mut cmd = common::preflight_cmd();
    cmd.arg("inspect").arg(&metadata);
    let out = bounded(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("not a regular file"),
        "{}",
        common::stderr(&out)
    );

    let file = common::fresh_dir("not-a-cache").join("file");
    std::fs::write(&file, "").expect("file");
    for action in ["ls", "clear", "prune"] {
        let out = common::preflight_cmd()
            .args(["cache", action])
            .env("PREFLIGHT_CACHE", &file)
            .output()
            .expect("run preflight cache");
        assert_eq!(out.status.code(), Some(2), "cache {action}");
        assert!(
            common::stderr(&out).contains("PREFLIGHT_CACHE"),
            "{}",
            common::stderr(&out)
        );
    }
}

/// Gigabytes into its folder, `TMPDIR`, `/tmp` and `/dev/shm`: the
/// scratch bounds them all together, and nothing lands on the host.
#[test]
fn a_probe_cannot_write_gigabytes() {
    let report = report_dir();
    let bound: u64 = 64 << 20;
    let sandbox = Sandbox::new()
        .expect("sandbox")
        .with_reaper(Some(common::preflight_bin()))
        .writable(&report);
    let script = sandbox.dir().join("fill_disk.py");
    std::fs::write(&script, fixture("fill_disk.py")).expect("script");
    let cmd = ChildCommand::new(probe_fixtures::python())
        .arg(&script)
        .env("HOSTILE_REPORT", &report)
        .env("HOSTILE_GIB", "1");
    let limits = Limits {
        scratch: bound,
        ..probe_fixtures::quick_limits()
    };
    let run = sandbox.run(&cmd, &limits, &Cancel::new()).expect("run");
    assert_eq!(
        run.termination,
        Termination::Exited { code: 0 },
        "{}",
        run.stderr.text()
    );
    assert!(matches!(run.isolation, Isolation::Namespaces { .. }));
    let wrote = found(&report, "fill_disk.json");
    let total: u64 = wrote
        .as_array()
        .expect("places")
        .iter()
        .filter_map(|w| w[1].as_u64())
        .sum();
    assert!(
        total <= bound,
        "{total} bytes written past a bound of {bound}: {wrote:#}"
    );
    let copied: u64 = std::fs::read_dir(sandbox.dir())
        .expect("dir")
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    assert!(copied <= bound, "{copied} bytes came back");
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join("fill-4"));
    for leftover in ["/tmp/fill-2".into(), "/dev/shm/fill-3".into()]
        .into_iter()
        .chain(home)
    {
        let leftover: PathBuf = leftover;
        assert!(
            !leftover.exists(),
            "{} reached the host",
            leftover.display()
        );
    }
}

#[test]
fn check_and_doctor_say_which_isolation_was_in_force() {
    let repo = kernel("X = 1\n");
    let (_, json) = check(&[&repo.root()], &[]);
    let user_namespace = !is_root();
    assert_eq!(
        json["isolation"],
        serde_json::json!({"kind": "namespaces", "user_namespace": user_namespace}),
        "{json:#}"
    );
    let mut cmd = common::preflight_cmd();
    cmd.args(["doctor", "--json", "--python"])
        .arg(probe_fixtures::python());
    let out = bounded(cmd, Duration::from_secs(120));
    let doctor: Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    assert_eq!(doctor["isolation"], json["isolation"], "{doctor:#}");
}

/// Where Linux refuses every namespace (as a container profile may), as an
/// ordinary user: probes run as before, one warning names what is missing,
/// `check --json` and `doctor` say so — and still no probe's signal ends
/// the run, and a reaper killed or stopped by its probe is that variant's
/// crash, never the run's (no exit 3, the other verdicts kept).
#[test]
fn without_namespaces_the_run_says_so_and_survives_its_probes() {
    if !is_root() {
        eprintln!("needs root to make a user namespace that refuses namespaces; skipped");
        return;
    }
    let Some(python) = nobody_python() else {
        panic!("no Python interpreter that nobody may run");
    };
    // Folders nobody can reach from wherever the checkout is, root's 0700
    // home included.
    let copy = common::nobody::ForNobody::new();
    let folder = |name: &str| {
        let dir = copy.scratch.join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        open_up(&dir);
        dir
    };
    let (report, home, cache) = (folder("report"), folder("home"), folder("cache"));
    let preflight = copy.preflight();
    let good = kernel("X = 1\n");
    let look = kernel(&fixture("look_outside.py"));
    let hostile: Vec<(probe_fixtures::Repo, &str)> = ["KILL", "STOP", "INT,TERM,HUP"]
        .into_iter()
        // Each its own kernel: the same files would be the same job, and
        // the second would be answered from the first's cached outcome.
        .map(|s| (kernel(&format!("# {s}\n{}", fixture("stop_the_run.py"))), s))
        .collect();
    // One check per signal (a fixture reads its signals from the
    // environment), each with the good kernel beside it.
    for (repo, signals) in &hostile {
        let mut args: Vec<&OsStr> = vec![
            "check".as_ref(),
            "--json".as_ref(),
            "--timeout".as_ref(),
            "30".as_ref(),
            "--python".as_ref(),
            python.as_os_str(),
        ];
        let (a, b, c) = (repo.root(), good.root(), look.root());
        args.extend([a.as_os_str(), b.as_os_str(), c.as_os_str()]);
        let out = refused_namespaces(
            &preflight,
            &args,
            &[
                ("HOSTILE_SIGNALS", OsStr::new(signals)),
                ("HOSTILE_REPORT", report.as_os_str()),
                ("HOME", home.as_os_str()),
                ("PREFLIGHT_CACHE", cache.as_os_str()),
                ("HF_TOKEN", OsStr::new("hf_hostile_token_variable")),
            ],
        );
        assert_ne!(
            out.status.code(),
            Some(3),
            "{signals}: {}",
            common::stderr(&out)
        );
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{signals}: not JSON ({e}): {}", common::stderr(&out)));
        assert_eq!(json["isolation"]["kind"], "session", "{json:#}");
        let stderr = common::stderr(&out);
        assert_eq!(
            stderr.matches("probes run without namespaces").count(),
            1,
            "one warning: {stderr}"
        );
        let rows = outcomes(&json);
        assert_eq!(
            (&rows[1]["kind"], &rows[2]["kind"]),
            (&"pass".into(), &"pass".into()),
            "{json:#}"
        );
        let hostile = rows[0];
        match *signals {
            "KILL" => {
                assert_eq!(hostile["kind"], "crashed", "{json:#}");
                assert!(
                    hostile["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("killed its sandbox"),
                    "{json:#}"
                );
            }
            "STOP" => {
                assert_eq!(hostile["kind"], "crashed", "{json:#}");
                assert!(
                    hostile["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("stopped its sandbox"),
                    "{json:#}"
                );
            }
            _ => assert_eq!(hostile["kind"], "pass", "interrupts ignored: {json:#}"),
        }
        // Non-dumpable: of the same user, yet its environment, memory and
        // output are out of reach.
        let seen = found(&report, "look_outside.json");
        assert!(
            !seen["preflight"].as_array().expect("pids").is_empty(),
            "{seen:#}"
        );
        for what in ["environ", "mem", "wrote"] {
            assert_eq!(seen[what], serde_json::json!([]), "{what}: {seen:#}");
        }
    }
    let out = refused_namespaces(
        &preflight,
        &["doctor".as_ref(), "--python".as_ref(), python.as_os_str()],
        &[("HOME", home.as_os_str())],
    );
    assert!(
        common::stdout(&out).contains("own session only"),
        "{}",
        common::stdout(&out)
    );
}

/// Runs the preflight binary with `args` as `nobody`, in a user namespace
/// in which no further namespace can be made (`refuse_namespaces.py`).
fn refused_namespaces(preflight: &Path, args: &[&OsStr], env: &[(&str, &OsStr)]) -> Output {
    let helper = common::fixtures().join("hostile/refuse_namespaces.py");
    let mut cmd = Command::new(probe_fixtures::python());
    cmd.arg(helper).arg(preflight).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    bounded(cmd, Duration::from_secs(180))
}

/// As root: every test above (but this one and the fallback's, which need
/// root) again as `nobody`, whose probes get a user namespace.
#[test]
fn every_hostile_class_holds_for_an_unprivileged_user_too() {
    if !is_root() {
        eprintln!("already unprivileged: the tests above ran as this user");
        return;
    }
    hostile::as_nobody(
        &[
            "every_hostile_class_holds_for_an_unprivileged_user_too",
            "without_namespaces_the_run_says_so_and_survives_its_probes",
        ],
        12,
    );
}

/// A kernel that raises `KeyboardInterrupt` while it is imported, or sends
/// SIGINT to its own process group: the kernel's fault, an `import_error`
/// cached like any other, never preflight's `probe_error`.
#[test]
fn a_keyboard_interrupt_of_the_kernels_own_is_its_import_error() {
    let cache = common::fresh_dir("interrupt-cache");
    let env = [("PREFLIGHT_CACHE", cache.as_os_str())];
    for init in [
        "raise KeyboardInterrupt('the kernel stops itself')\n",
        "import os, signal, time\nos.killpg(os.getpgrp(), signal.SIGINT)\ntime.sleep(5)\n",
    ] {
        let repo = kernel(init);
        let (out, json) = check(&[&repo.root()], &env);
        assert_eq!(out.status.code(), Some(1), "{}", common::stderr(&out));
        let outcome = outcomes(&json)[0];
        assert_eq!(outcome["kind"], "import_error", "{init}: {json:#}");
        assert_eq!(outcome["phase"], "import", "{json:#}");
        let (_, json) = check(&[&repo.root()], &env);
        assert_eq!(json["results"][0]["cached"], true, "{init}: {json:#}");
    }
}

/// A CUDA variant that writes its own `done` (at the smoke depth, on
/// `cuda`) on its result channel and exits: on a machine whose fingerprint
/// has no NVIDIA driver and no GPU that pass is impossible, and refused
/// as a `probe_error` naming the contradiction, not cached.
#[test]
fn a_self_forged_pass_the_machine_contradicts_is_refused() {
    if Path::new("/proc/driver/nvidia").exists() {
        // On a machine with an NVIDIA driver the pass is not impossible:
        // the GPU check script covers what a device shows.
        eprintln!("not applicable on a machine with an NVIDIA driver");
        return;
    }
    let repo = probe_fixtures::Repo::new();
    repo.variant(
        "torch-cuda",
        "import os\n\
         with open('preflight_result.jsonl', 'a') as channel:\n\
         \x20   channel.write('{\"event\":\"runtime\",\"device\":\"cuda\"}\\n')\n\
         \x20   channel.write('{\"event\":\"done\",\"depth\":\"smoke\"}\\n')\n\
         os._exit(0)\n",
    );
    open_up(repo.dir.path());
    let (out, json) = check(&[&repo.root()], &[]);
    let outcome = outcomes(&json)[0];
    assert_eq!(outcome["kind"], "probe_error", "{json:#}");
    let message = outcome["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no NVIDIA driver and no NVIDIA GPU"),
        "{json:#}"
    );
    assert_ne!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let (_, json) = check(&[&repo.root()], &[]);
    assert_eq!(json["results"][0]["cached"], false, "{json:#}");
}

/// What a probe prints reaches preflight's terminal escaped: a kernel
/// whose error carries escape sequences (clear the screen, a forged line
/// of preflight's own) has them shown, not obeyed, in the table, in
/// warnings and in JSON; a file it leaves in its folder switches nothing.
#[test]
fn a_probes_text_cannot_drive_the_terminal_nor_switch_forking_off() {
    let hostile = kernel(
        "open('preflight_fork_refused', 'w').write('\\x1b[2Jforged\\nwarning: all good')\n\
         raise ImportError('\\x1b[2J\\x1b]0;owned\\x07cleared\\rerror: forged line')\n",
    );
    let good = kernel("X = 1\n");
    let mut cmd = common::preflight_cmd();
    cmd.arg("check")
        .arg("--python")
        .arg(probe_fixtures::python())
        .args(["--timeout", "30", "--jobs", "1"])
        .arg(hostile.root())
        .arg(good.root());
    let out = bounded(cmd, Duration::from_secs(120));
    let printed = format!("{}{}", common::stdout(&out), common::stderr(&out));
    assert!(!printed.contains('\u{1b}'), "{printed:?}");
    assert!(!printed.contains('\u{7}'), "{printed:?}");
    // Colour and cursor sequences are dropped from one-line messages; any
    // other control character is shown escaped.
    assert!(
        printed.contains("owned\\x07cleared"),
        "shown escaped: {printed}"
    );
    assert!(
        !printed.contains("not forked"),
        "nothing switched off: {printed}"
    );
    let (_, json) = check(&[&hostile.root()], &[]);
    let message = outcomes(&json)[0]["message"].as_str().unwrap_or_default();
    assert!(
        !message.contains('\u{1b}') && message.contains("\\x07"),
        "{json:#}"
    );
}
