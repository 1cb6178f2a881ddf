"""`KERNEL_PREFLIGHT=1` and `enable()`: verification in front of every
`kernels` entry point that loads a kernel, in programs not changed for it.

Every loader of `kernels` (0.17 to 0.19) — `get_kernel`, `get_local_kernel`,
`load_kernel`, `get_locked_kernel`, `has_kernel`, and the repository
classes' `.load()` that `kernelize` calls — builds its kernel tree with one
function, `resolve_kernel_tree`, looked up in the globals of the loader's
`load` module at each call (`kernels.load`; `kernels._internals.load` from
0.19: `_loader` knows which). That one name is replaced; every reference to
the entry points themselves, however early it was bound (transformers binds
`get_kernel` when it is imported), keeps working and is verified. The
replacement hands the loader's own resolver, wrapped, to the original
function, so that the hub's trust check, pins and variant resolution run
unchanged and every node of the tree (its kernel dependencies too) is
verified before anything of it is imported (`_verify`). A `kernels`
release `_loader` has no adapter for is left alone, and said so once.

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

# The seam: the function every loader of `kernels` reaches, in its `load`
# module (where that is, per release: `_loader`), and the parameters the
# replacement passes through.
SEAM_FUNCTION = "resolve_kernel_tree"
SEAM_PARAMETERS = ("api", "kernel", "backend", "resolver", "seen")
# The one entry point of that module that builds a kernel tree without
# installing or loading it: under the flag it answers from probes at once.
ANSWERING_FUNCTION = "has_kernel"

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
        # The seam is replaced; or why it cannot be (said once).
        self.patched = False
        self.problem: Optional[str] = None


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
    """Replace the seam now if `kernels` is imported, else as soon as it
    is (a finder on `sys.meta_path` that wraps its loader)."""
    package = sys.modules.get("kernels")
    if package is not None and not getattr(getattr(package, "__spec__", None), "_initializing", False):
        patch(package)
        return
    if not STATE.hooked:
        STATE.hooked = True
        sys.meta_path.insert(0, _SeamFinder())


def patch(package: Any) -> None:
    """Replace `resolve_kernel_tree` in the `load` module of the `kernels`
    release `package` is (once), found through that release's adapter
    (`_loader`). A release without one, or whose seam moved or changed
    shape, is not verified, and that is said once on stderr where the
    process asked for verification: it would otherwise be silently off."""
    if STATE.patched or STATE.problem is not None:
        return
    STATE.problem = seam_problem(package)
    if STATE.problem is not None:
        if STATE.everywhere or STATE.bad_value is not None:
            sys.stderr.write(
                f"kernel_preflight: warning: {STATE.problem}; {VARIABLE} is off: kernel loads are NOT verified "
                "and run exactly as with plain kernels\n"
            )
        return
    from . import _loader

    release = _loader.current()
    module = release.module("load")
    resolver = release.module("resolver")
    if not isinstance(resolver.Metadata, _RememberingReader):
        setattr(resolver, "Metadata", _RememberingReader(resolver.Metadata))
    answers = getattr(module, ANSWERING_FUNCTION).__code__
    setattr(module, SEAM_FUNCTION, _verifying(getattr(module, SEAM_FUNCTION), answers))
    STATE.patched = True


def seam_problem(package: Any) -> Optional[str]:
    """Why the `kernels` package `package` cannot be verified (no adapter
    for its release, or its loader is not where the adapter says, or not
    of the shape this module was written against); None when it can."""
    from . import _loader

    version = str(getattr(package, "__version__", "(no __version__)"))
    release = _loader.release_of(version)
    if release is None:
        return _loader.unsupported_message(version)
    where = f"{release.package}.load"
    try:
        module = release.module("load")
        reader = getattr(release.module("resolver"), "Metadata", None)
    except ImportError as e:
        return f"kernels {version} has no module {e.name or where}, which its release keeps"
    function = getattr(module, SEAM_FUNCTION, None)
    code = getattr(function, "__code__", None)
    if code is None:
        return f"{where}.{SEAM_FUNCTION} is not a Python function in kernels {version}"
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if tuple(sorted(names)) != tuple(sorted(SEAM_PARAMETERS)):
        expected = ", ".join(SEAM_PARAMETERS)
        return f"{where}.{SEAM_FUNCTION} takes ({', '.join(names)}) in kernels {version}, not ({expected})"
    if not hasattr(reader, "read_from_file"):
        return f"{release.package}.resolver.Metadata.read_from_file is not in kernels {version}"
    if getattr(getattr(module, ANSWERING_FUNCTION, None), "__code__", None) is None:
        return f"{where}.{ANSWERING_FUNCTION} is not a Python function in kernels {version}"
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
    """A `sys.meta_path` finder that finds nothing itself: when `kernels`
    is imported it asks the other finders for the spec and wraps its
    loader, so that the seam is replaced the moment the package has run
    (importlib's documented meta path protocol; the same mechanism as
    wrapt's post-import hooks, without a dependency in every start-up).
    The package, not its `load` module, because which module holds the
    seam depends on the release, which the package says (`__version__`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "kernels":
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

        from . import _loader

        install()
        if not STATE.patched:
            raise _loader.UnsupportedKernels(
                f"{STATE.problem or 'kernel_preflight could not put verification in front of kernels loader'}: "
                "kernel_preflight.get_kernel cannot verify this load (kernels.get_kernel loads it unverified)"
            )
        self.token = _verify.enter_scope(self.python)

    def __exit__(self, *exc: Any) -> None:
        from . import _verify

        _verify.leave_scope(self.token)
