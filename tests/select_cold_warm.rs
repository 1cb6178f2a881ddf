//! Cold and warm `select` give the same answer on every kind of kernel the
//! suite builds, the second from the cache; and no two jobs share an
//! outcome, though many of these variants have identical files. Variants
//! are built the way the hub builds them (`hub_build`), and the hub loader
//! judges every pass (`kernels.get_local_kernel` in the probed
//! interpreter).

mod hub_build;

use hub_build::{HubKernel, assert_agrees_with_the_hub, preflight, preflight_json, python};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ADD: &str = "def add(a, b):\n    return a + b\n";
const SMOKE: &str = "def smoke(kernel, device):\n    return (kernel.add(1, 2), 3)\n";

/// One kernel repo of the table, and how `select` is asked about it.
struct Kernel {
    what: &'static str,
    repo: PathBuf,
    args: Vec<String>,
}

fn kernels(root: &Path) -> Vec<Kernel> {
    let python = python();
    let smoke = root.join("smoke.py");
    std::fs::write(&smoke, SMOKE).unwrap();
    let smoke = smoke.to_str().unwrap().to_owned();
    let with_smoke = || vec!["--smoke".to_owned(), smoke.clone()];
    let mut table = Vec::new();
    let mut add = |what: &'static str, args: Vec<String>, build: &dyn Fn(&mut HubKernel)| {
        let mut k = HubKernel::new(root, what);
        build(&mut k);
        table.push(Kernel {
            what,
            repo: k.finish(&python),
            args,
        });
    };
    add("universal", with_smoke(), &|k| {
        let m = k.metadata("cpu");
        k.variant("torch-universal", &[("__init__.py", ADD)], m);
    });
    // kernel-builder's noarch layout: the same files per backend.
    add("noarch-twins", vec![], &|k| {
        for (variant, backend) in [("torch-cpu", "cpu"), ("torch-universal", "cpu")] {
            let m = k.metadata(backend);
            k.variant(variant, &[("__init__.py", ADD)], m);
        }
    });
    add("cuda", with_smoke(), &|k| {
        for (variant, backend) in [("torch-cuda", "cuda"), ("torch-universal", "cpu")] {
            let m = k.metadata(backend);
            k.variant(variant, &[("__init__.py", ADD)], m);
        }
    });
    add("cpu-only", with_smoke(), &|k| {
        let m = k.metadata("cpu");
        k.variant("torch-cpu", &[("__init__.py", ADD)], m);
    });
    // The hub refuses the preferred variant's metadata (no license).
    add("refused-by-hub", vec![], &|k| {
        let mut m = k.metadata("cpu");
        m.as_object_mut().unwrap().remove("license");
        k.variant("torch-cpu", &[("__init__.py", ADD)], m);
        let m = k.metadata("cpu");
        k.variant("torch-universal", &[("__init__.py", ADD)], m);
    });
    // No torch here: the hub rejects every torch-versioned build by name;
    // with smoke evidence and when asked, select may take it.
    let arch = format!("torch29-cxx11-cpu-{}-linux", std::env::consts::ARCH);
    add("name-rejected", with_smoke(), &|k| {
        let m = k.metadata("cpu");
        k.variant(&arch, &[("__init__.py", ADD)], m);
    });
    let mut overrule = with_smoke();
    overrule.push("--overrule-names".into());
    add("name-rejected-overruled", overrule, &|k| {
        let m = k.metadata("cpu");
        k.variant(&arch, &[("__init__.py", ADD)], m);
    });
    add("broken", vec![], &|k| {
        let m = k.metadata("cpu");
        k.variant(
            "torch-cpu",
            &[("__init__.py", "raise ValueError('broken on purpose')\n")],
            m,
        );
        let m = k.metadata("cpu");
        k.variant(
            "torch-universal",
            &[("__init__.py", "import os\nos._exit(3)\n")],
            m,
        );
    });
    table
}

fn select(cache: &Path, k: &Kernel) -> (Value, Option<i32>) {
    let python = python();
    let mut args = vec![
        "select",
        "--json",
        "--python",
        python.to_str().unwrap(),
        k.repo.to_str().unwrap(),
    ];
    args.extend(k.args.iter().map(String::as_str));
    preflight_json(cache, &args)
}

/// What an answer says, without whether it came from the cache.
fn answer(doc: &Value) -> Value {
    let alternatives: Vec<Value> = doc["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| serde_json::json!([a["variant"], a["path"], a["outcome"], a["accepted_by_name"]]))
        .collect();
    serde_json::json!({
        "variant": doc["variant"], "path": doc["path"], "outcome": doc["outcome"],
        "overrules_name": doc["overrules_name"], "alternatives": alternatives,
    })
}

fn without_tails(mut v: Value) -> Value {
    match &mut v {
        Value::Object(map) => {
            map.remove("stderr_tail");
            for value in map.values_mut() {
                *value = without_tails(value.take());
            }
        }
        Value::Array(items) => {
            for value in items.iter_mut() {
                *value = without_tails(value.take());
            }
        }
        _ => {}
    }
    v
}

#[test]
fn cold_and_warm_select_agree_and_no_two_jobs_share_an_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    let table = kernels(tmp.path());
    let shared = tmp.path().join("shared-cache");
    let mut probed = BTreeSet::new();
    let mut judged = Vec::new();
    let mut chosen = Vec::new();
    for k in &table {
        let cache = tmp.path().join(format!("cache-{}", k.what));
        let (cold, cold_code) = select(&cache, k);
        let (warm, warm_code) = select(&cache, k);
        assert_eq!(answer(&warm), answer(&cold), "{}: cold vs warm", k.what);
        assert_eq!(warm_code, cold_code, "{}", k.what);
        assert_eq!(cold["cached"], false, "{}: {cold}", k.what);
        for a in warm["alternatives"].as_array().unwrap() {
            assert_eq!(a["cached"], true, "{}: warm {a}", k.what);
        }
        if !warm["variant"].is_null() {
            assert_eq!(warm["cached"], true, "{}: {warm}", k.what);
        }
        chosen.push((k.what, cold["variant"].as_str().map(str::to_owned)));
        // The same answers from one cache shared by every kernel (probed
        // anew: the tail of a traceback names the child's own folder).
        let (again, _) = select(&shared, k);
        assert_eq!(
            without_tails(answer(&again)),
            without_tails(answer(&cold)),
            "{}: shared cache",
            k.what
        );
        let picked = std::iter::once(&cold).filter(|c| !c["variant"].is_null());
        for a in picked.chain(cold["alternatives"].as_array().unwrap()) {
            if !a["outcome"].is_null() && a["outcome"]["kind"] != "skipped" {
                probed.insert(a["path"].as_str().unwrap().to_owned());
                judged.push((
                    PathBuf::from(a["path"].as_str().unwrap()),
                    a["outcome"].clone(),
                ));
            }
        }
    }
    let arch = format!("torch29-cxx11-cpu-{}-linux", std::env::consts::ARCH);
    let expected: Vec<(&str, Option<String>)> = vec![
        ("universal", Some("torch-universal".into())),
        ("noarch-twins", Some("torch-cpu".into())),
        ("cuda", Some("torch-universal".into())),
        ("cpu-only", Some("torch-cpu".into())),
        ("refused-by-hub", Some("torch-universal".into())),
        ("name-rejected", None),
        ("name-rejected-overruled", Some(arch)),
        ("broken", None),
    ];
    assert_eq!(chosen, expected);
    // One outcome per job: as many entries as probed variants, each
    // naming its own variant, though their files are alike.
    let out = preflight(&shared, &["cache", "ls", "--json"]);
    let entries: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let paths: BTreeSet<String> = entries
        .iter()
        .map(|e| e["record"]["path"].as_str().unwrap().to_owned())
        .collect();
    let keys: BTreeSet<&str> = entries.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), entries.len(), "distinct keys");
    assert_eq!(paths, probed, "one entry per probed variant");
    assert_eq!(entries.len(), probed.len());
    // What select passed, the hub loads; what it refuses is named.
    assert_agrees_with_the_hub(&python(), &judged, |refusal| {
        refusal
            .split_once("`: ")
            .map_or(refusal, |(_, r)| r)
            .split(" at line ")
            .next()
            .unwrap()
            .to_owned()
    });
}

#[test]
fn a_rebuilt_metadata_json_alone_is_a_new_job_and_the_hubs_refusal_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let python = python();
    let mut k = HubKernel::new(tmp.path(), "relicensed");
    let m = k.metadata("cpu");
    let variant = k.variant("torch-universal", &[("__init__.py", ADD)], m);
    let repo = k.finish(&python);
    let cache = tmp.path().join("cache");
    let kernel = Kernel {
        what: "relicensed",
        repo,
        args: vec![],
    };
    let (first, code) = select(&cache, &kernel);
    assert_eq!(code, Some(0), "{first}");
    assert_eq!(first["outcome"]["kind"], "pass", "{first}");
    let judged = [(variant.clone(), first["outcome"].clone())];
    assert_agrees_with_the_hub(&python, &judged, str::to_owned);
    // The same files, rebuilt without a license: only metadata.json changes.
    let path = variant.join("metadata.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("license");
    m.as_object_mut().unwrap().remove("digest");
    std::fs::write(&path, m.to_string()).unwrap();
    hub_build::hub_hash(&python, std::slice::from_ref(&variant));
    let (second, code) = select(&cache, &kernel);
    assert_eq!(code, Some(1), "{second}");
    let alternative = &second["alternatives"][0];
    assert_eq!(alternative["cached"], false, "a new job: {second}");
    assert_ne!(alternative["outcome"]["kind"], "pass", "{second}");
    let judged = [(variant, alternative["outcome"].clone())];
    assert_agrees_with_the_hub(&python, &judged, |refusal| {
        // "Cannot parse metadata from `…/metadata.json`: missing field `license` at line …"
        let reason = refusal.split_once("`: ").map_or(refusal, |(_, r)| r);
        reason.split(" at line ").next().unwrap().to_owned()
    });
}
