//! The fleet's remote store when Redis misbehaves in the middle of a
//! warmup, against real `redis-server` processes: busy for a moment
//! (`DEBUG SLEEP`, `CLIENT PAUSE`), killed and started again, guarded by a
//! password or an ACL user, a Redis Cluster; and how often nodes waiting
//! for another node's verdict ask for it.

mod common;

use common::node::{Node, OUTCOMES, answered, cpu_names, secret_file, warmed};
use common::redis_server::RedisServer;
use common::{fresh_dir, kernel_repo, stderr};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A kernel of `n` variants that each take `secs` to import.
fn slow_repo(n: usize, secs: f64) -> PathBuf {
    kernel_repo(
        &fresh_dir("repo"),
        "faults",
        &cpu_names(n),
        &format!("import time\ntime.sleep({secs})\nX = 1\n"),
    )
}

/// Wait until the store holds a verdict: the fleet is mid-warmup.
fn first_published(redis: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while redis.keys(&format!("{OUTCOMES}*")).is_empty() {
        assert!(Instant::now() < deadline, "nothing was ever published");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `nodes` warming up `repo` one variant at a time, started together.
fn started(nodes: &[Node], repo: &Path) -> Vec<Child> {
    nodes
        .iter()
        .map(|n| n.warmup(repo, &["--jobs", "1"]))
        .collect()
}

/// Every node's warmup finished, every variant passed, none answered
/// alone: the probes of the whole fleet.
fn probes_of(children: Vec<Child>, what: &str) -> u64 {
    children
        .into_iter()
        .map(|child| {
            let (probed, _, err) = warmed(child);
            assert!(
                !err.contains("answering from this node alone"),
                "{what}: {err}"
            );
            probed
        })
        .sum()
}

#[test]
fn a_store_busy_for_a_moment_mid_warmup_is_waited_for_not_given_up() {
    let variants = 4;
    let repo = slow_repo(variants, 1.0);
    let secret = secret_file();
    // Each blocks every client for 1.5 s, six times the command timeout.
    let stalls: [(&str, &[&str]); 2] = [
        ("DEBUG SLEEP", &["DEBUG", "SLEEP", "1.5"]),
        ("CLIENT PAUSE", &["CLIENT", "PAUSE", "1500", "ALL"]),
    ];
    for (what, stall) in stalls {
        let redis = RedisServer::start_with(&["--enable-debug-command", "local"]);
        let nodes: Vec<Node> = (0..4).map(|_| Node::new(&redis, &secret)).collect();
        let children = started(&nodes, &repo);
        first_published(&redis);
        let mut cmd = redis::cmd(stall[0]);
        cmd.arg(&stall[1..]);
        let mut con = redis.connection();
        con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        cmd.exec(&mut con).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            probes_of(children, what),
            variants as u64,
            "{what}: each variant probed once, fleet-wide"
        );
        assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), variants);
        assert!(redis.keys("preflight:lease-v2:*").is_empty(), "{what}");
    }
}

#[test]
fn a_store_killed_and_started_again_mid_warmup_loses_no_verdict() {
    let variants = 4;
    let repo = slow_repo(variants, 1.0);
    let secret = secret_file();
    // Its append-only file keeps every write across the kill.
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let nodes: Vec<Node> = (0..4).map(|_| Node::new(&redis, &secret)).collect();
    let children = started(&nodes, &repo);
    first_published(&redis);
    redis.restart(Duration::from_millis(500));
    assert_eq!(
        probes_of(children, "killed and started again"),
        variants as u64
    );
    assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), variants);
    // Every node holds every verdict itself, and asks no one for it.
    redis.pause();
    for node in &nodes {
        let (probed, cached, _) = warmed(node.warmup(&repo, &[]));
        assert_eq!((probed, cached), (0, variants as u64));
    }
    redis.resume();
}

/// The commands the server has run since `CONFIG RESETSTAT` (a script's
/// own calls included).
fn commands(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut redis.connection())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed")
}

#[test]
fn nodes_waiting_for_a_verdict_ask_for_it_less_and_less_often() {
    let redis = RedisServer::start();
    let secret = secret_file();
    let repo = kernel_repo(
        &fresh_dir("repo"),
        "waited",
        &cpu_names(1),
        "import os, time\ntime.sleep(float(os.environ.get('SLOW', '0')))\nX = 1\n",
    );
    let holder = Node::new(&redis, &secret);
    let mut holding = holder
        .check_cmd(&repo)
        .env("SLOW", "10")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    redis.wait_for_a_lease(Duration::from_secs(30), "the holder");
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut redis.connection())
        .unwrap();
    let waiting = 6;
    let began = Instant::now();
    let waiters: Vec<Child> = (0..waiting)
        .map(|_| {
            Node::new(&redis, &secret)
                .check_cmd(&repo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in waiters {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let doc = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answered(&doc), ["remote"], "{}", stderr(&out));
    }
    let waited = began.elapsed().as_secs_f64();
    assert!(holding.wait().unwrap().success());
    // Asking every quarter second costs a waiting node 12 commands a second
    // (a lease attempt, a script of two calls, and a read); pauses that grow
    // to 2 s cost about a third of that. The holder's own few (publish,
    // release) are counted too.
    let rate = commands(&redis) as f64 / waiting as f64 / waited;
    assert!(
        rate < 6.0,
        "{rate:.1} commands a second per waiting node over {waited:.1} s"
    );
}

#[test]
fn a_store_behind_a_password_or_an_acl_user_is_shared() {
    let mut redis = RedisServer::start_with(&["--requirepass", "admin-pw"]);
    redis.auth = Some("default:admin-pw".into());
    // A user allowed only what a node does, and only on preflight's keys
    // (not even INFO).
    redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "node",
            "on",
            ">node-pw",
            "~preflight:*",
            "-@all",
            "+get",
            "+set",
            "+exists",
            "+eval",
            "+scan",
            "+ping",
        ])
        .exec(&mut redis.connection())
        .unwrap();
    let secret = secret_file();
    let repo = slow_repo(2, 0.0);
    let url = |auth: &str| format!("redis://{auth}@127.0.0.1:{}/0", redis.port);
    let (out, doc) = Node::new(&redis, &secret)
        .set("PREFLIGHT_REMOTE", url(":admin-pw"))
        .check(&repo);
    assert_eq!(answered(&doc), ["probed"; 2], "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(redis.keys(&format!("{OUTCOMES}*")).len(), 2);
    let (out, doc) = Node::new(&redis, &secret)
        .set("PREFLIGHT_REMOTE", url("node:node-pw"))
        .check(&repo);
    assert_eq!(answered(&doc), ["remote"; 2], "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    // A wrong password or a missing permission is never tried again: one
    // warning, at once, and the node answers alone.
    redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "reader",
            "on",
            ">reader-pw",
            "~preflight:*",
            "+get",
        ])
        .exec(&mut redis.connection())
        .unwrap();
    for (i, (auth, says)) in [
        ("node:wrong", "Password authentication failed"),
        ("reader:reader-pw", "NoPerm: this user has no permissions"),
    ]
    .into_iter()
    .enumerate()
    {
        // Variants no node has probed: the reader may read, not lease.
        let repo = kernel_repo(
            &fresh_dir("repo"),
            "denied",
            &cpu_names(2),
            &format!("X = {i}\n"),
        );
        let node = Node::new(&redis, &secret)
            .set("PREFLIGHT_REMOTE", url(auth))
            .set("PREFLIGHT_REMOTE_RETRY", "60s");
        let began = Instant::now();
        let (out, doc) = node.check(&repo);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{auth}: {err}");
        assert_eq!(answered(&doc), ["probed"; 2], "{auth}: {err}");
        assert_eq!(err.matches("remote store").count(), 1, "{auth}: {err}");
        assert!(err.contains(says), "{auth}: {err}");
        assert!(
            !err.contains("admin-pw") && !err.contains("reader-pw"),
            "{err}"
        );
        assert!(began.elapsed() < Duration::from_secs(30), "{auth}: retried");
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

#[test]
fn a_redis_cluster_is_refused_with_one_message() {
    let shards: Vec<RedisServer> = (0..3)
        .map(|_| {
            let bus = free_port().to_string();
            RedisServer::start_with(&["--cluster-enabled", "yes", "--cluster-port", &bus])
        })
        .collect();
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(shards.iter().map(|s| format!("127.0.0.1:{}", s.port)))
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli (Debian: redis-tools, with redis-server)");
    assert!(out.status.success(), "{}", common::stdout(&out));
    let deadline = Instant::now() + Duration::from_secs(30);
    for shard in &shards {
        loop {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut shard.connection())
                .unwrap();
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "the cluster never formed");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let secret = secret_file();
    let repo = slow_repo(2, 0.0);
    let began = Instant::now();
    let (out, doc) = Node::new(&shards[0], &secret).check(&repo);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(answered(&doc), ["probed"; 2], "{err}");
    assert_eq!(err.matches("remote store").count(), 1, "{err}");
    assert!(
        err.contains(
            "a Redis Cluster (it says cluster_enabled:1), which is not supported: point \
             PREFLIGHT_REMOTE at one Redis"
        ),
        "{err}"
    );
    assert!(began.elapsed() < Duration::from_secs(8), "retried");
    for shard in &shards {
        assert!(shard.keys("*").is_empty());
    }
}
