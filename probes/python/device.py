"""Whether the device a variant's backend needs is usable from this process,
for preflight's python executor (loaded by the driver from the sandbox
directory).

A variant built for a device (cuda, rocm, xpu, metal, …) only works here if
something in this interpreter can reach that device: torch must see it and,
for a kernel that imported Triton, Triton must have an active driver. A
variant that merely imports is not a pass on a machine whose device nothing
can use (a Triton kernel on a machine without a GPU imports fine, then
fails at its first launch with `0 active drivers`).

Works on Python 3.8+.
"""

import importlib.util
import sys


class Unusable(Exception):
    """Nothing here can use the device; the message names what said so."""

    def __init__(self, device, message):
        super().__init__(message)
        self.device = device


def needed(requested):
    """Whether the variant's own device must be confirmed: not for cpu, and
    not for universal variants (`auto`), which run wherever torch does."""
    return requested not in ("cpu", "auto")


def confirm(device):
    """Confirm that `device` (`cuda`, `cuda:1`, `xpu`, `mps`, `npu`, …) is
    usable; raise `Unusable` otherwise. torch is imported if it is installed:
    the workload needs it, and the hub loader has imported it already."""
    kind, _, index = device.partition(":")
    ordinal = int(index) if index.isdigit() else 0
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        import torch
    triton = sys.modules.get("triton")
    if torch is None and triton is None:
        raise Unusable(device, "torch is not installed here (nor triton): nothing can use a %s device" % kind)
    if torch is not None:
        torch_sees(torch, device, kind, ordinal)
    if triton is not None:
        triton_driver(triton, device)


def torch_sees(torch, device, kind, ordinal):
    said = "torch %s" % getattr(torch, "__version__", "?")
    try:
        if kind == "mps":
            available = torch.backends.mps.is_available()
            check = "torch.backends.mps.is_available()"
        else:
            module = getattr(torch, kind, None)
            if module is None:
                raise Unusable(device, "%s has no torch.%s: it is not built for this device" % (said, kind))
            available = module.is_available()
            check = "torch.%s.is_available()" % kind
        count = torch.cuda.device_count() if available and kind == "cuda" else None
    except Unusable:
        raise
    except Exception as e:
        raise Unusable(device, "%s cannot query its %s device: %s: %s" % (said, kind, type(e).__name__, e)) from None
    if not available:
        build = ""
        version = getattr(torch, "version", None)
        if kind == "cuda" and getattr(version, "cuda", None) is None and getattr(version, "hip", None) is None:
            build = " (a CPU-only build: torch.version.cuda is None)"
        raise Unusable(device, "%s sees no %s device: %s is False%s" % (said, kind, check, build))
    if count is not None and count <= ordinal:
        raise Unusable(device, "%s sees %d cuda device(s), not device %d" % (said, count, ordinal))


def triton_driver(triton, device):
    """Triton picks its one active driver on first use; no GPU (or no
    torch that sees one) means `RuntimeError: 0 active drivers`."""
    said = "triton %s" % getattr(triton, "__version__", "?")
    try:
        from triton.runtime import driver

        active = driver.active
        # Before Triton 3.3 `active` is a lazy proxy: the first attribute
        # read creates the driver.
        getattr(active, "get_current_target")
    except Exception as e:
        raise Unusable(device, "%s has no usable driver: %s: %s" % (said, type(e).__name__, e)) from None


def state(device):
    """What this process finds of `device`, for the parent to judge an
    import guard by: whether it is usable (`confirm`), why not, and its
    compute capability and name — from torch when it sees the device, else
    from the CUDA driver itself (a guard may have asked the driver). Never
    raises."""
    kind, _, index = device.partition(":")
    ordinal = int(index) if index.isdigit() else 0
    found = {"device": device, "usable": True}
    try:
        confirm(device)
    except Unusable as e:
        found.update(usable=False, said=str(e))
    except Exception as e:  # a broken torch must not hide the kernel's own error
        found.update(usable=False, said="%s: %s" % (type(e).__name__, e))
    if kind != "cuda":
        return found
    torch = sys.modules.get("torch")
    try:
        if found["usable"] and torch is not None:
            major, minor = torch.cuda.get_device_capability(ordinal)
            found.update(capability="%d.%d" % (major, minor), name=torch.cuda.get_device_name(ordinal),
                         seen_by="torch")
            return found
    except Exception:
        pass
    found.update(driver_device(ordinal))
    return found


def driver_device(ordinal):
    """The capability and name the CUDA driver reports for device `ordinal`
    (`PREFLIGHT_LIBCUDA`, else `libcuda.so.1`), or nothing when there is no
    driver or no such device."""
    import ctypes
    import os

    try:
        cuda = ctypes.CDLL(os.environ.get("PREFLIGHT_LIBCUDA") or "libcuda.so.1")
        handle, count = ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return {}
        if count.value <= ordinal or cuda.cuDeviceGet(ctypes.byref(handle), ordinal) != 0:
            return {}
        major, minor = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
        if cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, handle) != 0:
            return {}
        if cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, handle) != 0:
            return {}
        name = ctypes.create_string_buffer(256)
        found = {"capability": "%d.%d" % (major.value, minor.value), "seen_by": "driver"}
        if cuda.cuDeviceGetName(name, 256, handle) == 0:
            found["name"] = name.value.decode("utf-8", "replace")
        return found
    except (OSError, AttributeError):
        return {}
