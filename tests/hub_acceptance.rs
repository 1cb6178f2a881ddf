//! `pass` needs the hub loader's consent: with the real `kernels` package as
//! the judge. Every variant here is loaded by `kernels.get_local_kernel` in
//! a subprocess (the oracle) and probed by preflight, once with the test
//! interpreter (which has `kernels`: its own code decides) and once with a
//! bare venv (preflight's copy of the hub's rules decides). A variant passes
//! iff the hub loads it, and every refusal names the hub's reason.

mod hub_build;
mod probe_fixtures;

use kernel_preflight::classify::{Outcome, OutcomeKind};
use kernel_preflight::probe::SmokeSource;
use probe_fixtures::{Repo, bare_python, metadata, probe_with, python, quick_limits};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One variant of the table: how its metadata differs from a good one.
struct Case {
    name: &'static str,
    edit: fn(&mut Value),
}

const CASES: &[Case] = &[
    Case {
        name: "good",
        edit: |_| {},
    },
    Case {
        name: "minver-newer-than-installed",
        edit: |m| m["kernels-minver"] = json!("99.0.0"),
    },
    Case {
        name: "no-license",
        edit: |m| {
            m.as_object_mut().unwrap().remove("license");
        },
    },
    Case {
        name: "allowed-dependency-not-installed",
        edit: |m| m["python-depends"] = json!(["einops"]),
    },
    Case {
        name: "dependency-not-allowed",
        edit: |m| m["python-depends"] = json!(["numpy"]),
    },
    Case {
        // Allowed on cuda only: this machine's backend (no torch, no CUDA
        // runtime) is cpu, so the hub refuses it as unsupported here.
        name: "dependency-of-another-backend",
        edit: |m| m["python-depends"] = json!(["nvidia-cutlass-dsl"]),
    },
    Case {
        name: "dirty-provenance",
        edit: |m| {
            m["provenance"] = json!({
                "kernel-builder": {"version": "0.17.0", "sha": "d0610aa58db33b142c86b59598a2a1c730f52996", "dirty": true},
                "kernel": {"sha": "d45addadb0c380f3d7cc2813310b3bcd75f8aa9a", "dirty": true},
            })
        },
    },
    Case {
        name: "name-not-a-kernel-name",
        edit: |m| m["name"] = json!("Fixture_Kernel"),
    },
    Case {
        name: "version-as-a-string",
        edit: |m| m["version"] = json!("1"),
    },
];

/// The variants, and what the hub loader did with each.
struct Table {
    _repos: Vec<Repo>,
    variants: Vec<PathBuf>,
    /// Per variant: `None` when `get_local_kernel` loaded it, else its error.
    hub: Vec<Option<String>>,
    /// `kernels.__version__`.
    kernels: String,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut repos = Vec::new();
        let mut variants = Vec::new();
        for case in CASES {
            let repo = Repo::new();
            let mut m = metadata("torch-universal");
            (case.edit)(&mut m);
            variants.push(repo.variant_with(
                "torch-universal",
                "def add(a, b):\n    return a + b\n",
                m,
            ));
            repos.push(repo);
        }
        // Finished as the hub's build finishes a variant: the digest of its
        // files, computed by the installed `kernels`.
        hub_build::hub_hash(&python(), &variants);
        let (hub, kernels) = get_local_kernel(&variants);
        Table {
            _repos: repos,
            variants,
            hub,
            kernels,
        }
    })
}

/// The oracle: `kernels.get_local_kernel` on each variant, offline, in one
/// subprocess of the test interpreter, run from an empty folder (so that no
/// folder of the working directory can stand in for a package).
fn get_local_kernel(variants: &[PathBuf]) -> (Vec<Option<String>>, String) {
    const ORACLE: &str = r#"
import json, sys
from pathlib import Path
import kernels
out = []
for path in json.loads(sys.argv[1]):
    try:
        kernels.get_local_kernel(Path(path))
        out.append(None)
    except Exception as e:
        out.append(str(e))
print(json.dumps({"kernels": kernels.__version__, "results": out}))
"#;
    let cwd = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = variants.iter().map(PathBuf::as_path).collect();
    let out = Command::new(python())
        .args(["-c", ORACLE])
        .arg(serde_json::to_string(&paths).unwrap())
        .current_dir(cwd.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HUB_CACHE", cwd.path())
        .output()
        .expect("the oracle runs");
    assert!(
        out.status.success(),
        "oracle: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("oracle JSON");
    let results = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().map(str::to_owned))
        .collect();
    (results, v["kernels"].as_str().unwrap().to_owned())
}

/// What of the hub's message an outcome must quote: all of it, except the
/// variant's path in a parser error (outcomes keep only its file name) and
/// serde's position, which preflight's own parser does not give.
fn reason(hub: &str, with_position: bool) -> String {
    let reason = match hub.split_once("`: ") {
        Some((head, rest)) if head.starts_with("Cannot parse metadata from") => rest,
        _ => hub,
    };
    match reason.rfind(" at line ") {
        Some(at) if !with_position => reason[..at].to_owned(),
        _ => reason.to_owned(),
    }
}

fn check(python: &Path, judge: &str, minver_refuses: bool) -> Vec<(&'static str, Outcome)> {
    let t = table();
    let mut seen = Vec::new();
    for ((case, variant), hub) in CASES.iter().zip(&t.variants).zip(&t.hub) {
        let (run, outcome) = probe_with(python, variant, SmokeSource::LoadOnly, quick_limits());
        assert_eq!(
            run.report.runtime.acceptance.as_deref(),
            Some(judge),
            "{}",
            case.name
        );
        let refused = match hub {
            Some(_) if case.name.starts_with("minver") && !minver_refuses => None,
            other => other.as_deref(),
        };
        match refused {
            None => assert_eq!(
                outcome.kind,
                OutcomeKind::Pass,
                "{}: the hub loads it: {outcome:?}",
                case.name
            ),
            Some(hub) => {
                assert_ne!(outcome.kind, OutcomeKind::Pass, "{}", case.name);
                // Its first line: outcome messages are one line.
                let quoted = reason(hub, minver_refuses);
                let quoted = quoted.lines().next().unwrap_or_default();
                assert!(
                    outcome.message.contains(quoted),
                    "{}: {:?} does not quote the hub's {quoted:?}",
                    case.name,
                    outcome.message
                );
            }
        }
        seen.push((case.name, outcome));
    }
    seen
}

fn kind_of<'a>(seen: &'a [(&str, Outcome)], name: &str) -> &'a Outcome {
    &seen.iter().find(|(n, _)| *n == name).unwrap().1
}

#[test]
fn the_oracle_loads_the_good_and_refuses_the_rest() {
    let t = table();
    let loaded: Vec<&str> = CASES
        .iter()
        .zip(&t.hub)
        .filter(|(_, hub)| hub.is_none())
        .map(|(c, _)| c.name)
        .collect();
    assert_eq!(
        loaded,
        ["good", "dirty-provenance"],
        "the test environment changed? {:?}",
        t.hub
    );
}

#[test]
fn with_kernels_installed_its_own_code_decides() {
    let t = table();
    let seen = check(&python(), &format!("kernels {}", t.kernels), true);
    let expect = [
        (
            "minver-newer-than-installed",
            OutcomeKind::DependencyVersion,
        ),
        ("no-license", OutcomeKind::ImportError),
        (
            "allowed-dependency-not-installed",
            OutcomeKind::MissingDependency,
        ),
        ("dependency-not-allowed", OutcomeKind::ImportError),
        ("dependency-of-another-backend", OutcomeKind::ImportError),
        ("name-not-a-kernel-name", OutcomeKind::ImportError),
    ];
    for (name, kind) in expect {
        assert_eq!(kind_of(&seen, name).kind, kind, "{name}");
    }
    let einops = kind_of(&seen, "allowed-dependency-not-installed");
    assert_eq!(
        einops.hint,
        "pip install einops into the probed Python environment"
    );
    assert!(
        kind_of(&seen, "minver-newer-than-installed")
            .hint
            .contains("pip install --upgrade kernels")
    );
    let good = kind_of(&seen, "good");
    assert!(
        good.message
            .ends_with(&format!("accepted by kernels {}", t.kernels)),
        "{}",
        good.message
    );
}

#[test]
fn without_kernels_preflight_applies_the_same_rules_and_says_so() {
    let seen = check(&bare_python(), "preflight", false);
    let minver = kind_of(&seen, "minver-newer-than-installed");
    assert_eq!(
        minver.kind,
        OutcomeKind::Pass,
        "no installed kernels: kernels-minver cannot refuse"
    );
    assert!(
        minver.message.contains("hub rules applied by preflight"),
        "{}",
        minver.message
    );
    let refused = kind_of(&seen, "dependency-not-allowed");
    assert!(
        refused
            .message
            .starts_with("hub rules (applied by preflight"),
        "{}",
        refused.message
    );
    assert_eq!(
        kind_of(&seen, "allowed-dependency-not-installed").kind,
        OutcomeKind::MissingDependency
    );
}

/// Metadata texts on which preflight's parser and the hub's must agree.
fn metadata_texts() -> Vec<String> {
    let good = metadata("torch-cuda");
    let mut texts = vec![good.to_string()];
    let edits: &[(&str, Value)] = &[
        ("version", json!(-1)),
        ("version", json!(1.0)),
        ("version", json!(true)),
        ("version", Value::Null),
        ("id", json!(1)),
        ("name", json!("a")),
        ("name", json!("ab-")),
        ("name", json!("a--b")),
        ("license", Value::Null),
        ("kernels-minver", json!("0.18")),
        ("kernels-minver", json!("0.18.0.dev0")),
        ("kernels-minver", json!("1.2.x")),
        ("kernels-minver", Value::Null),
        ("python-depends", json!("einops")),
        ("python-depends", json!([1])),
        ("python-depends", Value::Null),
        ("kernel-depends", json!([{"repo-id": "a/b"}])),
        ("kernel-depends", json!([{"repo_id": "a/b", "version": 1}])),
        (
            "kernel-depends",
            json!([{"repo-id": "a/b", "revision": "main"}]),
        ),
        ("backend", json!({"type": "CUDA"})),
        ("backend", json!({"type": "universal"})),
        ("backend", json!({"type": "cuda", "archs": ["9.0a", 10]})),
        (
            "backend",
            json!({"type": "cuda", "archs": null, "extra": 1}),
        ),
        ("backend", json!("cuda")),
        ("upstream", json!(3)),
        ("digest", json!({"algorithm": "md5", "files": {}})),
        ("digest", json!({"algorithm": "sha256", "files": {"a": 1}})),
        ("provenance", json!({"kernel-builder": {}})),
        (
            "provenance",
            json!({"kernel-builder": {"version": "0.17.0", "sha": "abc", "dirty": false}}),
        ),
        (
            "provenance",
            json!({"kernel-builder": {"version": "x", "sha": "d0610aa58db33b142c86b59598a2a1c730f52996"}}),
        ),
        (
            "provenance",
            json!({"kernel-builder": {"version": "x"}, "kernel": {"sha": "d45addadb0c380f3d7cc2813310b3bcd75f8aa9a"}}),
        ),
        ("unknown-key", json!({"ignored": true})),
    ];
    for (key, value) in edits {
        let mut m = good.clone();
        m[*key] = value.clone();
        texts.push(m.to_string());
    }
    for key in [
        "name",
        "id",
        "version",
        "license",
        "python-depends",
        "backend",
    ] {
        let mut m = good.clone();
        m.as_object_mut().unwrap().remove(key);
        texts.push(m.to_string());
    }
    texts.push(r#"{"name":"ab","name":"cd","id":"x","version":1,"license":"M","python-depends":[],"backend":{"type":"cpu"}}"#.into());
    // A real one: the hub's einops kernel.
    texts.push(include_str!("fixtures/hub/metadata-example.json").into());
    texts
}

#[test]
fn preflights_parser_says_what_the_hubs_says() {
    let texts = metadata_texts();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(python())
        .arg(root.join("tests/oracle/hub_metadata.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the oracle runs");
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        serde_json::to_string(&texts).unwrap().as_bytes(),
    )
    .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let verdicts: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut refused = 0;
    for (text, v) in texts.iter().zip(&verdicts) {
        let hub = v["hub"]
            .as_str()
            .map(|m| reason(m.trim_start_matches("Cannot parse metadata: "), false));
        assert_eq!(
            hub.as_deref(),
            v["preflight"].as_str(),
            "on {text}: the hub and preflight disagree"
        );
        refused += usize::from(hub.is_some());
    }
    assert!(
        refused > 30,
        "most texts are refused ({refused} of {})",
        texts.len()
    );
}

#[test]
fn the_embedded_allowlist_is_the_installed_hubs() {
    let out = Command::new(python())
        .args([
            "-c",
            "import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec('kernels').origin), 'python_depends.json'))",
        ])
        .output()
        .expect("python runs");
    let path = String::from_utf8(out.stdout).unwrap();
    let hub: Value = serde_json::from_str(&std::fs::read_to_string(path.trim()).unwrap()).unwrap();
    let ours: Value = serde_json::from_str(kernel_preflight::probe::PYTHON_DEPENDS).unwrap();
    assert_eq!(
        ours, hub,
        "probes/python/python_depends.json is not the installed kernels' copy"
    );
}
