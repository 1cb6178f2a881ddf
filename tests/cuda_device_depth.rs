//! The device depth of compiled CUDA variants: shared objects built with
//! the real nvcc (from the test environment), their embedded fatbins loaded
//! by the cuda executor against the stand-in driver of
//! `tests/fixtures/native/fake_libcuda.c`, which reads each fatbin's entry
//! headers against its device's capability as the real driver does and
//! answers 0, 209 or 222. What only a GPU can show (the real driver's
//! choice, real JIT times) is `scripts/gpu-check.sh`'s.

mod common;
mod fake_cuda;
#[path = "inspect_support/mod.rs"]
mod inspect_support;

use fake_cuda::fake_libcuda;
use kernel_preflight::classify::{self, Depth, Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::cuda::{CudaExecutor, MODULE_LOADING};
use kernel_preflight::probe::{Executor, Job, Subject};
use kernel_preflight::protocol::{EmbeddedLoad, Event, Report};
use kernel_preflight::sandbox::Cancel;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const VARIANT: &str = "torch29-cxx11-cu130-x86_64-linux";

/// `_ops.so` built from the fixture kernel with nvcc `args`.
fn shared_object(out: &Path, args: &[&str]) {
    let status = Command::new(inspect_support::cuda_tool("nvcc"))
        .args(["-Xcompiler", "-fPIC", "-shared"])
        .args(args)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/cuda/add.cu"
        ))
        .arg("-o")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "nvcc {args:?}");
}

/// `_ops.so` linked from two object files, `add.cu` built with nvcc
/// `first` and `scale.cu` with `second`: two fatbin containers, as a build
/// gives a kernel section with capabilities of its own.
fn two_containers(out: &Path, first: &[&str], second: &[&str]) {
    let nvcc = inspect_support::cuda_tool("nvcc");
    let dir = out.parent().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
    for (source, args) in [("add", first), ("scale", second)] {
        let status = Command::new(&nvcc)
            .args(["-Xcompiler", "-fPIC", "-c"])
            .args(args)
            .arg(fixtures.join(format!("{source}.cu")))
            .arg("-o")
            .arg(dir.join(format!("{source}.o")))
            .status()
            .unwrap();
        assert!(status.success(), "nvcc -c {source}.cu {args:?}");
    }
    // Host code only at the link, as a build's linker does: nvcc's device
    // link would add a (default sm_75) container of its own.
    let status = Command::new(&nvcc)
        .args(["-shared", "--no-device-link"])
        .args([dir.join("add.o"), dir.join("scale.o")])
        .arg("-o")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "nvcc -shared");
    for o in ["add.o", "scale.o"] {
        std::fs::remove_file(dir.join(o)).unwrap();
    }
}

const SM80: &[&str] = &["-gencode", "arch=compute_80,code=sm_80"];
const SM90: &[&str] = &["-gencode", "arch=compute_90,code=sm_90"];
const SM100A: &[&str] = &["-gencode", "arch=compute_100a,code=sm_100a"];

/// Variant directories, each holding one `_ops.so`, built once per test
/// binary: `sm80` (SASS for sm_80 only), `ptx80` (PTX for compute_80
/// only), `sm90` (SASS for sm_90), `rdc` (`-rdc=true`, sm_80 SASS),
/// `multi` (a container of sm_90 SASS and one of sm_100a SASS) and
/// `others` (one of sm_80 SASS and one of sm_100a SASS).
fn variants() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let builds: [(&str, &[&str]); 4] = [
            ("sm80", &["-gencode", "arch=compute_80,code=sm_80"]),
            ("ptx80", &["-gencode", "arch=compute_80,code=compute_80"]),
            ("sm90", &["-gencode", "arch=compute_90,code=sm_90"]),
            (
                "rdc",
                &["-rdc=true", "-gencode", "arch=compute_90,code=sm_90"],
            ),
        ];
        std::thread::scope(|s| {
            for (name, args) in builds {
                let variant = dir.path().join(name).join(VARIANT);
                std::fs::create_dir_all(&variant).unwrap();
                std::fs::write(variant.join("__init__.py"), "").unwrap();
                s.spawn(move || shared_object(&variant.join("_ops.so"), args));
            }
            for (name, first) in [("multi", SM90), ("others", SM80)] {
                let variant = dir.path().join(name).join(VARIANT);
                std::fs::create_dir_all(&variant).unwrap();
                std::fs::write(variant.join("__init__.py"), "").unwrap();
                s.spawn(move || two_containers(&variant.join("_ops.so"), first, SM100A));
            }
        });
        dir
    })
    .path()
}

fn variant(name: &str) -> PathBuf {
    variants().join(name).join(VARIANT)
}

struct Run {
    report: Report,
    outcome: Outcome,
}

/// The device step the cuda executor gives the import of the variant
/// `name` (a compiled CUDA variant: its embedded code, at device depth).
fn device_step(executor: &CudaExecutor, name: &str) -> Job {
    let import = Job::new(Subject::Variant {
        name: VARIANT.parse().unwrap(),
        path: variant(name),
    });
    let step = executor
        .device_step(&import)
        .expect("a compiled CUDA variant has a device step");
    assert_eq!(step.depth, Depth::Device);
    assert!(matches!(step.subject, Subject::DeviceCode { .. }));
    step
}

/// The cuda executor's device-depth job for the variant `name`, on the
/// stand-in driver with `env`.
fn device_depth(name: &str, env: &[(&str, &str)]) -> Run {
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(fake_libcuda().to_path_buf());
    executor
        .env
        .extend(env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    let job = device_step(&executor, name);
    let evidence = executor.run(&job, &Cancel::new()).expect("run");
    Run {
        report: evidence.report(),
        outcome: classify::classify(&evidence),
    }
}

fn only_file(run: &Run) -> &EmbeddedLoad {
    assert_eq!(run.report.embedded.len(), 1, "{:?}", run.report);
    assert_eq!(run.outcome.embedded, run.report.embedded);
    &run.report.embedded[0]
}

#[test]
fn sass_for_another_architecture_is_unsupported_at_the_device_depth() {
    let run = device_depth("sm80", &[]);
    let o = &run.outcome;
    assert_eq!(
        (o.kind, o.phase),
        (OutcomeKind::UnsupportedArch, Phase::Load),
        "{o:?}"
    );
    assert!(
        o.message
            .starts_with("cuModuleLoadDataEx (_ops.so): CUDA_ERROR_NO_BINARY_FOR_GPU (209)"),
        "{}",
        o.message
    );
    let file = only_file(&run);
    assert_eq!(file.file, "_ops.so");
    assert_eq!(file.images, "SASS for sm_80, no PTX");
    assert_eq!((file.loaded, file.relocatable), (0, 0));
    assert_eq!(file.taken, None);
    assert_eq!(file.error.as_ref().map(|e| e.code), Some(209));
    // The same file on an A100 (8.0) loads its SASS.
    let run = device_depth("sm80", &[("FAKE_CUDA_CC", "8.0")]);
    assert_eq!(run.outcome.kind, OutcomeKind::Pass, "{:?}", run.outcome);
    assert_eq!(only_file(&run).taken.as_deref(), Some("sm_80 SASS"));
}

#[test]
fn ptx_is_jit_compiled_and_its_time_reported() {
    let run = device_depth("ptx80", &[]);
    let o = &run.outcome;
    assert_eq!(
        (o.kind, o.depth),
        (OutcomeKind::Pass, Some(Depth::Device)),
        "{o:?}"
    );
    let file = only_file(&run);
    assert_eq!(file.images, "no SASS, PTX for compute_80");
    assert_eq!(file.taken.as_deref(), Some("compute_80 PTX, JIT"));
    assert!(file.loaded >= 1, "{file:?}");
    // The stand-in reports 12.5 ms of JIT wall time per PTX load.
    assert_eq!(file.jit_ms, Some(12.5 * f64::from(file.loaded)));
    assert!(file.error.is_none());

    // A driver whose JIT stops at ISA 9.0 refuses nvcc 13.5's PTX (ISA 9.5).
    let run = device_depth("ptx80", &[("FAKE_CUDA_PTX_ISA", "9.0")]);
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::PtxTooNew, Phase::Load),
        "{:?}",
        run.outcome
    );
}

#[test]
fn sass_for_this_device_loads_without_a_jit() {
    let run = device_depth("sm90", &[]);
    assert_eq!(
        (run.outcome.kind, run.outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Device))
    );
    let file = only_file(&run);
    assert_eq!(file.taken.as_deref(), Some("sm_90 SASS"));
    assert_eq!(file.jit_ms, None);
    assert!(file.loaded >= 1);
}

#[test]
fn a_container_for_other_gpus_is_not_a_failure_while_another_loads() {
    // A multi-architecture build on a 9.0 GPU: the sm_100a container is
    // refused (209), as the driver's rule says it must be; the sm_90 one
    // loads, and the file passes.
    let run = device_depth("multi", &[]);
    assert_eq!(
        (run.outcome.kind, run.outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Device)),
        "{:?}",
        run.outcome
    );
    let file = only_file(&run);
    assert_eq!(file.images, "SASS for sm_90 and sm_100a, no PTX");
    assert_eq!((file.loaded, file.other_gpus), (1, 1), "{file:?}");
    assert_eq!(file.taken.as_deref(), Some("sm_90 SASS"));
    assert!(file.error.is_none(), "{file:?}");
    // On a 10.0 GPU the sm_100a container loads and the sm_90 one is the
    // one for other GPUs.
    let run = device_depth("multi", &[("FAKE_CUDA_CC", "10.0")]);
    assert_eq!(run.outcome.kind, OutcomeKind::Pass, "{:?}", run.outcome);
    let file = only_file(&run);
    assert_eq!((file.loaded, file.other_gpus), (1, 1), "{file:?}");
    assert_eq!(file.taken.as_deref(), Some("sm_100a SASS"));
    // When no container is for this GPU, the file fails as one would.
    let run = device_depth("others", &[]);
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::UnsupportedArch, Phase::Load),
        "{:?}",
        run.outcome
    );
    let file = only_file(&run);
    assert_eq!((file.loaded, file.other_gpus), (0, 2), "{file:?}");
    assert_eq!(file.error.as_ref().map(|e| e.code), Some(209));
}

#[test]
fn relocatable_device_code_is_reported_not_loadable_alone_not_failed() {
    // nvcc -rdc=true keeps the relocatable cubin (ELF type ET_REL) in
    // __nv_relfatbin, beside the device-linked one in .nv_fatbin.
    let run = device_depth("rdc", &[]);
    assert_eq!(run.outcome.kind, OutcomeKind::Pass, "{:?}", run.outcome);
    let file = only_file(&run);
    assert_eq!(file.relocatable, 1, "{file:?}");
    assert_eq!(file.loaded, 1, "{file:?}");
    assert_eq!(file.taken.as_deref(), Some("sm_90 SASS"));
}

#[test]
fn the_cuda_child_loads_modules_eagerly() {
    // The driver itself reports what CUDA_MODULE_LOADING its process has:
    // a missing image fails at load, not at the first launch.
    assert_eq!(MODULE_LOADING, ("CUDA_MODULE_LOADING", "EAGER"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.cubin");
    std::fs::write(&path, "a module the stand-in takes").unwrap();
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(fake_libcuda().to_path_buf());
    let job = Job::new(Subject::Module {
        spec: kernel_preflight::probe::cuda::ModuleSpec {
            path,
            kind: kernel_preflight::probe::cuda::ModuleKind::Cubin,
            nvrtc_options: Vec::new(),
            target: None,
        },
        launches: Vec::new(),
    });
    let evidence = executor.run(&job, &Cancel::new()).expect("run");
    let logs: Vec<&str> = evidence
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Loaded { info_log } => Some(info_log.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(logs, ["fake driver: CUDA_MODULE_LOADING=EAGER"]);
}

#[test]
fn check_plans_the_device_depth_of_a_compiled_cuda_variant() {
    // A CUDA variant whose import cannot confirm a device (no torch in the
    // test environment): the import's no_device is the answer, and the
    // loads of its embedded code (here refused: sm_80 SASS on the stand-in's
    // sm_90) travel with it. The job is keyed with its device step.
    let tmp = tempfile::tempdir().unwrap();
    let repo = common::kernel_repo(tmp.path(), "tiny", &[VARIANT.to_owned()], "X = 1\n");
    std::fs::copy(
        variant("sm80").join("_ops.so"),
        repo.join("build").join(VARIANT).join("_ops.so"),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = common::preflight_cmd()
        .args(["check", "--json", "--python"])
        .arg(common::venv_python())
        .arg(&repo)
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("PREFLIGHT_CACHE", cache.path())
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", common::stderr(&out)));
    let row = &doc["results"][0];
    assert_eq!(row["outcome"]["kind"], "no_device", "{row}");
    assert_eq!(row["outcome"]["phase"], "load", "{row}");
    let loads = &row["outcome"]["embedded"];
    assert_eq!(loads[0]["file"], "_ops.so", "{row}");
    assert_eq!(loads[0]["error"]["code"], 209, "{row}");
    let ls = common::preflight_cmd()
        .args(["cache", "ls", "--json"])
        .env("PREFLIGHT_CACHE", cache.path())
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    let job = &listed[0]["parts"]["job"];
    assert_eq!(job["executor"], "python", "{listed}");
    assert!(
        job["device_code"].as_str().unwrap().starts_with("cuda "),
        "{listed}"
    );
    let text = common::preflight_cmd()
        .args(["check", "--python"])
        .arg(common::venv_python())
        .arg(&repo)
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("PREFLIGHT_CACHE", cache.path())
        .output()
        .unwrap();
    let text = common::stdout(&text);
    assert!(
        text.contains(&format!("{VARIANT}/_ops.so: SASS for sm_80, no PTX")),
        "{text}"
    );
    assert!(
        text.contains("CUDA_ERROR_NO_BINARY_FOR_GPU (209)"),
        "{text}"
    );
}

#[test]
fn relocatable_images_are_told_by_their_elf_type_and_jit_options() {
    use kernel_preflight::declared::arch::ImageKind;
    use kernel_preflight::declared::fatbin;
    let dir = tempfile::tempdir().unwrap();
    // (nvcc arguments, the image kind inside, relocatable)
    let cases: [(&[&str], ImageKind, bool); 4] = [
        (
            &["-gencode", "arch=compute_80,code=sm_80"],
            ImageKind::Sass,
            false,
        ),
        (
            &["-rdc=true", "-gencode", "arch=compute_80,code=sm_80"],
            ImageKind::Sass,
            true,
        ),
        (
            &["-gencode", "arch=compute_80,code=compute_80"],
            ImageKind::Ptx,
            false,
        ),
        (
            &["-rdc=true", "-gencode", "arch=compute_80,code=compute_80"],
            ImageKind::Ptx,
            true,
        ),
    ];
    for (i, (args, kind, relocatable)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("{i}.fatbin"));
        let status = Command::new(inspect_support::cuda_tool("nvcc"))
            .arg("-fatbin")
            .args(args)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/cuda/add.cu"
            ))
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "nvcc {args:?}");
        let data = std::fs::read(&out).unwrap();
        let parsed = fatbin::parse(&data, 0).unwrap();
        let whole = 0..data.len() as u64;
        assert_eq!(parsed.spans, vec![whole], "{args:?}");
        assert_eq!(parsed.entries.len(), 1, "{args:?}");
        let entry = &parsed.entries[0];
        assert_eq!(entry.kind, kind, "{args:?}");
        assert_eq!(entry.relocatable().unwrap(), relocatable, "{args:?}");
    }
}

/// The device-depth job for the variant `name` on this machine's real
/// driver (`libcuda.so.1`, or `PREFLIGHT_LIBCUDA`).
fn on_the_gpu(name: &str) -> Run {
    let executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    let job = device_step(&executor, name);
    let evidence = executor.run(&job, &Cancel::new()).expect("run");
    Run {
        report: evidence.report(),
        outcome: classify::classify(&evidence),
    }
}

#[test]
#[ignore = "needs a GPU: run scripts/gpu-check.sh"]
fn on_a_gpu_the_driver_refuses_sass_for_another_major_and_jit_compiles_ptx() {
    let run = on_the_gpu("sm80");
    let device = run.report.device.clone().expect("a GPU");
    if device.capability().major != 8 {
        assert_eq!(
            (run.outcome.kind, run.outcome.phase),
            (OutcomeKind::UnsupportedArch, Phase::Load),
            "{:?}",
            run.outcome
        );
        assert_eq!(only_file(&run).error.as_ref().map(|e| e.code), Some(209));
    }
    // nvcc 13.5's PTX (ISA 9.5) needs a CUDA 13.5 driver's JIT.
    let run = on_the_gpu("ptx80");
    let driver = run.report.runtime.cuda_driver.unwrap_or(0);
    if device.capability().major >= 8 && driver >= 13050 {
        assert_eq!(
            (run.outcome.kind, run.outcome.depth),
            (OutcomeKind::Pass, Some(Depth::Device)),
            "{:?}",
            run.outcome
        );
        let file = only_file(&run);
        assert_eq!(file.taken.as_deref(), Some("compute_80 PTX, JIT"));
        assert!(file.jit_ms.is_some_and(|ms| ms >= 0.0), "{file:?}");
    } else if device.capability().major >= 8 {
        assert_eq!(
            run.outcome.kind,
            OutcomeKind::PtxTooNew,
            "{:?}",
            run.outcome
        );
    }
    // The bound driver is the one the loader found for libcuda.so.1.
    assert!(
        run.report.runtime.libcuda.is_some(),
        "{:?}",
        run.report.runtime
    );
}
