"""preflight's python executor: runs inside the sandbox, one variant per process.

It judges a kernel variant the way the hub loader does (`acceptance.py`),
imports it the way the hub loader does, confirms that the device its backend
needs is usable (`device.py`), runs one smoke workload (`smoke.py`),
verifies it when a reference exists, and reports what happens as
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


def sibling(name, source):
    """A file the parent wrote next to this script under a `preflight_`
    name (src/probe/python.rs: DRIVER_FILES); in the source tree (the
    self-check) it has its own name."""
    here = os.path.dirname(os.path.abspath(__file__))
    written = os.path.join(here, name)
    return written if os.path.exists(written) else os.path.join(here, source)


def load_sibling(file, name):
    """A module written next to this script by the parent (found by path, so
    that PYTHONSAFEPATH or -P cannot hide it)."""
    path = sibling(name + ".py", file)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compare = load_sibling("compare.py", "preflight_compare")
acceptance = load_sibling("acceptance.py", "preflight_acceptance")
device_check = load_sibling("device.py", "preflight_device")
smoke = load_sibling("smoke.py", "preflight_smoke_sources")
Mismatch, Incomparable = compare.Mismatch, compare.Incomparable


def load_bench():
    """The bench server (`bench.py`), loaded only by the children that
    serve a bench: compiling it and importing `ctypes` cost an import-only
    probe about 8 ms."""
    return sys.modules.get("preflight_bench") or load_sibling("bench.py", "preflight_bench")

# The hub's python-depends allowlist, written next to this script by the parent.
ALLOWLIST = sibling("preflight_python_depends.json", "python_depends.json")
MESSAGE_LIMIT = 4000
TRACEBACK_LINES = 20


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

    def timing(self, span, ms):
        self.send(ev_timing(span, ms))


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


def ev_memory():
    """What this process holds at the end of its probe, in kB, from
    /proc/self/smaps_rollup: `rss_kb` (resident) and `pss_kb` (resident,
    each shared page divided among the processes sharing it: what a forked
    child costs beyond its fork server). Empty where the file is missing."""
    event = {"event": "runtime"}
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss"):
                    event[key.lower() + "_kb"] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return event


def ev_module(name, package):
    return {"event": "module", "name": name, "package": package}


def ev_device_state(state):
    """`device.state()`'s facts: device, usable, and whichever of said,
    capability, name, seen_by are known."""
    event = {"event": "device_state"}
    event.update((k, clip(v) if isinstance(v, str) else v) for k, v in state.items() if v is not None)
    return event


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


def hub_refused_failure(refused):
    failure = {"error": "hub_refused", "validator": refused.validator, "message": clip(refused.message)}
    if refused.package is not None:
        failure["package"] = refused.package
    return failure


def device_unusable_failure(device, message):
    return {"error": "device_unusable", "device": device, "message": clip(message)}


def clip(text):
    text = str(text)
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


# Exception attributes the parent reads, with the type each must have.
ATTRIBUTES = (("name", str), ("filename", str), ("errno", int), ("error_code", int),
              ("error_name", str), ("returncode", int), ("name_from", str))
FRAMES = 3
FRAME_STRINGS = 32


def describe(exc):
    """The structured form of an exception that the parent classifies."""
    cls = type(exc)
    info = {
        "type": cls.__name__,
        "module": cls.__module__,
        "mro": [c.__module__ + "." + c.__qualname__ for c in cls.__mro__[:-1]],
        "message": clip(exc),
    }
    attributes(exc, info)
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


def attributes(exc, info):
    """The attributes the parent reads, added to `info`: the typed ones of
    ATTRIBUTES, a failed command and its output, the module an attribute
    was missing from, what provides a module that could not be imported,
    and where the exception was raised."""
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
    owner = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    if isinstance(owner, types.ModuleType) and isinstance(getattr(owner, "__name__", None), str):
        info["owner"] = owner.__name__
        if owner.__name__.split(".")[0] != OWN[0]:
            info["provider"] = provider(owner.__name__)
    if isinstance(exc, ImportError) and isinstance(exc.name, str):
        info["provider"] = provider(exc.name)
    frames = innermost_frames(exc.__traceback__)
    if frames:
        info["frames"] = frames


def innermost_frames(tb):
    """The innermost FRAMES frames of a traceback, innermost first: file,
    function, line, source line, and the short string constants of the
    function's code (what a guard looks up: `CUDA_HOME`, `nvcc`)."""
    import linecache

    chain = []
    while tb is not None:
        chain.append(tb)
        tb = tb.tb_next
    frames = []
    for tb in reversed(chain[-FRAMES:]):
        code = tb.tb_frame.f_code
        frame = {"file": code.co_filename, "function": code.co_name, "line": tb.tb_lineno}
        source = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        if source:
            frame["source"] = clip(source)
        if code.co_name != "<module>":
            strings = [c for c in code.co_consts if isinstance(c, str) and 0 < len(c) <= 64 and c.split() == [c]]
            if strings:
                frame["strings"] = strings[:FRAME_STRINGS]
        frames.append(frame)
    return frames


def cause_of(exc):
    if exc.__cause__ is not None or exc.__suppress_context__:
        return exc.__cause__
    return exc.__context__


def describe_cause(exc):
    info = {"type": type(exc).__name__, "module": type(exc).__module__, "message": clip(exc)}
    attributes(exc, info)
    return info


# Import names the variant's python-depends declare, with the distribution
# that provides each (from the hub's allowlist); set before the import.
DECLARED = {}
# The module id the variant is imported as, once known: attributes missing
# from it are the kernel's, not a dependency's.
OWN = [None]


def provider(name):
    """What this interpreter has for the package of module `name`: whether
    it is importable, and which distribution (and version) provides it —
    the installed one, else the one the variant's python-depends name. A
    namespace package (`nvidia`, shared by many wheels) is nobody's: the
    package is its first regular or missing part (`nvidia.cudnn`)."""
    parts = name.split(".")
    top, spec = parts[0], None
    for depth in range(1, len(parts) + 1):
        top = ".".join(parts[:depth])
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin not in (None, "namespace"):
            break
    info = {"top": top, "installed": spec is not None and spec.origin not in (None, "namespace")}
    try:
        import importlib.metadata as md

        dists = md.packages_distributions().get(top) if hasattr(md, "packages_distributions") else None
        if dists:
            info["distribution"] = dists[0]
            info["version"] = md.version(dists[0])
    except Exception:  # a broken distribution's metadata must not hide the real error
        pass
    if "distribution" not in info and top in DECLARED:
        info["distribution"] = DECLARED[top]
    return info


def declared_imports(depends, allowlist):
    """{import name: distribution} for the variant's python-depends."""
    tables = [allowlist.get("general", {})] + list(allowlist.get("backends", {}).values())
    found = {}
    for dependency in depends:
        for table in tables:
            for package in table.get(dependency, {}).get("python", []):
                if package.get("import"):
                    found.setdefault(package["import"], package["pkg"])
    return found


# ---------------------------------------------------------------- import


def accept(chan, variant, verdicts=None):
    """The hub loader's verdict on the variant's metadata (raises
    `acceptance.Refused`), and the metadata it accepted: the judge child's
    verdict from the file `verdicts` when it judged these very bytes, else
    judged here."""
    allowlist = acceptance.load_allowlist(ALLOWLIST)
    verdict = None
    if verdicts is not None and acceptance.regular_metadata(variant):
        try:
            with open(os.path.join(variant, "metadata.json"), "rb") as f:
                verdict = acceptance.judged(verdicts, variant, f.read())
        except OSError:
            pass
    try:
        who = acceptance.accept(variant, allowlist) if verdict is None else acceptance.replay(verdict)
    except acceptance.Refused as refused:
        chan.send(ev_runtime(acceptance=refused.who))
        raise
    chan.send(ev_runtime(acceptance=who))
    with open(os.path.join(variant, "metadata.json"), "rb") as f:
        metadata = json.loads(f.read().decode("utf-8"))
    DECLARED.update(declared_imports(metadata["python-depends"], allowlist))
    return metadata


def import_variant(chan, variant, metadata):
    """Import like kernels' `_import_from_path`: module id from metadata.json,
    `__init__.py` else `<module>/__init__.py`, registered in sys.modules."""
    module_name = metadata["name"].replace("-", "_")
    OWN[0] = metadata["id"]
    chan.send(ev_module(metadata["id"], module_name))
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
        deps = kernel_dependencies(metadata)
        if deps is None:
            spec.loader.exec_module(module)
        else:
            with deps:
                spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(metadata["id"], None)
        raise
    return module


def kernel_dependencies(metadata):
    """The variant's `kernel-depends`, each loaded as the hub loader loads a
    kernel (its own `get_kernel`, offline from the cache when the hub is
    offline), handed to the import the way `kernels` hands them
    (`use_kernel_deps`), so that a variant calling `get_kernel_dep` while it
    is imported finds them. A dependency that fails fails this import.
    None when the variant depends on no other kernel."""
    depends = metadata.get("kernel-depends") or []
    if not depends:
        return None
    from kernels import get_kernel

    use_kernel_deps = acceptance.part("hub_bridge").module("deps").use_kernel_deps

    loaded = {}
    for dep in depends:
        pin = {"revision": dep["revision"]} if "revision" in dep else {"version": dep["version"]}
        loaded[dep["repo-id"]] = get_kernel(dep["repo-id"], **pin)
    return use_kernel_deps(loaded)


# ---------------------------------------------------------------- main


OPTIONS = ("--variant", "--device", "--smoke", "--smoke-kind", "--benchmarks", "--repo",
           "--bench", "--commands", "--replies", "--workload", "--flush", "--verdicts")


def parse_args(argv):
    """`--name value` pairs; argparse would cost a tenth of a bare import."""
    args = dict.fromkeys((o[2:].replace("-", "_") for o in OPTIONS), None)
    args.update(device="auto", smoke_kind="file", flush="yes")
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
        metadata = accept(chan, args.variant, args.verdicts)
        start = time.perf_counter_ns()
        kernel = import_variant(chan, args.variant, metadata)
        chan.send(ev_timing("import", (time.perf_counter_ns() - start) / 1e6))
        device = smoke.resolve_device(args.device)
        depth = "load"
        if device_check.needed(args.device):
            chan.enter("load", what="device %s" % device)
            device_check.confirm(device)
            depth = "device"
        torch = sys.modules.get("torch")
        chan.send(ev_runtime(torch=getattr(torch, "__version__", None) if torch else None, device=device))
        if args.bench:
            chan.enter("smoke", what="bench %s" % args.bench)
            depth = load_bench().serve(chan, args, kernel, device)
        elif args.smoke:
            chan.enter("smoke", what="%s %s" % (args.smoke_kind, args.smoke))
            depth = smoke.run_smoke_file(chan, args.smoke, kernel, device)
        elif args.benchmarks:
            chan.enter("smoke", what="benchmarks %s" % args.benchmarks)
            depth = smoke.run_benchmarks(chan, args.benchmarks, args.repo or args.variant, kernel, device)
    except acceptance.Refused as refused:
        chan.fail(hub_refused_failure(refused))
        return 1
    except device_check.Unusable as e:
        chan.fail(device_unusable_failure(e.device, e))
        return 1
    except Mismatch as e:
        chan.fail(mismatch_failure(e))
        return 1
    except (smoke.SmokeError, Incomparable) as e:
        chan.fail(invalid_smoke_failure(e))
        return 1
    except SystemExit:
        # The kernel's own `sys.exit()`: its status is the evidence.
        raise
    except BaseException as e:
        # Whatever else the kernel's code raised is the kernel's: a
        # KeyboardInterrupt (its own, or a SIGINT it sent its group) too.
        if chan.phase == "import" and args.device != "cpu":
            # Whether the variant's device (a universal variant's: cuda) is
            # usable here is the evidence an import guard (`requires CUDA`,
            # `requires SM90`) is judged by.
            device = args.device if device_check.needed(args.device) else "cuda"
            chan.send(ev_device_state(device_check.state(device)))
        chan.fail(exception_failure(e))
        import traceback

        traceback.print_exc()
        return 1
    chan.send(ev_memory())
    chan.send(ev_done(depth))
    return 0


# ---------------------------------------------------------------- judge


def judge(listing, out):
    """`driver.py --judge LISTING OUT`: the hub's verdicts on the variants
    listed (a JSON array of paths, as their probes are given them), in
    order, appended to OUT (`acceptance.judge_all`). Stderr goes to a file
    of the sandbox's directory, so that the judge can tell whether a
    judgment printed anything."""
    quiet = os.open("preflight_judge_stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stderr.flush()
    os.dup2(quiet, 2)
    os.close(quiet)
    with open(listing) as f:
        variants = json.load(f)
    acceptance.judge_all(variants, acceptance.load_allowlist(ALLOWLIST), out)
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
        import preflight_no_such_package.sub  # noqa: F401
    except ImportError as e:
        found.append(e)
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
    try:
        types.ModuleType("preflight_kernel.utils").per_token_cast_to_fp8  # noqa: B018
    except AttributeError as e:
        found.append(e)

    def _find_cuda_home():
        cuda_home = os.environ.get("PREFLIGHT_NO_SUCH_VARIABLE")
        assert cuda_home is not None
        return cuda_home

    try:
        _find_cuda_home()
    except AssertionError as e:
        found.append(e)
    return found


def sample_refusals():
    """Real refusals of preflight's copy of the hub's rules: a dependency
    the allowlist lacks, and one it allows that is not installed."""
    allowlist = {"general": {"absent": {"python": [{"pkg": "preflight-absent", "import": "preflight_absent"}]}}}
    found = []
    for depends in (["not-allowed"], ["absent"]):
        try:
            acceptance.validate_dependencies("fixture", depends, "cpu", allowlist)
        except acceptance.Refused as refused:
            found.append(refused)
    return found


def self_check(golden_path):
    bench = load_bench()
    with open(golden_path) as f:
        golden = [json.loads(line) for line in f if line.strip()]
    made = [
        ev_hello(),
        ev_phase("start"),
        ev_phase("smoke", "Relu.benchmark_small"),
        ev_runtime(python=sys.version.split()[0], executable=sys.executable, torch="2.8.0", device="cpu"),
        ev_runtime(acceptance=acceptance.PREFLIGHT),
        ev_memory(),
        ev_module("_fixture_1", "fixture"),
        ev_timing("import", 1),
        ev_timing("smoke", 0.5),
        ev_failed("verify", mismatch_failure(Mismatch("3 of 3 elements differ"))),
        ev_failed("smoke", invalid_smoke_failure("no smoke function")),
        ev_failed("start", internal_failure("KeyError: 'x'", "Traceback …")),
        ev_failed("load", device_unusable_failure("cuda", device_check.Unusable("cuda", "torch sees no cuda device"))),
        ev_device_state({"device": "cuda", "usable": False, "said": "torch is not installed here",
                         "capability": "8.0", "name": "NVIDIA A100", "seen_by": "driver"}),
        ev_device_state(device_check.state("cuda")),
        ev_done("verified"),
        bench.ev_bench("Relu.small", "variant", "device_events", 100663296, True, 12, 0.05, True),
        bench.ev_sample("Relu.small", 3, 0.0123),
        bench.ev_sample("Relu.small", 3, 0.0125, None, (1980, 0x20)),
        bench.ev_sample("smoke", 0, 2.5, 2.25),
    ]
    made.extend(ev_failed("import", hub_refused_failure(r)) for r in sample_refusals())
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
    if sys.argv[1:2] == ["--judge"] and len(sys.argv) == 4:
        sys.exit(judge(sys.argv[2], sys.argv[3]))
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
