//! `discover` reads `metadata.json` with the strictness of the loader's own
//! parser (kernels 0.19.1's `Metadata.from_bytes`): what it refuses is a
//! finding, what it accepts parses. kernels 0.17.2 and 0.18.3 differ on two
//! keys only, and the test says where.

mod common;

use kernel_preflight::discover::MetadataStatus;
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

fn base() -> Value {
    json!({"name": "relu-kernel", "id": "_relu_abc", "version": 1, "license": "Apache-2.0",
           "python-depends": ["einops"], "backend": {"type": "cuda", "archs": ["8.0"]}})
}

/// (what, the document, where 0.17/0.18 decide otherwise than 0.19).
fn documents() -> Vec<(&'static str, Value, bool)> {
    let with = |key: &str, value: Value| {
        let mut d = base();
        d[key] = value;
        d
    };
    let without = |key: &str| {
        let mut d = base();
        d.as_object_mut().unwrap().remove(key);
        d
    };
    let mut out = vec![
        ("base", base(), false),
        ("unknown key", with("zzz", json!(1)), false),
    ];
    for key in [
        "name",
        "id",
        "version",
        "license",
        "python-depends",
        "backend",
    ] {
        out.push(("required key missing", without(key), false));
    }
    out.extend([
        ("version null", with("version", Value::Null), false),
        ("version negative", with("version", json!(-1)), false),
        ("version as text", with("version", json!("1")), false),
        ("license null", with("license", Value::Null), false),
        ("upstream null", with("upstream", Value::Null), false),
        (
            "source",
            with("source", json!("https://example.com/k")),
            false,
        ),
        (
            "digest",
            with(
                "digest",
                json!({"algorithm": "sha256", "files": {"__init__.py": "AAAA"}}),
            ),
            false,
        ),
        (
            "digest sha512",
            with("digest", json!({"algorithm": "sha512", "files": {}})),
            false,
        ),
        (
            "digest upper case",
            with("digest", json!({"algorithm": "SHA256", "files": {}})),
            false,
        ),
        (
            "digest without files",
            with("digest", json!({"algorithm": "sha256"})),
            false,
        ),
        (
            "digest files as a list",
            with("digest", json!({"algorithm": "sha256", "files": ["a"]})),
            false,
        ),
        (
            "digest as text",
            with("digest", json!("sha256:abcd")),
            false,
        ),
        (
            "build-layout zip",
            with("build-layout", json!("zip")),
            false,
        ),
        (
            "build-layout files",
            with("build-layout", json!("files")),
            false,
        ),
        // 0.17 and 0.18 do not know the key, so ignore any value.
        (
            "build-layout upper case",
            with("build-layout", json!("ZIP")),
            true,
        ),
        (
            "kernels-minver",
            with("kernels-minver", json!("0.19.0")),
            false,
        ),
        (
            "kernels-minver spaced",
            with("kernels-minver", json!(" 0.19.0 ")),
            false,
        ),
        (
            "kernels-minver two parts",
            with("kernels-minver", json!("0.19")),
            false,
        ),
        (
            "kernels-minver pre-release",
            with("kernels-minver", json!("0.19.0rc1")),
            false,
        ),
        (
            "kernels-minver a number",
            with("kernels-minver", json!(1)),
            false,
        ),
        (
            "kernel-depends by version",
            with("kernel-depends", json!([{"repo-id": "a/b", "version": 1}])),
            false,
        ),
        (
            "kernel-depends by revision",
            with(
                "kernel-depends",
                json!([{"repo-id": "a/b", "revision": "main"}]),
            ),
            false,
        ),
        (
            "kernel-depends both",
            with(
                "kernel-depends",
                json!([{"repo-id": "a/b", "version": 1, "revision": "x"}]),
            ),
            false,
        ),
        (
            "kernel-depends neither",
            with("kernel-depends", json!([{"repo-id": "a/b"}])),
            false,
        ),
        (
            "kernel-depends unknown key",
            with("kernel-depends", json!([{"repo": "a/b", "version": 1}])),
            false,
        ),
        (
            "kernel-depends as text",
            with("kernel-depends", json!(["a/b"])),
            false,
        ),
        ("backend without type", with("backend", json!({})), false),
        (
            "backend archs as text",
            with("backend", json!({"type": "cuda", "archs": "8.0"})),
            false,
        ),
        (
            "backend extra key",
            with("backend", json!({"type": "cuda", "zz": 1})),
            false,
        ),
        // 0.17 and 0.18 know eight backends; 0.19 takes any word.
        (
            "backend unknown",
            with("backend", json!({"type": "quantum"})),
            true,
        ),
        (
            "provenance",
            with(
                "provenance",
                json!({"kernel-builder": {"version": "0.17.0"}, "dirty": true}),
            ),
            false,
        ),
        ("provenance empty", with("provenance", json!({})), false),
        (
            "provenance builder version a number",
            with("provenance", json!({"kernel-builder": {"version": 1}})),
            false,
        ),
        ("provenance as text", with("provenance", json!("x")), false),
        (
            "python-depends unknown name",
            with("python-depends", json!(["not-curated"])),
            false,
        ),
    ]);
    for name in [
        "ab",
        "relu2d",
        "relu--k",
        "r",
        "relu-",
        "1relu",
        "Relu",
        "relu_kernel",
        "",
    ] {
        out.push(("kernel name", with("name", json!(name)), false));
    }
    out
}

fn hub_errors(release: &str, texts: &[String]) -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".kernels-releases")
        .join(release);
    assert!(
        dir.join("kernels").is_dir(),
        "kernels {release} is not installed: run scripts/setup-env.sh"
    );
    let mut child = Command::new(common::venv_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/hub_metadata_accepts.py"
        ))
        .env("PYTHONPATH", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(texts).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["release"], release);
    doc["errors"].as_array().unwrap().clone()
}

#[test]
fn metadata_is_refused_exactly_where_the_loader_refuses_it() {
    let docs = documents();
    let texts: Vec<String> = docs.iter().map(|(_, d, _)| d.to_string()).collect();
    for release in ["0.17.2", "0.18.3", "0.19.1"] {
        let hub = hub_errors(release, &texts);
        for ((what, doc, differs), hub) in docs.iter().zip(&hub) {
            let ours = MetadataStatus::parse(doc.to_string().as_bytes());
            let ours_ok = ours.metadata().is_some();
            let expected = hub.is_null() != (*differs && release != "0.19.1");
            assert_eq!(
                ours_ok, expected,
                "kernels {release}, {what}: {doc}\n hub: {hub}\n ours: {ours:?}"
            );
        }
    }
}
