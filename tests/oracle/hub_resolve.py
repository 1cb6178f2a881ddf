"""Oracle for `preflight resolve`: the hub loader's own resolver.

Reads a JSON list of cases from stdin, each {"variants": [...], "system": {...}},
and prints {"release": <kernels version>, "traces": [...]}: per case, the
hub's decision trace in its preference order, and the names it does not
parse (it skips them, as `get_variants` does). Uses whichever `kernels` is
importable (tests/resolve_oracle.rs puts each release of
scripts/kernels-releases.txt first on PYTHONPATH), exactly as the loader
does after it has detected the system.
"""

import importlib.metadata
import inspect
import json
import sys

from packaging.version import Version

try:  # kernels 0.19 keeps its modules under kernels._internals
    from kernels._internals import backends, variants
except ImportError:
    from kernels import backends, variants


def backend(spec):
    kind, version = spec["backend"], spec.get("version")
    versioned = {"cuda": backends.CUDA, "rocm": backends.ROCm, "xpu": backends.XPU, "cann": backends.CANN}
    if kind in versioned:
        return versioned[kind](version=Version(version))
    return {
        "cpu": backends.CPU,
        "metal": backends.Metal,
        "neuron": backends.Neuron,
        "tpu": backends.TPU,
    }[kind]()


def opt_version(v):
    return None if v is None else Version(v)


def main():
    accepts = inspect.signature(variants._resolve_variant_for_system).parameters
    traces = []
    for case in json.load(sys.stdin):
        s = case["system"]
        parsed, unparsed = [], []
        for name in case["variants"]:
            try:
                parsed.append(variants.parse_variant(name))
            except ValueError:
                unparsed.append(name)
        facts = dict(
            variants=parsed,
            selected_backend=backend(s),
            cpu=s["cpu"],
            os=s["os"],
            torch_version=opt_version(s["torch"]),
            torch_cxx11_abi=s["cxx11"],
            tvm_ffi_version=opt_version(s["tvm_ffi"]),
            macos_version=opt_version(s["macos"]),
            python_version=Version(s["python"]),
            free_threaded=s["free_threaded"],
            has_mlx=s["mlx"],
        )
        _, trace = variants._resolve_variant_for_system(**{k: v for k, v in facts.items() if k in accepts})
        traces.append(
            {
                "trace": [
                    {
                        "variant": d.variant.variant_str,
                        "accepted": isinstance(d, variants.VariantAccepted),
                        "reason": None if isinstance(d, variants.VariantAccepted) else d.reason,
                    }
                    for d in trace
                ],
                "unparsed": unparsed,
            }
        )
    json.dump({"release": importlib.metadata.version("kernels"), "traces": traces}, sys.stdout)


main()
