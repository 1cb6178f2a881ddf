//! One table, both executors: a SIGSEGV, a hang past the deadline and an
//! `exit(1)` right after CUDA's "no kernel image" message, each caused in a
//! real python child (a fixture variant) and in a real cuda child (the
//! stand-in libcuda), are classified alike: same kind, same hint, same
//! signal or exit code, and the same message up to the phase it names.

mod fake_cuda;
mod probe_fixtures;

use kernel_preflight::classify::{self, Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::cuda::{CudaExecutor, ModuleKind, ModuleSpec};
use kernel_preflight::probe::{Executor, Job, SmokeSource, Subject};
use kernel_preflight::sandbox::{Cancel, Limits};
use std::time::Duration;

struct Case {
    name: &'static str,
    /// The variant's `__init__.py`: `go()` misbehaves.
    python: &'static str,
    /// `FAKE_CUDA`: the stand-in driver misbehaves the same way while loading.
    fake: &'static str,
    kind: OutcomeKind,
    signal: Option<&'static str>,
    exit_code: Option<i32>,
}

const NO_KERNEL_IMAGE: &str = "CUDA error (fake_launch_template.h:180): no kernel image is available for execution on the device";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "SIGSEGV",
            python: "import os, signal\ndef go():\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
            fake: "crash",
            kind: OutcomeKind::Crashed,
            signal: Some("SIGSEGV"),
            exit_code: None,
        },
        Case {
            name: "hang past the deadline",
            python: "import time\ndef go():\n    time.sleep(1000)\n",
            fake: "hang",
            kind: OutcomeKind::Timeout,
            signal: None,
            exit_code: None,
        },
        Case {
            name: "exit(1) after a CUDA error message",
            python: "import os, sys\ndef go():\n    sys.stderr.write('CUDA error (fake_launch_template.h:180): no kernel image is available for execution on the device\\n')\n    sys.stderr.flush()\n    os._exit(1)\n",
            fake: "exit",
            kind: OutcomeKind::UnsupportedArch,
            signal: None,
            exit_code: Some(1),
        },
    ]
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(3),
        grace: Duration::from_millis(500),
        ..Limits::default()
    }
}

fn python_outcome(case: &Case) -> Outcome {
    let repo = probe_fixtures::Repo::new();
    let variant = repo.variant("torch-universal", case.python);
    let smoke =
        SmokeSource::File(repo.file("smoke.py", "def smoke(kernel, device):\n    kernel.go()\n"));
    probe_fixtures::probe(&variant, smoke, limits()).1
}

fn cuda_outcome(case: &Case) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.cubin");
    std::fs::write(&path, b"the stand-in driver loads anything").unwrap();
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(fake_cuda::fake_libcuda().to_path_buf());
    executor.env.push(("FAKE_CUDA".into(), case.fake.into()));
    let job = Job {
        limits: limits(),
        ..Job::new(Subject::Module {
            spec: ModuleSpec {
                path,
                kind: ModuleKind::Cubin,
                nvrtc_options: Vec::new(),
                target: None,
            },
            launches: Vec::new(),
        })
    };
    let evidence = executor.run(&job, &Cancel::new()).expect("run");
    classify::classify(&evidence)
}

/// The message with the phase it names taken out.
fn without_phase(o: &Outcome) -> String {
    o.message.replace(o.phase.as_str(), "<phase>")
}

#[test]
fn both_executors_classify_the_same_death_the_same_way() {
    let mut failures = Vec::new();
    for case in cases() {
        let python = python_outcome(&case);
        let cuda = cuda_outcome(&case);
        assert_eq!(python.phase, Phase::Smoke, "{}: {python:?}", case.name);
        assert_eq!(cuda.phase, Phase::Load, "{}: {cuda:?}", case.name);
        for (executor, o) in [("python", &python), ("cuda", &cuda)] {
            if o.kind != case.kind
                || o.signal.as_deref() != case.signal
                || o.exit_code != case.exit_code
            {
                failures.push(format!("{} ({executor}): {o:?}", case.name));
            }
        }
        if python.hint != cuda.hint
            || python.transient != cuda.transient
            || without_phase(&python) != without_phase(&cuda)
        {
            failures.push(format!(
                "{}: the executors disagree\n python: {python:?}\n   cuda: {cuda:?}",
                case.name
            ));
        }
        if case.kind == OutcomeKind::UnsupportedArch {
            assert!(python.message.contains(NO_KERNEL_IMAGE), "{python:?}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
