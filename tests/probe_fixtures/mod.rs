//! Fixture variants generated in temporary directories, and a probe runner
//! that classifies like `preflight check` does.
#![allow(dead_code)]

use kernel_preflight::classify::{self, Outcome};
use kernel_preflight::probe::{Executor, Job, Placement, PythonExecutor, SmokeSource, Subject};
use kernel_preflight::protocol::{Depth, Evidence, Report};
use kernel_preflight::sandbox::{Cancel, Limits};
use kernel_preflight::variant::VariantName;
use std::path::{Path, PathBuf};
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
        let dir = self.root().join("build").join(name);
        std::fs::create_dir_all(&dir).expect("variant dir");
        let id = format!("_fixture_{}", name.replace('-', "_"));
        let metadata = serde_json::json!({
            "name": "fixture", "id": id, "version": 1, "license": "MIT",
            "python-depends": [], "backend": {"type": "cpu"},
        });
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
    let evidence = PythonExecutor::new(python)
        .run(&job(variant, smoke, limits), &Cancel::new())
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
    assert_eq!(
        run.report.pgid.map(|g| g as i32),
        Some(pgid),
        "the child reports its own process group"
    );
    let left = live_members(pgid);
    assert!(left.is_empty(), "processes of group {pgid} left: {left:?}");
}
