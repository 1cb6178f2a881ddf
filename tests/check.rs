//! `preflight check` from the command line: the example repo, the JSON
//! shape, exit codes, --all, --smoke and --jobs.

mod common;
mod probe_fixtures;

use common::{preflight_cmd, stderr, stdout};
use probe_fixtures::{Repo, python};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

fn example() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/kernels/relu-demo")
        .display()
        .to_string()
}

fn check(args: &[&str]) -> Output {
    preflight_cmd()
        .arg("check")
        .arg("--python")
        .arg(python())
        .args(args)
        .output()
        .expect("run preflight check")
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", stdout(output), stderr(output)))
}

fn kinds(doc: &Value) -> Vec<(String, String)> {
    let mut kinds: Vec<(String, String)> = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["variant"].as_str().unwrap().to_string(),
                r["outcome"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    kinds.sort();
    kinds
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_example_shows_passing_and_failing_variants() {
    let out = check(&[&example(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(
        kinds(&doc),
        pairs(&[
            ("torch-cpu", "missing_dependency"),
            // No torch and no GPU here: nothing can use its device (on a GPU
            // that torch sees it is `unsupported_arch`, see the example's README).
            ("torch-cuda", "no_device"),
            ("torch-universal", "pass"),
            ("torch-xpu", "import_error"),
            ("torch29-cpu-x86_64-windows", "skipped"),
        ])
    );
    // Every outcome records the depth it reached: a failure, what it had
    // done before it failed.
    let depth = |variant: &str| {
        doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["variant"] == variant)
            .map(|r| r["outcome"]["depth"].clone())
            .unwrap()
    };
    assert_eq!(depth("torch-universal"), "verified");
    // Imported, then its device was not usable.
    assert_eq!(depth("torch-cuda"), "load");
    // Its import failed: nothing done.
    assert_eq!(depth("torch-cpu"), Value::Null);
}

#[test]
fn json_has_the_documented_shape() {
    let out = check(&[&example(), "--json"]);
    let doc = json(&out);
    let hash = doc["fingerprint"]["hash"]
        .as_str()
        .expect("fingerprint hash");
    assert_eq!(hash.len(), 64, "sha256 hex: {hash}");
    assert_eq!(doc["fingerprint"]["depth"], "full");
    let universal = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "torch-universal")
        .expect("torch-universal row");
    assert_eq!(universal["target"], example());
    assert!(
        universal["path"]
            .as_str()
            .unwrap()
            .ends_with("build/torch-universal")
    );
    assert_eq!(universal["declared"]["accepted"], true);
    assert_eq!(universal["declared"]["reason"], Value::Null);
    let outcome = &universal["outcome"];
    for key in [
        "kind",
        "phase",
        "depth",
        "message",
        "hint",
        "exit_code",
        "signal",
    ] {
        assert!(
            outcome.get(key).is_some(),
            "outcome.{key} missing: {outcome}"
        );
    }
    assert_eq!(outcome["phase"], "done");
    assert_eq!(outcome["depth"], "verified");
    let timings = &universal["timings"];
    assert!(timings["total_ms"].as_f64().unwrap() > 0.0);
    assert!(timings["import_ms"].as_f64().is_some());
    assert!(timings["smoke_ms"].as_f64().is_some());
    let skipped = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "torch29-cpu-x86_64-windows")
        .unwrap();
    assert_eq!(skipped["declared"]["accepted"], false);
    assert!(
        skipped["declared"]["reason"]
            .as_str()
            .unwrap()
            .contains("OS (windows)")
    );
}

#[test]
fn the_table_puts_declared_next_to_observed_and_explains_failures() {
    let out = check(&[&example()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "variant",
        "declared",
        "observed",
        "≠ missing_dependency",
        "✗ torch-cuda — no_device in load: the cuda device is not usable: torch is not installed here",
        "✗ torch-xpu — import_error in import: hub loader (kernels ",
        "hint: ",
        "1 of 5 variants works here; the best working variant is torch-universal",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    assert!(
        stderr(&out).is_empty(),
        "no progress bar when stderr is not a terminal: {}",
        stderr(&out)
    );
}

#[test]
fn all_probes_variants_for_another_os_too() {
    let out = check(&[&example(), "--json", "--all"]);
    let doc = json(&out);
    let windows = kinds(&doc)
        .into_iter()
        .find(|(v, _)| v == "torch29-cpu-x86_64-windows")
        .unwrap();
    assert_eq!(windows.1, "import_error", "probed, and its import raises");
}

#[test]
fn exit_1_when_a_target_has_no_passing_variant() {
    let repo = Repo::new();
    repo.variant("torch-universal", "import not_installed_anywhere\n");
    let root = repo.root().display().to_string();
    let out = check(&[&root, &example(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(
        doc["results"][0]["target"], root,
        "targets keep their order"
    );
}

#[test]
fn a_smoke_file_overrides_the_repo_benchmarks() {
    let repo = Repo::new();
    let smoke = repo.file(
        "smoke.py",
        "def smoke(kernel, device):\n    out = [0.0, 0.0]\n    kernel.relu(out, [-1.0, 2.0])\n    return out, [0.0, 1.0]\n",
    );
    let out = check(&[
        &example(),
        "--json",
        "--smoke",
        &smoke.display().to_string(),
    ]);
    let doc = json(&out);
    let universal = kinds(&doc)
        .into_iter()
        .find(|(v, _)| v == "torch-universal")
        .unwrap();
    assert_eq!(
        universal.1, "wrong_result",
        "the given smoke's (wrong) reference is used"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let missing = check(&["/no/such/kernel"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("/no/such/kernel: no such file or directory"));

    let smoke = check(&[&example(), "--smoke", "/no/such/smoke.py"]);
    assert_eq!(smoke.status.code(), Some(2));
    assert!(stderr(&smoke).contains("--smoke /no/such/smoke.py: no such file"));

    for bad in [
        ["--jobs", "0"],
        ["--jobs", "x"],
        ["--timeout", "-1"],
        ["--grace", "0"],
    ] {
        let out = check(&[&example(), bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
    }

    let python = preflight_cmd()
        .args(["check", &example(), "--python", "/no/such/python3"])
        .output()
        .unwrap();
    assert_eq!(python.status.code(), Some(2));
    assert!(stderr(&python).contains("--python /no/such/python3"));

    let none = preflight_cmd().arg("check").output().unwrap();
    assert_eq!(none.status.code(), Some(2), "a target is required");
}

#[test]
fn jobs_run_probes_in_parallel() {
    // Four variants that each sleep 1 s, with --jobs 4.
    let repo = Repo::new();
    for name in ["torch-cpu", "torch-cuda", "torch-xpu", "torch-universal"] {
        repo.variant(name, "import time\ntime.sleep(1)\n");
    }
    let root = repo.root().display().to_string();
    let start = std::time::Instant::now();
    let out = check(&[&root, "--jobs", "4", "--json"]);
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    // One at a time, the whole command would take at least the sum of the
    // probes' times; in parallel, far less.
    let sum: f64 = results
        .iter()
        .map(|r| r["timings"]["total_ms"].as_f64().unwrap())
        .sum();
    assert!(sum >= 4000.0, "each probe slept 1 s: {sum} ms");
    assert!(
        elapsed < sum - 1500.0,
        "took {elapsed:.0} ms for {sum:.0} ms of probes"
    );
}

#[test]
fn interrupt_stops_every_probe_and_exits_130() {
    let repo = Repo::new();
    // Not beside the kernel: its files are read-only to its probe.
    let pids = common::fresh_dir("interrupt-pids");
    for name in ["torch-cpu", "torch-universal"] {
        repo.variant(
            name,
            &format!(
                "import os, time\nopen(os.path.join({:?}, str(os.getpid()) + '-' + {name:?}), 'w').close()\ntime.sleep(1000)\n",
                pids.display().to_string()
            ),
        );
    }
    let mark = common::mark();
    let child = preflight_cmd()
        .args(["check", "--jobs", "2", "--python"])
        .arg(python())
        .arg(repo.root())
        .env(common::MARK_VAR, &mark)
        // Past the walls: each probe marks itself here.
        .env("PREFLIGHT_PROBE_WRITABLE", &pids)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::fs::read_dir(&pids).unwrap().count() < 2 {
        assert!(started.elapsed().as_secs() < 20, "probes did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let interrupted = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        interrupted.elapsed().as_secs() < 5,
        "took {:?}",
        interrupted.elapsed()
    );
    assert!(stderr(&out).contains("interrupted"));
    // Every probe, and everything else started under the command, is gone.
    common::assert_none_marked(&mark);
}

#[test]
fn a_known_hub_kernel_gets_preflights_library_smoke() {
    // A hub cache entry of kernels-community/activation without benchmarks:
    // the smoke comes from probes/kernels/activation.py, which needs torch.
    let cache = tempfile::tempdir().unwrap();
    let folder = cache.path().join("kernels--kernels-community--activation");
    let variant = folder.join("snapshots/0123abcd/build/torch-universal");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::write(
        variant.join("metadata.json"),
        r#"{"name":"activation","id":"_activation_0123abc","version":1,"license":"Apache-2.0","python-depends":[],"backend":{"type":"cpu"}}"#,
    )
    .unwrap();
    std::fs::write(
        variant.join("__init__.py"),
        "def silu_and_mul(out, x):\n    pass\n",
    )
    .unwrap();
    let out = check(&[&folder.display().to_string(), "--json"]);
    let doc = json(&out);
    let outcome = &doc["results"][0]["outcome"];
    if python_has_torch() {
        assert_ne!(outcome["kind"], "probe_error", "{outcome}");
    } else {
        assert_eq!(outcome["kind"], "missing_dependency", "{outcome}");
        assert_eq!(
            outcome["phase"], "smoke",
            "the library smoke ran: {outcome}"
        );
        assert!(outcome["message"].as_str().unwrap().contains("`torch`"));
    }
}

fn python_has_torch() -> bool {
    std::process::Command::new(python())
        .args(["-c", "import torch"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn findings_that_change_no_result_are_warnings_on_stderr_and_in_json() {
    let repo = Repo::new();
    repo.variant("torch-universal", "X = 1\n");
    repo.file("build/README.md", "not a variant\n");
    let root = repo.root().display().to_string();
    let out = check(&[&root, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    let warnings: Vec<&str> = doc["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].ends_with("README.md: not a directory, ignored"));
    assert!(
        stderr(&out).contains("preflight: warning: "),
        "{}",
        stderr(&out)
    );
    // Nothing to say: no `warnings` key at all.
    let clean = json(&check(&[&example(), "--json"]));
    assert!(clean.get("warnings").is_none());
}
