//! Many nodes at once against one real `redis-server`: each is a process
//! with a cache of its own on this one machine (one fingerprint), started
//! together, as a fleet's nodes start after a new image.

mod common;

use common::node::{Node, OUTCOMES, cpu_names as names, secret_file, warmed};
use common::redis_server::RedisServer;
use common::{fresh_dir, kernel_repo, stderr};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `warmup --json` of `repo` on `node`, started.
fn warmup(node: &Node, repo: &Path) -> Child {
    node.warmup(repo, &[])
}

/// A finished warmup's (probed, answered from a cache) counts.
fn counts(child: Child) -> (u64, u64) {
    let (probed, cached, _) = warmed(child);
    (probed, cached)
}

#[test]
fn twenty_nodes_warming_up_together_probe_each_variant_once() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let variants = 3;
    // Long enough that every node starts while the first probes run.
    let repo = kernel_repo(
        &fresh_dir("repo"),
        "twenty",
        &names(variants),
        "import time\ntime.sleep(1)\nX = 1\n",
    );
    let nodes: Vec<Node> = (0..20).map(|_| Node::new(&redis, &secret)).collect();
    let children: Vec<Child> = nodes.iter().map(|n| warmup(n, &repo)).collect();
    let (mut probed, mut answered) = (0, 0);
    for child in children {
        let (p, a) = counts(child);
        probed += p;
        answered += a;
    }
    assert_eq!(
        probed, variants as u64,
        "each variant probed once, fleet-wide"
    );
    assert_eq!(answered, 19 * variants as u64);
    assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), variants);
    assert!(redis.keys("preflight:lease-v2:*").is_empty());
}

/// A variant that fails when its own probe child imported the hub's
/// validators: it passes only when its child replayed a judge's verdict.
const ONLY_JUDGED_AHEAD: &str = "import sys, time\n\
if 'kernels.validate' in sys.modules:\n    raise RuntimeError('judged in this child')\n\
time.sleep(2)\nX = 1\n";

/// A node that finds another node of its class probing one of its jobs
/// starts no judge child (issue 41: at 20 nodes a judge on every node, 2.5 s
/// of CPU for 160 variants, cost more than the probes it spared): none of
/// its probes replays a verdict, every one judges itself. The node that
/// started first, alone, judges ahead: its probes after the first replay.
#[test]
fn a_node_that_finds_others_probing_starts_no_judge_child() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = kernel_repo(&fresh_dir("repo"), "judged", &names(6), ONLY_JUDGED_AHEAD);
    let check = |node: &Node| {
        node.check_cmd(&repo)
            .args(["--jobs", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = Node::new(&redis, &secret);
    let alone = check(&first);
    redis.wait_for_a_lease(Duration::from_secs(60), "the first node");
    let second = Node::new(&redis, &secret);
    let waiting = check(&second);
    let probed = |child: Child| -> Vec<String> {
        let out = child.wait_with_output().unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("check --json: {e}\n{}", stderr(&out)));
        common::node::rows(&doc)
            .into_iter()
            .filter(|(_, _, how)| *how == "probed")
            .map(|(_, kind, _)| kind)
            .collect()
    };
    let (waiting, alone) = (probed(waiting), probed(alone));
    assert!(!waiting.is_empty(), "the second node probed nothing");
    assert!(
        waiting.iter().all(|kind| kind != "pass"),
        "a probe of the node that found others probing replayed a judge's verdict: {waiting:?}"
    );
    assert!(
        alone.iter().any(|kind| kind == "pass"),
        "the node that started alone judged nothing ahead: {alone:?}"
    );
}

#[test]
fn redis_stopped_mid_warmup_loses_no_verdict_and_leaves_no_half_entry() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let variants = 4;
    let repo = kernel_repo(
        &fresh_dir("repo"),
        "stopped",
        &names(variants),
        "import time\ntime.sleep(1)\nX = 1\n",
    );
    let nodes: Vec<Node> = (0..4)
        .map(|_| {
            Node::new(&redis, &secret)
                .set("PREFLIGHT_REMOTE_LEASE", "2s")
                .set("PREFLIGHT_REMOTE_RETRY", "1s")
        })
        .collect();
    let children: Vec<Child> = nodes
        .iter()
        .map(|n| {
            let mut cmd = n.cmd(&["warmup", repo.to_str().unwrap(), "--json", "--jobs", "1"]);
            cmd.arg("--python")
                .arg(common::venv_python())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Stopped once the first verdict is published, while others are
    // being probed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while redis.keys(&format!("{OUTCOMES}*")).is_empty() {
        assert!(Instant::now() < deadline, "nothing was ever published");
        std::thread::sleep(Duration::from_millis(10));
    }
    redis.pause();
    let mut warned = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        warned += usize::from(stderr(&out).contains("answering from this node alone"));
    }
    redis.resume();
    assert!(warned > 0, "no node noticed the store stop");

    // Every node holds every verdict itself: the next warmup probes nothing
    // and asks no one.
    let stored = redis.keys(&format!("{OUTCOMES}*")).len();
    redis.pause();
    for node in &nodes {
        let (probed, cached) = counts(warmup(node, &repo));
        assert_eq!((probed, cached), (0, variants as u64));
    }
    redis.resume();

    // Every entry the store holds verifies: none is half-written.
    let out = nodes[0].cmd(&["fleet", "ls", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fleet: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fleet["refused"], 0, "{fleet}");
    let verdicts = fleet["classes"][0]["kernels"][0]["variants"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(verdicts, stored, "{fleet}");
}
