"""`KERNEL_PREFLIGHT=1` under the real transformers (unmodified) and
`kernelize`, with torch: the programs run as a user runs them, with the
variable and without it, for each release of scripts/transformers-releases.txt
with the `kernels` it requires: 5.22.2 with kernels 0.17.2 (an extra there),
5.25.0 with kernels 0.19.1 (a core dependency, and its own
`lazy_load_kernel`, which binds `kernels.get_kernel` when transformers is
imported). Each kernel is a hub cache made here whose
preferred variant for this torch (the CUDA arch variant) calls `exit(1)`
when it is imported, as a build without code for the GPU does, and whose
`torch-universal` variant works on the CPU.

Each transformers is installed apart from this environment with its
`kernels` (scripts/test-real-kernels.sh: `pip install --target`, on
PYTHONPATH for these programs only, so before this environment's kernels
0.17.2), so that numpy, which it needs, stays out of the probes of the
other tests.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, torch_arch_variant

EXIT_1 = (
    "import os, sys\n"
    "sys.stderr.write('CUDA error (kernel.cu:42): no kernel image is available for execution on the device\\n')\n"
    "sys.stderr.flush()\n"
    "os._exit(1)\n"
)

# A working kernel: DeepGEMM's entry points transformers looks up, and an
# RMSNorm layer for kernelize (stateless, forward as LlamaRMSNorm's).
UNIVERSAL = """
import torch
from torch import nn

VARIANT = "torch-universal"
CALLS = []

def fp8_fp4_gemm_nt(*args, **kwargs):
    raise NotImplementedError

class layers:
    class RMSNorm(nn.Module):
        def forward(self, hidden_states):
            CALLS.append(tuple(hidden_states.shape))
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))
"""


# The stand-ins' own smoke (`benchmarks/`, the hub's convention), which
# comes before preflight's library smoke for the real repositories they
# are named after (keyed by repo id): it calls what every universal
# variant here has.
OWN_SMOKE = """
from kernels.benchmark import Benchmark


class Loaded(Benchmark):
    def setup_small(self):
        pass

    def benchmark_small(self):
        assert self.kernel.VARIANT == "torch-universal"
"""


def sha(n):
    return ("%x" % n) * 40


def kernel(root, repo, commit, refs, *, universal=UNIVERSAL):
    """`repo` in the hub cache at `root`: the arch variant exits, the
    universal one is `universal`."""
    snapshot = root / ("kernels--" + repo.replace("/", "--")) / "snapshots" / commit
    for i, (variant, body) in enumerate(((torch_arch_variant(), EXIT_1), ("torch-universal", universal))):
        folder = snapshot / "build" / variant
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(body)
        backend = {"type": "cuda"} if variant != "torch-universal" else {"type": "cpu"}
        metadata = {
            # Named apart from the real kernels, whose workloads preflight's
            # smoke library holds; the repo's own smoke comes first anyway.
            "name": repo.split("/")[1] + "-demo",
            "id": "_%s_%s_%d" % (repo.split("/")[1].replace("-", "_"), commit[:7], i),
            "version": 1,
            "license": "Apache-2.0",
            "python-depends": [],
            "backend": backend,
        }
        (folder / "metadata.json").write_text(json.dumps(metadata))
    (snapshot / "benchmarks").mkdir()
    (snapshot / "benchmarks" / "benchmark.py").write_text(OWN_SMOKE)
    for ref in refs:
        (snapshot.parent.parent / "refs").mkdir(parents=True, exist_ok=True)
        (snapshot.parent.parent / "refs" / ref).write_text(commit)


RELEASES = [
    tuple(line.split())
    for line in (ROOT / "scripts" / "transformers-releases.txt").read_text().splitlines()
    if line.strip()
]


@pytest.fixture(params=RELEASES, ids=["transformers-%s-kernels-%s" % pair for pair in RELEASES])
def pair(request):
    """(transformers release, kernels release, the folder holding both)."""
    transformers, kernels = request.param
    base = Path(os.environ.get("PREFLIGHT_REAL_TRANSFORMERS", ROOT / ".venv-real"))
    path = base / ("transformers-" + transformers)
    if not (path / "transformers").is_dir():
        pytest.fail("transformers %s is not installed at %s: run scripts/test-real-kernels.sh" % (transformers, path))
    return transformers, kernels, path


@pytest.fixture
def hub(tmp_path):
    """The kernels transformers 5.22's `_HUB_KERNEL_MAPPING` names, and an
    RMSNorm kernel for kernelize."""
    root = tmp_path / "hub"
    kernel(root, "kernels-community/deep-gemm", sha(2), ("v2",))
    kernel(root, "kernels-community/finegrained-fp8", sha(4), ("v4",))
    kernel(root, "kernels-community/sonic-moe", sha(5), ("ep-support",))
    # nvfp4: nothing works here (the universal variant lacks a module).
    kernel(root, "kernels-community/nvfp4-gemm", sha(6), ("v1",), universal="import nvfp4_native_helper\n")
    kernel(root, "acme/rmsnorm", sha(7), ("v1",))
    return root


def run(program, hub, tmp_path, pair, flag):
    env = dict(os.environ)
    env.update(
        KERNELS_CACHE=str(hub),
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf-home"),
        PREFLIGHT_CACHE=str(tmp_path / "outcomes"),
        PYTHONPATH=str(pair[2]),
        TRANSFORMERS_NO_ADVISORY_WARNINGS="1",
    )
    env.pop("PREFLIGHT_BIN", None)  # the wheel's own binary
    env.pop("KERNEL_PREFLIGHT", None)
    if flag:
        env["KERNEL_PREFLIGHT"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True, env=env, timeout=900
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr


LAZY = """
import json
from transformers.integrations.hub_kernels import lazy_load_kernel

for name in ("deep-gemm", "finegrained-fp8", "sonic-moe", "nvfp4"):
    kernel = lazy_load_kernel(name)
    print(json.dumps({"kernel": name, "variant": getattr(kernel, "VARIANT", None)}), flush=True)
"""


def test_the_kernel_preflight_wheel_is_installed_here():
    import kernel_preflight

    assert Path(kernel_preflight.find_preflight()).is_file()


VERSIONS = """
import importlib.metadata as m, json, kernels, transformers
print(json.dumps({"transformers": transformers.__version__, "kernels": m.version("kernels"),
                  "kernels_from": kernels.__file__}))
"""


def test_each_program_runs_the_pairs_transformers_and_kernels(hub, tmp_path, pair):
    code, lines, stderr = run(VERSIONS, hub, tmp_path, pair, flag=True)
    assert code == 0, stderr
    [line] = lines
    assert (line["transformers"], line["kernels"]) == pair[:2]
    assert Path(line["kernels_from"]).is_relative_to(pair[2])


def test_transformers_lazy_load_kernel_without_the_flag_dies_with_the_kernel(hub, tmp_path, pair):
    code, lines, stderr = run(LAZY, hub, tmp_path, pair, flag=False)
    assert code == 1 and lines == [], stderr
    assert "no kernel image is available" in stderr


def test_transformers_lazy_load_kernel_with_the_flag_loads_what_works_or_falls_back(hub, tmp_path, pair):
    code, lines, stderr = run(LAZY, hub, tmp_path, pair, flag=True)
    assert code == 0, stderr
    assert {line["kernel"]: line["variant"] for line in lines} == {
        "deep-gemm": "torch-universal",
        "finegrained-fp8": "torch-universal",
        "sonic-moe": "torch-universal",
        "nvfp4": None,  # transformers' own fallback: lazy_load_kernel returns None
    }
    # The fallback is the one transformers writes for a kernel with no
    # build here (`except FileNotFoundError`, which logs this warning), in
    # both releases.
    assert "Failed to load kernel nvfp4: " in stderr, stderr


TINY_LLAMA = """
import json
import torch
from kernels import LayerRepository, Mode, kernelize, use_kernel_mapping
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2)
model = LlamaForCausalLM(config).eval()
"""

KERNELIZE = TINY_LLAMA + """
mapping = {"RMSNorm": {"cpu": LayerRepository("acme/rmsnorm", layer_name="RMSNorm", version=1)}}
with use_kernel_mapping(mapping):
    kernelize(model, device="cpu", mode=Mode.INFERENCE)
with torch.no_grad():
    model(torch.tensor([[1, 2, 3]]))
import kernels
[loaded] = [k for k in kernels.get_loaded_kernels() if "kernels--acme--rmsnorm" in k.module.__file__]
print(json.dumps({"variant": loaded.module.VARIANT, "calls": len(loaded.module.CALLS)}))
"""


def test_kernelize_of_a_transformers_model_under_the_flag_uses_the_variant_that_works(hub, tmp_path, pair):
    code, lines, stderr = run(KERNELIZE, hub, tmp_path, pair, flag=True)
    assert code == 0, stderr
    [line] = lines
    assert line["variant"] == "torch-universal"
    # The kernel's layer ran in the model's forward (two norms and the final
    # one of a one-layer Llama).
    assert line["calls"] == 3, line


def test_kernelize_without_the_flag_dies_with_the_hubs_pick(hub, tmp_path, pair):
    code, lines, stderr = run(KERNELIZE, hub, tmp_path, pair, flag=False)
    assert code == 1 and lines == [], stderr


KERNELIZE_NOTHING_WORKS = TINY_LLAMA + """
from kernels import KernelizeFallback
mapping = {"RMSNorm": {"cpu": LayerRepository("kernels-community/nvfp4-gemm", layer_name="RMSNorm", version=1)}}
with use_kernel_mapping(mapping):
    # transformers' own kernelize falls back in every case (KernelizeFallback.ALL).
    kernelize(model, device="cpu", mode=Mode.INFERENCE, use_fallback=KernelizeFallback.ALL)
with torch.no_grad():
    out = model(torch.tensor([[1, 2, 3]]))
print(json.dumps({"logits": list(out.logits.shape)}))
"""


def test_kernelize_falls_back_to_the_models_own_forward_when_nothing_works(hub, tmp_path, pair):
    code, lines, stderr = run(KERNELIZE_NOTHING_WORKS, hub, tmp_path, pair, flag=True)
    assert code == 0, stderr
    assert lines == [{"logits": [1, 3, 64]}]
