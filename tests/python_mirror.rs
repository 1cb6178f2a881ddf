//! The Python door's types (`python/kernel_preflight/_types.py`) agree with
//! the Rust ones they mirror, field by field: every outcome kind and every
//! field Rust writes (outcomes, `check` rows, `warmup` lines), serialized
//! here and read by Python's own parser in a real interpreter
//! (`tests/mirror/check.py`).

mod common;

use kernel_preflight::classify::{Depth, Outcome, OutcomeKind, Phase, Timings};
use kernel_preflight::protocol::{EmbeddedLoad, Made, Memory};
use kernel_preflight::report::warmup::KernelSummary;
use kernel_preflight::run::{CheckResult, Declared, JobId, TargetId};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// An outcome of `kind` with every field set (the ones serde may leave out
/// included), so each is seen by the Python side.
fn full(kind: OutcomeKind) -> Outcome {
    Outcome {
        kind,
        phase: Phase::Smoke,
        depth: Some(Depth::Device),
        message: format!("{kind} here"),
        hint: "do this".into(),
        exit_code: Some(1),
        signal: Some("SIGSEGV".into()),
        stderr_tail: "last line".into(),
        transient: true,
        embedded: vec![EmbeddedLoad {
            file: "_ops.so".into(),
            images: "SASS for sm_80".into(),
            loaded: 1,
            relocatable: 0,
            other_gpus: 0,
            taken: Some("sm_80 SASS".into()),
            load_ms: 1.5,
            jit_ms: Some(0.5),
            error: None,
        }],
        warning: Some("it keeps a thread".into()),
        made: Made::Forked,
        raised: Some("builtins.ImportError".into()),
    }
}

fn row(outcome: Outcome, leaked: Option<&str>) -> CheckResult {
    CheckResult {
        target_id: TargetId(0),
        job: JobId(0),
        target: "repo".into(),
        variant: "torch-universal".into(),
        path: "/k/build/torch-universal".into(),
        declared: Declared {
            accepted: false,
            reason: Some("needs torch 2.9".into()),
            short: Some("torch"),
        },
        outcome,
        timings: Timings {
            total_ms: 12.0,
            import_ms: Some(3.0),
            smoke_ms: Some(1.0),
            memory: Some(Memory {
                rss_kb: 812_344,
                pss_kb: 120_410,
            }),
        },
        leaked: leaked.map(str::to_owned),
        cached: true,
        remote: false,
    }
}

fn python_reads(doc: &Value) -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(common::venv_python())
        .arg(root.join("tests/mirror/check.py"))
        .env("PYTHONPATH", root.join("python"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(doc.to_string().as_bytes())
        .expect("write the documents");
    let out = child.wait_with_output().expect("python ran");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the checker's JSON")
}

#[test]
fn python_reads_every_rust_outcome_check_row_and_warmup_line_field_by_field() {
    let mut outcomes: Vec<Value> = OutcomeKind::ALL
        .iter()
        .map(|k| serde_json::to_value(full(*k)).unwrap())
        .collect();
    // And the sparse form serde writes for a plain pass.
    let mut plain = full(OutcomeKind::Pass);
    (plain.depth, plain.exit_code, plain.signal, plain.warning) = (None, None, None, None);
    plain.made = Made::Fresh;
    plain.embedded.clear();
    outcomes.push(serde_json::to_value(&plain).unwrap());
    let results = vec![
        serde_json::to_value(row(full(OutcomeKind::Crashed), Some("leaked: sleep"))).unwrap(),
        serde_json::to_value(row(plain.clone(), None)).unwrap(),
    ];
    let summary = KernelSummary {
        target: "acme/relu (main)".into(),
        kernel: "acme/relu (main)".into(),
        variants: 3,
        probed: 1,
        cached: 1,
        skipped: 1,
        passed: 1,
        best: Some("torch-universal".into()),
        native: false,
    };
    let summaries = vec![
        serde_json::to_value(&summary).unwrap(),
        serde_json::to_value(KernelSummary {
            best: None,
            ..summary.clone()
        })
        .unwrap(),
    ];
    let seen = python_reads(&json!({
        "outcomes": outcomes, "results": results, "summaries": summaries,
    }));

    assert_eq!(seen["problems"], json!([]), "the mirror drifted: {seen}");
    let passed: Vec<bool> = OutcomeKind::ALL
        .iter()
        .map(|k| k.passed())
        .chain([plain.kind.passed()])
        .collect();
    assert_eq!(
        seen["passed"],
        json!(passed),
        "Python's `passed` is not Rust's"
    );
    // What Python deliberately does not read: each named, so a field Rust
    // adds is a decision here rather than silently invisible to Python.
    assert_eq!(
        seen["unmirrored"],
        json!({
            "Outcome": ["embedded"], "VariantResult": [], "Timings": [], "KernelSummary": [],
        }),
    );
}
