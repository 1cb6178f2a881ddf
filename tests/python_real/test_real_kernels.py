"""Real kernel packages from PyPI in the hub layout, with the hub loader as
the judge: what preflight passes, `kernels.get_local_kernel` loads; what
the hub refuses is never a pass and is named. This machine has no GPU and
torch's default (CUDA) build: the hub accepts `torch-cuda` variants by
name here, and only the device depth says they cannot run.
"""

import sys

import pytest

from conftest import hub_loads, run, run_json, torch_arch_variant


def outcomes(checked):
    return {key: r["outcome"] for key, r in checked.items()}


def test_pass_means_the_hub_loads_it_and_refusals_are_named(checked):
    keys = sorted(checked)
    paths = [checked[k]["path"] for k in keys]
    hub = hub_loads(sys.executable, paths)
    for key, refusal in zip(keys, hub):
        outcome = checked[key]["outcome"]
        print(key, outcome["kind"], outcome["depth"], "| hub:", refusal or "loads")
        if outcome["kind"] == "pass":
            assert refusal is None, (key, refusal)
        if refusal is not None:
            assert outcome["kind"] != "pass", key
            if "No module named '" in refusal:
                module = refusal.split("No module named '")[1].rstrip("'")
                assert module in outcome["message"], (key, outcome["message"], refusal)


def test_torch_cuda_kernels_without_a_gpu_are_no_device_not_pass(checked):
    for name in ("liger-kernel", "quack-kernels"):
        for variant in ("torch-cuda", torch_arch_variant()):
            outcome = checked[(name, variant)]["outcome"]
            assert checked[(name, variant)]["declared"]["accepted"], "the hub takes it by name here"
            assert outcome["kind"] == "no_device", (name, variant, outcome)
            assert "torch.cuda.is_available() is False" in outcome["message"], outcome


def test_flash_attn_triton_needs_a_triton_with_experimental_descriptor(checked):
    import importlib.metadata

    triton = importlib.metadata.version("triton")
    outcome = checked[("flash-attn-triton", "torch-cuda")]["outcome"]
    assert outcome["kind"] == "dependency_version", outcome
    assert outcome["message"] == (
        "`triton` %s is installed but has no module `triton.tools.experimental_descriptor`" % triton
    )
    assert "pip install triton" not in outcome["hint"]


def test_torchs_numpy_warning_never_decides(checked):
    try:
        import numpy  # noqa: F401

        pytest.fail("numpy is installed here: the warning this test is about does not appear")
    except ImportError:
        pass
    for key, outcome in outcomes(checked).items():
        assert "numpy" not in outcome["message"].lower(), (key, outcome)
        assert "numpy" not in outcome["hint"].lower(), (key, outcome)


def test_a_missing_cutlass_names_nvidia_cutlass_dsl(preflight, repos, no_cutlass_python, tmp_path):
    repo, made = repos["quack-kernels"]
    doc, _ = run_json(preflight, ["check", "--timeout", "300", "--python", str(no_cutlass_python), str(made["torch-cuda"])],
                      tmp_path / "cache")
    outcome = doc["results"][0]["outcome"]
    # Declared in python-depends: the hub's own dependency check refuses it.
    assert outcome["kind"] == "missing_dependency", outcome
    assert "nvidia-cutlass-dsl" in outcome["hint"], outcome
    [refusal] = hub_loads(no_cutlass_python, [made["torch-cuda"]])
    assert refusal is not None and "nvidia-cutlass-dsl" in refusal, refusal
    # Not declared: the import itself fails, and the hint still names the
    # distribution, not `pip install cutlass`.
    import json

    undeclared = made["torch-cuda"].parent / "torch-cuda-undeclared"
    import shutil

    shutil.copytree(made["torch-cuda"], undeclared)
    meta = json.loads((undeclared / "metadata.json").read_text())
    meta["python-depends"] = [d for d in meta["python-depends"] if d != "nvidia-cutlass-dsl"]
    (undeclared / "metadata.json").write_text(json.dumps(meta, indent=2))
    target = tmp_path / "undeclared" / "build" / "torch-cuda"
    target.parent.mkdir(parents=True)
    undeclared.rename(target)
    doc, _ = run_json(preflight, ["check", "--timeout", "300", "--python", str(no_cutlass_python), str(target)],
                      tmp_path / "cache")
    outcome = doc["results"][0]["outcome"]
    print(outcome)
    assert outcome["kind"] == "missing_dependency", outcome
    assert "pip install nvidia-cutlass-dsl" in outcome["hint"], outcome
    assert "pip install cutlass" not in outcome["hint"], outcome


@pytest.mark.parametrize("name", ["liger-kernel", "flash-attn-triton", "quack-kernels"])
def test_select_cold_and_warm_agree(preflight, repos, name, tmp_path):
    repo, _ = repos[name]
    args = ["select", "--python", sys.executable, str(repo)]
    cold, out = run_json(preflight, args, tmp_path / "cache")
    warm, _ = run_json(preflight, args, tmp_path / "cache")
    print(name, "cold:", cold["variant"], "warm:", warm["variant"], "exit", out.returncode)
    assert warm["variant"] == cold["variant"]
    assert warm["outcome"] == cold["outcome"]
    assert [(a["variant"], a["outcome"]) for a in warm["alternatives"]] == [
        (a["variant"], a["outcome"]) for a in cold["alternatives"]
    ]
    assert all(a["cached"] for a in warm["alternatives"]), warm
    # No GPU here: nothing of these CUDA kernels can be chosen.
    assert cold["variant"] is None, cold


def test_warmup_then_select_answers_from_the_cache(preflight, repos, tmp_path):
    repo, _ = repos["liger-kernel"]
    out = run(preflight, ["warmup", "--python", sys.executable, str(repo)], tmp_path / "cache")
    print(out.stdout, out.stderr)
    doc, _ = run_json(preflight, ["select", "--python", sys.executable, str(repo)], tmp_path / "cache")
    assert all(a["cached"] for a in doc["alternatives"]), doc


VECTOR_ADD = '''import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    out = x.new_empty(x.shape)
    _add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
    return out
'''

SMOKE = '''import torch


def smoke(kernel, device):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.ones(100, dtype=torch.float32)
    return kernel.add(x, y), x + y
'''


def test_tritons_interpreter_needs_numpy_and_says_so(preflight, tmp_path):
    """TRITON_INTERPRET=1 runs Triton kernels on the CPU with torch tensors,
    but Triton's interpreter imports numpy, which this suite keeps out: a
    real missing numpy (Triton's own ModuleNotFoundError) is
    missing_dependency numpy, unlike torch's warning about it. Without the
    interpreter the launch needs a GPU: no_device — probed anew, since
    TRITON_INTERPRET is part of the machine's fingerprint."""
    import json

    import hubify

    try:
        import numpy  # noqa: F401

        pytest.fail("numpy is installed here")
    except ImportError:
        pass
    variant = tmp_path / "vector-add" / "build" / "torch-universal"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text(VECTOR_ADD)
    (variant / "metadata.json").write_text(json.dumps(hubify.metadata("vector-add", "cpu", [])))
    hubify.hub_build.finish(variant)
    smoke = tmp_path / "smoke.py"
    smoke.write_text(SMOKE)
    args = ["check", "--timeout", "300", "--python", sys.executable, str(variant.parent.parent),
            "--smoke", str(smoke)]
    doc, _ = run_json(preflight, args, tmp_path / "cache", env={"TRITON_INTERPRET": "1"})
    outcome = doc["results"][0]["outcome"]
    print(outcome)
    assert outcome["kind"] == "missing_dependency", outcome
    assert outcome["message"] == "missing Python module `numpy`", outcome
    assert "triton/runtime/interpreter.py" in outcome["stderr_tail"], outcome
    doc, _ = run_json(preflight, args, tmp_path / "cache")
    outcome = doc["results"][0]["outcome"]
    print(outcome)
    assert doc["results"][0]["cached"] is False, "another fingerprint, another job"
    assert outcome["kind"] == "no_device", outcome
    assert outcome["phase"] == "smoke", outcome
    assert hub_loads(sys.executable, [variant]) == [None]
