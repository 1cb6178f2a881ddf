"""preflight doctor: the Python capability probes, run one per sandboxed child.

Usage: python doctor.py torch|triton|cute

Writes one JSON object to the file named by PREFLIGHT_RESULT_FILE:
{"status": "pass"|"missing"|"no_device"|"wrong"|"error", "message": ...,
 "package": ... (missing), "type"/"module" (error), "versions": {...}}.
"""

import json
import os
import sys
import time

RESULT = os.environ["PREFLIGHT_RESULT_FILE"]
VERSIONS = {}


def emit(status, message, **extra):
    extra["versions"] = VERSIONS
    with open(RESULT, "w") as f:
        json.dump(dict(status=status, message=message, **extra), f)
    sys.exit(0)


def need(module, package):
    try:
        mod = __import__(module, fromlist=["_"])
    except ImportError as e:
        emit("missing", f"cannot import {module}: {e}", package=package)
    try:
        from importlib.metadata import version

        VERSIONS[package] = version(package)
    except Exception:  # noqa: BLE001 - a version is nice to have
        VERSIONS[package] = getattr(mod, "__version__", None)
    return mod


def error(e, what):
    emit(
        "error",
        f"{what}: {type(e).__name__}: {e}",
        type=type(e).__name__,
        module=type(e).__module__,
    )


def cuda_torch():
    torch = need("torch", "torch")
    VERSIONS["torch.cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        emit("no_device", f"torch {torch.__version__} ({build}) sees no CUDA device")
    return torch


def device_name(torch):
    major, minor = torch.cuda.get_device_capability(0)
    return f"{torch.cuda.get_device_name(0)} (sm_{major}{minor})"


def probe_torch():
    torch = cuda_torch()
    try:
        start = time.perf_counter()
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        got = (x * 2 + 1).sum().item()
        ms = (time.perf_counter() - start) * 1e3
    except Exception as e:  # noqa: BLE001 - every failure is a finding
        error(e, "a torch op on cuda failed")
    want = 2 * sum(range(1024)) + 1024
    if got != want:
        emit("wrong", f"(arange(1024) * 2 + 1).sum() = {got}, expected {want}")
    emit(
        "pass",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) ran an op on {device_name(torch)} in {ms:.1f} ms",
    )


def probe_triton():
    triton = need("triton", "triton")
    torch = cuda_torch()
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)

    n = 1000
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    try:
        start = time.perf_counter()
        add[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
    except Exception as e:  # noqa: BLE001
        error(e, "triton compile + launch failed")
    if not torch.equal(out, x + y):
        emit("wrong", "triton add: result differs from x + y")
    emit(
        "pass",
        f"triton {triton.__version__} compiled and launched a kernel on {device_name(torch)} in {ms:.0f} ms (first launch, with compilation)",
    )


def probe_cute():
    need("cutlass", "nvidia-cutlass-dsl")
    torch = cuda_torch()
    try:
        import cutlass.cute as cute
        from cutlass.cute.runtime import from_dlpack

        @cute.kernel
        def add_one_kernel(g: cute.Tensor):
            tidx, _, _ = cute.arch.thread_idx()
            g[tidx] = g[tidx] + 1.0

        @cute.jit
        def add_one(m: cute.Tensor):
            add_one_kernel(m).launch(grid=(1, 1, 1), block=(32, 1, 1))

        a = torch.zeros(32, device="cuda", dtype=torch.float32)
        start = time.perf_counter()
        add_one(from_dlpack(a))
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
    except Exception as e:  # noqa: BLE001
        error(e, "CuTe-DSL compile + launch failed")
    if not bool((a == 1).all()):
        emit("wrong", "CuTe-DSL add_one: result differs from 1")
    emit(
        "pass",
        f"CuTe-DSL (nvidia-cutlass-dsl {VERSIONS.get('nvidia-cutlass-dsl')}) compiled and launched a kernel on {device_name(torch)} in {ms:.0f} ms",
    )


if __name__ == "__main__":
    {"torch": probe_torch, "triton": probe_triton, "cute": probe_cute}[sys.argv[1]]()
