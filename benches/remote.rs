//! The fleet's remote outcome store, against a real `redis-server` started
//! here: a warm `select` with and without `PREFLIGHT_REMOTE` (target: no
//! dearer, since a local hit never asks the remote), interleaved, in wall
//! and CPU time; and N nodes (processes with caches of their own, one
//! machine) warming the same kernel at once, with the remote and without
//! (target: CPU time summed over every node and its probes close to 1/N,
//! since each variant is probed once fleet-wide; each node still measures
//! its own machine).
//!
//! `cargo bench --bench remote` (rounds: `PREFLIGHT_BENCH_ROUNDS`, default
//! 30; nodes: `PREFLIGHT_BENCH_NODES`, default 20; interpreter:
//! `PREFLIGHT_BENCH_PYTHON`, else `.venv/bin/python`). Needs
//! `redis-server`.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Quartiles, benchmarking, children_cpu, interleave, judged, preflight, rounds};

/// A `redis-server` of this bench, killed on drop.
struct Redis(Child, u16);

impl Redis {
    fn start(dir: &Path) -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (Debian: apt-get install -y redis-server)");
        let redis = Redis(child, port);
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis.flush().is_err() {
            assert!(Instant::now() < deadline, "redis-server did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.1)
    }

    fn flush(&self) -> redis::RedisResult<()> {
        let mut con = redis::Client::open(self.url())?
            .get_connection_with_timeout(Duration::from_millis(500))?;
        redis::cmd("FLUSHALL").exec(&mut con)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A kernel of 6 pure-Python variants that import in about 0.3 s each.
fn kernel(root: &Path) -> PathBuf {
    let repo = root.join("bench-kernel");
    let arch = std::env::consts::ARCH;
    let mut names = vec!["torch-universal".to_string(), "torch-cpu".to_string()];
    names.extend((0..4).map(|minor| format!("torch2{minor}-cpu-{arch}-linux")));
    for (i, v) in names.iter().enumerate() {
        let dir = repo.join("build").join(v);
        std::fs::create_dir_all(&dir).expect("variant dir");
        std::fs::write(
            dir.join("__init__.py"),
            "import time\ntime.sleep(0.3)\nX = 1\n",
        )
        .expect("init");
        let metadata = format!(
            r#"{{"name":"bench-kernel","id":"_bench_kernel_{i}","version":1,"license":"MIT","python-depends":[],"backend":{{"type":"cpu"}}}}"#
        );
        std::fs::write(dir.join("metadata.json"), metadata).expect("metadata");
    }
    repo
}

/// `preflight ARGS REPO --python P` with `cache`, and the remote `url`
/// when given.
fn node(args: &[&str], repo: &Path, cache: &Path, url: Option<&str>, secret: &Path) -> Command {
    let mut c = Command::new(preflight());
    c.args(args)
        .arg(repo)
        .arg("--python")
        .arg(support::python())
        .env("PREFLIGHT_CACHE", cache)
        .env("PREFLIGHT_REMOTE_SECRET_FILE", secret)
        .env_remove("PREFLIGHT_REMOTE")
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(url) = url {
        c.env("PREFLIGHT_REMOTE", url);
    }
    c
}

/// `n` nodes warming `repo` up at once, each with a fresh cache: the CPU
/// time summed over them and their probes, and the wall time.
fn fleet(n: usize, repo: &Path, dir: &Path, url: Option<&str>, secret: &Path) -> (f64, f64) {
    let before = children_cpu();
    let start = Instant::now();
    let children: Vec<Child> = (0..n)
        .map(|i| {
            let cache = dir.join(format!("node-{i}"));
            node(&["warmup"], repo, &cache, url, secret)
                .spawn()
                .expect("start a node")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait for a node").success());
    }
    let wall = start.elapsed().as_secs_f64();
    (children_cpu().saturating_sub(before).as_secs_f64(), wall)
}

fn main() {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let root = scratch.path();
    let redis = Redis::start(root);
    let url = redis.url();
    let secret = root.join("secret");
    std::fs::write(&secret, "the bench's fleet secret\n").expect("secret");
    let repo = kernel(root);
    let rounds = rounds(30);
    let nodes = match benchmarking() {
        true => std::env::var("PREFLIGHT_BENCH_NODES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20),
        false => 2,
    };

    println!("warm select, {rounds} rounds (ms)");
    let warm = root.join("warm");
    let warmed = node(&["warmup"], &repo, &warm, Some(&url), &secret)
        .status()
        .expect("warm up");
    assert!(warmed.success());
    let alone = || node(&["select"], &repo, &warm, None, &secret);
    let remote = || node(&["select"], &repo, &warm, Some(&url), &secret);
    let samples = interleave(&[&alone, &remote], rounds);
    println!("{:<28} {:>12} {:>12}", "", "wall median", "CPU median");
    let mut cpu = Vec::new();
    for (label, (mut wall, mut used)) in ["without remote", "with remote"].into_iter().zip(samples)
    {
        let (wall, used) = (Quartiles::of(&mut wall), Quartiles::of(&mut used));
        println!("{label:<28} {:>12.2} {:>12.2}", wall.median, used.median);
        cpu.push(used.median);
    }
    // Within noise: a quarter of a millisecond, or 10 %.
    let met = cpu[1] <= cpu[0] * 1.1 + 0.25;
    println!(
        "target: a warm select with the remote costs no more CPU: {}",
        judged(met)
    );

    println!("\n{nodes} nodes warming up together, each with a fresh cache");
    let (cpu_alone, wall_alone) = fleet(nodes, &repo, &root.join("alone"), None, &secret);
    redis.flush().expect("FLUSHALL");
    let (cpu_remote, wall_remote) = fleet(nodes, &repo, &root.join("remote"), Some(&url), &secret);
    println!("{:<28} {:>12} {:>12}", "", "CPU s (sum)", "wall s");
    println!(
        "{:<28} {cpu_alone:>12.1} {wall_alone:>12.1}",
        "without remote"
    );
    println!(
        "{:<28} {cpu_remote:>12.1} {wall_remote:>12.1}",
        "with remote"
    );
    let ratio = cpu_remote / cpu_alone;
    println!(
        "CPU with / without: {ratio:.3} (1/{nodes} = {:.3}; the rest is each node measuring its \
         own machine)",
        1.0 / nodes as f64
    );
    println!(
        "target: at most 3/{nodes} of the CPU time: {}",
        judged(ratio <= 3.0 / nodes as f64)
    );
}
