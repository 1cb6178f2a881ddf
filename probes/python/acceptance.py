"""The hub loader's acceptance of a variant, checked by preflight's python
executor before the variant is imported (loaded by the driver from the
sandbox directory).

`kernels.get_kernel` parses `metadata.json` with its own parser and runs its
metadata validators (python-depends allowlisted and installed,
`kernels-minver`, a warning for dirty builds, archs vs the device) before it
imports anything; what it refuses never loads, so it is never a pass. With
the `kernels` package in this interpreter, its own code decides here too.
Without it, this module applies the same rules itself, with the hub's
wording, from the copy of the hub's `python_depends.json` that the parent
wrote next to it; `kernels-minver` cannot refuse then (there is no installed
`kernels` to compare with).

Works on Python 3.8+.
"""

import importlib.util
import json
import os
import stat
import sys

# The acceptance label of preflight's own copy of the rules.
PREFLIGHT = "preflight"

# The hub's validator classes, by the name the protocol gives their check.
VALIDATORS = {
    "DependencyValidator": "dependencies",
    "MinverValidator": "minver",
    "ArchValidator": "arch",
}


class Refused(Exception):
    """The hub loader refuses the variant: which check, its message, and the
    distribution to install when an allowed dependency is missing."""

    def __init__(self, validator, message, package=None):
        super().__init__(message)
        self.validator = validator
        self.message = message
        self.package = package
        self.who = PREFLIGHT


def regular_metadata(variant):
    """Whether the variant's `metadata.json` is a regular file (or absent,
    which its readers report themselves): a FIFO or a device there would
    block every reader, the hub loader's too, forever."""
    try:
        return stat.S_ISREG(os.stat(os.path.join(variant, "metadata.json")).st_mode)
    except OSError:
        return True


def accept(variant, allowlist):
    """Judge `variant` the way the hub loader would: returns who judged
    (`kernels X.Y.Z` or `preflight`), raises `Refused` (naming who) when it
    says no. A `kernels` that does not import raises what it raises: the
    hub loader cannot load anything then."""
    if not regular_metadata(variant):
        path = os.path.join(variant, "metadata.json")
        raise Refused("metadata", "`%s` is not a regular file" % path)
    if importlib.util.find_spec("kernels") is None:
        judge, who = by_rules, PREFLIGHT
    else:
        judge, who = by_kernels, "kernels %s" % hub_package().__version__
    try:
        judge(variant, allowlist)
    except Refused as refused:
        refused.who = who
        raise
    return who


def load_allowlist(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------- judged ahead
# Importing the hub's parser and validators costs a probe child more than
# the rest of the driver together. When many variants are probed, one child
# of the same interpreter, environment and sandbox judges them all first
# (`judge_all`), and each probe child replays its own verdict (`judged`,
# `replay`), or judges itself when there is none for the very bytes of its
# `metadata.json`.

# Refusals after which the judge goes on: the hub's parser and its minver
# check have no side effect, so the next verdict is what a fresh
# interpreter would give. After any other refusal (one that may come from a
# failed `import torch`, say) it stops: the variants left judge themselves.
PURE_REFUSALS = ("metadata", "minver")


def judge_all(variants, allowlist, out):
    """Judge `variants` in order, appending one JSON line per verdict to the
    file `out`: the variant, the `metadata.json` text it judged (latin-1,
    byte for byte), who judged and the refusal if any. Stops (leaving the
    rest to their own children) at the first variant whose judgment wrote
    anything on stderr (file descriptor 2 must be a regular file): a probe
    child's stderr is evidence, and a warning printed once here would not
    be printed for the next variant; and after a refusal that is not pure."""
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for variant in variants:
            if not regular_metadata(variant):
                return
            try:
                with open(os.path.join(variant, "metadata.json"), "rb") as f:
                    raw = f.read()
            except OSError:
                return
            verdict = {"variant": variant, "metadata": raw.decode("latin-1"), "refused": None}
            try:
                verdict["who"] = accept(variant, allowlist)
            except Refused as refused:
                verdict["who"] = refused.who
                verdict["refused"] = {"validator": refused.validator, "message": refused.message,
                                      "package": refused.package}
            sys.stderr.flush()
            if os.fstat(2).st_size:
                return
            os.write(fd, (json.dumps(verdict, ensure_ascii=True) + "\n").encode("ascii"))
            if verdict["refused"] is not None and verdict["refused"]["validator"] not in PURE_REFUSALS:
                return
    finally:
        os.close(fd)


def judged(path, variant, raw):
    """The verdict in the judge's file `path` on `variant` as its
    `metadata.json` reads now (`raw`), if the judge saw these very bytes;
    else None (a line the judge did not finish is skipped)."""
    if path is None or raw is None:
        return None
    text = raw.decode("latin-1")
    try:
        f = open(path)
    except OSError:
        return None
    with f:
        for line in f:
            try:
                verdict = json.loads(line)
            except ValueError:
                continue
            if isinstance(verdict, dict) and verdict.get("variant") == variant and verdict.get("metadata") == text:
                return verdict
    return None


def replay(verdict):
    """What `accept` said when the judge asked it: who judged, or its `Refused`."""
    refused = verdict["refused"]
    if refused is not None:
        error = Refused(refused["validator"], refused["message"], refused["package"])
        error.who = verdict["who"]
        raise error
    return verdict["who"]


# ---------------------------------------------------------------- kernels


def hub_package():
    """The `kernels` package, without running its `__init__.py` yet: that
    imports the whole hub client (huggingface_hub's HTTP API, about a second
    on every probe), and the parser and validators need none of it. The
    package completes itself the first time anything reads a name it lacks
    (`from kernels import get_kernel`, `kernels.get_kernel`), so the variant
    and its benchmarks still see the whole package; submodules
    (`kernels.benchmark`) import as usual."""
    package = sys.modules.get("kernels")
    if package is not None:
        return package
    import importlib.metadata

    spec = importlib.util.find_spec("kernels")
    package = importlib.util.module_from_spec(spec)
    # What `kernels/__init__.py` sets first, and all the validators read.
    package.__version__ = importlib.metadata.version("kernels")

    def complete(name):
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = complete
    sys.modules["kernels"] = package
    return package


def by_kernels(variant, allowlist):
    """The installed hub loader's own parser and validators, in its order
    (`get_kernel`: the default validators, then the arch check)."""
    from kernels._rust import Metadata
    from kernels.validate import ArchValidator, default_metadata_validators

    try:
        metadata = Metadata.read_from_file(os.path.join(variant, "metadata.json"))
    except Exception as e:  # ValueError, OSError: whatever the hub raises, it does not load
        raise Refused("metadata", str(e)) from None
    name = os.path.basename(os.path.normpath(variant))
    for validator in default_metadata_validators() + [ArchValidator()]:
        try:
            validator.validate_metadata(metadata=metadata, variant=name)
        except Exception as e:
            check = VALIDATORS.get(type(validator).__name__, "other")
            package = None
            if check == "dependencies" and isinstance(e, ImportError):
                package = missing_package(list(metadata.python_depends), allowlist)
            raise Refused(check, str(e), package) from None


# ---------------------------------------------------------------- preflight's rules


def by_rules(variant, allowlist):
    path = os.path.join(variant, "metadata.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise Refused("metadata", "Failed to open `%s`: %s" % (json.dumps(path), e.strerror)) from None
    data, problem = parse_metadata(raw)
    if problem is not None:
        raise Refused("metadata", "Cannot parse metadata from `%s`: %s" % (json.dumps(path), problem))
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
            raise Refused(
                "dependencies",
                "Kernel module `%s` uses unsupported kernel dependency: %s" % (module_name, dependency),
            )
        for package in info.get("python", []):
            module = package.get("import")
            if module is not None and importlib.util.find_spec(module) is None:
                raise Refused(
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
        raise Refused(
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


# ---------------------------------------------------------------- the parser
# What `kernels._rust.Metadata` accepts, with serde's wording (without its
# line and column): fields checked in document order, then the missing
# required ones in the order the hub declares them. Unknown keys are ignored.

REQUIRED = ("name", "id", "version", "license", "python-depends", "backend")
BACKENDS = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")
LOWER = "abcdefghijklmnopqrstuvwxyz"
HEX = "0123456789abcdefABCDEF"


def is_kernel_name(name):
    """`[a-z][a-z0-9-]*[a-z0-9]` (without `re`: a probe pays for every import)."""
    return (
        len(name) >= 2
        and name[0] in LOWER
        and name[-1] in LOWER + "0123456789"
        and all(c in LOWER + "0123456789-" for c in name)
    )


def is_git_id(sha):
    return len(sha) in (40, 64) and all(c in HEX for c in sha)


class Invalid(Exception):
    pass


def parse_metadata(raw):
    """(data, None) when the hub's parser would accept `raw`, else (None, why)."""
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
        expect_map(data, "struct Metadata")
        fields(
            data,
            {
                "name": kernel_name,
                "id": string,
                "version": usize,
                "kernels-minver": optional(minver),
                "license": string,
                "upstream": optional(string),
                "source": optional(string),
                "python-depends": sequence(string),
                "kernel-depends": sequence(kernel_dependency),
                "backend": backend_info,
                "digest": optional(digest),
                "provenance": optional(provenance),
            },
            REQUIRED,
        )
    except Invalid as e:
        return None, str(e)
    except ValueError as e:  # JSON syntax, UTF-8
        return None, str(e)
    return data, None


def no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise Invalid("duplicate field `%s`" % key)
        seen[key] = value
    return seen


def unexpected(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean `%s`" % ("true" if value else "false")
    if isinstance(value, int):
        return "integer `%d`" % value
    if isinstance(value, float):
        return "floating point `%r`" % value
    if isinstance(value, str):
        return "string %s" % json.dumps(value)
    if isinstance(value, list):
        return "sequence"
    return "map"


def invalid_type(value, expected):
    return Invalid("invalid type: %s, expected %s" % (unexpected(value), expected))


def expect_map(value, expected):
    if not isinstance(value, dict):
        raise invalid_type(value, expected)


def fields(data, checks, required, known_only=False):
    for key, value in data.items():
        check = checks.get(key)
        if check is not None:
            check(value)
        elif known_only:
            raise Invalid(
                "unknown field `%s`, expected one of %s" % (key, ", ".join("`%s`" % k for k in checks))
            )
    for key in required:
        if key not in data:
            raise Invalid("missing field `%s`" % key)


def string(value):
    if not isinstance(value, str):
        raise invalid_type(value, "a string")


def usize(value):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise Invalid("invalid value: integer `%d`, expected usize" % value)
        return
    raise invalid_type(value, "usize")


def optional(check):
    def inner(value):
        if value is not None:
            check(value)

    return inner


def sequence(check):
    def inner(value):
        if not isinstance(value, list):
            raise invalid_type(value, "a sequence")
        for item in value:
            check(item)

    return inner


def kernel_name(value):
    string(value)
    if not is_kernel_name(value):
        raise Invalid(
            "Invalid kernel name `%s`. Name must:\n"
            "- Start with a lowercase letter (a-z)\n"
            "- Contain only lowercase letters, digits, and dashes\n"
            "- End with a lowercase letter or digit\n"
            "- Be at least 2 characters long\n"
            "Examples: `my-kernel`, `relu2d`, `flash-attention`" % value
        )


def minver(value):
    string(value)
    parts = value.split(".")
    if not all(p.isdigit() and p.isascii() for p in parts):
        raise Invalid("Version must consist of numbers: %s" % value)
    if len(parts) != 3:
        raise Invalid("Version has %d components, expected 3" % len(parts))


def kernel_dependency(value):
    expect_map(value, "struct KernelDependencyRepr")
    fields(value, {"repo-id": string, "version": usize, "revision": string}, ("repo-id",), known_only=True)
    if "version" not in value and "revision" not in value:
        raise Invalid("either `version` or `revision` must be specified")


def backend_info(value):
    expect_map(value, "struct BackendInfo")

    def kind(v):
        string(v)
        if v not in BACKENDS:
            raise Invalid(
                "unknown variant `%s`, expected one of %s" % (v, ", ".join("`%s`" % b for b in BACKENDS))
            )

    fields(value, {"type": kind, "archs": optional(sequence(string))}, ("type",))


def digest(value):
    expect_map(value, "struct Digest")

    def algorithm(v):
        string(v)
        if v not in ("sha256", "sha512"):
            raise Invalid("unknown variant `%s`, expected `sha256` or `sha512`" % v)

    def files(v):
        expect_map(v, "a map")
        for item in v.values():
            string(item)

    fields(value, {"algorithm": algorithm, "files": files}, ("algorithm", "files"))


def git_status(value, required):
    def sha(v):
        string(v)
        if not is_git_id(v):
            raise Invalid("Invalid git object id, expected 40 or 64 hexadecimal digits: %s" % v)

    def dirty(v):
        if not isinstance(v, bool):
            raise invalid_type(v, "a boolean")

    fields(value, {"sha": sha, "dirty": dirty}, required)


def provenance(value):
    expect_map(value, "struct Provenance")

    def builder(v):
        expect_map(v, "struct KernelBuilderVersion")
        fields(v, {"version": string}, ("version",))
        git_status({k: v[k] for k in ("sha", "dirty") if k in v}, ())
        if ("sha" in v) != ("dirty" in v):
            raise Invalid("git commit and dirty must be specified together")

    def kernel(v):
        expect_map(v, "struct GitStatus")
        git_status(v, ("sha", "dirty"))

    fields(value, {"kernel-builder": builder, "kernel": optional(kernel)}, ("kernel-builder",))
