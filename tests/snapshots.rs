//! Snapshots (insta) of the tables and JSON users see, so that a change of
//! their layout or wording is a reviewed diff (`cargo insta review`, or
//! `INSTA_UPDATE=always` and read the `.snap` files' diff). What varies
//! from run to run (times, the machine, absolute paths) is replaced by a
//! placeholder first; everything else is the real output of the binary.

mod common;

use common::{preflight_cmd, stderr, stdout, venv_python};
use serde_json::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example() -> PathBuf {
    root().join("examples/kernels/relu-demo")
}

/// Every fact `resolve` reads, given: the answer is this machine's alone.
const SYSTEM: &str = "backend=cuda,cuda=12.8,cpu=x86_64,os=linux,torch=2.9,cxx11=true,tvm-ffi=none";

fn run(args: &[&str]) -> (String, i32) {
    let cache = tempfile::tempdir().unwrap();
    let out = preflight_cmd()
        .args(args)
        .env("PREFLIGHT_CACHE", cache.path())
        .output()
        .expect("run preflight");
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    let text = stdout(&out).replace(&root().display().to_string(), "<repo>");
    (text, out.status.code().unwrap_or(-1))
}

/// A time as the tables print it (`718 ms`, `1.14 s`, `0.01 ms`).
fn is_time(cell: &str) -> bool {
    let cell = cell.trim_end_matches(" (cached)");
    let Some((number, unit)) = cell.split_once(' ') else {
        return false;
    };
    matches!(unit, "ms" | "s" | "µs") && number.parse::<f64>().is_ok()
}

/// A table's rows as their cells, trimmed and `|`-joined, with times
/// replaced: the columns, their order and every word, without the widths
/// that a time of another length would change.
fn cells(table: &str) -> String {
    table
        .lines()
        .map(|line| {
            if line.starts_with("system: ") {
                return "system: <this machine>".to_string();
            }
            if !line.starts_with('│') {
                return line.to_string();
            }
            let cells: Vec<String> = line
                .trim_matches('│')
                .split('┆')
                .map(|c| match c.trim() {
                    t if is_time(t) => "<time>".to_string(),
                    t => t.to_string(),
                })
                .collect();
            format!("| {} |", cells.join(" | "))
        })
        .filter(|line| !line.starts_with(['┌', '╞', '├', '└']))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn resolve_table_and_json() {
    let dir = example().display().to_string();
    let (table, code) = run(&["resolve", &dir, "--system", SYSTEM]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("resolve_table", table);
    let (json, code) = run(&["resolve", &dir, "--system", SYSTEM, "--json"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&json).expect("resolve --json");
    insta::assert_snapshot!("resolve_json", serde_json::to_string_pretty(&doc).unwrap());
}

/// `check --json` of the example with what varies taken out: the
/// machine (its own snapshot would be this machine's), the isolation,
/// every time, and of a stderr tail all but its last line (a traceback
/// names the probe's temporary folder and the driver's line numbers).
fn stable_check_json(text: &str) -> String {
    let mut doc: Value = serde_json::from_str(text).expect("check --json");
    let map = doc.as_object_mut().unwrap();
    map.insert("fingerprint".into(), Value::String("<machine>".into()));
    map.insert("isolation".into(), Value::String("<isolation>".into()));
    for row in doc["results"].as_array_mut().unwrap() {
        let tail = &mut row["outcome"]["stderr_tail"];
        if let Some(last) = tail.as_str().and_then(|t| t.lines().last()) {
            *tail = Value::String(format!("<…>\n{last}"));
        }
        for (_, ms) in row["timings"].as_object_mut().unwrap().iter_mut() {
            if !ms.is_null() {
                *ms = Value::String("<ms>".into());
            }
        }
    }
    serde_json::to_string_pretty(&doc).unwrap()
}

#[test]
fn check_table_and_json() {
    let python = venv_python().display().to_string();
    let dir = example().display().to_string();
    let (table, code) = run(&["check", &dir, "--python", &python, "--no-cache"]);
    assert_eq!(code, 0, "{table}");
    insta::assert_snapshot!("check_table", cells(&table));
    let (json, code) = run(&["check", &dir, "--python", &python, "--no-cache", "--json"]);
    assert_eq!(code, 0, "{json}");
    insta::assert_snapshot!("check_json", stable_check_json(&json));
}

#[test]
fn warmup_json() {
    let python = venv_python().display().to_string();
    let dir = example().display().to_string();
    let (json, code) = run(&["warmup", &dir, "--python", &python, "--json"]);
    assert_eq!(code, 0, "{json}");
    let doc: Value = serde_json::from_str(&json).expect("warmup --json");
    insta::assert_snapshot!("warmup_json", serde_json::to_string_pretty(&doc).unwrap());
}
