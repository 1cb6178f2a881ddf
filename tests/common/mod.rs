//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod browser;
pub mod nobody;
pub mod node;
pub mod redis_server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project-local Python environment made by `scripts/setup-env.sh`.
///
/// Tests that need it fail (never skip) when it is missing: CI creates it.
pub fn venv() -> PathBuf {
    let dir = std::env::var_os("PREFLIGHT_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    assert!(
        dir.join("bin/python").exists(),
        "test environment {} is missing: run scripts/setup-env.sh",
        dir.display()
    );
    dir
}

/// The venv's Python interpreter.
pub fn venv_python() -> PathBuf {
    venv().join("bin/python")
}

/// The `preflight` binary: cargo's, or `PREFLIGHT_TEST_BINARY` (a copy
/// that `nobody` can run, [`nobody::ForNobody`]).
pub fn preflight_bin() -> PathBuf {
    std::env::var_os("PREFLIGHT_TEST_BINARY").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_preflight")),
        PathBuf::from,
    )
}

/// The tests' fixtures (`tests/fixtures`), or `PREFLIGHT_TEST_FIXTURES` (a
/// copy that `nobody` can read, [`nobody::ForNobody`]).
pub fn fixtures() -> PathBuf {
    std::env::var_os("PREFLIGHT_TEST_FIXTURES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        PathBuf::from,
    )
}

/// Run the `preflight` binary with arguments.
pub fn preflight(args: &[&str]) -> Output {
    preflight_cmd().args(args).output().expect("run preflight")
}

/// A `Command` for the `preflight` binary, for tests that set env or cwd.
///
/// Each command gets an empty outcome cache of its own, so that no test sees
/// another's outcomes (or the user's); a test that wants to share one sets
/// `PREFLIGHT_CACHE` itself. `COLUMNS` is unset (tables keep their natural
/// width).
pub fn preflight_cmd() -> Command {
    let mut cmd = Command::new(preflight_bin());
    cmd.env("PREFLIGHT_CACHE", fresh_dir("cache"));
    // Tables fit COLUMNS when it is set: a shell that exports it must not
    // change what the tests read.
    cmd.env_remove("COLUMNS");
    // scripts/test-forked.sh: the binary forks its probes too, torch or
    // not, so that every hostile fixture run through it is compared.
    if std::env::var_os("PREFLIGHT_TEST_FORKED").is_some_and(|v| v == "1") {
        cmd.env("PREFLIGHT_FORK", "1");
    }
    cmd
}

/// A new empty directory under [`scratch_root`], unique to this test
/// process.
pub fn fresh_dir(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = scratch_root().join(format!(
        "{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// The folder the tests' scratch folders go in, one where what a probe or
/// its child writes reaches the test that waits for it.
///
/// A probe's `/tmp` and `TMPDIR` are private layers
/// ([`kernel_preflight::sandbox::private_dirs`]), so cargo's `target/tmp`
/// serves only when the checkout is elsewhere; a checkout under `/tmp` gets
/// a folder named after it in `/var/tmp` (which the tests' runs as `nobody`
/// can reach too), else in `$XDG_CACHE_HOME` or `~/.cache`. `PREFLIGHT_TEST_SCRATCH` chooses another (a run as
/// another user), and must not be private either.
pub fn scratch_root() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        if let Some(given) = std::env::var_os("PREFLIGHT_TEST_SCRATCH") {
            let given = PathBuf::from(given);
            assert!(
                reaches_the_host(&given),
                "PREFLIGHT_TEST_SCRATCH={}: below a folder a probe keeps private ({:?})",
                given.display(),
                kernel_preflight::sandbox::private_dirs()
            );
            return given;
        }
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        if reaches_the_host(&target) {
            return target;
        }
        let checkout = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            env!("CARGO_MANIFEST_DIR").hash(&mut h);
            format!("{:016x}", h.finish())
        };
        let var = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let uid = nix::unistd::getuid();
        // Shared with every user: only a folder this user made.
        let var_tmp = PathBuf::from(format!("/var/tmp/kernel-preflight-tests-{uid}"));
        let var_tmp = (std::fs::create_dir_all(&var_tmp).is_ok()
            && std::fs::symlink_metadata(&var_tmp).is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt;
                m.is_dir() && m.uid() == uid.as_raw()
            }))
        .then(|| var_tmp.join(&checkout));
        [
            var_tmp,
            var("XDG_CACHE_HOME").map(|d| d.join("kernel-preflight-tests").join(&checkout)),
            var("HOME").map(|d| d.join(".cache/kernel-preflight-tests").join(&checkout)),
        ]
        .into_iter()
        .flatten()
        .find(|p| reaches_the_host(p))
        .expect("a scratch folder outside /tmp and TMPDIR: set PREFLIGHT_TEST_SCRATCH")
    })
    .clone()
}

/// Whether `dir` can be made and lies outside every folder a probe keeps
/// private.
fn reaches_the_host(dir: &Path) -> bool {
    std::fs::create_dir_all(dir).is_ok()
        && std::fs::canonicalize(dir).is_ok_and(|real| {
            !kernel_preflight::sandbox::private_dirs()
                .iter()
                .any(|private| real.starts_with(private))
        })
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` distinct variant names for this host's CPU and Linux, in the hub's forms.
pub fn variant_names(n: usize) -> Vec<String> {
    let arch = std::env::consts::ARCH;
    let mut names: Vec<String> = ["torch-universal", "torch-cpu", "torch-cuda"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for minor in 0..40 {
        for tag in ["", "-cxx11", "-cxx98"] {
            names.push(format!("torch2{minor}{tag}-cpu-{arch}-linux"));
        }
    }
    names.truncate(n);
    names
}

/// A kernel repo `root/name` in the hub layout with one variant per name,
/// each a Python package whose `__init__.py` is `body`, with valid metadata.
pub fn kernel_repo(root: &std::path::Path, name: &str, variants: &[String], body: &str) -> PathBuf {
    let repo = root.join(name);
    for (i, v) in variants.iter().enumerate() {
        let dir = repo.join("build").join(v);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("__init__.py"), body).unwrap();
        let metadata = serde_json::json!({
            "name": name, "id": format!("_{}_{i}", name.replace('-', "_")), "version": 1,
            "license": "MIT", "python-depends": [], "backend": {"type": "cpu"},
        });
        std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
    }
    repo
}

/// The row of `variant` in the JSON of `preflight bench --json`.
pub fn bench_row<'a>(doc: &'a serde_json::Value, variant: &str) -> &'a serde_json::Value {
    doc["variants"]
        .as_array()
        .and_then(|v| v.iter().find(|r| r["variant"] == variant))
        .unwrap_or_else(|| panic!("no row for {variant} in {doc}"))
}

/// The variants of `preflight bench --json`, in the order it ranked them.
pub fn bench_order(doc: &serde_json::Value) -> Vec<&str> {
    doc["variants"]
        .as_array()
        .expect("a variants list")
        .iter()
        .map(|r| r["variant"].as_str().expect("a variant name"))
        .collect()
}

/// The variable that [`mark`] sets and [`marked`] looks for.
pub const MARK_VAR: &str = "PREFLIGHT_TEST_MARK";

/// A value no other process on this machine has in its environment: set
/// it as [`MARK_VAR`] on a child, and [`marked`] finds every process
/// descended from it on this host, in whatever pid namespace it ran (the
/// pids a sandboxed child writes down are its namespace's, not ours).
pub fn mark() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Live (not zombie) processes whose environment holds `MARK_VAR=mark`.
pub fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK_VAR}={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let live = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rfind(')')
                .is_some_and(|at| !stat[at + 1..].trim_start().starts_with('Z'))
        });
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if live
            && environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Waits up to 5 s (a SIGKILL takes effect asynchronously) until no process
/// is [`marked`] with `mark`; kills what is left and panics otherwise.
pub fn assert_none_marked(mark: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = marked(mark);
        if left.is_empty() {
            return;
        }
        if std::time::Instant::now() >= until {
            for pid in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("processes outlived the run: {left:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Set the modification time of everything under `dir` (and `dir`) to a
/// minute ago, children first, so that every `stat` of it is settled (a
/// warm record trusts no file changed within the last 2 s).
pub fn age(dir: &std::path::Path) {
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            age(&entry.unwrap().path());
        }
    }
    let ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 60;
    let times = [
        libc::timespec {
            tv_sec: ago as libc::time_t,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: ago as libc::time_t,
            tv_nsec: 0,
        },
    ];
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path and two timespecs.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
    assert_eq!(rc, 0, "utimensat {}", dir.display());
}
