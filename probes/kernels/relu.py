"""Smoke for the hub's example `relu` kernel (kernel-builder's
`examples/kernels/relu`, published as e.g. `kernels-community/relu`):
`relu(x, out=None) -> out`, compared with `torch.relu`. Needs torch.
"""

import torch


def smoke(kernel, device):
    torch.manual_seed(0)
    x = torch.randn(1024, device=device, dtype=torch.float32)
    return kernel.relu(x), torch.relu(x)
