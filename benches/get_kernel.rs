//! What `KERNEL_PREFLIGHT=1` costs a user of `kernels`, side by side with
//! plain `kernels` (the release of the bench's interpreter: `.venv`'s 0.17.2
//! unless `PREFLIGHT_BENCH_PYTHON` names another) in the same run, interleaved:
//!
//! 1. a Python start-up (`python -c pass`) in an environment where
//!    kernel-preflight is installed and the variable is unset, against the
//!    same environment without the package's start-up hook (target: under
//!    1 ms more);
//! 2. a fresh process that imports `kernels` and calls `get_kernel` of a
//!    kernel whose outcomes are cached (warm), with the variable and
//!    without it (target: at most 2 ms more);
//! 3. `kernel_preflight.get_kernel` warm, against plain `kernels.get_kernel`;
//! 4. the same as 2 with an empty outcome cache each time (cold: the pick
//!    probed once).
//!
//! The environments are made here: two virtual environments of the test
//! environment's interpreter that see `.venv`'s packages (`kernels` 0.17.2,
//! no torch) and this checkout's `python/kernel_preflight`, installed as
//! the wheel installs it (its files compiled, a `RECORD` naming the binary
//! cargo built for this bench), one of them with `kernel_preflight.pth`. Offline, on a hub cache
//! made here.
//!
//! `cargo bench --bench get_kernel` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 40; interpreter: `PREFLIGHT_BENCH_PYTHON`, else
//! `.venv/bin/python`). Wall and CPU time (user + system of the process
//! and its children) are both shown; on a loaded machine the CPU time is
//! the steadier of the two.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{Quartiles, benchmarking, interleave, preflight, python, rounds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A virtual environment that sees `.venv`'s packages and this checkout's
/// Python package, with or without the start-up hook.
fn environment(dir: &Path, hook: bool) -> PathBuf {
    let base = python();
    let status = Command::new(&base)
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .expect("python -m venv");
    assert!(status.success(), "python -m venv {}", dir.display());
    let python = dir.join("bin/python");
    let site = |py: &Path| {
        let out = Command::new(py)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ])
            .output()
            .expect("purelib");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    };
    let ours = site(&python);
    let theirs = site(&base);
    std::fs::write(ours.join("deps.pth"), format!("{}\n", theirs.display())).expect("deps.pth");
    // The package as an installer leaves it: its files, compiled (a source
    // without bytecode would be compiled again at every start here, where
    // PYTHONDONTWRITEBYTECODE may be set).
    let package = ours.join("kernel_preflight");
    std::fs::create_dir_all(&package).expect("package");
    for entry in std::fs::read_dir(Path::new(ROOT).join("python/kernel_preflight")).expect("source")
    {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, package.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    let compiled = Command::new(&python)
        .args(["-m", "compileall", "-q"])
        .arg(&package)
        .status()
        .expect("compileall");
    assert!(compiled.success(), "compileall {}", package.display());
    let info = ours.join("kernel_preflight-0.0.0.dist-info");
    std::fs::create_dir_all(&info).expect("dist-info");
    std::fs::write(
        info.join("RECORD"),
        format!("{},,\n", preflight().display()),
    )
    .expect("RECORD");
    if hook {
        std::fs::copy(
            Path::new(ROOT).join("python/wheel-data/purelib/kernel_preflight.pth"),
            ours.join("kernel_preflight.pth"),
        )
        .expect("the start-up hook");
    }
    python
}

/// A hub cache holding one kernel whose two CPU variants both work.
fn hub_cache(root: &Path) -> PathBuf {
    let commit = "1".repeat(40);
    let folder = root.join("kernels--acme--relu");
    for (i, variant) in ["torch-cpu", "torch-universal"].iter().enumerate() {
        let dir = folder
            .join("snapshots")
            .join(&commit)
            .join("build")
            .join(variant);
        std::fs::create_dir_all(&dir).expect("variant");
        std::fs::write(
            dir.join("__init__.py"),
            "def relu(xs):\n    return [max(x, 0.0) for x in xs]\n",
        )
        .expect("init");
        std::fs::write(
            dir.join("metadata.json"),
            format!(
                r#"{{"name":"toy-relu","id":"_toy_relu_bench_{i}","version":1,"license":"MIT","python-depends":[],"backend":{{"type":"cpu"}}}}"#
            ),
        )
        .expect("metadata");
    }
    std::fs::create_dir_all(folder.join("refs")).expect("refs");
    std::fs::write(folder.join("refs/v1"), &commit).expect("ref");
    root.to_path_buf()
}

/// A fresh process's `import kernels` and `get_kernel`, each timed inside
/// the process (a start-up's own noise, hundreds of ms of imports here, is
/// kept out of the call's figure).
const LOAD: &str = "import time\n\
    t0 = time.perf_counter()\n\
    import kernels\n\
    t1 = time.perf_counter()\n\
    kernels.get_kernel('acme/relu', version=1)\n\
    t2 = time.perf_counter()\n\
    print(t1 - t0, t2 - t1)\n";

/// [`LOAD`] through the package's own `kernel_preflight.get_kernel` (with
/// the variable unset: the call verifies by itself).
const LOAD_OURS: &str = "import time\n\
    t0 = time.perf_counter()\n\
    import kernels, kernel_preflight\n\
    t1 = time.perf_counter()\n\
    kernel_preflight.get_kernel('acme/relu', version=1)\n\
    t2 = time.perf_counter()\n\
    print(t1 - t0, t2 - t1)\n";

/// The in-process times of `import kernels` and of the `get_kernel` call
/// of each run of `commands`, interleaved as [`interleave`] runs them.
fn inside(commands: &[&dyn Fn() -> Command], rounds: usize) -> Vec<(Vec<Duration>, Vec<Duration>)> {
    let mut samples = vec![(Vec::new(), Vec::new()); commands.len()];
    for round in 0..rounds {
        for i in 0..commands.len() {
            let at = (i + round) % commands.len();
            let out = commands[at]()
                .env_remove("LD_LIBRARY_PATH")
                .output()
                .expect("run");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let times: Vec<f64> = text
                .split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect();
            let [import, call] = times[..] else {
                panic!("the child printed {text:?}")
            };
            samples[at].0.push(Duration::from_secs_f64(import));
            samples[at].1.push(Duration::from_secs_f64(call));
        }
    }
    samples
}

fn command(python: &Path, code: &str, flag: bool, hub: &Path, outcomes: &Path) -> Command {
    let mut c = Command::new(python);
    c.args(["-c", code])
        .env("KERNELS_CACHE", hub)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HOME", hub.join("hf-home"))
        .env("PREFLIGHT_CACHE", outcomes)
        .env_remove("PREFLIGHT_BIN");
    if flag {
        c.env("KERNEL_PREFLIGHT", "1");
    } else {
        c.env_remove("KERNEL_PREFLIGHT");
    }
    c
}

/// Two cases' quartiles, each as a pair of measures (`what`), and the
/// difference of their medians.
fn report(
    title: &str,
    labels: &[&str],
    what: [&str; 2],
    samples: Vec<(Vec<Duration>, Vec<Duration>)>,
) {
    println!("\n{title}\n\n{}", support::header());
    let mut medians = Vec::new();
    for (label, (mut first, mut second)) in labels.iter().zip(samples) {
        let first = Quartiles::of(&mut first);
        let second = Quartiles::of(&mut second);
        println!("{}", first.row(&format!("{label} ({})", what[0])));
        println!("{}", second.row(&format!("{label} ({})", what[1])));
        medians.push((first.median, second.median));
    }
    if let [(a0, b0), (a1, b1)] = medians[..] {
        println!(
            "{:<52} {:>+8.2} ms {}, {:>+8.2} ms {}",
            "difference of the medians",
            a1 - a0,
            what[0],
            b1 - b0,
            what[1]
        );
    }
}

const WALL_CPU: [&str; 2] = ["wall", "cpu"];

fn main() {
    let dir = tempfile::tempdir().expect("scratch");
    let plain = environment(&dir.path().join("plain"), false);
    let hooked = environment(&dir.path().join("hooked"), true);
    let hub = hub_cache(&dir.path().join("hub"));
    let warm = dir.path().join("outcomes-warm");
    // One run fills the outcome cache (and the hub loader's own caches).
    let filled = command(&hooked, LOAD, true, &hub, &warm)
        .status()
        .expect("fill the cache");
    assert!(filled.success(), "the verified get_kernel failed");
    // A second run, once the files the first wrote are settled (2 s),
    // leaves the ticket that answers warm calls in-process.
    std::thread::sleep(Duration::from_millis(2100));
    let ticketed = command(&hooked, LOAD, true, &hub, &warm)
        .status()
        .expect("ticket");
    assert!(ticketed.success(), "the verified get_kernel failed");
    let rounds = rounds(40);
    println!(
        "get_kernel: {rounds} interleaved rounds{}",
        if benchmarking() {
            ""
        } else {
            " (a smoke run under cargo test: figures mean nothing)"
        }
    );

    let samples = interleave(
        &[&|| command(&plain, "pass", false, &hub, &warm), &|| {
            command(&hooked, "pass", false, &hub, &warm)
        }],
        rounds,
    );
    report(
        "python -c pass, KERNEL_PREFLIGHT unset (ms)",
        &[
            "without kernel-preflight's hook",
            "kernel-preflight installed",
        ],
        WALL_CPU,
        samples,
    );

    let samples = interleave(
        &[&|| command(&hooked, "pass", false, &hub, &warm), &|| {
            command(&hooked, "pass", true, &hub, &warm)
        }],
        rounds,
    );
    report(
        "python -c pass, kernel-preflight installed (ms)",
        &["KERNEL_PREFLIGHT unset", "KERNEL_PREFLIGHT=1"],
        WALL_CPU,
        samples,
    );

    let samples = inside(
        &[&|| command(&hooked, LOAD, false, &hub, &warm), &|| {
            command(&hooked, LOAD, true, &hub, &warm)
        }],
        rounds,
    );
    report(
        "a fresh process: import kernels, then get_kernel(...), outcomes cached (ms, timed inside the process)",
        &["plain kernels", "KERNEL_PREFLIGHT=1 (warm)"],
        ["import", "call"],
        samples,
    );
    let samples = interleave(
        &[&|| command(&hooked, LOAD, false, &hub, &warm), &|| {
            command(&hooked, LOAD, true, &hub, &warm)
        }],
        rounds,
    );
    report(
        "the same, whole processes (ms)",
        &["plain kernels", "KERNEL_PREFLIGHT=1 (warm)"],
        WALL_CPU,
        samples,
    );

    let samples = inside(
        &[&|| command(&hooked, LOAD, false, &hub, &warm), &|| {
            command(&hooked, LOAD_OURS, false, &hub, &warm)
        }],
        rounds,
    );
    report(
        "kernel_preflight.get_kernel(...) in a fresh process, outcomes cached (ms, timed inside the process)",
        &["plain kernels.get_kernel", "kernel_preflight.get_kernel"],
        ["import", "call"],
        samples,
    );

    let cold = |n: usize| dir.path().join(format!("outcomes-cold-{n}"));
    let counter = std::cell::Cell::new(0);
    let samples = inside(
        &[&|| command(&hooked, LOAD, false, &hub, &warm), &|| {
            counter.set(counter.get() + 1);
            command(&hooked, LOAD, true, &hub, &cold(counter.get()))
        }],
        rounds.div_ceil(4),
    );
    report(
        "the same with nothing cached: a new machine's first load (ms, timed inside the process)",
        &["plain kernels", "KERNEL_PREFLIGHT=1 (cold)"],
        ["import", "call"],
        samples,
    );
}
