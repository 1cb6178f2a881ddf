"""preflight's python executor: runs inside the sandbox, one variant per process.

It imports a kernel variant the way the hub loader does, runs one smoke
workload, verifies it when a reference exists, and reports what happens as
JSON lines appended to the file named by PREFLIGHT_RESULT_FILE, in
preflight's child protocol (`src/protocol/`): a `hello` first, then `phase`,
`runtime`, `module` and `timing` events as they happen, and at most one
`failed` or one `done`. The parent never reads this process's stdout: a
kernel may print anything there. A process that dies leaves the last phase
event as the place it died.

`driver.py --self-check GOLDEN` prints one event of every kind this driver
writes, built by the same constructors a probe uses, and checks each against
the golden lines the Rust side is tested with
(`tests/fixtures/protocol/golden.jsonl`).

Works on Python 3.8+ without torch or numpy; uses them only when the kernel
or its smoke workload already imported them.
"""

import faulthandler
import importlib.util
import json
import os
import sys
import time
import types


def load_sibling(file, name):
    """A module written next to this script by the parent (found by path, so
    that PYTHONSAFEPATH or -P cannot hide it)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), file)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compare = load_sibling("compare.py", "preflight_compare")
Mismatch, Incomparable, check_close = compare.Mismatch, compare.Incomparable, compare.check_close

MESSAGE_LIMIT = 4000
TRACEBACK_LINES = 20
# Workload names ordered from small to large; unknown names rank in the middle.
SIZE_WORDS = ("tiny", "small", "base", "default", "medium", "large", "huge")


# The version of the event shapes; the parent refuses any other
# (src/protocol/mod.rs: PROTOCOL_VERSION).
PROTOCOL_VERSION = 1


class Channel:
    """Append-only JSON lines, one write(2) each, so a crash never tears a
    line; the hello comes first."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.phase = "start"
        self.send(ev_hello())

    def send(self, event):
        line = json.dumps(event, default=str, ensure_ascii=True) + "\n"
        os.write(self.fd, line.encode("ascii"))

    def enter(self, phase, what=None):
        self.phase = phase
        self.send(ev_phase(phase, what))

    def fail(self, failure):
        self.send(ev_failed(self.phase, failure))


# ---------------------------------------------------------------- events
# One constructor per event the driver writes; --self-check holds each to
# the golden lines.


def ev_hello():
    return {"event": "hello", "protocol": PROTOCOL_VERSION, "executor": "python",
            "pid": os.getpid(), "pgid": os.getpgid(0)}


def ev_phase(phase, what=None):
    event = {"event": "phase", "phase": phase}
    if what is not None:
        event["what"] = clip(what)
    return event


def ev_runtime(**facts):
    """python, executable, torch, device: whichever are known."""
    event = {"event": "runtime"}
    event.update((k, str(v)) for k, v in facts.items() if v is not None)
    return event


def ev_module(name):
    return {"event": "module", "name": name}


def ev_timing(span, ms):
    return {"event": "timing", "span": span, "ms": float(ms)}


def ev_failed(phase, failure):
    return {"event": "failed", "phase": phase, "failure": failure}


def ev_done(depth):
    return {"event": "done", "depth": depth}


def exception_failure(exc):
    failure = {"error": "exception"}
    failure.update(describe(exc))
    return failure


def mismatch_failure(message):
    return {"error": "mismatch", "message": clip(message)}


def invalid_smoke_failure(message):
    return {"error": "invalid_smoke", "message": clip(message)}


def internal_failure(message, traceback_text):
    return {"error": "internal", "message": clip(message), "traceback": clip(traceback_text)}


class MetadataError(Exception):
    """metadata.json is missing or unusable: the hub loader refuses the variant."""


class SmokeError(Exception):
    """The smoke source itself is unusable (no smoke function, bad return value)."""


# The parent recognises the driver's own exceptions by this module name.
for _cls in (MetadataError, SmokeError):
    _cls.__module__ = "preflight"


def clip(text):
    text = str(text)
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


# Exception attributes the parent reads, with the type each must have.
ATTRIBUTES = (("name", str), ("filename", str), ("errno", int), ("error_code", int),
              ("error_name", str), ("returncode", int))


def describe(exc):
    """The structured form of an exception that the parent classifies."""
    cls = type(exc)
    info = {
        "type": cls.__name__,
        "module": cls.__module__,
        "mro": [c.__module__ + "." + c.__qualname__ for c in cls.__mro__[:-1]],
        "message": clip(exc),
    }
    for attr, kind in ATTRIBUTES:
        value = getattr(exc, attr, None)
        if isinstance(value, kind) and not isinstance(value, bool):
            info[attr] = value
    output = getattr(exc, "stderr", None) or getattr(exc, "output", None)
    if isinstance(output, bytes):
        output = output.decode("utf-8", "replace")
    if isinstance(output, str) and output.strip():
        info["output"] = clip(output)
    cmd = getattr(exc, "cmd", None)
    if isinstance(cmd, (list, tuple)) and cmd:
        info["command"] = str(cmd[0])
    elif isinstance(cmd, str):
        info["command"] = cmd.split()[0] if cmd.split() else cmd
    causes = []
    seen = {id(exc)}
    inner = cause_of(exc)
    while inner is not None and id(inner) not in seen and len(causes) < 5:
        seen.add(id(inner))
        causes.append(describe_cause(inner))
        inner = cause_of(inner)
    if causes:
        info["causes"] = causes
    import traceback

    lines = traceback.format_exception(cls, exc, exc.__traceback__)
    info["traceback"] = clip("".join(lines[-TRACEBACK_LINES:]))
    return info


def cause_of(exc):
    if exc.__cause__ is not None or exc.__suppress_context__:
        return exc.__cause__
    return exc.__context__


def describe_cause(exc):
    info = {"type": type(exc).__name__, "module": type(exc).__module__, "message": clip(exc)}
    for attr, kind in ATTRIBUTES[:4]:
        value = getattr(exc, attr, None)
        if isinstance(value, kind) and not isinstance(value, bool):
            info[attr] = value
    return info


# ---------------------------------------------------------------- import


def read_metadata(variant):
    path = os.path.join(variant, "metadata.json")
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise MetadataError("metadata.json missing in %s" % variant) from None
    except (OSError, ValueError) as e:
        raise MetadataError("metadata.json unreadable: %s" % e) from None
    if not isinstance(data, dict):
        raise MetadataError("metadata.json is not a JSON object")
    for key in ("name", "id"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise MetadataError("metadata.json has no string field %r" % key)
    return data


def import_variant(chan, variant):
    """Import like kernels' `_import_from_path`: module id from metadata.json,
    `__init__.py` else `<module>/__init__.py`, registered in sys.modules."""
    metadata = read_metadata(variant)
    chan.send(ev_module(metadata["id"]))
    module_name = metadata["name"].replace("-", "_")
    path = os.path.join(variant, "__init__.py")
    if not os.path.exists(path):
        path = os.path.join(variant, module_name, "__init__.py")
    if not os.path.exists(path):
        raise FileNotFoundError("No kernel module found at: `%s`" % variant)
    spec = importlib.util.spec_from_file_location(metadata["id"], path)
    if spec is None or spec.loader is None:
        raise ImportError("Cannot load spec for %s from %s" % (module_name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[metadata["id"]] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(metadata["id"], None)
        raise
    return module


# ---------------------------------------------------------------- timing


class Timer:
    """Device events when torch drives a GPU here, perf_counter_ns otherwise."""

    def __init__(self, device):
        self.events = None
        torch = sys.modules.get("torch")
        if torch is not None and device.startswith("cuda"):
            try:
                if torch.cuda.is_available():
                    self.events = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
            except Exception:
                self.events = None

    def __enter__(self):
        self.start = time.perf_counter_ns()
        if self.events:
            self.events[0].record()
        return self

    def __exit__(self, *exc):
        if self.events:
            self.events[1].record()
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
    module = load_file(path, "preflight_smoke")
    smoke = getattr(module, "smoke", None)
    if not callable(smoke):
        raise SmokeError("%s defines no function smoke(kernel, device)" % path)
    with Timer(device) as timer:
        result = smoke(kernel, device)
        synchronize(device)
    smoke_ms = timer.ms()
    if result is None:
        chan.send(ev_timing("smoke", smoke_ms))
        return "smoke"
    if isinstance(result, dict) and "actual" in result and "expected" in result:
        actual, expected = result["actual"], result["expected"]
        rtol, atol = result.get("rtol"), result.get("atol")
    elif isinstance(result, tuple) and len(result) == 2:
        (actual, expected), rtol, atol = result, None, None
    else:
        raise SmokeError(
            "smoke() returned %s; expected None, (actual, expected) or "
            '{"actual", "expected", "rtol", "atol"}' % type(result).__name__
        )
    chan.send(ev_timing("smoke", smoke_ms))
    chan.enter("verify")
    check_close(actual, expected, rtol, atol)
    return "verified"


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


def run_benchmarks(chan, bench_dir, repo, kernel, device):
    """The hub's benchmark convention: each Benchmark subclass of each
    `benchmarks/benchmark*.py`, smallest workload once, verified when
    `verify_<workload>` exists (torch.allclose(out, ref, atol=1e-2) as the hub)."""
    base = benchmark_base()
    scripts = sorted(
        os.path.join(bench_dir, f)
        for f in os.listdir(bench_dir)
        if f.startswith("benchmark") and f.endswith(".py")
    )
    runs = []
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
                workload = smallest_workload(obj)
                if workload is not None:
                    runs.append((obj, workload))
    if not runs:
        raise SmokeError("no Benchmark subclass with a benchmark_<workload> method in %s" % bench_dir)
    total_ms, verified = 0.0, True
    for cls, workload in runs:
        chan.enter("smoke", what="%s.%s" % (cls.__name__, workload))
        bench = cls()
        bench.kernel = kernel
        bench.device = device
        if bench.seed is not None:
            import random

            random.seed(bench.seed)
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.manual_seed(bench.seed)
        getattr(bench, "setup_" + workload, bench.setup)()
        with Timer(device) as timer:
            getattr(bench, "benchmark_" + workload)()
            synchronize(device)
        total_ms += timer.ms()
        verify = getattr(bench, "verify_" + workload, None)
        if verify is None:
            verified = False
            continue
        chan.enter("verify", what="%s.%s" % (cls.__name__, workload))
        check_close(bench.out, verify(), rtol=1e-5, atol=1e-2)
    chan.send(ev_timing("smoke", total_ms))
    return "verified" if verified else "smoke"


# ---------------------------------------------------------------- main


OPTIONS = ("--variant", "--device", "--smoke", "--smoke-kind", "--benchmarks", "--repo")


def parse_args(argv):
    """`--name value` pairs; argparse would cost a tenth of a bare import."""
    args = dict.fromkeys((o[2:].replace("-", "_") for o in OPTIONS), None)
    args.update(device="auto", smoke_kind="file")
    it = iter(argv)
    for option in it:
        value = next(it, None)
        if option not in OPTIONS or value is None:
            raise SystemExit("preflight-driver: bad argument %r" % option)
        args[option[2:].replace("-", "_")] = value
    if args["variant"] is None:
        raise SystemExit("preflight-driver: --variant is required")
    return types.SimpleNamespace(**args)


def main(chan, argv):
    faulthandler.enable()
    args = parse_args(argv)
    chan.enter("start")
    chan.send(ev_runtime(python=sys.version.split()[0], executable=sys.executable))
    try:
        chan.enter("import", what=args.variant)
        start = time.perf_counter_ns()
        kernel = import_variant(chan, args.variant)
        chan.send(ev_timing("import", (time.perf_counter_ns() - start) / 1e6))
        device = resolve_device(args.device)
        torch = sys.modules.get("torch")
        chan.send(ev_runtime(torch=getattr(torch, "__version__", None) if torch else None, device=device))
        depth = "load"
        if args.smoke:
            chan.enter("smoke", what="%s %s" % (args.smoke_kind, args.smoke))
            depth = run_smoke_file(chan, args.smoke, kernel, device)
        elif args.benchmarks:
            chan.enter("smoke", what="benchmarks %s" % args.benchmarks)
            depth = run_benchmarks(chan, args.benchmarks, args.repo or args.variant, kernel, device)
    except Mismatch as e:
        chan.fail(mismatch_failure(e))
        return 1
    except (SmokeError, Incomparable) as e:
        chan.fail(invalid_smoke_failure(e))
        return 1
    except Exception as e:
        chan.fail(exception_failure(e))
        import traceback

        traceback.print_exc()
        return 1
    chan.send(ev_done(depth))
    return 0


# ---------------------------------------------------------------- self-check


def json_kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return type(value).__name__


def shape_problems(made, golden, at):
    """Where `made` has a key the golden line lacks, or a value of another
    JSON type (an int where the golden line has a float is fine)."""
    problems = []
    if isinstance(made, dict) and isinstance(golden, dict):
        for key, value in made.items():
            if key not in golden:
                problems.append("%s.%s: not in the golden line" % (at, key))
            else:
                problems.extend(shape_problems(value, golden[key], "%s.%s" % (at, key)))
    elif isinstance(made, list) and isinstance(golden, list) and golden:
        for i, item in enumerate(made):
            problems.extend(shape_problems(item, golden[0], "%s[%d]" % (at, i)))
    elif json_kind(made) != json_kind(golden) and (json_kind(made), json_kind(golden)) != ("int", "float"):
        problems.append("%s: %s, the golden line has %s" % (at, json_kind(made), json_kind(golden)))
    return problems


def kind_of(event):
    failure = event.get("failure")
    return event["event"] + ("/" + failure["error"] if isinstance(failure, dict) else "")


def sample_exceptions():
    """Real exceptions of the kinds the parent reads attributes of."""
    import subprocess

    found = []
    try:
        try:
            import preflight_no_such_module  # noqa: F401
        except ImportError as e:
            raise RuntimeError("while importing") from e
    except RuntimeError as e:
        found.append(e)
    try:
        open(os.path.join(os.sep, "preflight", "no", "such", "file"))
    except OSError as e:
        found.append(e)
    found.append(subprocess.CalledProcessError(1, ["nvcc", "-c", "k.cu"], stderr=b"nvcc fatal : x"))

    class AcceleratorError(RuntimeError):
        error_code = 209
        error_name = "CUDA_ERROR_NO_BINARY_FOR_GPU"

    try:
        raise AcceleratorError("CUDA error: no kernel image is available")
    except AcceleratorError as e:
        found.append(e)
    return found


def self_check(golden_path):
    with open(golden_path) as f:
        golden = [json.loads(line) for line in f if line.strip()]
    made = [
        ev_hello(),
        ev_phase("start"),
        ev_phase("smoke", "Relu.benchmark_small"),
        ev_runtime(python=sys.version.split()[0], executable=sys.executable, torch="2.8.0", device="cpu"),
        ev_module("_fixture_1"),
        ev_timing("import", 1),
        ev_timing("smoke", 0.5),
        ev_failed("verify", mismatch_failure(Mismatch("3 of 3 elements differ"))),
        ev_failed("smoke", invalid_smoke_failure("no smoke function")),
        ev_failed("start", internal_failure("KeyError: 'x'", "Traceback …")),
        ev_done("verified"),
    ]
    made.extend(ev_failed("smoke", exception_failure(e)) for e in sample_exceptions())
    problems = []
    for event in made:
        print(json.dumps(event, default=str))
        kind = kind_of(event)
        same = [g for g in golden if kind_of(g) == kind]
        if not same:
            problems.append("%s: no golden line of this kind" % kind)
            continue
        # The best-fitting golden line of the kind (hello: the python one).
        problems.extend(min((shape_problems(event, g, kind) for g in same), key=len))
    for problem in problems:
        sys.stderr.write("self-check: %s\n" % problem)
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--self-check"] and len(sys.argv) == 3:
        sys.exit(self_check(sys.argv[2]))
    # The kernel and its subprocesses need not know where results go.
    result_file = os.environ.pop("PREFLIGHT_RESULT_FILE", None) or os.devnull
    chan = Channel(result_file)
    try:
        code = main(chan, sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # a bug here is preflight's fault, never the kernel's
        import traceback

        try:
            chan.fail(internal_failure("%s: %s" % (type(e).__name__, e), traceback.format_exc()))
        finally:
            code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
