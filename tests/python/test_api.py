"""The package's thin layer over `preflight --json`, and the installed wheel."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import EXIT_1, ROOT, sha, variant_files

import kernel_preflight as kp


def crate_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    match = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert match, "Cargo.toml has no version"
    return match.group(1)


def installed() -> bool:
    try:
        importlib.metadata.version("kernel-preflight")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_preflight_version_matches_the_crate():
    done = kp._binary.run(["--version"])
    assert done.stdout.strip() == f"preflight {crate_version()}"


@pytest.mark.skipif(not installed(), reason="runs against the installed wheel (scripts/test-python.sh)")
def test_the_wheel_puts_preflight_next_to_the_package(monkeypatch):
    monkeypatch.delenv("PREFLIGHT_BIN", raising=False)
    assert importlib.metadata.version("kernel-preflight") == crate_version()
    binary = kp.find_preflight()
    assert binary == Path(sysconfig.get_path("scripts")) / "preflight"
    assert Path(sys.executable).parent == binary.parent  # on the venv's PATH


def test_find_preflight_honours_PREFLIGHT_BIN(monkeypatch, tmp_path):
    monkeypatch.setenv("PREFLIGHT_BIN", str(tmp_path / "nope"))
    with pytest.raises(kp.PreflightError, match="PREFLIGHT_BIN"):
        kp.find_preflight()


def test_fingerprint_describes_the_calling_interpreter():
    fp = kp.fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", fp.hash)
    interpreter = fp.raw["python"]["interpreter"]
    assert os.path.realpath(interpreter) == os.path.realpath(sys.executable)


def test_check_select_and_warmup_of_a_cached_kernel(hub_cache):
    files = {**variant_files("torch-cpu", body=EXIT_1), **variant_files("torch-universal", snapshot=sha(1))}
    hub_cache.add("acme/api", sha(1), files, refs=("main", "v1"))

    report = kp.check("acme/api", version=1)
    assert report.ok
    kinds = {r.variant: r.outcome.kind for r in report.results}
    assert kinds["torch-universal"] == "pass"
    assert kinds["torch-cpu"] in ("unsupported_arch", "exited")
    assert all(r.accepted for r in report.results)

    selection = kp.select("acme/api", version=1)
    assert selection.variant == "torch-universal"
    assert selection.path.endswith(f"snapshots/{sha(1)}/build/torch-universal")
    assert selection.cached  # check probed it already
    assert [c.variant for c in selection.passing] == ["torch-universal"]

    [summary] = kp.warmup()
    assert summary.kernel == "acme/api (main, v1)"
    assert (summary.variants, summary.cached, summary.passed) == (2, 2, 1)


def test_warmup_of_a_lock_and_of_a_project(hub_cache, tmp_path):
    import json

    files = {**variant_files("torch-cpu", body=EXIT_1), **variant_files("torch-universal", snapshot=sha(1))}
    hub_cache.add("acme/locked", sha(1), files, refs=("v1",))
    hub_cache.add("acme/versioned", sha(2), variant_files("torch-universal", snapshot=sha(2)), refs=("v3",))
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"dependency": {"repo-id": "acme/locked", "version": 1}, "lock": {"commit": sha(1)}}]))
    (tmp_path / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"acme/versioned" = 3\n')

    summaries = kp.warmup(lock=lock, project=tmp_path)
    assert [(s.kernel, s.variants, s.passed, s.best) for s in summaries] == [
        (f"acme/locked ({sha(1)})", 2, 1, "torch-universal"),
        ("acme/versioned (v3)", 1, 1, "torch-universal"),
    ]


def test_warmup_of_a_bad_lock_or_project_raises_what_kernels_raises(hub_cache, tmp_path):
    bad = tmp_path / "kernels.lock"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="Cannot parse KernelLocks"):
        kp.warmup(lock=bad)
    with pytest.raises(FileNotFoundError):
        kp.warmup(lock=tmp_path / "absent.lock")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n')
    with pytest.raises(ValueError, match=r"pyproject.toml: no \[tool.kernels.dependencies\] table"):
        kp.warmup(project=tmp_path)
    lock = tmp_path / "other.lock"
    lock.write_text('[{"dependency": {"repo-id": "acme/absent", "version": 1}, "lock": {"commit": "%s"}}]' % sha(9))
    with pytest.raises(kp.PreflightError, match="kernel acme/absent is not in the hub cache") as e:
        kp.warmup(lock=lock)
    assert e.value.exit_code == 2


def test_resolve_gives_the_hub_loaders_decisions():
    decisions = kp.resolve(variants=["torch-universal", "torch-cpu", "torch29-cpu-aarch64-darwin"])
    assert [(d.variant, d.accepted) for d in decisions] == [
        ("torch-cpu", True),
        ("torch-universal", True),
        ("torch29-cpu-aarch64-darwin", False),
    ]


def test_bad_input_raises_with_the_message_and_exit_code(tmp_path):
    with pytest.raises(kp.PreflightError) as e:
        kp.select(tmp_path / "missing")
    assert e.value.exit_code == 2
    assert str(e.value) == f"{tmp_path / 'missing'}: no such file or directory"


def test_select_without_a_working_variant_raises_the_table_of_why(hub_cache):
    hub_cache.add("acme/none", sha(2), variant_files("torch-universal", body=EXIT_1), refs=("v1",))
    with pytest.raises(kp.NoWorkingVariant) as e:
        kp.select("acme/none", version=1)
    assert e.value.exit_code == 1
    assert "torch-universal  unsupported_arch: CUDA error" in str(e.value)


SPIN = "def spin(n):\n    x = 0\n    for i in range(n):\n        x = (x + i) & 0xFFFF\n    return x\n"


def spin_files(variant: str, factor: int) -> dict[str, bytes]:
    """A variant whose `spin` does the same work `factor` times over."""
    body = f"{SPIN}\n\n_once = spin\n\n\ndef spin(n):\n    return [_once(n) for _ in range({factor})][0]\n"
    return variant_files(variant, body=body)


@pytest.fixture
def one_cpu():
    """This process, and the preflight it starts with the bench children,
    held to one CPU, as tests/bench.rs does: on a loaded 2-core machine two
    bench children on two vCPUs met different machines (a busy sibling) and
    the verdict came out `ambiguous` in 1 run of 7."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    yield
    os.sched_setaffinity(0, allowed)


def test_bench_times_the_variants_and_select_fastest_ranks_by_it(hub_cache, tmp_path, one_cpu):
    # The hub prefers torch-cpu; it spins three times as long.
    files = {**spin_files("torch-cpu", 3), **spin_files("torch-universal", 1)}
    hub_cache.add("acme/spin", sha(3), files, refs=("v1",))
    smoke = tmp_path / "smoke.py"
    smoke.write_text(f"{SPIN}\n\ndef smoke(kernel, device):\n    return kernel.spin(40000), spin(40000)\n")

    chart = tmp_path / "bench.svg"
    report = kp.bench("acme/spin", version=1, smoke=smoke, min_time=0.3, max_noise=1, cpu_time=True, plot=chart)
    assert report.workload == "smoke"
    # The chart of the same bench: a row per variant, the verdict in words.
    svg = chart.read_text()
    assert "\n1. torch-universal\n" in svg and "\n2. torch-cpu\n" in svg and "\nslower\n" in svg
    assert [v.variant for v in report.variants] == ["torch-universal", "torch-cpu"]
    fastest, slower = report.variants
    assert report.fastest == fastest and fastest.timed and fastest.timer == "cpu_time"
    assert fastest.summary.samples == len(fastest.samples_ms) >= 10
    assert slower.vs_fastest.verdict == "slower" and slower.vs_fastest.speedup < 1

    assert kp.select("acme/spin", version=1, smoke=smoke).variant == "torch-cpu"
    # Bench results belong to the probe job they were timed as: the same
    # smoke file.
    selection = kp.select("acme/spin", version=1, smoke=smoke, fastest=True)
    assert selection.variant == "torch-universal"
    assert selection.speed.basis == "bench" and selection.speed.workload == "default"
    assert selection.speed.runner_up == "torch-cpu"
    assert selection.speed.vs_runner_up.verdict == "faster" and not selection.speed.ambiguous
    assert kp.select("acme/spin", version=1).speed is None
    with pytest.raises(ValueError, match="fastest=True"):
        kp.select("acme/spin", version=1, workload="spin")
