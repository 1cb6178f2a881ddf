"""The opt-in suite of real kernel packages (scripts/test-real-kernels.sh):
kernel code from PyPI wrapped in the hub layout, probed by the preflight
binary with this interpreter (torch from PyPI, the hub's `kernels`), and
judged by the hub loader of the same interpreter.

Environment: PREFLIGHT_BIN (the binary; the script builds it),
PREFLIGHT_REAL_WHEELS (the folder of the kernel packages' wheels the script
downloaded), PREFLIGHT_REAL_TRANSFORMERS (the folder under which the script
installed each transformers release with its kernels, transformers-<release>).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hubify

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "oracle" / "hub_load.py"


def _wheel(folder, distribution):
    prefix = distribution.replace("-", "_") + "-"
    found = sorted(p for p in Path(folder).glob("*.whl") if p.name.lower().startswith(prefix))
    if not found:
        pytest.fail("no %s wheel in %s: run scripts/test-real-kernels.sh" % (distribution, folder))
    return found[-1]


def torch_arch_variant():
    """The arch variant name the hub gives a build for the installed torch
    (`torch215-cxx11-cu130-x86_64-linux`)."""
    import platform

    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    cuda = torch.version.cuda
    if cuda is None:
        pytest.fail("these tests expect torch's default (CUDA) build from PyPI")
    cu = "cu" + "".join(cuda.split(".")[:2])
    return "torch%s%s-cxx11-%s-%s-linux" % (major, minor, cu, platform.machine())


# (distribution, top-level package, kernel name, python-depends as the hub
# names them: the hub's allowlist keys)
PACKAGES = [
    ("liger-kernel", "liger_kernel", "liger-kernel", []),
    ("flash-attn-triton", "flash_attn_triton", "flash-attn-triton", ["einops"]),
    ("quack-kernels", "quack", "quack-kernels", ["nvidia-cutlass-dsl", "tvm-ffi", "einops"]),
]


@pytest.fixture(scope="session")
def preflight():
    binary = os.environ.get("PREFLIGHT_BIN")
    if not binary or not Path(binary).is_file():
        pytest.fail("PREFLIGHT_BIN names no binary: run scripts/test-real-kernels.sh")
    return binary


@pytest.fixture(scope="session")
def repos(tmp_path_factory):
    """Per package: its hub repo with a noarch `torch-cuda` variant and an
    arch variant for the installed torch, the same files (kernel-builder's
    layout for a kernel without compiled code has the noarch one only; the
    arch twin is what a build with a stray extension would add)."""
    wheels = os.environ.get("PREFLIGHT_REAL_WHEELS", str(ROOT / ".venv-real" / "wheels"))
    root = tmp_path_factory.mktemp("kernels")
    arch = torch_arch_variant()
    built = {}
    for distribution, top, name, depends in PACKAGES:
        wheel = _wheel(wheels, distribution)
        repo = root / name
        made = {}
        for variant_name in ("torch-cuda", arch):
            path, changed = hubify.variant(repo, variant_name, wheel, top, name, "cuda", depends)
            made[variant_name] = path
        print("%s: %s, %d imports made relative" % (name, wheel.name, changed))
        built[name] = (repo, made)
    return built


def run(preflight, args, cache, env=None):
    full = dict(os.environ, PREFLIGHT_CACHE=str(cache))
    full.pop("PREFLIGHT_PYTHON", None)
    if env:
        full.update(env)
    return subprocess.run([preflight] + args, capture_output=True, text=True, env=full, timeout=900)


def run_json(preflight, args, cache, env=None):
    out = run(preflight, args + ["--json"], cache, env)
    try:
        return json.loads(out.stdout), out
    except ValueError:
        pytest.fail("preflight %s: no JSON (exit %s): %s%s" % (args, out.returncode, out.stdout, out.stderr))


def hub_loads(python, paths):
    """The oracle: `kernels.get_local_kernel` on each path, in a subprocess
    of `python`, offline, from an empty folder. None: loaded."""
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=cwd)
        env.pop("PYTHONPATH", None)
        out = subprocess.run(
            [str(python), str(ORACLE), json.dumps([str(p) for p in paths])],
            capture_output=True, text=True, cwd=cwd, env=env, timeout=900,
        )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["results"]


@pytest.fixture(scope="session")
def checked(preflight, repos, tmp_path_factory):
    """`preflight check --json` on every repo, once: {(kernel, variant): result}."""
    cache = tmp_path_factory.mktemp("cache")
    results = {}
    for name, (repo, _) in repos.items():
        doc, out = run_json(preflight, ["check", "--timeout", "300", "--python", sys.executable, str(repo)], cache)
        for r in doc["results"]:
            results[(name, r["variant"])] = r
        print("\n" + run(preflight, ["check", "--python", sys.executable, str(repo)], cache).stdout)
    return results


@pytest.fixture(scope="session")
def no_cutlass_python(tmp_path_factory):
    """An interpreter with everything this one has except CuTe-DSL
    (`nvidia-cutlass-dsl`, importable as `cutlass`): a venv whose
    site-packages links every entry of this one's but those."""
    import site
    import venv

    here = Path(site.getsitepackages()[0])
    root = tmp_path_factory.mktemp("no-cutlass")
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    there = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                                capture_output=True, text=True, check=True).stdout.strip())
    for entry in here.iterdir():
        lower = entry.name.lower()
        if "cutlass" in lower:
            continue
        if entry.suffix == ".pth" and "cutlass" in entry.read_text(errors="replace").lower():
            continue
        target = there / entry.name
        if not target.exists():
            target.symlink_to(entry)
    check = subprocess.run([str(python), "-c", "import cutlass"], capture_output=True, text=True)
    assert check.returncode != 0, "cutlass is still importable"
    return python
