"""The verification `KERNEL_PREFLIGHT=1` puts in front of a `kernels` load.

The hub loader's resolver runs first, as it always does: its publisher-trust
check, the revision, version or lock pin, and its choice of variant by name
(the hub's pick). Then, before the loader validates and imports anything,
`preflight select` probes the variants of that snapshot that are on disk,
each in a child process of its own, and the variant loaded is the first
one in the loader's own preference order that passed. Online, nothing is
fetched beyond what the hub fetches unless it is needed: the hub's pick
(and the repository's small `benchmarks/`, the smoke source) first, one
further candidate at a time only when every variant fetched so far failed.
When nothing works, `KernelLoadError` — a `FileNotFoundError`, the type
`kernels` raises for "no build variant", which `kernelize` and
transformers fall back on — says why for each variant.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from ._binary import run, run_json

if TYPE_CHECKING:
    from ._types import Selection

_SCOPE: contextvars.ContextVar[Optional["_Scope"]] = contextvars.ContextVar("kernel_preflight_scope", default=None)

# The pick's metadata files the loader failed to read while a verified
# resolution ran (`_enable`'s reader appends to it).
FAILED_READS: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar(
    "kernel_preflight_failed_reads", default=None
)

# What this process already verified: (target, backend) -> the variant
# chosen. A process loads a kernel's variant once (`kernels` keeps it), so
# a later load of the same target asks nothing again.
_CHOSEN: dict[tuple, Path] = {}

# The kernels whose dependencies are being verified (a cycle guard).
_RESOLVING: contextvars.ContextVar[frozenset] = contextvars.ContextVar(
    "kernel_preflight_resolving", default=frozenset()
)


class _Scope:
    """A verified load asked for by a call (`kernel_preflight.get_kernel`)
    rather than by the whole process."""

    def __init__(self, python: Optional[str]) -> None:
        self.python = python


def active_scope() -> Optional[_Scope]:
    """The scope of the call being served, if a call asked for one."""
    return _SCOPE.get()


def python_of(scope: Optional[_Scope], default: Optional[str]) -> str:
    """The interpreter the probes run in: the call's, else the process's
    (`enable(python=…)`), else this one."""
    if scope is not None and scope.python is not None:
        return scope.python
    return default or sys.executable


@contextlib.contextmanager
def scope(python: Optional[Any] = None) -> Iterator[None]:
    """Verify the `kernels` loads made inside the block."""
    from . import _enable

    _enable.install()
    seam = getattr(sys.modules[_enable.SEAM_MODULE], _enable.SEAM_FUNCTION)
    if getattr(seam, "__kernel_preflight_original__", None) is None:
        raise RuntimeError(
            _enable.seam_problem(seam) or "kernel_preflight could not put verification in front of kernels' loader"
        )
    token = _SCOPE.set(_Scope(os.fspath(python) if python is not None else None))
    try:
        yield
    finally:
        _SCOPE.reset(token)


class VerifyingResolver:
    """A `kernels` resolver (its `Resolver` protocol) that asks the
    loader's own resolver where a kernel is, then answers with the variant
    seen to work here instead of the one chosen by name. A pick whose
    `metadata.json` the loader cannot read is a failed variant like any
    other: the others are tried."""

    def __init__(self, inner: Any, *, python: str) -> None:
        self.inner = inner
        self.python = python

    def resolve(self, *, api: Any, backend: Optional[str], kernel: Any) -> Any:
        failed: list = []
        token = FAILED_READS.set(failed)
        try:
            location = self.inner.resolve(api=api, backend=backend, kernel=kernel)
        except Exception as e:
            if failed:
                return self._instead_of_unreadable(Path(failed[-1][0]).parent, api=api, backend=backend, kernel=kernel)
            cached = self._from_the_cache(e, kernel=kernel, backend=backend)
            if cached is None:
                raise
            return cached
        finally:
            FAILED_READS.reset(token)
        if location is None:
            return None
        from kernels.resolver import RemoteKernel

        probes = _Probes(self.python, self._dependencies(location, api=api, backend=backend, kernel=kernel))
        if isinstance(location, RemoteKernel):
            installed = location.install(api=api)
            return _verified_remote(
                _Pinned(location.repo_id, location.revision),
                Path(installed.variant_path).parent.parent,
                installed,
                api=api,
                backend=backend,
                probes=probes,
            )
        return _verified_local(location, repo_id=kernel.repo_id, backend=backend, probes=probes)

    def _dependencies(self, location: Any, *, api: Any, backend: Optional[str], kernel: Any) -> dict[str, str]:
        """The kernels the pick depends on (`kernel-depends`), each verified
        first: the variant the loader will load of each, so that a probe of
        this kernel imports it with those (`LOCAL_KERNELS` in the probe's
        environment; the hub loader's first resolver reads it)."""
        depends = list(getattr(location.metadata, "kernel_depends", None) or [])
        if not depends:
            return {}
        resolving = _RESOLVING.get()
        if kernel.repo_id in resolving:
            return {}  # a cycle: the loader's own tree walk refuses it
        token = _RESOLVING.set(resolving | {kernel.repo_id})
        try:
            found = {}
            for dep in depends:
                verified = self.resolve(api=api, backend=backend, kernel=dep)
                if verified is not None:
                    found[dep.repo_id] = os.fspath(verified.variant_path)
            return found
        finally:
            _RESOLVING.reset(token)

    def _instead_of_unreadable(self, variant: Path, *, api: Any, backend: Optional[str], kernel: Any) -> Any:
        """The loader's pick is `variant`, whose metadata it could not read:
        on the hub (a snapshot folder, and a resolver that fetches), the
        other candidates of that commit; on disk, the variants beside it."""
        snapshot = variant.parent.parent
        probes = _Probes(self.python, {})
        if variant.parent.name == "build" and snapshot.parent.name == "snapshots" and _fetches(self.inner):
            pinned = _Pinned(kernel.repo_id, snapshot.name)
            return _verified_remote(pinned, snapshot, None, api=api, backend=backend, probes=probes)
        return _verified_local(_Unreadable(variant), repo_id=kernel.repo_id, backend=backend, probes=probes)

    def _from_the_cache(self, error: BaseException, *, kernel: Any, backend: Optional[str]) -> Any:
        """Offline, the loader refuses a cached snapshot whose tree listing
        (kept by `huggingface_hub` when the snapshot was fetched) names
        files that were never fetched — which is every snapshot the hub's
        own `get_kernel` fetched, one variant of it. The snapshot the pin
        names is used as it is on disk instead, found the way the loader
        finds it (`select --repo`); None when that is not the refusal, or
        there is no such snapshot either."""
        from huggingface_hub.errors import LocalEntryNotFoundError

        if not isinstance(error, FileNotFoundError) or not isinstance(error.__cause__, LocalEntryNotFoundError):
            return None
        pin = _cache_pin(self.inner, kernel)
        if pin is None:
            return None
        from ._binary import PreflightError

        target = ["--repo", kernel.repo_id, *pin]
        try:
            chosen, selection = _working(target, backend=backend, probes=_Probes(self.python, {}))
        except PreflightError:
            return None  # no such snapshot either: the loader's error stands
        if chosen is None:
            from ._hub import KernelLoadError

            raise KernelLoadError(kernel.repo_id, selection) from error
        from kernels.resolver import LocalKernel

        return LocalKernel(variant_path=chosen, metadata=_metadata(chosen))


def _cache_pin(resolver: Any, kernel: Any) -> Optional[list[str]]:
    """The pin a resolver that reads the hub cache gives `kernel`, as
    `select`'s arguments (a lock's commit, else the kernel's own pin)."""
    from kernels._rust import KernelVersion
    from kernels.resolver import HubCacheResolver, LockedHubCacheResolver, SequentialResolver

    if isinstance(resolver, SequentialResolver):
        pins = [_cache_pin(r, kernel) for r in resolver.resolvers]
        return next((pin for pin in pins if pin is not None), None)
    if isinstance(resolver, LockedHubCacheResolver):
        lock = resolver.kernel_locks.get(kernel, None)
        return None if lock is None else ["--revision", lock.commit]
    if isinstance(resolver, HubCacheResolver):
        if isinstance(kernel.version, KernelVersion.Version):
            return ["--version", str(kernel.version.version)]
        return ["--revision", kernel.version.revision]
    return None


class _Probes:
    """How `select` probes: in which interpreter, and with which verified
    variants of the kernels a kernel depends on (repo id -> variant)."""

    def __init__(self, python: str, dependencies: dict[str, str]) -> None:
        self.python = python
        self.dependencies = dependencies

    def env(self) -> Optional[dict[str, str]]:
        """The probes' `LOCAL_KERNELS`: the user's overrides, then the
        verified dependencies."""
        if not self.dependencies:
            return None
        entries = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e]
        entries += [f"{repo}={path}" for repo, path in sorted(self.dependencies.items())]
        return {"LOCAL_KERNELS": ":".join(entries)}


class _Pinned:
    """A kernel repository at one revision, as the loader resolved it."""

    def __init__(self, repo_id: str, revision: str) -> None:
        self.repo_id = repo_id
        self.revision = revision


class _Unreadable:
    """A variant on disk that the loader picked and could not read."""

    def __init__(self, variant_path: Path) -> None:
        self.variant_path = variant_path
        self.origin = None


def _fetches(resolver: Any) -> bool:
    """Whether `resolver` (or one it tries in turn) fetches from the hub."""
    from kernels.resolver import HubResolver, LockedHubResolver, SequentialResolver

    if isinstance(resolver, SequentialResolver):
        return any(_fetches(r) for r in resolver.resolvers)
    return isinstance(resolver, (HubResolver, LockedHubResolver))


def _accepted(folder: Path, backend: Optional[str]) -> list[str]:
    """The variants in `folder` the hub loader accepts by name here, in its
    preference order (its own code decides)."""
    from kernels.variants import get_variants_local, resolve_variants

    accepted, _ = resolve_variants(get_variants_local(folder), backend)
    return [v.variant_str for v in accepted]


def _working(
    target: list[str], *, backend: Optional[str], probes: _Probes
) -> tuple[Optional[Path], Optional[Selection]]:
    """The variant of `target` (`select`'s arguments: a folder of variants,
    one variant, or `--repo` with its pin) to load: the first in the hub
    loader's preference order that passed its probe; else None, and the
    selection saying why for each variant."""
    key = (tuple(target), backend, tuple(sorted(probes.dependencies.items())))
    python, env = probes.python, probes.env()
    known = _CHOSEN.get(key)
    if known is not None:
        return known, None
    if backend is None:
        # `select` ranks by the loader's own rule for this interpreter, and
        # answers warm from one record.
        done = run(["select", *target, "--python", python], answers=(0, 1), env=env)
        if done.returncode == 0:
            chosen = Path(done.stdout.strip())
            _CHOSEN[key] = chosen
            return chosen, None
    from ._types import Selection

    doc, _ = run_json(["select", *target, "--python", python], answers=(0, 1), env=env)
    selection = Selection.from_json(doc)
    passed = [Path(c.path) for c in selection.passing]
    if backend is None or not passed:
        return None, selection
    # A backend the caller chose: the loader's order for it decides among
    # the variants that passed (a variant given on its own is the only one).
    folder = passed[0].parent
    alone = len(passed) == 1 and not _is_variant(passed[0].name)
    order = passed if alone else [folder / name for name in _accepted(folder, backend)]
    for chosen in order:
        if chosen in passed:
            _CHOSEN[key] = chosen
            return chosen, selection
    return None, selection


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one directory (`select` prints absolute
    paths, the loader keeps the cache folder as configured)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _is_variant(name: str) -> bool:
    from kernels.variants import parse_variant

    try:
        parse_variant(name)
    except ValueError:
        return False
    return True


def _verified_local(location: Any, *, repo_id: str, backend: Optional[str], probes: _Probes) -> Any:
    """A kernel already on disk (the hub cache offline, a lock, a local
    path): the first working variant among those beside the loader's pick
    (a directory that is one variant on its own has nothing beside it)."""
    from kernels.resolver import LocalKernel

    pick = Path(location.variant_path)
    target = pick.parent if _is_variant(pick.name) else pick
    chosen, selection = _working([os.fspath(target)], backend=backend, probes=probes)
    if chosen is None:
        from ._hub import KernelLoadError

        raise KernelLoadError(repo_id, selection)
    if _same(chosen, pick):
        return location
    return LocalKernel(variant_path=chosen, metadata=_metadata(chosen), origin=location.origin)


def _verified_remote(
    pinned: _Pinned, snapshot: Path, installed: Any, *, api: Any, backend: Optional[str], probes: _Probes
) -> Any:
    """A kernel on the hub, its pick already fetched into `snapshot` as the
    hub fetches it (`installed`; None when the pick's metadata could not be
    read): the first working variant fetched, fetching one more candidate
    at a time while none fetched works."""
    from kernels.resolver import LocalKernel, RemoteKernel
    from kernels.variants import get_variants, parse_variant, resolve_variants

    build = snapshot / "build"
    _fetch_benchmarks(api, pinned, snapshot)
    everything: Optional[list[str]] = None
    fetched: set[str] = set()
    while True:
        chosen, selection = _working([os.fspath(build)], backend=backend, probes=probes)
        if chosen is not None:
            if installed is not None and _same(chosen, Path(installed.variant_path)):
                return installed
            metadata = _metadata(chosen)
            origin = RemoteKernel(
                repo_id=pinned.repo_id,
                revision=pinned.revision,
                metadata=metadata,
                variant=parse_variant(chosen.name),
            )
            return LocalKernel(variant_path=chosen, metadata=metadata, origin=origin)
        if everything is None:
            variants = get_variants(api, repo_id=pinned.repo_id, revision=pinned.revision)
            everything = [v.variant_str for v in resolve_variants(variants, backend)[0]]
        # A variant folder on disk has been tried (the hub fetches a
        # variant whole; an unreadable pick has only its metadata).
        missing = [name for name in everything if not (build / name).is_dir() and name not in fetched]
        if not missing:
            from ._hub import KernelLoadError

            raise KernelLoadError(pinned.repo_id, selection)
        fetched.add(missing[0])
        _fetch(api, pinned, [f"build/{missing[0]}/*"])


def _fetch(api: Any, location: Any, patterns: list[str]) -> None:
    """Files of the pinned snapshot, as the hub loader fetches a variant."""
    from kernels.hf_hub import CACHE_DIR
    from kernels.resolver import _BYTECODE_IGNORE_PATTERNS

    api.snapshot_download(
        location.repo_id,
        repo_type="kernel",
        allow_patterns=patterns,
        ignore_patterns=_BYTECODE_IGNORE_PATTERNS,
        cache_dir=CACHE_DIR,
        revision=location.revision,
        local_files_only=False,
    )


def _fetch_benchmarks(api: Any, location: Any, snapshot: Path) -> None:
    """The repository's `benchmarks/` (its smoke source: a few small
    scripts), unless this snapshot has it; a repository without one, or a
    failed fetch, leaves the probes without a smoke of its own."""
    if (snapshot / "benchmarks").is_dir():
        return
    try:
        _fetch(api, location, ["benchmarks/*"])
    except Exception:  # the smoke is evidence on top; the load goes on
        pass


def _metadata(variant: Path) -> Any:
    from kernels import Metadata

    return Metadata.read_from_file(variant / "metadata.json")
