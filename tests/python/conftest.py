"""Shared fixtures: hub caches built by the test, the hub loader run in a
child process (a variant that calls exit(1) must not end the test run),
and a hermetic environment.

The suite runs offline (`HF_HUB_OFFLINE=1`, set here before `kernels` and
`huggingface_hub` are imported); the download tests talk to a stand-in hub
on the loopback address from child processes that they start online.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

os.environ["HF_HUB_OFFLINE"] = "1"
# No user token or user cache reaches the tests.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="kp-hf-home-")
os.environ.pop("HF_TOKEN", None)
os.environ.pop("LOCAL_KERNELS", None)
# Each test says whether the loader is verified.
os.environ.pop("KERNEL_PREFLIGHT", None)

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def sha(n: int) -> str:
    """A commit hash."""
    return f"{n:x}" * 40 if n < 16 else f"{n:040x}"


def variant_files(
    variant: str,
    *,
    body: Optional[str] = None,
    snapshot: str = "",
    metadata: Optional[dict] = None,
    metadata_text: Optional[str] = None,
) -> dict[str, bytes]:
    """The files of one variant: `__init__.py` (by default a working relu
    that tells which variant and snapshot it is) and `metadata.json`."""
    if body is None:
        body = (
            f"VARIANT = {variant!r}\nSNAPSHOT = {snapshot!r}\n\n"
            "def relu(xs):\n    return [max(x, 0.0) for x in xs]\n"
        )
    doc = {
        "name": "toy-relu",
        "id": f"_toy_relu_{uuid.uuid4().hex[:12]}",
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"},
    }
    doc.update(metadata or {})
    text = metadata_text if metadata_text is not None else json.dumps(doc)
    return {
        f"build/{variant}/__init__.py": body.encode(),
        f"build/{variant}/metadata.json": text.encode(),
    }


def age(*roots: Path) -> None:
    """Every file and folder under `roots` last changed a minute ago: a
    `stat` taken now is settled (a ticket, like the cache's warm records,
    trusts no file changed within the last 2 s)."""
    ago = time.time() - 60
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in files + dirs:
                os.utime(os.path.join(folder, name), (ago, ago), follow_symlinks=False)
        os.utime(root, (ago, ago))


def _example(name: str):
    """A module of examples/transformers, loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "transformers" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A relu kernel repository's own smoke (`benchmarks/benchmark.py`, the hub's
# convention), as the example hub cache ships it.
RELU_BENCHMARK: bytes = _example("make_hub_cache").BENCHMARK.encode()

EXIT_1 = (
    "import os, sys\n"
    "sys.stderr.write('CUDA error (relu.cu:42): no kernel image is available for execution on the device\\n')\n"
    "sys.stderr.flush()\n"
    "os._exit(1)\n"
)
SEGFAULT = "import ctypes\nctypes.string_at(0)\n"
MISSING_DEPENDENCY = "import relu_native_helper_not_installed\n"


class HubCache:
    """A hub cache (`KERNELS_CACHE`) in the layout `kernels` reads."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, repo: str) -> Path:
        return self.root / ("kernels--" + repo.replace("/", "--"))

    def add(self, repo: str, commit: str, files: dict[str, bytes], refs: tuple[str, ...] = ()) -> Path:
        """A snapshot of `repo` at `commit` holding `files`, named by `refs`."""
        folder = self.folder(repo)
        snapshot = folder / "snapshots" / commit
        for path, content in files.items():
            target = snapshot / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        for ref in refs:
            (folder / "refs").mkdir(parents=True, exist_ok=True)
            (folder / "refs" / ref).write_text(commit)
        return snapshot


@pytest.fixture(scope="session", autouse=True)
def outcome_cache(tmp_path_factory):
    """One outcome cache for the session, never the user's: the machine's
    full fingerprint is measured once, and outcomes are keyed by each
    variant's content, which every test makes unique."""
    path = tmp_path_factory.mktemp("outcomes")
    os.environ["PREFLIGHT_CACHE"] = str(path)
    return path


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> HubCache:
    """An empty hub cache of this test's own."""
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("KERNELS_CACHE", str(root))
    return HubCache(root)


def readme_output(command: str) -> str:
    """The ```text block the README shows right after the code block that
    ends with the line `command`: what that command prints."""
    import re

    readme = (ROOT / "README.md").read_text()
    shown = re.search(re.escape(command) + r"\n```\n\n```text\n(.*?)```", readme, re.S)
    assert shown, "the README's output block after `%s` moved" % command
    return shown.group(1)


def example_hub(tmp_path) -> Path:
    """The offline example hub cache, made as the README makes it
    (examples/transformers/make_hub_cache.py)."""
    hub = tmp_path / "hub"
    made = subprocess.run(
        [sys.executable, str(ROOT / "examples/transformers/make_hub_cache.py"), str(hub)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return hub


def run_python(
    code: str, env: Optional[dict] = None, timeout: float = 120, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter of this environment, with `env` added
    to this one's and the variables in `unset` removed."""
    full = {**os.environ, **(env or {})}
    for name in unset:
        full.pop(name, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=full)


LOAD = """
import json, sys
{imports}
for call in {calls!r}:
    try:
        module = eval(call)
    except BaseException as e:
        print(json.dumps({{"error": type(e).__name__, "message": str(e),
                          "is_a": [c.__name__ for c in type(e).__mro__]}}), flush=True)
    else:
        print(json.dumps({{"file": module.__file__, "variant": getattr(module, "VARIANT", None),
                          "snapshot": getattr(module, "SNAPSHOT", None)}}), flush=True)
"""


def load_in_child(
    calls: list[str], imports: str = "import kernels", env: Optional[dict] = None, unset: tuple[str, ...] = ()
):
    """Loader calls in one child, in order: its exit code, what each call
    printed (JSON; fewer entries when the child died), and its stderr."""
    done = run_python(LOAD.format(imports=imports, calls=calls), env=env, unset=unset)
    docs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, docs, done.stderr
