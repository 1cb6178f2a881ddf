"""Smoke for Triton's `triton_kernels` as the hub ships it:
kernels-community/gpt-oss-triton-kernels (what transformers' MXFP4
integration loads, `get_kernel(..., version=1)`) and
kernels-community/triton-kernels.

An MXFP4 weight prepared the way transformers' `integrations/mxfp4.py`
prepares expert weights (`numerics_details.mxfp.downcast_to_mxfp_torch`
along K, then `swizzle_mxfp4`'s layouts from `tensor` and
`tensor_details.layout`), multiplied by bf16 activations with
`matmul_ogs.matmul_ogs` (batched, one expert) and a `PrecisionConfig`
holding the weight scales. Compared with torch on the dequantized weight
(`upcast_from_mxfp_torch`) by 1 - cosine similarity, below 1e-3. Needs torch
and Triton; compute capability 7.5 or newer on CUDA.
"""

import torch


def _diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def smoke(kernel, device):
    torch.manual_seed(0)
    m, k, n = 64, 256, 256
    mxfp = kernel.numerics_details.mxfp
    x = torch.randn(1, m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(1, k, n, device=device, dtype=torch.bfloat16)
    w_q, w_scale = mxfp.downcast_to_mxfp_torch(w, torch.uint8, axis=1)
    dequantized = mxfp.upcast_from_mxfp_torch(w_q, w_scale, torch.bfloat16, axis=1)

    tensor, layout = kernel.tensor, kernel.tensor_details.layout
    value_layout, value_opts = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    w_tri = tensor.convert_layout(tensor.wrap_torch_tensor(w_q, dtype=tensor.FP4), value_layout, **value_opts)
    scale_tri = tensor.convert_layout(tensor.wrap_torch_tensor(w_scale), layout.StridedLayout)
    ogs = kernel.matmul_ogs
    precision = ogs.PrecisionConfig(weight_scale=scale_tri, flex_ctx=ogs.FlexCtx(rhs_data=ogs.InFlexData()))
    bias = torch.zeros(1, n, device=device, dtype=torch.float32)
    out = ogs.matmul_ogs(x, w_tri, bias, precision_config=precision)
    ref = x.float() @ dequantized.float()
    return {"actual": [_diff(out, ref)], "expected": [0.0], "rtol": 0.0, "atol": 1e-3}
