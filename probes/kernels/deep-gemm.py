"""Smoke for kernels-community/deep-gemm (`get_kernel("kernels-community/deep-gemm", version=2)`).

DeepGEMM's hub build swallows a failed initialisation at import (no CUDA
toolkit found) and its JIT compiles with nvcc at the first call, so an
import says nothing: this runs what transformers' `integrations/deepgemm.py`
calls, on small shapes, and compares with torch.

- `bf16_gemm_nt(a, b, d)`: d = a @ b.T, JIT-compiled for this GPU;
- `utils.per_token_cast_to_fp8(x, use_ue8m0=…)` (reached by its dotted
  path, as transformers' `resolve_internal_import` does) and
  `fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)` with per-token activations and
  128x128-block weights (the DeepSeek-V3 recipe of `deepgemm_fp8_fp4_linear`);
  on Blackwell the scales are powers of two (UE8M0), which its kernels take.

Verified with DeepGEMM's own metric, 1 - cosine similarity (its tests'
`calc_diff`): below 1e-5 for bf16 and 1e-3 for FP8. Needs torch and a
Hopper (sm_90) or Blackwell (sm_100) GPU; elsewhere DeepGEMM refuses the
architecture.
"""

import torch


def _diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def _per_block_cast_to_fp8(w, ue8m0):
    """128x128-block FP8 weights and their float32 scales (rounded up to a
    power of two for UE8M0), as DeepGEMM's tests make them."""
    n, k = w.shape
    view = w.view(n // 128, 128, k // 128, 128).float()
    amax = view.abs().amax(dim=(1, 3), keepdim=True).clamp(1e-4)
    sf = amax / 448.0
    if ue8m0:
        sf = torch.pow(2.0, torch.ceil(torch.log2(sf)))
    return (view / sf).to(torch.float8_e4m3fn).view(n, k), sf.view(n // 128, k // 128)


def smoke(kernel, device):
    torch.manual_seed(0)
    m, n, k = 128, 256, 256
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    ref = a.float() @ b.float().t()

    d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    kernel.bf16_gemm_nt(a, b, d)
    bf16 = _diff(d, ref)

    ue8m0 = torch.cuda.get_device_capability(torch.device(device))[0] >= 10
    a_fp8 = kernel.utils.per_token_cast_to_fp8(a, use_ue8m0=ue8m0)
    b_fp8 = _per_block_cast_to_fp8(b, ue8m0)
    d8 = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    kernel.fp8_fp4_gemm_nt(a_fp8, b_fp8, d8)
    fp8 = _diff(d8, ref)

    return {
        "actual": [bf16 * 100.0, fp8],
        "expected": [0.0, 0.0],
        "rtol": 0.0,
        "atol": 1e-3,
    }
