//! Helpers of the hostile-kernel tests (tests/sandbox_hostile.rs,
//! tests/sandbox_walls_hostile.rs): fixtures from tests/fixtures/hostile/
//! run by the real binary on hub-layout kernels.
#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub fn fixture(name: &str) -> String {
    let path = crate::common::fixtures().join("hostile").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A Python interpreter that `nobody` may run (the project's venv may live
/// where only root reaches), if there is one.
pub fn nobody_python() -> Option<PathBuf> {
    let candidates = [
        crate::probe_fixtures::python(),
        PathBuf::from("/usr/bin/python3"),
        PathBuf::from("/usr/local/bin/python3"),
    ];
    candidates.into_iter().find(|python| {
        // Through a shell: setpriv's own exec of the program may succeed
        // where nobody's lookup of the same path fails.
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["sh", "-c", "test -x \"$0\" && exec \"$0\" -c pass"])
            .arg(python)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A kernel repo with one universal variant whose import is `init`,
/// readable by every user (the fallback test runs it as `nobody`).
pub fn kernel(init: &str) -> crate::probe_fixtures::Repo {
    let repo = crate::probe_fixtures::Repo::new();
    repo.variant("torch-universal", init);
    open_up(repo.dir.path());
    repo
}

/// Makes `dir` and everything in it readable (and folders writable) by
/// every user.
pub fn open_up(dir: &Path) {
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(dir, 0o777).expect("chmod");
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            open_up(&path);
        } else {
            mode(&path, 0o666).expect("chmod");
        }
    }
}

/// A folder the fixtures write their findings into.
pub fn report_dir() -> PathBuf {
    let dir = crate::common::fresh_dir("hostile");
    open_up(&dir);
    dir
}

pub fn found(report: &Path, name: &str) -> Value {
    let path = report.join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the fixture did not finish)", path.display()));
    serde_json::from_str(&text).expect("the fixture's JSON")
}

/// `preflight check --json TARGET…` with `env`, bounded in time: the
/// output, and the JSON it printed. The fixture's `HOSTILE_REPORT` folder
/// is the one place past the walls its probes may write.
pub fn check(targets: &[&Path], env: &[(&str, &OsStr)]) -> (Output, Value) {
    check_with(targets, &[], env)
}

/// [`check`] with more arguments (`--no-cache`).
pub fn check_with(targets: &[&Path], args: &[&str], env: &[(&str, &OsStr)]) -> (Output, Value) {
    let mut cmd = crate::common::preflight_cmd();
    cmd.arg("check")
        .args(args)
        .arg("--python")
        .arg(crate::probe_fixtures::python())
        .args(["--timeout", "30", "--jobs", "2", "--json"])
        .args(targets);
    for (k, v) in env {
        cmd.env(k, v);
        if *k == "HOSTILE_REPORT" {
            cmd.env("PREFLIGHT_PROBE_WRITABLE", v);
        }
    }
    let out = bounded(cmd, Duration::from_secs(120));
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check --json printed something that is not JSON ({e}):\n{}\nstderr:\n{}",
            crate::common::stdout(&out),
            crate::common::stderr(&out)
        )
    });
    (out, json)
}

/// Runs `cmd` to its end, or fails the test when it takes longer than
/// `limit` (after killing it): a hang is what some of these tests are about.
pub fn bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{cmd:?} did not end within {limit:?}");
        }
    }
}

/// The result rows of a `check --json`, one per target given.
pub fn outcomes(json: &Value) -> Vec<&Value> {
    json["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| &r["outcome"])
        .collect()
}

pub fn namespaced(json: &Value) -> bool {
    json["isolation"]["kind"] == "namespaces"
}

/// As root: this test binary again as `nobody` (whose probes get a user
/// namespace), every test but `skip`; it must pass `count` tests.
pub fn as_nobody(skip: &[&str], count: usize) {
    let Some(python) = nobody_python() else {
        panic!("no Python interpreter that nobody may run");
    };
    // From wherever the checkout is, root's 0700 home included.
    let copy = crate::common::nobody::ForNobody::new();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy.test)
        .arg("--test-threads=2")
        .current_dir(&copy.scratch)
        .env("PREFLIGHT_TEST_PYTHON", &python)
        .env("HOME", &copy.scratch)
        .env("TMPDIR", "/tmp")
        .envs(copy.env());
    for test in skip {
        cmd.args(["--skip", test]);
    }
    let out = bounded(cmd, Duration::from_secs(540));
    let stdout = crate::common::stdout(&out);
    assert!(
        out.status.success(),
        "as nobody:\n{stdout}\n{}",
        crate::common::stderr(&out)
    );
    assert!(
        stdout.contains(&format!("test result: ok. {count} passed; 0 failed")),
        "{stdout}"
    );
}
