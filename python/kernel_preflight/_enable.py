"""`KERNEL_PREFLIGHT=1` and `enable()`: verification in front of every
`kernels` entry point that loads a kernel, in programs not changed for it.

Every loader of `kernels` 0.17 — `get_kernel`, `get_local_kernel`,
`load_kernel`, `get_locked_kernel`, `has_kernel`, and the repository
classes' `.load()` that `kernelize` calls — builds its kernel tree with one
function, `kernels.load.resolve_kernel_tree`, looked up in the globals of
`kernels.load` at each call. That one name is replaced; every reference to
the entry points themselves, however early it was bound (transformers binds
`get_kernel` when it is imported), keeps working and is verified. The
replacement hands the loader's own resolver, wrapped, to the original
function, so that the hub's trust check, pins and variant resolution run
unchanged and every node of the tree (its kernel dependencies too) is
verified before anything of it is imported (`_verify`).

This module is imported at interpreter start-up when the variable is set
(`kernel_preflight.pth`), so it imports nothing beyond `sys` and `os`;
without the variable the start-up line reads one environment entry and
returns.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs a start-up more than everything else here
    from typing import Any, Callable, Optional

VARIABLE = "KERNEL_PREFLIGHT"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")

# The seam: module and function every loader of `kernels` reaches, and the
# parameters the replacement passes through.
SEAM_MODULE = "kernels.load"
SEAM_FUNCTION = "resolve_kernel_tree"
SEAM_PARAMETERS = ("api", "kernel", "backend", "resolver", "seen")
# The one entry point of that module that builds a kernel tree without
# installing or loading it: under the flag it answers from probes at once.
ANSWERING_FUNCTION = "has_kernel"

# The resolvers read the pick's `metadata.json` with this name; a read that
# fails is remembered, so that a broken pick falls back to another variant.
READER_MODULE = "kernels.resolver"

_ORIGINAL = "__kernel_preflight_original__"


class _State:
    """What the process asked for: verification for every load (the
    variable or `enable()`), a bad value of the variable to report at the
    first load, and the interpreter probes run in."""

    def __init__(self) -> None:
        self.everywhere = False
        self.bad_value: Optional[str] = None
        self.python: Optional[str] = None
        self.hooked = False


STATE = _State()


def flag_value(value: Optional[str]) -> Optional[bool]:
    """What a value of `KERNEL_PREFLIGHT` asks for: True (on), False (off,
    also unset), None (not a value it takes)."""
    if value is None:
        return False
    value = value.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    return None


def bad_value_error(value: str) -> ValueError:
    """The error a load raises when the variable holds a value it does not
    take (`ValueError`, as `kernels` raises for a bad `LOCAL_KERNELS`)."""
    return ValueError(
        f"Invalid {VARIABLE} value: {value!r}. Expected 1, true, yes or on to verify every kernel "
        "load with kernel-preflight, or 0, false, no, off or unset to load as kernels does."
    )


def from_environment() -> None:
    """Start-up: act on `KERNEL_PREFLIGHT`. An unknown value is not guessed
    at: the hook is installed and the first load raises `bad_value_error`,
    naming the value, before anything is fetched or imported."""
    value = os.environ.get(VARIABLE)
    wanted = flag_value(value)
    if wanted is False:
        return
    if wanted is None:
        STATE.bad_value = value
    else:
        STATE.everywhere = True
    install()


def enable(*, python: Optional[str] = None) -> None:
    """Verify every `kernels` load of this process from now on, as
    `KERNEL_PREFLIGHT=1` does from start-up; idempotent. `python` names
    the interpreter the probes run in (default: this one)."""
    STATE.everywhere = True
    STATE.bad_value = None
    if python is not None:
        STATE.python = os.fspath(python)
    install()


def install() -> None:
    """Replace the seam now if `kernels.load` is imported, else as soon as
    it is (a finder on `sys.meta_path` that wraps its loader)."""
    module = sys.modules.get(SEAM_MODULE)
    if module is not None:
        patch(module)
        return
    if not STATE.hooked:
        STATE.hooked = True
        sys.meta_path.insert(0, _SeamFinder())


def patch(module: Any) -> None:
    """Replace `resolve_kernel_tree` in `module` (once). A `kernels` whose
    seam moved or changed shape is said on stderr, loudly: verification
    would otherwise be silently off."""
    current = getattr(module, SEAM_FUNCTION, None)
    if current is None or getattr(current, _ORIGINAL, None) is not None:
        return
    problem = seam_problem(current)
    if problem is not None:
        sys.stderr.write(f"kernel_preflight: warning: {problem}; kernel loads are NOT verified\n")
        return
    resolver = sys.modules.get(READER_MODULE)
    reader = getattr(resolver, "Metadata", None)
    if reader is None or not hasattr(reader, "read_from_file"):
        sys.stderr.write(
            f"kernel_preflight: warning: {READER_MODULE}.Metadata.read_from_file is not where this kernels "
            "release was expected to have it; kernel loads are NOT verified\n"
        )
        return
    if not isinstance(reader, _RememberingReader):
        setattr(resolver, "Metadata", _RememberingReader(reader))
    answers = getattr(getattr(module, ANSWERING_FUNCTION, None), "__code__", None)
    if answers is None:
        sys.stderr.write(
            f"kernel_preflight: warning: {SEAM_MODULE}.{ANSWERING_FUNCTION} is not where this kernels release "
            "was expected to have it; it answers by name only\n"
        )
    setattr(module, SEAM_FUNCTION, _verifying(current, answers))


def seam_problem(function: Any) -> Optional[str]:
    """Why `function` is not the seam this module was written against, or
    None when it is."""
    code = getattr(function, "__code__", None)
    if code is None:
        return f"{SEAM_MODULE}.{SEAM_FUNCTION} is not a Python function in this kernels release"
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if tuple(sorted(names)) != tuple(sorted(SEAM_PARAMETERS)):
        return (
            f"{SEAM_MODULE}.{SEAM_FUNCTION} takes ({', '.join(names)}) in this kernels release, "
            f"not ({', '.join(SEAM_PARAMETERS)})"
        )
    return None


def _verifying(original: Callable[..., Any], answers: Any) -> Callable[..., Any]:
    """The seam's replacement. `answers` is the code of the one loader
    entry point that builds a tree without loading it (`has_kernel`),
    which is then verified at once rather than when it is installed."""

    def resolve_kernel_tree(api, kernel, backend, resolver, seen=None):  # type: ignore[no-untyped-def]
        if STATE.bad_value is not None:
            raise bad_value_error(STATE.bad_value)
        from . import _verify

        scope = _verify.active_scope()
        if scope is None and not STATE.everywhere:
            return original(api=api, kernel=kernel, backend=backend, resolver=resolver, seen=seen)
        verifying = _verify.VerifyingResolver(resolver, python=_verify.python_of(scope, STATE.python))
        tree = original(api=api, kernel=kernel, backend=backend, resolver=verifying, seen=seen)
        answer_only = answers is not None and sys._getframe(1).f_code is answers
        return _verify.verified_tree(tree, verifying, api=api, answer_only=answer_only)

    resolve_kernel_tree.__doc__ = original.__doc__
    resolve_kernel_tree.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(resolve_kernel_tree, _ORIGINAL, original)
    return resolve_kernel_tree


class _RememberingReader:
    """`kernels.resolver`'s `Metadata`, unchanged but for one thing: while a
    verified resolution runs (`FAILED_READS` holds a list), a
    `read_from_file` that raises appends the file and the error to it. The
    error itself propagates as before."""

    def __init__(self, metadata: Any) -> None:
        self._metadata = metadata

    def read_from_file(self, path: Any) -> Any:
        try:
            return self._metadata.read_from_file(path)
        except Exception as e:
            verify = sys.modules.get("kernel_preflight._verify")
            failed = verify.FAILED_READS.get() if verify is not None else None
            if failed is not None:
                failed.append((os.fspath(path), e))
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._metadata, name)


class _SeamFinder:
    """A `sys.meta_path` finder that finds nothing itself: when
    `kernels.load` is imported it asks the other finders for the spec and
    wraps its loader, so that the seam is replaced the moment the module
    has run (importlib's documented meta path protocol; the same mechanism
    as wrapt's post-import hooks, without a dependency in every start-up)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != SEAM_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


class _PatchingLoader:
    """A module loader that patches the seam after the real loader ran."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class scope:
    """Verify the `kernels` loads made inside the block (a `with`
    statement): the seam is installed if it is not, and the loads in the
    block are verified whatever the variable says, probing in `python`
    (default: the process's choice, else this interpreter)."""

    def __init__(self, python: Optional[Any] = None) -> None:
        self.python = python
        self.token: Any = None

    def __enter__(self) -> None:
        from . import _verify

        install()
        seam = getattr(sys.modules[SEAM_MODULE], SEAM_FUNCTION)
        if getattr(seam, _ORIGINAL, None) is None:
            raise RuntimeError(
                seam_problem(seam) or "kernel_preflight could not put verification in front of kernels' loader"
            )
        self.token = _verify.enter_scope(self.python)

    def __exit__(self, *exc: Any) -> None:
        from . import _verify

        _verify.leave_scope(self.token)
