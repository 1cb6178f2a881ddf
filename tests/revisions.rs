//! The snapshot a pinned revision or version names in the hub cache,
//! checked against the hub loader itself (`kernels` 0.17 offline, through
//! `tests/oracle/hub_snapshot.py`) on cache layouts built here.

mod common;

use kernel_preflight::discover::hub_cache::{self, RevisionError, RevisionSpec};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn sha(n: u8) -> String {
    format!("{:x}", n).repeat(40)
}

/// A snapshot holding `variants`, each loadable by the hub loader.
fn snapshot(folder: &Path, commit: &str, variants: &[&str]) {
    for v in variants {
        let dir = folder.join("snapshots").join(commit).join("build").join(v);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("__init__.py"), "X = 1\n").unwrap();
        let metadata = json!({"name": "kk", "id": format!("_k_{}", &commit[..8]), "version": 1,
            "license": "MIT", "python-depends": [], "backend": {"type": "cpu"}});
        std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
    }
}

fn write_ref(folder: &Path, name: &str, content: &str) {
    let path = folder.join("refs").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// The cache root of every test here.
fn layouts() -> PathBuf {
    let root = common::fresh_dir("revisions");
    let relu = root.join("kernels--acme--relu");
    for n in 1..=3 {
        snapshot(&relu, &sha(n), &["torch-universal"]);
    }
    write_ref(&relu, "main", &sha(2));
    write_ref(&relu, "v1", &sha(1));
    write_ref(&relu, "v2", &sha(2));
    write_ref(&relu, "v1_0", &sha(3)); // Python's int("1_0") is 10
    write_ref(&relu, "vx", &sha(3)); // not a version
    write_ref(&relu, "v7", &format!("{}\n", sha(3))); // versions are trimmed
    write_ref(&relu, "v5", &sha(9)); // a version whose snapshot is gone
    write_ref(&relu, "branch", &sha(3));
    write_ref(&relu, "newline", &format!("{}\n", sha(1))); // refs are not
    write_ref(&relu, "pr/1", &sha(1));
    write_ref(&relu, "v8", "branch"); // a version naming a branch

    let plain = root.join("kernels--acme--plain");
    snapshot(&plain, &sha(4), &["torch-universal"]);
    write_ref(&plain, "main", &sha(4));

    // The legacy models-- folder's versions win over the kernels-- folder's.
    let both = root.join("kernels--acme--both");
    snapshot(&both, &sha(5), &["torch-universal"]);
    snapshot(&both, &sha(6), &["torch-universal"]);
    write_ref(&both, "v1", &sha(5));
    write_ref(&root.join("models--acme--both"), "v1", &sha(6));
    write_ref(&root.join("models--acme--both"), "v3", &sha(5));
    root
}

fn cases() -> Vec<(&'static str, RevisionSpec)> {
    use RevisionSpec::{Revision, Version};
    let r = |s: &str| Revision(s.to_string());
    vec![
        ("acme/relu", Version(1)),
        ("acme/relu", Version(2)),
        ("acme/relu", Version(10)),
        ("acme/relu", Version(7)),
        ("acme/relu", Version(3)),
        ("acme/relu", Version(5)),
        ("acme/relu", Version(8)),
        ("acme/relu", r("main")),
        ("acme/relu", r("v1")),
        ("acme/relu", r("branch")),
        ("acme/relu", r(&sha(3))),
        ("acme/relu", r(&sha(7))),
        ("acme/relu", r("nosuch")),
        ("acme/relu", r("newline")),
        ("acme/relu", r("pr/1")),
        ("acme/plain", Version(1)),
        ("acme/plain", r("main")),
        ("acme/both", Version(1)),
        ("acme/both", Version(3)),
        ("acme/both", Version(2)),
    ]
}

fn oracle(root: &Path, cases: &[(&str, RevisionSpec)]) -> Vec<Value> {
    let input: Vec<Value> = cases
        .iter()
        .map(|(repo, spec)| match spec {
            RevisionSpec::Version(v) => json!({"repo": repo, "revision": null, "version": v}),
            RevisionSpec::Revision(r) => json!({"repo": repo, "revision": r, "version": null}),
            RevisionSpec::Main => unreachable!("get_kernel 0.17 needs a pin"),
        })
        .collect();
    let mut child = std::process::Command::new(common::venv_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/hub_snapshot.py"
        ))
        .env("KERNELS_CACHE", root)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HOME", root.join("hf-home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::from(input).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    serde_json::from_slice(&out.stdout).expect("oracle JSON")
}

fn ours(root: &Path, repo: &str, spec: &RevisionSpec) -> Value {
    let folder = hub_cache::repo_folder(root, repo).unwrap();
    match hub_cache::snapshot_for(&folder, spec) {
        Ok(path) => json!({"snapshot": path.display().to_string()}),
        Err(e) => {
            let kind = match e {
                RevisionError::NoVersions { .. } | RevisionError::VersionNotFound { .. } => {
                    "ValueError"
                }
                RevisionError::NoSnapshot { .. } => "FileNotFoundError",
                _ => "other",
            };
            json!({"error": kind, "message": e.to_string()})
        }
    }
}

#[test]
fn pinned_revisions_and_versions_choose_the_hub_loaders_snapshot() {
    let root = layouts();
    let cases = cases();
    let expected = oracle(&root, &cases);
    assert_eq!(expected.len(), cases.len());
    let mut found = 0;
    for ((repo, spec), want) in cases.iter().zip(&expected) {
        assert_eq!(&ours(&root, repo, spec), want, "{repo} {spec:?}");
        found += usize::from(want.get("snapshot").is_some());
    }
    // The layouts exercise both answers.
    assert!(
        found >= 8 && found < cases.len(),
        "{found} of {}",
        cases.len()
    );
}

#[test]
fn unpinned_is_refs_main_else_the_newest() {
    let root = layouts();
    let folder = root.join("kernels--acme--relu");
    assert_eq!(
        hub_cache::snapshot_for(&folder, &RevisionSpec::Main).unwrap(),
        folder.join("snapshots").join(sha(2))
    );
}

#[test]
fn every_ref_names_its_snapshot_once() {
    let root = layouts();
    let folder = root.join("kernels--acme--relu");
    let found = hub_cache::ref_snapshots(&folder).unwrap();
    let by_snapshot: Vec<(String, Vec<String>)> = found
        .into_iter()
        .map(|(path, refs)| (path.file_name().unwrap().to_string_lossy().into(), refs))
        .collect();
    let refs = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        by_snapshot,
        vec![
            (sha(3), refs(&["branch", "v1_0", "vx"])),
            (sha(2), refs(&["main", "v2"])),
            (sha(1), refs(&["pr/1", "v1"])),
        ]
    );
}

/// `preflight ARGS` with the hub cache at `root`.
fn preflight_in(root: &Path, args: &[&str]) -> std::process::Output {
    common::preflight_cmd()
        .env("KERNELS_CACHE", root)
        .args(args)
        .arg("--python")
        .arg(common::venv_python())
        .output()
        .unwrap()
}

/// A cache whose versions differ in their variants: v1 has torch-cpu and
/// torch-universal, v2 (= main) only torch-universal.
fn versioned() -> PathBuf {
    let root = common::fresh_dir("versioned");
    let folder = root.join("kernels--acme--relu");
    snapshot(&folder, &sha(1), &["torch-cpu", "torch-universal"]);
    snapshot(&folder, &sha(2), &["torch-universal"]);
    write_ref(&folder, "v1", &sha(1));
    write_ref(&folder, "v2", &sha(2));
    write_ref(&folder, "main", &sha(2));
    root
}

fn resolved(out: &std::process::Output) -> Vec<String> {
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["variant"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn resolve_reads_the_pinned_snapshot() {
    let root = versioned();
    let args = |extra: &[&str]| {
        let mut a = vec!["resolve", "--repo", "acme/relu", "--json"];
        a.extend_from_slice(extra);
        resolved(&preflight_in(&root, &a))
    };
    assert_eq!(args(&["--version", "1"]), ["torch-cpu", "torch-universal"]);
    assert_eq!(args(&["--version", "2"]), ["torch-universal"]);
    assert_eq!(
        args(&["--revision", "v1"]),
        ["torch-cpu", "torch-universal"]
    );
    assert_eq!(
        args(&["--revision", &sha(1)]),
        ["torch-cpu", "torch-universal"]
    );
    assert_eq!(args(&[]), ["torch-universal"]);
}

#[test]
fn a_missing_version_is_bad_input_in_the_hub_loaders_words() {
    let root = versioned();
    let out = preflight_in(&root, &["select", "--repo", "acme/relu", "--version", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        common::stderr(&out).trim(),
        "preflight: error: Version 3 not found, available versions: 1, 2"
    );
    let out = preflight_in(
        &root,
        &["check", "--repo", "acme/relu", "--revision", "gone"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out)
            .contains("Cannot find a local snapshot for acme/relu (revision: gone)"),
        "{}",
        common::stderr(&out)
    );
    let out = preflight_in(&root, &["select", "--version", "1"]);
    assert_eq!(out.status.code(), Some(2), "--version needs --repo");
}

#[test]
fn select_and_check_probe_the_pinned_snapshot() {
    let root = versioned();
    let out = preflight_in(&root, &["select", "--repo", "acme/relu", "--version", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let chosen = common::stdout(&out);
    assert!(
        chosen
            .trim()
            .ends_with(&format!("snapshots/{}/build/torch-cpu", sha(1))),
        "{chosen}"
    );
    let out = preflight_in(
        &root,
        &["check", "--repo", "acme/relu", "--version", "2", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<&str> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].contains(&sha(2)), "{paths:?}");
}

#[test]
fn warmup_without_targets_warms_the_snapshot_of_every_ref() {
    let root = versioned();
    let out = preflight_in(&root, &["warmup", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kernels: Vec<(&str, u64)> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kernel"].as_str().unwrap(),
                k["variants"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kernels,
        [("acme/relu (main, v2)", 1), ("acme/relu (v1)", 2)]
    );
}

/// `warmup --json`'s kernels and variant counts.
fn warmed(out: &std::process::Output) -> Vec<(String, u64)> {
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc.as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kernel"].as_str().unwrap().to_owned(),
                k["variants"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn warmup_of_a_lock_probes_each_locked_commit() {
    let root = versioned();
    let lock = root.join("kernels.lock");
    std::fs::write(
        &lock,
        json!([
            {"dependency": {"repo-id": "acme/relu", "version": 1}, "lock": {"commit": sha(1)}},
        ])
        .to_string(),
    )
    .unwrap();
    let out = preflight_in(
        &root,
        &["warmup", "--json", "--lock", lock.to_str().unwrap()],
    );
    assert_eq!(warmed(&out), [(format!("acme/relu ({})", sha(1)), 2)]);
}

#[test]
fn warmup_of_a_project_probes_each_dependency_at_its_version() {
    let root = versioned();
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"app\"\n\n[tool.kernels.dependencies]\n\"acme/relu\" = 2\n",
    )
    .unwrap();
    let out = preflight_in(
        &root,
        &["warmup", "--json", "--project", project.to_str().unwrap()],
    );
    assert_eq!(warmed(&out), [("acme/relu (v2)".to_owned(), 1)]);
}

#[test]
fn warmup_of_a_bad_lock_or_project_is_one_message_naming_the_file() {
    let root = versioned();
    let write = |name: &str, text: &str| {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };
    let bad_json = write("bad/kernels.lock", "{not json");
    let absent = write(
        "absent/kernels.lock",
        &json!([{"dependency": {"repo-id": "acme/absent", "version": 1}, "lock": {"commit": sha(7)}}]).to_string(),
    );
    let gone = write(
        "gone/kernels.lock",
        &json!([{"dependency": {"repo-id": "acme/relu", "version": 1}, "lock": {"commit": sha(7)}}]).to_string(),
    );
    let no_kernels = write("plain/pyproject.toml", "[project]\nname = \"app\"\n");
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--lock".into(), bad_json.display().to_string()],
            format!("{}: not a kernels.lock: ", bad_json.display()),
        ),
        (
            vec!["--lock".into(), absent.display().to_string()],
            "kernel acme/absent is not in the hub cache".into(),
        ),
        (
            vec!["--lock".into(), gone.display().to_string()],
            format!(
                "Cannot find a local snapshot for acme/relu (revision: {})",
                sha(7)
            ),
        ),
        (
            vec![
                "--lock".into(),
                root.join("nothing.lock").display().to_string(),
            ],
            "nothing.lock: cannot read: No such file or directory".into(),
        ),
        (
            vec![
                "--project".into(),
                no_kernels.parent().unwrap().display().to_string(),
            ],
            format!(
                "{}: no [tool.kernels.dependencies] table",
                no_kernels.display()
            ),
        ),
        (
            vec![
                "--project".into(),
                root.join("absent").display().to_string(),
            ],
            "absent: no pyproject.toml in this directory".into(),
        ),
        (
            vec!["--download".into()],
            "--download fetches the kernels of --repo, --lock or --project".into(),
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["warmup"];
        all.extend(args.iter().map(String::as_str));
        let out = preflight_in(&root, &all);
        let stderr = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one message: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
    }
}

#[test]
fn warmup_download_without_the_python_package_says_how_to_get_it() {
    let root = versioned();
    // The test venv has `kernels` but not kernel_preflight (the wheel's
    // own tests install that one).
    let out = preflight_in(
        &root,
        &[
            "warmup",
            "--download",
            "--repo",
            "acme/relu",
            "--version",
            "1",
        ],
    );
    let stderr = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--download needs the Python package kernel_preflight"),
        "{stderr}"
    );
}
