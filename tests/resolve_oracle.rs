//! `resolve` agrees with the hub loader's own resolver (`kernels` 0.17.2) on a
//! cross product of variants × systems: same decisions, same reasons, same
//! preference order.

mod common;

use kernel_preflight::declared::{System, resolve};
use kernel_preflight::variant::VariantName;
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

const VARIANTS: &[&str] = &[
    "torch29-cxx11-cu128-x86_64-linux",
    "torch29-cxx98-cu128-x86_64-linux",
    "torch29-cu126-x86_64-linux",
    "torch29-cxx11-cu130-x86_64-linux",
    "torch29-cxx11-cu129-aarch64-linux",
    "torch28-cxx11-cu118-x86_64-linux",
    "torch28-cxx11-cu126-x86_64-linux",
    "torch210-cu130-x86_64-linux",
    "torch210-cu128-x86_64-linux",
    "torch-stable-abi28-cu128-x86_64-linux",
    "torch-stable-abi29-cu130-x86_64-linux",
    "torch-stable-abi29-cu126-x86_64-linux",
    "torch-stable-abi210-cu130-x86_64-linux",
    "torch-stable-abi29-cpu-x86_64-linux",
    "tvm-ffi01-cu128-x86_64-linux",
    "tvm-ffi01-cu130-x86_64-linux",
    "tvm-ffi02-cu128-x86_64-linux",
    "tvm-ffi01-cpu-x86_64-linux",
    "torch29-rocm63-x86_64-linux",
    "torch29-rocm64-x86_64-linux",
    "torch29-xpu20252-x86_64-linux",
    "torch29-xpu20251-x86_64-windows",
    "torch29-cann81-aarch64-linux",
    "torch29-metal-aarch64-darwin",
    "torch-stable-abi29-metal-aarch64-darwin",
    "torch29-cpu-x86_64-linux",
    "torch29-cpu-aarch64-darwin",
    "torch29-cxx11-cpu-x86_64-linux",
    "torch29-neuron-x86_64-linux",
    "torch29-tpu-x86_64-linux",
    "torch29-cu128-x86_64-windows",
    "torch-cpu",
    "torch-cuda",
    "torch-metal",
    "torch-neuron",
    "torch-rocm",
    "torch-tpu",
    "torch-xpu",
    "torch-npu",
    "torch-universal",
];

/// (backend, version) pairs the systems take.
const BACKENDS: &[(&str, Option<&str>)] = &[
    ("cuda", Some("11.8")),
    ("cuda", Some("12.6")),
    ("cuda", Some("12.8")),
    ("cuda", Some("12.9")),
    ("cuda", Some("13.0")),
    ("rocm", Some("6.4")),
    ("xpu", Some("2025.2")),
    ("cann", Some("8.1")),
    ("metal", None),
    ("cpu", None),
    ("neuron", None),
    ("tpu", None),
];

fn systems() -> Vec<Value> {
    let mut out = Vec::new();
    for (backend, version) in BACKENDS {
        for torch in [None, Some("2.8"), Some("2.9"), Some("2.10")] {
            for cxx11 in [None, Some(true), Some(false)] {
                for tvm_ffi in [None, Some("0.1")] {
                    for (cpu, os, macos) in [
                        ("x86_64", "linux", None),
                        ("aarch64", "linux", None),
                        ("aarch64", "darwin", Some("15.5")),
                        ("aarch64", "darwin", Some("26.0")),
                        ("x86_64", "windows", None),
                    ] {
                        out.push(json!({
                            "backend": backend, "version": version, "cpu": cpu, "os": os,
                            "torch": torch, "cxx11": cxx11, "tvm_ffi": tvm_ffi, "macos": macos,
                        }));
                    }
                }
            }
        }
    }
    out
}

/// The `--system` spec that describes a system completely.
fn spec(s: &Value) -> String {
    let text = |k: &str| s[k].as_str().map_or("none".to_string(), str::to_string);
    let mut spec = format!("backend={}", text("backend"));
    if let Some(v) = s["version"].as_str() {
        spec += &format!(",{}={v}", text("backend"));
    }
    let cxx11 = s["cxx11"]
        .as_bool()
        .map_or("none".to_string(), |b| b.to_string());
    spec += &format!(
        ",cpu={},os={},torch={},cxx11={cxx11},tvm-ffi={},macos={}",
        text("cpu"),
        text("os"),
        text("torch"),
        text("tvm_ffi"),
        text("macos")
    );
    spec
}

fn oracle(cases: &[Value]) -> Vec<Value> {
    let mut child = Command::new(common::venv_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/hub_resolve.py"
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    let input = serde_json::to_vec(cases).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "oracle failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ours(names: &[VariantName], s: &Value) -> Value {
    let system = System::bare_host().with_overrides(&spec(s)).unwrap();
    let decisions: Vec<Value> = resolve(names, &system)
        .iter()
        .map(|d| json!({"variant": d.variant.to_string(), "accepted": d.accepted(), "reason": d.rejection.as_ref().map(ToString::to_string)}))
        .collect();
    Value::Array(decisions)
}

#[test]
fn library_agrees_with_the_hub_on_the_cross_product() {
    let systems = systems();
    // Every variant together, and each variant on its own against each system.
    let mut cases: Vec<Value> = systems
        .iter()
        .map(|s| json!({"variants": VARIANTS, "system": s}))
        .collect();
    // Reversed input order checks that ties are broken exactly as the hub's
    // stable sort breaks them.
    let reversed: Vec<&str> = VARIANTS.iter().rev().copied().collect();
    cases.extend(
        systems
            .iter()
            .map(|s| json!({"variants": reversed, "system": s})),
    );
    let expected = oracle(&cases);
    let mut mismatches = 0;
    for (case, expected) in cases.iter().zip(&expected) {
        let names: Vec<VariantName> = case["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| VariantName::parse(v.as_str().unwrap()).unwrap())
            .collect();
        let got = ours(&names, &case["system"]);
        if &got != expected {
            mismatches += 1;
            if mismatches <= 3 {
                eprintln!(
                    "system {}:\n ours: {}\n hub:  {}",
                    case["system"],
                    serde_json::to_string(&got).unwrap(),
                    serde_json::to_string(expected).unwrap()
                );
            }
        }
    }
    assert_eq!(
        mismatches,
        0,
        "{mismatches} of {} cases differ",
        cases.len()
    );
    assert!(cases.len() > 2000);
}

#[test]
fn command_line_agrees_with_the_hub() {
    // The command line contract, on a sample of the systems (one process each).
    let systems: Vec<Value> = systems().into_iter().step_by(23).collect();
    let cases: Vec<Value> = systems
        .iter()
        .map(|s| json!({"variants": VARIANTS, "system": s}))
        .collect();
    let expected = oracle(&cases);
    let list = VARIANTS.join(",");
    for (s, expected) in systems.iter().zip(&expected) {
        let out = common::preflight(&[
            "resolve",
            "--variants",
            &list,
            "--system",
            &spec(s),
            "--json",
        ]);
        let code = out.status.code();
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let got: Vec<Value> = doc["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| json!({"variant": d["variant"], "accepted": d["accepted"], "reason": d["reason"]}))
            .collect();
        assert_eq!(&Value::Array(got), expected, "system {s}");
        let any = expected
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["accepted"] == true);
        assert_eq!(code, Some(if any { 0 } else { 1 }), "exit code for {s}");
    }
}
