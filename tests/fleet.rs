//! `preflight fleet ls|diff` against a real `redis-server`: two machine
//! classes on this one machine, the second made by fingerprint overrides
//! (another driver, and a recorded environment variable its probes see).

mod common;

use common::node::{Node, OUTCOMES, secret_file};
use common::redis_server::RedisServer;
use common::{fresh_dir, kernel_repo, stderr, stdout};
use serde_json::Value;
use std::path::PathBuf;

/// What the second class's fingerprint adds: a driver upgrade, and an
/// architecture override that its probes see.
const DRIVER: &str = "570.86.10";
const ARCH_VAR: &str = "TRITON_OVERRIDE_ARCH";

/// A kernel of two variants that load on this CPU-only machine, in the
/// hub's preference order (a backend's build before the universal one):
/// the preferred one refuses an overridden architecture, the other loads
/// anywhere.
fn repo() -> (PathBuf, Vec<String>) {
    let names: Vec<String> = ["torch-cpu", "torch-universal"].map(String::from).into();
    let repo = kernel_repo(&fresh_dir("repo"), "fleetk", &names, "X = 1\n");
    std::fs::write(
        repo.join("build").join(&names[0]).join("__init__.py"),
        format!(
            "import os\nif os.environ.get({ARCH_VAR:?}):\n    raise ImportError('not built for this \
             architecture')\nX = 1\n"
        ),
    )
    .unwrap();
    (repo, names)
}

/// Two classes' verdicts published: (the store, the secret, a node of
/// the first class, the variants).
fn two_classes() -> (RedisServer, PathBuf, Node, Vec<String>) {
    let redis = RedisServer::start();
    let secret = secret_file();
    let (repo, names) = repo();
    let a = Node::new(&redis, &secret);
    let (out, _) = a.check(&repo);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let b = Node::new(&redis, &secret)
        .set("PREFLIGHT_NVIDIA_DRIVER", DRIVER)
        .set(ARCH_VAR, "sm_100");
    let (out, _) = b.check(&repo);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (redis, secret, a, names)
}

fn json(node: &Node, args: &[&str]) -> Value {
    let out = node.cmd(args).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The class whose facts have (or lack) the driver override.
fn class(fleet: &Value, upgraded: bool) -> &Value {
    fleet["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| (c["facts"]["driver"] == DRIVER) == upgraded)
        .unwrap_or_else(|| panic!("no class with upgraded={upgraded}: {fleet}"))
}

#[test]
fn fleet_ls_shows_each_class_and_its_choice() {
    let (redis, _secret, a, names) = two_classes();
    // An entry no one sealed is counted, never shown as a verdict.
    redis.set(
        &format!("{OUTCOMES}{}", "ab".repeat(32)),
        b"{\"forged\":true}",
    );

    let fleet = json(&a, &["fleet", "ls"]);
    assert_eq!(fleet["classes"].as_array().unwrap().len(), 2, "{fleet}");
    assert_eq!(fleet["refused"], 1, "{fleet}");
    let (old, new) = (class(&fleet, false), class(&fleet, true));
    for c in [old, new] {
        assert_eq!(c["class"].as_str().unwrap().len(), 12);
        let kernels = c["kernels"].as_array().unwrap();
        assert_eq!(kernels.len(), 1, "{c}");
        assert_eq!(kernels[0]["kernel"], "fleetk");
        let variants: Vec<&str> = kernels[0]["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["variant"].as_str().unwrap())
            .collect();
        assert_eq!(variants, names, "in the hub's preference order");
    }
    assert_eq!(old["kernels"][0]["chosen"], names[0].as_str());
    assert_eq!(new["kernels"][0]["chosen"], names[1].as_str());
    assert_eq!(new["kernels"][0]["variants"][0]["outcome"], "import_error");
    assert_eq!(new["facts"]["env"][ARCH_VAR], "sm_100");

    let out = a
        .cmd(&["fleet", "ls"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.starts_with("2 machine classes in the remote store, 1 refused\n"),
        "{text}"
    );
    for c in [old, new] {
        let heading = format!("machine class {}", c["class"].as_str().unwrap());
        assert!(text.contains(&heading), "{text}");
    }
    assert!(text.contains(&format!("driver   {DRIVER}")), "{text}");
    // This machine's environment that warmed up, and its class.
    let here = format!(
        "this machine's environment of class {}:\n  --python {}\n",
        old["class"].as_str().unwrap(),
        common::venv_python().display()
    );
    assert!(text.contains(&here), "{text}");
    assert_eq!(text.matches("chosen").count(), 2, "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn fleet_diff_names_the_verdicts_and_facts_that_differ() {
    let (_redis, _secret, a, names) = two_classes();
    let fleet = json(&a, &["fleet", "ls"]);
    let (old, new) = (
        class(&fleet, false)["class"].as_str().unwrap().to_string(),
        class(&fleet, true)["class"].as_str().unwrap().to_string(),
    );
    // A prefix is enough when it is unique.
    let diff = json(&a, &["fleet", "diff", &old, &new[..8]]);
    assert_eq!(diff["a"], old.as_str());
    assert_eq!(diff["b"], new.as_str());
    let facts: Vec<(&str, &Value, &Value)> = diff["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["fact"].as_str().unwrap(), &f["a"], &f["b"]))
        .collect();
    assert!(
        facts.contains(&("driver", &"-".into(), &DRIVER.into())),
        "{diff}"
    );
    let env = format!("env {ARCH_VAR}");
    assert!(
        facts.contains(&(env.as_str(), &Value::Null, &"sm_100".into())),
        "{diff}"
    );
    assert_eq!(
        diff["verdicts"],
        serde_json::json!([{"kernel": "fleetk", "version": null, "variant": names[0],
                            "a": "pass", "b": "import_error"}]),
    );
    assert_eq!(diff["chosen"][0]["a"], names[0].as_str());
    assert_eq!(diff["chosen"][0]["b"], names[1].as_str());

    let out = a
        .cmd(&["fleet", "diff", &old, &new])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "classes {old} and {new} differ in 2 facts, 1 choice, 1 verdict\n"
        )),
        "{text}"
    );
    assert!(text.contains("import_error"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");

    // The same differences on the fleet's page (tests/pictures.rs lays
    // such a page out in a browser), with the matrix they come from.
    let page = fresh_dir("page").join("fleet.html");
    let out = a
        .cmd(&["fleet", "report", "--html", page.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    for class in [&old, &new] {
        assert!(html.contains(&format!("id=\"class-{class}\"")), "{html}");
    }
    assert_eq!(html.matches("classes disagree").count(), 1, "{html}");
    for chosen in &names {
        assert!(
            html.contains(&format!("✓ <span class=\"variant\">{chosen}</span>")),
            "{html}"
        );
    }
    // The page pairs classes in their hashes' order.
    let either =
        |a: &str, b: &str| html.contains(&format!("{a}{b}")) || html.contains(&format!("{b}{a}"));
    assert!(
        either("<td>-</td>", &format!("<td>{DRIVER}</td>")),
        "{html}"
    );
    assert!(html.contains("2 facts, 1 choice, 1 verdict"), "{html}");
    assert!(either("<td>pass</td>", "<td>import_error</td>"), "{html}");
}

#[test]
fn fleet_bad_input_is_one_message_and_exit_2() {
    let (redis, secret, a, _) = two_classes();
    let cases: Vec<(Node, Vec<&str>, &str)> = vec![
        (
            Node::new(&redis, &secret),
            vec!["fleet", "diff", "xyz", "0"],
            "invalid machine class \"xyz\"",
        ),
        (
            Node::new(&redis, &secret),
            vec!["fleet", "diff", "ffffffffffff", "0"],
            "no machine class",
        ),
        (
            Node::new(&redis, &secret).unset("PREFLIGHT_REMOTE"),
            vec!["fleet", "ls"],
            "no remote store",
        ),
        (
            Node::new(&redis, &secret).unset("PREFLIGHT_REMOTE"),
            vec!["fleet", "ls", "--remote", "redis//nowhere"],
            "--remote redis//nowhere: not a URL",
        ),
        (
            Node::new(&redis, &secret).unset("PREFLIGHT_REMOTE_SECRET_FILE"),
            vec!["fleet", "ls"],
            "PREFLIGHT_REMOTE_SECRET_FILE is not set",
        ),
        (
            Node::new(&redis, &secret),
            vec!["fleet", "report", "--html", "fleet.txt"],
            "--html fleet.txt: expected a file name ending in .html",
        ),
        (
            Node::new(&redis, &secret),
            vec!["fleet", "report", "--html", "/nonexistent/fleet.html"],
            "its folder does not exist",
        ),
        (
            Node::new(&redis, &secret),
            vec!["fleet", "report", "--html", "fleet.html", "--json"],
            "--json is for fleet ls and fleet diff",
        ),
    ];
    for (node, args, message) in cases {
        let out = node.cmd(&args).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
    drop(a);
}
