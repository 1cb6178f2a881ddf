//! What the cuda child is bound to and what it asks of the device: the
//! libcuda and libnvrtc its calls reach (checked with `dladdr` against the
//! files preflight chose), launches with more dynamic shared memory than
//! the kernel's limit (48 KiB less its static shared memory: opted in
//! first, refused with both numbers beyond the device's maximum), and the
//! chosen NVRTC in a bench child too. Run against the stand-in driver of
//! `tests/fixtures/native/fake_libcuda.c` and the real NVRTC of the test
//! environment.

mod fake_cuda;

use fake_cuda::fake_libcuda;
use kernel_preflight::classify::{self, Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::cuda::{CudaExecutor, Launch, ModuleKind, ModuleSpec};
use kernel_preflight::probe::{BenchExecutor, BenchRole, BenchSpec, Executor, Job, Subject};
use kernel_preflight::protocol::Report;
use kernel_preflight::sandbox::Cancel;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn cu13_lib() -> PathBuf {
    fake_cuda::cu13().join("lib")
}

fn axpy(shared_mem_bytes: u32) -> Launch {
    Launch {
        shared_mem_bytes,
        ..fake_cuda::axpy("preflight_axpy", 4)
    }
}

fn run(executor: &CudaExecutor, spec: ModuleSpec, launches: Vec<Launch>) -> (Report, Outcome) {
    let evidence = executor
        .run(
            &Job::new(Subject::Module { spec, launches }),
            &Cancel::new(),
        )
        .expect("run");
    (evidence.report(), classify::classify(&evidence))
}

fn cubin(dir: &Path) -> ModuleSpec {
    let path = dir.join("axpy.cubin");
    std::fs::write(&path, "the stand-in takes any module").unwrap();
    ModuleSpec {
        path,
        kind: ModuleKind::Cubin,
        nvrtc_options: Vec::new(),
        target: None,
    }
}

fn fake_executor(libcuda: &Path) -> CudaExecutor {
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(libcuda.to_path_buf());
    executor
}

#[test]
fn more_than_48_kib_of_shared_memory_is_opted_in_up_to_the_devices_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let executor = fake_executor(fake_libcuda());
    // 100 KiB: the stand-in refuses it (1) unless the kernel asked first.
    let (_, o) = run(&executor, cubin(dir.path()), vec![axpy(100 * 1024)]);
    assert_eq!(o.kind, OutcomeKind::Pass, "{o:?}");
    // 300 KiB: beyond the opt-in maximum of 227 KiB, said with both numbers.
    let (_, o) = run(&executor, cubin(dir.path()), vec![axpy(300 * 1024)]);
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::ProbeError, Phase::Launch),
        "{o:?}"
    );
    assert!(
        o.message.contains("307200 bytes") && o.message.contains("232448 bytes"),
        "{}",
        o.message
    );
}

#[test]
fn static_shared_memory_counts_toward_the_limit_a_launch_must_raise() {
    let dir = tempfile::tempdir().unwrap();
    let mut executor = fake_executor(fake_libcuda());
    // 16 KiB of static shared memory: the kernel's dynamic limit starts at
    // 32 KiB, so 40 KiB of dynamic must be opted in although it is < 48 KiB.
    executor.env.push((
        "FAKE_CUDA_STATIC_SHARED_preflight_axpy".into(),
        (16 * 1024).to_string().into(),
    ));
    let (_, o) = run(&executor, cubin(dir.path()), vec![axpy(40 * 1024)]);
    assert_eq!(o.kind, OutcomeKind::Pass, "{o:?}");
    // 220 KiB fits the 227 KiB maximum alone, not beside the static 16 KiB.
    let (_, o) = run(&executor, cubin(dir.path()), vec![axpy(220 * 1024)]);
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::ProbeError, Phase::Launch),
        "{o:?}"
    );
    assert!(
        o.message.contains("225280 bytes")
            && o.message.contains("static shared memory takes 16384"),
        "{}",
        o.message
    );
}

#[test]
fn the_child_reports_the_libcuda_it_is_bound_to() {
    let dir = tempfile::tempdir().unwrap();
    let (report, o) = run(
        &fake_executor(fake_libcuda()),
        cubin(dir.path()),
        Vec::new(),
    );
    assert_eq!(o.kind, OutcomeKind::Pass, "{o:?}");
    assert_eq!(
        report.runtime.libcuda.as_deref().map(Path::new),
        Some(fake_libcuda())
    );
}

#[test]
fn a_libcuda_whose_calls_land_in_another_file_is_a_probe_error_naming_both() {
    // A shim `libcuda.so.1` exporting nothing, linked against the stand-in
    // under another name: every entry point the child resolves through it
    // comes from the other file.
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("libreal_cuda.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libreal_cuda.so", "-o"])
        .arg(&real)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/fake_libcuda.c"))
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    let shim_dir = dir.path().join("shim");
    std::fs::create_dir(&shim_dir).unwrap();
    let shim = shim_dir.join("libcuda.so.1");
    std::fs::write(dir.path().join("shim.c"), "int preflight_shim;\n").unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(dir.path().join("shim.c"))
        .arg("-Wl,--no-as-needed")
        .arg(format!("-L{}", dir.path().display()))
        .arg("-l:libreal_cuda.so")
        .arg(format!("-Wl,-rpath,{}", dir.path().display()))
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    let (_, o) = run(&fake_executor(&shim), cubin(dir.path()), Vec::new());
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::ProbeError, Phase::Start),
        "{o:?}"
    );
    assert!(
        o.message.contains(&shim.display().to_string())
            && o.message.contains(&real.display().to_string()),
        "{}",
        o.message
    );
}

fn cuda_source(dir: &Path) -> ModuleSpec {
    let path = dir.join("k.cu");
    std::fs::write(
        &path,
        "extern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n",
    )
    .unwrap();
    ModuleSpec {
        path,
        kind: ModuleKind::Cuda,
        nvrtc_options: Vec::new(),
        target: Some("sm_90".into()),
    }
}

#[test]
fn the_child_reports_the_libnvrtc_it_is_bound_to() {
    let dir = tempfile::tempdir().unwrap();
    let chosen = cu13_lib().join("libnvrtc.so.13");
    let executor = fake_executor(fake_libcuda()).with_nvrtc(Some(chosen.clone()));
    let (report, o) = run(&executor, cuda_source(dir.path()), Vec::new());
    assert_eq!(o.kind, OutcomeKind::Pass, "{o:?}");
    let bound = report.runtime.nvrtc.expect("the bound libnvrtc");
    assert_eq!(
        std::fs::canonicalize(bound).unwrap(),
        std::fs::canonicalize(&chosen).unwrap()
    );
}

/// A stand-in `libnvrtc.so.13` in `dir` (its version and error text only):
/// a second NVRTC of the chosen one's name, as a toolkit on the loader's
/// path has.
fn other_nvrtc(dir: &Path, name: &str) -> PathBuf {
    std::fs::write(
        dir.join("nvrtc.c"),
        "int nvrtcVersion(int *major, int *minor) { *major = 12; *minor = 0; return 0; }\n\
         const char *nvrtcGetErrorString(int r) { (void)r; return \"fake\"; }\n",
    )
    .unwrap();
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(other.join(name))
        .arg(dir.join("nvrtc.c"))
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    other
}

#[test]
fn a_bench_child_compiles_with_the_chosen_nvrtc_before_another_of_its_name() {
    // What `check` of the same `.cu` target does: the chosen NVRTC, loaded
    // by path, answers to `libnvrtc.so.13` before the one on the path.
    let dir = tempfile::tempdir().unwrap();
    let other = other_nvrtc(dir.path(), "libnvrtc.so.13");
    let path = dir.path().join("axpy.cu");
    std::fs::write(
        &path,
        "extern \"C\" __global__ void preflight_axpy_nvrtc(float a, const float *x, float *y, unsigned n) {\n\
         unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n",
    )
    .unwrap();
    let job = Job::new(Subject::Module {
        spec: ModuleSpec {
            path,
            kind: ModuleKind::Cuda,
            nvrtc_options: Vec::new(),
            target: None,
        },
        launches: vec![fake_cuda::axpy("preflight_axpy_nvrtc", 4)],
    });
    let chosen = cu13_lib().join("libnvrtc.so.13");
    let mut executor = fake_executor(fake_libcuda()).with_nvrtc(Some(chosen));
    executor
        .env
        .push(("LD_LIBRARY_PATH".into(), other.into_os_string()));
    let spec = BenchSpec {
        role: BenchRole::Variant,
        workload: None,
        flush_l2: false,
    };
    let mut child = executor
        .start_bench(&[&job], "nvrtc", &spec, &Cancel::new())
        .unwrap();
    let ready = child.ready(Duration::from_secs(60));
    let evidence = child.finish(Duration::from_secs(30)).unwrap();
    let outcome = classify::classify(&evidence);
    assert!(ready.is_ok(), "{outcome:?}");
    assert!(outcome.kind.passed(), "{outcome:?}");
}

#[test]
fn a_libnvrtc_found_first_on_the_loaders_path_is_a_probe_error_naming_both() {
    // cudarc opens `libnvrtc.so` before `libnvrtc.so.13`: a copy of that
    // name on the loader's path would answer instead of the chosen one.
    let dir = tempfile::tempdir().unwrap();
    let other = other_nvrtc(dir.path(), "libnvrtc.so");
    let chosen = cu13_lib().join("libnvrtc.so.13");
    let mut executor = fake_executor(fake_libcuda()).with_nvrtc(Some(chosen.clone()));
    executor
        .env
        .push(("LD_LIBRARY_PATH".into(), other.clone().into_os_string()));
    let (_, o) = run(&executor, cuda_source(dir.path()), Vec::new());
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::ProbeError, Phase::Load),
        "{o:?}"
    );
    assert!(
        o.message.contains(&chosen.display().to_string())
            && o.message
                .contains(&other.join("libnvrtc.so").display().to_string()),
        "{}",
        o.message
    );
}
