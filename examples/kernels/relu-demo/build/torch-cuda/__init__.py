"""relu-demo, CUDA build: imports fine, then its first launch behaves like
a kernel built only for sm_80 / sm_90a on a GPU it has no code for: the C++
side prints the CUDA message and calls exit(1), with no Python traceback
(this is what flash-attn3 does on a B200). Simulated here so that it fails
the same way on every GPU (preflight: unsupported_arch; without a GPU that
torch sees: no_device, before any launch)."""

import os
import sys


def relu(out, x):
    sys.stderr.write(
        "CUDA error (relu_demo/relu.cu:42): no kernel image is available for "
        "execution on the device\n"
    )
    sys.stderr.flush()
    os._exit(1)
