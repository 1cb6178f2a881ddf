"""`kernel_preflight.get_kernel` against the hub's own `kernels.get_kernel`
(each supported release), offline, on hub caches built here. Without torch the hub loader
accepts `torch-cpu` and `torch-universal` by name and prefers `torch-cpu`.

Both loaders run in child processes: a variant that calls `exit(1)` must
not end the test run, and `kernels` reads its cache folder
(`KERNELS_CACHE`) once, when it is imported."""

from __future__ import annotations

import json
import re

import pytest
from conftest import EXIT_1, MISSING_DEPENDENCY, SEGFAULT, load_in_child, run_python, sha, variant_files

import kernel_preflight as kp

PREFERRED, FALLBACK = "torch-cpu", "torch-universal"


def two_variants(hub_cache, repo, preferred=None, fallback=None, commit=sha(1)):
    files = {}
    files.update(variant_files(PREFERRED, snapshot=commit, **(preferred or {})))
    files.update(variant_files(FALLBACK, snapshot=commit, **(fallback or {})))
    return hub_cache.add(repo, commit, files, refs=("main", "v1"))


def calls(function, repo, pins, **more):
    args = {**more}
    return [
        f"{function}({repo!r}, " + ", ".join(f"{k}={v!r}" for k, v in {**pin, **args}.items()) + ")" for pin in pins
    ]


def hub_get_kernel(repo, *pins):
    """`kernels.get_kernel` for each pin, in a child: its exit code, what
    each call loaded (or raised), and its stderr."""
    return load_in_child(calls("kernels.get_kernel", repo, pins))


def our_get_kernel(repo, *pins, env=None, **more):
    """`kernel_preflight.get_kernel` for each pin, in a child."""
    return load_in_child(
        calls("kernel_preflight.get_kernel", repo, pins, **more), imports="import kernel_preflight", env=env
    )


BROKEN_PREFERRED = {
    "exits_on_import": {"body": EXIT_1},
    "crashes_on_import": {"body": SEGFAULT},
    "broken_metadata": {"metadata_text": '{"name": "toy-relu", "id": '},
    "needs_a_newer_kernels": {"metadata": {"kernels-minver": "99.0"}},
}


@pytest.mark.parametrize("breakage", sorted(BROKEN_PREFERRED))
def test_loads_a_working_variant_where_the_hub_loader_fails(hub_cache, breakage):
    repo = f"acme/{breakage.replace('_', '-')}"
    two_variants(hub_cache, repo, preferred=BROKEN_PREFERRED[breakage])

    code, loaded, stderr = hub_get_kernel(repo, {"version": 1})
    assert code != 0 or "error" in loaded[0], (code, loaded, stderr)

    code, [loaded], stderr = our_get_kernel(repo, {"version": 1})
    assert code == 0 and loaded["variant"] == FALLBACK, (loaded, stderr)


def test_the_probe_refuses_a_variant_that_needs_a_newer_kernels(hub_cache):
    two_variants(hub_cache, "acme/minver", preferred=BROKEN_PREFERRED["needs_a_newer_kernels"])
    assert kp.select("acme/minver", version=1).variant == FALLBACK


def test_loads_the_same_variant_as_the_hub_loader_when_it_works(hub_cache):
    two_variants(hub_cache, "acme/good")
    code, [hub], stderr = hub_get_kernel("acme/good", {"version": 1})
    assert code == 0 and hub["variant"] == PREFERRED, (hub, stderr)
    code, [ours], stderr = our_get_kernel("acme/good", {"version": 1})
    assert ours == hub, stderr


def test_a_pinned_version_or_revision_loads_that_snapshot(hub_cache):
    for n, refs in ((1, ("v1",)), (2, ("v2", "main"))):
        hub_cache.add("acme/pinned", sha(n), variant_files(FALLBACK, snapshot=sha(n)), refs=refs)
    hub_cache.add("acme/pinned", sha(3), variant_files(FALLBACK, snapshot=sha(3)), refs=("ep-support",))
    cases = [
        ({"version": 1}, sha(1)),
        ({"version": 2}, sha(2)),
        ({"revision": sha(1)}, sha(1)),
        ({"revision": "main"}, sha(2)),
        ({"revision": "v1"}, sha(1)),
        # A branch that is not a version, as transformers pins sonic-moe.
        ({"revision": "ep-support"}, sha(3)),
    ]
    pins = [pin for pin, _ in cases]
    _, hub, stderr = hub_get_kernel("acme/pinned", *pins)
    _, ours, stderr = our_get_kernel("acme/pinned", *pins)
    assert len(hub) == len(ours) == len(cases), stderr
    for (pin, snapshot), theirs, mine in zip(cases, hub, ours):
        assert theirs.get("snapshot") == snapshot, (pin, theirs)
        assert mine == theirs, pin


def test_a_missing_version_is_the_hub_loaders_error(hub_cache):
    two_variants(hub_cache, "acme/versions")
    _, [hub], _ = hub_get_kernel("acme/versions", {"version": 3})
    _, [ours], _ = our_get_kernel("acme/versions", {"version": 3})
    assert hub["error"] == "ValueError"
    assert ours == hub
    assert hub["message"] == "Version 3 not found, available versions: 1"


def test_a_pin_is_required_as_by_the_hub_loader(hub_cache):
    two_variants(hub_cache, "acme/unpinned")
    with pytest.raises(ValueError, match="A kernel version or revision must be specified"):
        kp.get_kernel("acme/unpinned")


UNTRUSTED = """
from kernel_preflight._loader import current

def untrusted(repo_id, local_files_only, trust_remote_code):
    # The hub's trust check answering that the publisher is not trusted
    # (offline the real one cannot ask the hub and lets the cache through).
    if trust_remote_code is True or (isinstance(trust_remote_code, list) and repo_id in trust_remote_code):
        return
    raise ValueError(
        f"Kernel repository '{repo_id}' is not from a trusted publisher. "
        "Set trust_remote_code=True or add the repository ID to the trust_remote_code allowlist "
        "to allow loading kernels from untrusted sources."
    )

current().module("resolver")._check_trust_remote_code = untrusted
"""


def test_a_trust_refusal_is_raised_never_bypassed(hub_cache, tmp_path):
    outcomes = tmp_path / "outcomes"
    two_variants(hub_cache, "shady/relu")
    imports = "import kernels, kernel_preflight\n" + UNTRUSTED
    env = {"PREFLIGHT_CACHE": str(outcomes)}
    code, [hub, ours], stderr = load_in_child(
        ["kernels.get_kernel('shady/relu', version=1)", "kernel_preflight.get_kernel('shady/relu', version=1)"],
        imports=imports,
        env=env,
    )
    assert hub["error"] == "ValueError" and "not from a trusted publisher" in hub["message"], stderr
    assert ours == hub
    # Refused before anything ran: no probe, no outcome kept.
    assert not outcomes.exists() or not any(outcomes.rglob("*.json"))
    # The caller's own answer lets it through, as with the hub loader.
    code, [allowed], stderr = load_in_child(
        ["kernel_preflight.get_kernel('shady/relu', version=1, trust_remote_code=['shady/relu'])"],
        imports=imports,
        env=env,
    )
    assert allowed["variant"] == PREFERRED, (allowed, stderr)


NOTHING_WORKS = """
import kernel_preflight, json
try:
    kernel_preflight.get_kernel("acme/broken", version=1)
except FileNotFoundError as e:
    print(json.dumps({"text": str(e), "is_a": [c.__name__ for c in type(e).__mro__],
                      "exit_code": e.exit_code,
                      "variants": sorted(c.variant for c in e.selection.alternatives)}))
"""


def test_nothing_working_raises_with_each_reason(hub_cache):
    two_variants(
        hub_cache,
        "acme/broken",
        preferred={"body": EXIT_1},
        fallback={"body": MISSING_DEPENDENCY},
    )
    done = run_python(NOTHING_WORKS)
    assert done.returncode == 0, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])
    text = error["text"]
    assert "no variant of acme/broken could be loaded here" in text
    # The CUDA message decides over the bare exit code.
    assert re.search(rf"{PREFERRED}\s+unsupported_arch: CUDA error", text), text
    assert re.search(rf"{FALLBACK}\s+missing_dependency", text), text
    assert "relu_native_helper_not_installed" in text
    assert error["exit_code"] == 1
    assert {"KernelLoadError", "FileNotFoundError", "NoWorkingVariant", "PreflightError"} <= set(error["is_a"])
    assert error["variants"] == [PREFERRED, FALLBACK]


def test_a_pick_the_hub_validators_refuse_is_the_loaders_own_error(hub_cache):
    # The preferred one declares a dependency outside the loader's
    # allowlist: the loader refuses it before anything of it runs or is
    # fetched, with its own ValueError; a refusal is the loader's decision,
    # not a failure to route around (docs/flag.md).
    two_variants(hub_cache, "acme/deps", preferred={"metadata": {"python-depends": ["no-such-dependency"]}})
    code, [hub], stderr = hub_get_kernel("acme/deps", {"version": 1})
    assert hub["error"] == "ValueError", (hub, stderr)
    code, [ours], stderr = our_get_kernel("acme/deps", {"version": 1})
    assert ours == hub, stderr


def test_local_kernels_overrides_the_hub_as_in_get_kernel(hub_cache, tmp_path):
    local = tmp_path / "checkout"
    for path, content in {
        **variant_files(PREFERRED, body=EXIT_1),
        **variant_files(FALLBACK, snapshot="local"),
    }.items():
        (local / path).parent.mkdir(parents=True, exist_ok=True)
        (local / path).write_bytes(content)
    code, [loaded], stderr = our_get_kernel("acme/local", {"version": 1}, env={"LOCAL_KERNELS": f"acme/local={local}"})
    assert loaded["snapshot"] == "local", (loaded, stderr)
    assert loaded["file"].startswith(str(local))


def test_without_kernels_the_hint_names_what_installs_it():
    # kernel-preflight is not on PyPI: the hint must not send the user to
    # `pip install 'kernel-preflight[hub]'`, which cannot work.
    code = (
        "import sys\nsys.modules['kernels'] = None\n"
        "import kernel_preflight\n"
        "try:\n    kernel_preflight.get_kernel('acme/x', version=1)\n"
        "except ImportError as e:\n    print(e)\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert "pip install 'kernels" in message and "<0.20" in message, message
    assert "pip install '.[hub]'" in message, message
    assert "kernel-preflight[hub]" not in message, message


def test_the_readme_quick_start_prints_what_the_readme_shows(tmp_path):
    """README, "Python": the example hub cache and examples/quickstart.py,
    run as written there, offline; its output is the README's block."""
    from conftest import ROOT, example_hub, readme_output

    shown = readme_output("\npython examples/quickstart.py")
    hub = example_hub(tmp_path)
    program = (ROOT / "examples/quickstart.py").read_text()
    done = run_python(program, env={"KERNELS_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}, unset=("KERNEL_PREFLIGHT",))
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown, done.stdout
