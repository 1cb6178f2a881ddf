"""Smoke for kernels-community/nvfp4-gemm (transformers' `lazy_load_kernel("nvfp4")`).

The entry points transformers' `integrations/nvfp4.py` requires: `pack` a
bf16 weight (256 x 256) to NVFP4 (`PackedWeight`, `swizzled_sf_shape`
beside it) and `gemm` it with 64 bf16 rows (the W4A4 CUTLASS path;
activations quantized to NVFP4 inside). Compared with the kernel's own
pure-torch emulation of the same numerics (`quantize_reference` of weight
and activations, run on the CPU) by 1 - cosine similarity, below 1e-3.
Needs torch and a Blackwell (sm_100 or newer) GPU.
"""

import torch


def _diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def smoke(kernel, device):
    torch.manual_seed(0)
    m, n, k = 64, 256, 256
    for name in ("PackedWeight", "swizzled_sf_shape"):
        getattr(kernel, name)
    w = torch.randn(n, k, dtype=torch.bfloat16)
    x = torch.randn(m, k, dtype=torch.bfloat16)
    packed = kernel.pack(w.to(device), device=device)
    out = kernel.gemm(packed, x.to(device))
    ref = kernel.quantize_reference(x).float() @ kernel.quantize_reference(w).float().t()
    return {"actual": [_diff(out.cpu(), ref)], "expected": [0.0], "rtol": 0.0, "atol": 1e-3}
