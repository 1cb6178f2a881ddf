//! `preflight bench` on native targets (directories with a `preflight.toml`)
//! through the cuda executor's bench mode, against the stand-in libcuda of
//! `tests/fixtures/native/fake_libcuda.c`: its launches busy-wait for a
//! time each test sets per kernel, and its events read the monotonic
//! clock, so that the targets' true speeds are known.

mod common;
use common::bench_row as row;
mod fake_cuda;

use common::{preflight_cmd, stderr};
use fake_cuda::fake_libcuda;
use kernel_preflight::probe::cuda::{CudaExecutor, Launch, ModuleKind, ModuleSpec};
use kernel_preflight::probe::{BenchExecutor, BenchRole, BenchSpec, Job, Subject};
use kernel_preflight::sandbox::{Cancel, Limits};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;

/// One bench at a time: two benches timing on one machine at once would
/// measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// A native target `root/name` whose one module launches
/// `preflight_axpy_<name>` (the stand-in's axpy under a name of its own,
/// so that its speed can be set alone); `expect` is what the launch must
/// leave in y (the right answer is `[1, 3, 5, 7]`).
fn target(root: &Path, name: &str, expect: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("k.cubin"), b"the stand-in driver loads anything").unwrap();
    std::fs::write(
        dir.join("preflight.toml"),
        format!(
            r#"[[module]]
file = "k.cubin"

[[module.launch]]
function = "preflight_axpy_{name}"
grid = 1
block = 4
args = [
  {{ scalar = "f32", value = 2.0 }},
  {{ buffer = "f32", init = [0, 1, 2, 3] }},
  {{ buffer = "f32", init = [1, 1, 1, 1], expect = {expect} }},
  {{ scalar = "u32", value = 4 }},
]
"#
        ),
    )
    .unwrap();
    dir
}

const RIGHT: &str = "[1, 3, 5, 7]";

/// `preflight bench --json TARGETS ARGS` in `root` against the stand-in,
/// each `(name, us)` of `spins` taking that many microseconds a launch,
/// with `env` on top; the cache in `root/cache`.
fn bench(
    root: &Path,
    targets: &[&str],
    spins: &[(&str, u32)],
    env: &[(&str, String)],
    args: &[&str],
) -> (Output, Value) {
    let mut cmd = preflight_cmd();
    cmd.current_dir(root)
        .env("PREFLIGHT_CACHE", root.join("cache"))
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .args(["bench", "--json", "--max-noise", "1"])
        .args(targets)
        .args(args);
    if !args.contains(&"--min-time") {
        cmd.args(["--min-time", "0.3"]);
    }
    for (name, us) in spins {
        cmd.env(
            format!("FAKE_CUDA_SPIN_US_preflight_axpy_{name}"),
            us.to_string(),
        );
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, doc)
}

fn median(row: &Value) -> f64 {
    row["status"]["summary"]["median"].as_f64().unwrap()
}

/// The bench results the cache keeps.
fn kept(cache: &Path) -> usize {
    walk(&cache.join("bench-v1"))
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| {
                let p = e.path();
                if p.is_dir() {
                    walk(&p)
                } else {
                    usize::from(p.extension().is_some_and(|x| x == "json"))
                }
            })
            .sum()
    })
}

#[test]
fn native_targets_are_ranked_by_known_factors_with_ratios_close_to_the_truth() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    for name in ["slow", "mid", "fast"] {
        target(tmp.path(), name, RIGHT);
    }
    // Given slowest first, so that the order given cannot pass for the ranking.
    let (out, doc) = bench(
        tmp.path(),
        &["slow", "mid", "fast"],
        &[("fast", 1000), ("mid", 1500), ("slow", 3000)],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let order = common::bench_order(&doc);
    assert_eq!(order, ["fast", "mid", "slow"], "{doc}");
    let fastest = median(row(&doc, "fast"));
    assert!(fastest >= 1.0, "a launch spins 1 ms: {doc}");
    for (name, truth) in [("mid", 1.5), ("slow", 3.0)] {
        let r = row(&doc, name);
        let ratio = median(r) / fastest;
        assert!(
            (ratio / truth - 1.0).abs() < 0.15,
            "{name}: measured {ratio:.3}, true {truth}\n{doc}"
        );
        assert_eq!(r["vs_fastest"]["verdict"], "slower", "{name}: {doc}");
    }
    assert!(row(&doc, "fast")["vs_fastest"].is_null(), "{doc}");
    assert_eq!(doc["target"], "slow, mid, fast");
    assert_eq!(doc["workload"], "launches");
    assert_eq!(doc["flush_l2"], true, "the stand-in has a 2 MiB L2: {doc}");
    assert!(doc["reference"].is_null(), "{doc}");
    for r in doc["variants"].as_array().unwrap() {
        assert_eq!(r["status"]["status"], "timed", "{r}");
        assert_eq!(r["status"]["timer"], "device_events", "{r}");
        assert_eq!(r["job"].as_str().unwrap().len(), 64, "{r}");
    }
    // Each timed target is kept in the bench bucket.
    assert_eq!(kept(&tmp.path().join("cache")), 3);

    // The same run as markdown, for a PR.
    let (out, _) = bench(
        tmp.path(),
        &["fast", "slow"],
        &[("fast", 1000), ("slow", 3000)],
        &[],
        &["--format", "markdown"],
    );
    // --json and --format conflict: bad input, nothing printed.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let out = preflight_cmd()
        .current_dir(tmp.path())
        .env("PREFLIGHT_CACHE", tmp.path().join("cache"))
        .env("PREFLIGHT_LIBCUDA", fake_libcuda())
        .env("FAKE_CUDA_SPIN_US_preflight_axpy_fast", "200")
        .env("FAKE_CUDA_SPIN_US_preflight_axpy_slow", "600")
        .args(["bench", "fast", "slow", "--format", "markdown"])
        .args(["--min-time", "0.2", "--max-noise", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = common::stdout(&out);
    assert!(text.contains("| 1 | `fast` |"), "{text}");
    assert!(text.contains("slower"), "{text}");
}

#[test]
fn two_equal_native_targets_are_never_called_faster() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "one", RIGHT);
    target(tmp.path(), "two", RIGHT);
    let (out, doc) = bench(
        tmp.path(),
        &["one", "two"],
        &[("one", 800), ("two", 800)],
        &[],
        &["--no-flush"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(doc["flush_l2"], false, "{doc}");
    let verdict = doc["variants"][1]["vs_fastest"]["verdict"]
        .as_str()
        .unwrap();
    assert!(["same", "ambiguous"].contains(&verdict), "{doc}");
}

#[test]
fn a_wrong_result_and_a_crash_mid_run_are_reported_and_the_others_finish() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "good", RIGHT);
    target(tmp.path(), "wrong", "[1, 3, 5, 8]");
    target(tmp.path(), "crash", RIGHT);
    // The probe is a process of its own; the bench child launches once to
    // verify, then warms up for 0.1 s with samples of at least 1 ms (at
    // most 101 launches), then takes at least 200 samples: its 120th
    // launch is in the rounds, however loaded the machine.
    let (out, doc) = bench(
        tmp.path(),
        &["good", "wrong", "crash"],
        &[("good", 1000), ("wrong", 1000), ("crash", 1000)],
        &[(
            "FAKE_CUDA_ABORT_AFTER_preflight_axpy_crash",
            "120".to_owned(),
        )],
        &["--min-samples", "200"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(row(&doc, "good")["status"]["status"], "timed", "{doc}");
    let wrong = &row(&doc, "wrong")["status"];
    assert_eq!(wrong["status"], "excluded", "{doc}");
    assert_eq!(wrong["outcome"], "wrong_result", "{doc}");
    let reason = wrong["reason"].as_str().unwrap();
    assert!(
        reason.contains("k.cubin") && reason.contains("got 7, expected 8"),
        "{reason}"
    );
    let crash = &row(&doc, "crash")["status"];
    assert_eq!(crash["status"], "excluded", "{doc}");
    assert_eq!(crash["outcome"], "crashed", "{doc}");
    assert!(
        crash["reason"].as_str().unwrap().contains("SIGABRT"),
        "{doc}"
    );
    // Said as it happened, while the others went on.
    assert!(
        stderr(&out).contains("preflight: crash is excluded: "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_exits_2_before_anything_is_timed() {
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "a", RIGHT);
    std::fs::create_dir_all(tmp.path().join("plain")).unwrap();
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("preflight.toml"), "[[module]]\nfile = 3\n").unwrap();
    for (args, says) in [
        (&["a", "plain"][..], "plain: not a native target"),
        (&["a", "a"][..], "a is given twice"),
        (&["a", "./a"][..], "./a is given twice"),
        (
            &["a", "--workload", "w"][..],
            "--workload applies to hub variants",
        ),
        (
            &["a", "--variants", "x"][..],
            "--variants applies to hub variants",
        ),
        (
            &["a", "--smoke", "a/k.cubin"][..],
            "--smoke applies to hub variants",
        ),
        (&["a", "broken"][..], "preflight.toml"),
        (&["a", "--min-samples", "1"][..], "--min-samples 1"),
    ] {
        let out = preflight_cmd()
            .current_dir(tmp.path())
            .env("PREFLIGHT_CACHE", tmp.path().join("cache"))
            .env("PREFLIGHT_LIBCUDA", fake_libcuda())
            .arg("bench")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(kept(&tmp.path().join("cache")), 0, "{args:?}");
    }
}

/// The cuda executor's bench child itself: ready with device events and
/// an L2 flush, rounds of samples no shorter than a launch, and at the end
/// the launch verified once more.
#[test]
fn the_cuda_bench_child_answers_rounds_like_the_python_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("k.cubin");
    std::fs::write(&path, b"anything").unwrap();
    let launch = Launch {
        warmup: 3,
        iterations: 10,
        ..fake_cuda::axpy("preflight_axpy_child", 4)
    };
    let job = Job {
        limits: Limits {
            timeout: Duration::from_secs(20),
            ..Limits::default()
        },
        ..Job::new(Subject::Module {
            spec: ModuleSpec {
                path,
                kind: ModuleKind::Cubin,
                nvrtc_options: Vec::new(),
                target: None,
            },
            launches: vec![launch],
        })
    };
    let mut executor = CudaExecutor::new(env!("CARGO_BIN_EXE_preflight"));
    executor.libcuda = Some(fake_libcuda().to_path_buf());
    executor.env.push((
        "FAKE_CUDA_SPIN_US_preflight_axpy_child".into(),
        "500".into(),
    ));
    let spec = BenchSpec {
        role: BenchRole::Variant,
        workload: None,
        flush_l2: true,
    };
    let mut child = executor
        .start_bench(&[&job], "launches", &spec, &Cancel::new())
        .unwrap();
    let setup = child.ready(Duration::from_secs(20)).unwrap();
    assert_eq!(setup.timer, "device_events");
    assert_eq!(setup.flush_bytes, 4 << 20, "twice the 2 MiB L2");
    assert!(setup.warmup_calls >= 3, "{setup:?}");
    assert!(setup.estimate_ms >= 0.5, "{setup:?}");
    for round in 0..2 {
        let samples = child.round(round, 5, Duration::from_secs(20)).unwrap();
        assert_eq!(samples.len(), 5);
        assert!(
            samples
                .iter()
                .all(|s| s.label == "launches" && s.round == round && s.ms >= 0.5),
            "{samples:?}"
        );
    }
    let bare = child.bare_round(2, 4, Duration::from_secs(20)).unwrap();
    assert_eq!(bare.label, "bare:launches");
    assert!(bare.ms >= 0.5, "{bare:?}");
    let evidence = child.finish(Duration::from_secs(20)).unwrap();
    let outcome = kernel_preflight::classify::classify(&evidence);
    assert!(outcome.kind.passed(), "{outcome:?}");
    assert_eq!(
        outcome.depth,
        Some(kernel_preflight::classify::Depth::Verified)
    );
    let verified = evidence
        .events
        .iter()
        .filter(|e| matches!(e, kernel_preflight::protocol::Event::Verified { .. }))
        .count();
    assert_eq!(verified, 2, "before and after timing");
}

/// `--probe-timeout` bounds each child's import and warm-up, not the whole
/// session it lives through: two targets timed for at least 1.2 s each
/// outlive a 1 s probe timeout and are both timed.
#[test]
fn a_session_longer_than_the_probe_timeout_keeps_its_children() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "p", RIGHT);
    target(tmp.path(), "q", RIGHT);
    let (out, doc) = bench(
        tmp.path(),
        &["p", "q"],
        &[("p", 1000), ("q", 1000)],
        &[],
        &["--min-time", "1.2", "--probe-timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in ["p", "q"] {
        assert_eq!(row(&doc, name)["status"]["status"], "timed", "{doc}");
    }
}

/// On a device in EXCLUSIVE_PROCESS compute mode a second process's
/// context is refused (46): the first child says so, and each target is
/// timed alone, its child ended before the next starts.
#[test]
fn an_exclusive_process_device_times_one_target_at_a_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "p", RIGHT);
    target(tmp.path(), "q", RIGHT);
    let env = [
        ("FAKE_CUDA_COMPUTE_MODE", "3".to_owned()),
        (
            "FAKE_CUDA_LOCK",
            tmp.path().join("lock").display().to_string(),
        ),
    ];
    let (out, doc) = bench(
        tmp.path(),
        &["p", "q"],
        &[("p", 300), ("q", 600)],
        &env,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in ["p", "q"] {
        assert_eq!(row(&doc, name)["status"]["status"], "timed", "{doc}");
    }
    assert_eq!(row(&doc, "q")["vs_fastest"]["verdict"], "slower", "{doc}");
    // Timed one after the other: no round number is shared.
    let rounds = |name: &str| -> Vec<u64> {
        row(&doc, name)["status"]["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect()
    };
    let (p, q) = (rounds("p"), rounds("q"));
    assert!(p.iter().max() < q.iter().min(), "{p:?} {q:?}");
}

/// A target of two modules is timed as a whole: each sample is both
/// launches, in file order, and it is kept once, under the key of both.
#[test]
fn a_target_of_several_modules_is_timed_as_the_sum_of_its_launches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    target(tmp.path(), "single", RIGHT);
    let pair = target(tmp.path(), "pair", RIGHT);
    let manifest = std::fs::read_to_string(pair.join("preflight.toml")).unwrap();
    let second = manifest
        .replace("k.cubin", "k2.cubin")
        .replace("preflight_axpy_pair", "preflight_axpy_pair2");
    std::fs::write(pair.join("k2.cubin"), b"another module").unwrap();
    std::fs::write(pair.join("preflight.toml"), format!("{manifest}\n{second}")).unwrap();
    let (out, doc) = bench(
        tmp.path(),
        &["pair", "single"],
        &[("single", 400), ("pair", 400), ("pair2", 800)],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ratio = median(row(&doc, "pair")) / median(row(&doc, "single"));
    assert!(
        (ratio / 3.0 - 1.0).abs() < 0.15,
        "measured {ratio:.3}\n{doc}"
    );
    assert_eq!(row(&doc, "pair")["vs_fastest"]["verdict"], "slower");
    assert_eq!(kept(&tmp.path().join("cache")), 2);
}

/// Where NVML answers for the device, each sample carries its clocks, and
/// a sample taken while a reason slowed the clock is dropped and counted:
/// the stand-in NVML says "thermal slowdown" on every fourth read and
/// "idle" (not a slowdown) otherwise.
#[test]
fn throttled_samples_are_dropped_and_counted_where_nvml_answers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    for name in ["fast", "slow"] {
        target(tmp.path(), name, RIGHT);
    }
    let env = [
        (
            "LD_LIBRARY_PATH",
            fake_cuda::fake_nvml_dir().display().to_string(),
        ),
        ("FAKE_NVML_THROTTLE_EVERY", "4".to_string()),
    ];
    let (out, doc) = bench(
        tmp.path(),
        &["fast", "slow"],
        &[("fast", 500), ("slow", 1000)],
        &env,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in ["fast", "slow"] {
        let status = &row(&doc, name)["status"];
        let dropped = status["dropped_throttled"].as_u64().unwrap();
        let kept = status["summary"]["samples"].as_u64().unwrap();
        assert_eq!(status["samples_ms"].as_array().unwrap().len() as u64, kept);
        let share = dropped as f64 / (dropped + kept) as f64;
        assert!(
            (0.2..0.3).contains(&share),
            "{name}: {dropped} of {}: {doc}",
            dropped + kept
        );
    }
    assert_eq!(
        row(&doc, "slow")["vs_fastest"]["verdict"],
        "slower",
        "{doc}"
    );

    // Without NVML nothing is dropped.
    let (out, doc) = bench(
        tmp.path(),
        &["fast"],
        &[("fast", 500)],
        &[("FAKE_NVML_THROTTLE_EVERY", "4".to_string())],
        &["--no-cache"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(row(&doc, "fast")["status"]["dropped_throttled"], 0, "{doc}");
}
