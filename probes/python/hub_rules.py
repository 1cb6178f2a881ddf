"""Preflight's copy of the hub loader's metadata validators, with the hub's
wording, for an interpreter without the `kernels` package: python-depends
allowlisted (from the copy of the hub's `python_depends.json` the parent
wrote next to the driver) and installed, a warning for dirty builds, archs
vs the device. `kernels-minver` cannot refuse here (there is no installed
`kernels` to compare with).

Works on Python 3.8+.
"""

import importlib.util
import json
import os
import sys

# It loads this file (`acceptance.part`).
acceptance = sys.modules["preflight_acceptance"]


def by_rules(variant, allowlist):
    path = os.path.join(variant, "metadata.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise acceptance.Refused("metadata", "Failed to open `%s`: %s" % (json.dumps(path), e.strerror)) from None
    data, problem = acceptance.part("hub_metadata").parse_metadata(raw)
    if problem is not None:
        raise acceptance.Refused("metadata", "Cannot parse metadata from `%s`: %s" % (json.dumps(path), problem))
    name = os.path.basename(os.path.normpath(variant))
    depends = data["python-depends"]
    # The hub detects the backend first; only its entries depend on it.
    backend = machine_backend() if depends else "cpu"
    validate_dependencies(data["name"].replace("-", "_"), depends, backend, allowlist)
    warn_dirty(data, name)
    check_arch(data, name)


def validate_dependencies(module_name, dependencies, backend, allowlist):
    """`kernels.python_deps.validate_dependencies`."""
    general = allowlist.get("general", {})
    specific = allowlist.get("backends", {}).get(backend, {})
    for dependency in dependencies:
        info = general.get(dependency, specific.get(dependency))
        if info is None:
            raise acceptance.Refused(
                "dependencies",
                "Kernel module `%s` uses unsupported kernel dependency: %s" % (module_name, dependency),
            )
        for package in info.get("python", []):
            module = package.get("import")
            if module is not None and importlib.util.find_spec(module) is None:
                raise acceptance.Refused(
                    "dependencies",
                    "Kernel module `%s` requires Python dependency `%s`. Please install with: pip install %s"
                    % (module_name, package["pkg"], package["pkg"]),
                    package["pkg"],
                )


def missing_package(dependencies, allowlist):
    """The first distribution of `dependencies` whose module is not importable."""
    tables = [allowlist.get("general", {})] + list(allowlist.get("backends", {}).values())
    for dependency in dependencies:
        for table in tables:
            for package in table.get(dependency, {}).get("python", []):
                module = package.get("import")
                if module is not None and importlib.util.find_spec(module) is None:
                    return package["pkg"]
    return None


def machine_backend():
    """`kernels.backends._backend().name`: what torch was built for, else
    cuda when a CUDA runtime library answers, else cpu."""
    if importlib.util.find_spec("torch") is not None:
        import torch

        if hasattr(torch.backends, "tpu"):
            return "tpu"
        if hasattr(torch, "neuron"):
            return "neuron"
        if torch.version.cuda is not None:
            return "cuda"
        if torch.version.hip is not None:
            return "rocm"
        if torch.backends.mps.is_available():
            return "metal"
        if getattr(torch.version, "xpu", None) is not None:
            return "xpu"
        private = getattr(torch._C, "_get_privateuse1_backend_name", None)
        if private is not None and private() == "npu":
            return "cann"
        return "cpu"
    return "cuda" if cuda_runtime_answers() else "cpu"


def cuda_runtime_answers():
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("cudart")
    if name is None:
        return False
    try:
        cudart = ctypes.CDLL(name)
    except OSError:
        return False
    version = ctypes.c_int(0)
    return cudart.cudaRuntimeGetVersion(ctypes.byref(version)) == 0


def warn_dirty(data, variant):
    """`DirtyValidator`: a warning on stderr, never a refusal."""
    provenance = data.get("provenance") or {}
    sources = []
    if (provenance.get("kernel") or {}).get("dirty"):
        sources.append("kernel source")
    if (provenance.get("kernel-builder") or {}).get("dirty"):
        sources.append("kernel-builder")
    if sources:
        sys.stderr.write(
            "Kernel '%s' variant '%s' was built from a dirty git tree (%s had uncommitted changes). Its "
            "recorded git revision does not fully identify the sources it was built from, so the build may "
            "not be reproducible.\n" % (data["name"], variant, ", ".join(sources))
        )


def check_arch(data, variant):
    """`kernels.archs._check_arch_incompatibility`: only with torch and a
    device it sees."""
    backend = data["backend"]
    archs = backend.get("archs")
    if not archs or importlib.util.find_spec("torch") is None:
        return
    import torch

    reason = None
    if backend["type"] == "cuda":
        if torch.version.cuda is None or not torch.cuda.is_available():
            return
        major, minor = torch.cuda.get_device_capability()
        if not supports_cuda_capability(archs, (major, minor)):
            reason = "CUDA capability %d.%d of the current device is not supported by the architectures of the build: %s" % (
                major,
                minor,
                ", ".join(archs),
            )
    elif backend["type"] == "rocm":
        if torch.version.hip is None or not torch.cuda.is_available():
            return
        gcn = torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName.split(":")[0]
        if gcn not in archs:
            reason = "ROCm arch %s of the current device is not supported by the architectures of the build: %s" % (
                gcn,
                ", ".join(archs),
            )
    if reason is not None:
        raise acceptance.Refused(
            "arch",
            "Kernel '%s' variant '%s' does not support the current device: %s. The declared architectures can be "
            "incomplete (e.g. when a kernel has a Triton fallback), pass `check_arch=False` to skip this check. "
            "Warning: the kernel may fail or crash the process at run time when it does not support the device."
            % (data["name"], variant, reason),
        )


def supports_cuda_capability(archs, capability):
    verdicts = [cuda_arch_supports(arch, capability) for arch in archs]
    if all(v is None for v in verdicts):
        return True
    return any(verdicts)


def cuda_arch_supports(arch, capability):
    ptx = arch.endswith("+PTX")
    if ptx:
        arch = arch[: -len("+PTX")]
    suffix = ""
    if arch.endswith(("a", "f")):
        suffix, arch = arch[-1], arch[:-1]
    major, sep, minor = arch.partition(".")
    if not sep or not major.isdigit() or not minor.isdigit():
        return None
    want, have = (int(major), int(minor)), tuple(capability)
    if suffix == "a":
        return have == want
    if suffix == "f" or not ptx:
        return have[0] == want[0] and have[1] >= want[1]
    return have >= want
