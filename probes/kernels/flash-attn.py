"""Smoke for the hub's FlashAttention kernels: kernels-community/flash-attn2,
flash-attn3 and vllm-flash-attn3 (`attn_implementation="kernels-community/…"`
in transformers).

`flash_attn_func(q, k, v, causal=True)` on (batch, seqlen, heads, headdim)
bf16 tensors (2, 128, 4, 64) — the entry point all three share (FlashAttention
3 may return `(out, softmax_lse)`) — compared with torch's
scaled_dot_product_attention in float32. flash-attn3 ships SASS for sm_80 and
sm_90a only and calls `exit(1)` on other GPUs after printing `no kernel
image is available`: preflight names that from stderr. Needs torch.
"""

import torch
import torch.nn.functional as F


def smoke(kernel, device):
    torch.manual_seed(0)
    shape = (2, 128, 4, 64)
    dtype = torch.bfloat16
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    out = kernel.flash_attn_func(q, k, v, causal=True)
    if isinstance(out, tuple):
        out = out[0]
    ref = F.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(), is_causal=True
    ).transpose(1, 2)
    return {"actual": out.float(), "expected": ref, "rtol": 2e-2, "atol": 2e-2}
