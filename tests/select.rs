//! `preflight select`: the path of the best variant that works, and what
//! happens when none does.

mod common;

use common::{kernel_repo, preflight_cmd, stderr, stdout, variant_names};
use serde_json::Value;

fn select(args: &[&str]) -> std::process::Output {
    preflight_cmd()
        .arg("select")
        .args(args)
        .arg("--python")
        .arg(common::venv_python())
        .output()
        .unwrap()
}

#[test]
fn prints_the_absolute_path_of_the_preferred_working_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let names = variant_names(3); // torch-universal, torch-cpu, torch-cuda
    let repo = kernel_repo(tmp.path(), "tiny", &names, "X = 1\n");
    // torch-cpu, preferred over torch-universal, fails to import.
    std::fs::write(
        repo.join("build/torch-cpu/__init__.py"),
        "import not_installed_anywhere\n",
    )
    .unwrap();
    let out = select(&[repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let path = stdout(&out).trim().to_string();
    assert!(std::path::Path::new(&path).is_absolute(), "{path}");
    assert!(path.ends_with("build/torch-universal"), "{path}");

    let out = select(&[repo.to_str().unwrap(), "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["variant"], "torch-universal");
    assert_eq!(doc["outcome"]["kind"], "pass");
    let alternatives: Vec<(&str, &str)> = doc["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["variant"].as_str().unwrap(),
                a["outcome"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        alternatives.contains(&("torch-cpu", "missing_dependency")),
        "{alternatives:?}"
    );
}

#[test]
fn fastest_picks_the_shortest_smoke() {
    let tmp = tempfile::tempdir().unwrap();
    let names = variant_names(2); // torch-universal, torch-cpu
    let repo = kernel_repo(
        tmp.path(),
        "tiny",
        &names,
        "import time\nSLEEP = 0.0\n\ndef work():\n    time.sleep(SLEEP)\n    return 1\n",
    );
    std::fs::write(
        repo.join("build/torch-cpu/__init__.py"),
        "import time\n\ndef work():\n    time.sleep(0.3)\n    return 1\n",
    )
    .unwrap();
    let smoke = tmp.path().join("smoke.py");
    std::fs::write(
        &smoke,
        "def smoke(kernel, device):\n    return (kernel.work(), 1)\n",
    )
    .unwrap();
    let pick = |extra: &[&str]| {
        let mut args = vec![repo.to_str().unwrap(), "--smoke", smoke.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = select(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().rsplit('/').next().unwrap().to_string()
    };
    assert_eq!(pick(&[]), "torch-cpu", "the hub's preference");
    assert_eq!(pick(&["--fastest"]), "torch-universal", "the shorter smoke");
    // Without bench results the smoke call decides, and is not called a speed.
    let out = select(&[
        repo.to_str().unwrap(),
        "--smoke",
        smoke.to_str().unwrap(),
        "--fastest",
        "--json",
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["speed"]["basis"], "no_bench_data", "{doc}");
    assert!(doc["speed"]["median_ms"].is_null(), "{doc}");
    let err = stderr(&out);
    assert!(err.contains("not a speed measurement"), "{err}");
}

#[test]
fn nothing_works_is_exit_1_with_the_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(
        tmp.path(),
        "tiny",
        &variant_names(2),
        "raise RuntimeError('CUDA error: no kernel image is available for execution on the device')\n",
    );
    let out = select(&[repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.contains("no variant works here"), "{err}");
    assert!(err.contains("unsupported_arch"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    let out = select(&[repo.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["variant"], Value::Null);
    assert_eq!(doc["path"], Value::Null);
    assert_eq!(doc["alternatives"].as_array().unwrap().len(), 2);
}

#[test]
fn a_name_rejected_variant_is_chosen_only_when_asked_and_only_with_smoke_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    // The test environment has no torch, so the hub rejects every
    // torch-versioned build by its name here; this one imports and runs.
    let names = vec!["torch29-cxx11-cpu-x86_64-linux".to_string()];
    let repo = kernel_repo(tmp.path(), "named", &names, "def work():\n    return 1\n");
    let smoke = tmp.path().join("smoke.py");
    std::fs::write(
        &smoke,
        "def smoke(kernel, device):\n    return (kernel.work(), 1)\n",
    )
    .unwrap();
    let repo = repo.to_str().unwrap();
    let smoke = smoke.to_str().unwrap();

    // By default names decide: nothing the hub accepts works.
    let out = select(&[repo, "--smoke", smoke, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["variant"].is_null(), "{doc}");
    assert_eq!(doc["alternatives"][0]["outcome"]["kind"], "pass", "{doc}");
    assert_eq!(doc["alternatives"][0]["accepted_by_name"], false);

    // Asked to let evidence overrule names, with a smoke that ran: chosen,
    // and said so.
    let out = select(&[repo, "--smoke", smoke, "--json", "--overrule-names"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["variant"], names[0].as_str());
    assert_eq!(doc["overrules_name"], true);
    assert!(stderr(&out).contains("rejected by the hub by its name"));

    // An import alone is not enough evidence to overrule a name.
    let out = select(&[repo, "--json", "--overrule-names", "--no-cache"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["variant"].is_null(), "{doc}");
}
