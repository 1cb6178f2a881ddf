"""Smoke for kernels-community/sonic-moe (`get_kernel("kernels-community/sonic-moe")`).

The CuTe-DSL MoE transformers' `integrations/sonicmoe.py` calls:
`moe_general_routing_inputs` with `enums.ActivationType.SWIGLU`, on a small
routed batch (64 tokens, 8 experts, top-2, hidden 512, intermediate 256,
bf16), weights laid out as transformers lays them (`gate_up_proj` (E, 2I, H)
and `down_proj` (E, H, I) permuted to (2I, H, E) and (H, I, E), gate and up
concatenated). Compared with the same MoE in torch (float32) by 1 - cosine
similarity, below 1e-3. Needs torch, nvidia-cutlass-dsl, apache-tvm-ffi and
a Hopper or newer GPU; CuTe-DSL compiles at the first call.
"""

import torch
import torch.nn.functional as F


def _diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def smoke(kernel, device):
    torch.manual_seed(0)
    tokens, hidden, inter, experts, top_k = 64, 512, 256, 8, 2
    dtype = torch.bfloat16
    x = torch.randn(tokens, hidden, device=device, dtype=dtype)
    gate_up = torch.randn(experts, 2 * inter, hidden, device=device, dtype=dtype) / hidden**0.5
    down = torch.randn(experts, hidden, inter, device=device, dtype=dtype) / inter**0.5
    logits = torch.randn(tokens, experts, device=device)
    weights, chosen = torch.topk(logits.softmax(dim=-1), top_k, dim=-1)

    token_idx = torch.arange(tokens, device=device).unsqueeze(1).expand(-1, top_k).reshape(-1).int()
    out, _ = kernel.moe_general_routing_inputs(
        x,
        weights.reshape(-1).to(dtype),
        token_idx,
        chosen.reshape(-1).int(),
        gate_up.permute(1, 2, 0),
        None,
        down.permute(1, 2, 0),
        None,
        E=experts,
        activation_type=kernel.enums.ActivationType.SWIGLU,
        is_inference_mode_enabled=True,
        concat_layout=True,
        stream_id=torch.cuda.current_stream().cuda_stream,
    )

    ref = torch.zeros(tokens, hidden, device=device)
    for slot in range(top_k):
        for e in range(experts):
            rows = chosen[:, slot] == e
            if not rows.any():
                continue
            h = x[rows].float() @ gate_up[e].float().t()
            act = F.silu(h[:, :inter]) * h[:, inter:]
            ref[rows] += weights[rows, slot, None].to(dtype).float() * (act @ down[e].float().t())
    return {"actual": [_diff(out, ref)], "expected": [0.0], "rtol": 0.0, "atol": 1e-3}
