"""Tickets: the outcome cache's answer about one variant, re-checked in
this process instead of by a `preflight` child.

`preflight check VARIANT --cached --ticket FILE` writes, beside a cached
pass, every input its answer depended on: the `stat` of each ordinary file
and folder it looked at (variant files, interpreter, site-packages, tools,
cache entries, the binary itself), the bytes of each `/sys` and `/proc`
file it read, the names of each `/sys` folder it listed, each variable it
read (and every `PREFLIGHT_` one). When each of them is still what it was,
the same command would print the same answer now, so the flag takes the
ticket's answer and starts no child (docs/flag.md, "The warm path").
Anything that does not hold, or cannot be read, is no answer: the caller
runs the command as before, which writes a new ticket.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from typing import Any, Optional, Sequence

# The format `preflight` writes (`seen::SCHEMA`).
SCHEMA = 1


def cache_dir() -> str:
    """The outcome cache's folder, as `preflight` finds it: `PREFLIGHT_CACHE`,
    else `$XDG_CACHE_HOME/kernel-preflight`, else `~/.cache/kernel-preflight`,
    else `$TMPDIR/kernel-preflight` (empty variables count as unset). The
    variables are inputs of every ticket too: a ticket found through another
    value than the one that wrote it does not hold."""
    explicit = os.environ.get("PREFLIGHT_CACHE")
    if explicit:
        return os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "kernel-preflight")
    home = os.environ.get("HOME")
    if home:
        return os.path.join(home, ".cache", "kernel-preflight")
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", "kernel-preflight")


def path_for(binary: str, argv: Sequence[str]) -> Optional[str]:
    """Where the ticket of `binary argv…` is kept; None when `binary`
    cannot be seen. The key holds the `stat` of `binary` as this process
    finds it (a wrapper script, or a link to the build: what a ticket's
    own record of the running binary cannot see)."""
    try:
        s = os.stat(binary)
    except (OSError, ValueError):
        return None
    seen = [s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns]
    text = json.dumps([binary, seen, list(argv)])
    key = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(cache_dir(), "tickets", key[:2], key + ".json")


def answer(binary: str, argv: Sequence[str]) -> Optional[Any]:
    """The document `binary argv…` would print now, from its ticket, when
    every input the ticket names is unchanged; None otherwise."""
    return check(binary, argv)[0]


def check(binary: str, argv: Sequence[str]) -> tuple[Optional[Any], str]:
    """`answer`, and why there is none (the first input that changed),
    or "holds"."""
    path = path_for(binary, argv)
    if path is None:
        return None, f"{binary} cannot be seen"
    try:
        with open(path, "rb") as f:
            ticket = json.loads(f.read())
    except (OSError, ValueError) as e:
        return None, f"no ticket: {e}"
    try:
        if ticket["schema"] != SCHEMA or ticket["argv"] != list(argv):
            return None, "a ticket of another format or question"
        # The binary that answered, as it ran (links resolved).
        if not _same_stat(ticket["binary"]["path"], ticket["binary"]["stat"]):
            return None, "the binary changed"
        for read in ticket["reads"]:
            if not _HOLDS[read["read"]](read):
                return None, f"changed: {read}"
        return ticket["answer"], "holds"
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return None, f"a damaged ticket: {e!r}"


def _same_stat(path: str, seen: Optional[dict]) -> bool:
    try:
        now = os.stat(path)
    except (OSError, ValueError):
        return seen is None
    if seen is None:
        return False
    # A folder's size says nothing of it: `preflight` keeps none.
    folder = stat.S_ISDIR(now.st_mode)
    return (
        seen["size"] == (None if folder else now.st_size)
        and seen["mtime_ns"] == now.st_mtime_ns
        and seen["ctime_ns"] == now.st_ctime_ns
        and seen["ino"] == now.st_ino
        and seen["dev"] == now.st_dev
    )


def _content(path: str) -> Optional[bytes]:
    """A regular file's bytes, read as `preflight` reads them (a FIFO or a
    device is never waited on); None when it cannot be."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)


def _listing(path: str) -> Optional[list]:
    try:
        return sorted(os.listdir(path))
    except (OSError, ValueError):
        return None


def _kind(path: str) -> Optional[str]:
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _resolved(path: str) -> Optional[str]:
    try:
        return os.path.realpath(path, strict=True)
    except TypeError:  # Python 3.9: no `strict`
        real = os.path.realpath(path)
        return real if os.path.exists(real) else None
    except (OSError, ValueError):
        return None


def _bytes_hold(read: dict) -> bool:
    recorded = read["bytes"]
    now = _content(read["path"])
    if recorded is None or now is None:
        return recorded is None and now is None
    return base64.b64decode(recorded) == now


_HOLDS = {
    "stat": lambda r: _same_stat(r["path"], r["seen"]),
    "content": _bytes_hold,
    "listing": lambda r: _listing(r["path"]) == r["names"],
    "kind": lambda r: _kind(r["path"]) == r["kind"],
    "resolved": lambda r: _resolved(r["path"]) == r["to"],
    "var": lambda r: os.environ.get(r["name"]) == r["value"],
    "prefix": lambda r: {k: v for k, v in os.environ.items() if k.startswith(r["prefix"])} == r["vars"],
}
