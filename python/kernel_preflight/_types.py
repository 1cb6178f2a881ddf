"""What `preflight … --json` prints, as dataclasses.

Each type reads the fields it knows and ignores the others, so that a newer
binary that adds fields does not break an older package; `raw` keeps the
whole document.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


def _known(cls: type, doc: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in doc.items() if k in names}


@dataclass(frozen=True)
class Outcome:
    """What probing one variant showed (`kind` is `pass` or the failure's
    name: `exited`, `crashed`, `import_error`, …)."""

    kind: str
    phase: Optional[str] = None
    depth: Optional[str] = None
    message: str = ""
    hint: str = ""
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    """The signal that killed the child, by name (`SIGSEGV`)."""
    stderr_tail: str = ""
    transient: bool = False
    """Whether the cause may pass by itself (a busy device): not kept."""
    warning: Optional[str] = None
    """What a user of a passing variant should still know."""
    made: str = "fresh"
    """How the probe's child was made: `fresh`, or `forked` from a fork
    server that had imported torch and `kernels` (docs/forked.md)."""
    raised: Optional[str] = None
    """The Python exception the variant's code raised (`builtins.ImportError`)
    when it failed that way and its child survived (not an exit, a signal
    or a deadline)."""

    @property
    def passed(self) -> bool:
        """Whether the variant works here."""
        return self.kind == "pass"

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Outcome":
        return cls(**_known(cls, doc))


@dataclass(frozen=True)
class Timings:
    """Where a probe's time went, in milliseconds, and the child's memory."""

    total_ms: Optional[float] = None
    import_ms: Optional[float] = None
    smoke_ms: Optional[float] = None
    memory: Optional[dict] = None
    """`rss_kb` and `pss_kb` of the child at the end of its probe."""


@dataclass(frozen=True)
class VariantResult:
    """One variant's row of `check`: declared by name vs observed."""

    target: str
    variant: str
    path: str
    accepted: bool
    reason: Optional[str]
    outcome: Outcome
    timings: Timings
    cached: bool
    leaked: Optional[str] = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "VariantResult":
        declared = doc.get("declared") or {}
        return cls(
            target=doc["target"],
            variant=doc["variant"],
            path=doc["path"],
            accepted=bool(declared.get("accepted")),
            reason=declared.get("reason"),
            outcome=Outcome.from_json(doc["outcome"]),
            timings=Timings(**_known(Timings, doc.get("timings") or {})),
            cached=bool(doc.get("cached")),
            leaked=doc.get("leaked"),
        )


@dataclass(frozen=True)
class Fingerprint:
    """This machine as outcomes are keyed: its hash, and every fact."""

    hash: str
    depth: str
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Fingerprint":
        return cls(hash=doc["hash"], depth=doc.get("depth", ""), raw=doc)


@dataclass(frozen=True)
class CheckReport:
    """`check`'s answer: every variant of every target; `ok` when each
    target has a variant that works here (exit code 0)."""

    ok: bool
    fingerprint: Fingerprint
    results: list[VariantResult]
    raw: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Candidate:
    """A variant as `select` shows it."""

    variant: str
    path: str
    outcome: Outcome
    cached: bool = False

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Candidate":
        return cls(
            variant=doc["variant"],
            path=doc["path"],
            outcome=Outcome.from_json(doc["outcome"]),
            cached=bool(doc.get("cached")),
        )


@dataclass(frozen=True)
class Comparison:
    """One timed variant against another (`bench`): `speedup` is how many
    times faster this one is (above 1: faster), the other's time over this
    one's round by round where the rounds are known, with its bootstrap
    95 % interval and the verdict drawn from it (`faster`, `slower`, `same`
    or `ambiguous`)."""

    speedup: float
    low: float
    high: float
    verdict: str

    @classmethod
    def from_json(cls, doc: Optional[Mapping[str, Any]]) -> Optional["Comparison"]:
        return cls(**_known(cls, doc)) if doc else None


@dataclass(frozen=True)
class Speed:
    """What `select(fastest=True)` ranked by: `basis` is `bench` (the medians
    `bench` kept for this machine and `workload`) or `no_bench_data` (one
    cold smoke call decided, which is not a speed)."""

    basis: str
    workload: str = "default"
    median_ms: Optional[float] = None
    runner_up: Optional[str] = None
    vs_runner_up: Optional[Comparison] = None
    ambiguous: bool = False

    @classmethod
    def from_json(cls, doc: Optional[Mapping[str, Any]]) -> Optional["Speed"]:
        if not doc:
            return None
        known = _known(cls, doc)
        known["vs_runner_up"] = Comparison.from_json(doc.get("vs_runner_up"))
        return cls(**known)


@dataclass(frozen=True)
class Selection:
    """`select`'s answer: the variant to load (`None` when none works here)
    and every alternative, in the hub loader's preference order."""

    chosen: Optional[Candidate]
    alternatives: list[Candidate]
    cached: bool
    raw: Mapping[str, Any] = field(repr=False)
    speed: Optional[Speed] = None
    """With `fastest=True`: what the ranking rests on."""

    @property
    def variant(self) -> Optional[str]:
        """The chosen variant's name."""
        return self.chosen.variant if self.chosen else None

    @property
    def path(self) -> Optional[str]:
        """The chosen variant's directory, for `kernels.get_local_kernel`."""
        return self.chosen.path if self.chosen else None

    @property
    def passing(self) -> list[Candidate]:
        """The variants seen to work here: the choice first, then the
        passing alternatives in the order `select` gave them."""
        rest = [c for c in self.alternatives if c.outcome.passed]
        return ([self.chosen] if self.chosen else []) + rest

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Selection":
        chosen = None
        if doc.get("variant") is not None:
            chosen = Candidate.from_json(doc)
        return cls(
            chosen=chosen,
            alternatives=[Candidate.from_json(a) for a in doc.get("alternatives", [])],
            cached=bool(doc.get("cached")),
            raw=doc,
            speed=Speed.from_json(doc.get("speed")),
        )


@dataclass(frozen=True)
class Decision:
    """The hub loader's name-level verdict on one variant (`resolve`)."""

    variant: str
    accepted: bool
    reason: Optional[str] = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Decision":
        return cls(**_known(cls, doc))


@dataclass(frozen=True)
class KernelSummary:
    """One kernel's line of `warmup`."""

    target: str
    kernel: str
    variants: int = 0
    probed: int = 0
    cached: int = 0
    skipped: int = 0
    passed: int = 0
    best: Optional[str] = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "KernelSummary":
        return cls(**_known(cls, doc))
