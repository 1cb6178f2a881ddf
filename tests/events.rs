//! `--events FILE` of `check`, `warmup` and `bench`: one JSON object a
//! line, each with the schema's version, an RFC 3339 UTC timestamp and the
//! seconds elapsed (docs/events.md); a path that cannot be written is one
//! message and exit 2, and a command that fails leaves no log.

mod common;

use common::{preflight_cmd, stderr, venv_python};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example() -> String {
    root()
        .join("examples/kernels/relu-demo")
        .display()
        .to_string()
}

/// Run preflight with `--events <log>` appended; its exit code and the
/// log's lines, each parsed.
fn run(args: &[&str], log: &Path) -> (i32, Vec<Value>, String) {
    let out = preflight_cmd()
        .args(args)
        .arg("--events")
        .arg(log)
        .output()
        .expect("run preflight");
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    (out.status.code().unwrap_or(-1), lines, stderr(&out))
}

/// Every line has the schema, a UTC timestamp and a non-negative elapsed.
fn assert_stamped(lines: &[Value]) {
    assert!(!lines.is_empty(), "no events");
    for line in lines {
        assert_eq!(line["schema"], 1, "{line}");
        let ts = line["timestamp"].as_str().expect("timestamp");
        assert!(
            ts.len() == "2025-01-01T00:00:00.000000Z".len() && ts.ends_with('Z'),
            "{ts}"
        );
        assert!(line["elapsed"].as_f64().expect("elapsed") >= 0.0, "{line}");
    }
}

fn kinds(lines: &[Value]) -> Vec<&str> {
    lines.iter().filter_map(|l| l["event"].as_str()).collect()
}

/// The log with what varies replaced: times, the repo's path, the
/// outcome's timings and stderr.
fn stable(lines: &[Value]) -> String {
    let repo = root().display().to_string();
    let mut out = Vec::new();
    for line in lines {
        let mut line = line.clone();
        line["timestamp"] = "<timestamp>".into();
        line["elapsed"] = "<elapsed>".into();
        if let Some(result) = line.get_mut("result") {
            result["timings"] = "<timings>".into();
            result["outcome"]["stderr_tail"] = "<stderr>".into();
            if let Some(ms) = result["outcome"].get_mut("smoke_ms") {
                *ms = "<ms>".into();
            }
        }
        out.push(
            serde_json::to_string(&line)
                .unwrap()
                .replace(&repo, "<repo>"),
        );
    }
    out.join("\n")
}

#[test]
fn check_events_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("events.jsonl");
    let python = venv_python().display().to_string();
    let (code, lines, err) = run(
        &["check", &example(), "--python", &python, "--jobs", "1"],
        &log,
    );
    assert_eq!(code, 0, "{err}");
    assert_stamped(&lines);
    let kinds = kinds(&lines);
    assert_eq!(kinds.first(), Some(&"planned"), "{kinds:?}");
    assert!(kinds.contains(&"probing"), "{kinds:?}");
    let started = kinds.iter().filter(|k| **k == "started").count();
    let finished = kinds.iter().filter(|k| **k == "finished").count();
    assert_eq!(started, finished, "{kinds:?}");
    insta::assert_snapshot!("check_events", stable(&lines));

    // Answered from the cache the second time: `cached`, no `started`.
    let cache = tmp.path().join("cache");
    let with_cache = |log: &Path| {
        preflight_cmd()
            .args(["check", &example(), "--python", &python, "--events"])
            .arg(log)
            .env("PREFLIGHT_CACHE", &cache)
            .output()
            .expect("run preflight")
    };
    let second = tmp.path().join("second.jsonl");
    assert_eq!(with_cache(&log).status.code(), Some(0));
    assert_eq!(with_cache(&second).status.code(), Some(0));
    let text = std::fs::read_to_string(&second).unwrap();
    assert!(text.contains(r#""event":"cached""#), "{text}");
    assert!(!text.contains(r#""event":"started""#), "{text}");
}

#[test]
fn warmup_and_bench_write_events() {
    let tmp = tempfile::tempdir().unwrap();
    let python = venv_python().display().to_string();
    let log = tmp.path().join("warmup.jsonl");
    let (code, lines, err) = run(&["warmup", &example(), "--python", &python], &log);
    assert_eq!(code, 0, "{err}");
    assert_stamped(&lines);
    assert_eq!(kinds(&lines).first(), Some(&"planned"));

    let log = tmp.path().join("bench.jsonl");
    let (code, lines, err) = run(
        &[
            "bench",
            &example(),
            "--python",
            &python,
            "--min-time",
            "0.1",
            "--max-noise",
            "50",
        ],
        &log,
    );
    assert!(code == 0 || code == 1, "{err}");
    assert_stamped(&lines);
    let kinds = kinds(&lines);
    assert_eq!(kinds.first(), Some(&"planned"), "{kinds:?}");
    if code == 0 {
        assert!(kinds.contains(&"bench_timing"), "{kinds:?}");
        assert!(kinds.contains(&"bench_round"), "{kinds:?}");
    }
}

#[test]
fn an_unwritable_log_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/folder/events.jsonl");
    for command in ["check", "warmup", "bench"] {
        let (code, _, err) = run(&[command, &example()], &missing);
        assert_eq!(code, 2, "{command}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{command}: {err}");
        assert!(
            err.starts_with(&format!(
                "preflight: error: --events {}: cannot write the event log here:",
                missing.display()
            )),
            "{command}: {err}"
        );
        assert!(!missing.exists());
    }
    // A folder is no file either.
    let (code, _, err) = run(&["check", &example()], tmp.path());
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_command_that_fails_leaves_no_log() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("events.jsonl");
    let missing = tmp.path().join("no-such-kernel").display().to_string();
    for command in ["check", "warmup", "bench"] {
        let (code, _, err) = run(&[command, &missing], &log);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(!log.exists(), "{command}: a log was left behind");
    }
    // Refused after the log was created (a native target given a hub-only
    // option): removed again.
    let native = root().join("tests/fixtures/native/axpy");
    if native.is_dir() {
        let (code, _, err) = run(
            &["bench", &native.display().to_string(), "--workload", "x"],
            &log,
        );
        assert_eq!(code, 2, "{err}");
        assert!(!log.exists(), "a log was left behind");
    }
}
