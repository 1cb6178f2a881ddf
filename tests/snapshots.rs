//! Snapshots (insta) of the tables and JSON users see, so that a change of
//! their layout or wording is a reviewed diff (`cargo insta review`, or
//! `INSTA_UPDATE=always` and read the `.snap` files' diff). What varies
//! from run to run (times, the machine, absolute paths) is replaced by a
//! placeholder first; everything else is the real output of the binary.

mod common;
#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

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
const SYSTEM: &str = "backend=cuda,cuda=12.8,cpu=x86_64,os=linux,torch=2.9,cxx11=true,tvm-ffi=none,\
                      python=3.12,free-threaded=false,mlx=false,kernels=0.19.1";

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
/// every time, the child's memory, and of a stderr tail all but its last
/// line (a traceback names the probe's temporary folder and the driver's
/// line numbers).
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
        let timings = row["timings"].as_object_mut().unwrap();
        // The child's memory, when it could read /proc/self/smaps_rollup:
        // whether it is there at all is the machine's.
        timings.remove("memory");
        for (_, ms) in timings.iter_mut() {
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

#[test]
fn select_path_and_json() {
    let python = venv_python().display().to_string();
    let dir = example().display().to_string();
    let (path, code) = run(&["select", &dir, "--python", &python]);
    assert_eq!(code, 0, "{path}");
    insta::assert_snapshot!("select_path", path);
    let (json, code) = run(&["select", &dir, "--python", &python, "--json"]);
    assert_eq!(code, 0, "{json}");
    let mut doc: Value = serde_json::from_str(&json).expect("select --json");
    stable_tail(&mut doc["outcome"]["stderr_tail"]);
    for alternative in doc["alternatives"].as_array_mut().unwrap() {
        stable_tail(&mut alternative["outcome"]["stderr_tail"]);
    }
    insta::assert_snapshot!("select_json", serde_json::to_string_pretty(&doc).unwrap());
}

/// A stderr tail as its last line (a traceback names the probe's
/// temporary folder and the driver's line numbers).
fn stable_tail(tail: &mut Value) {
    if let Some(last) = tail.as_str().and_then(|t| t.lines().last()) {
        *tail = Value::String(format!("<…>\n{last}"));
    }
}

#[test]
fn cache_ls_after_a_warmup() {
    let python = venv_python().display().to_string();
    let dir = example().display().to_string();
    let cache = tempfile::tempdir().unwrap();
    let ran = |args: &[&str]| {
        let out = preflight_cmd()
            .args(args)
            .env("PREFLIGHT_CACHE", cache.path())
            .output()
            .expect("run preflight");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
            .replace(&cache.path().display().to_string(), "<cache>")
            .replace(&root().display().to_string(), "<repo>")
    };
    ran(&["warmup", &dir, "--python", &python]);
    // Keys hash this machine's fingerprint, and the rows are in key order:
    // keys and ages are placeholders, the rows in variant order.
    let table = cells(&ran(&["cache", "ls"]));
    let mut lines: Vec<String> = table
        .lines()
        .map(|line| {
            let mut cells: Vec<&str> = line.split(" | ").collect();
            if cells.len() == 5 && !line.starts_with("| key ") {
                cells[0] = "| <key>";
                cells[3] = "<age>";
            }
            cells.join(" | ")
        })
        .collect();
    let rows = lines.iter().position(|l| l.starts_with("| <key>")).unwrap();
    lines[rows..].sort_by_key(|l| l.split(" | ").nth(1).map(str::to_owned));
    insta::assert_snapshot!("cache_ls", lines.join("\n"));
}

/// `fingerprint`'s table of a described machine (fake `/sys` and `/proc`,
/// a toolkit, a virtual environment, the host's facts given): every value
/// is the description's, its folder `<machine>` and the hash `<hash>`.
#[test]
fn fingerprint_table_of_a_described_machine() {
    let mut m = machine::Machine::new();
    m.gpu("0000:01:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.write("proc/driver/nvidia/version", machine::PROC_OPEN);
    let home = m.toolkit("cuda-12.8", machine::NVCC_12_8);
    let venv = m.venv("venv", "3.12.4");
    let site = machine::venv_site(&venv);
    m.dist(&site, "torch-2.9.0+cu128.dist-info");
    m.write(
        "venv/lib/python3.12/site-packages/torch/version.py",
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
    );
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    m.set("CUDA_HOME", home.to_string_lossy());
    for (key, value) in [
        ("PREFLIGHT_OS", "linux"),
        ("PREFLIGHT_ARCH", "x86_64"),
        ("PREFLIGHT_GLIBC", "2.36"),
        ("PREFLIGHT_TORCH_CXX11_ABI", "true"),
    ] {
        m.set(key, value);
    }
    let (fp, hash) = m.fingerprint(&[]);
    assert!(!fp.gpus.devices.is_empty());
    let out = m.run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out)
        .replace(&m.path("").display().to_string(), "<machine>/")
        .replace(&hash, "<hash>");
    insta::assert_snapshot!("fingerprint_table", cells(&table));
}
