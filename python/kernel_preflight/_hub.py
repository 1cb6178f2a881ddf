"""The hub side: fetching candidates with the hub's own client, and
`get_kernel` that loads only a variant seen to work here.

The hub loader (`kernels` 0.17) decides what it always decides — whether a
publisher is trusted, what a version names, how a variant is imported and
validated; `preflight` decides which variants work. This module only
connects the two.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Union

from ._api import NoWorkingVariant, PathOrRepo, resolve, select, why_table
from ._types import Selection

Trust = Union[bool, list[str]]


class KernelLoadError(NoWorkingVariant):
    """No variant of a kernel could be loaded: none works here, or each
    that works was refused by the hub loader's own checks. `text` has a
    line per variant with why."""

    def __init__(self, repo_id: str, selection: Selection, refused: list[tuple[str, BaseException]]) -> None:
        super().__init__(selection, repo_id)
        lines = [f"no variant of {repo_id} could be loaded here", why_table(selection)]
        for variant, error in refused:
            lines.append(f"  {variant}: passed its probe, refused by kernels.get_local_kernel: {error}")
        self.text = "\n".join(lines)
        self.args = (self.text,)
        self.refused = refused


def _kernels() -> Any:
    try:
        import kernels
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "kernel_preflight's hub functions need the hub's `kernels` package: pip install 'kernel-preflight[hub]'"
        ) from e
    return kernels


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _check_trust(repo_id: str, trust_remote_code: Trust, *, local_files_only: bool) -> None:
    """The hub loader's publisher-trust check, called as its resolvers call
    it (looked up at call time, so that it is the one they use). Its
    refusal propagates; offline it lets the cached kernel through, as
    `get_kernel` does."""
    from kernels import resolver

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
    with the user's token, after the hub's publisher-trust check.

    A version is fetched by its branch (`vN`), so that the cache records
    `refs/vN` and offline calls find it. Returns the snapshot folder; `None`
    when the hub is offline (`HF_HUB_OFFLINE=1`): the cache is used as is.
    """
    _kernels()
    from kernels._versions import resolve_version_spec_as_ref, revision_or_version
    from kernels.hf_hub import _get_hf_api
    from kernels.resolver import _BYTECODE_IGNORE_PATTERNS
    from kernels.variants import get_variants

    revision_or_version(revision=revision, version=version)
    if _offline():
        return None
    _check_trust(repo_id, trust_remote_code, local_files_only=False)
    api = _get_hf_api(user_agent=user_agent)
    if version is not None:
        revision = resolve_version_spec_as_ref(repo_id, version, local_files_only=False).name
    names = sorted(v.variant_str for v in get_variants(api, repo_id=repo_id, revision=revision))
    accepted = [d.variant for d in resolve(variants=names, python=python) if d.accepted]
    patterns = [f"build/{name}/*" for name in accepted] + ["benchmarks/*"]
    return Path(
        str(
            api.snapshot_download(
                repo_id,
                repo_type="kernel",
                revision=revision,
                allow_patterns=patterns,
                ignore_patterns=_BYTECODE_IGNORE_PATTERNS,
                cache_dir=_cache_dir(),
            )
        )
    )


def _check_arch(variant_path: Path, variant: str) -> None:
    """The hub loader's architecture check (`get_kernel(check_arch=True)`),
    which `get_local_kernel` does not apply."""
    from kernels import Metadata
    from kernels.validate import ArchValidator

    metadata = Metadata.read_from_file(variant_path / "metadata.json")
    ArchValidator().validate_metadata(metadata=metadata, variant=variant)


def _local_override(repo_id: str) -> Optional[Path]:
    """The path `LOCAL_KERNELS` maps `repo_id` to, which `get_kernel` loads
    instead of the hub's."""
    overrides = os.environ.get("LOCAL_KERNELS")
    if not overrides:
        return None
    from kernels.load import _parse_local_kernel_overrides

    return _parse_local_kernel_overrides(overrides).get(repo_id)


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
    """`kernels.get_kernel`, hardened: it loads only a variant seen to work.

    The hub's own checks run as in `get_kernel` (a revision or version is
    required; the publisher-trust check refuses untrusted repositories, and
    that refusal is raised). Online, the candidates are fetched first
    (`download`). Then `preflight select` probes each variant for the same
    revision or version in its own child process — one that calls `exit(1)`
    or crashes while loading takes only that child down — and the hub's
    preferred variant is loaded when it works, else the next one that
    works, each through `kernels.get_local_kernel` (which applies the hub's
    validators, and with `check_arch` its architecture check, as in
    `get_kernel`). When nothing can be loaded, `KernelLoadError` says why
    for each variant.
    """
    kernels = _kernels()
    from kernels._versions import revision_or_version

    revision_or_version(revision=revision, version=version)
    local = _local_override(repo_id)
    if local is not None:
        target: PathOrRepo = local
        revision = version = None
    else:
        target = repo_id
        offline = _offline()
        _check_trust(repo_id, trust_remote_code, local_files_only=offline)
        if not offline:
            download(
                repo_id,
                revision=revision,
                version=version,
                trust_remote_code=True,  # just checked, with the caller's answer
                user_agent=user_agent,
                python=python,
            )
    try:
        selection = select(target, revision=revision, version=version, python=python)
    except NoWorkingVariant as e:
        raise KernelLoadError(repo_id, e.selection, []) from None
    refused: list[tuple[str, BaseException]] = []
    for candidate in selection.passing:
        try:
            if check_arch:
                _check_arch(Path(candidate.path), candidate.variant)
            return kernels.get_local_kernel(
                Path(candidate.path),
                backend=backend,
                trust_remote_code=trust_remote_code,
                user_agent=user_agent,
            )
        except Exception as e:  # the hub loader refused it: try the next
            refused.append((candidate.variant, e))
    raise KernelLoadError(repo_id, selection, refused)
