//! The cuda executor's whole path — driver query, device list, module load,
//! argument packing, launch, verification, event timing — and its
//! `CUresult` mapping, run as a real child process against a stand-in
//! libcuda built from `tests/fixtures/native/fake_libcuda.c` (the real
//! driver needs a GPU; `scripts/gpu-check.sh` covers it).

mod common;
mod fake_cuda;

use fake_cuda::{cu13, fake_libcuda};
use kernel_preflight::classify::{self, Depth, Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::cuda::{CudaExecutor, Launch, ModuleKind, ModuleSpec};
use kernel_preflight::probe::{Executor, Job, Subject};
use kernel_preflight::protocol::{DeviceArch, Evidence, Failure, Report, Timings};
use kernel_preflight::sandbox::{Cancel, Limits};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn module() -> (tempfile::TempDir, ModuleSpec) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("axpy.cubin");
    std::fs::write(&path, b"not really a cubin: the fake driver takes anything").unwrap();
    let spec = ModuleSpec {
        path,
        kind: ModuleKind::Cubin,
        nvrtc_options: Vec::new(),
        target: None,
    };
    (dir, spec)
}

fn axpy(function: &str) -> Launch {
    Launch {
        warmup: 2,
        iterations: 5,
        ..fake_cuda::axpy(function, 300)
    }
}

/// One run against the stand-in driver, folded and classified.
struct Run {
    evidence: Evidence,
    report: Report,
    outcome: Outcome,
    timings: Timings,
}

/// The executor of the real binary with the stand-in driver in `mode`.
fn fake_executor(mode: &str) -> CudaExecutor {
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(fake_libcuda().to_path_buf());
    executor.env.push(("FAKE_CUDA".into(), mode.into()));
    executor
}

fn run_with(mode: &str, function: &str) -> Run {
    let (_dir, spec) = module();
    let job = Job {
        limits: Limits {
            timeout: Duration::from_secs(3),
            grace: Duration::from_millis(200),
            ..Limits::default()
        },
        ..Job::new(Subject::Module {
            spec,
            launches: vec![axpy(function)],
        })
    };
    let evidence = fake_executor(mode).run(&job, &Cancel::new()).expect("run");
    Run {
        report: evidence.report(),
        outcome: classify::classify(&evidence),
        timings: evidence.timings(),
        evidence,
    }
}

#[test]
fn a_good_launch_is_verified_and_timed() {
    let run = run_with("", "preflight_axpy");
    let o = &run.outcome;
    assert_eq!(
        (o.kind, o.depth),
        (OutcomeKind::Pass, Some(Depth::Verified)),
        "{o:?}"
    );
    assert!(o.message.contains("Fake GPU (sm_90)"), "{}", o.message);
    let device = run.report.device.as_ref().unwrap();
    assert_eq!(
        (device.arch, device.sm_count),
        (DeviceArch::Cuda { major: 9, minor: 0 }, 132)
    );
    assert_eq!(run.report.runtime.cuda_driver, Some(13000));
    assert_eq!(run.report.compared, 300);
    let rounds: Vec<u32> = run.report.samples.iter().map(|s| s.round).collect();
    assert_eq!(rounds, [0, 1, 2, 3, 4], "one sample per timed launch");
    assert!(
        run.report
            .samples
            .iter()
            .all(|s| s.label == "preflight_axpy")
    );
    // Each launch of the stand-in busy-waits 250 us by default, and its
    // events measure that: never less.
    assert!(
        run.timings.smoke_ms.is_some_and(|ms| ms >= 0.25),
        "{:?}",
        run.timings
    );
    assert_eq!(run.evidence.channel, Default::default());
    assert!(run.timings.import_ms.is_some(), "load time");
}

#[test]
fn a_wrong_result_names_the_first_bad_element() {
    let run = run_with("wrong", "preflight_axpy");
    let o = &run.outcome;
    assert_eq!((o.kind, o.phase), (OutcomeKind::WrongResult, Phase::Verify));
    assert!(
        o.message
            .contains("300 of 300 values outside the tolerance; first at [0]: got 0, expected 1"),
        "{}",
        o.message
    );
}

#[test]
fn load_errors_map_to_the_taxonomy() {
    for (mode, kind) in [
        ("load=209", OutcomeKind::UnsupportedArch),
        ("load=222", OutcomeKind::PtxTooNew),
        ("load=218", OutcomeKind::JitCompileError),
    ] {
        let run = run_with(mode, "preflight_axpy");
        assert_eq!(
            (run.outcome.kind, run.outcome.phase),
            (kind, Phase::Load),
            "{mode}"
        );
    }
    let run = run_with("load=218", "preflight_axpy");
    assert!(
        run.outcome.message.contains("fake syntax error"),
        "the JIT log: {}",
        run.outcome.message
    );
    assert!(run.outcome.stderr_tail.contains("fake syntax error"));
}

#[test]
fn driver_and_launch_errors_map_to_the_taxonomy() {
    let run = run_with("init=100", "preflight_axpy");
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::NoDevice, Phase::Start)
    );
    assert!(
        run.outcome
            .message
            .contains("cuInit: CUDA_ERROR_NO_DEVICE (100)")
    );
    let run = run_with("launch=700", "preflight_axpy");
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::Crashed, Phase::Launch)
    );
    let run = run_with("", "no_such_kernel");
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::MissingSymbol, Phase::Launch)
    );
}

#[test]
fn codes_are_read_as_integers_and_mapped_by_cuda_h() {
    for (mode, kind, transient) in [
        ("init=36", OutcomeKind::DriverTooOld, false),
        ("init=46", OutcomeKind::NoDevice, true),
        ("init=999", OutcomeKind::NoDevice, true),
        ("load=227", OutcomeKind::DriverTooOld, false),
        ("load=913", OutcomeKind::ImportError, false),
        ("load=2", OutcomeKind::OutOfMemory, true),
    ] {
        let o = run_with(mode, "preflight_axpy").outcome;
        assert_eq!((o.kind, o.transient), (kind, transient), "{mode}: {o:?}");
    }
    // A code no cuda.h lists reaches the parent as the integer it was; the
    // name the (stand-in) driver gives it does not decide.
    let run = run_with("load=4242", "preflight_axpy");
    assert_eq!(run.outcome.kind, OutcomeKind::Exited, "{:?}", run.outcome);
    assert!(
        run.outcome.message.contains("(4242)"),
        "{}",
        run.outcome.message
    );
    assert!(!run.outcome.transient);
}

#[test]
fn a_death_or_a_hang_is_attributed_to_its_phase() {
    let run = run_with("crash", "preflight_axpy");
    let o = &run.outcome;
    assert_eq!((o.kind, o.phase), (OutcomeKind::Crashed, Phase::Load));
    assert_eq!(o.signal.as_deref(), Some("SIGSEGV"));
    let run = run_with("hang", "preflight_axpy");
    assert_eq!(
        (run.outcome.kind, run.outcome.phase),
        (OutcomeKind::Timeout, Phase::Load)
    );
}

#[test]
fn doctor_takes_the_gpu_path_when_a_driver_answers() {
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["doctor", "--json", "--timeout", "20"])
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("CUDA_HOME", cu13())
        .env("PREFLIGHT_CACHE", tempfile::tempdir().unwrap().keep())
        .output()
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("doctor --json prints JSON");
    assert_eq!(json["device"]["name"], "Fake GPU");
    assert_eq!(json["driver_cuda"], "13.0");
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .starts_with("Fake GPU (sm_90, 132 SMs, 1 GiB), CUDA driver 13.0"),
        "{}",
        json["summary"]
    );
    let check = |name: &str| {
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check"))
            .clone()
    };
    // The stand-in runs `preflight_axpy` only: NVRTC's sm_90 cubin, nvcc's
    // cubin and the PTX-only module all reach launch and verification.
    for name in ["driver", "nvrtc", "nvcc", "ptx_jit"] {
        assert_eq!(check(name)["verdict"], "pass", "{}", check(name));
    }
    assert!(
        check("nvrtc")["message"]
            .as_str()
            .unwrap()
            .contains("compiled a cubin for sm_90; it loaded, ran and verified"),
        "{}",
        check("nvrtc")
    );
    // Its other kernels do not exist there: a present capability that does
    // not work is a failure, and doctor answers 1.
    assert_eq!(check("bf16")["kind"], "missing_symbol");
    assert_eq!(check("bf16")["verdict"], "fail");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn check_shows_what_a_module_declares_next_to_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(cu13().join("bin/nvcc"))
        .args(["-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-o"])
        .arg(dir.path().join("axpy.fatbin"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/axpy/axpy.cu"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(
        dir.path().join("preflight.toml"),
        "[[module]]\nfile = \"axpy.fatbin\"\n",
    )
    .unwrap();
    // One cache: the second check answers from it, with the same verdict
    // judged against the same GPU (the full fingerprint's, cached too).
    let cache = tempfile::tempdir().unwrap();
    let check = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
        cmd.arg("check").arg(dir.path());
        if json {
            cmd.arg("--json");
        }
        cmd.env("PREFLIGHT_LIBCUDA", fake_libcuda())
            .env("PREFLIGHT_CACHE", cache.path())
            .output()
            .unwrap()
    };
    let out = check(true);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let row = &json["results"][0];
    // The rule says sm_80 SASS cannot run on the stand-in's sm_90, and the
    // stand-in, reading the fatbin as the driver does, refuses it (209):
    // declared and observed agree.
    assert_eq!(row["declared"]["accepted"], false, "{row}");
    assert!(
        row["declared"]["reason"]
            .as_str()
            .unwrap()
            .contains("SASS for sm_80, no PTX; this GPU is sm_90"),
        "{row}"
    );
    assert_eq!(row["outcome"]["kind"], "unsupported_arch", "{row}");
    assert_eq!(row["outcome"]["phase"], "load", "{row}");
    assert_eq!(row["cached"], false, "{row}");
    let again: serde_json::Value = serde_json::from_slice(&check(true).stdout).expect("JSON");
    let cached = &again["results"][0];
    assert_eq!(cached["cached"], true, "{cached}");
    assert_eq!(cached["declared"], row["declared"], "{cached}");
    let text = String::from_utf8_lossy(&check(false).stdout).into_owned();
    assert!(text.contains("rejected (no image fits)"), "{text}");
    assert!(text.contains("unsupported_arch"), "{text}");
    assert!(!text.contains("≠"), "{text}");
    // On an A100 (FAKE_CUDA_CC=8.0) the same module is declared runnable
    // and loads.
    let a100_cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["check", "--json"])
        .arg(dir.path())
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("PREFLIGHT_CACHE", a100_cache.path())
        .env("FAKE_CUDA_CC", "8.0")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let row = &json["results"][0];
    assert_eq!(row["declared"]["accepted"], true, "{row}");
    assert_eq!(row["outcome"]["kind"], "pass", "{row}");
}

/// A native target whose modules are `names` (the stand-in loads anything),
/// each with the verified axpy launch.
fn native_target(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = String::new();
    for name in names {
        std::fs::write(dir.path().join(name), format!("fake module {name}")).unwrap();
        manifest.push_str(&format!(
            "[[module]]\nfile = \"{name}\"\n\n[[module.launch]]\nfunction = \"preflight_axpy\"\n\
             grid = 1\nblock = 4\nwarmup = 1\niterations = 2\nargs = [\n  {{ scalar = \"f32\", value = 2.0 }},\n  \
             {{ buffer = \"f32\", init = [1, 2, 3, 4] }},\n  {{ buffer = \"f32\", init = [1, 1, 1, 1], expect = [3, 5, 7, 9] }},\n  \
             {{ scalar = \"u32\", value = 4 }},\n]\n\n"
        ));
    }
    std::fs::write(dir.path().join("preflight.toml"), manifest).unwrap();
    dir
}

/// `preflight check --json ARGS` against the stand-in driver, with `env`.
fn check_json(args: &[&std::ffi::OsStr], cache: &Path, env: &[(&str, &str)]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["check", "--json"])
        .args(args)
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("PREFLIGHT_CACHE", cache)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn rows(doc: &serde_json::Value) -> Vec<(String, String, bool)> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["variant"].as_str().unwrap().to_owned(),
                r["outcome"]["kind"].as_str().unwrap().to_owned(),
                r["cached"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_native_target_checked_twice_is_answered_from_the_cache() {
    let dir = native_target(&["a.cubin", "b.cubin"]);
    let cache = tempfile::tempdir().unwrap();
    let target = [dir.path().as_os_str()];
    let row = |name: &str, cached| (name.to_owned(), "pass".to_owned(), cached);
    let first = check_json(&target, cache.path(), &[]);
    assert_eq!(rows(&first), [row("a.cubin", false), row("b.cubin", false)]);
    // Each module is its own job of the cuda executor, keyed by what went
    // into its probe.
    let ls = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["cache", "ls", "--json"])
        .env("PREFLIGHT_CACHE", cache.path())
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&ls.stdout).expect("JSON");
    let mut jobs: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["parts"]["job"])
        .collect();
    jobs.sort_by_key(|j| j["name"].as_str());
    assert_eq!(jobs.len(), 2, "{listed}");
    for (job, name) in jobs.iter().zip(["a.cubin", "b.cubin"]) {
        assert_eq!(job["executor"], "cuda", "{job}");
        assert_eq!(job["name"], name, "{job}");
        assert_eq!(job["device"], "0", "{job}");
        assert_eq!(job["depth"], "verified", "{job}");
        assert_eq!(
            job["protocol"],
            kernel_preflight::protocol::PROTOCOL_VERSION
        );
        assert!(
            job["smoke"].as_str().unwrap().starts_with("launches:"),
            "{job}"
        );
    }
    assert_ne!(jobs[0]["files"], jobs[1]["files"], "different content");
    let second = check_json(&target, cache.path(), &[]);
    assert_eq!(rows(&second), [row("a.cubin", true), row("b.cubin", true)]);
    assert_eq!(
        first["results"][0]["outcome"],
        second["results"][0]["outcome"]
    );
    // A module whose file changed is a new job; its neighbour is not.
    std::fs::write(dir.path().join("b.cubin"), "rebuilt").unwrap();
    let third = check_json(&target, cache.path(), &[]);
    assert_eq!(rows(&third), [row("a.cubin", true), row("b.cubin", false)]);
    // So is one whose launches changed.
    let manifest = std::fs::read_to_string(dir.path().join("preflight.toml")).unwrap();
    std::fs::write(
        dir.path().join("preflight.toml"),
        manifest.replacen("iterations = 2", "iterations = 3", 1),
    )
    .unwrap();
    let fourth = check_json(&target, cache.path(), &[]);
    assert_eq!(rows(&fourth), [row("a.cubin", false), row("b.cubin", true)]);
}

#[test]
fn a_target_named_twice_is_checked_once() {
    let dir = native_target(&["a.cubin"]);
    let cache = tempfile::tempdir().unwrap();
    let again = dir.path().join(".");
    let doc = check_json(
        &[dir.path().as_os_str(), again.as_os_str()],
        cache.path(),
        &[],
    );
    assert_eq!(rows(&doc).len(), 1, "{doc}");
    assert_eq!(
        doc["results"][0]["target"],
        dir.path().display().to_string()
    );
}

/// When each probe of a check began and ended loading its module, by the
/// probes' own clocks (ns).
fn load_spans(dir: &Path, jobs: &str) -> Vec<(i128, i128)> {
    // A folder of the test's own that the probes may write past their
    // walls (everywhere else their view of the host is read-only).
    let logs = tempfile::tempdir_in(common::scratch_root()).unwrap();
    let log = logs.path().join(format!("loads-{jobs}.log"));
    let cache = tempfile::tempdir().unwrap();
    let doc = check_json(
        &[dir.as_os_str(), "--jobs".as_ref(), jobs.as_ref()],
        cache.path(),
        &[
            ("FAKE_CUDA_SLEEP_MS", "1000"),
            ("FAKE_CUDA_LOG", log.to_str().unwrap()),
            ("PREFLIGHT_PROBE_WRITABLE", logs.path().to_str().unwrap()),
        ],
    );
    assert!(
        rows(&doc).iter().all(|(_, kind, _)| kind == "pass"),
        "{doc}"
    );
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

#[test]
fn jobs_runs_native_modules_in_parallel() {
    let dir = native_target(&["a.cubin", "b.cubin"]);
    let overlap = |s: &[(i128, i128)]| s[0].0 < s[1].1 && s[1].0 < s[0].1;
    let parallel = load_spans(dir.path(), "2");
    assert_eq!(parallel.len(), 2);
    assert!(overlap(&parallel), "--jobs 2: {parallel:?}");
    let serial = load_spans(dir.path(), "1");
    assert_eq!(serial.len(), 2);
    assert!(!overlap(&serial), "--jobs 1: {serial:?}");
}

#[test]
fn warmup_caches_a_native_target_and_select_refuses_one() {
    let dir = native_target(&["a.cubin", "b.cubin"]);
    let cache = tempfile::tempdir().unwrap();
    let preflight = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_preflight"))
            .args(args)
            .arg(dir.path())
            .env("PREFLIGHT_LIBCUDA", fake_libcuda())
            .env("PREFLIGHT_CACHE", cache.path())
            .output()
            .unwrap()
    };
    let out = preflight(&["warmup", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary[0]["variants"], 2, "{summary}");
    assert_eq!(summary[0]["probed"], 2, "{summary}");
    assert_eq!(summary[0]["passed"], 2, "{summary}");
    let doc = check_json(&[dir.path().as_os_str()], cache.path(), &[]);
    assert!(rows(&doc).iter().all(|(_, _, cached)| *cached), "{doc}");

    let out = preflight(&["select"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a native target (preflight.toml)"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_device_list_job_describes_every_device_in_the_drivers_order() {
    let mut executor = fake_executor("");
    executor
        .env
        .push(("FAKE_CUDA_MACHINE".into(), "two_gpus".into()));
    let evidence = executor
        .run(&Job::new(Subject::Devices), &Cancel::new())
        .expect("run");
    let report = evidence.report();
    assert!(report.done(), "{report:?}");
    assert_eq!(report.runtime.cuda_driver, Some(12080));
    assert_eq!(report.runtime.devices, Some(2));
    let listed: Vec<(u32, &str, u32, Option<&str>)> = report
        .devices
        .iter()
        .map(|d| {
            (
                d.ordinal,
                d.name.as_str(),
                d.capability().major,
                d.pci_bus_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (0, "NVIDIA H100 80GB HBM3", 9, Some("00000000:41:00.0")),
            (1, "NVIDIA B200", 10, Some("00000000:01:00.0"))
        ]
    );
    // Nothing was opened: no device of its own, nothing loaded.
    assert_eq!((report.device.as_ref(), report.loaded), (None, false));

    // A failing cuInit still leaves the driver's version, asked first.
    executor.env.push(("FAKE_CUDA".into(), "init=46".into()));
    let report = executor
        .run(&Job::new(Subject::Devices), &Cancel::new())
        .expect("run")
        .report();
    assert_eq!(report.runtime.cuda_driver, Some(12080));
    assert!(report.devices.is_empty());
    assert!(
        matches!(&report.failure, Some((Phase::Start, Failure::Cuda(e))) if e.call == "cuInit" && e.code == 46),
        "{:?}",
        report.failure
    );
}

#[test]
fn a_native_target_is_judged_against_cuda_device_0_not_the_first_on_the_bus() {
    // The two-GPU machine: the B200 (10.0) is first on the PCI bus, the
    // H100 (9.0) is CUDA's device 0, where the modules run. SASS for sm_90
    // fits the H100 only.
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(cu13().join("bin/nvcc"))
        .args(["-fatbin", "-gencode", "arch=compute_90,code=sm_90", "-o"])
        .arg(dir.path().join("axpy.fatbin"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/axpy/axpy.cu"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(
        dir.path().join("preflight.toml"),
        "[[module]]\nfile = \"axpy.fatbin\"\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
        cmd.arg("check").arg(dir.path());
        if json {
            cmd.arg("--json");
        }
        cmd.env("PREFLIGHT_LIBCUDA", fake_libcuda())
            .env("PREFLIGHT_CACHE", cache.path())
            .env("FAKE_CUDA_MACHINE", "two_gpus")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .output()
            .unwrap()
    };
    let doc: serde_json::Value = serde_json::from_slice(&run(true).stdout).expect("JSON");
    let row = &doc["results"][0];
    assert_eq!(row["declared"]["accepted"], true, "{row}");
    assert_eq!(row["outcome"]["kind"], "pass", "{row}");
    let text = String::from_utf8_lossy(&run(false).stdout).into_owned();
    assert!(text.contains("on NVIDIA H100 80GB HBM3 (sm 9.0)"), "{text}");
}
