"""Tickets (`check --cached --ticket`, `kernel_preflight._ticket`): a ticket
answers in this process only while every input of the answer holds; each
kind of input, changed, makes it no answer (and the flag then asks
preflight, as before)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import age, variant_files

from kernel_preflight import _ticket
from kernel_preflight._binary import find_preflight


class Ticketed:
    """One passing variant of its own, probed, with its ticket written."""

    def __init__(self, tmp: Path, binary: str) -> None:
        self.binary = binary
        self.cache = Path(os.environ["PREFLIGHT_CACHE"])
        for rel, content in variant_files("torch-cpu").items():
            (tmp / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "repo" / rel).write_bytes(content)
        self.variant = str(tmp / "repo" / "build" / "torch-cpu")
        self.argv = ["check", self.variant, "--python", sys.executable, "--cached", "--json"]
        probed = self.preflight(["check", self.variant, "--python", sys.executable, "--json"])
        assert probed.returncode == 0, probed.stderr
        age(tmp / "repo", self.cache)
        # The test environment was installed seconds ago: its folder's
        # times, too recent to vouch for its listing, are set back.
        ago = time.time() - 60
        os.utime(sysconfig.get_path("purelib"), (ago, ago))
        self.write()

    def preflight(self, args: list) -> subprocess.CompletedProcess:
        return subprocess.run([self.binary, *args], capture_output=True, text=True)

    def write(self) -> None:
        """`check --cached --ticket` twice (the first may refresh what the
        cache keeps of the aged files), the cache aged between."""
        path = _ticket.path_for(self.binary, self.argv)
        for settle in (True, False):
            done = self.preflight([*self.argv[:-1], "--ticket", path, "--json"])
            assert done.returncode == 0, done.stderr
            if settle:
                age(self.cache)
        assert os.path.isfile(path), done.stderr

    def answer(self):
        return _ticket.answer(self.binary, self.argv)

    def why(self) -> str:
        return _ticket.check(self.binary, self.argv)[1]


@pytest.fixture
def binary(tmp_path) -> str:
    """A copy of the binary of this test's own (its `stat` is an input)."""
    copy = tmp_path / "bin" / "preflight"
    copy.parent.mkdir()
    shutil.copy2(find_preflight(), copy)
    return str(copy)


def test_a_ticket_answers_what_the_command_prints(tmp_path, binary):
    t = Ticketed(tmp_path, binary)
    doc = t.answer()
    assert doc is not None, t.why()
    printed = t.preflight(t.argv)
    assert printed.returncode == 0, printed.stderr
    ours, theirs = doc["results"][0], json.loads(printed.stdout)["results"][0]
    assert ours["outcome"] == theirs["outcome"] and ours["path"] == theirs["path"]
    assert ours["outcome"]["kind"] == "pass" and ours["cached"] is True


def _touch_variant(t, monkeypatch):
    init = Path(t.variant) / "__init__.py"
    init.write_text(init.read_text() + "\n")


def _replace_binary(t, monkeypatch):
    data = Path(t.binary).read_bytes()
    os.unlink(t.binary)
    Path(t.binary).write_bytes(data)
    os.chmod(t.binary, 0o755)


def _clear_outcomes(t, monkeypatch):
    done = t.preflight(["cache", "clear"])
    assert done.returncode == 0, done.stderr


def _remove_metadata(t, monkeypatch):
    os.unlink(Path(t.variant) / "metadata.json")


CHANGES = {
    "a variant file": _touch_variant,
    "the binary replaced": _replace_binary,
    "the outcome cache cleared": _clear_outcomes,
    "the variant's metadata gone": _remove_metadata,
    "CUDA_VISIBLE_DEVICES set": lambda t, m: m.setenv("CUDA_VISIBLE_DEVICES", "1"),
    "a PREFLIGHT_ variable set": lambda t, m: m.setenv("PREFLIGHT_GPUS", "[]"),
    "a TRITON_ variable set": lambda t, m: m.setenv("TRITON_OVERRIDE_ARCH", "sm90"),
    "PATH changed": lambda t, m: m.setenv("PATH", "/nowhere:" + os.environ.get("PATH", "")),
    "the cache moved": lambda t, m: m.setenv("PREFLIGHT_CACHE", str(t.cache) + "-other"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_ticket_holds_only_while_its_inputs_do(tmp_path, binary, monkeypatch, change):
    t = Ticketed(tmp_path, binary)
    assert t.answer() is not None, t.why()
    CHANGES[change](t, monkeypatch)
    assert t.answer() is None, change


def test_a_live_file_is_checked_by_its_content_not_its_times(tmp_path, binary, monkeypatch):
    """`/sys` files keep their times when their content changes: a driver
    reloaded under the same size and times is seen all the same."""
    sysfs = tmp_path / "sys"
    version = sysfs / "module" / "nvidia" / "version"
    version.parent.mkdir(parents=True)
    version.write_text("550.54.15\n")
    monkeypatch.setenv("PREFLIGHT_SYSFS_ROOT", str(sysfs))
    t = Ticketed(tmp_path, binary)
    assert t.answer() is not None
    before = os.stat(version)
    version.write_text("560.11.02\n")
    os.utime(version, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert t.answer() is None


def test_a_damaged_or_foreign_ticket_is_no_answer(tmp_path, binary):
    t = Ticketed(tmp_path, binary)
    path = _ticket.path_for(t.binary, t.argv)
    good = Path(path).read_bytes()
    doc = json.loads(good)
    for bad in [
        b"",
        b"{",
        b"[]",
        json.dumps({**doc, "schema": 99}).encode(),
        json.dumps({**doc, "argv": [*t.argv, "--all"]}).encode(),
        json.dumps({**doc, "reads": [{"read": "unknown"}]}).encode(),
        json.dumps({**doc, "reads": [{"read": "stat"}]}).encode(),
    ]:
        Path(path).write_bytes(bad)
        assert t.answer() is None, bad[:80]
    Path(path).write_bytes(good)
    assert t.answer() is not None
