//! `resolve` agrees with the hub loader's own resolver, release by release
//! (`scripts/kernels-releases.txt`, each installed by `scripts/setup-env.sh`
//! under `.kernels-releases/<version>`): same names parsed, same decisions,
//! same reasons, same preference order, on a cross product of legacy names ×
//! systems and on a few hundred random systems with legacy, dotted, MLX and
//! SDK names.

mod common;

use kernel_preflight::declared::{Rejection, System, resolve};
use kernel_preflight::variant::VariantName;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const VARIANTS: &[&str] = &[
    "torch29-cxx11-cu128-x86_64-linux",
    "torch29-cxx98-cu128-x86_64-linux",
    "torch29-cu126-x86_64-linux",
    "torch29-cxx11-cu130-x86_64-linux",
    "torch29-cxx11-cu129-aarch64-linux",
    "torch28-cxx11-cu118-x86_64-linux",
    "torch28-cxx11-cu126-x86_64-linux",
    "torch210-cu130-x86_64-linux",
    "torch210-cu128-x86_64-linux",
    "torch-stable-abi28-cu128-x86_64-linux",
    "torch-stable-abi29-cu130-x86_64-linux",
    "torch-stable-abi29-cu126-x86_64-linux",
    "torch-stable-abi210-cu130-x86_64-linux",
    "torch-stable-abi29-cpu-x86_64-linux",
    "tvm-ffi01-cu128-x86_64-linux",
    "tvm-ffi01-cu130-x86_64-linux",
    "tvm-ffi02-cu128-x86_64-linux",
    "tvm-ffi01-cpu-x86_64-linux",
    "torch29-rocm63-x86_64-linux",
    "torch29-rocm64-x86_64-linux",
    "torch29-xpu20252-x86_64-linux",
    "torch29-xpu20251-x86_64-windows",
    "torch29-cann81-aarch64-linux",
    "torch29-metal-aarch64-darwin",
    "torch-stable-abi29-metal-aarch64-darwin",
    "torch29-cpu-x86_64-linux",
    "torch29-cpu-aarch64-darwin",
    "torch29-cxx11-cpu-x86_64-linux",
    "torch29-neuron-x86_64-linux",
    "torch29-tpu-x86_64-linux",
    "torch29-cu128-x86_64-windows",
    "torch-cpu",
    "torch-cuda",
    "torch-metal",
    "torch-neuron",
    "torch-rocm",
    "torch-tpu",
    "torch-xpu",
    "torch-npu",
    "torch-universal",
];

/// Names of the forms kernels 0.19 added, and legacy names whose reading
/// changed (`rocm714`).
const NEW_STYLE: &[&str] = &[
    "torch-2.10-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    "torch-2.10-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
    "torch-2.10-cxx11-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
    "torch-2.10-cxx98-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
    "torch-2.9-cuda-12.6-cpython-3.10-abi3-x86_64-linux",
    "torch-2.10-cuda-12.8-cpython-3.15-abi3t-x86_64-linux",
    "torch-2.10-cuda-12.8-cpython-3.15-abi3-x86_64-linux",
    "torch-2.10-cuda-13.0-cpython-3.9-abi3-aarch64-linux",
    "torch-stable-abi-2.9-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
    "torch-stable-abi-2.10-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
    "torch-stable-abi-2.9-cpu-cpython-3.9-abi3-x86_64-linux",
    "torch-stable-abi-2.9-cuda-12.8-cpython-3.16-abi3t-x86_64-linux",
    "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
    "tvm-ffi-0.1-cpu-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-rocm-6.4-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-rocm-6.3-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-rocm-7.14-cpython-3.9-abi3-x86_64-linux",
    "torch29-rocm714-x86_64-linux",
    "torch29-rocm72-x86_64-linux",
    "torch29-rocm70-x86_64-linux",
    "torch-2.9-xpu-2025.2-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-cann-8.1-cpython-3.9-abi3-aarch64-linux",
    "torch-2.9-metal-cpython-3.9-abi3-aarch64-darwin",
    "torch-2.9-cpu-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-neuron-cpython-3.9-abi3-x86_64-linux",
    "torch-2.9-cuda-12.8-cpython-3.9-abi3-x86_64-windows",
    "mlx-metal",
    "mlx-cpu",
    "mlx-universal",
    "torch-cann",
    "sdk",
    "sdk-cuda",
    "sdk-rocm",
    "sdk-cann",
    "sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
    "sdk-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
    "sdk-rocm-6.4-cpython-3.9-abi3-x86_64-linux",
    "sdk-cpython-3.9-abi3-x86_64-linux",
    "sdk-cpython-3.15-abi3t-x86_64-linux",
    "sdk-cpu-cpython-3.9-abi3-x86_64-linux",
];

/// (backend, version) pairs the systems take.
const BACKENDS: &[(&str, Option<&str>)] = &[
    ("cuda", Some("11.8")),
    ("cuda", Some("12.6")),
    ("cuda", Some("12.8")),
    ("cuda", Some("12.9")),
    ("cuda", Some("13.0")),
    ("rocm", Some("6.4")),
    ("rocm", Some("7.2")),
    ("rocm", Some("7.14")),
    ("xpu", Some("2025.2")),
    ("cann", Some("8.1")),
    ("metal", None),
    ("cpu", None),
    ("neuron", None),
    ("tpu", None),
];

const PLATFORMS: &[(&str, &str, Option<&str>)] = &[
    ("x86_64", "linux", None),
    ("aarch64", "linux", None),
    ("aarch64", "darwin", Some("15.5")),
    ("aarch64", "darwin", Some("26.0")),
    ("x86_64", "windows", None),
];

/// The releases CI installs, oldest first.
fn releases() -> Vec<String> {
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kernels-releases.txt");
    let text = std::fs::read_to_string(list).expect("read scripts/kernels-releases.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn release_dir(release: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".kernels-releases")
        .join(release);
    assert!(
        dir.join("kernels").is_dir(),
        "kernels {release} is not installed in {}: run scripts/setup-env.sh",
        dir.display()
    );
    dir
}

fn system(
    backend: usize,
    torch: Option<&str>,
    cxx11: Option<bool>,
    tvm_ffi: Option<&str>,
    platform: usize,
) -> Value {
    let (backend, version) = BACKENDS[backend];
    let (cpu, os, macos) = PLATFORMS[platform];
    json!({
        "backend": backend, "version": version, "cpu": cpu, "os": os,
        "torch": torch, "cxx11": cxx11, "tvm_ffi": tvm_ffi, "macos": macos,
        "python": "3.12", "free_threaded": false, "mlx": false,
    })
}

fn cross_product() -> Vec<Value> {
    let mut out = Vec::new();
    for backend in 0..BACKENDS.len() {
        for torch in [None, Some("2.8"), Some("2.9"), Some("2.10")] {
            for cxx11 in [None, Some(true), Some(false)] {
                for tvm_ffi in [None, Some("0.1")] {
                    for platform in 0..PLATFORMS.len() {
                        out.push(system(backend, torch, cxx11, tvm_ffi, platform));
                    }
                }
            }
        }
    }
    out
}

/// SplitMix64: the same random systems on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// `n` random systems, each with a random subset of `pool` in random order.
fn random_cases(n: usize, pool: &[&str], seed: u64) -> Vec<Value> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let mut s = system(
                rng.below(BACKENDS.len()),
                rng.pick(&[None, Some("2.8"), Some("2.9"), Some("2.10")]),
                rng.pick(&[None, Some(true), Some(false)]),
                rng.pick(&[None, Some("0.1")]),
                rng.below(PLATFORMS.len()),
            );
            s["python"] = json!(rng.pick(&["3.8", "3.9", "3.10", "3.12", "3.13", "3.15", "3.16"]));
            s["free_threaded"] = json!(rng.below(4) == 0);
            s["mlx"] = json!(rng.below(2) == 0);
            let mut names: Vec<&str> = pool.iter().copied().filter(|_| rng.below(2) == 0).collect();
            for i in (1..names.len()).rev() {
                names.swap(i, rng.below(i + 1));
            }
            json!({"variants": names, "system": s})
        })
        .collect()
}

/// The `--system` spec that describes a system completely, `kernels` included.
fn spec(s: &Value, release: &str) -> String {
    let text = |k: &str| s[k].as_str().map_or("none".to_string(), str::to_string);
    let mut spec = format!("backend={}", text("backend"));
    if let Some(v) = s["version"].as_str() {
        spec += &format!(",{}={v}", text("backend"));
    }
    let cxx11 = s["cxx11"]
        .as_bool()
        .map_or("none".to_string(), |b| b.to_string());
    spec += &format!(
        ",cpu={},os={},torch={},cxx11={cxx11},tvm-ffi={},macos={},python={},free-threaded={},mlx={},kernels={release}",
        text("cpu"),
        text("os"),
        text("torch"),
        text("tvm_ffi"),
        text("macos"),
        text("python"),
        s["free_threaded"],
        s["mlx"],
    );
    spec
}

/// The release's own traces for `cases`.
fn oracle(release: &str, cases: &[Value]) -> Vec<Value> {
    let mut child = Command::new(common::venv_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/hub_resolve.py"
        ))
        .env("PYTHONPATH", release_dir(release))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    let input = serde_json::to_vec(cases).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "oracle failed for kernels {release}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["release"], release,
        "the oracle imported another kernels"
    );
    doc["traces"].as_array().unwrap().clone()
}

/// Our trace in the oracle's shape: the names the release parses, in
/// order, and those it does not (which must come last).
fn ours(names: &[VariantName], s: &Value, release: &str) -> Value {
    let system = System::bare_host()
        .with_overrides(&spec(s, release))
        .unwrap();
    assert_eq!(system.rules().release.tested(), release);
    let decisions = resolve(names, &system);
    let parsed = decisions
        .iter()
        .take_while(|d| !matches!(d.rejection, Some(Rejection::NotParsed { .. })));
    let trace: Vec<Value> = parsed
        .map(|d| json!({"variant": d.variant.to_string(), "accepted": d.accepted(), "reason": d.rejection.as_ref().map(ToString::to_string)}))
        .collect();
    let mut unparsed: Vec<String> = decisions[trace.len()..]
        .iter()
        .map(|d| d.variant.to_string())
        .collect();
    unparsed.sort();
    json!({"trace": trace, "unparsed": unparsed})
}

/// Compare every case with the release's own answer; the number that differ.
fn compare(release: &str, cases: &[Value]) -> usize {
    let expected = oracle(release, cases);
    let mut mismatches = 0;
    for (case, expected) in cases.iter().zip(&expected) {
        let names: Vec<VariantName> = case["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| VariantName::parse(v.as_str().unwrap()).unwrap())
            .collect();
        let mut expected = expected.clone();
        let mut unparsed: Vec<String> =
            serde_json::from_value(expected["unparsed"].take()).unwrap();
        unparsed.sort();
        expected["unparsed"] = json!(unparsed);
        let got = ours(&names, &case["system"], release);
        if got != expected {
            mismatches += 1;
            if mismatches <= 3 {
                eprintln!(
                    "kernels {release}, system {}:\n ours: {}\n hub:  {}",
                    case["system"],
                    serde_json::to_string(&got).unwrap(),
                    serde_json::to_string(&expected).unwrap()
                );
            }
        }
    }
    mismatches
}

#[test]
fn library_agrees_with_each_release_on_the_cross_product() {
    let systems = cross_product();
    // Every legacy name together, forwards and reversed: reversed input
    // order checks that ties are broken as the hub's stable sort breaks them.
    let reversed: Vec<&str> = VARIANTS.iter().rev().copied().collect();
    let cases: Vec<Value> = systems
        .iter()
        .flat_map(|s| {
            [
                json!({"variants": VARIANTS, "system": s}),
                json!({"variants": reversed, "system": s}),
            ]
        })
        .collect();
    assert!(cases.len() > 2000);
    for release in releases() {
        let mismatches = compare(&release, &cases);
        assert_eq!(
            mismatches,
            0,
            "kernels {release}: {mismatches} of {} cases differ",
            cases.len()
        );
    }
}

#[test]
fn library_agrees_with_each_release_on_random_systems() {
    let legacy_and_new: Vec<&str> = VARIANTS.iter().chain(NEW_STYLE).copied().collect();
    for release in releases() {
        for (pool, seed) in [(VARIANTS, 17), (&legacy_and_new[..], 19)] {
            let cases = random_cases(300, pool, seed);
            let mismatches = compare(&release, &cases);
            assert_eq!(
                mismatches,
                0,
                "kernels {release}: {mismatches} of {} random cases differ",
                cases.len()
            );
        }
    }
}

#[test]
fn command_line_agrees_with_the_newest_release() {
    // The command line contract, on a sample of random systems (one process each).
    let release = releases().pop().unwrap();
    let pool: Vec<&str> = VARIANTS.iter().chain(NEW_STYLE).copied().collect();
    let cases: Vec<Value> = random_cases(12, &pool, 23);
    let expected = oracle(&release, &cases);
    for (case, expected) in cases.iter().zip(&expected) {
        let names: Vec<&str> = case["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let out = common::preflight(&[
            "resolve",
            "--variants",
            &names.join(","),
            "--system",
            &spec(&case["system"], &release),
            "--json",
        ]);
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(doc["rules"]["release"], release.as_str());
        let got: Vec<Value> = doc["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| json!({"variant": d["variant"], "accepted": d["accepted"], "reason": d["reason"]}))
            .collect();
        assert_eq!(
            &Value::Array(got),
            &expected["trace"],
            "system {}",
            case["system"]
        );
        let any = expected["trace"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["accepted"] == true);
        assert_eq!(
            out.status.code(),
            Some(if any { 0 } else { 1 }),
            "exit code for {}",
            case["system"]
        );
    }
}
