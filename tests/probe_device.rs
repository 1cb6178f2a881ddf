//! A variant built for a device passes only where its device is usable
//! from the child: torch sees it, and Triton (when the kernel imports it)
//! has an active driver. This machine has no GPU and the test environment
//! no torch, so torch and Triton are stand-ins on the child's PYTHONPATH
//! (`probe_fixtures::fakes`) that answer as a CPU-only build, a build that
//! sees one GPU, and a Triton without an active driver would.

mod probe_fixtures;

use kernel_preflight::classify::{Depth, Outcome, OutcomeKind, Phase};
use kernel_preflight::probe::{Placement, PythonExecutor, SmokeSource};
use probe_fixtures::{Repo, Site, bare_python, fakes, job, probe_job, python, quick_limits};
use std::path::Path;

const ADD: &str = "def add(a, b):\n    return [x + y for x, y in zip(a, b)]\n";

/// Probe `variant` on its own device (not the cpu, as other tests do).
fn on_its_device(executor: &PythonExecutor, variant: &Path, smoke: SmokeSource) -> Outcome {
    let mut job = job(variant, smoke, quick_limits());
    job.device = Placement::Default;
    probe_job(executor, &job).1
}

#[test]
fn without_torch_a_cuda_variant_is_no_device_not_a_load_only_pass() {
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", ADD);
    for python in [python(), bare_python()] {
        let outcome = on_its_device(&PythonExecutor::new(&python), &v, SmokeSource::LoadOnly);
        assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
        assert_eq!(outcome.phase, Phase::Load);
        assert!(
            outcome
                .message
                .contains("torch is not installed here (nor triton)"),
            "{}",
            outcome.message
        );
        assert!(
            outcome.hint.contains("CUDA build of torch"),
            "{}",
            outcome.hint
        );
    }
}

#[test]
fn a_cpu_only_torch_is_no_device() {
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", ADD);
    let site = Site::new();
    fakes::torch(&site, None, 0);
    let outcome = on_its_device(&site.executor(&python()), &v, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert!(
        outcome
            .message
            .contains("torch 2.8.0+fake sees no cuda device: torch.cuda.is_available() is False (a CPU-only build"),
        "{}",
        outcome.message
    );
}

#[test]
fn a_device_torch_sees_is_depth_device_and_a_smoke_runs_on_it() {
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", ADD);
    let site = Site::new();
    fakes::torch(&site, Some("12.8"), 1);
    let executor = site.executor(&python());
    let outcome = on_its_device(&executor, &v, SmokeSource::LoadOnly);
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Device)),
        "{outcome:?}"
    );
    assert!(
        outcome
            .message
            .starts_with("imported; the device is usable (no smoke workload) on cuda"),
        "{}",
        outcome.message
    );
    let smoke = SmokeSource::File(repo.file(
        "smoke.py",
        "def smoke(kernel, device):\n    assert device == 'cuda', device\n    return kernel.add([1], [2]), [3]\n",
    ));
    let outcome = on_its_device(&executor, &v, smoke);
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Verified)),
        "{outcome:?}"
    );
}

#[test]
fn a_device_beyond_those_torch_sees_is_no_device() {
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", ADD);
    let site = Site::new();
    fakes::torch(&site, Some("12.8"), 1);
    let mut job = job(&v, SmokeSource::LoadOnly, quick_limits());
    job.device = Placement::Ordinal(1);
    let (_, outcome) = probe_job(&site.executor(&python()), &job);
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert!(
        outcome
            .message
            .contains("sees 1 cuda device(s), not device 1"),
        "{}",
        outcome.message
    );
}

/// A torch that sees two GPUs, whose events read how much work the device
/// of the stream they are recorded on has run (device 0 is current).
const TWO_DEVICES: &str = r#"_busy = {0: 0.0, 1: 0.0}

def is_available():
    return True

def device_count():
    return 2

def synchronize(device=None):
    pass

def get_device_capability(device=None):
    return (9, 0)

def _work(index, ms):
    _busy[index] += ms

class _Stream:
    def __init__(self, index):
        self.device_index = index

def current_stream(device=None):
    index = getattr(device, "index", device)
    return _Stream(0 if index is None else index)

class Event:
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self, stream=None):
        self.at = _busy[(stream or current_stream()).device_index]

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at
"#;

#[test]
fn a_smoke_on_cuda_1_is_timed_on_cuda_1() {
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", ADD);
    let site = Site::new();
    fakes::torch(&site, Some("12.8"), 2);
    site.file("torch/cuda.py", TWO_DEVICES).file(
        "torch/__init__.py",
        r#"from types import SimpleNamespace
__version__ = '2.8.0+fake'
from . import backends, cuda, version
_C = SimpleNamespace()


class device:
    def __init__(self, spec):
        self.type, _, index = str(spec).partition(':')
        self.index = int(index) if index else None
"#,
    );
    // 7 ms of work on the device the smoke was given, none on device 0.
    let smoke = SmokeSource::File(repo.file(
        "smoke.py",
        r#"def smoke(kernel, device):
    import torch
    torch.cuda._work(int(device.split(':')[1]), 7.0)
    return kernel.add([1], [2]), [3]
"#,
    ));
    let mut job = job(&v, smoke, quick_limits());
    job.device = Placement::Ordinal(1);
    let (run, outcome) = probe_job(&site.executor(&python()), &job);
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Verified)),
        "{outcome:?}"
    );
    assert_eq!(run.evidence.timings().smoke_ms, Some(7.0));
}

#[test]
fn a_triton_kernel_needs_an_active_triton_driver() {
    // torch sees a GPU, Triton finds no active driver: the kernel cannot
    // launch, whatever torch says.
    let repo = Repo::new();
    let v = repo.variant("torch-cuda", &format!("import triton\n{ADD}"));
    let site = Site::new();
    fakes::torch(&site, Some("12.8"), 1);
    fakes::triton(&site, "3.4.0");
    let outcome = on_its_device(&site.executor(&python()), &v, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert!(
        outcome.message.contains(
            "triton 3.4.0 has no usable driver: RuntimeError: 0 active drivers ([]). There should only be one."
        ),
        "{}",
        outcome.message
    );
}

#[test]
fn other_devices_are_checked_through_their_own_torch_backend() {
    let site = Site::new();
    fakes::torch(&site, None, 0);
    let executor = site.executor(&bare_python());
    let repo = Repo::new();
    let xpu = repo.variant("torch-xpu", ADD);
    let outcome = on_its_device(&executor, &xpu, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert!(
        outcome.message.contains("has no torch.xpu"),
        "{}",
        outcome.message
    );
    assert!(
        outcome.hint.contains("no usable xpu device"),
        "{}",
        outcome.hint
    );
    let metal = repo.variant("torch-metal", ADD);
    let outcome = on_its_device(&executor, &metal, SmokeSource::LoadOnly);
    assert_eq!(outcome.kind, OutcomeKind::NoDevice, "{outcome:?}");
    assert!(
        outcome
            .message
            .contains("torch.backends.mps.is_available() is False"),
        "{}",
        outcome.message
    );
}

#[test]
fn universal_and_cpu_variants_and_a_cpu_placement_need_no_device() {
    let repo = Repo::new();
    let executor = PythonExecutor::new(python());
    for name in ["torch-universal", "torch-cpu"] {
        let v = repo.variant(name, ADD);
        let outcome = on_its_device(&executor, &v, SmokeSource::LoadOnly);
        assert_eq!(
            (outcome.kind, outcome.depth),
            (OutcomeKind::Pass, Some(Depth::Load)),
            "{name}: {outcome:?}"
        );
    }
    // A cuda variant asked to run on the cpu: its device is not needed.
    let v = repo.variant("torch-cuda", ADD);
    let (_, outcome) = probe_job(&executor, &job(&v, SmokeSource::LoadOnly, quick_limits()));
    assert_eq!(
        (outcome.kind, outcome.depth),
        (OutcomeKind::Pass, Some(Depth::Load)),
        "{outcome:?}"
    );
}

/// The bench child's NVML handle where torch gives no PCI address: NVML
/// numbers the machine's GPUs and ignores `CUDA_VISIBLE_DEVICES`, CUDA
/// numbers that list's entries; an entry NVML cannot take finds nothing.
/// And the compute mode it reads (an NVML without the entry point: not
/// exclusive).
#[test]
fn nvmls_device_for_a_cuda_ordinal_goes_through_cuda_visible_devices() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in kernel_preflight::probe::DRIVER_FILES {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let script = r#"
import ctypes, os
import preflight_bench as bench

class Lib:
    def __init__(self):
        self.asked = []

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):
        self.asked.append(index)
        return 0

    def nvmlDeviceGetHandleByUUID(self, uuid, handle):
        self.asked.append(uuid.decode())
        return 0

# The compute mode through the same library: 3 is EXCLUSIVE_PROCESS.
class Modes(Lib):
    def __init__(self, mode):
        self.mode = mode

    def nvmlDeviceGetComputeMode(self, handle, mode):
        mode._obj.value = self.mode
        return 0

modes = [bench.Nvml(Modes(m), None, None).exclusive() for m in (0, 2, 3)]
modes.append(bench.Nvml(Lib(), None, None).exclusive())
print(modes)
out = []
for visible, ordinal in [(None, 1), ("3,1", 0), ("3,1", 1), ("GPU-abc,2", 0), ("MIG-x", 0), ("2", 1)]:
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    lib = Lib()
    out.append("%d:%s" % (bench.nvml_handle(lib, ordinal, ctypes.c_void_p()), lib.asked))
print(" ".join(out))
"#;
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env("PYTHONPATH", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[False, False, True, False]\n0:[1] 0:[3] 0:[1] 0:['GPU-abc'] -1:[] -1:[]"
    );
}
