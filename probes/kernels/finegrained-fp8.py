"""Smoke for kernels-community/finegrained-fp8 (`get_kernel("kernels-community/finegrained-fp8", version=4)`).

The Triton FP8 matmul transformers' `integrations/finegrained_fp8.py` loads
(`matmul_2d`, with `matmul_batched` and `matmul_grouped` required beside
it): bf16 activations quantized to FP8 inside the kernel, FP8 E4M3 weights
with float32 128x128-block scales (`weight_scale_inv`), bf16 out. Compared
with torch on the dequantized weights by 1 - cosine similarity, below 1e-3
(the activation quantization is the only difference). Needs torch and a GPU
with FP8 (sm_89 or newer); Triton compiles the kernel at the first call.
"""

import torch


def _diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def smoke(kernel, device):
    torch.manual_seed(0)
    m, n, k = 64, 256, 256
    for name in ("matmul_2d", "matmul_batched", "matmul_grouped"):
        getattr(kernel, name)
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=device, dtype=torch.float32)
    blocks = w.view(n // 128, 128, k // 128, 128)
    scale = blocks.abs().amax(dim=(1, 3), keepdim=True).clamp(1e-4) / 448.0
    w_fp8 = (blocks / scale).to(torch.float8_e4m3fn).view(n, k)
    scale_inv = scale.view(n // 128, k // 128).contiguous()
    out = kernel.matmul_2d(x, w_fp8, scale_inv, [128, 128], torch.bfloat16)
    dequantized = (w_fp8.float().view(n // 128, 128, k // 128, 128) * scale).view(n, k)
    ref = x.float() @ dequantized.t()
    return {"actual": [_diff(out, ref)], "expected": [0.0], "rtol": 0.0, "atol": 1e-3}
