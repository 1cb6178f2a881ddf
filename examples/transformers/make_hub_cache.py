"""An offline hub cache (the layout `kernels` reads with HF_HUB_OFFLINE=1)
holding the four kernels transformers 5.22 loads by name, with variants
that fail the way real ones do: the hub's preferred variant of
finegrained-fp8 calls exit(1) while it is imported (a build without code for
the GPU), sonic-moe's crashes, nothing of nvfp4-gemm works, deep-gemm works.
The variants are pure Python, without torch: demos of the failure modes,
not the kernels' code, each repository with a smoke of its own.
Without torch the hub loader prefers `torch-cpu` and accepts
`torch-universal` too.

    python examples/transformers/make_hub_cache.py /tmp/hub
    export KERNELS_CACHE=/tmp/hub HF_HUB_OFFLINE=1
"""

import json
import sys
from pathlib import Path

WORKS = "def relu(xs):\n    return [max(x, 0.0) for x in xs]\n"
EXITS = (
    "import os, sys\n"
    "sys.stderr.write('CUDA error (relu.cu:42): no kernel image is available for execution on the device\\n')\n"
    "os._exit(1)\n"
)
CRASHES = "import ctypes\nctypes.string_at(0)\n"
NEEDS_A_MODULE = "import nvfp4_native_ops\n"
# Each demo repository's own smoke, in the hub's convention
# (`benchmarks/benchmark.py`): a repository's own benchmarks come before
# preflight's library, whose smokes for these repositories run the real
# kernels' APIs (with torch, on a GPU).
BENCHMARK = """from kernels.benchmark import Benchmark


class DemoBenchmark(Benchmark):
    def setup_small(self):
        self.x = [-1.0, 2.0]

    def benchmark_small(self):
        self.out = self.kernel.relu(self.x)

    def verify_small(self):
        return [0.0, 2.0]
"""

KERNELS = {
    # repo: (commit, refs, torch-cpu body, torch-universal body)
    "kernels-community/finegrained-fp8": ("4" * 40, ["v4"], EXITS, WORKS),
    "kernels-community/deep-gemm": ("2" * 40, ["v2"], WORKS, WORKS),
    "kernels-community/sonic-moe": ("5" * 40, ["ep-support"], CRASHES, WORKS),
    "kernels-community/nvfp4-gemm": ("6" * 40, ["v1"], EXITS, NEEDS_A_MODULE),
}


def main(root: Path) -> None:
    for repo, (commit, refs, cpu, universal) in KERNELS.items():
        folder = root / ("kernels--" + repo.replace("/", "--"))
        name = repo.split("/")[1] + "-demo"
        benchmarks = folder / "snapshots" / commit / "benchmarks"
        benchmarks.mkdir(parents=True, exist_ok=True)
        (benchmarks / "benchmark.py").write_text(BENCHMARK)
        for i, (variant, body) in enumerate((("torch-cpu", cpu), ("torch-universal", universal))):
            build = folder / "snapshots" / commit / "build" / variant
            build.mkdir(parents=True, exist_ok=True)
            (build / "__init__.py").write_text(body)
            metadata = {
                "name": name,
                "id": f"_{name.replace('-', '_')}_{commit[:7]}_{i}",
                "version": 1,
                "license": "Apache-2.0",
                "python-depends": [],
                "backend": {"type": "cpu"},
            }
            (build / "metadata.json").write_text(json.dumps(metadata))
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        for ref in refs:
            (folder / "refs" / ref).write_text(commit)
    print(f"hub cache with {len(KERNELS)} kernels at {root}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_hub_cache.py DIR")
    main(Path(sys.argv[1]))
