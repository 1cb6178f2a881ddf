//! The fleet's remote outcome store, against a real `redis-server`: nodes
//! are processes with caches of their own on this one machine (one
//! fingerprint), sharing one Redis.

mod common;

use common::node::{
    Node, OUTCOMES, SECRET, answered, cpu_names as names, resealed, rows, secret_file,
};
use common::redis_server::RedisServer;
use common::{fresh_dir, kernel_repo, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// A repo with a variant that passes, one that fails for good, and one
/// that hangs (a timeout under `--timeout 5`).
fn mixed_repo() -> PathBuf {
    let names = names(3);
    let repo = kernel_repo(&fresh_dir("repo"), "fleet", &names, "X = 1\n");
    let body = |i: usize, text: &str| {
        std::fs::write(repo.join("build").join(&names[i]).join("__init__.py"), text).unwrap()
    };
    body(1, "import no_such_module_anywhere\n");
    body(2, "import time\ntime.sleep(600)\n");
    repo
}

fn slow_repo(n: usize, body: &str) -> PathBuf {
    kernel_repo(&fresh_dir("repo"), "slow", &names(n), body)
}

#[test]
fn a_second_node_probes_nothing_that_lasts() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = mixed_repo();
    let a = Node {
        timeout: "5",
        ..Node::new(&redis, &secret)
    };
    let (out, doc) = a.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 3], "{}", stderr(&out));
    let kinds: Vec<String> = rows(&doc).into_iter().map(|(_, k, _)| k).collect();
    assert!(kinds.contains(&"pass".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"timeout".to_string()), "{kinds:?}");
    // The two that last are published; the timeout is not.
    assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), 2);

    let b = Node {
        timeout: "5",
        ..Node::new(&redis, &secret)
    };
    let (out, doc) = b.check(&repo);
    let b_rows = rows(&doc);
    for (variant, kind, how) in &b_rows {
        let expected = if kind == "timeout" {
            "probed"
        } else {
            "remote"
        };
        assert_eq!(*how, expected, "{variant} {kind}: {}", stderr(&out));
    }
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    // Kept locally: the next load never asks the remote (it is gone).
    drop(redis);
    let (out, doc) = b.check(&repo);
    for (variant, kind, how) in rows(&doc) {
        let expected = if kind == "timeout" { "probed" } else { "local" };
        assert_eq!(how, expected, "{variant} {kind}: {}", stderr(&out));
    }
}

/// The entry of `variant` that node `a` published: its Redis key and its
/// sealed JSON.
fn published(redis: &RedisServer, a: &Node, variant: &str) -> (String, Value) {
    let out = a.cmd(&["cache", "ls", "--json"]).output().unwrap();
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["parts"]["job"]["name"] == variant)
        .unwrap_or_else(|| panic!("no local entry of {variant}"))["key"]
        .as_str()
        .unwrap()
        .to_string();
    let name = format!("{OUTCOMES}{key}");
    let sealed = redis.get(&name).expect("a published entry");
    (name, serde_json::from_slice(&sealed).unwrap())
}

#[test]
fn forged_foreign_and_misplaced_entries_are_refused() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = slow_repo(4, "X = 1\n");
    let a = Node::new(&redis, &secret);
    let (_, doc) = a.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 4]);
    let names = names(4);
    let entries: Vec<(String, Value)> = names.iter().map(|v| published(&redis, &a, v)).collect();
    let entry = |i: usize| -> Value {
        serde_json::from_str(entries[i].1["entry"].as_str().unwrap()).unwrap()
    };
    // 0: a verdict changed without the secret (the MAC no longer verifies).
    let mut forged = entries[0].1.clone();
    let mut e = entry(0);
    e["record"]["outcome"]["kind"] = "import_error".into();
    forged["entry"] = Value::String(e.to_string());
    redis.set(&entries[0].0, &serde_json::to_vec(&forged).unwrap());
    // 1: another machine's fingerprint, signed by the fleet.
    let mut e = entry(1);
    e["parts"]["fingerprint"] = "0".repeat(64).into();
    redis.set(
        &entries[1].0,
        &resealed(&entries[1].1, &e, SECRET.trim().as_bytes()),
    );
    // 2: a valid entry of another job, put under this one's key.
    redis.set(&entries[2].0, &serde_json::to_vec(&entries[3].1).unwrap());
    // 3: truncated.
    let whole = serde_json::to_vec(&entries[3].1).unwrap();
    redis.set(&entries[3].0, &whole[..whole.len() / 2]);

    let b = Node::new(&redis, &secret);
    let out = b.cmd(&["cache", "ls", "--remote"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        table.contains("4 entries in the remote store, 4 refused"),
        "{table}"
    );
    assert!(table.contains("signature does not verify"), "{table}");
    assert!(table.contains("do not hash to its key"), "{table}");
    assert!(table.contains("not a sealed entry"), "{table}");
    let out = b
        .cmd(&["cache", "ls", "--remote", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let refused = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"]["status"] == "refused")
        .count();
    assert_eq!(refused, 4, "{listed}");

    // Node b probes all four itself, and says what it refused.
    let (out, doc) = b.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 4], "{}", stderr(&out));
    assert!(rows(&doc).iter().all(|(_, k, _)| k == "pass"));
    let err = stderr(&out);
    assert!(err.contains("signature does not verify"), "{err}");
    assert!(err.contains("names another machine"), "{err}");
    assert!(err.contains("do not hash to its key"), "{err}");
    assert!(err.contains("not a sealed entry"), "{err}");
    assert!(
        err.contains("refused 4 entries of the remote store"),
        "{err}"
    );
    // What it published in their place is believed again.
    let c = Node::new(&redis, &secret);
    let (_, doc) = c.check(&repo);
    assert_eq!(answered(&doc), ["remote"; 4]);
}

#[test]
fn without_a_secret_nothing_is_read_or_published() {
    let redis = RedisServer::start();
    let repo = slow_repo(2, "X = 1\n");
    let a = Node::new(&redis, &secret_file()).unset("PREFLIGHT_REMOTE_SECRET_FILE");
    let (out, doc) = a.check(&repo);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(answered(&doc), ["probed"; 2]);
    let err = stderr(&out);
    assert_eq!(
        err.matches("PREFLIGHT_REMOTE_SECRET_FILE is not set")
            .count(),
        1,
        "{err}"
    );
    assert!(redis.keys("*").is_empty(), "{:?}", redis.keys("*"));
}

#[test]
fn a_read_only_node_reads_and_publishes_nothing() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = slow_repo(2, "X = 1\n");
    let reader = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_MODE", "read-only");
    let (out, doc) = reader.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 2], "{}", stderr(&out));
    assert!(redis.keys("*").is_empty(), "{:?}", redis.keys("*"));
    let writer = Node::new(&redis, &secret);
    writer.check(&repo);
    let reader = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_MODE", "read-only");
    let (_, doc) = reader.check(&repo);
    assert_eq!(answered(&doc), ["remote"; 2]);
}

/// How long `node`'s check of `repo` takes, and its output.
fn timed(node: &Node, repo: &Path) -> (Duration, Output, Value) {
    let start = Instant::now();
    let (out, doc) = node.check(repo);
    (start.elapsed(), out, doc)
}

#[test]
fn a_store_that_is_down_or_stopped_costs_one_warning_and_the_retry_time() {
    let secret = secret_file();
    let repo = slow_repo(3, "X = 1\n");
    let unreachable = {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("redis://127.0.0.1:{port}/0")
    };
    // A cold run with no remote, for comparison.
    let redis = RedisServer::start();
    let (alone, _, _) = timed(&Node::new(&redis, &secret).unset("PREFLIGHT_REMOTE"), &repo);
    // It is tried again for this long, then given up on.
    let retry = Duration::from_secs(1);
    for how in ["nothing listening", "stopped"] {
        let node = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_RETRY", "1s");
        let node = if how == "stopped" {
            redis.pause();
            node
        } else {
            node.set("PREFLIGHT_REMOTE", unreachable.clone())
        };
        let (took, out, doc) = timed(&node, &repo);
        redis.resume();
        assert_eq!(out.status.code(), Some(0), "{how}: {}", stderr(&out));
        assert_eq!(answered(&doc), ["probed"; 3], "{how}");
        assert!(rows(&doc).iter().all(|(_, k, _)| k == "pass"), "{how}");
        let err = stderr(&out);
        assert_eq!(err.matches("remote store").count(), 1, "{how}: {err}");
        assert!(
            err.contains("(tried again for 1s); answering from this node alone"),
            "{how}: {err}"
        );
        // The retry time and one timeout (250 ms) at most, against
        // run-to-run noise.
        assert!(
            took < alone + retry + Duration::from_secs(3),
            "{how}: {took:?} against {alone:?} alone"
        );
        // What it probed is kept locally all the same.
        let (_, doc) = node.check(&repo);
        assert_eq!(answered(&doc), ["local"; 3], "{how}");
    }
}

#[test]
fn nodes_warming_up_together_probe_each_variant_once() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = slow_repo(2, "import time\ntime.sleep(2)\nX = 1\n");
    let nodes: Vec<Node> = (0..3).map(|_| Node::new(&redis, &secret)).collect();
    let children: Vec<_> = nodes
        .iter()
        .map(|n| {
            n.check_cmd(&repo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut probed = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(rows(&doc).iter().all(|(_, k, _)| k == "pass"), "{doc}");
        probed += answered(&doc).iter().filter(|h| **h == "probed").count();
    }
    assert_eq!(probed, 2, "each variant probed once across the nodes");
    assert!(redis.keys("preflight:lease-v2:*").is_empty());
}

#[test]
fn a_node_that_dies_holding_a_lease_delays_the_others_by_the_lease_at_most() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = slow_repo(
        1,
        "import os, time\ntime.sleep(float(os.environ.get('SLOW', '0')))\nX = 1\n",
    );
    let lease = Duration::from_secs(2);
    let a = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_LEASE", "2s");
    let mut holder = a
        .check_cmd(&repo)
        .env("SLOW", "60")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    redis.wait_for_a_lease(Duration::from_secs(30), "node a");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let killed = Instant::now();
    let b = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_LEASE", "2s");
    let (out, doc) = b.check(&repo);
    let waited = killed.elapsed();
    assert_eq!(answered(&doc), ["probed"], "{}", stderr(&out));
    assert_eq!(rows(&doc)[0].1, "pass");
    // The lease outlives its holder by at most its time; the rest is one
    // cold check (fingerprint, probe).
    let (alone, _, _) = timed(&Node::new(&redis, &secret).unset("PREFLIGHT_REMOTE"), &repo);
    assert!(
        waited <= lease + alone + Duration::from_secs(3),
        "{waited:?}"
    );
}

#[test]
fn bad_settings_are_one_message_and_exit_2() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = slow_repo(1, "X = 1\n");
    let unreadable = fresh_dir("secret").join("missing.key");
    let empty = fresh_dir("secret").join("empty.key");
    std::fs::write(&empty, "\n").unwrap();
    let cases: Vec<(Node, &str)> = vec![
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE", "http://127.0.0.1:1/0"),
            "unknown scheme http://",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE", "127.0.0.1:6379"),
            "not a URL",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE", "redis://127.0.0.1:1/x"),
            "PREFLIGHT_REMOTE",
        ),
        (
            Node::new(&redis, &secret).set(
                "PREFLIGHT_REMOTE_SECRET_FILE",
                unreadable.display().to_string(),
            ),
            "cannot read the fleet secret",
        ),
        (
            Node::new(&redis, &secret)
                .set("PREFLIGHT_REMOTE_SECRET_FILE", empty.display().to_string()),
            "the fleet secret file is empty",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_TTL", "forever"),
            "PREFLIGHT_REMOTE_TTL=forever",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_TTL", "0"),
            "positive duration",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_RETRY", "soon"),
            "PREFLIGHT_REMOTE_RETRY=soon",
        ),
        (
            Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_MODE", "write-only"),
            "expected read-write or read-only",
        ),
    ];
    for (node, message) in cases {
        let events = fresh_dir("events").join("events.jsonl");
        let out = node
            .check_cmd(&repo)
            .arg("--events")
            .arg(&events)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{message}: {err}");
        assert!(err.contains(message), "{message}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
        assert!(!events.exists(), "{message}: a partial event log");
    }
    // --remote too, on every command that reads or writes outcomes.
    for args in [
        vec!["check", repo.to_str().unwrap()],
        vec!["select", repo.to_str().unwrap()],
        vec!["warmup", repo.to_str().unwrap()],
        vec!["cache", "ls"],
    ] {
        let node = Node::new(&redis, &secret);
        let out = node
            .cmd(&args)
            .args(["--remote", "redis//nowhere"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--remote redis//nowhere: not a URL"),
            "{}",
            stderr(&out)
        );
    }
    assert!(redis.keys("*").is_empty());
}

/// `rediss://`: a Redis that speaks TLS only, its certificate signed by
/// the cluster's own authority (`PREFLIGHT_REMOTE_CA_FILE`): the second
/// node answers from the first one's verdicts. Without that authority the
/// server's certificate is not trusted: one warning, local behaviour.
#[test]
fn a_store_behind_tls_is_shared_when_its_authority_is_trusted() {
    let redis = RedisServer::start_tls();
    let ca = redis.ca.clone().expect("a TLS server has a CA");
    let secret = secret_file();
    let repo = kernel_repo(&fresh_dir("repo"), "tls", &names(2), "X = 1\n");
    let a = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_CA_FILE", ca.display().to_string());
    let (out, doc) = a.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 2], "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), 2);
    let b = Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_CA_FILE", ca.display().to_string());
    let (out, doc) = b.check(&repo);
    assert_eq!(answered(&doc), ["remote"; 2], "{}", stderr(&out));
    // The system's roots do not know the test's authority.
    let c = Node::new(&redis, &secret);
    let (out, doc) = c.check(&repo);
    assert_eq!(answered(&doc), ["probed"; 2], "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("warning").count(),
        1,
        "{}",
        stderr(&out)
    );
    // A file that holds no certificate is bad input.
    let not_pem = fresh_dir("not-pem").join("ca.crt");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let d =
        Node::new(&redis, &secret).set("PREFLIGHT_REMOTE_CA_FILE", not_pem.display().to_string());
    let out = d.check_cmd(&repo).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no PEM certificate"),
        "{}",
        stderr(&out)
    );
}
