"""Fetching candidates through the hub's own client, against a stand-in of
the hub's HTTP API on 127.0.0.1. Each download runs in a child process
started online (`HF_HUB_OFFLINE=0`, `HF_ENDPOINT` at the stand-in); the
test itself stays offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXIT_1, RELU_BENCHMARK, load_in_child, run_python, sha, variant_files
from standin_hub import Repo, StandInHub

import kernel_preflight as kp

ACCEPTED = ["torch-cpu", "torch-universal"]  # by name, without torch
REJECTED = ["torch-cuda", "torch-xpu", "torch29-cpu-x86_64-windows"]


ILLEGAL = {"python-depends": ["kepler-22b"]}


def repository(commit: str, broken: bool = True) -> dict[str, bytes]:
    files = {"README.md": b"# toy relu\n", "benchmarks/benchmark.py": RELU_BENCHMARK}
    for variant in ACCEPTED + REJECTED:
        files.update(variant_files(variant, snapshot=commit))
    if broken:
        # The hub's preferred variant dies on import.
        files.update(variant_files("torch-cpu", body=EXIT_1))
    return files


@pytest.fixture
def hub(hub_cache):
    served = StandInHub(
        repos={
            "acme/relu": Repo(
                commits={sha(1): repository(sha(1)), sha(2): repository(sha(2))},
                branches={"main": sha(2), "v1": sha(1), "v2": sha(2)},
            ),
            "shady/relu": Repo(commits={sha(3): repository(sha(3))}, branches={"main": sha(3), "v1": sha(3)}),
            "acme/good": Repo(
                commits={sha(4): repository(sha(4), broken=False)}, branches={"main": sha(4), "v1": sha(4)}
            ),
            # The hub's pick declares a dependency outside the loader's
            # allowlist (kernels' own test_deps_validated_before_download).
            "acme/illegal-dep": Repo(
                commits={sha(5): {**repository(sha(5), broken=False), **variant_files("torch-cpu", metadata=ILLEGAL)}},
                branches={"main": sha(5), "v1": sha(5)},
            ),
            # The pick dies; the next candidate is one the loader refuses.
            "acme/refused-next": Repo(
                commits={sha(6): {**repository(sha(6)), **variant_files("torch-universal", metadata=ILLEGAL)}},
                branches={"main": sha(6), "v1": sha(6)},
            ),
        },
        trusted={"acme": True, "shady": False},
    )
    with served:
        yield served
    assert not served.unknown, f"requests the stand-in does not serve: {served.unknown}"


def online(hub) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_XET": "1"}


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def test_only_the_name_accepted_variants_and_benchmarks_are_fetched(hub, hub_cache):
    done = run_python(
        "import kernel_preflight as kp; print(kp.download('acme/relu', version=1))",
        env=online(hub),
    )
    assert done.returncode == 0, done.stderr
    snapshot = Path(done.stdout.strip().splitlines()[-1])
    folder = hub_cache.folder("acme/relu")
    assert snapshot == folder / "snapshots" / sha(1)
    expected = ["benchmarks/benchmark.py"] + [
        f"build/{v}/{f}" for v in ACCEPTED for f in ("__init__.py", "metadata.json")
    ]
    assert files_under(snapshot) == expected
    assert hub.fetched() == expected
    # The version's branch is recorded, so that offline calls find it.
    assert (folder / "refs" / "v1").read_text() == sha(1)

    # What kernels reads offline, preflight probes: the preferred variant
    # exits, the other one passes, smoked by the repository's benchmarks.
    selection = kp.select("acme/relu", version=1)
    assert selection.variant == "torch-universal"
    assert selection.chosen.outcome.depth == "verified"
    code, [loaded], stderr = load_in_child(
        [f"kernels.get_local_kernel(Path({selection.path!r}))"], imports="import kernels\nfrom pathlib import Path"
    )
    assert loaded["variant"] == "torch-universal", stderr
    # Offline from now on, the pinned version loads from what was fetched.
    code, [loaded], stderr = load_in_child(
        ["kernel_preflight.get_kernel('acme/relu', version=1)"], imports="import kernel_preflight"
    )
    assert loaded.get("variant") == "torch-universal", (loaded, stderr)


def test_get_kernel_online_fetches_probes_and_loads(hub, hub_cache):
    code, [loaded], stderr = load_in_child(
        ["kernel_preflight.get_kernel('acme/relu', version=2)"],
        imports="import kernel_preflight",
        env=online(hub),
    )
    assert code == 0 and loaded.get("variant") == "torch-universal", (loaded, stderr)
    assert loaded["snapshot"] == sha(2)
    assert not any(p.startswith("build/torch-cuda") for p in hub.fetched())


def test_an_untrusted_publisher_is_refused_before_anything_is_fetched(hub, hub_cache):
    code, [loaded], stderr = load_in_child(
        ["kernel_preflight.get_kernel('shady/relu', version=1)"],
        imports="import kernel_preflight",
        env=online(hub),
    )
    assert loaded["error"] == "ValueError", (loaded, stderr)
    assert "is not from a trusted publisher" in loaded["message"]
    assert hub.fetched() == []
    assert not hub_cache.folder("shady/relu").exists()
    # The hub loader refuses it in the same words.
    _, [hub_answer], _ = load_in_child(["kernels.get_kernel('shady/relu', version=1)"], env=online(hub))
    assert hub_answer == loaded


def test_offline_nothing_is_fetched(hub, hub_cache):
    assert kp.download("acme/relu", version=1) is None
    assert hub.log == []
    assert not hub_cache.folder("acme/relu").exists()


def test_warmup_with_download_is_a_new_machines_first_run(hub, hub_cache):
    done = run_python(
        "import json, kernel_preflight as kp\n"
        "print(json.dumps([s.__dict__ for s in kp.warmup(['acme/relu'], version=1, download=True)]))",
        env=online(hub),
    )
    assert done.returncode == 0, done.stderr
    [summary] = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["variants"], summary["passed"], summary["best"]) == (2, 1, "torch-universal")


def variant_files_of(fetched: list[str]) -> list[str]:
    """The variants whose files were fetched."""
    return sorted({p.split("/")[1] for p in fetched if p.startswith("build/")})


def test_the_flag_online_fetches_the_hubs_pick_and_nothing_more_when_it_works(hub, hub_cache):
    code, lines, stderr = load_in_child(
        ["kernels.get_kernel('acme/good', version=1)"], env={**online(hub), "KERNEL_PREFLIGHT": "1"}
    )
    assert code == 0 and lines[0].get("variant") == "torch-cpu", (lines, stderr)
    # What the hub loader fetches (its pick), and the repository's small
    # benchmarks/ (the smoke source).
    assert variant_files_of(hub.fetched()) == ["torch-cpu"]
    assert "benchmarks/benchmark.py" in hub.fetched()


def test_the_flag_online_fetches_a_further_candidate_only_when_the_pick_fails(hub, hub_cache):
    code, lines, stderr = load_in_child(
        ["kernels.get_kernel('acme/relu', version=2)"], env={**online(hub), "KERNEL_PREFLIGHT": "1"}
    )
    assert code == 0 and lines[0].get("variant") == "torch-universal", (lines, stderr)
    assert lines[0]["snapshot"] == sha(2)
    # The pick (which exits), then the next candidate; never a variant the
    # hub rejects by name.
    assert variant_files_of(hub.fetched()) == ACCEPTED


def test_without_the_flag_online_the_hubs_pick_kills_the_caller(hub, hub_cache):
    code, lines, stderr = load_in_child(
        ["kernels.get_kernel('acme/relu', version=2)"], env=online(hub), unset=("KERNEL_PREFLIGHT",)
    )
    assert code == 1 and lines == [], stderr
    assert variant_files_of(hub.fetched()) == ["torch-cpu"]


def test_the_flag_online_lets_the_loader_refuse_its_pick_before_anything_is_fetched(hub, hub_cache):
    call = ["kernels.get_kernel('acme/illegal-dep', version=1)"]
    _, [plain], _ = load_in_child(call, env=online(hub), unset=("KERNEL_PREFLIGHT",))
    plain_fetched = hub.fetched()
    hub.log.clear()
    shutil.rmtree(hub_cache.folder("acme/illegal-dep"))
    code, [flagged], stderr = load_in_child(call, env={**online(hub), "KERNEL_PREFLIGHT": "1"})
    # The loader's own ValueError, in its words, and not one file of the
    # variant fetched: only the metadata.json its validators read.
    assert plain["error"] == "ValueError" and "kepler-22b" in plain["message"], plain
    assert flagged == plain, stderr
    assert hub.fetched() == plain_fetched == ["build/torch-cpu/metadata.json"]


def test_the_flag_online_never_fetches_a_candidate_the_loader_refuses(hub, hub_cache):
    code, [loaded], stderr = load_in_child(
        ["kernels.get_kernel('acme/refused-next', version=1)"], env={**online(hub), "KERNEL_PREFLIGHT": "1"}
    )
    # The pick exits in its probe; the next candidate's metadata is read
    # and refused by the loader's validator, so none of its code is fetched
    # or run; nothing is left: the error transformers falls back on.
    assert "FileNotFoundError" in loaded["is_a"], (loaded, stderr)
    assert "torch-universal" in loaded["message"] and "kepler-22b" in loaded["message"], loaded
    fetched = hub.fetched()
    assert "build/torch-universal/metadata.json" in fetched
    assert "build/torch-universal/__init__.py" not in fetched, fetched


def test_offline_a_snapshot_the_loaders_own_online_call_fetched_loads_under_the_flag_on_every_release(
    hub, hub_cache
):
    """docs/flag.md, offline: a snapshot plain `get_kernel` fetched online
    (its pick only), asked for offline by its commit. kernels 0.17.2 with
    huggingface_hub 2.4 refuses it (its tree listing names files never
    fetched); 0.18 and 0.19 load it. Under the flag it loads on each."""
    import kernels

    code, [fetched], stderr = load_in_child(
        ["kernels.get_kernel('acme/good', version=1)"], env=online(hub), unset=("KERNEL_PREFLIGHT",)
    )
    assert fetched.get("variant") == "torch-cpu", (fetched, stderr)
    call = ["kernels.get_kernel('acme/good', revision=%r)" % sha(4)]
    _, [plain], _ = load_in_child(call, unset=("KERNEL_PREFLIGHT",))
    code, [flagged], stderr = load_in_child(call, env={"KERNEL_PREFLIGHT": "1"})
    assert flagged == fetched, (flagged, stderr)
    # By version: the branch 0.18 and 0.19 record when they fetch, and
    # 0.17.2 does not, flag or not.
    by_version = ["kernels.get_kernel('acme/good', version=1)"]
    _, [plain_version], _ = load_in_child(by_version, unset=("KERNEL_PREFLIGHT",))
    _, [flagged_version], stderr = load_in_child(by_version, env={"KERNEL_PREFLIGHT": "1"})
    assert flagged_version == plain_version, stderr
    if kernels.__version__.startswith("0.17."):
        assert plain["error"] == "FileNotFoundError", plain
        assert plain["message"].startswith("Cannot find a local snapshot for acme/good"), plain
        assert plain_version["error"] == "ValueError", plain_version
        assert plain_version["message"].startswith("Version 1 of 'acme/good' is not available in the local cache")
    else:
        assert plain == plain_version == fetched, (plain, plain_version)
