"""`kernel_preflight.get_kernel` against the hub's own `kernels.get_kernel`
(0.17.2), offline, on hub caches built here. Without torch the hub loader
accepts `torch-cpu` and `torch-universal` by name and prefers `torch-cpu`."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import EXIT_1, MISSING_DEPENDENCY, SEGFAULT, load_in_child, sha, variant_files

import kernel_preflight as kp

PREFERRED, FALLBACK = "torch-cpu", "torch-universal"


def two_variants(hub_cache, repo, preferred=None, fallback=None, commit=sha(1)):
    files = {}
    files.update(variant_files(PREFERRED, snapshot=commit, **(preferred or {})))
    files.update(variant_files(FALLBACK, snapshot=commit, **(fallback or {})))
    return hub_cache.add(repo, commit, files, refs=("main", "v1"))


def hub_get_kernel(repo, *pins):
    """`kernels.get_kernel` for each pin, in a child: its exit code, what
    each call loaded (or raised), and its stderr."""
    calls = [f"kernels.get_kernel({repo!r}, " + ", ".join(f"{k}={v!r}" for k, v in pin.items()) + ")" for pin in pins]
    return load_in_child(calls)


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

    module = kp.get_kernel(repo, version=1)
    assert module.VARIANT == FALLBACK
    assert module.relu([-1.0, 2.0]) == [0.0, 2.0]


def test_the_probe_refuses_a_variant_that_needs_a_newer_kernels(hub_cache):
    two_variants(hub_cache, "acme/minver", preferred=BROKEN_PREFERRED["needs_a_newer_kernels"])
    assert kp.select("acme/minver", version=1).variant == FALLBACK


def test_loads_the_same_variant_as_the_hub_loader_when_it_works(hub_cache):
    two_variants(hub_cache, "acme/good")
    code, [loaded], stderr = hub_get_kernel("acme/good", {"version": 1})
    assert code == 0 and loaded["variant"] == PREFERRED, (loaded, stderr)
    module = kp.get_kernel("acme/good", version=1)
    assert module.VARIANT == PREFERRED
    assert module.__file__ == loaded["file"]


def test_a_pinned_version_or_revision_loads_that_snapshot(hub_cache):
    for n, refs in ((1, ("v1",)), (2, ("v2", "main"))):
        hub_cache.add("acme/pinned", sha(n), variant_files(FALLBACK, snapshot=sha(n)), refs=refs)
    cases = [
        ({"version": 1}, sha(1)),
        ({"version": 2}, sha(2)),
        ({"revision": sha(1)}, sha(1)),
        ({"revision": "main"}, sha(2)),
        ({"revision": "v1"}, sha(1)),
    ]
    _, hub, stderr = hub_get_kernel("acme/pinned", *(pin for pin, _ in cases))
    assert len(hub) == len(cases), stderr
    for (pin, snapshot), loaded in zip(cases, hub):
        assert loaded.get("snapshot") == snapshot, (pin, loaded)
        module = kp.get_kernel("acme/pinned", **pin)
        assert module.SNAPSHOT == snapshot, pin
        assert module.__file__ == loaded["file"]


def test_a_missing_version_is_the_hub_loaders_error(hub_cache):
    two_variants(hub_cache, "acme/versions")
    _, [loaded], _ = hub_get_kernel("acme/versions", {"version": 3})
    assert loaded["error"] == "ValueError"
    with pytest.raises(kp.PreflightError) as e:
        kp.get_kernel("acme/versions", version=3)
    assert e.value.exit_code == 2
    assert str(e.value) == loaded["message"] == "Version 3 not found, available versions: 1"


def test_a_pin_is_required_as_by_the_hub_loader(hub_cache):
    two_variants(hub_cache, "acme/unpinned")
    with pytest.raises(ValueError, match="A kernel version or revision must be specified"):
        kp.get_kernel("acme/unpinned")


def untrusted(repo_id, local_files_only, trust_remote_code):
    """The hub's trust check answering that the publisher is not trusted
    (offline the real one cannot ask the hub and lets the cache through)."""
    if trust_remote_code is True or (isinstance(trust_remote_code, list) and repo_id in trust_remote_code):
        return
    raise ValueError(
        f"Kernel repository '{repo_id}' is not from a trusted publisher. "
        "Set trust_remote_code=True or add the repository ID to the trust_remote_code allowlist "
        "to allow loading kernels from untrusted sources."
    )


def test_a_trust_refusal_is_raised_never_bypassed(hub_cache, monkeypatch, tmp_path):
    import kernels
    import kernels.resolver

    monkeypatch.setenv("PREFLIGHT_CACHE", str(tmp_path / "outcomes"))
    two_variants(hub_cache, "shady/relu")
    monkeypatch.setattr(kernels.resolver, "_check_trust_remote_code", untrusted)
    with pytest.raises(ValueError, match="not from a trusted publisher") as hub:
        kernels.get_kernel("shady/relu", version=1)
    with pytest.raises(ValueError, match="not from a trusted publisher") as ours:
        kp.get_kernel("shady/relu", version=1)
    assert str(ours.value) == str(hub.value)
    # Refused before anything ran: no probe, no outcome kept.
    assert not (tmp_path / "outcomes").exists() or not any((tmp_path / "outcomes").rglob("*.json"))
    # The caller's own answer lets it through, as with the hub loader.
    assert kp.get_kernel("shady/relu", version=1, trust_remote_code=["shady/relu"]).VARIANT == PREFERRED


def test_nothing_working_raises_with_each_reason(hub_cache):
    two_variants(
        hub_cache,
        "acme/broken",
        preferred={"body": EXIT_1},
        fallback={"body": MISSING_DEPENDENCY},
    )
    with pytest.raises(kp.KernelLoadError) as e:
        kp.get_kernel("acme/broken", version=1)
    text = str(e.value)
    assert "no variant of acme/broken could be loaded here" in text
    # The CUDA message decides over the bare exit code.
    assert re.search(rf"{PREFERRED}\s+unsupported_arch: CUDA error", text), text
    assert re.search(rf"{FALLBACK}\s+missing_dependency", text), text
    assert "relu_native_helper_not_installed" in text
    assert e.value.exit_code == 1
    assert {c.variant for c in e.value.selection.alternatives} == {PREFERRED, FALLBACK}


def test_a_variant_refused_by_the_hub_validators_is_skipped_for_the_next(hub_cache):
    # The preferred one declares a dependency the hub's validator refuses:
    # its probe runs that validator and fails, so the next one is loaded.
    two_variants(hub_cache, "acme/deps", preferred={"metadata": {"python-depends": ["no-such-dependency"]}})
    module = kp.get_kernel("acme/deps", version=1)
    assert module.VARIANT == FALLBACK


def test_local_kernels_overrides_the_hub_as_in_get_kernel(hub_cache, monkeypatch, tmp_path):
    local = tmp_path / "checkout"
    for path, content in {
        **variant_files(PREFERRED, body=EXIT_1),
        **variant_files(FALLBACK, snapshot="local"),
    }.items():
        (local / path).parent.mkdir(parents=True, exist_ok=True)
        (local / path).write_bytes(content)
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/local={local}")
    module = kp.get_kernel("acme/local", version=1)
    assert module.SNAPSHOT == "local"
    assert "acme/local" not in sys.modules
