//! What a probe costs over the import it wraps: a bare `python -c` that
//! imports a variant the way the hub loader does, the hub loader itself
//! (`kernels.get_local_kernel`: its metadata parser and validators, then the
//! import; when the interpreter has `kernels`), against preflight's python
//! executor judging and importing the same variant (load only, and with an
//! empty smoke), each in a fresh sandbox with the driver, the result channel
//! and classification. Cases are interleaved round by round, their order
//! rotating, so machine drift hits all of them alike.
//!
//! `cargo bench --bench probe` (rounds: `PREFLIGHT_BENCH_ROUNDS`, default 60;
//! interpreter: `PREFLIGHT_BENCH_PYTHON`, else `.venv/bin/python`, else
//! `python3` on PATH).

mod support;

use kernel_preflight::classify::{self, OutcomeKind};
use kernel_preflight::probe::{Executor, Job, Placement, PythonExecutor, SmokeSource, Subject};
use kernel_preflight::sandbox::{Cancel, Limits};
use kernel_preflight::variant::VariantName;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Case, measure, print_cases, python, rounds};

/// A variant like the example's `torch-universal`: metadata and a package.
fn variant(root: &Path) -> PathBuf {
    let dir = root.join("build/torch-universal");
    std::fs::create_dir_all(dir.join("bench_kernel")).expect("variant dir");
    std::fs::write(
        dir.join("metadata.json"),
        r#"{"name":"bench-kernel","id":"_bench_kernel_0","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}"#,
    )
    .expect("metadata");
    std::fs::write(
        dir.join("bench_kernel/__init__.py"),
        "from ._impl import relu\n",
    )
    .expect("init");
    std::fs::write(
        dir.join("bench_kernel/_impl.py"),
        "def relu(out, x):\n    for i, v in enumerate(x):\n        out[i] = max(v, 0.0)\n",
    )
    .expect("impl");
    dir
}

/// The same import the hub loader (and the driver) does, as one `-c` line.
fn bare_import(python: &Path, variant: &Path) -> impl FnMut() {
    let code = format!(
        "import importlib.util, json, sys\n\
         meta = json.load(open({meta:?}))\n\
         spec = importlib.util.spec_from_file_location(meta['id'], {init:?})\n\
         m = importlib.util.module_from_spec(spec)\n\
         sys.modules[meta['id']] = m\n\
         spec.loader.exec_module(m)\n",
        meta = variant.join("metadata.json").display().to_string(),
        init = variant
            .join("bench_kernel/__init__.py")
            .display()
            .to_string(),
    );
    let python = python.to_path_buf();
    move || {
        let out = Command::new(&python)
            .args(["-B", "-c", &code])
            .stdin(Stdio::null())
            .output()
            .expect("bare python");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `kernels.get_local_kernel` on the variant, offline, from an empty folder.
fn hub_loader(python: &Path, variant: &Path, cwd: &Path) -> impl FnMut() {
    let code = format!(
        "from pathlib import Path\nimport kernels\nkernels.get_local_kernel(Path({:?}))\n",
        variant.display().to_string()
    );
    let python = python.to_path_buf();
    let cwd = cwd.to_path_buf();
    move || {
        let out = Command::new(&python)
            .args(["-B", "-c", &code])
            .current_dir(&cwd)
            .env("HF_HUB_OFFLINE", "1")
            .stdin(Stdio::null())
            .output()
            .expect("hub loader");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Whether `python` has the `kernels` package.
fn has_kernels(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            "import importlib.util, sys; sys.exit(importlib.util.find_spec('kernels') is None)",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

fn probed(python: &Path, variant: &Path, smoke: SmokeSource) -> impl FnMut() {
    let executor = PythonExecutor::new(python);
    let name = variant.file_name().expect("variant dir").to_string_lossy();
    let job = Job {
        device: Placement::Cpu,
        smoke,
        limits: Limits::default(),
        ..Job::new(Subject::Variant {
            name: VariantName::parse(&name).expect("a hub variant name"),
            path: variant.to_path_buf(),
        })
    };
    let cancel = Cancel::new();
    move || {
        let evidence = executor.run(&job, &cancel).expect("probe");
        let outcome = classify::classify(&evidence);
        assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    }
}

fn main() {
    let rounds = rounds(60);
    let python = python();
    let root = tempfile::tempdir().expect("temp dir");
    let variant = variant(root.path());
    let empty = root.path().join("empty_smoke.py");
    std::fs::write(&empty, "def smoke(kernel, device):\n    pass\n").expect("smoke");

    let cwd = root.path().join("cwd");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let mut cases: Vec<Case> = vec![(
        "bare python -c (hub-style import)",
        Box::new(bare_import(&python, &variant)),
    )];
    if has_kernels(&python) {
        cases.push((
            "kernels.get_local_kernel",
            Box::new(hub_loader(&python, &variant, &cwd)),
        ));
    }
    cases.extend::<[Case; 2]>([
        (
            "probe, load only",
            Box::new(probed(&python, &variant, SmokeSource::LoadOnly)),
        ),
        (
            "probe, empty smoke",
            Box::new(probed(&python, &variant, SmokeSource::File(empty.clone()))),
        ),
    ]);
    let samples = measure(&mut cases, rounds);

    println!("python: {}", python.display());
    println!(
        "rounds: {rounds} (after {} warm-up rounds)",
        rounds.div_ceil(10)
    );
    print_cases("probe overhead", &cases, samples);
}
