"""Smoke workloads for preflight's python executor (loaded by the driver
from the sandbox directory): a `--smoke` file's `smoke(kernel, device)` or
the kernel repo's own benchmarks in the hub's convention, run once and
verified when a reference exists, timed with device events where torch
drives a GPU.

Works on Python 3.8+ without torch or numpy; uses them only when the kernel
or its workload already imported them.
"""

import importlib.util
import os
import sys
import time
import types

from preflight_compare import check_close

# Workload names ordered from small to large; unknown names rank in the middle.
SIZE_WORDS = ("tiny", "small", "base", "default", "medium", "large", "huge")


class SmokeError(Exception):
    """The smoke source itself is unusable (no smoke function, bad return value)."""


# The parent recognises the driver's own exceptions by this module name.
SmokeError.__module__ = "preflight"

# ---------------------------------------------------------------- timing


def stream_of(torch, device):
    """The stream the work on `device` runs on: the current stream of that
    device (`cuda:1`'s own, whichever device is current), where events
    that time it must be recorded."""
    return torch.cuda.current_stream(torch.device(device))


class Timer:
    """Device events when torch drives a GPU here, perf_counter_ns otherwise."""

    def __init__(self, device):
        self.events = None
        self.stream = None
        torch = sys.modules.get("torch")
        if torch is not None and device.startswith("cuda"):
            try:
                if torch.cuda.is_available():
                    self.stream = stream_of(torch, device)
                    self.events = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
            except Exception:
                self.events = None

    def __enter__(self):
        self.start = time.perf_counter_ns()
        if self.events:
            self.events[0].record(self.stream)
        return self

    def __exit__(self, *exc):
        if self.events:
            self.events[1].record(self.stream)
        self.host_ms = (time.perf_counter_ns() - self.start) / 1e6
        return False

    def ms(self):
        if self.events:
            self.events[1].synchronize()
            return float(self.events[0].elapsed_time(self.events[1]))
        return self.host_ms


def synchronize(device):
    torch = sys.modules.get("torch")
    if torch is None:
        return
    name = device.split(":")[0]
    if name == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif name == "xpu" and hasattr(torch, "xpu") and torch.xpu.is_available():
        torch.xpu.synchronize()
    elif name == "mps" and torch.backends.mps.is_available():
        torch.mps.synchronize()


def resolve_device(device):
    """`auto` (universal variants): the accelerator torch sees, else cpu."""
    if device != "auto":
        return device
    torch = sys.modules.get("torch")
    if torch is None:
        return "cpu"
    try:
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and xpu.is_available():
            return "xpu"
    except Exception:
        pass
    return "cpu"


# ---------------------------------------------------------------- smoke sources


def load_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SmokeError("cannot load %s as Python" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_smoke_file(chan, path, kernel, device):
    """`def smoke(kernel, device)` → None | (actual, expected) | dict."""
    smoke = smoke_function(path)
    with Timer(device) as timer:
        result = smoke(kernel, device)
        synchronize(device)
    smoke_ms = timer.ms()
    comparison = unpack(result)
    chan.timing("smoke", smoke_ms)
    if comparison is None:
        return "smoke"
    chan.enter("verify")
    check_close(*comparison)
    return "verified"


def smoke_function(path):
    """The `smoke(kernel, device)` of a smoke file."""
    module = load_file(path, "preflight_smoke")
    smoke = getattr(module, "smoke", None)
    if not callable(smoke):
        raise SmokeError("%s defines no function smoke(kernel, device)" % path)
    return smoke


def unpack(result):
    """A smoke's return value as (actual, expected, rtol, atol), or None
    when it returned nothing to verify."""
    if result is None:
        return None
    if isinstance(result, dict) and "actual" in result and "expected" in result:
        return result["actual"], result["expected"], result.get("rtol"), result.get("atol")
    if isinstance(result, tuple) and len(result) == 2:
        return result[0], result[1], None, None
    raise SmokeError(
        "smoke() returned %s; expected None, (actual, expected) or "
        '{"actual", "expected", "rtol", "atol"}' % type(result).__name__
    )


def benchmark_base():
    """`kernels.benchmark.Benchmark`, or a compatible stand-in when the
    `kernels` package is not installed in this environment."""
    if importlib.util.find_spec("kernels") is None:
        package = types.ModuleType("kernels")
        package.__path__ = []
        module = types.ModuleType("kernels.benchmark")

        class Benchmark:
            """Stand-in for kernels.benchmark.Benchmark (kernels not installed)."""

            seed = None
            device = "cpu"

            def __init__(self):
                self.kernel = None
                self.out = None

            def setup(self):
                pass

        Benchmark.__module__ = "kernels.benchmark"
        module.Benchmark = Benchmark
        package.benchmark = module
        sys.modules["kernels"] = package
        sys.modules["kernels.benchmark"] = module
    from kernels.benchmark import Benchmark

    return Benchmark


def smallest_workload(cls):
    """The workload to run once: named by size when it can tell, else the
    first defined."""
    names = []
    for klass in reversed(cls.__mro__):
        for attr in vars(klass):
            if attr.startswith("benchmark_") and callable(getattr(cls, attr)) and attr not in names:
                names.append(attr)
    workloads = [n[len("benchmark_"):] for n in names]

    def rank(workload):
        words = workload.lower().split("_")
        for i, word in enumerate(SIZE_WORDS):
            if word in words:
                return i
        return SIZE_WORDS.index("medium")

    return min(workloads, key=lambda w: (rank(w), workloads.index(w))) if workloads else None


def benchmark_classes(bench_dir, repo):
    """Every Benchmark subclass defined by a `benchmarks/benchmark*.py`
    script (loaded with the repo as working directory, as the hub does),
    scripts in name order, classes by name."""
    base = benchmark_base()
    scripts = sorted(
        os.path.join(bench_dir, f)
        for f in os.listdir(bench_dir)
        if f.startswith("benchmark") and f.endswith(".py")
    )
    found = []
    for index, script in enumerate(scripts):
        name = "preflight_benchmark_%d" % index
        here = os.getcwd()
        os.chdir(repo)
        try:
            module = load_file(script, name)
        finally:
            os.chdir(here)
        for attr in sorted(vars(module)):
            obj = getattr(module, attr)
            if isinstance(obj, type) and issubclass(obj, base) and obj is not base and obj.__module__ == name:
                found.append(obj)
    return found


def prepare(cls, workload, kernel, device):
    """A fresh instance for one workload, as the hub's runner makes it:
    kernel and device set, seeded, then `setup_<workload>()` or `setup()`."""
    bench = cls()
    bench.kernel = kernel
    bench.device = device
    if bench.seed is not None:
        import random

        random.seed(bench.seed)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.manual_seed(bench.seed)
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(bench.seed)
    getattr(bench, "setup_" + workload, bench.setup)()
    return bench


def check_benchmark(bench, reference):
    """The hub's verification of a workload's `out` against the reference
    its `verify_<workload>()` returned (torch.allclose(..., atol=1e-2))."""
    check_close(bench.out, reference, rtol=1e-5, atol=1e-2)


def run_benchmarks(chan, bench_dir, repo, kernel, device):
    """The hub's benchmark convention: each Benchmark subclass of each
    `benchmarks/benchmark*.py`, smallest workload once, verified when
    `verify_<workload>` exists (torch.allclose(out, ref, atol=1e-2) as the hub)."""
    runs = []
    for cls in benchmark_classes(bench_dir, repo):
        workload = smallest_workload(cls)
        if workload is not None:
            runs.append((cls, workload))
    if not runs:
        raise SmokeError("no Benchmark subclass with a benchmark_<workload> method in %s" % bench_dir)
    total_ms, verified = 0.0, True
    for cls, workload in runs:
        chan.enter("smoke", what="%s.%s" % (cls.__name__, workload))
        bench = prepare(cls, workload, kernel, device)
        with Timer(device) as timer:
            getattr(bench, "benchmark_" + workload)()
            synchronize(device)
        total_ms += timer.ms()
        verify = getattr(bench, "verify_" + workload, None)
        if verify is None:
            verified = False
            continue
        chan.enter("verify", what="%s.%s" % (cls.__name__, workload))
        check_benchmark(bench, verify())
    chan.timing("smoke", total_ms)
    return "verified" if verified else "smoke"
