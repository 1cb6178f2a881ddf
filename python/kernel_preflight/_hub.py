"""The hub side: fetching candidates with the hub's own client, and
`get_kernel` that loads only a variant seen to work here.

The hub loader (`kernels` 0.17 to 0.19, through `_loader`'s adapter for
the installed release) decides what it always decides — whether a
publisher is trusted, what a version names, how a variant is imported and
validated; `preflight` decides which variants work. This module only
connects the two.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Sequence, Union

# `get_kernel` needs none of these: a verified load in a fresh process does
# not pay for the API's dataclasses (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._api import PathOrRepo
    from ._types import KernelSummary

Trust = Union[bool, list[str]]


def _kernels_requirement() -> str:
    """The `kernels` the `hub` extra asks for, as the installed package's
    metadata states it (pyproject.toml), e.g. `kernels<0.18,>=0.17`."""
    from importlib import metadata

    try:
        for line in metadata.requires("kernel-preflight") or ():
            spec, _, marker = line.partition(";")
            if spec.strip().startswith("kernels") and "hub" in marker:
                return spec.strip()
    except metadata.PackageNotFoundError:
        pass
    return "kernels>=0.17.2,<0.20"


def _kernels() -> Any:
    """The installed hub loader's adapter (`_loader.Release`); raises
    `ImportError` naming the requirement when there is no `kernels`, and
    `UnsupportedKernels` naming the supported range for a release without
    an adapter."""
    from ._loader import current

    try:
        import kernels  # noqa: F401
    except ImportError as e:
        # kernel-preflight is not on PyPI: the extra cannot be named by the
        # package's name, so the hint names what it installs.
        raise ImportError(
            "kernel_preflight's hub functions need the hub's `kernels` package: "
            f"pip install '{_kernels_requirement()}' "
            "(or, in a checkout of kernel-preflight, pip install '.[hub]')"
        ) from e
    return current()


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _check_trust(repo_id: str, trust_remote_code: Trust, *, local_files_only: bool) -> None:
    """The hub loader's publisher-trust check, called as its resolvers call
    it (looked up at call time, so that it is the one they use). Its
    refusal propagates; offline it lets the cached kernel through, as
    `get_kernel` does."""
    resolver = _kernels().module("resolver")
    resolver._check_trust_remote_code(
        repo_id=repo_id, local_files_only=local_files_only, trust_remote_code=trust_remote_code
    )


def _cache_dir() -> Optional[str]:
    # kernels' CACHE_DIR rule (KERNELS_CACHE, else the hub's own cache),
    # read now rather than at import, as the preflight binary reads it.
    return os.environ.get("KERNELS_CACHE") or None


def download(
    repo_id: str,
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    trust_remote_code: Trust = False,
    user_agent: Union[str, dict, None] = None,
    python: Optional[PathOrRepo] = None,
) -> Optional[Path]:
    """Fetch the candidates of `repo_id` at a revision or version into the
    hub cache, in the layout `kernels` reads: every variant the hub accepts
    by name on this system (not only the one it would pick) and the
    repository's `benchmarks/` (the smoke source), through `huggingface_hub`
    with the user's token, after the hub's publisher-trust check. Which
    variants the hub accepts is the installed loader's own decision, or
    with `python` (probes in another interpreter) `preflight resolve`'s
    for that interpreter.

    A version is fetched by its branch (`vN`), so that the cache records
    `refs/vN` and offline calls find it. Returns the snapshot folder; `None`
    when the hub is offline (`HF_HUB_OFFLINE=1`): the cache is used as is.
    """
    release = _kernels()
    versions = release.module("_versions")
    versions.revision_or_version(revision=revision, version=version)
    if _offline():
        return None
    _check_trust(repo_id, trust_remote_code, local_files_only=False)
    api = release.module("hf_hub")._get_hf_api(user_agent=user_agent)
    if version is not None:
        revision = versions.resolve_version_spec_as_ref(repo_id, version, local_files_only=False).name
    variants = release.module("variants")
    found = variants.get_variants(api, repo_id=repo_id, revision=revision)
    if python is None:
        # Probes run here, where the loader is installed: its own decision
        # (the one `get_kernel_variants` reports) is the truth.
        accepted = [v.variant_str for v in variants.resolve_variants(found, None)[0]]
    else:
        names = sorted(v.variant_str for v in found)
        from ._api import resolve

        accepted = [d.variant for d in resolve(variants=names, python=python) if d.accepted]
    patterns = [f"build/{name}/*" for name in accepted] + ["benchmarks/*"]
    return Path(
        str(
            api.snapshot_download(
                repo_id,
                repo_type="kernel",
                revision=revision,
                allow_patterns=patterns,
                ignore_patterns=release.module("resolver")._BYTECODE_IGNORE_PATTERNS,
                cache_dir=_cache_dir(),
            )
        )
    )


# `warmup`'s parameter `download` hides the function in its body.
_download = download


def get_kernel(
    repo_id: str,
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    trust_remote_code: Trust = False,
    backend: Optional[str] = None,
    user_agent: Union[str, dict, None] = None,
    check_arch: bool = True,
    python: Optional[PathOrRepo] = None,
) -> ModuleType:
    """`kernels.get_kernel`, verified: it loads only a variant seen to work.

    This is the hub's own `get_kernel`, called with a verification in front
    of its loader for this one call (what `KERNEL_PREFLIGHT=1` does for
    every load of a process): its checks run as always (a revision or
    version is required; the publisher-trust check refuses untrusted
    repositories, and that refusal is raised; `LOCAL_KERNELS` overrides);
    then, before anything is imported, `preflight select` probes the
    variants of the pinned snapshot, each in its own child process — one
    that calls `exit(1)` or crashes while loading takes only that child
    down — and the hub's preferred variant is loaded when it works, else
    the next one that works, by the hub's own loader and validators
    (with `check_arch`, its architecture check). Online, the hub's pick is
    fetched first and a further candidate only when those fetched fail.
    When nothing works, `KernelLoadError` (a `FileNotFoundError`) says why
    for each variant. `python` names the interpreter the probes run in.

    A `kernels` release kernel_preflight has no adapter for raises
    `UnsupportedKernels` (a `RuntimeError`) naming the supported range,
    before anything is fetched or loaded.
    """
    load = _kernels().module("load")
    from ._enable import scope

    with scope(python=python):
        return load.get_kernel(
            repo_id,
            revision=revision,
            version=version,
            backend=backend,
            user_agent=user_agent,
            trust_remote_code=trust_remote_code,
            check_arch=check_arch,
        )


def warmup(
    targets: Sequence[PathOrRepo] = (),
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    lock: Optional[PathOrRepo] = None,
    project: Optional[PathOrRepo] = None,
    download: bool = False,
    trust_remote_code: Union[bool, list[str]] = False,
    jobs: Optional[int] = None,
    timeout: Optional[float] = None,
    python: Optional[PathOrRepo] = None,
) -> list[KernelSummary]:
    """Probe every variant without a cached outcome: of `targets` (kernel
    repo ids or directories), of the kernels a `kernels.lock` pins (`lock`,
    each at its locked commit, as `load_kernel` loads them) and a project's
    `pyproject.toml` names (`project`, its `[tool.kernels.dependencies]`,
    each at its version), or of every ref of every kernel in the hub cache
    when there are none. With `download=True`, each kernel's candidates are
    fetched first (see `download`): the first run of a new machine for the
    kernels a project uses, as `kernels download` is for the loader.

    A lock file or project that cannot be read raises what `kernels`
    raises for it (`FileNotFoundError`, `ValueError`), naming the file."""
    from ._api import warmup_fetching

    return warmup_fetching(
        _download if download else None,
        targets,
        revision=revision,
        version=version,
        lock=lock,
        project=project,
        trust_remote_code=trust_remote_code,
        jobs=jobs,
        timeout=timeout,
        python=python,
    )
