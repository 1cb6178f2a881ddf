//! The error boundary: what the user can fix exits 2, a fault of preflight
//! or of the machine exits 3, each with one message.

mod common;

use common::{fresh_dir, kernel_repo, preflight_cmd, stderr, variant_names};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// One line on stderr, starting as the boundary says.
fn assert_one_message(out: &Output, code: i32, start: &str) -> String {
    assert_eq!(out.status.code(), Some(code), "{}", stderr(out));
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "one message: {err}");
    assert!(lines[0].starts_with(start), "{err}");
    lines[0].to_string()
}

/// A bundle of two valid outcome entries, exported from a real cache.
fn bundle() -> PathBuf {
    let tmp = fresh_dir("bundle");
    let repo = kernel_repo(&tmp, "tiny", &variant_names(2), "X = 1\n");
    let cache = tmp.join("cache");
    let out = preflight_cmd()
        .args(["check", repo.to_str().unwrap(), "--python"])
        .arg(common::venv_python())
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file = tmp.join("bundle.jsonl");
    let out = preflight_cmd()
        .args(["cache", "export"])
        .arg(&file)
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    file
}

#[test]
fn a_cache_root_that_cannot_be_a_directory_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let blocker = tmp.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let out = preflight_cmd()
        .args(["cache", "import"])
        .arg(bundle())
        .env("PREFLIGHT_CACHE", blocker.join("cache"))
        .output()
        .unwrap();
    let message = assert_one_message(&out, 2, "preflight: error: cache directory");
    assert!(message.contains("PREFLIGHT_CACHE"), "{message}");
}

#[test]
fn a_write_failing_inside_a_valid_cache_is_an_internal_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bundle = bundle();
    // A valid cache made by preflight, whose outcomes folder then turned
    // read-only under it.
    let cache = tmp.path().join("cache");
    let out = preflight_cmd()
        .args(["cache", "import"])
        .arg(&bundle)
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = preflight_cmd()
        .args(["cache", "clear"])
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let outcomes = cache.join("outcomes-v2");
    std::fs::create_dir(&outcomes).unwrap();
    std::fs::set_permissions(&outcomes, std::fs::Permissions::from_mode(0o500)).unwrap();
    // root writes anywhere: take away the capabilities that let it.
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.arg("--bounding-set=-dac_override,-dac_read_search,-fowner")
            .arg(env!("CARGO_BIN_EXE_preflight"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_preflight"))
    };
    let out = cmd
        .args(["cache", "import"])
        .arg(&bundle)
        .env("PREFLIGHT_CACHE", &cache)
        .output()
        .unwrap();
    std::fs::set_permissions(&outcomes, std::fs::Permissions::from_mode(0o700)).unwrap();
    let message = assert_one_message(&out, 3, "preflight: internal error: cache ");
    assert!(message.contains("outcomes-v2"), "{message}");
}

/// A native target the cuda executor would probe (its cubin is never read:
/// the child is never started).
fn native_target(dir: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/axpy");
    for f in ["axpy.cu", "preflight.toml"] {
        std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("axpy.cubin"), "not reached").unwrap();
    for f in ["axpy.cu", "preflight.toml", "axpy.cubin"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

#[test]
fn a_failed_fork_is_an_internal_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    native_target(tmp.path());
    // RLIMIT_NPROC = 0: no fork succeeds. The kernel never applies it to
    // root, so as root the command runs as `nobody`, from a link to the
    // binary that `nobody` can reach.
    let mut binary = PathBuf::from(env!("CARGO_BIN_EXE_preflight"));
    let mut cmd = if is_root() {
        let reachable = tmp.path().join("preflight");
        std::fs::hard_link(&binary, &reachable)
            .or_else(|_| std::fs::copy(&binary, &reachable).map(drop))
            .unwrap();
        binary = reachable;
        // The cache is nobody's, as a user's own cache is theirs: the run
        // gets as far as its first fork.
        let cache = tmp.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "prlimit",
        ]);
        c
    } else {
        Command::new("prlimit")
    };
    let out = cmd
        .arg("--nproc=0")
        .arg(&binary)
        .arg("check")
        .arg(tmp.path())
        .env("PREFLIGHT_CACHE", tmp.path().join("cache"))
        .output()
        .unwrap();
    let message = assert_one_message(&out, 3, "preflight: internal error: ");
    // A clone, where the probe gets namespaces of its own.
    assert!(
        message.contains("fork failed") || message.contains("clone failed"),
        "{message}"
    );
}

#[test]
fn bad_input_still_exits_2() {
    for args in [
        &["check", "/nonexistent/kernel"][..],
        &["cache", "show", "zz"],
        &["cache", "import", "/nonexistent/bundle.jsonl"],
        &["resolve", "--variants", "not-a-variant"],
    ] {
        let out = preflight_cmd().args(args).output().unwrap();
        assert_one_message(&out, 2, "preflight: error: ");
    }
}

/// Every command's exit code, as the boundary documents it: 0 yes, 1 a
/// "no" (the question was answered), 2 bad input. Real runs on real repos.
#[test]
fn each_command_exits_as_documented() {
    let tmp = fresh_dir("codes");
    let names = variant_names(2);
    let works = kernel_repo(&tmp, "works", &names, "X = 1\n");
    let broken = kernel_repo(
        &tmp,
        "broken",
        &names,
        "raise ImportError('no such thing')\n",
    );
    let python = common::venv_python();
    let py = python.to_str().unwrap();
    let (works, broken) = (works.to_str().unwrap(), broken.to_str().unwrap());
    let windows = "torch29-cpu-x86_64-windows";
    let cases: &[(&[&str], i32)] = &[
        (&["fingerprint"], 0),
        (&["resolve", "--variants", "torch-universal"], 0),
        (&["resolve", "--variants", windows], 1),
        (&["resolve", "--variants", "not-a-variant"], 2),
        (&["check", works, "--python", py], 0),
        (&["check", broken, "--python", py], 1),
        (&["check", "/nonexistent/kernel"], 2),
        (&["select", works, "--python", py], 0),
        (&["select", broken, "--python", py], 1),
        (&["bench", broken, "--python", py], 1),
        (&["bench", broken, "--python", py, "--max-noise", "0"], 2),
        (&["warmup", works, "--python", py], 0),
        (&["cache", "dir"], 0),
        (&["cache", "show", "zz"], 2),
    ];
    for (args, code) in cases {
        let out = preflight_cmd().args(*args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(*code),
            "{args:?}: {}{}",
            common::stdout(&out),
            stderr(&out)
        );
        if *code == 2 {
            assert_one_message(&out, 2, "preflight: error: ");
        }
    }
}

/// `bench` with nothing that passes is a "no" like `select`'s: exit 1, and
/// each variant's reason, in the table and in the JSON.
#[test]
fn bench_with_nothing_that_passes_says_why_for_each_variant() {
    let tmp = fresh_dir("nothing");
    let names = variant_names(2);
    let broken = kernel_repo(
        &tmp,
        "broken",
        &names,
        "raise ImportError('no such thing')\n",
    );
    let python = common::venv_python();
    let out = preflight_cmd()
        .arg("bench")
        .arg(&broken)
        .arg("--python")
        .arg(&python)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no variant passes here"),
        "{}",
        stderr(&out)
    );
    let text = common::stdout(&out);
    for name in &names {
        assert!(
            text.contains(&format!("not timed: {name}: import_error: ")),
            "{text}"
        );
    }
    assert!(text.contains("no such thing"), "{text}");
    let out = preflight_cmd()
        .arg("bench")
        .arg(&broken)
        .arg("--python")
        .arg(&python)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["variants"].as_array().unwrap();
    assert_eq!(rows.len(), names.len(), "{doc}");
    for row in rows {
        assert_eq!(row["status"]["status"], "excluded", "{row}");
        assert_eq!(row["status"]["outcome"], "import_error", "{row}");
    }
}

/// `--python` naming something that is not a working Python is bad input
/// for every command that takes it: exit 2, one message naming the path
/// and what it is; `fingerprint` asks the program instead of guessing
/// from its path.
#[test]
fn a_python_that_is_not_a_working_python_is_bad_input_for_every_command() {
    let tmp = fresh_dir("not-python");
    let repo = kernel_repo(&tmp, "tiny", &variant_names(1), "X = 1\n");
    let repo = repo.to_str().unwrap();
    let plain = tmp.join("plain-file");
    std::fs::write(&plain, "print('hi')\n").unwrap();
    let old = tmp.join("python2");
    std::fs::write(&old, "#!/bin/sh\necho 'python 2.7.18'\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pythons: [(&Path, &str); 5] = [
        (Path::new("/bin/false"), "not a Python interpreter"),
        (Path::new("/bin/true"), "not a Python interpreter"),
        (Path::new("/nonexistent/python3"), "no such"),
        (&plain, "not executable"),
        (&old, "Python 2.7.18; probes need Python 3.9 or newer"),
    ];
    for (python, what) in pythons {
        let py = python.to_str().unwrap();
        let commands: [&[&str]; 8] = [
            &["fingerprint", "--python", py],
            &["fingerprint", "--full", "--python", py],
            &["resolve", repo, "--python", py],
            &["check", repo, "--python", py],
            &["select", repo, "--python", py],
            &["bench", repo, "--python", py],
            &["warmup", repo, "--python", py],
            &["doctor", "--python", py],
        ];
        for args in commands {
            let out = preflight_cmd().args(args).output().unwrap();
            let message = assert_one_message(&out, 2, "preflight: error: ");
            assert!(
                message.contains(py) && message.contains(what),
                "{args:?}: {message}"
            );
        }
    }
}
