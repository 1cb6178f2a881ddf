//! `check --cached --ticket FILE`: a ticket is written only beside a
//! cached pass of one variant, and names every input of the answer. The
//! first test holds the recording helpers to what the run really did: each
//! path `strace` saw the command open, `stat`, resolve or list is one of
//! the ticket's reads, so a read that bypasses them fails here.

mod common;

use common::{age, fresh_dir, kernel_repo, preflight_cmd, stderr, variant_names};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Setup {
    cache: PathBuf,
    /// Variables every command of the setup runs with.
    env: Vec<(String, PathBuf)>,
    variant: PathBuf,
    ticket: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Setup {
    /// One passing variant, probed once, everything aged so that each
    /// `stat` is settled.
    fn probed() -> Setup {
        Setup::probed_in("", "tiny", Vec::new())
    }

    /// [`Setup::probed`] with the repo (of the kernel `tiny`) at
    /// `root/name` under the scratch folder.
    fn probed_in(root: &str, name: &str, env: Vec<(String, PathBuf)>) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let made = kernel_repo(
            &tmp.path().join(root),
            "tiny",
            &variant_names(1),
            "def relu(x):\n    return max(x, 0)\n",
        );
        // The folder's name (a snapshot's commit), the kernel's "tiny".
        let repo = made.with_file_name(name);
        std::fs::rename(&made, &repo).unwrap();
        let s = Setup {
            cache: fresh_dir("cache"),
            env,
            variant: repo.join("build").join(&variant_names(1)[0]),
            ticket: tmp.path().join("tickets/t.json"),
            _tmp: tmp,
        };
        let out = s.cmd(&[]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            common::stdout(&out),
            stderr(&out)
        );
        age(&s.cache);
        age(tmp_root(&s));
        s
    }

    fn cmd(&self, extra: &[&str]) -> Command {
        let mut cmd = preflight_cmd();
        cmd.arg("check")
            .arg(&self.variant)
            .arg("--python")
            .arg(common::venv_python())
            .arg("--json")
            .args(extra)
            .env("PREFLIGHT_CACHE", &self.cache)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    fn ticketed(&self) -> Command {
        let mut cmd = self.cmd(&["--cached", "--ticket"]);
        cmd.arg(&self.ticket);
        cmd
    }

    fn ticket(&self) -> Option<Value> {
        let bytes = std::fs::read(&self.ticket).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }
}

fn run(mut cmd: Command) -> (Option<i32>, String) {
    let out = cmd.output().unwrap();
    (out.status.code(), stderr(&out))
}

/// The paths a system call line of `strace` names (its first quoted
/// argument), for the calls that read the file system.
fn traced_paths(log: &str) -> BTreeSet<String> {
    const CALLS: [&str; 9] = [
        "openat(",
        "open(",
        "statx(",
        "newfstatat(",
        "stat(",
        "lstat(",
        "access(",
        "readlink(",
        "readlinkat(",
    ];
    let mut out = BTreeSet::new();
    for line in log.lines() {
        let Some(call) = CALLS
            .iter()
            .find_map(|c| line.find(c).map(|at| &line[at..]))
        else {
            continue;
        };
        let Some(start) = call.find('"') else {
            continue;
        };
        let rest = &call[start + 1..];
        let Some(end) = rest.find('"') else { continue };
        let path = &rest[..end];
        if !path.is_empty() {
            out.insert(path.to_string());
        }
    }
    out
}

/// The scratch folder of a setup (the ticket's parent's parent).
fn tmp_root(s: &Setup) -> &Path {
    s.ticket.parent().unwrap().parent().unwrap()
}

#[test]
fn a_ticket_names_every_path_the_run_read() {
    audit(&Setup::probed());
}

#[test]
fn a_ticket_names_every_path_the_run_read_in_a_hub_cache() {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let s = Setup::probed_in("hub/kernels--acme--tiny/snapshots", sha, Vec::new());
    let refs = tmp_root(&s).join("hub/kernels--acme--tiny/refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("main"), sha).unwrap();
    age(tmp_root(&s));
    audit(&s);
}

#[test]
fn a_ticket_names_every_path_the_run_read_on_a_machine_with_a_gpu() {
    // The machine's files as the fingerprint reads them, one GPU bound to
    // the nvidia driver: what this test machine has none of.
    let machine = common::fresh_dir("machine");
    let bus = "0000:17:00.0";
    let write = |rel: &str, text: &str| {
        let path = machine.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("sys/module/nvidia/version", "570.86.15\n");
    write(&format!("sys/bus/pci/devices/{bus}/class"), "0x030200\n");
    write(&format!("sys/bus/pci/devices/{bus}/device"), "0x2335\n");
    std::fs::create_dir_all(machine.join("sys/bus/pci/drivers/nvidia").join(bus)).unwrap();
    write(
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Fri Jan 24 2025\n",
    );
    write(
        &format!("proc/driver/nvidia/gpus/{bus}/information"),
        "Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-1\nDevice Minor: \t 0\n",
    );
    write(
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: avx2 fma\n\n",
    );
    write("dev/nvidiactl", "");
    write("dev/nvidia0", "");
    let env = ["sys", "proc", "dev"]
        .iter()
        .zip([
            "PREFLIGHT_SYSFS_ROOT",
            "PREFLIGHT_PROCFS_ROOT",
            "PREFLIGHT_DEVFS_ROOT",
        ])
        .map(|(dir, var)| (var.to_string(), machine.join(dir)))
        .collect();
    let s = Setup::probed_in("", "tiny", env);
    let ticket = audit(&s);
    let reads = ticket["reads"].as_array().unwrap();
    let kind = |k: &str| reads.iter().filter(|r| r["read"] == k).count();
    // The GPU's files were read, and kept by their bytes, the node by its
    // kind, the driver's folder by its names.
    assert!(kind("content") >= 5, "{ticket:#}");
    assert!(kind("kind") >= 2 && kind("listing") >= 1, "{ticket:#}");
    let version = machine.join("sys/module/nvidia/version");
    assert!(
        reads
            .iter()
            .any(|r| r["read"] == "content" && r["path"] == version.to_str().unwrap()),
        "{ticket:#}"
    );
}

/// Run the ticketed command under `strace`: every path it read is one of
/// the ticket's reads. The ticket.
fn audit(s: &Setup) -> Value {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("strace is needed by this test (.ci/run installs it: apt-get install strace)");
    let log = s.ticket.with_extension("strace");
    std::fs::create_dir_all(s.ticket.parent().unwrap()).unwrap();
    // A first run settles the cache (the aged files' new times are kept
    // in its records), so that the traced run only reads.
    let (code, err) = run(s.ticketed());
    assert_eq!(code, Some(0), "{err}");
    age(&s.cache);
    let inner = s.ticketed();
    let mut cmd = Command::new(strace);
    cmd.args(["-f", "-qq", "-s", "4096", "-o"])
        .arg(&log)
        .args(["-e", "trace=%file,readlink"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        // Where cargo's test runner points the dynamic loader: its search,
        // before the program starts, is no read of the program's.
        .env_remove("LD_LIBRARY_PATH");
    let (code, err) = run(cmd);
    assert_eq!(code, Some(0), "{err}");
    let ticket = s.ticket().unwrap_or_else(|| panic!("no ticket: {err}"));
    let reads = ticket["reads"].as_array().unwrap();
    let mut named: BTreeSet<String> = reads
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect();
    named.insert(ticket["binary"]["path"].as_str().unwrap().to_string());
    let boot = named.contains("/proc/sys/kernel/random/boot_id");
    let ticket_dir = s.ticket.parent().unwrap().to_str().unwrap().to_string();
    let traced = traced_paths(&std::fs::read_to_string(&log).unwrap());
    let missing: Vec<&String> = traced
        .iter()
        .filter(|p| !named.contains(*p))
        // The dynamic loader's own, and this process's own files: the
        // same answer in any process.
        .filter(|p| !p.starts_with("/etc/ld.so") && !p.starts_with("/proc/self/"))
        .filter(|p| !p.starts_with("/sys/fs/cgroup/") && !p.starts_with("/sys/devices/system/cpu"))
        .filter(|p| !(p.starts_with("/lib") || p.starts_with("/usr/lib")) || !p.contains(".so"))
        // The model and flags of the CPU are vouched for by the boot.
        .filter(|p| !(boot && *p == "/proc/cpuinfo"))
        // The ticket being written.
        .filter(|p| !p.starts_with(&ticket_dir))
        .collect();
    assert!(
        missing.is_empty(),
        "read but not in the ticket: {missing:#?}\nticket reads: {named:#?}"
    );
    // The answer is the document `check --json` prints.
    assert_eq!(ticket["answer"]["results"][0]["outcome"]["kind"], "pass");
    assert_eq!(ticket["answer"]["results"][0]["cached"], true);
    let argv: Vec<&str> = ticket["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "check");
    assert!(!argv.contains(&"--ticket"), "{argv:?}");
    assert!(
        argv.contains(&"--cached") && argv.contains(&"--json"),
        "{argv:?}"
    );
    ticket
}

#[test]
fn a_ticket_is_made_only_of_a_cached_pass_and_removed_when_there_is_none() {
    let s = Setup::probed();
    let (code, err) = run(s.ticketed());
    assert_eq!(code, Some(0), "{err}");
    let ticket = s.ticket().expect("a cached pass makes a ticket");
    // Every PREFLIGHT_ variable is an input.
    assert!(
        ticket["reads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["read"] == "prefix" && r["prefix"] == "PREFLIGHT_"),
        "{ticket:#}"
    );

    // A file changed just now cannot be vouched for by its `stat`: no
    // ticket, and the old one is gone.
    std::fs::write(
        s.variant.join("__init__.py"),
        "def relu(x):\n    return max(x, 0)\n",
    )
    .unwrap();
    let (code, err) = run(s.ticketed());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("no ticket: ") && err.contains("changed too recently"),
        "{err}"
    );
    assert!(s.ticket().is_none(), "the old ticket is removed");

    // Not cached: skipped, no ticket.
    std::fs::write(
        s.variant.join("__init__.py"),
        "def relu(x):\n    return x\n",
    )
    .unwrap();
    age(s.variant.parent().unwrap().parent().unwrap());
    let (code, err) = run(s.ticketed());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("no ticket: the answer is not a cached pass"),
        "{err}"
    );
    assert!(s.ticket().is_none());

    // A fleet's node: a local miss asks the remote store, whose answer
    // no file vouches for: no ticket either.
    let (code, err) = run({
        let mut c = s.ticketed();
        c.env("PREFLIGHT_REMOTE", "redis://127.0.0.1:1")
            .env("PREFLIGHT_REMOTE_RETRY", "10ms");
        c
    });
    assert_eq!(code, Some(1), "{err}");
    assert!(s.ticket().is_none(), "{err}");
}

#[test]
fn ticket_needs_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let out = preflight_cmd()
        .args([
            "check",
            tmp.path().to_str().unwrap(),
            "--ticket",
            "/tmp/x.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--cached"), "{}", stderr(&out));
}

#[test]
fn cache_prune_drops_the_tickets_of_a_replaced_binary_and_clear_drops_all() {
    let mut s = Setup::probed();
    s.ticket = s.cache.join("tickets/ab/t.json");
    // A binary of this test's own, so that it can be replaced.
    let copy = s.cache.parent().unwrap().join(format!(
        "preflight-copy-{}",
        s.cache.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(common::preflight_bin(), &copy).unwrap();
    let from_copy = |s: &Setup| {
        let inner = s.ticketed();
        let mut cmd = Command::new(&copy);
        cmd.args(inner.get_args()).env("PREFLIGHT_CACHE", &s.cache);
        cmd
    };
    let (code, err) = run(from_copy(&s));
    assert_eq!(code, Some(0), "{err}");
    age(&s.cache);
    let (code, err) = run(from_copy(&s));
    assert_eq!(code, Some(0), "{err}");
    assert!(s.ticket().is_some(), "{err}");
    let cache = |action: &str| {
        let out = preflight_cmd()
            .args(["cache", action])
            .env("PREFLIGHT_CACHE", &s.cache)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    };
    cache("prune");
    assert!(s.ticket().is_some(), "its binary is still there: kept");
    let bytes = std::fs::read(&copy).unwrap();
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, bytes).unwrap();
    cache("prune");
    assert!(s.ticket().is_none(), "its binary was replaced: removed");
    std::fs::remove_file(&copy).unwrap();
    cache("clear");
    assert!(!s.cache.join("tickets").exists());
}

#[test]
fn a_fleet_node_answered_by_its_own_cache_gets_a_ticket() {
    // A warm load never asks the remote store (docs/fleet.md): the ticket
    // holds as on a lone machine, with the store's address among its
    // inputs.
    let mut s = Setup::probed();
    s.env
        .push(("PREFLIGHT_REMOTE".into(), "redis://127.0.0.1:1".into()));
    let (code, err) = run(s.ticketed());
    assert_eq!(code, Some(0), "{err}");
    let ticket = s.ticket().unwrap_or_else(|| panic!("no ticket: {err}"));
    assert!(
        ticket["reads"].as_array().unwrap().iter().any(
            |r| r["read"] == "prefix" && r["vars"]["PREFLIGHT_REMOTE"] == "redis://127.0.0.1:1"
        ),
        "{ticket:#}"
    );
}
