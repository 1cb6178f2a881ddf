"""The commands of `preflight`, called with `--json` and read as dataclasses.

Nothing here decides anything: which variants the hub accepts, which work,
which to prefer are the binary's answers. Probes run in the calling
interpreter (`sys.executable`) unless `python=` names another.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from ._binary import run_json
from ._errors import NoWorkingVariant, why_table
from ._types import (
    CheckReport,
    Decision,
    Fingerprint,
    KernelSummary,
    Selection,
    VariantResult,
)

PathOrRepo = Union[str, "os.PathLike[str]"]

_REPO_ID = re.compile(r"[^/\s]+/[^/\s]+")


def _python(python: Optional[PathOrRepo]) -> list[str]:
    return ["--python", os.fspath(python) if python is not None else sys.executable]


def _pin(revision: Optional[str], version: Optional[int]) -> list[str]:
    if revision is not None and version is not None:
        raise ValueError("Only one of `revision` or `version` must be specified.")
    if revision is not None:
        return ["--revision", revision]
    if version is not None:
        return ["--version", str(int(version))]
    return []


def _target(target: PathOrRepo) -> list[str]:
    """A path that exists (or any `os.PathLike`) is a directory target; an
    `ORG/NAME` that is not a path is a kernel in the hub cache."""
    if not isinstance(target, str) or os.path.exists(target) or not _REPO_ID.fullmatch(target):
        return [os.fspath(target)]
    return ["--repo", target]


def _probing(
    jobs: Optional[int], timeout: Optional[float], smoke: Optional[PathOrRepo], no_cache: bool
) -> list[str]:
    args = []
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if timeout is not None:
        args += ["--timeout", str(timeout)]
    if smoke is not None:
        args += ["--smoke", os.fspath(smoke)]
    if no_cache:
        args.append("--no-cache")
    return args


def fingerprint(*, full: bool = False, python: Optional[PathOrRepo] = None) -> Fingerprint:
    """This machine's description and the hash that keys cached outcomes."""
    doc, _ = run_json(["fingerprint", *(["--full"] if full else []), *_python(python)])
    return Fingerprint.from_json(doc)


def resolve(
    target: Optional[PathOrRepo] = None,
    *,
    variants: Optional[Iterable[str]] = None,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    system: Optional[str] = None,
    python: Optional[PathOrRepo] = None,
) -> list[Decision]:
    """The hub loader's name-level decisions, in its preference order
    (accepted first), for a target or a list of variant names."""
    args = ["resolve"]
    if variants is not None:
        names = list(variants)
        if not names:
            return []
        args += ["--variants", ",".join(names)]
    elif target is not None:
        args += _target(target) + _pin(revision, version)
    else:
        raise ValueError("resolve needs a target or variants=")
    if system is not None:
        args += ["--system", system]
    doc, _ = run_json([*args, *_python(python)], answers=(0, 1))
    return [Decision.from_json(d) for d in doc["decisions"]]


def check(
    target: PathOrRepo,
    *more: PathOrRepo,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    all_variants: bool = False,
    jobs: Optional[int] = None,
    timeout: Optional[float] = None,
    smoke: Optional[PathOrRepo] = None,
    no_cache: bool = False,
    python: Optional[PathOrRepo] = None,
) -> CheckReport:
    """Probe every variant of each target in an isolated child (also those
    for another OS or CPU with `all_variants`); a target without a working
    variant is data (`ok` is False), not an error."""
    args = ["check"]
    for t in (target, *more):
        args += _target(t)
    args += _pin(revision, version) + _probing(jobs, timeout, smoke, no_cache)
    if all_variants:
        args.append("--all")
    doc, code = run_json([*args, *_python(python)], answers=(0, 1))
    return CheckReport(
        ok=code == 0,
        fingerprint=Fingerprint.from_json(doc["fingerprint"]),
        results=[VariantResult.from_json(r) for r in doc["results"]],
        raw=doc,
    )


def select(
    repo_id_or_path: PathOrRepo,
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    fastest: bool = False,
    workload: Optional[str] = None,
    timeout: Optional[float] = None,
    smoke: Optional[PathOrRepo] = None,
    no_cache: bool = False,
    python: Optional[PathOrRepo] = None,
) -> Selection:
    """The best variant that works here (instant when its outcomes are
    cached); raises `NoWorkingVariant`, with the table of why, when none does.
    With `fastest=True` the one with the shortest median that `bench` kept
    for this machine (of `workload`, when given); `Selection.speed` says what
    the ranking rests on and whether the top two are told apart."""
    if workload is not None and not fastest:
        raise ValueError("`workload` ranks by bench results: it needs fastest=True")
    args = ["select", *_target(repo_id_or_path), *_pin(revision, version)]
    args += _probing(None, timeout, smoke, no_cache)
    if fastest:
        args.append("--fastest")
    if workload is not None:
        args += ["--workload", workload]
    doc, code = run_json([*args, *_python(python)], answers=(0, 1))
    selection = Selection.from_json(doc)
    if code == 1 or selection.chosen is None:
        raise NoWorkingVariant(selection, os.fspath(repo_id_or_path))
    return selection


def warmup_fetching(
    fetch: Optional[Callable[..., Any]],
    targets: Sequence[PathOrRepo] = (),
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    lock: Optional[PathOrRepo] = None,
    project: Optional[PathOrRepo] = None,
    trust_remote_code: Union[bool, list[str]] = False,
    jobs: Optional[int] = None,
    timeout: Optional[float] = None,
    python: Optional[PathOrRepo] = None,
) -> list[KernelSummary]:
    """`warmup` (`_hub.warmup`, the public one), each kernel's candidates
    fetched first with `fetch` (`download`) when it is given: this module
    knows the command, not the hub."""
    if isinstance(targets, (str, os.PathLike)):
        targets = [targets]
    pins = _project_pins(lock, project)
    args = ["warmup"]
    for t in targets:
        target = _target(t)
        if fetch is not None and target[0] == "--repo":
            fetch(target[1], revision=revision, version=version, trust_remote_code=trust_remote_code, python=python)
        args += target
    if fetch is not None:
        for repo, pin in pins:
            fetch(repo, trust_remote_code=trust_remote_code, python=python, **pin)
    if lock is not None:
        args += ["--lock", os.fspath(lock)]
    if project is not None:
        args += ["--project", os.fspath(project)]
    args += _pin(revision, version) + _probing(jobs, timeout, None, False)
    doc, _ = run_json([*args, *_python(python)])
    return [KernelSummary.from_json(k) for k in doc]


def _project_pins(lock: Optional[PathOrRepo], project: Optional[PathOrRepo]) -> list[tuple[str, dict]]:
    """The kernels a lock file and a project pin, read by the hub loader's
    own parsers (so that a bad file raises what `kernels` raises): repo ids
    with the `revision=` or `version=` that names each snapshot."""
    pins: list[tuple[str, dict]] = []
    if lock is not None:
        from ._loader import current

        with open(lock) as f:
            locks = current().native().KernelLocks.from_json(f.read())
        pins += [(dep.repo_id, {"revision": locked.commit}) for dep, locked in locks.items()]
    if project is not None:
        from ._loader import current

        tomllib = current().module("compat").tomllib
        path = os.path.join(os.fspath(project), "pyproject.toml")
        with open(path, "rb") as f:
            data = tomllib.load(f)
        dependencies = data.get("tool", {}).get("kernels", {}).get("dependencies")
        if not isinstance(dependencies, dict):
            raise ValueError(
                f"{path}: no [tool.kernels.dependencies] table (the kernels a project loads, "
                'as `kernels lock` reads them: "ORG/NAME" = VERSION)'
            )
        for repo, version in dependencies.items():
            if not isinstance(version, int) or isinstance(version, bool) or version < 0:
                raise ValueError(
                    f"{path}: [tool.kernels.dependencies] {repo!r} = {version!r}: expected a version number"
                )
            pins.append((repo, {"version": version}))
    return pins


__all__ = [
    "NoWorkingVariant",
    "check",
    "fingerprint",
    "resolve",
    "select",
    "warmup_fetching",
    "why_table",
]

