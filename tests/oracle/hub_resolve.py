"""Oracle for `preflight resolve`: the hub loader's own resolver.

Reads a JSON list of cases from stdin, each {"variants": [...], "system": {...}},
and prints, per case, the hub's decision trace in its preference order.
Uses `kernels` (pinned in scripts/requirements-test.txt) exactly as the loader
does after it has detected the system.
"""

import json
import sys

from packaging.version import Version

from kernels import backends
from kernels.variants import VariantAccepted, _resolve_variant_for_system, parse_variant


def backend(spec):
    kind, version = spec["backend"], spec.get("version")
    if kind == "cuda":
        return backends.CUDA(version=Version(version))
    if kind == "rocm":
        return backends.ROCm(version=Version(version))
    if kind == "xpu":
        return backends.XPU(version=Version(version))
    if kind == "cann":
        return backends.CANN(version=Version(version))
    return {
        "cpu": backends.CPU,
        "metal": backends.Metal,
        "neuron": backends.Neuron,
        "tpu": backends.TPU,
    }[kind]()


def opt_version(v):
    return None if v is None else Version(v)


def main():
    out = []
    for case in json.load(sys.stdin):
        s = case["system"]
        _, trace = _resolve_variant_for_system(
            variants=[parse_variant(v) for v in case["variants"]],
            selected_backend=backend(s),
            cpu=s["cpu"],
            os=s["os"],
            torch_version=opt_version(s["torch"]),
            torch_cxx11_abi=s["cxx11"],
            tvm_ffi_version=opt_version(s["tvm_ffi"]),
            macos_version=opt_version(s["macos"]),
        )
        out.append(
            [
                {
                    "variant": d.variant.variant_str,
                    "accepted": isinstance(d, VariantAccepted),
                    "reason": None if isinstance(d, VariantAccepted) else d.reason,
                }
                for d in trace
            ]
        )
    json.dump(out, sys.stdout)


main()
