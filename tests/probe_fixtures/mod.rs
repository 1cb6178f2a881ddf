//! Fixture variants generated in temporary directories, and a probe runner
//! that classifies like `preflight check` does.
#![allow(dead_code)]

pub mod fakes;

use kernel_preflight::classify::{self, Outcome};
use kernel_preflight::probe::{Executor, Job, Placement, PythonExecutor, SmokeSource, Subject};
use kernel_preflight::protocol::{Depth, Evidence, Made, Report};
use kernel_preflight::sandbox::{Cancel, Limits};
use kernel_preflight::variant::VariantName;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// A kernel repo under a temp dir: `<tmp>/fixture/build/<variant>/`.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        Repo {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("fixture")
    }

    /// A variant whose `__init__.py` is `init`, with valid metadata.
    pub fn variant(&self, name: &str, init: &str) -> PathBuf {
        self.variant_with(name, init, metadata(name))
    }

    /// A variant whose `__init__.py` is `init` and whose `metadata.json` is
    /// `metadata` as given.
    pub fn variant_with(&self, name: &str, init: &str, metadata: serde_json::Value) -> PathBuf {
        let dir = self.root().join("build").join(name);
        std::fs::create_dir_all(&dir).expect("variant dir");
        std::fs::write(dir.join("metadata.json"), metadata.to_string()).expect("metadata");
        std::fs::write(dir.join("__init__.py"), init).expect("__init__.py");
        dir
    }

    /// A file in the repo (benchmarks, smoke files, sources).
    pub fn file(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, text).expect("write");
        path
    }
}

/// Valid metadata of the kernel `fixture`, as real ones have it (with the
/// backend the variant's name says, `cpu` for universal ones).
pub fn metadata(variant: &str) -> serde_json::Value {
    let device =
        VariantName::parse(variant).map_or("cpu", |v| kernel_preflight::probe::device_for(&v));
    let backend = match device {
        "cuda" if variant.contains("rocm") => "rocm",
        "mps" => "metal",
        "npu" => "cann",
        "auto" => "cpu",
        other => other,
    };
    serde_json::json!({
        "name": "fixture", "id": format!("_fixture_{}", variant.replace('-', "_")),
        "version": 1, "license": "MIT", "upstream": "https://example.com/fixture.git",
        "python-depends": [], "backend": {"type": backend},
    })
}

/// A folder to put on the child's `PYTHONPATH`: stand-ins for installed
/// packages (a torch that sees no GPU, a triton of some version).
pub struct Site {
    pub dir: tempfile::TempDir,
}

impl Site {
    pub fn new() -> Site {
        Site {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// Write `text` at `relative` in the folder.
    pub fn file(&self, relative: &str, text: &str) -> &Site {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, text).expect("write");
        self
    }

    /// A python executor for `python` with this folder on `PYTHONPATH`.
    pub fn executor(&self, python: &Path) -> PythonExecutor {
        let mut executor = PythonExecutor::new(python);
        executor
            .env
            .push(("PYTHONPATH".into(), self.dir.path().into()));
        executor
    }
}

/// An interpreter without `kernels` (or any other package): a venv made
/// once per test binary, without system site-packages.
pub fn bare_python() -> PathBuf {
    static BARE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, python) = BARE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let venv = dir.path().join("bare");
        let status = std::process::Command::new(python())
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .expect("python -m venv");
        assert!(status.success(), "python -m venv");
        let bare = venv.join("bin/python");
        let has_kernels = std::process::Command::new(&bare)
            .args(["-c", "import kernels"])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("the bare python runs");
        assert!(
            !has_kernels.success(),
            "the bare venv must not have kernels"
        );
        (dir, bare)
    });
    python.clone()
}

/// The test Python: `PREFLIGHT_TEST_PYTHON`, else the project venv's, else
/// `python3` on PATH.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PREFLIGHT_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    kernel_preflight::probe::find_python(Path::new("python3")).expect("python3 on PATH")
}

pub fn quick_limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(20),
        grace: Duration::from_secs(2),
        ..Limits::default()
    }
}

/// What a probe collected: the evidence and its events, folded.
pub struct Probed {
    pub evidence: Evidence,
    pub report: Report,
}

/// The job probing `variant` (named by its directory) on the cpu.
pub fn job(variant: &Path, smoke: SmokeSource, limits: Limits) -> Job {
    let dir = variant.file_name().expect("a variant directory");
    Job {
        subject: Subject::Variant {
            name: VariantName::parse(&dir.to_string_lossy()).expect("a hub variant name"),
            path: variant.to_path_buf(),
        },
        device: Placement::Cpu,
        smoke,
        depth: Depth::Verified,
        limits,
    }
}

/// Probe `variant` with `smoke` on cpu and classify the result.
pub fn probe(variant: &Path, smoke: SmokeSource, limits: Limits) -> (Probed, Outcome) {
    probe_with(&python(), variant, smoke, limits)
}

pub fn probe_with(
    python: &Path,
    variant: &Path,
    smoke: SmokeSource,
    limits: Limits,
) -> (Probed, Outcome) {
    probe_job(&PythonExecutor::new(python), &job(variant, smoke, limits))
}

/// Whether this run of the tests probes every fixture forked from a fork
/// server (`PREFLIGHT_TEST_FORKED=1`, `scripts/test-forked.sh`) instead of
/// in fresh processes: every outcome must be the same.
pub fn forked() -> bool {
    std::env::var_os("PREFLIGHT_TEST_FORKED").is_some_and(|v| v == "1")
}

/// `executor`, forking its probes when [`forked`] says so. Forked probes
/// need the namespaces a reaper makes (the probe joins its client's pid
/// namespace), so this binary's sandboxes get `preflight`'s reaper then.
pub fn made(executor: &PythonExecutor) -> PythonExecutor {
    if forked() {
        kernel_preflight::sandbox::set_default_reaper(
            std::env::var_os("PREFLIGHT_TEST_BINARY")
                .map_or_else(|| env!("CARGO_BIN_EXE_preflight").into(), PathBuf::from),
        );
        let forked = executor.clone().forked_always();
        // These tests are about probes: the server's start is not counted
        // against their (short) timeouts (tests/fork_server.rs is about it).
        if let Some(why) = forked.start_fork_server() {
            panic!("the fork server did not start: {why}");
        }
        forked
    } else {
        executor.clone()
    }
}

/// Run `job` with `executor` and classify the result.
pub fn probe_job(executor: &PythonExecutor, job: &Job) -> (Probed, Outcome) {
    run_job(&made(executor), job)
}

/// [`probe_job`] in a fresh process, however the tests probe: for what only
/// a fresh child shows (a fork server has imported `kernels`).
pub fn probe_job_fresh(executor: &PythonExecutor, job: &Job) -> (Probed, Outcome) {
    let run = probe_as_it_goes(executor, job);
    assert_eq!(run.0.evidence.made, Made::Fresh, "the probe was fresh");
    run
}

fn run_job(executor: &PythonExecutor, job: &Job) -> (Probed, Outcome) {
    let run = probe_as_it_goes(executor, job);
    if executor.made() == Made::Forked {
        assert_eq!(
            (run.0.evidence.made, executor.fork_fallback()),
            (Made::Forked, None),
            "the probe was forked"
        );
    }
    run
}

/// Run `job` with `executor` however it makes its children (forked, or
/// fresh once its fork server was given up), and classify the result.
pub fn probe_as_it_goes(executor: &PythonExecutor, job: &Job) -> (Probed, Outcome) {
    let evidence = executor
        .run(job, &Cancel::new())
        .expect("the probe itself runs");
    let outcome = classify::classify(&evidence);
    let run = Probed {
        report: evidence.report(),
        evidence,
    };
    assert_group_gone(&run);
    (run, outcome)
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            found.push(pid);
        }
    }
    found
}

/// No process of the probe's group may outlive it.
pub fn assert_group_gone(run: &Probed) {
    let pgid = run.evidence.pid.expect("the child started");
    let namespaces = matches!(
        kernel_preflight::sandbox::isolation(),
        Some(kernel_preflight::sandbox::Isolation::Namespaces { .. })
    );
    if run.evidence.made == Made::Forked || namespaces {
        // The sandbox's child is the fork client; the probe forked for it
        // leads a session and group of its own in the same namespaces (and
        // under a reaper's namespaces, which forked runs need, a fresh
        // child's pids are the namespace's, not the ones this process sees).
        assert_eq!(run.report.pgid, run.report.pid, "the probe leads its group");
        let left = live_members(pgid);
        assert!(left.is_empty(), "processes of group {pgid} left: {left:?}");
        return;
    }
    assert_eq!(
        run.report.pgid.map(|g| g as i32),
        Some(pgid),
        "the child reports its own process group"
    );
    let left = live_members(pgid);
    assert!(left.is_empty(), "processes of group {pgid} left: {left:?}");
}
