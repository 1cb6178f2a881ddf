//! The cuda executor and native module targets with real parts and no GPU:
//! the `preflight` binary re-executed as the cuda child, the real NVRTC and
//! nvcc from NVIDIA's wheels (`scripts/setup-env.sh`), and a libcuda that
//! is absent (forced with `PREFLIGHT_LIBCUDA`, so that these tests mean the
//! same on a machine with a GPU).
//!
//! Tests that need a GPU are `#[ignore]`d and run by `scripts/gpu-check.sh`.

mod common;
mod fake_cuda;

use common::{preflight_cmd, stderr, stdout};
use fake_cuda::cu13;
use kernel_preflight::classify::{self, Depth, Outcome, OutcomeKind, Phase};
use kernel_preflight::discover::{self, Named, NativeTarget, Target};
use kernel_preflight::fingerprint::{Fingerprint, NoStore, Sources};
use kernel_preflight::probe::cuda::{CudaExecutor, Launch, ModuleKind, ModuleSpec};
use kernel_preflight::probe::{Executor, Job, Subject};
use kernel_preflight::protocol::{Evidence, Failure, NvrtcError, Report};
use kernel_preflight::run::{self, Executors, Plan, PlanOptions, RunEvent};
use kernel_preflight::sandbox::{Cancel, Termination};
use std::path::{Path, PathBuf};
use std::process::Command;

const NO_LIBCUDA: &str = "/nonexistent/preflight-test/libcuda.so.1";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/native")
        .join(name)
}

fn nvrtc() -> PathBuf {
    cu13().join("lib/libnvrtc.so.13")
}

/// An executor of the real binary with no libcuda and the wheel's NVRTC.
fn executor() -> CudaExecutor {
    let mut e = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight")).with_nvrtc(Some(nvrtc()));
    e.libcuda = Some(NO_LIBCUDA.into());
    e
}

/// One cuda executor run, folded and classified.
struct Run {
    evidence: Evidence,
    report: Report,
    outcome: Outcome,
}

fn run_on(executor: &CudaExecutor, subject: Subject) -> Run {
    let evidence = executor
        .run(&Job::new(subject), &Cancel::new())
        .expect("run");
    Run {
        report: evidence.report(),
        outcome: classify::classify(&evidence),
        evidence,
    }
}

/// `spec` with `launches`, run by [`executor`].
fn run(spec: ModuleSpec, launches: &[Launch]) -> Run {
    run_on(
        &executor(),
        Subject::Module {
            spec,
            launches: launches.to_vec(),
        },
    )
}

fn cuda_source(path: PathBuf, target: Option<&str>) -> ModuleSpec {
    ModuleSpec {
        path,
        kind: ModuleKind::Cuda,
        nvrtc_options: Vec::new(),
        target: target.map(str::to_owned),
    }
}

fn axpy_launch() -> Launch {
    Launch {
        warmup: 1,
        iterations: 2,
        ..fake_cuda::axpy("preflight_axpy", 4)
    }
}

/// Compiles `source` with the wheel's nvcc into `out`.
fn nvcc(args: &[&str], source: &Path, out: &Path) {
    let status = Command::new(cu13().join("bin/nvcc"))
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(source)
        .status()
        .expect("run nvcc");
    assert!(status.success(), "nvcc {args:?} failed");
}

#[test]
fn nvrtc_on_broken_source_is_a_jit_compile_error_carrying_the_log() {
    let run = run(cuda_source(fixture("broken.cu"), None), &[axpy_launch()]);
    let o = &run.outcome;
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::JitCompileError, Phase::Load)
    );
    assert!(
        o.message.contains("identifier \"q\" is undefined"),
        "{}",
        o.message
    );
    assert!(
        o.stderr_tail.contains("1 error detected"),
        "{}",
        o.stderr_tail
    );
    match &run.report.failure {
        Some((Phase::Load, Failure::Nvrtc(NvrtcError { log, code, .. }))) => {
            assert_eq!(*code, 6, "NVRTC_ERROR_COMPILATION");
            assert!(log.contains("broken.cu(5): error"), "{log}");
        }
        other => panic!("expected an NVRTC failure, got {other:?}"),
    }
    assert_eq!(run.evidence.termination, Termination::Exited { code: 0 });
}

#[test]
fn nvrtc_on_good_source_compiles_then_load_fails_with_no_device() {
    let run = run(cuda_source(fixture("axpy/axpy.cu"), None), &[axpy_launch()]);
    let c = run.report.compiled.clone().expect("compiled");
    assert_eq!(c.image, "ptx", "no device: NVRTC's default target is PTX");
    assert!(c.target.contains("default"), "{}", c.target);
    assert!(c.bytes > 100);
    assert!(c.nvrtc_version.starts_with("13."), "{}", c.nvrtc_version);
    assert_eq!(run.outcome.kind, OutcomeKind::NoDevice);
    assert!(
        run.outcome.message.contains("libcuda.so.1"),
        "{}",
        run.outcome.message
    );
    assert!(run.report.load_ms.is_none(), "nothing was loaded");
}

#[test]
fn nvrtc_compiles_arch_specific_cubins() {
    let run = run(cuda_source(fixture("axpy/axpy.cu"), Some("sm_90a")), &[]);
    let c = run.report.compiled.clone().expect("compiled");
    assert_eq!((c.target.as_str(), c.image.as_str()), ("sm_90a", "cubin"));
    assert!(c.bytes > 1000);
}

#[test]
fn without_libcuda_the_executor_reports_no_device_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("axpy.cubin");
    nvcc(&["-cubin", "-arch=sm_90"], &fixture("axpy/axpy.cu"), &cubin);
    let spec = ModuleSpec {
        path: cubin,
        kind: ModuleKind::Cubin,
        nvrtc_options: Vec::new(),
        target: None,
    };
    let run = run(spec, &[axpy_launch()]);
    let o = &run.outcome;
    assert_eq!((o.kind, o.phase), (OutcomeKind::NoDevice, Phase::Start));
    assert_eq!((o.exit_code, o.signal.as_deref()), (Some(0), None));
    assert!(o.message.contains(NO_LIBCUDA), "{}", o.message);
    assert!(!o.hint.is_empty());
    assert_eq!(run.evidence.channel, Default::default(), "a clean channel");
    assert!(matches!(
        run.report.failure,
        Some((Phase::Start, Failure::LibraryMissing { .. }))
    ));
    assert!(
        !run.outcome.stderr_tail.contains("panicked"),
        "{}",
        run.outcome.stderr_tail
    );
}

#[test]
fn a_missing_nvrtc_is_a_jit_compile_error_not_a_crash() {
    let mut e = executor();
    e.nvrtc = Some("/nonexistent/libnvrtc.so.13".into());
    let run = run_on(
        &e,
        Subject::Module {
            spec: cuda_source(fixture("axpy/axpy.cu"), None),
            launches: Vec::new(),
        },
    );
    assert_eq!(run.outcome.kind, OutcomeKind::JitCompileError);
    assert!(run.outcome.message.contains("NVRTC is not loadable"));
    assert!(run.outcome.hint.contains("nvidia-cuda-nvrtc"));
}

#[test]
fn the_wheel_nvcc_compiles_a_cubin_for_a_real_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("axpy.cubin");
    nvcc(&["-cubin", "-arch=sm_90"], &fixture("axpy/axpy.cu"), &cubin);
    let bytes = std::fs::read(&cubin).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
    assert_eq!(machine, 190, "EM_CUDA");
}

#[test]
fn the_doctor_ptx_assembles_with_ptxas() {
    let dir = tempfile::tempdir().unwrap();
    let ptx = dir.path().join("axpy.ptx");
    std::fs::write(&ptx, include_str!("../src/doctor/kernels/axpy.ptx")).unwrap();
    let status = Command::new(cu13().join("bin/ptxas"))
        .args(["-arch=sm_90", "-o"])
        .arg(dir.path().join("axpy.cubin"))
        .arg(&ptx)
        .status()
        .expect("run ptxas");
    assert!(status.success());
}

/// A copy of the `axpy` native target with its cubin built for `arch`.
fn native_target(arch: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["axpy.cu", "preflight.toml"] {
        std::fs::copy(fixture("axpy").join(f), dir.path().join(f)).unwrap();
    }
    nvcc(
        &["-cubin", &format!("-arch={arch}")],
        &fixture("axpy/axpy.cu"),
        &dir.path().join("axpy.cubin"),
    );
    dir
}

fn load(dir: &Path) -> NativeTarget {
    match discover::discover(dir).expect("valid preflight.toml") {
        Target::Native(t) => t,
        Target::Hub(d) => panic!("discovered as a hub kernel: {d:?}"),
    }
}

#[test]
fn native_targets_become_one_job_per_module_in_the_plan() {
    let dir = native_target("sm_90");
    let target = load(dir.path());
    assert_eq!(target.modules.len(), 2);
    let fingerprint = Fingerprint::fast(&Sources::from_process(), &NoStore).unwrap();
    // No python executor: a native target needs none.
    let executors = Executors::new().with(executor());
    let plan = Plan::new(
        vec![Named {
            given: "axpy".into(),
            target: Target::Native(target.clone()),
        }],
        &fingerprint,
        &PlanOptions::default(),
        &executors,
        None,
    );
    let names: Vec<&str> = plan.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["axpy.cubin", "axpy.cu"]);
    assert!(
        plan.jobs
            .iter()
            .all(|j| j.skip.is_none() && j.key.is_none())
    );
    executors
        .ready_for(&plan)
        .expect("the cuda executor runs every job");
    let finished = std::sync::Mutex::new(Vec::new());
    let report = run::run(&plan, &executors, 2, &Cancel::new(), &|e: RunEvent<'_>| {
        if let RunEvent::Finished { job, .. } = e {
            finished.lock().unwrap().push(job.id);
        }
    });
    assert_eq!(finished.into_inner().unwrap().len(), 2);
    for r in &report.results {
        assert_eq!(
            r.outcome.kind,
            OutcomeKind::NoDevice,
            "{}: {:?}",
            r.variant,
            r.outcome
        );
    }
    assert!(!report.every_target_passes());
    // The source module still compiles without a GPU: a broken kernel
    // would say so here.
    let cu = &target.modules[1];
    assert!(run(cu.spec.clone(), &cu.launches).report.compiled.is_some());
}

#[test]
fn check_on_a_native_target_without_a_gpu_answers_no() {
    let dir = native_target("sm_90");
    let out = preflight_cmd()
        .args(["check", "--json"])
        .arg(dir.path())
        .env("PREFLIGHT_LIBCUDA", NO_LIBCUDA)
        .env("CUDA_HOME", cu13())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let results = json["results"].as_array().unwrap();
    let variants: Vec<&str> = results
        .iter()
        .map(|r| r["variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["axpy.cubin", "axpy.cu"]);
    for r in results {
        assert_eq!(r["outcome"]["kind"], "no_device");
        assert_eq!(r["declared"]["accepted"], true);
    }
}

#[test]
fn a_bad_preflight_toml_is_exit_2_with_the_key_that_is_wrong() {
    let out = preflight_cmd()
        .arg("check")
        .arg(fixture("bad"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("preflight.toml:7: module[0].launch[0].block: 2048 threads per block: CUDA allows at most 1024"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("preflight.toml"),
        "[[module]]\nfile = \"k.cubin\"\ngrid = 1\n",
    )
    .unwrap();
    let out = preflight_cmd()
        .arg("check")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("preflight.toml:3:1: "), "{err}");
    assert!(err.contains("unknown field `grid`"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
#[ignore = "needs a GPU: run scripts/gpu-check.sh"]
fn on_a_gpu_native_modules_pass_verified() {
    let probe = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    let first = run_on(&probe, Subject::Device);
    let device = first.report.device.expect("a GPU");
    let dir = native_target(&device.sm());
    let probe = probe.with_nvrtc(Some(nvrtc()));
    for module in load(dir.path()).modules {
        let run = run_on(
            &probe,
            Subject::Module {
                spec: module.spec.clone(),
                launches: module.launches.clone(),
            },
        );
        assert_eq!(
            run.outcome.kind,
            OutcomeKind::Pass,
            "{}: {:?}",
            module.name(),
            run.outcome
        );
        assert_eq!(run.outcome.depth, Some(Depth::Verified));
        assert!(run.evidence.timings().smoke_ms.is_some());
    }
}
