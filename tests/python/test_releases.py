"""The `kernels` releases kernel-preflight supports, and what happens
outside them (docs/flag.md, "Supported releases").

Each supported release has one adapter in the package
(`kernel_preflight._loader.RELEASES`) and its twin in the probe child
(`probes/python/hub_bridge.py`); scripts/kernels-releases.txt lists the
releases CI runs this suite with. A release without an adapter — made here
from the installed one: a copy that says it is 0.20.0, and a copy of this
very release whose seam moved — must be loud and harmless: the flag says
once that it is off and the program runs exactly as with plain `kernels`;
`kernel_preflight.get_kernel` raises `UnsupportedKernels` naming the range;
`preflight check` judges by its own rules, says why, and probes anyway.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXIT_1, ROOT, run_python, sha, variant_files

from kernel_preflight import _loader

PREFERRED, FALLBACK = "torch-cpu", "torch-universal"


def releases_file() -> list[str]:
    return (ROOT / "scripts" / "kernels-releases.txt").read_text().split()


def bridge():
    """probes/python/hub_bridge.py, loaded as the child loads it."""
    for name, file in (("preflight_acceptance", "acceptance.py"), ("preflight_hub_bridge", "hub_bridge.py")):
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, ROOT / "probes" / "python" / file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    return sys.modules["preflight_hub_bridge"]


def test_every_supported_release_has_its_adapter_in_the_package_and_in_the_child():
    listed = releases_file()
    assert [r.first for r in _loader.RELEASES] == listed
    child = bridge().RELEASES
    assert sorted(first for first, _, _ in child.values()) == sorted(listed)
    for release in _loader.RELEASES:
        assert child[release.series] == (release.first, release.package, release.validates_kernels)
        assert _loader.release_of(release.first) is release
        assert bridge().release(release.first) == (release.package, release.validates_kernels)
    assert _loader.release_of("0.17.1") is None and bridge().release("0.17.1") is None
    assert _loader.release_of("0.20.0") is None and bridge().release("0.20.0") is None


def test_the_release_under_test_is_the_installed_one_and_its_adapter_finds_every_module():
    """The adapter of the release CI installed here names modules that
    exist, and what kernel_preflight reaches in them."""
    import kernels

    wanted = os.environ.get("PREFLIGHT_KERNELS_RELEASE")
    if wanted:
        assert kernels.__version__ == wanted
    release = _loader.current()
    assert release.covers(kernels.__version__)
    for name in ("load", "deps", "resolver", "validate", "variants", "hf_hub", "_versions", "compat"):
        assert release.module(name).__name__ == f"{release.package}.{name}"
    assert callable(release.module("load").resolve_kernel_tree) or hasattr(
        release.module("load").resolve_kernel_tree, "__wrapped__"
    )
    validate = release.module("validate")
    for name in ("DependencyValidator", "MinverValidator", "ArchValidator", "DirtyValidator", "logger"):
        assert hasattr(validate, name), name
    assert hasattr(validate, "DigestValidator") == release.validates_kernels
    assert hasattr(release.native(), "Metadata") and hasattr(release.native(), "KernelVersion")
    resolver = release.module("resolver")
    for name in ("RemoteKernel", "LocalKernel", "SequentialResolver", "HubCacheResolver", "_check_trust_remote_code"):
        assert hasattr(resolver, name), name


def fake_release(tmp_path: Path, version: str, *, seam_moved: bool = False) -> Path:
    """A folder to put first on `sys.path`: a copy of the installed
    `kernels`, recorded as release `version`, and with `seam_moved` its
    loader's `resolve_kernel_tree` renamed (a release that moved it)."""
    source = Path(importlib.util.find_spec("kernels").origin).parent
    site = tmp_path / "fake-site"
    shutil.copytree(source, site / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"kernels-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kernels\nVersion: {version}\n")
    if seam_moved:
        for path in (site / "kernels").rglob("*.py"):
            text = path.read_text()
            if "resolve_kernel_tree" in text:
                path.write_text(text.replace("resolve_kernel_tree", "build_kernel_tree"))
    return site


def a_kernel(hub_cache) -> None:
    """The loader's pick calls exit(1) at import; the other variant works."""
    files = {}
    files.update(variant_files(PREFERRED, body=EXIT_1))
    files.update(variant_files(FALLBACK, snapshot=sha(1)))
    hub_cache.add("acme/relu", sha(1), files, refs=("v1",))


PROGRAM = """
import json, kernels
print(json.dumps({"version": kernels.__version__}), flush=True)
print(json.dumps({"v": kernels.get_kernel("acme/relu", version=1).VARIANT}), flush=True)
"""

WARNING = re.compile(r"^kernel_preflight: warning: (.*)$", re.M)


@pytest.mark.parametrize("seam_moved", [False, True], ids=["kernels-0.20.0", "seam-moved"])
def test_an_unknown_release_turns_the_flag_off_once_and_runs_as_plain_kernels(hub_cache, tmp_path, seam_moved):
    import kernels

    version = kernels.__version__ if seam_moved else "0.20.0"
    site = fake_release(tmp_path, version, seam_moved=seam_moved)
    env = {"PYTHONPATH": str(site)}
    plain = run_python(PROGRAM, env=env, unset=("KERNEL_PREFLIGHT",))
    flagged = run_python(PROGRAM, env={**env, "KERNEL_PREFLIGHT": "1"})
    # Plain kernels dies on its pick; so does the program under the flag.
    assert plain.returncode == 1 and flagged.returncode == 1, (plain.stderr, flagged.stderr)
    assert json.loads(plain.stdout.splitlines()[0]) == {"version": version}
    assert flagged.stdout == plain.stdout
    said = WARNING.findall(flagged.stderr)
    assert len(said) == 1, flagged.stderr
    if seam_moved:
        assert f"is not a Python function in kernels {version}" in said[0]
    else:
        assert "kernels 0.20.0 is not a release kernel-preflight supports" in said[0]
        assert _loader.supported() in said[0]
    assert "KERNEL_PREFLIGHT is off" in said[0] and "plain kernels" in said[0]
    assert WARNING.sub("", flagged.stderr).strip() == plain.stderr.strip()


GET_KERNEL = """
import json, kernel_preflight
try:
    kernel_preflight.get_kernel("acme/relu", version=1)
except Exception as e:
    print(json.dumps({"error": [c.__name__ for c in type(e).__mro__], "message": str(e)}))
"""


def test_get_kernel_with_an_unknown_release_raises_naming_the_supported_range(hub_cache, tmp_path):
    site = fake_release(tmp_path, "0.20.0")
    done = run_python(GET_KERNEL, env={"PYTHONPATH": str(site)}, unset=("KERNEL_PREFLIGHT",))
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert line["error"][:2] == ["UnsupportedKernels", "RuntimeError"]
    assert "kernels 0.20.0" in line["message"] and _loader.supported() in line["message"]
    assert "KeyError" not in line["message"]


def test_check_with_an_unknown_release_says_the_judge_is_unknown_and_probes_anyway(hub_cache, tmp_path):
    from kernel_preflight import find_preflight

    a_kernel(hub_cache)
    site = fake_release(tmp_path, "0.20.0")
    snapshot = hub_cache.folder("acme/relu") / "snapshots" / sha(1) / "build"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [str(find_preflight()), "check", str(snapshot / FALLBACK), str(snapshot / PREFERRED), "--json"]
        + ["--python", sys.executable],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    results = {Path(r["path"]).name: r["outcome"] for r in json.loads(done.stdout)["results"]}
    works, exits = results[FALLBACK], results[PREFERRED]
    assert works["kind"] == "pass", works
    assert "hub rules applied by preflight (kernels 0.20.0 is a release preflight does not know" in works["message"]
    # The pick is probed and fails for its own reason, not the loader's.
    assert exits["kind"] != "dependency_version" and exits["phase"] == "import", exits
    assert "kernels" not in exits["message"], exits


def tampered_kernel(hub_cache, repo: str, commit: str) -> Path:
    """A kernel whose pick records a digest of its files and then had one
    changed; the other variant records a true one. Returns the build folder."""
    native = _loader.current().native()
    snapshot = hub_cache.add(
        repo,
        commit,
        {**variant_files(PREFERRED, snapshot=commit), **variant_files(FALLBACK, snapshot=commit)},
        refs=("v1",),
    )
    for variant in (PREFERRED, FALLBACK):
        folder = snapshot / "build" / variant
        doc = json.loads((folder / "metadata.json").read_text())
        files = native.Digest.hash_variant(native.DigestAlgorithm.SHA256, folder).files
        doc["digest"] = {"algorithm": "sha256", "files": files}
        (folder / "metadata.json").write_text(json.dumps(doc))
    init = snapshot / "build" / PREFERRED / "__init__.py"
    init.write_text(init.read_text() + "\nTAMPERED = True\n")
    return snapshot / "build"


DIGEST_PROGRAM = """
import json, kernels
try:
    print(json.dumps({"v": kernels.get_kernel("acme/tampered", version=1).VARIANT}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


def test_a_digest_that_does_not_match_is_the_loaders_refusal_with_and_without_the_flag(hub_cache, tmp_path):
    if not _loader.current().validates_kernels:
        pytest.skip("this kernels release checks no digest")
    build = tampered_kernel(hub_cache, "acme/tampered", sha(3))
    plain = run_python(DIGEST_PROGRAM, unset=("KERNEL_PREFLIGHT",))
    outcomes = tmp_path / "outcomes"
    flagged = run_python(DIGEST_PROGRAM, env={"KERNEL_PREFLIGHT": "1", "PREFLIGHT_CACHE": str(outcomes)})
    assert plain.returncode == 0 and flagged.returncode == 0, (plain.stderr, flagged.stderr)
    (refused,) = [json.loads(x) for x in plain.stdout.splitlines()]
    assert refused["error"] == "RuntimeError" and "do not match the digest" in refused["message"], refused
    assert flagged.stdout == plain.stdout
    # Refused before anything of it ran: no probe, so no outcome recorded
    # (the flag's early `check --cached` may have measured the machine:
    # facts about it, never about the variant).
    kept = [p for p in outcomes.rglob("*") if p.is_file() and p.relative_to(outcomes).parts[0].startswith("outcomes-")]
    assert kept == [], kept

    from kernel_preflight import find_preflight

    done = subprocess.run(
        [str(find_preflight()), "check", str(build / PREFERRED), str(build / FALLBACK), "--json"]
        + ["--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = {Path(r["path"]).name: r["outcome"] for r in json.loads(done.stdout)["results"]}
    assert results[FALLBACK]["kind"] == "pass", results[FALLBACK]
    tampered = results[PREFERRED]
    assert tampered["kind"] == "import_error", tampered
    import kernels

    assert f"hub loader (kernels {kernels.__version__}) refuses it" in tampered["message"], tampered
    assert "do not match the digest" in tampered["message"], tampered
