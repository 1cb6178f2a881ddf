"""`KERNEL_PREFLIGHT=1`: programs written for plain `kernels` (each supported release), run
unchanged, with the variable and without it. Each program runs in a fresh
interpreter of this environment, where the wheel's start-up hook
(`kernel_preflight.pth`) is installed; without the variable it must behave
exactly as plain `kernels`, dying where `kernels` dies."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from conftest import EXIT_1, MISSING_DEPENDENCY, RELU_BENCHMARK, SEGFAULT, age, run_python, sha, variant_files

PREFERRED, FALLBACK = "torch-cpu", "torch-universal"

# The body of a variant that works, with a layer for `kernelize`'s
# repositories.
LAYERED = """
VARIANT = {variant!r}
SNAPSHOT = {snapshot!r}

def relu(xs):
    return [max(x, 0.0) for x in xs]

class layers:
    class Relu:
        VARIANT = VARIANT
"""


def kernel(hub_cache, repo, commit, *, preferred=None, fallback=None, refs=("main", "v1"), benchmarks=False):
    """A kernel with the hub's two CPU variants: `preferred` and `fallback`
    name the body of each (None: a working one); with `benchmarks`, the
    repository's own smoke of its `relu`."""
    files = {}
    for variant, body in ((PREFERRED, preferred), (FALLBACK, fallback)):
        body = body if body is not None else LAYERED.format(variant=variant, snapshot=commit)
        files.update(variant_files(variant, body=body, snapshot=commit))
    if benchmarks:
        files["benchmarks/benchmark.py"] = RELU_BENCHMARK
    return hub_cache.add(repo, commit, files, refs=refs)


def run(program: str, *, flag: str | None, env: dict | None = None):
    """`program` in a fresh interpreter, `KERNEL_PREFLIGHT` set to `flag`
    (None: unset): its exit code, the JSON lines it printed, its stderr."""
    env = dict(env or {})
    if flag is not None:
        env["KERNEL_PREFLIGHT"] = flag
    done = run_python(textwrap.dedent(program), env=env, unset=() if flag is not None else ("KERNEL_PREFLIGHT",))
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr


# Shaped like transformers' integrations/hub_kernels.py (5.22): the hub's
# get_kernel bound when the module is imported, a table of kernels, and a
# lazy loader that falls back to None on FileNotFoundError or
# AssertionError.
TRANSFORMERS_SHAPED = """
import json
from kernels import get_kernel as get_kernel_hub

HUB_KERNEL_MAPPING = {
    "finegrained-fp8": {"repo_id": "kernels-community/finegrained-fp8", "version": 4},
    "deep-gemm": {"repo_id": "kernels-community/deep-gemm", "version": 2},
    "sonic-moe": {"repo_id": "kernels-community/sonic-moe", "revision": "ep-support"},
    "nvfp4": {"repo_id": "kernels-community/nvfp4-gemm", "version": 1},
}
MAPPING = {}

def get_kernel(kernel_name, revision=None, version=None, allow_all_kernels=False):
    user_agent = {"framework": "transformers", "version": "5.22.2", "repo_id": kernel_name}
    return get_kernel_hub(kernel_name, revision=revision, version=version, user_agent=user_agent,
                          trust_remote_code=allow_all_kernels)

def lazy_load_kernel(kernel_name, mapping=MAPPING):
    if kernel_name in mapping:
        return mapping[kernel_name]
    try:
        spec = HUB_KERNEL_MAPPING[kernel_name]
        mapping[kernel_name] = get_kernel(spec["repo_id"], revision=spec.get("revision"), version=spec.get("version"))
    except FileNotFoundError as e:
        mapping[kernel_name] = None
        print(json.dumps({"kernel": kernel_name, "fell_back": str(e)}), flush=True)
    except AssertionError:
        mapping[kernel_name] = None
    return mapping[kernel_name]

for name in HUB_KERNEL_MAPPING:
    kernel = lazy_load_kernel(name)
    print(json.dumps({"kernel": name, "variant": getattr(kernel, "VARIANT", None)}), flush=True)
print(json.dumps({"done": True}))
"""


@pytest.fixture
def community(hub_cache):
    """The kernels transformers loads, as a hub cache where some variants
    fail the way real ones do."""
    own = {"benchmarks": True}
    kernel(hub_cache, "kernels-community/finegrained-fp8", sha(4), preferred=EXIT_1, refs=("main", "v4"), **own)
    kernel(hub_cache, "kernels-community/deep-gemm", sha(2), refs=("main", "v2"), **own)
    kernel(hub_cache, "kernels-community/sonic-moe", sha(5), preferred=SEGFAULT, refs=("ep-support",), **own)
    kernel(
        hub_cache,
        "kernels-community/nvfp4-gemm",
        sha(6),
        preferred=EXIT_1,
        fallback=MISSING_DEPENDENCY,
        refs=("main", "v1"),
        **own,
    )
    return hub_cache


def test_without_the_flag_the_program_dies_where_kernels_dies(community):
    code, lines, stderr = run(TRANSFORMERS_SHAPED, flag=None)
    # The first kernel's preferred variant calls exit(1) while it is imported:
    # nothing after it ran, no fallback could catch it.
    assert code == 1, (lines, stderr)
    assert lines == []
    assert "no kernel image is available for execution on the device" in stderr


@pytest.mark.parametrize("flag", ["0", "false", "off", ""])
def test_an_off_value_is_plain_kernels(community, flag):
    code, lines, stderr = run(TRANSFORMERS_SHAPED, flag=flag)
    assert code == 1 and lines == [], (lines, stderr)


def test_with_the_flag_every_kernel_loads_a_working_variant_or_falls_back(community):
    code, lines, stderr = run(TRANSFORMERS_SHAPED, flag="1")
    assert code == 0, stderr
    loaded = {line["kernel"]: line["variant"] for line in lines if "variant" in line}
    assert loaded == {
        "finegrained-fp8": FALLBACK,  # the hub's pick exits: the other one
        "deep-gemm": PREFERRED,  # the hub's pick works: the same as kernels
        "sonic-moe": FALLBACK,  # a branch pin; the pick crashes
        "nvfp4": None,  # nothing works: the caller's own fallback
    }
    [fell_back] = [line["fell_back"] for line in lines if "fell_back" in line]
    assert "no variant of kernels-community/nvfp4-gemm could be loaded here" in fell_back
    assert f"{PREFERRED}" in fell_back and "unsupported_arch" in fell_back
    assert f"{FALLBACK}" in fell_back and "missing_dependency" in fell_back
    assert lines[-1] == {"done": True}


def test_the_second_run_is_answered_from_the_cache(community):
    run(TRANSFORMERS_SHAPED, flag="1")
    code, lines, stderr = run(TRANSFORMERS_SHAPED, flag="1")
    assert code == 0, stderr
    assert {line["kernel"]: line["variant"] for line in lines if "variant" in line}["finegrained-fp8"] == FALLBACK
    # Nothing was probed again: a probe of the exiting variant would print
    # its CUDA message on the probe's stderr, never this process's.
    assert "no kernel image" not in stderr


def logging_binary(tmp_path):
    """A `preflight` that writes each command line it runs to a log, then
    is the real one: `PREFLIGHT_BIN` for a child, and the log."""
    from kernel_preflight._binary import find_preflight

    log = tmp_path / "preflight-runs.log"
    wrapper = tmp_path / "preflight"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{find_preflight()}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


LOAD_RELU = """
import json, kernels
print(json.dumps({"variant": kernels.get_kernel("acme/warm", version=1).VARIANT}), flush=True)
"""


def test_warm_the_pick_is_answered_by_the_cache_asked_while_the_loader_validated_it(
    hub_cache, tmp_path, outcome_cache
):
    """Warm, one `check --cached` (started as soon as the loader's resolver
    answered) answers the pick and leaves a ticket; warmer, the ticket
    answers in the process and no preflight runs at all. Cold, the early
    run answers nothing, probes nothing, and the pick is probed as before."""
    kernel(hub_cache, "acme/warm", sha(7))
    binary, log = logging_binary(tmp_path)
    code, lines, stderr = run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
    assert code == 0 and lines == [{"variant": PREFERRED}], stderr
    cold = log.read_text().splitlines()
    assert len(cold) == 2 and " --cached --ticket " in cold[0], cold
    assert cold[1].startswith("check ") and "--cached" not in cold[1], cold
    # The loader judged its pick: the probe takes that verdict.
    assert " --verdicts " in cold[1], cold
    log.unlink()
    age(hub_cache.root, outcome_cache)
    code, lines, stderr = run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
    assert code == 0 and lines == [{"variant": PREFERRED}], stderr
    warm = log.read_text().splitlines()
    assert len(warm) == 1 and " --cached --ticket " in warm[0] and warm[0].endswith("--json"), warm
    ticket = warm[0].split(" --ticket ")[1].split()[0]
    assert os.path.isfile(ticket), warm
    # The cache took the aged files' new times in; the next run's ticket
    # is the one that holds.
    age(outcome_cache)
    run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
    age(outcome_cache)
    run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
    log.unlink()
    for _ in range(2):
        code, lines, stderr = run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
        assert code == 0 and lines == [{"variant": PREFERRED}], stderr
        assert not log.exists(), log.read_text()
    # A changed variant file: the ticket does not hold, preflight answers.
    variant = hub_cache.folder("acme/warm") / "snapshots" / sha(7) / "build" / PREFERRED / "__init__.py"
    variant.write_text(variant.read_text() + "\n")
    code, lines, stderr = run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
    assert code == 0 and lines == [{"variant": PREFERRED}], stderr
    assert log.exists() and " --cached --ticket " in log.read_text().splitlines()[0], stderr


def test_a_failed_pick_is_probed_and_falls_back_though_the_cache_was_asked_early(hub_cache, tmp_path):
    """The early question changes nothing of a pick that fails: warm, its
    cached failure is no pass, so `check` answers it and its fallback."""
    kernel(hub_cache, "acme/warm", sha(8), preferred=EXIT_1)
    binary, log = logging_binary(tmp_path)
    for _ in range(2):
        code, lines, stderr = run(LOAD_RELU, flag="1", env={"PREFLIGHT_BIN": str(binary)})
        assert code == 0 and lines == [{"variant": FALLBACK}], stderr
    assert "no kernel image" not in stderr


ENTRY_POINTS = """
import json
from pathlib import Path
import kernels
from kernels import LayerRepository, LockedLayerRepository

lock = Path({lock!r})

def attempt(name, call):
    try:
        value = call()
    except BaseException as e:
        print(json.dumps({{"call": name, "error": type(e).__name__, "message": str(e)[:300]}}), flush=True)
    else:
        print(json.dumps({{"call": name, "value": value}}), flush=True)

attempt("has_kernel working", lambda: kernels.has_kernel("acme/relu", version=1))
attempt("has_kernel broken", lambda: kernels.has_kernel("acme/broken", version=1))
attempt("get_local_kernel", lambda: kernels.get_local_kernel(Path({snapshot!r})).VARIANT)
attempt("load_kernel", lambda: kernels.load_kernel("acme/relu", lockfile=lock).VARIANT)
attempt("get_locked_kernel", lambda: kernels.get_locked_kernel("acme/relu", lockfile=lock).VARIANT)
attempt("LayerRepository.load", lambda: LayerRepository("acme/relu", layer_name="Relu", version=1).load().VARIANT)
attempt("LockedLayerRepository.load",
        lambda: LockedLayerRepository("acme/relu", lockfile=lock, layer_name="Relu").load().VARIANT)
attempt("get_kernel", lambda: kernels.get_kernel("acme/relu", version=1).VARIANT)
"""


def lockfile(tmp_path, entries):
    """A `kernels.lock` as `kernels lock` writes it."""
    path = tmp_path / "kernels.lock"
    path.write_text(
        json.dumps(
            [
                {"dependency": {"repo-id": repo, "version": version}, "lock": {"commit": commit}}
                for repo, version, commit in entries
            ]
        )
    )
    return path


def entry_points(hub_cache, tmp_path):
    snapshot = kernel(hub_cache, "acme/relu", sha(1), preferred=EXIT_1)
    kernel(hub_cache, "acme/broken", sha(2), preferred=EXIT_1, fallback=MISSING_DEPENDENCY)
    lock = lockfile(tmp_path, [("acme/relu", 1, sha(1))])
    return ENTRY_POINTS.format(lock=str(lock), snapshot=str(snapshot))


def test_every_entry_point_that_loads_is_verified(hub_cache, tmp_path):
    code, lines, stderr = run(entry_points(hub_cache, tmp_path), flag="1")
    assert code == 0, stderr
    answers = {line["call"]: line.get("value", line.get("error")) for line in lines}
    assert answers == {
        "has_kernel working": True,
        # Under the flag, has_kernel answers whether get_kernel would load
        # a variant that works here (its probes decide), not only by name.
        "has_kernel broken": False,
        "get_local_kernel": FALLBACK,
        "load_kernel": FALLBACK,
        "get_locked_kernel": FALLBACK,
        "LayerRepository.load": FALLBACK,
        "LockedLayerRepository.load": FALLBACK,
        "get_kernel": FALLBACK,
    }


def test_without_the_flag_the_entry_points_are_plain_kernels(hub_cache, tmp_path):
    code, lines, stderr = run(entry_points(hub_cache, tmp_path), flag=None)
    # has_kernel answers by name; the first load imports the hub's pick,
    # which exits.
    assert code == 1, stderr
    assert [line["call"] for line in lines] == ["has_kernel working", "has_kernel broken"]
    assert all(line["value"] is True for line in lines)


BAD_LOCKS = {
    # case: (lock file text, kernel asked for, what kernels raises)
    "names_a_kernel_not_in_the_cache": (
        json.dumps([{"dependency": {"repo-id": "acme/absent", "version": 1}, "lock": {"commit": sha(9)}}]),
        "acme/absent",
        ("FileNotFoundError", "Cannot find a local snapshot for acme/absent"),
    ),
    "does_not_parse": ("{not json", "acme/relu", ("ValueError", "Cannot parse KernelLocks")),
}


@pytest.mark.parametrize("case", sorted(BAD_LOCKS))
def test_a_bad_lock_is_the_loaders_error(hub_cache, tmp_path, case):
    text, repo, (error, message) = BAD_LOCKS[case]
    lock = tmp_path / "kernels.lock"
    lock.write_text(text)
    program = f"""
    import json, kernels
    from pathlib import Path
    try:
        kernels.load_kernel({repo!r}, lockfile=Path({str(lock)!r}))
    except BaseException as e:
        print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
    """
    _, [plain], _ = run(program, flag=None)
    _, [verified], _ = run(program, flag="1")
    assert plain["error"] == error and message in plain["message"], plain
    assert verified == plain


ENABLE_LATE = """
import json
from kernels import get_kernel            # bound before kernel_preflight is imported
import kernel_preflight
kernel_preflight.enable()
kernel_preflight.enable()                 # idempotent
print(json.dumps({"variant": get_kernel("acme/relu", version=1).VARIANT}))
"""


def test_enable_from_code_reaches_a_reference_bound_before_it(hub_cache):
    kernel(hub_cache, "acme/relu", sha(1), preferred=EXIT_1)
    code, [line], stderr = run(ENABLE_LATE, flag=None)
    assert code == 0 and line == {"variant": FALLBACK}, stderr


BAD_VALUE = """
import json, sys, kernels
try:
    kernels.get_kernel("acme/relu", version=1)
except BaseException as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e),
                      "imported": [m for m in sys.modules if m.startswith("_toy_relu")]}))
"""


def test_an_unknown_value_is_refused_at_the_first_load_before_anything_runs(hub_cache, tmp_path):
    kernel(hub_cache, "acme/relu", sha(1), preferred=EXIT_1)
    outcomes = tmp_path / "outcomes"
    code, [line], stderr = run(BAD_VALUE, flag="maybe", env={"PREFLIGHT_CACHE": str(outcomes)})
    assert code == 0, stderr
    assert line["error"] == "ValueError"
    assert "KERNEL_PREFLIGHT" in line["message"] and "'maybe'" in line["message"]
    assert line["imported"] == []
    assert not outcomes.exists()


NOTHING_OF_PREFLIGHT = """
import json, sys, kernels
kernels.get_kernel("acme/relu", version=1)
load = sys.modules[kernels.get_kernel.__module__]
print(json.dumps({"preflight": sorted(m for m in sys.modules if m.startswith("kernel_preflight")),
                  "seam": load.resolve_kernel_tree.__module__}))
"""


def test_without_the_flag_nothing_of_preflight_is_imported(hub_cache):
    from kernel_preflight import _loader

    kernel(hub_cache, "acme/relu", sha(1))
    code, [line], stderr = run(NOTHING_OF_PREFLIGHT, flag=None)
    assert code == 0, stderr
    assert line == {"preflight": [], "seam": f"{_loader.current().package}.deps"}


def test_the_probe_sees_plain_kernels(hub_cache, tmp_path):
    """A probe child gets `KERNEL_PREFLIGHT=0`: a kernel that loads another
    one while it is imported does not start a verification inside it."""
    seen = tmp_path / "seen"
    body = (
        f"import os\nopen({str(seen)!r}, 'a').write(os.environ.get('KERNEL_PREFLIGHT', '-') + '\\n')\nVARIANT = 'x'\n"
    )
    kernel(hub_cache, "acme/env", sha(1), preferred=body)
    code, lines, stderr = run(
        'import kernels, json\nprint(json.dumps({"v": kernels.get_kernel("acme/env", version=1).VARIANT}))',
        flag="1",
    )
    assert code == 0, stderr
    # Probed once (flag off inside), then imported by the caller (flag on).
    assert seen.read_text().split() == ["0", "1"]


def test_the_seam_is_where_this_kernels_release_has_it():
    """The one private name the flag replaces, and the one it wraps, where
    the adapter of the installed release says they are: if a kernels
    release moves either, this fails (and the flag warns at start-up
    instead of verifying nothing silently)."""
    import kernels

    from kernel_preflight import _enable, _loader

    release = _loader.current()
    load, deps = release.module("load"), release.module("deps")
    seam = load.resolve_kernel_tree
    original = getattr(seam, "__kernel_preflight_original__", seam)
    assert original is deps.resolve_kernel_tree
    assert _enable.seam_problem(kernels) is None
    # Every loader reaches it through the load module's globals.
    for loader in (load.get_kernel_with_resolver, load.has_kernel):
        assert "resolve_kernel_tree" in loader.__code__.co_names
        assert loader.__globals__ is vars(load)
    for loader in (load.get_kernel, load.get_local_kernel, load.load_kernel, load.get_locked_kernel):
        assert "get_kernel_with_resolver" in loader.__code__.co_names
        assert getattr(kernels, loader.__name__) is loader
    for module in (release.module("layer.layer"), release.module("layer.func")):
        assert module.get_kernel_with_resolver is load.get_kernel_with_resolver
        assert module.get_kernel is load.get_kernel
    # The resolvers read the pick's metadata through this name.
    assert hasattr(release.module("resolver").Metadata, "read_from_file")
    # The loader installs, then loads, the tree the seam returns: the tree's
    # class is where verification sits between the two (from 0.18 the
    # loader validates the installed kernels before it loads them);
    # has_kernel is the one entry point that never installs it.
    import inspect

    body = inspect.getsource(load.get_kernel_with_resolver)
    steps = ["validate_metadata", ".install(", ".load()"]
    if release.validates_kernels:
        steps.insert(2, ".validate_kernel(")
    assert [body.index(step) for step in steps] == sorted(body.index(step) for step in steps)
    assert ("validate_kernel" in body) == release.validates_kernels
    assert ".install(" not in inspect.getsource(load.has_kernel)
    assert {"install", "load", "validate_metadata"} <= set(vars(deps.DepTreeNode))
    assert _enable.ANSWERING_FUNCTION == load.has_kernel.__name__


def test_a_kernel_that_depends_on_another_is_probed_with_its_dependency(hub_cache):
    """`kernel-depends`: the probe loads the dependency as the hub loader
    does, so that `get_kernel_dep` works while the variant is imported; the
    dependency itself is verified too."""
    kernel(hub_cache, "acme/dep", sha(7), preferred=EXIT_1)
    body = "from kernels import get_kernel_dep\nDEP = get_kernel_dep('acme/dep')\nVARIANT = 'root:' + DEP.VARIANT\n"
    files = {}
    for variant in (PREFERRED, FALLBACK):
        files.update(
            variant_files(
                variant,
                body=body,
                metadata={"kernel-depends": [{"repo-id": "acme/dep", "version": 1}]},
            )
        )
    hub_cache.add("acme/root", sha(8), files, refs=("v1",))
    program = 'import json, kernels\nprint(json.dumps({"v": kernels.get_kernel("acme/root", version=1).VARIANT}))'
    code, lines, stderr = run(program, flag="1")
    assert code == 0 and lines == [{"v": f"root:{FALLBACK}"}], stderr
    code, lines, stderr = run(program, flag=None)
    assert code == 1 and lines == [], stderr


def test_a_backend_the_caller_chose_is_honoured(hub_cache):
    kernel(hub_cache, "acme/relu", sha(1), preferred=EXIT_1)
    program = (
        "import json, kernels\n"
        'print(json.dumps({"v": kernels.get_kernel("acme/relu", version=1, backend="cpu").VARIANT}))'
    )
    code, lines, stderr = run(program, flag="1")
    assert code == 0 and lines == [{"v": FALLBACK}], stderr


def test_the_readme_example_prints_what_the_readme_shows(tmp_path):
    """README, "With transformers": the example hub cache and the loader,
    run as written there; the output block is compared line for line."""
    from conftest import ROOT, example_hub, readme_output

    shown = readme_output("KERNEL_PREFLIGHT=1 python examples/transformers/loader.py")
    hub = example_hub(tmp_path)
    loader = (ROOT / "examples/transformers/loader.py").read_text()
    env = {"KERNELS_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}
    plain = run_python(loader, env=env, unset=("KERNEL_PREFLIGHT",))
    assert plain.returncode == 1 and plain.stdout == "", plain.stderr
    verified = run_python(loader, env={**env, "KERNEL_PREFLIGHT": "1"})
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout == shown
