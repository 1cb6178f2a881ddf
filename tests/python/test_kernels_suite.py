"""The hub loader's own test suite (the `kernels/tests` the sdist of the
release under test ships, unpacked by scripts/test-python.sh into
`PREFLIGHT_KERNELS_TESTS`),
run as it is and again with `KERNEL_PREFLIGHT=1`: every test must end the
same way, for the same reason. Without the network most of its tests stop
at a refusal of the hub or at a missing torch; they must stop at the same
one under the flag."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# The one difference the flag exists to make that the loader's suite can
# see (docs/flag.md, "Entry point by entry point"): 0.19's tests of
# UNSTABLE_KERNELS_ALL_LATEST ask `has_kernel` about a kernel whose variant
# imports torch, which this environment lacks. Plain `has_kernel` answers
# by name (True); under the flag it answers whether a variant works here
# (False), so those tests' `assert result is True` fails, and nothing else.
HAS_KERNEL_ANSWERS = re.compile(
    r"^tests/test_latest_version_opt_in\.py::"
    r"test_latest_(overrides_requested_version|offline_uses_only_cached_refs)\[.*-has_kernel\]$"
)
HAS_KERNEL_DIFFERENCE = (("PASSED", ""), ("FAILED", "assert False is True"))

OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - (.*))?$")


def outcomes(suite: Path, basetemp: Path, flag: bool) -> dict[str, tuple[str, str]]:
    env = {**os.environ}
    env.pop("KERNEL_PREFLIGHT", None)
    if flag:
        env["KERNEL_PREFLIGHT"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q", "-rA",
         "--continue-on-collection-errors", "--basetemp", str(basetemp)],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=900,
        env={**env, "COLUMNS": "400"},
    )
    found = {}
    for line in done.stdout.splitlines():
        m = OUTCOME.match(line)
        if m:
            found[m.group(2)] = (m.group(1), m.group(3) or "")
    assert found, done.stdout[-3000:] + done.stderr[-3000:]
    return found


def test_the_loaders_own_suite_ends_the_same_way_under_the_flag(tmp_path):
    suite = os.environ.get("PREFLIGHT_KERNELS_TESTS")
    assert suite and (Path(suite) / "tests").is_dir(), (
        "PREFLIGHT_KERNELS_TESTS must name the kernels/ folder of the installed release's sdist "
        "(scripts/test-python.sh unpacks it)"
    )
    plain = outcomes(Path(suite), tmp_path / "run", flag=False)
    flagged = outcomes(Path(suite), tmp_path / "run", flag=True)
    assert sum(1 for kind, _ in plain.values() if kind == "PASSED") >= 100, plain
    differ = {t: (plain.get(t), flagged.get(t)) for t in plain.keys() | flagged.keys() if plain.get(t) != flagged.get(t)}
    expected = {t: d for t, d in differ.items() if HAS_KERNEL_ANSWERS.search(t) and d == HAS_KERNEL_DIFFERENCE}
    assert not differ.keys() - expected.keys(), {t: d for t, d in differ.items() if t not in expected}
