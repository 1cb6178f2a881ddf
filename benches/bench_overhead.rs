//! What `preflight bench`'s harness costs per sample, against a bare loop
//! of the same calls in the same child.
//!
//! One bench child per workload (an empty call, and a ~0.2 ms busy loop),
//! each a real sandboxed python child in its bench mode. Round by round,
//! alternating: a harness round (K samples, each timed by the child's
//! clock and sent as a `sample` event, the round trip through the FIFOs
//! included), and a bare round (the same K calls in a plain `for` loop,
//! timed as one by the same child). Per workload it prints, from the least
//! disturbed round (other load on the machine only adds), the bare call and
//! the mean sample the harness reports, both in the child's CPU time (which
//! preemption by other load cannot lengthen); their difference, the timer's
//! own cost in a sample (its bias); and the wall time per sample the parent
//! sees, whose excess over the bare call is what the harness costs per
//! sample (the timer, the event, the round trip).
//!
//! The same for the cuda executor's bench child, on a native target of one
//! launch: its samples are CUDA events around the launch, its bare round
//! the same launches in a loop between one pair of events. Without a GPU
//! it runs against the stand-in libcuda of the tests (built with `cc`;
//! its "device" is a timeline, so the reported and bare times are the
//! stand-in's, and what is measured is the host side: the wall time per
//! sample over the bare launch); `PREFLIGHT_BENCH_LIBCUDA=libcuda.so.1`
//! times a real driver instead.
//!
//! `cargo bench --bench bench_overhead` (rounds: `PREFLIGHT_BENCH_ROUNDS`,
//! default 40; interpreter: `PREFLIGHT_BENCH_PYTHON`, else `.venv/bin/python`,
//! else `python3` on PATH).

mod support;

use kernel_preflight::probe::cuda::{
    Arg, CudaExecutor, ElemType, Launch, ModuleKind, ModuleSpec, Tolerance,
};
use kernel_preflight::probe::{
    BenchChild, BenchExecutor, BenchRole, BenchSpec, Job, PythonExecutor, SmokeSource, Subject,
};
use kernel_preflight::sandbox::Cancel;
use kernel_preflight::variant::VariantName;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{python, rounds};

/// Samples per round.
const K: u32 = 200;

/// A variant with an empty call and a short busy loop, and a smoke file
/// that calls `name`.
fn fixture(root: &Path, name: &str) -> (PathBuf, PathBuf) {
    let dir = root.join("build/torch-universal");
    std::fs::create_dir_all(&dir).expect("variant dir");
    std::fs::write(
        dir.join("metadata.json"),
        r#"{"name":"overhead","id":"_overhead_0","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}"#,
    )
    .expect("metadata");
    std::fs::write(
        dir.join("__init__.py"),
        "def noop():\n    return 0\n\n\
         def spin():\n    x = 0\n    for i in range(4000):\n        x ^= i\n    return x\n",
    )
    .expect("init");
    let smoke = root.join(format!("smoke_{name}.py"));
    std::fs::write(
        &smoke,
        format!("def smoke(kernel, device):\n    kernel.{name}()\n"),
    )
    .expect("smoke");
    (dir, smoke)
}

/// The least disturbed round: the overhead is a property of the code
/// path, and other load on the machine only ever adds to it.
fn least(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn main() {
    let rounds = rounds(40);
    let executor = PythonExecutor::new(python());
    let tmp = tempfile::tempdir().expect("tempdir");
    println!(
        "harness overhead per sample ({rounds} rounds of {K} samples; per round the mean \
         sample and the mean bare call; the least disturbed round; microseconds)"
    );
    println!(
        "{:<10} {:>12} {:>16} {:>12} {:>16} {:>18}",
        "workload", "bare call", "reported sample", "bias", "wall per sample", "overhead/sample"
    );
    for name in ["noop", "spin"] {
        let (variant, smoke) = fixture(tmp.path(), name);
        let job = Job {
            smoke: SmokeSource::File(smoke),
            ..Job::new(Subject::Variant {
                name: VariantName::parse("torch-universal").expect("name"),
                path: variant,
            })
        };
        let spec = BenchSpec {
            role: BenchRole::Variant,
            workload: None,
            flush_l2: true,
        };
        let child = executor
            .bench(&job, &spec, &Cancel::new())
            .expect("bench child");
        measure(name, child, rounds);
    }
    native(tmp.path(), rounds);
}

/// Alternate harness and bare rounds on a ready `child`, then print its row.
fn measure(name: &str, mut child: BenchChild, rounds: usize) {
    child
        .ready(Duration::from_secs(60))
        .expect("the child warms up");
    let within = Duration::from_secs(60);
    let (mut bare, mut reported, mut wall) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds as u32 {
        let start = Instant::now();
        let samples = child.round(2 * round, K, within).expect("a harness round");
        wall.push(start.elapsed().as_secs_f64() * 1e6 / f64::from(K));
        // The mean CPU time, like the bare round's: one statistic for
        // both, which preemption by other load cannot lengthen (device
        // events, for the cuda child, which has no CPU time).
        let cpu = |s: &kernel_preflight::protocol::Sample| s.cpu_ms.unwrap_or(s.ms) * 1e3;
        reported.push(samples.iter().map(cpu).sum::<f64>() / samples.len() as f64);
        let plain = child
            .bare_round(2 * round + 1, K, within)
            .expect("a bare round");
        bare.push(cpu(&plain));
    }
    let evidence = child.finish(within).expect("the child ends");
    assert!(
        kernel_preflight::classify::classify(&evidence)
            .kind
            .passed(),
        "{evidence:?}"
    );
    let (bare, reported, wall) = (least(&bare), least(&reported), least(&wall));
    println!(
        "{name:<10} {bare:>12.2} {reported:>16.2} {:>12.2} {wall:>16.2} {:>18.2}",
        reported - bare,
        wall - bare
    );
}

/// The cuda bench child on a native target of one `preflight_axpy_*`
/// launch: an empty kernel and a 200 µs one (the stand-in's duration), or
/// the same launch on a real driver.
fn native(root: &Path, rounds: usize) {
    let real = std::env::var_os("PREFLIGHT_BENCH_LIBCUDA").map(PathBuf::from);
    let libcuda = real.clone().unwrap_or_else(|| stand_in(root));
    let module = root.join("axpy.cubin");
    std::fs::write(&module, b"the stand-in driver loads anything").expect("module");
    for (name, us) in [("cuda:noop", 0), ("cuda:spin", 200)] {
        let function = format!("preflight_axpy_{}", name.trim_start_matches("cuda:"));
        let job = Job::new(Subject::Module {
            spec: ModuleSpec {
                path: module.clone(),
                kind: ModuleKind::Cubin,
                nvrtc_options: Vec::new(),
                target: None,
            },
            launches: vec![axpy(&function)],
        });
        let mut executor = CudaExecutor::new(support::preflight());
        executor.libcuda = Some(libcuda.clone());
        executor.env.push((
            format!("FAKE_CUDA_SPIN_US_{function}").into(),
            us.to_string().into(),
        ));
        let spec = BenchSpec {
            role: BenchRole::Variant,
            workload: None,
            flush_l2: true,
        };
        let child = executor
            .start_bench(&[&job], "launches", &spec, &Cancel::new())
            .expect("cuda bench child");
        measure(name, child, rounds);
        if real.is_some() {
            // A real driver runs the real kernel: once is enough.
            break;
        }
    }
}

/// y = 2 x + y over 4 elements, verified.
fn axpy(function: &str) -> Launch {
    let buffer = |init: Vec<f64>, expect: Option<Vec<f64>>| Arg::Buffer {
        ty: ElemType::F32,
        init,
        expect,
        tolerance: Tolerance::default_for(ElemType::F32),
    };
    Launch {
        function: function.into(),
        grid: [1, 1, 1],
        block: [4, 1, 1],
        shared_mem_bytes: 0,
        args: vec![
            Arg::Scalar {
                ty: ElemType::F32,
                value: 2.0,
            },
            buffer(vec![0.0, 1.0, 2.0, 3.0], None),
            buffer(vec![1.0; 4], Some(vec![1.0, 3.0, 5.0, 7.0])),
            Arg::Scalar {
                ty: ElemType::U32,
                value: 4.0,
            },
        ],
        warmup: 3,
        iterations: 10,
    }
}

/// The tests' stand-in libcuda, built into `dir` with `cc`.
fn stand_in(dir: &Path) -> PathBuf {
    let lib = dir.join("libcuda.so.1");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native/fake_libcuda.c");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so", "-o"])
        .arg(&lib)
        .arg(src)
        .status()
        .expect("a C compiler (cc) for the stand-in libcuda");
    assert!(status.success(), "cc fake_libcuda.c");
    lib
}
