//! Forked probes against fresh ones and against the floor, side by side in
//! the same run, interleaved (issue 23):
//!
//! 1. `warmup` of 8 uncached torch variants (8 kernels, one variant each):
//!    the floor (one interpreter imports torch and `kernels`, then loads
//!    each variant with `kernels.get_local_kernel`), fresh probes
//!    (`PREFLIGHT_FORK=0`), forked probes (the default with torch), with
//!    `--jobs 2` and `--jobs 1`. Goal: forked at most 2× the floor. Whether
//!    the forked runs were forked is checked too (an environment whose fork
//!    server is given up, as one with numpy was, runs them fresh).
//! 2. A cold `select` (what a first `get_kernel` runs) of a kernel with 3
//!    candidates the hub accepts here (`torch215-cxx11-cu132-x86_64-linux`,
//!    `torch-cuda`, `torch-universal`: on a machine without a GPU the two
//!    CUDA ones fail their device check). Goal: forked at most the floor
//!    plus 1 s.
//! 3. One torch variant, and one pure-Python kernel in an interpreter
//!    without torch (`.venv`): forked (the default) not slower than fresh.
//!
//! Each variant imports torch and registers a `torch.library.custom_op`, as
//! hub kernels do. Outcomes are wiped before every probe run (the measured
//! fingerprint is kept, as on a machine that ran preflight once).
//!
//! `scripts/bench-forked.sh [VENV]` (or `cargo bench --bench forked`;
//! rounds: `PREFLIGHT_BENCH_ROUNDS`, default 3). Needs an interpreter with
//! torch and `kernels`: `PREFLIGHT_BENCH_TORCH_PYTHON`, else
//! `.venv-real/bin/python` (`scripts/test-real-kernels.sh` makes it);
//! without one it says so and measures nothing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{Case, benchmarking, judged, measure, preflight, print_cases, quantile, rounds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn torch_python() -> Option<PathBuf> {
    let python = std::env::var_os("PREFLIGHT_BENCH_TORCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join(".venv-real/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import torch, kernels"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// A torch variant `name` of kernel `kernel` under `root/kernel/build/`.
fn variant(root: &Path, kernel: &str, name: &str, op: &str) -> PathBuf {
    let dir = root.join(kernel).join("build").join(name);
    std::fs::create_dir_all(&dir).expect("variant dir");
    let backend = if name.contains("cu") && name != "torch-universal" {
        "cuda"
    } else {
        "cpu"
    };
    let metadata = serde_json::json!({
        "name": kernel, "id": format!("_{}_{}", kernel.replace('-', "_"), op),
        "version": 1, "license": "MIT", "python-depends": [],
        "backend": {"type": backend},
    });
    std::fs::write(dir.join("metadata.json"), metadata.to_string()).expect("metadata");
    std::fs::write(
        dir.join("__init__.py"),
        format!(
            "import torch\n\
             from torch import nn\n\n\
             @torch.library.custom_op('{op}::add', mutates_args=())\n\
             def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    return x + y\n\n\
             class Add(nn.Module):\n    def forward(self, x, y):\n        return add(x, y)\n"
        ),
    )
    .expect("__init__.py");
    root.join(kernel)
}

/// The same variant as the only one of a kernel of its own, for the floor
/// (`get_local_kernel` loads the variant the hub picks).
fn floor_copy(root: &Path, kernel: &str, op: &str) -> PathBuf {
    variant(root, kernel, "torch-universal", op)
}

/// One interpreter: import torch and `kernels`, then `get_local_kernel`
/// of every repo.
fn floor(python: &Path, repos: &[PathBuf]) -> Command {
    let mut cmd = Command::new(python);
    cmd.args([
        "-c",
        "import sys, pathlib, torch, kernels\n\
         for repo in sys.argv[1:]:\n    kernels.get_local_kernel(pathlib.Path(repo))\n",
    ]);
    cmd.args(repos);
    cmd
}

/// `preflight ARGS --python python` on `cache`, its outcomes wiped first.
fn preflight_run(
    args: &[&str],
    targets: &[PathBuf],
    python: &Path,
    cache: &Path,
    fork: Option<&str>,
) -> Command {
    let mut cmd = Command::new("sh");
    // The wipe is part of the command so that the case times one run.
    cmd.arg("-c")
        .arg("find \"$PREFLIGHT_CACHE\" -mindepth 1 -maxdepth 1 ! -name 'fingerprints-*' ! -name CACHEDIR.TAG -exec rm -rf {} + && exec \"$@\"")
        .arg("sh")
        .arg(preflight())
        .args(args)
        .args(targets)
        .arg("--python")
        .arg(python)
        .env("PREFLIGHT_CACHE", cache);
    match fork {
        Some(value) => cmd.env("PREFLIGHT_FORK", value),
        None => cmd.env_remove("PREFLIGHT_FORK"),
    };
    cmd
}

fn case<'a>(name: &'static str, mut cmd: Command) -> Case<'a> {
    (
        name,
        Box::new(move || {
            support::time(&mut cmd);
        }),
    )
}

fn median(samples: &[Duration]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort();
    quantile(&sorted, 0.5).as_secs_f64()
}

/// How many of the probes of one default `check --json --jobs 1` were
/// forked, of how many, and preflight's warning when there was one.
fn forked_count(python: &Path, repos: &[PathBuf], cache: &Path) -> (usize, usize, String) {
    let out = preflight_run(
        &["check", "--json", "--jobs", "1"],
        repos,
        python,
        cache,
        None,
    )
    .output()
    .expect("check runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check --json");
    let results = json["results"].as_array().expect("results");
    let forked = results
        .iter()
        .filter(|r| r["outcome"]["made"] == "forked")
        .count();
    let warning = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("warning"))
        .collect::<Vec<_>>()
        .join("; ");
    (forked, results.len(), warning)
}

/// The memory the probes of one `check --json` reported: (rss, pss) in MB, the medians.
fn memory(python: &Path, repos: &[PathBuf], cache: &Path, fork: &str) -> (f64, f64) {
    let out = preflight_run(
        &["check", "--json", "--jobs", "2"],
        repos,
        python,
        cache,
        Some(fork),
    )
    .output()
    .expect("check runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check --json");
    let mut rss = Vec::new();
    let mut pss = Vec::new();
    for r in json["results"].as_array().expect("results") {
        if let Some(m) = r["timings"]["memory"].as_object() {
            rss.push(m["rss_kb"].as_f64().unwrap_or(0.0) / 1024.0);
            pss.push(m["pss_kb"].as_f64().unwrap_or(0.0) / 1024.0);
        }
    }
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    (mid(&mut rss), mid(&mut pss))
}

fn main() {
    if !benchmarking() {
        // Each round imports torch a few dozen times: too long for the
        // smoke run of `cargo test --all-targets`.
        println!("forked: measured only under `cargo bench` (scripts/bench-forked.sh)");
        return;
    }
    let Some(python) = torch_python() else {
        println!(
            "forked: skipped, measured nothing: no interpreter with torch and kernels \
             (PREFLIGHT_BENCH_TORCH_PYTHON, or .venv-real from scripts/test-real-kernels.sh)"
        );
        return;
    };
    let rounds = rounds(3);
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    let cache = root.join("cache");
    // The fingerprint, measured once, as on a machine that ran preflight before.
    let status = Command::new(preflight())
        .args(["fingerprint", "--full", "--python"])
        .arg(&python)
        .env("PREFLIGHT_CACHE", &cache)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("fingerprint");
    assert!(status.success(), "preflight fingerprint --full");

    let eight: Vec<PathBuf> = (0..8)
        .map(|i| {
            variant(
                &root.join("eight"),
                &format!("kernel-{i}"),
                "torch-universal",
                &format!("k{i}"),
            )
        })
        .collect();
    let floor8: Vec<PathBuf> = (0..8)
        .map(|i| {
            floor_copy(
                &root.join("floor8"),
                &format!("kernel-{i}"),
                &format!("k{i}"),
            )
        })
        .collect();
    let three = root.join("three");
    for (i, name) in [
        "torch215-cxx11-cu132-x86_64-linux",
        "torch-cuda",
        "torch-universal",
    ]
    .iter()
    .enumerate()
    {
        variant(&three, "three", name, &format!("t{i}"));
    }
    let three = vec![three.join("three")];
    let floor3: Vec<PathBuf> = (0..3)
        .map(|i| {
            floor_copy(
                &root.join("floor3"),
                &format!("three-{i}"),
                &format!("t{i}"),
            )
        })
        .collect();
    let one = vec![eight[0].clone()];
    let floor1 = vec![floor8[0].clone()];
    let bare = support::python();
    let pure = root.join("pure/pure/build/torch-universal");
    std::fs::create_dir_all(&pure).expect("pure dir");
    std::fs::write(
        pure.join("metadata.json"),
        r#"{"name": "pure", "id": "_pure_1", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "cpu"}}"#,
    )
    .expect("metadata");
    std::fs::write(
        pure.join("__init__.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .expect("init");
    let pure = vec![root.join("pure/pure")];
    let bare_cache = root.join("bare-cache");
    let status = Command::new(preflight())
        .args(["fingerprint", "--full", "--python"])
        .arg(&bare)
        .env("PREFLIGHT_CACHE", &bare_cache)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("fingerprint");
    assert!(status.success(), "preflight fingerprint --full (bare)");

    let warmup = ["warmup", "--jobs", "2"];
    let warmup1 = ["warmup", "--jobs", "1"];
    let select = ["select", "--json"];
    let check = ["check", "--json"];
    let mut cases: Vec<Case> = vec![
        case(
            "8 variants: floor (one interpreter, get_local_kernel each)",
            floor(&python, &floor8),
        ),
        case(
            "8 variants: warmup, fresh probes",
            preflight_run(&warmup, &eight, &python, &cache, Some("0")),
        ),
        case(
            "8 variants: warmup, forked probes",
            preflight_run(&warmup, &eight, &python, &cache, None),
        ),
        case(
            "8 variants: warmup --jobs 1, forked probes",
            preflight_run(&warmup1, &eight, &python, &cache, None),
        ),
        case("3 candidates: floor", floor(&python, &floor3)),
        case(
            "3 candidates: cold select, fresh",
            preflight_run(&select, &three, &python, &cache, Some("0")),
        ),
        case(
            "3 candidates: cold select, forked",
            preflight_run(&select, &three, &python, &cache, None),
        ),
        case("1 variant: floor", floor(&python, &floor1)),
        case(
            "1 variant: check, fresh",
            preflight_run(&check, &one, &python, &cache, Some("0")),
        ),
        case(
            "1 variant: check, forked",
            preflight_run(&check, &one, &python, &cache, None),
        ),
        case(
            "pure Python, no torch: check, PREFLIGHT_FORK=0",
            preflight_run(&check, &pure, &bare, &bare_cache, Some("0")),
        ),
        case(
            "pure Python, no torch: check, default",
            preflight_run(&check, &pure, &bare, &bare_cache, None),
        ),
    ];
    let samples = measure(&mut cases, rounds);
    let medians: Vec<f64> = samples.iter().map(|s| median(s)).collect();
    print_cases(
        &format!(
            "forked probes, {rounds} rounds, interleaved (python: {})",
            python.display()
        ),
        &cases,
        samples,
    );
    let [
        floor8,
        fresh8,
        forked8,
        forked8_1,
        floor3,
        fresh3,
        forked3,
        floor1,
        fresh1,
        forked1,
        pure_fresh,
        pure_default,
    ] = medians[..]
    else {
        unreachable!("twelve cases")
    };
    println!();
    println!(
        "8 variants: forked {:.2}× the floor, fresh {:.2}× (goal: forked at most 2×): {}",
        forked8 / floor8,
        fresh8 / floor8,
        judged(forked8 <= 2.0 * floor8)
    );
    println!(
        "8 variants, --jobs 1: forked {:.2}× the floor (goal: at most 2×): {}",
        forked8_1 / floor8,
        judged(forked8_1 <= 2.0 * floor8)
    );
    let (forked, total, warning) = forked_count(&python, &eight, &cache);
    println!(
        "8 variants forked by default: {forked} of {total} (goal: all): {}{}",
        judged(forked == total),
        if warning.is_empty() {
            String::new()
        } else {
            format!(" ({warning})")
        }
    );
    println!(
        "3 candidates: forked {:+.2} s over the floor, fresh {:+.2} s (goal: at most +1 s): {}",
        forked3 - floor3,
        fresh3 - floor3,
        judged(forked3 <= floor3 + 1.0)
    );
    println!(
        "1 variant: forked {:.2} s, fresh {:.2} s, floor {:.2} s (goal: forked not slower than fresh): {}",
        forked1,
        fresh1,
        floor1,
        judged(forked1 <= fresh1 * 1.05)
    );
    println!(
        "pure Python without torch: default {:.2} s, PREFLIGHT_FORK=0 {:.2} s (goal: not slower): {}",
        pure_default,
        pure_fresh,
        judged(pure_default <= pure_fresh * 1.05)
    );
    let (rss, pss) = memory(&python, &eight, &cache, "0");
    println!("memory per child, fresh: RSS {rss:.0} MB, PSS {pss:.0} MB (medians of 8)");
    let (rss, pss) = memory(&python, &eight, &cache, "1");
    println!("memory per child, forked: RSS {rss:.0} MB, PSS {pss:.0} MB (medians of 8)");
}
