"""The flag changes only what it exists to change (docs/flag.md): every
entry point of `kernels` (each supported release in turn), offline, each call in a fresh interpreter,
in three configurations:

- `plain`: an environment with `kernels` and without kernel-preflight
  (`PREFLIGHT_PLAIN_PYTHON`, made by scripts/test-python.sh);
- `unset`: this environment, the wheel installed, `KERNEL_PREFLIGHT` unset;
- `flag`: this environment with `KERNEL_PREFLIGHT=1`.

What each call gave is compared whole: the variant, module and file
loaded, or the exception's type, message and notes, or the death of the
interpreter; the warnings and log records it left. `unset` must equal
`plain` everywhere. `flag` must equal `plain` everywhere but where plain
`kernels` dies or fails on a variant that does not work here, which
`DIFFERENCES` lists, each with what the flag gives instead; where both
raise, the flag may add one note (preflight's table of variants).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXIT_1, MISSING_DEPENDENCY, HubCache, sha, variant_files

PICK, OTHER = "torch-cpu", "torch-universal"  # the loader's order without torch
ILLEGAL = {"python-depends": ["kepler-22b"]}
BROKEN = '{"name": "toy-relu", "id": '

# Each kernel: its pick's and the other variant's breakage (None: works).
KERNELS = {
    "acme/works": ({}, {}),
    "acme/pick-dies": ({"body": EXIT_1}, {}),
    "acme/pick-raises": ({"body": MISSING_DEPENDENCY}, {}),
    "acme/all-raise": ({"body": MISSING_DEPENDENCY}, {"body": MISSING_DEPENDENCY}),
    "acme/all-die": ({"body": EXIT_1}, {"body": EXIT_1}),
    "acme/illegal-dep": ({"metadata": ILLEGAL}, {}),
    "acme/broken-metadata": ({"metadata_text": BROKEN}, {}),
    "acme/all-broken-metadata": ({"metadata_text": BROKEN}, {"metadata_text": BROKEN}),
}
COMMIT = {repo: sha(i + 1) for i, repo in enumerate(sorted(KERNELS))}


def snapshot(repo: str) -> str:
    return f"SNAPSHOTS[{repo!r}]"


# name -> the calls made in one interpreter (Python expressions).
CASES: dict[str, list[str]] = {}
for repo in KERNELS:
    short = repo.split("/")[1]
    CASES[f"get_kernel {short}"] = [f"kernels.get_kernel({repo!r}, version=1)"]
    CASES[f"has_kernel {short}"] = [f"kernels.has_kernel({repo!r}, version=1)"]
    CASES[f"get_local_kernel repo {short}"] = [f"kernels.get_local_kernel({snapshot(repo)})"]
for repo in ("acme/works", "acme/pick-dies"):
    short = repo.split("/")[1]
    CASES[f"get_kernel revision {short}"] = [f"kernels.get_kernel({repo!r}, revision='main')"]
    CASES[f"get_kernel backend {short}"] = [f"kernels.get_kernel({repo!r}, version=1, backend='cpu')"]
    CASES[f"get_kernel twice {short}"] = [f"kernels.get_kernel({repo!r}, version=1)"] * 2
    CASES[f"get_local_kernel build {short}"] = [f"kernels.get_local_kernel({snapshot(repo)} / 'build')"]
    for variant in (PICK, OTHER):
        CASES[f"get_local_kernel {variant} {short}"] = [
            f"kernels.get_local_kernel({snapshot(repo)} / 'build' / {variant!r})"
        ]
    CASES[f"load_kernel {short}"] = [f"kernels.load_kernel({repo!r}, lockfile=LOCK)"]
    CASES[f"get_locked_kernel {short}"] = [f"kernels.get_locked_kernel({repo!r}, lockfile=LOCK)"]
    CASES[f"LayerRepository {short}"] = [
        f"kernels.LayerRepository({repo!r}, layer_name='Relu', version=1).load()"
    ]
    CASES[f"LOCAL_KERNELS {short}"] = [f"kernels.get_kernel('acme/elsewhere', version=1)"]
CASES["get_kernel absent"] = ["kernels.get_kernel('acme/absent', version=1)"]
CASES["get_kernel no revision"] = ["kernels.get_kernel('acme/works')"]

# Where the flag differs from plain `kernels`, and what it gives instead:
# ("loads", variant) or ("raises", a class its exception must be).
DIFFERENCES = {
    # The pick dies: a working variant instead, or no variant, never death.
    **{
        case: ("loads", OTHER)
        for case in CASES
        if case.endswith("pick-dies") and "has_kernel" not in case and OTHER not in case
    },
    "get_local_kernel torch-cpu pick-dies": ("raises", "FileNotFoundError"),  # the caller named it: no sibling
    # The layer repository loads the working variant, which (a toy) has no
    # layers: the loader's own error for that, where plain kernels died.
    "LayerRepository pick-dies": ("raises", "ValueError"),
    "get_kernel all-die": ("raises", "FileNotFoundError"),
    "get_local_kernel repo all-die": ("raises", "FileNotFoundError"),
    # The pick fails: a working variant instead of the loader's error.
    "get_kernel pick-raises": ("loads", OTHER),
    "get_local_kernel repo pick-raises": ("loads", OTHER),
    "get_kernel broken-metadata": ("loads", OTHER),
    "get_local_kernel repo broken-metadata": ("loads", OTHER),
    # has_kernel answers whether get_kernel would load a working variant.
    "has_kernel pick-dies": None,
    "has_kernel all-raise": ("returns", False),
    "has_kernel all-die": ("returns", False),
    "has_kernel broken-metadata": ("returns", True),
    "has_kernel all-broken-metadata": ("returns", False),
    "has_kernel illegal-dep": ("returns", False),
    # Both fail: the loader's error, with kernels' own message and notes,
    # that is also a FileNotFoundError where a class can be both.
    "get_kernel all-broken-metadata": ("raises", "FileNotFoundError"),
    "get_local_kernel repo all-broken-metadata": ("raises", "FileNotFoundError"),
}
DIFFERENCES = {case: how for case, how in DIFFERENCES.items() if how is not None}

CHILD = r"""
import json, logging, sys, warnings
from pathlib import Path
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])
logging.getLogger().addHandler(Keep())
warnings.simplefilter("always")
import kernels
SNAPSHOTS = {k: Path(v) for k, v in json.loads(sys.argv[2]).items()}
LOCK = Path(sys.argv[3])
for call in json.loads(sys.argv[1]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = eval(call)
        except BaseException as e:
            answer = {"error": type(e).__name__, "is_a": [c.__name__ for c in type(e).__mro__],
                      "message": str(e), "notes": list(getattr(e, "__notes__", []))}
        else:
            if isinstance(value, bool):
                answer = {"returns": value}
            else:
                answer = {"variant": getattr(value, "VARIANT", None), "snapshot": getattr(value, "SNAPSHOT", None),
                          "module": value.__name__, "file": value.__file__}
    answer["warnings"] = [[w.category.__name__, str(w.message)] for w in caught]
    answer["logs"] = records[:]
    records.clear()
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The hub cache, a lock, a checkout for LOCAL_KERNELS, the variables."""
    root = tmp_path_factory.mktemp("transparency")
    cache = HubCache(root / "hub")
    snapshots = {}
    for repo, (pick, other) in KERNELS.items():
        files = {**variant_files(PICK, snapshot=COMMIT[repo], **pick), **variant_files(OTHER, snapshot=COMMIT[repo], **other)}
        snapshots[repo] = str(cache.add(repo, COMMIT[repo], files, refs=("main", "v1")))
    lock = root / "kernels.lock"
    lock.write_text(
        json.dumps(
            [
                {"dependency": {"repo-id": repo, "version": 1}, "lock": {"commit": COMMIT[repo]}}
                for repo in ("acme/works", "acme/pick-dies")
            ]
        )
    )
    env = {"KERNELS_CACHE": str(cache.root), "HF_HUB_OFFLINE": "1"}
    return snapshots, lock, env


def plain_python() -> str:
    python = os.environ.get("PREFLIGHT_PLAIN_PYTHON")
    assert python and Path(python).exists(), (
        "PREFLIGHT_PLAIN_PYTHON must name an interpreter with the kernels release under test and "
        "without kernel-preflight "
        "(scripts/test-python.sh makes one)"
    )
    return python


def run(python: str, calls: list[str], world, flag: bool, local: str = "") -> dict:
    snapshots, lock, env = world
    full = {**os.environ, **env}
    full.pop("KERNEL_PREFLIGHT", None)
    full.pop("LOCAL_KERNELS", None)
    if flag:
        full["KERNEL_PREFLIGHT"] = "1"
    if local:
        full["LOCAL_KERNELS"] = f"acme/elsewhere={local}"
    done = subprocess.run(
        [python, "-c", CHILD, json.dumps(calls), json.dumps(snapshots), str(lock)],
        capture_output=True,
        text=True,
        timeout=300,
        env=full,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(answers) < len(calls):
        answers.append({"died": done.returncode})
    return {"answers": answers, "stderr": done.stderr}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_flag_differs_from_plain_kernels_only_where_it_exists_to(case, world):
    calls = CASES[case]
    local = world[0][f"acme/{case.rsplit(' ', 1)[1]}"] if case.startswith("LOCAL_KERNELS") else ""
    plain = run(plain_python(), calls, world, flag=False, local=local)
    unset = run(sys.executable, calls, world, flag=False, local=local)
    flag = run(sys.executable, calls, world, flag=True, local=local)
    assert unset["answers"] == plain["answers"], (plain, unset)

    how = DIFFERENCES.get(case)
    for ours, theirs in zip(flag["answers"], plain["answers"]):
        if how is None:
            assert_same(ours, theirs, flag["stderr"])
        elif how[0] == "loads":
            assert ours.get("variant") == how[1], (ours, theirs, flag["stderr"])
        elif how[0] == "returns":
            assert ours.get("returns") is how[1], (ours, theirs, flag["stderr"])
        else:
            assert how[1] in ours.get("is_a", []), (ours, theirs, flag["stderr"])
            if "error" in theirs:
                assert_carries(ours, theirs)
    assert len(flag["answers"]) == len(calls), flag


def assert_same(ours: dict, theirs: dict, stderr: str) -> None:
    """Equal, but for the one note (preflight's table) a raise may carry."""
    if "error" in theirs and "error" in ours:
        assert_carries(ours, theirs)
        assert ours["is_a"] == theirs["is_a"], (ours, theirs)
        assert ours["warnings"] == theirs["warnings"] and ours["logs"] == theirs["logs"], (ours, theirs)
    else:
        assert ours == theirs, (ours, theirs, stderr)


def assert_carries(ours: dict, theirs: dict) -> None:
    """`ours` is an exception `theirs`'s `except` catches, with its message
    and notes, and at most one note more."""
    assert theirs["error"] in ours["is_a"], (ours, theirs)
    assert ours["message"] == theirs["message"], (ours, theirs)
    assert ours["notes"][: len(theirs["notes"])] == theirs["notes"], (ours, theirs)
    assert len(ours["notes"]) - len(theirs["notes"]) <= 1, (ours, theirs)
