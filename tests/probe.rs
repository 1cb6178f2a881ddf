//! The python executor end to end: real interpreters, real fixture variants
//! that misbehave in every way the issue lists, classified as `check` does.
//! After each probe no process of its group is left (checked in `probe`).

mod probe_fixtures;

use kernel_preflight::classify::{Depth, OutcomeKind, Phase};
use kernel_preflight::discover::RepoId;
use kernel_preflight::probe::{
    Executor, Forks, LibraryEntry, PythonExecutor, SmokeChoice, SmokeSource,
};
use kernel_preflight::sandbox::{Limits, Termination};
use probe_fixtures::{Repo, probe, probe_with, quick_limits};
use std::time::{Duration, Instant};

const ADD: &str = "def add(a, b):\n    return [x + y for x, y in zip(a, b)]\n";

fn smoke_file(repo: &Repo, body: &str) -> SmokeSource {
    SmokeSource::File(repo.file("smoke.py", &format!("def smoke(kernel, device):\n{body}")))
}

#[test]
fn passes_and_is_verified() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let smoke = smoke_file(&repo, "    return kernel.add([1, 2], [3, 4]), [4, 6]\n");
    let (run, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert_eq!(outcome.depth, Some(Depth::Verified));
    assert_eq!(outcome.phase, Phase::Done);
    assert_eq!(outcome.exit_code, Some(0));
    assert!(run.report.import_ms.is_some() && run.report.smoke_ms.is_some());
    assert_eq!(
        run.report.module.as_deref(),
        Some("_fixture_torch_universal")
    );
}

#[test]
fn smoke_returning_none_reaches_smoke_depth_and_no_smoke_is_load_only() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.add([1], [2])\n"),
        quick_limits(),
    );
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Smoke))
    );
    let (run, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Load))
    );
    assert_eq!(run.report.smoke_ms, None);
}

#[test]
fn dict_results_carry_tolerances() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let loose =
        "    return {'actual': [1.0, 2.001], 'expected': [1.0, 2.0], 'rtol': 0, 'atol': 0.01}\n";
    let (_, outcome) = probe(&v, smoke_file(&repo, loose), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    let tight = "    return {'actual': [1.0, 2.001], 'expected': [1.0, 2.0], 'atol': 1e-6}\n";
    let (_, outcome) = probe(&v, smoke_file(&repo, tight), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::WrongResult, "{outcome:?}");
}

#[test]
fn objects_with_tolist_compare_without_numpy_or_torch() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let smoke =
        "    import array\n    return array.array('d', kernel.add([1, 2], [3, 4])), (4, 6)\n";
    let (_, outcome) = probe(&v, smoke_file(&repo, smoke), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    let nan = "    return [float('nan')], [float('nan')]\n";
    let (_, outcome) = probe(&v, smoke_file(&repo, nan), quick_limits());
    assert_eq!(
        outcome.kind,
        OutcomeKind::WrongResult,
        "NaN never matches: {outcome:?}"
    );
}

#[test]
fn wrong_result() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "def add(a, b):\n    return [x - y for x, y in zip(a, b)]\n",
    );
    let smoke = smoke_file(
        &repo,
        "    return kernel.add([1, 2, 3], [1, 1, 1]), [2, 3, 4]\n",
    );
    let (_, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::WrongResult, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Verify);
    assert!(
        outcome.message.contains("3 of 3 elements"),
        "{}",
        outcome.message
    );
}

#[test]
fn shape_mismatch_is_a_wrong_result() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let smoke = smoke_file(&repo, "    return [[1, 2]], [1, 2]\n");
    let (_, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::WrongResult);
    assert!(
        outcome.message.contains("shape (1, 2), expected (2,)"),
        "{}",
        outcome.message
    );
}

#[test]
fn cuda_no_kernel_image_then_os_exit_1_is_unsupported_arch() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-cuda",
        "import os, sys\n\
         def relu(x):\n    \
             sys.stderr.write('CUDA error (flash_fwd_launch_template.h:180): no kernel image is available for execution on the device\\n')\n    \
             os._exit(1)\n",
    );
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.relu([1.0])\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::UnsupportedArch, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Smoke);
    assert_eq!(outcome.exit_code, Some(1));
    assert!(outcome.stderr_tail.contains("no kernel image"));
}

#[test]
fn segfault_is_crashed_sigsegv() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "import ctypes\nctypes.string_at(0)\n");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Crashed, "{outcome:?}");
    assert_eq!(outcome.signal.as_deref(), Some("SIGSEGV"));
    assert_eq!(outcome.phase, Phase::Import);
    assert!(
        outcome.stderr_tail.contains("Fatal Python error"),
        "faulthandler's traceback is kept: {outcome:?}"
    );
}

#[test]
fn abort_is_crashed_sigabrt() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "import os\ndef go():\n    os.abort()\n");
    let (_, outcome) = probe(&v, smoke_file(&repo, "    kernel.go()\n"), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Crashed, "{outcome:?}");
    assert_eq!(outcome.signal.as_deref(), Some("SIGABRT"));
    assert_eq!(outcome.phase, Phase::Smoke);
}

fn short_deadline() -> Limits {
    Limits {
        timeout: Duration::from_millis(1500),
        grace: Duration::from_millis(700),
        ..Limits::default()
    }
}

#[test]
fn hang_is_timeout() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import time\ndef hang():\n    time.sleep(1000)\n",
    );
    let start = Instant::now();
    let (run, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.hang()\n"),
        short_deadline(),
    );
    assert_eq!(outcome.kind, OutcomeKind::Timeout, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Smoke);
    assert!(matches!(
        run.evidence.termination,
        Termination::TimedOut {
            needed_sigkill: false,
            ..
        }
    ));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn ignoring_sigterm_and_hanging_is_timeout_after_sigkill() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(1000)\n",
    );
    let start = Instant::now();
    let (run, outcome) = probe(&v, SmokeSource::LoadOnly, short_deadline());
    assert_eq!(outcome.kind, OutcomeKind::Timeout, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Import);
    assert!(matches!(
        run.evidence.termination,
        Termination::TimedOut {
            needed_sigkill: true,
            ..
        }
    ));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn grandchild_holding_stdout_passes_promptly_and_is_reported_as_a_leak() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import subprocess\nsubprocess.Popen(['sleep', '1000'])\n",
    );
    let start = Instant::now();
    let (run, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
    assert!(
        run.evidence.leaked.is_some(),
        "the sleeping grandchild is reported"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn missing_module_is_missing_dependency_naming_it() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "import einops_not_installed_here\n");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::MissingDependency, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Import);
    assert!(outcome.message.contains("einops_not_installed_here"));
    assert!(
        outcome.stderr_tail.contains("ModuleNotFoundError"),
        "the traceback reaches stderr"
    );
}

#[test]
fn relative_imports_work_and_the_module_dir_layout_is_found() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "");
    std::fs::remove_file(v.join("__init__.py")).unwrap();
    repo.file(
        "build/torch-universal/fixture/__init__.py",
        "from ._impl import add\n",
    );
    repo.file("build/torch-universal/fixture/_impl.py", ADD);
    let smoke = smoke_file(&repo, "    return kernel.add([1], [1]), [2]\n");
    let (_, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
}

#[test]
fn undefined_symbol_in_a_shared_object_is_import_error_naming_it() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libbroken.so'))\n",
    );
    let source = repo.file(
        "src/broken.c",
        "extern int preflight_missing_fn(void);\nint entry(void) { return preflight_missing_fn(); }\n",
    );
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(v.join("libbroken.so"))
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc built the shared object");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ImportError, "{outcome:?}");
    assert!(
        outcome
            .message
            .contains("undefined symbol: preflight_missing_fn"),
        "{}",
        outcome.message
    );
}

#[test]
fn missing_nvcc_is_nvcc_missing() {
    let repo = Repo::new();
    let empty = tempfile::tempdir().unwrap();
    let v = repo.variant(
        "torch-cuda",
        &format!(
            "import subprocess\ndef build():\n    subprocess.run(['nvcc', '--version'], env={{'PATH': {:?}}}, check=True)\n",
            empty.path().display().to_string()
        ),
    );
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.build()\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::NvccMissing, "{outcome:?}");
    assert_eq!(outcome.phase, Phase::Smoke);
}

#[test]
fn a_relative_import_of_a_missing_own_submodule_is_import_error() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "from ._ops import ops\n");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ImportError, "{outcome:?}");
    assert!(
        outcome.message.contains("_fixture_torch_universal._ops"),
        "{}",
        outcome.message
    );
}

#[test]
fn broken_metadata_is_import_error() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    std::fs::write(v.join("metadata.json"), "{\"name\": \"fixture\",").unwrap();
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ImportError, "{outcome:?}");
    assert!(outcome.message.contains("metadata.json"));
}

#[test]
fn unusable_smoke_file_is_a_probe_error_not_the_kernels_fault() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let file = repo.file("not_a_smoke.py", "def check(kernel):\n    pass\n");
    let (_, outcome) = probe(&v, SmokeSource::File(file), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ProbeError, "{outcome:?}");
    assert!(outcome.message.contains("no function smoke"));
    let (_, outcome) = probe(&v, smoke_file(&repo, "    return 42\n"), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::ProbeError, "{outcome:?}");
}

#[test]
fn a_missing_interpreter_is_a_probe_error() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let executor = PythonExecutor::new(repo.root().join("no-such-python"));
    let err = executor
        .run(
            &probe_fixtures::job(&v, SmokeSource::LoadOnly, quick_limits()),
            &kernel_preflight::sandbox::Cancel::new(),
        )
        .expect_err("nothing to execute");
    assert!(err.to_string().contains("no-such-python"), "{err}");
}

const BENCHMARK: &str = r#"
from kernels.benchmark import Benchmark

class AddBenchmark(Benchmark):
    seed = 1

    def setup_large(self):
        raise AssertionError("the smallest workload runs, not this one")

    def benchmark_large(self):
        pass

    def setup_small(self):
        self.a, self.b = [1.0, 2.0], [3.0, 4.0]

    def benchmark_small(self):
        self.out = self.kernel.add(self.a, self.b)

    def verify_small(self):
        return [4.0, 6.0]
"#;

fn benchmarks(repo: &Repo) -> SmokeSource {
    repo.file("benchmarks/benchmark_add.py", BENCHMARK);
    SmokeSource::choose(&SmokeChoice::default(), Some(&repo.root()), None)
}

#[test]
fn repo_benchmarks_run_the_smallest_workload_and_verify_it() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let smoke = benchmarks(&repo);
    assert!(matches!(smoke, SmokeSource::Benchmarks { .. }), "{smoke:?}");
    let (_, outcome) = probe(&v, smoke, quick_limits());
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Verified)),
        "{outcome:?}"
    );
}

#[test]
fn repo_benchmarks_catch_a_wrong_result() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "def add(a, b):\n    return list(a)\n");
    let (_, outcome) = probe(&v, benchmarks(&repo), quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::WrongResult, "{outcome:?}");
}

#[test]
fn benchmarks_run_without_the_kernels_package() {
    // A fresh venv without system site-packages has no `kernels`: the driver
    // provides a compatible `kernels.benchmark.Benchmark` itself.
    let envs = tempfile::tempdir().unwrap();
    let venv = envs.path().join("bare");
    let status = std::process::Command::new(probe_fixtures::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python -m venv");
    assert!(status.success());
    let bare = venv.join("bin/python");
    let has_kernels = std::process::Command::new(&bare)
        .args(["-c", "import kernels"])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        !has_kernels.success(),
        "the bare venv must not have kernels"
    );
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let (_, outcome) = probe_with(&bare, &v, benchmarks(&repo), quick_limits());
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Verified)),
        "{outcome:?}"
    );
}

#[test]
fn smoke_sources_are_chosen_most_specific_first() {
    let repo = Repo::new();
    let root = repo.root();
    let explicit = repo.file("mine.py", "def smoke(kernel, device):\n    pass\n");
    let activation = RepoId::parse("kernels-community/activation").unwrap();
    let fork = RepoId::parse("myorg/activation").unwrap();
    let relu = LibraryEntry::named("kernels-community/relu").unwrap();
    let file = SmokeChoice {
        file: Some(explicit.clone()),
        library: Some(relu),
        ..SmokeChoice::default()
    };
    let none = SmokeChoice::default();
    let library_as_relu = SmokeChoice {
        library: Some(relu),
        ..SmokeChoice::default()
    };
    let forks = SmokeChoice {
        forks: Forks::parse("myorg/activation=kernels-community/relu").unwrap(),
        ..SmokeChoice::default()
    };
    let choose =
        |choice: &SmokeChoice, id: Option<&RepoId>| SmokeSource::choose(choice, Some(&root), id);
    assert_eq!(
        choose(&file, Some(&activation)),
        SmokeSource::File(explicit.clone())
    );
    // No benchmarks/ yet: the library's smoke for the repo id it was
    // written for, else load only; never by the name alone.
    let written_for = |s: SmokeSource| match s {
        SmokeSource::Library(entry) => Some(entry.id()),
        _ => None,
    };
    assert_eq!(
        written_for(choose(&none, Some(&activation))),
        Some("kernels-community/activation")
    );
    assert_eq!(choose(&none, Some(&fork)), SmokeSource::LoadOnly);
    assert_eq!(choose(&none, None), SmokeSource::LoadOnly);
    // What the user chose by name comes before the repo's own.
    assert_eq!(
        written_for(choose(&library_as_relu, None)),
        Some("kernels-community/relu")
    );
    assert_eq!(
        written_for(choose(&forks, Some(&fork))),
        Some("kernels-community/relu")
    );
    repo.file("benchmarks/benchmark.py", BENCHMARK);
    assert!(matches!(
        choose(&none, Some(&activation)),
        SmokeSource::Benchmarks { .. }
    ));
    assert!(matches!(
        choose(&forks, Some(&activation)),
        SmokeSource::Benchmarks { .. }
    ));
    assert_eq!(
        written_for(choose(&forks, Some(&fork))),
        Some("kernels-community/relu")
    );
}

#[test]
fn the_variant_directory_is_left_untouched() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "");
    std::fs::remove_file(v.join("__init__.py")).unwrap();
    repo.file(
        "build/torch-universal/fixture/__init__.py",
        "from ._impl import add\n",
    );
    repo.file("build/torch-universal/fixture/_impl.py", ADD);
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass);
    assert!(
        !v.join("fixture/__pycache__").exists(),
        "no bytecode written into the variant"
    );
}

#[test]
fn the_kernel_does_not_see_the_result_channel() {
    let repo = Repo::new();
    let v = repo.variant(
        "torch-universal",
        "import os\nassert 'PREFLIGHT_RESULT_FILE' not in os.environ, 'channel leaked to the kernel'\n",
    );
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::Pass, "{outcome:?}");
}

/// The real nvcc of the test environment (the `nvidia-cuda-nvcc` wheel).
fn wheel_nvcc() -> std::path::PathBuf {
    let lib = probe_fixtures::python()
        .parent()
        .and_then(|bin| bin.parent())
        .map(|venv| venv.join("lib"))
        .expect("venv layout");
    let found = std::fs::read_dir(&lib)
        .expect("venv lib")
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.exists());
    found.expect("the nvidia-cuda-nvcc wheel is installed (scripts/setup-env.sh)")
}

fn nvcc_kernel(repo: &Repo, args: &str) -> std::path::PathBuf {
    let source = repo.file("src/k.cu", "__global__ void k() { undefined_thing(); }\n");
    repo.variant(
        "torch-cuda",
        &format!(
            "import subprocess, tempfile\n\
             def build():\n    \
                 out = tempfile.mkdtemp()\n    \
                 subprocess.run([{nvcc:?}, {args}, '-c', {source:?}, '-o', out + '/k.o'], check=True)\n",
            nvcc = wheel_nvcc().display().to_string(),
            source = source.display().to_string(),
        ),
    )
}

#[test]
fn a_real_nvcc_compile_error_is_jit_compile_error() {
    let repo = Repo::new();
    let v = nvcc_kernel(&repo, "'-arch=sm_90'");
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.build()\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::JitCompileError, "{outcome:?}");
    assert!(
        outcome.message.contains("undefined_thing"),
        "{}",
        outcome.message
    );
}

#[test]
fn nvcc_that_does_not_know_the_gpu_is_nvcc_too_old() {
    let repo = Repo::new();
    let v = nvcc_kernel(&repo, "'-arch=sm_999'");
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.build()\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::NvccTooOld, "{outcome:?}");
    assert!(outcome.message.contains("sm_999"), "{}", outcome.message);
}

#[test]
fn a_dependency_without_the_imported_name_is_dependency_version() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", "from json import dumps_fast\n");
    let (_, outcome) = probe(&v, SmokeSource::LoadOnly, quick_limits());
    assert_eq!(outcome.kind, OutcomeKind::DependencyVersion, "{outcome:?}");
    assert!(
        outcome.message.contains("`json` has no `dumps_fast`"),
        "{}",
        outcome.message
    );
}

#[test]
fn calling_what_the_kernel_lacks_is_missing_symbol() {
    let repo = Repo::new();
    let v = repo.variant("torch-universal", ADD);
    let (_, outcome) = probe(
        &v,
        smoke_file(&repo, "    kernel.gelu_fast([1.0])\n"),
        quick_limits(),
    );
    assert_eq!(outcome.kind, OutcomeKind::MissingSymbol, "{outcome:?}");
    assert!(outcome.message.contains("gelu_fast"), "{}", outcome.message);
}
