"""`preflight bench`: the working variants of one kernel timed side by side,
each in a sandboxed child of its own, read as dataclasses."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ._api import PathOrRepo, _pin, _python, _target
from ._binary import run_json
from ._types import Comparison, _known


@dataclass(frozen=True)
class BenchSummary:
    """Statistics of one variant's kept samples, in milliseconds."""

    samples: int
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    stdev: float
    rel_noise: float

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "BenchSummary":
        return cls(**_known(cls, doc))


@dataclass(frozen=True)
class VariantBench:
    """One variant's part of a benchmark: its summary when it was timed
    (`timed`), else the outcome and reason that excluded it."""

    variant: str
    timed: bool
    summary: Optional[BenchSummary] = None
    samples_ms: list[float] = field(default_factory=list, repr=False)
    stop: Optional[str] = None
    timer: Optional[str] = None
    dropped_throttled: int = 0
    outcome: Optional[str] = None
    reason: Optional[str] = None
    vs_fastest: Optional[Comparison] = None
    vs_reference: Optional[Comparison] = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "VariantBench":
        status = doc.get("status") or {}
        timed = status.get("status") == "timed"
        return cls(
            variant=doc["variant"],
            timed=timed,
            summary=BenchSummary.from_json(status["summary"]) if timed else None,
            samples_ms=list(status.get("samples_ms") or []),
            stop=status.get("stop"),
            timer=status.get("timer"),
            dropped_throttled=int(status.get("dropped_throttled") or 0),
            outcome=status.get("outcome"),
            reason=status.get("reason"),
            vs_fastest=Comparison.from_json(doc.get("vs_fastest")),
            vs_reference=Comparison.from_json(doc.get("vs_reference")),
        )


@dataclass(frozen=True)
class BenchReport:
    """`bench`'s answer: the variants fastest first (the excluded last), the
    reference computation when one was timed, and how they were timed."""

    target: str
    workload: str
    device: str
    flush_l2: bool
    variants: list[VariantBench]
    reference: Optional[VariantBench]
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def fastest(self) -> Optional[VariantBench]:
        """The variant with the shortest median; check its runner-up's
        `vs_fastest.verdict` before calling it a winner."""
        return next((v for v in self.variants if v.timed), None)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "BenchReport":
        reference = doc.get("reference")
        return cls(
            target=doc.get("target", ""),
            workload=doc.get("workload", ""),
            device=doc.get("device", ""),
            flush_l2=bool(doc.get("flush_l2")),
            variants=[VariantBench.from_json(v) for v in doc.get("variants", [])],
            reference=VariantBench.from_json(reference) if reference else None,
            raw=doc,
        )


def bench(
    target: PathOrRepo,
    *,
    revision: Optional[str] = None,
    version: Optional[int] = None,
    variants: Optional[Sequence[str]] = None,
    workload: Optional[str] = None,
    max_noise: Optional[float] = None,
    min_samples: Optional[int] = None,
    min_time: Optional[float] = None,
    timeout: Optional[float] = None,
    flush_l2: bool = True,
    cpu_time: bool = False,
    smoke: Optional[PathOrRepo] = None,
    no_cache: bool = False,
    python: Optional[PathOrRepo] = None,
    plot: Optional[PathOrRepo] = None,
) -> BenchReport:
    """Time the variants of `target` that work here, side by side (see
    `preflight bench --help` for each option). The results are kept for
    `select(fastest=True)`. `plot`: also draw the bench as an SVG chart in
    that file (`*.svg`; written even when nothing could be timed, listing
    why). A report with no timed variant is data, not an error; bad input
    raises `PreflightError`."""
    args = ["bench", *_target(target), *_pin(revision, version)]
    if variants is not None:
        if isinstance(variants, str):
            variants = [variants]
        args += ["--variants", ",".join(variants)]
    options = {
        "--workload": workload,
        "--max-noise": max_noise,
        "--min-samples": min_samples,
        "--min-time": min_time,
        "--timeout": timeout,
        "--smoke": os.fspath(smoke) if smoke is not None else None,
        "--plot": os.fspath(plot) if plot is not None else None,
    }
    for flag, value in options.items():
        if value is not None:
            args += [flag, str(value)]
    args += [flag for flag, on in (("--no-flush", not flush_l2), ("--cpu-time", cpu_time), ("--no-cache", no_cache)) if on]
    doc, _ = run_json([*args, *_python(python)], answers=(0, 1))
    return BenchReport.from_json(doc)


__all__ = ["BenchReport", "BenchSummary", "VariantBench", "bench"]
