"""kernel-preflight for Python: will this build variant of a hub kernel
actually run here?

`KERNEL_PREFLIGHT=1` in the environment (or `enable()`) puts verification in
front of every `kernels` entry point that loads a kernel, in programs that
were not changed for it; `get_kernel` is the hub's `kernels.get_kernel` with
that verification for one call. `check`, `select`, `warmup`, `bench`,
`fingerprint` and `resolve` are the `preflight` commands, read as
dataclasses. Every decision is the `preflight` binary's, which ships with
this package.

Names are imported when first used, and this file imports nothing itself
(not even `typing`), so that the start-up hook and a plain
`import kernel_preflight` stay cheap.
"""

_WHERE = {
    "NoWorkingVariant": "_errors",
    "check": "_api",
    "fingerprint": "_api",
    "resolve": "_api",
    "select": "_api",
    "warmup": "_hub",
    "BenchReport": "_bench",
    "BenchSummary": "_bench",
    "VariantBench": "_bench",
    "bench": "_bench",
    "PreflightError": "_binary",
    "find_preflight": "_binary",
    "enable": "_enable",
    "KernelLoadError": "_errors",
    "download": "_hub",
    "get_kernel": "_hub",
    "Candidate": "_types",
    "CheckReport": "_types",
    "Comparison": "_types",
    "Decision": "_types",
    "Fingerprint": "_types",
    "KernelSummary": "_types",
    "Outcome": "_types",
    "Selection": "_types",
    "Speed": "_types",
    "Timings": "_types",
    "UnsupportedKernels": "_loader",
    "VariantResult": "_types",
}

__all__ = sorted(_WHERE)


_SUBMODULES = {"_api", "_bench", "_binary", "_enable", "_errors", "_hub", "_loader", "_types", "_verify"}


def __getattr__(name):  # type: ignore[no-untyped-def]
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'kernel_preflight' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


def __dir__():  # type: ignore[no-untyped-def]
    return sorted(set(globals()) | set(__all__))
