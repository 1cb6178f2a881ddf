"""Finding and running the `preflight` binary that ships with this package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

_EXE = "preflight.exe" if os.name == "nt" else "preflight"


class PreflightError(RuntimeError):
    """`preflight` failed: bad input (exit code 2), an internal error (3), or
    an answer of "no" where the call needed a yes (1).

    `text` is the report's text (the binary's message, or the table of why),
    `exit_code` its exit status (`None` when the binary could not be run).
    """

    def __init__(self, text: str, exit_code: int | None, stderr: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.exit_code = exit_code
        self.stderr = stderr


def find_preflight() -> Path:
    """The `preflight` binary: `$PREFLIGHT_BIN` when set, else the one
    installed next to this package (the environment's scripts folder, the
    user scheme's, or `<prefix>/bin` of a `--prefix` / `--target` install),
    else the first on `PATH`."""
    override = os.environ.get("PREFLIGHT_BIN")
    if override:
        path = Path(override)
        if not path.is_file():
            raise PreflightError(f"PREFLIGHT_BIN={override}: no such file", None)
        return path
    recorded = _recorded()
    if recorded is not None:
        return recorded
    import sysconfig

    candidates = [Path(sysconfig.get_path("scripts")) / _EXE]
    try:
        candidates.append(Path(sysconfig.get_path("scripts", scheme=_user_scheme())) / _EXE)
    except KeyError:
        pass
    # <prefix>/lib/pythonX.Y/site-packages/kernel_preflight/ (--prefix), or
    # <target>/kernel_preflight/ (--target): scripts go to <…>/bin.
    parents = Path(__file__).resolve().parents
    candidates += [parents[i] / "bin" / _EXE for i in (4, 1) if i < len(parents)]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(_EXE)
    if found:
        return Path(found)
    raise PreflightError(
        "cannot find the preflight binary (looked in "
        + ", ".join(str(p.parent) for p in candidates)
        + " and PATH); reinstall kernel-preflight or set PREFLIGHT_BIN",
        None,
    )


def _recorded() -> Optional[Path]:
    """The binary where the installer put it, as this package's wheel
    `RECORD` says (exact for any install scheme, and cheaper than asking
    `sysconfig`, which a verified `get_kernel` would pay in every fresh
    process); None when there is no such record (a source checkout)."""
    site = Path(os.path.abspath(__file__)).parent.parent
    try:
        infos = [e for e in os.listdir(site) if e.startswith("kernel_preflight-") and e.endswith(".dist-info")]
    except OSError:
        return None
    for info in infos:
        try:
            lines = (site / info / "RECORD").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name = line.split(",", 1)[0]
            if name.rsplit("/", 1)[-1] == _EXE:
                path = Path(os.path.normpath(site / name))
                if path.is_file() and os.access(path, os.X_OK):
                    return path
    return None


def _user_scheme() -> str:
    import sysconfig

    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    return "nt_user" if os.name == "nt" else "posix_user"


def run(
    args: Sequence[str], *, answers: Sequence[int] = (0,), env: Optional[Mapping[str, str]] = None
) -> subprocess.CompletedProcess[str]:
    """Run `preflight ARGS` (with `env` added to this process's
    environment); an exit code outside `answers` raises."""
    binary = find_preflight()
    try:
        done = subprocess.run(
            [str(binary), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=None if env is None else {**os.environ, **env},
        )
    except OSError as e:
        raise PreflightError(f"cannot run {binary}: {e}", None) from e
    if done.returncode not in answers:
        message = done.stderr.strip() or f"preflight {args[0]} exited with {done.returncode}"
        prefix = "preflight: error: "
        if message.startswith(prefix):
            message = message[len(prefix) :]
        raise PreflightError(message, done.returncode, done.stderr)
    return done


def run_json(
    args: Sequence[str], *, answers: Sequence[int] = (0,), env: Optional[Mapping[str, str]] = None
) -> tuple[Any, int]:
    """Run `preflight ARGS --json`: the document it printed, and its exit code."""
    done = run([*args, "--json"], answers=answers, env=env)
    try:
        return json.loads(done.stdout), done.returncode
    except ValueError as e:
        raise PreflightError(
            f"preflight {args[0]} printed no JSON ({e}): {done.stdout[:200]!r}",
            done.returncode,
            done.stderr,
        ) from e


class Started:
    """`preflight ARGS --json` started now and answered later (`answer`):
    a run that overlaps what the caller does meanwhile. Never raises:
    anything but a document printed with an exit code in `answers` is no
    answer (None), and the caller runs the command again its own way."""

    def __init__(
        self, args: Sequence[str], *, answers: Sequence[int] = (0, 1), binary: Optional[Path] = None
    ) -> None:
        self._answers = tuple(answers)
        try:
            self._process: Optional[subprocess.Popen[bytes]] = subprocess.Popen(
                [str(binary or find_preflight()), *args, "--json"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except (OSError, PreflightError):
            self._process = None

    def answer(self) -> Optional[Any]:
        """The document it printed, once it has ended; None when it printed
        none, failed, or could not be started."""
        process, self._process = self._process, None
        if process is None:
            return None
        out, _ = process.communicate()
        if process.returncode not in self._answers:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    def discard(self) -> None:
        """Waits for it without reading its answer (it ends at once: it
        answers from a cache), so that no process of it is left."""
        process, self._process = self._process, None
        if process is not None:
            process.communicate()
