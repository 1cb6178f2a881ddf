//! `preflight labels`: the node's verdicts as scheduler labels, from the
//! outcome cache alone, checked against the rules the schedulers apply —
//! Kubernetes label names and values, NFD's prefix rules, its feature-file
//! syntax (`key=value`, directives) and 64 KiB bound, Slurm feature names,
//! Ray's labels file — by checks written here from those rules, not by
//! preflight's own.

mod common;

use kernel_preflight::labels::name::{KEY_MAX, kernel_key, label_value};
use kernel_preflight::labels::{KernelLabel, NodeLabels};
use kernel_preflight::report::labels as render;
use kernel_preflight::run::Recalled;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant, SystemTime};

fn sha(n: u8) -> String {
    format!("{n:x}").repeat(40)
}

/// A hub-cache kernel `acme/NAME` at `v1` (and main) whose one variant's
/// import runs `body`.
fn kernel(root: &Path, name: &str, commit: &str, body: &str) {
    let folder = root.join(format!("kernels--acme--{name}"));
    let dir = folder
        .join("snapshots")
        .join(commit)
        .join("build/torch-universal");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("__init__.py"), body).unwrap();
    let metadata = json!({"name": name, "id": format!("_{name}"), "version": 1,
        "license": "MIT", "python-depends": [], "backend": {"type": "cpu"}});
    std::fs::write(dir.join("metadata.json"), metadata.to_string()).unwrap();
    for r in ["v1", "main"] {
        std::fs::create_dir_all(folder.join("refs")).unwrap();
        std::fs::write(folder.join("refs").join(r), commit).unwrap();
    }
}

/// A node: a hub cache with a kernel that works (`relu`), one whose import
/// fails (`broken`) and one never probed (`later`), an outcome cache, and a
/// lock that pins all three and one not in the hub cache (`absent`).
struct Node {
    root: PathBuf,
    cache: PathBuf,
    lock: PathBuf,
}

impl Node {
    fn new() -> Node {
        let root = common::fresh_dir("labels");
        kernel(&root, "relu", &sha(1), "X = 1\n");
        kernel(
            &root,
            "broken",
            &sha(2),
            "raise ImportError('no kernel here')\n",
        );
        kernel(&root, "later", &sha(3), "X = 1\n");
        let pin = |name: &str, n: u8| {
            json!({"dependency": {"repo-id": format!("acme/{name}"), "version": 1},
                   "lock": {"commit": sha(n)}})
        };
        let lock = root.join("kernels.lock");
        std::fs::write(
            &lock,
            json!([
                pin("relu", 1),
                pin("broken", 2),
                pin("later", 3),
                pin("absent", 4)
            ])
            .to_string(),
        )
        .unwrap();
        let warm = root.join("warm.lock");
        std::fs::write(&warm, json!([pin("relu", 1), pin("broken", 2)]).to_string()).unwrap();
        let node = Node {
            cache: root.join("outcomes"),
            root,
            lock,
        };
        let out = node.run(&["warmup", "--json", "--lock", warm.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        node
    }

    fn run(&self, args: &[&str]) -> Output {
        common::preflight_cmd()
            .env("KERNELS_CACHE", &self.root)
            .env("PREFLIGHT_CACHE", &self.cache)
            .args(args)
            .arg("--python")
            .arg(common::venv_python())
            .output()
            .unwrap()
    }

    fn labels(&self, format: &str, extra: &[&str]) -> Output {
        let mut args = vec![
            "labels",
            "--format",
            format,
            "--lock",
            self.lock.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}

fn shared() -> &'static Node {
    static NODE: std::sync::OnceLock<Node> = std::sync::OnceLock::new();
    NODE.get_or_init(Node::new)
}

// Kubernetes' rules (apimachinery validation), written out here.

fn k8s_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

fn k8s_value(s: &str) -> bool {
    s.is_empty() || k8s_name(s)
}

fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// A qualified label key as Kubernetes and NFD accept it: `prefix/name`
/// with a DNS-subdomain prefix outside the kubernetes.io and k8s.io
/// namespaces (NFD's own feature namespaces aside).
fn nfd_key(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return false;
    };
    let denied = ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")));
    let allowed = ["feature.node.kubernetes.io", "profile.node.kubernetes.io"]
        .iter()
        .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")));
    dns_subdomain(prefix) && k8s_name(name) && (!denied || allowed)
}

/// Every line of an NFD feature file as nfd-worker's local source reads
/// it: a `# +directive=…` (expiry-time in RFC 3339), another comment, or
/// `key[=value]`; returns the labels.
fn nfd_file(text: &str) -> Vec<(String, String)> {
    assert!(text.len() <= 64 * 1024, "{} bytes", text.len());
    let mut labels = Vec::new();
    let mut expiry = None;
    for line in text.lines() {
        if let Some(directive) = line.strip_prefix("# +") {
            let (name, value) = directive.split_once('=').expect("directive=value");
            assert_eq!(name, "expiry-time", "{line}");
            let t =
                time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
                    .unwrap_or_else(|e| panic!("{value}: not RFC 3339: {e}"));
            expiry = Some(t);
        } else if line.starts_with('#') || line.trim().is_empty() {
        } else {
            let (key, value) = line.split_once('=').unwrap_or((line, "true"));
            assert!(nfd_key(key), "label name {key:?}");
            assert!(k8s_value(value), "label value {value:?}");
            assert!(expiry.is_some(), "{line}: before its expiry-time directive");
            labels.push((key.to_owned(), value.to_owned()));
        }
    }
    let keys: std::collections::HashSet<_> = labels.iter().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), labels.len(), "a label twice: {labels:?}");
    labels
}

fn slurm_feature(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

#[test]
fn the_feature_file_is_valid_nfd_and_says_what_passes() {
    let node = shared();
    let start = Instant::now();
    let out = node.labels("nfd", &[]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(
        took < Duration::from_secs(5),
        "labels took {took:?}: no probe, so well within a 10 s helper budget"
    );
    let text = common::stdout(&out);
    let labels = nfd_file(&text);
    let get = |k: &str| {
        labels
            .iter()
            .find(|(key, _)| key == &format!("preflight.kernels.hf.co/{k}"))
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("acme.relu.111111111111"), Some("true"), "{text}");
    assert_eq!(
        get("acme.relu.111111111111.variant"),
        Some("torch-universal"),
        "{text}"
    );
    assert_eq!(get("acme.broken.222222222222"), Some("false"), "{text}");
    assert_eq!(get("acme.broken.222222222222.variant"), None, "{text}");
    assert_eq!(
        get("acme.later.333333333333"),
        None,
        "no verdict, no label: {text}"
    );
    let class = get("machine-class").expect("machine class");
    assert_eq!(class.len(), 12, "{class}");
    let stderr = common::stderr(&out);
    assert!(
        stderr.contains("acme/later@333333333333: no verdict yet"),
        "{stderr}"
    );
    assert!(
        stderr.contains("acme/absent@444444444444: no verdict yet"),
        "{stderr}"
    );
}

#[test]
fn the_expiry_is_the_ttl_from_now_and_no_later_than_max_age_after_the_evidence() {
    let node = shared();
    let expiry = |extra: &[&str]| {
        let out = node.labels("nfd", extra);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        let text = common::stdout(&out);
        let line = text
            .lines()
            .find(|l| l.starts_with("# +expiry-time="))
            .unwrap()
            .to_owned();
        let value = line.trim_start_matches("# +expiry-time=");
        time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
            .unwrap()
            .unix_timestamp()
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let by_ttl = expiry(&["--ttl", "600"]);
    assert!((by_ttl - (now + 600)).abs() <= 5, "{by_ttl} vs {now}");
    // The evidence is seconds old: a max age of 60 s ends it sooner.
    let by_age = expiry(&["--ttl", "600", "--max-age", "60"]);
    assert!(
        by_age <= now + 61 && by_age > now - 600,
        "{by_age} vs {now}"
    );
}

#[test]
fn output_is_written_whole_or_not_at_all() {
    let node = shared();
    let dir = common::fresh_dir("features.d");
    let file = dir.join("preflight");
    let out = node.labels("nfd", &["--output", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(common::stdout(&out).is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(nfd_file(&text).len() >= 3, "{text}");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        names,
        [std::ffi::OsString::from("preflight")],
        "no temp file left"
    );

    let missing = dir.join("nosuch/preflight");
    let out = node.labels("nfd", &["--output", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = common::stderr(&out);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!missing.exists());
}

#[test]
fn a_read_only_folder_is_refused_before_anything_is_written() {
    if nix::unistd::geteuid().is_root() {
        // root writes anywhere: the check has nothing to refuse.
        return;
    }
    let node = shared();
    let dir = common::fresh_dir("read-only");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = node.labels("nfd", &["--output", dir.join("f").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("not writable"));
}

#[test]
fn bad_input_is_one_message_and_exit_2() {
    let node = shared();
    for prefix in [
        "Preflight.Example.com",
        "-bad.example",
        "a..b",
        "kubernetes.io",
        "node.k8s.io",
        "x/y",
    ] {
        let out = node.labels("nfd", &[&format!("--prefix={prefix}")]);
        assert_eq!(out.status.code(), Some(2), "--prefix {prefix}");
        assert_eq!(
            common::stderr(&out).lines().count(),
            1,
            "{}",
            common::stderr(&out)
        );
    }
    for prefix in [
        "feature.node.kubernetes.io",
        "example.com",
        "gpu.example.org",
    ] {
        let out = node.labels("nfd", &["--prefix", prefix]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "--prefix {prefix}: {}",
            common::stderr(&out)
        );
        let labels = nfd_file(&common::stdout(&out));
        assert!(
            labels
                .iter()
                .all(|(k, _)| k.starts_with(&format!("{prefix}/")))
        );
    }
    let bad = node.root.join("bad.lock");
    std::fs::write(&bad, "{not json").unwrap();
    let out = node.run(&["labels", "--format", "nfd", "--lock", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("not a kernels.lock"),
        "{}",
        common::stderr(&out)
    );
}

#[test]
fn slurm_features_name_the_passing_kernels_and_the_machine_class() {
    let node = shared();
    let out = node.labels("slurm", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let features: Vec<&str> = text.lines().collect();
    assert!(features.iter().all(|f| slurm_feature(f)), "{features:?}");
    assert_eq!(features.len(), 2, "{features:?}");
    assert!(features[0].starts_with("preflight.class.") && features[0].len() == 16 + 12);
    assert_eq!(features[1], "preflight.acme.relu.111111111111");

    let out = node.labels("slurm-helpers", &["--helper", "/opt/preflight/features"]);
    let helpers = common::stdout(&out);
    for (line, feature) in helpers.lines().zip(&features) {
        assert_eq!(
            line,
            format!("Feature={feature} Helper=/opt/preflight/features")
        );
    }
}

#[test]
fn the_ray_labels_file_is_a_mapping_of_valid_labels() {
    let node = shared();
    let out = node.labels("ray", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let doc: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON, which YAML reads");
    let map = doc.as_object().unwrap();
    for (k, v) in map {
        assert!(nfd_key(k), "{k}");
        assert!(k8s_value(v.as_str().expect("string values")), "{v}");
    }
    assert_eq!(
        map["preflight.kernels.hf.co/acme.relu.111111111111"],
        "true"
    );
}

#[test]
fn json_says_every_verdict_and_why_some_have_none() {
    let node = shared();
    let out = node.labels("json", &[]);
    let doc: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let kernels = doc["kernels"].as_array().unwrap();
    let verdicts: Vec<(&str, &str)> = kernels
        .iter()
        .map(|k| {
            (
                k["kernel"].as_str().unwrap(),
                k["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("acme/relu", "pass"),
            ("acme/broken", "fail"),
            ("acme/later", "unknown"),
            ("acme/absent", "unknown")
        ]
    );
    assert_eq!(kernels[0]["variant"], "torch-universal");
    assert_eq!(
        kernels[1]["outcomes"][0][1], "import_error",
        "{}",
        kernels[1]
    );
}

#[test]
fn every_cached_ref_is_labeled_without_a_lock() {
    let node = shared();
    let out = node.run(&["labels", "--format", "json"]);
    let doc: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let mut seen: Vec<String> = doc["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            format!(
                "{} {} {}",
                k["key"].as_str().unwrap(),
                k["version"].as_str().unwrap(),
                k["verdict"].as_str().unwrap()
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "acme.broken.main main fail",
            "acme.broken.v1 v1 fail",
            "acme.later.main main unknown",
            "acme.later.v1 v1 unknown",
            "acme.relu.main main pass",
            "acme.relu.v1 v1 pass",
        ]
    );
}

#[test]
fn before_any_warmup_nothing_has_a_verdict_and_nothing_is_probed() {
    let node = shared();
    let fresh = common::fresh_dir("cold-cache");
    let out = common::preflight_cmd()
        .env("KERNELS_CACHE", &node.root)
        .env("PREFLIGHT_CACHE", &fresh)
        .args([
            "labels",
            "--format",
            "nfd",
            "--lock",
            node.lock.to_str().unwrap(),
            "--python",
        ])
        .arg(common::venv_python())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(nfd_file(&common::stdout(&out)).is_empty());
    assert!(common::stderr(&out).contains("never measured: run preflight warmup first"));
}

/// The new user's case: `warmup --python P`, then `labels` without
/// `--python`. The environment found by default was never measured, and
/// the labels say which one was, and the `--python` that reaches it.
#[test]
fn without_python_the_labels_name_the_environment_that_has_the_verdicts() {
    let node = shared();
    let out = common::preflight_cmd()
        .env("KERNELS_CACHE", &node.root)
        .env("PREFLIGHT_CACHE", &node.cache)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("PREFLIGHT_PYTHON")
        .args([
            "labels",
            "--format",
            "json",
            "--lock",
            node.lock.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let venv = common::venv_python();
    assert_eq!(
        doc["measured_elsewhere"],
        json!([venv.to_str().unwrap()]),
        "{doc}"
    );
    let reach = format!(
        "this machine's verdicts are for --python {}",
        venv.display()
    );
    for kernel in doc["kernels"].as_array().unwrap() {
        assert_eq!(kernel["verdict"], "unknown", "{doc}");
        if kernel["kernel"] != "acme/absent" {
            assert!(kernel["why"].as_str().unwrap().contains(&reach), "{doc}");
        }
    }
    assert!(
        common::stderr(&out).contains(&reach),
        "{}",
        common::stderr(&out)
    );
    // With it, the verdicts are there.
    let out = node.labels("json", &[]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.get("measured_elsewhere").is_none(), "{doc}");
    assert_eq!(doc["kernels"][0]["verdict"], "pass", "{doc}");
}

/// `select` in that environment says the same before it measures it (in
/// a copy of the node's cache: the shared one stays unmeasured for it).
#[test]
fn select_in_an_unmeasured_environment_names_the_one_that_has_verdicts() {
    let node = shared();
    let cache = common::fresh_dir("select-elsewhere");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", node.cache.display()))
        .arg(&cache)
        .status()
        .unwrap();
    assert!(copied.success());
    let out = common::preflight_cmd()
        .env("KERNELS_CACHE", &node.root)
        .env("PREFLIGHT_CACHE", &cache)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("PREFLIGHT_PYTHON")
        .args(["select", "--repo", "acme/relu", "--version", "1"])
        .output()
        .unwrap();
    let reach = format!(
        "this machine's verdicts are for --python {} (select measures this one now)",
        common::venv_python().display()
    );
    assert!(
        common::stderr(&out).contains(&reach),
        "{}",
        common::stderr(&out)
    );
}

fn pass(kernel: &str, version: &str, variant: &str) -> KernelLabel {
    KernelLabel {
        kernel: kernel.into(),
        version: version.into(),
        key: kernel_key(kernel, version),
        verdict: Recalled::Pass {
            variant: variant.into(),
            since: SystemTime::now(),
        },
    }
}

#[test]
fn a_feature_file_over_64_kib_is_refused() {
    let many = |n: usize| NodeLabels {
        machine_class: Some("0123456789ab".into()),
        kernels: (0..n)
            .map(|i| {
                pass(
                    &format!("kernels-community/kernel-{i}"),
                    "v1",
                    "torch28-cxx11-cu128-x86_64-linux",
                )
            })
            .collect(),
        measured_elsewhere: Vec::new(),
    };
    let fits = render::nfd(&many(100), "preflight.kernels.hf.co", SystemTime::now()).unwrap();
    nfd_file(&fits);
    let err = render::nfd(&many(1000), "preflight.kernels.hf.co", SystemTime::now()).unwrap_err();
    assert!(err.0 > 64 * 1024);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any repo id and version, dots, slashes, unicode and length
    /// included, become a valid label name short enough for its variant
    /// label, and a valid Slurm feature.
    #[test]
    fn every_kernel_key_is_valid(org in "[a-zA-Z0-9._/é -]{0,40}", name in "[a-zA-Z0-9._é-]{0,80}", version in "[a-zA-Z0-9./_ -]{0,45}") {
        let key = kernel_key(&format!("{org}/{name}"), &version);
        prop_assert!(k8s_name(&key), "{key}");
        prop_assert!(key.len() <= KEY_MAX);
        let variant_label = format!("{key}.variant");
        let feature = format!("preflight.{key}");
        prop_assert!(k8s_name(&variant_label), "{}", variant_label);
        prop_assert!(slurm_feature(&feature), "{}", feature);
    }

    /// Two different kernels never share a key.
    #[test]
    fn keys_are_unique(a in "[a-z.-]{1,6}/[a-z.-]{1,6}", b in "[a-z.-]{1,6}/[a-z.-]{1,6}", va in "v[0-9]|main|[a-f0-9]{12}", vb in "v[0-9]|main|[a-f0-9]{12}") {
        prop_assume!((a.as_str(), va.as_str()) != (b.as_str(), vb.as_str()));
        prop_assert_ne!(kernel_key(&a, &va), kernel_key(&b, &vb));
    }

    /// Any variant name becomes a valid label value.
    #[test]
    fn every_variant_is_a_valid_value(variant in ".{0,90}") {
        prop_assert!(k8s_value(&label_value(&variant)));
    }
}

#[test]
fn long_and_dotted_names_are_cut_and_hashed() {
    let long = kernel_key(
        "kernels-community/a-very-long-kernel-name-that-goes-on-and-on",
        "v12",
    );
    assert!(long.len() <= KEY_MAX && k8s_name(&long), "{long}");
    assert!(long.starts_with("kernels-community.a-very-long"), "{long}");
    let dotted = kernel_key("acme/flash.attn", "v1");
    assert!(dotted.starts_with("acme.flash.attn.v1-"), "{dotted}");
    assert_eq!(
        kernel_key("acme/flash.attn", "v1"),
        dotted,
        "the same on every node"
    );
}
