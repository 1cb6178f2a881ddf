"""A program shaped like transformers' kernel loader
(`integrations/hub_kernels.py`): the hub's `get_kernel` bound at import, a
table of kernels, and a lazy loader that falls back to None on
FileNotFoundError. Nothing in it knows about kernel-preflight."""

from pathlib import Path

from kernels import get_kernel as get_kernel_hub

HUB_KERNEL_MAPPING = {
    "finegrained-fp8": {"repo_id": "kernels-community/finegrained-fp8", "version": 4},
    "deep-gemm": {"repo_id": "kernels-community/deep-gemm", "version": 2},
    "sonic-moe": {"repo_id": "kernels-community/sonic-moe", "revision": "ep-support"},
    "nvfp4": {"repo_id": "kernels-community/nvfp4-gemm", "version": 1},
}


def lazy_load_kernel(name):
    spec = HUB_KERNEL_MAPPING[name]
    try:
        return get_kernel_hub(spec["repo_id"], revision=spec.get("revision"), version=spec.get("version"))
    except FileNotFoundError as e:
        print(f"{name}: falling back to the slow path: {e}")
        return None


for name in HUB_KERNEL_MAPPING:
    kernel = lazy_load_kernel(name)
    print(f"{name}: {Path(kernel.__file__).parent.name if kernel else None}")
