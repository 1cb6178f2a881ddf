//! `check --verdicts FILE`: the hub's acceptance as the caller's loader
//! judged it. A probe replays the verdict of its variant (here a refusal,
//! so that the replay shows in the outcome) only when the verdict's judge
//! is the `kernels` of the probed interpreter and its `metadata.json`
//! bytes are the variant's; otherwise the probe judges as always.

mod common;

use common::{fresh_dir, kernel_repo, preflight_cmd, stderr, variant_names};
use serde_json::Value;
use std::path::Path;

/// The installed `kernels` of the test environment, as its dist-info
/// folder names it.
fn kernels_version() -> String {
    let site = common::venv().join("lib");
    let lib = std::fs::read_dir(&site)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .unwrap()
        .path()
        .join("site-packages");
    std::fs::read_dir(lib)
        .unwrap()
        .flatten()
        .find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix("kernels-")?.strip_suffix(".dist-info")?;
            Some(rest.to_string())
        })
        .expect("kernels in the test environment")
}

fn verdict(variant: &Path, who: &str, metadata: &[u8]) -> String {
    let line = serde_json::json!({
        "variant": variant.to_str().unwrap(),
        "metadata": String::from_utf8_lossy(metadata),
        "who": who,
        "refused": {"validator": "minver", "message": "refused by the caller's loader", "package": null},
    });
    format!("{line}\n")
}

fn check(variant: &Path, verdicts: &Path) -> Value {
    let out = preflight_cmd()
        .arg("check")
        .arg(variant)
        .arg("--python")
        .arg(common::venv_python())
        .arg("--verdicts")
        .arg(verdicts)
        .arg("--json")
        .env("PREFLIGHT_CACHE", fresh_dir("cache"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
}

#[test]
fn a_verdict_is_replayed_only_from_the_probed_kernels_on_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = kernel_repo(
        tmp.path(),
        "tiny",
        &variant_names(1),
        "def relu(x):\n    return max(x, 0)\n",
    );
    let variant = repo.join("build").join(&variant_names(1)[0]);
    let metadata = std::fs::read(variant.join("metadata.json")).unwrap();
    let file = tmp.path().join("verdicts.jsonl");
    let message = |doc: &Value| {
        doc["results"][0]["outcome"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let own = format!("kernels {}", kernels_version());

    std::fs::write(&file, verdict(&variant, &own, &metadata)).unwrap();
    let doc = check(&variant, &file);
    assert!(
        message(&doc).contains("refused by the caller's loader"),
        "{doc:#}"
    );

    // Another judge, or other bytes: judged in the probe, which accepts.
    for (who, bytes) in [
        ("kernels 0.0.1", metadata.clone()),
        (own.as_str(), b"{}".to_vec()),
    ] {
        std::fs::write(&file, verdict(&variant, who, &bytes)).unwrap();
        let doc = check(&variant, &file);
        assert_eq!(
            doc["results"][0]["outcome"]["kind"], "pass",
            "{who}: {doc:#}"
        );
    }

    // A file that cannot be read: one message, exit 2.
    let out = preflight_cmd()
        .arg("check")
        .arg(&variant)
        .args(["--verdicts", "/nonexistent/verdicts.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--verdicts /nonexistent/verdicts.jsonl"),
        "{}",
        stderr(&out)
    );
}
