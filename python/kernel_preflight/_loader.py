"""The `kernels` releases kernel_preflight stands in front of: one adapter
per release, and the one answer to "which release is this process's".

Everything of the hub loader that kernel_preflight reaches (the seam it
replaces, the resolvers and validators it hands its picks to) is found
through the adapter of the release that is installed, never by a module
path written elsewhere. A release no adapter covers is not guessed at: the
flag says once that it is off, and `kernel_preflight.get_kernel` raises
`UnsupportedKernels` (docs/flag.md). Supporting the next release is one
adapter here, its twin in `probes/python/hub_bridge.py`, and one line in
`scripts/kernels-releases.txt` (which CI tests, each release in turn).

Imported by the start-up hook only when `kernels` itself is imported: it
imports nothing beyond `sys`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Optional


class Release:
    """What one series of `kernels` releases keeps where.

    `series` is the `major.minor` it covers, from `first` (the oldest patch
    release tested) on; `package` is where its loader's modules live
    (`load`, `deps`, `resolver`, `validate`, `variants`, `hf_hub`,
    `_versions`: their contents did not move between releases, only the
    package did); `validates_kernels` says whether its loader runs kernel
    validators (its digest check) on a kernel once it is installed
    (`validate_kernel`, between install and load); `cache_dir_at_import`
    whether its resolvers read the cache folder once, when `hf_hub` is
    imported (`CACHE_DIR`), rather than at each call; `oid_revisions`
    whether a resolved revision is the loader's `Oid` rather than a `str`
    (`RemoteKernel.revision`)."""

    # The compiled part of the loader (`Metadata`, `KernelVersion`): the
    # same module in every release so far.
    NATIVE = "kernels._rust"

    def __init__(
        self, first: str, *, package: str, validates_kernels: bool, cache_dir_at_import: bool, oid_revisions: bool
    ) -> None:
        self.first = first
        self.series = ".".join(first.split(".")[:2])
        self.package = package
        self.validates_kernels = validates_kernels
        self.cache_dir_at_import = cache_dir_at_import
        self.oid_revisions = oid_revisions

    def revision(self, commit: Any) -> Any:
        """A commit as the loader's `RemoteKernel` holds it."""
        return self.native().Oid.from_str(str(commit)) if self.oid_revisions else str(commit)

    def native(self) -> ModuleType:
        """The loader's compiled module."""
        import importlib

        return sys.modules.get(self.NATIVE) or importlib.import_module(self.NATIVE)

    def cache_dir(self) -> Optional[str]:
        """The hub cache folder the loader's resolvers fetch into now."""
        hf_hub = self.module("hf_hub")
        return hf_hub.CACHE_DIR if self.cache_dir_at_import else hf_hub._get_cache_dir()

    def muted(self, validate: ModuleType) -> _Muted:
        """A `with` block in which the warnings of the loader's validators
        (`validate.logger`) are not said."""
        return _Muted(validate.logger)

    def module(self, name: str) -> ModuleType:
        """The loader's module `name` (`"resolver"`) in this release."""
        full = f"{self.package}.{name}"
        module = sys.modules.get(full)
        if module is None:
            import importlib

            module = importlib.import_module(full)
        return module

    def covers(self, version: str) -> bool:
        """Whether `version` (`kernels.__version__`) is of this series and
        no older than the first release tested."""
        parts = _numbers(version)
        return parts[:2] == _numbers(self.series) and parts >= _numbers(self.first)


# Oldest first; the newest is the one whose rules preflight applies where
# `kernels` is not installed.
RELEASES = (
    Release("0.17.2", package="kernels", validates_kernels=False, cache_dir_at_import=True, oid_revisions=False),
    # 0.18: kernel validators (signature, digest) run after install;
    # revisions are `Oid`s; the cache folder is read at each call.
    Release("0.18.3", package="kernels", validates_kernels=True, cache_dir_at_import=False, oid_revisions=True),
    # 0.19: every module moved under `kernels._internals`.
    Release(
        "0.19.1", package="kernels._internals", validates_kernels=True, cache_dir_at_import=False, oid_revisions=True
    ),
)


class _Muted:
    def __init__(self, logger: Any) -> None:
        self.logger = logger
        self.was = False

    def __enter__(self) -> None:
        self.was, self.logger.disabled = self.logger.disabled, True

    def __exit__(self, *exc: Any) -> None:
        self.logger.disabled = self.was


def supported() -> str:
    """The supported releases in words, for messages."""
    return f"kernels {RELEASES[0].first} to {RELEASES[-1].series}.x ({', '.join(r.first for r in RELEASES)} tested)"


class UnsupportedKernels(RuntimeError):
    """The installed `kernels` is a release kernel_preflight has no adapter
    for (or its loader is not where that release keeps it): loads cannot
    be verified, and `kernel_preflight.get_kernel` refuses rather than load
    unverified."""


def release_of(version: str) -> Optional[Release]:
    """The adapter for `kernels` version `version`, or None."""
    for release in RELEASES:
        if release.covers(version):
            return release
    return None


_CURRENT: dict = {}


def current() -> Release:
    """The adapter for the `kernels` this process imported; raises
    `UnsupportedKernels` naming the supported range when there is none."""
    package = sys.modules.get("kernels")
    version = getattr(package, "__version__", None)
    if version is None:
        import importlib

        package = importlib.import_module("kernels")
        version = package.__version__
    release = _CURRENT.get(version)
    if release is None:
        release = release_of(str(version))
        if release is None:
            raise UnsupportedKernels(unsupported_message(str(version)))
        _CURRENT[version] = release
    return release


def unsupported_message(version: str) -> str:
    """Why `kernels` `version` cannot be verified."""
    return f"kernels {version} is not a release kernel-preflight supports ({supported()})"


def _numbers(version: str) -> tuple[int, ...]:
    """The leading numbers of a version (`0.19.1rc1` -> (0, 19, 1))."""
    out = []
    for part in version.split("."):
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)
