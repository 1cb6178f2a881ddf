"""The errors the package raises when no variant works, below every module
that raises them (`_api`, `_hub`, `_verify`): `NoWorkingVariant` (`select`
answered "no") and `KernelLoadError` (a load found no variant it could
load), with `why_table`, the table of why they carry.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ._binary import PreflightError
from ._types import Selection


class NoWorkingVariant(PreflightError):
    """`select` answered "no": no variant works here. `text` is the table of
    why, `selection` every variant with its outcome."""

    def __init__(self, selection: Selection, what: str) -> None:
        super().__init__(f"no variant of {what} works here\n{why_table(selection)}", 1)
        self.selection = selection


def why_table(selection: Selection) -> str:
    """One line per variant: its outcome and message, and the fix hint."""
    rows = ([selection.chosen] if selection.chosen else []) + selection.alternatives
    width = max((len(c.variant) for c in rows), default=0)
    lines = []
    for c in rows:
        lines.append(f"  {c.variant:<{width}}  {c.outcome.kind}: {c.outcome.message}".rstrip())
        if c.outcome.hint:
            lines.append(f"  {'':<{width}}    hint: {c.outcome.hint}")
    return "\n".join(lines)


class KernelLoadError(FileNotFoundError, NoWorkingVariant):
    """No variant of a kernel could be loaded here: the loader's pick failed
    its probe (or its files are broken) and so did every other candidate
    the loader would take, or the loader's validators refused them. `text`
    has a line per variant with why; `selection` every variant probed with
    its outcome; `refused` the candidates the loader refused, with its
    error.

    It is a `FileNotFoundError`, the type `kernels` raises when it finds no
    build variant for the system, so that the fallbacks callers already
    have (transformers' `lazy_load_kernel`, `kernelize`'s
    `KernelizeFallback.CANNOT_LOAD`) take it; and a `NoWorkingVariant`
    (`PreflightError`, a `RuntimeError`). Where plain `kernels` would have
    raised an error of its own for the same load (its pick's `metadata.json`
    does not parse: a `ValueError`), the error is also of that type
    (`carrying`), with kernels' message and notes, and the table as a note.
    CPython cannot make one class an `OSError` and an `ImportError` both
    (their instance layouts conflict): where the loader's import of its
    pick raises, the loader's own exception is what the caller gets, with
    the table as a note (docs/flag.md)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "KernelLoadError":
        # OSError reads (errno, strerror, filename) from several arguments.
        return super().__new__(cls)

    def __init__(
        self,
        repo_id: str,
        selection: Optional[Selection],
        refused: Sequence[tuple[str, BaseException]] = (),
    ) -> None:
        selection = selection or Selection(chosen=None, alternatives=[], cached=False, raw={})
        NoWorkingVariant.__init__(self, selection, repo_id)
        lines = [f"no variant of {repo_id} could be loaded here"]
        table = why_table(selection)
        if table:
            lines.append(table)
        width = max([len(c.variant) for c in selection.alternatives] + [len(v) for v, _ in refused], default=0)
        for variant, error in refused:
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            lines.append(f"  {variant:<{width}}  refused by the hub loader: {message}")
        self.text = "\n".join(lines)
        self.args = (self.text,)
        self.refused = list(refused)

    def __str__(self) -> str:
        return self.text

    @classmethod
    def carrying(
        cls,
        error: BaseException,
        repo_id: str,
        selection: Optional[Selection],
        refused: Sequence[tuple[str, BaseException]] = (),
    ) -> BaseException:
        """The error for a load where plain `kernels` raised `error`: a
        `KernelLoadError` that is also of `error`'s type, whose message is
        kernels' message, with kernels' notes and then the table of
        variants as notes; `error` itself with the table as a note where
        no class can be both (an `ImportError`)."""
        kind = _carrying_class(type(error))
        if kind is None:
            _note(error, cls(repo_id, selection, refused).text)
            return error
        combined = kind(repo_id, selection, refused)
        table = combined.text
        combined.text = str(error)
        combined.args = (combined.text,)
        for note in [*getattr(error, "__notes__", ()), table]:
            _note(combined, note)
        return combined


_CARRYING: dict[type, Optional[type]] = {}


def _carrying_class(kind: type) -> Optional[type]:
    """`KernelLoadError` made also a `kind`, or None when CPython cannot
    (an `ImportError`, whose layout conflicts with `OSError`'s)."""
    if issubclass(KernelLoadError, kind):
        return KernelLoadError
    if kind not in _CARRYING:
        try:
            made = type(KernelLoadError.__name__, (KernelLoadError, kind), {"__module__": __name__})
        except TypeError:
            made = None
        _CARRYING[kind] = made
    return _CARRYING[kind]


def _note(error: BaseException, note: str) -> None:
    if hasattr(error, "add_note"):
        error.add_note(note)
    else:  # Python < 3.11: the attribute the traceback printer reads
        error.__notes__ = [*getattr(error, "__notes__", []), note]  # type: ignore[attr-defined]


__all__ = ["KernelLoadError", "NoWorkingVariant", "why_table"]
