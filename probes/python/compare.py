"""Comparison of a smoke workload's result with its reference, for preflight's
python executor (imported by the driver from the sandbox directory).

Works for torch tensors, numpy arrays, objects with `tolist()` and plain
Python numbers or nested lists, importing torch or numpy only when a value
already is one.
"""

import math


class Mismatch(Exception):
    """The kernel's result differs from the reference."""


class Incomparable(Exception):
    """The two values cannot be compared (a fault of the smoke source)."""


for _cls in (Mismatch, Incomparable):
    _cls.__module__ = "preflight"


def default_tolerance(value):
    """torch.testing.assert_close's defaults by dtype; float64 for Python numbers."""
    dtype = str(getattr(value, "dtype", "float64"))
    if "bfloat16" in dtype:
        return 1.6e-2, 1e-5
    if "float16" in dtype or "half" in dtype:
        return 1e-3, 1e-5
    if "float32" in dtype or dtype.endswith("float"):
        return 1.3e-6, 1e-5
    return 1e-7, 1e-7


def is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def is_numpy_array(x):
    return type(x).__module__ == "numpy" and hasattr(x, "shape")


def compare(actual, expected, rtol, atol):
    """None when close, else a one-line description of the difference."""
    if is_torch_tensor(actual) or is_torch_tensor(expected):
        import torch

        a = torch.as_tensor(actual).detach().to("cpu")
        e = torch.as_tensor(expected).detach().to("cpu")
        if tuple(a.shape) != tuple(e.shape):
            return "shape %s, expected %s" % (tuple(a.shape), tuple(e.shape))
        a, e = a.double(), e.double()
        bad = ~torch.isclose(a, e, rtol=rtol, atol=atol)
        if not bool(bad.any()):
            return None
        diff = (a - e).abs()
        diff[torch.isnan(diff)] = float("inf")
        return summary(int(bad.sum()), a.numel(), float(diff.max()), rtol, atol)
    if is_numpy_array(actual) or is_numpy_array(expected):
        import numpy

        a = numpy.asarray(actual, dtype=numpy.float64)
        e = numpy.asarray(expected, dtype=numpy.float64)
        if a.shape != e.shape:
            return "shape %s, expected %s" % (a.shape, e.shape)
        bad = ~numpy.isclose(a, e, rtol=rtol, atol=atol)
        if not bad.any():
            return None
        diff = numpy.nan_to_num(numpy.abs(a - e), nan=numpy.inf)
        return summary(int(bad.sum()), a.size, float(diff.max()), rtol, atol)
    flat_a, shape_a = flatten(actual)
    flat_e, shape_e = flatten(expected)
    if shape_a != shape_e:
        return "shape %s, expected %s" % (shape_a, shape_e)
    bad, worst = 0, 0.0
    for x, y in zip(flat_a, flat_e):
        if isinstance(x, (int, float, complex)) and isinstance(y, (int, float, complex)):
            d = abs(x - y)
            d = math.inf if d != d else d
            if not d <= atol + rtol * abs(y):
                bad += 1
                worst = max(worst, d)
        elif x != y:
            bad += 1
            worst = math.inf
    if bad == 0:
        return None
    return summary(bad, len(flat_a), worst, rtol, atol)


def flatten(value):
    """Leaves and shape of nested lists/tuples; scalars have shape ()."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        leaves, shapes = [], set()
        for item in value:
            sub, shape = flatten(item)
            leaves.extend(sub)
            shapes.add(shape)
        inner = shapes.pop() if len(shapes) == 1 else ("ragged",)
        return leaves, (len(value),) + inner
    return [value], ()


def summary(bad, total, worst, rtol, atol):
    return "%d of %d elements differ beyond rtol=%g atol=%g (max abs diff %g)" % (
        bad, total, rtol, atol, worst,
    )


def check_close(actual, expected, rtol=None, atol=None):
    default_rtol, default_atol = default_tolerance(actual)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    try:
        problem = compare(actual, expected, float(rtol), float(atol))
    except Exception as e:
        raise Incomparable(
            "cannot compare %s with %s: %s: %s"
            % (type(actual).__name__, type(expected).__name__, type(e).__name__, e)
        ) from None
    if problem is not None:
        raise Mismatch(problem)
