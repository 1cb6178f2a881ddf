"""The Python door in one call, offline: `kernel_preflight.get_kernel`
where a program had `kernels.get_kernel`. On the example hub cache
(examples/transformers/make_hub_cache.py) the hub's preferred variant of
finegrained-fp8 calls exit(1) while it is imported, as a build without code
for the GPU does: plain `kernels.get_kernel` ends the program there;
kernel_preflight probes each variant in a child first and loads the one
that works.

    python examples/transformers/make_hub_cache.py /tmp/hub
    KERNELS_CACHE=/tmp/hub HF_HUB_OFFLINE=1 python examples/quickstart.py
"""

from pathlib import Path

from kernel_preflight import get_kernel  # instead of: from kernels import get_kernel

fp8 = get_kernel("kernels-community/finegrained-fp8", version=4)
print(Path(fp8.__file__).parent.name, fp8.relu([-1.0, 2.0]))
