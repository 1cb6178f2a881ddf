"""Smoke for kernels-community/activation (`get_kernel("kernels-community/activation")`).

Runs the two entry points most callers use, `silu_and_mul(out, x)` (the
SwiGLU gate of Llama-style MLPs) and `gelu_fast(out, x)`, on a small
half-precision input and compares them with torch's own functions.
Needs torch; the device comes from the variant's backend.
"""

import torch
import torch.nn.functional as F


def smoke(kernel, device):
    torch.manual_seed(0)
    dtype = torch.float32 if device == "cpu" else torch.float16
    x = torch.randn(4, 512, device=device, dtype=dtype)
    d = x.shape[-1] // 2

    gated = torch.empty(4, d, device=device, dtype=dtype)
    kernel.silu_and_mul(gated, x)
    gated_ref = F.silu(x[..., :d]) * x[..., d:]

    fast = torch.empty_like(x)
    kernel.gelu_fast(fast, x)
    fast_ref = 0.5 * x * (1.0 + torch.tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)))

    return {
        "actual": torch.cat([gated.flatten(), fast.flatten()]),
        "expected": torch.cat([gated_ref.flatten(), fast_ref.flatten()]),
        "rtol": 1e-2,
        "atol": 1e-2,
    }
