//! The python driver and the Rust side are held to the same golden lines
//! (`tests/fixtures/protocol/golden.jsonl`): the driver's `--self-check`
//! builds one event of every kind it writes with the constructors a probe
//! uses and compares each with the golden line of its kind, and every line
//! it prints must parse here as a known event, with no field the golden
//! line lacks.

mod probe_fixtures;

use kernel_preflight::protocol::{Event, ExecutorKind, PROTOCOL_VERSION};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const GOLDEN: &str = "tests/fixtures/protocol/golden.jsonl";

/// `event` or `failed/<error>`.
fn kind(value: &serde_json::Value) -> String {
    let event = value["event"].as_str().unwrap_or("?").to_owned();
    match value["failure"]["error"].as_str() {
        Some(error) => format!("{event}/{error}"),
        None => event,
    }
}

/// Paths in `made` that `golden` does not have, or has with another JSON type.
fn extra_fields(made: &serde_json::Value, golden: &serde_json::Value, at: &str) -> Vec<String> {
    use serde_json::Value;
    match (made, golden) {
        (Value::Object(m), Value::Object(g)) => m
            .iter()
            .flat_map(|(k, v)| match g.get(k) {
                Some(gv) => extra_fields(v, gv, &format!("{at}.{k}")),
                None => vec![format!("{at}.{k}")],
            })
            .collect(),
        (Value::Array(m), Value::Array(g)) => match g.first() {
            Some(first) => m
                .iter()
                .flat_map(|v| extra_fields(v, first, &format!("{at}[]")))
                .collect(),
            None => Vec::new(),
        },
        (Value::Number(m), Value::Number(g)) if m.is_f64() && !g.is_f64() => {
            vec![format!(
                "{at}: a float where the golden line has an integer"
            )]
        }
        (m, g) if std::mem::discriminant(m) != std::mem::discriminant(g) => {
            vec![format!("{at}: {m} against {g}")]
        }
        _ => Vec::new(),
    }
}

#[test]
fn the_driver_writes_the_golden_shapes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(probe_fixtures::python())
        .arg(root.join("probes/python/driver.py"))
        .arg("--self-check")
        .arg(root.join(GOLDEN))
        .output()
        .expect("the test interpreter runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "self-check failed:\n{stderr}");
    let golden: BTreeMap<String, Vec<serde_json::Value>> =
        std::fs::read_to_string(root.join(GOLDEN))
            .expect("golden lines")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("golden JSON"))
            .fold(BTreeMap::new(), |mut by_kind, v| {
                by_kind.entry(kind(&v)).or_default().push(v);
                by_kind
            });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut kinds = Vec::new();
    for line in stdout.lines() {
        let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_ne!(event, Event::Unknown, "{line}");
        if let Event::Hello {
            protocol, executor, ..
        } = &event
        {
            assert_eq!(
                (*protocol, *executor),
                (PROTOCOL_VERSION, ExecutorKind::Python)
            );
        }
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let same = golden
            .get(&kind(&value))
            .unwrap_or_else(|| panic!("no golden line of kind {}", kind(&value)));
        let fits = same.iter().any(|g| extra_fields(&value, g, "").is_empty());
        assert!(fits, "{line}\n does not fit any golden line {same:?}");
        kinds.push(kind(&value));
    }
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "bench",
            "device_state",
            "done",
            "failed/device_unusable",
            "failed/exception",
            "failed/hub_refused",
            "failed/internal",
            "failed/invalid_smoke",
            "failed/mismatch",
            "hello",
            "module",
            "phase",
            "runtime",
            "sample",
            "timing"
        ],
        "every kind the driver writes"
    );
}

#[test]
fn the_self_check_rejects_a_shape_the_golden_lines_do_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Every golden timing line with its milliseconds as a string.
    let golden: Vec<String> = std::fs::read_to_string(root.join(GOLDEN))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["event"] == "timing" {
                v["ms"] = v["ms"].to_string().into();
            }
            v.to_string()
        })
        .collect();
    let golden = golden.join("\n");
    let path = dir.path().join("golden.jsonl");
    std::fs::write(&path, golden).unwrap();
    let out = Command::new(probe_fixtures::python())
        .arg(root.join("probes/python/driver.py"))
        .arg("--self-check")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("timing.ms"), "{stderr}");
}
