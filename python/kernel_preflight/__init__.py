"""kernel-preflight for Python: will this build variant of a hub kernel
actually run here?

`get_kernel` is the hub's `kernels.get_kernel` that loads only a variant
seen to work on this machine; `check`, `select`, `warmup`, `fingerprint` and
`resolve` are the `preflight` commands, read as dataclasses. Every decision
is the `preflight` binary's, which ships with this package.
"""

from ._api import NoWorkingVariant, check, fingerprint, resolve, select, warmup
from ._bench import BenchReport, BenchSummary, VariantBench, bench
from ._binary import PreflightError, find_preflight
from ._hub import KernelLoadError, download, get_kernel
from ._types import (
    Candidate,
    CheckReport,
    Comparison,
    Decision,
    Fingerprint,
    KernelSummary,
    Outcome,
    Selection,
    Speed,
    Timings,
    VariantResult,
)

__all__ = [
    "BenchReport",
    "BenchSummary",
    "Candidate",
    "CheckReport",
    "Comparison",
    "Decision",
    "Fingerprint",
    "KernelLoadError",
    "KernelSummary",
    "NoWorkingVariant",
    "Outcome",
    "PreflightError",
    "Selection",
    "Speed",
    "Timings",
    "VariantBench",
    "VariantResult",
    "bench",
    "check",
    "download",
    "find_preflight",
    "fingerprint",
    "get_kernel",
    "resolve",
    "select",
    "warmup",
]
