"""The bridge to the installed hub loader: the `kernels` package's own
metadata parser and validators decide, in its order, when the probed
interpreter has it (`acceptance.accept` chooses), through the adapter of
its release (`RELEASES`). A release without one is not guessed at:
`acceptance` applies preflight's copy of the rules and says so.

Works on Python 3.8+.
"""

import importlib.util
import os
import sys

# It loads this file (`acceptance.part`).
acceptance = sys.modules["preflight_acceptance"]

# The hub's validator classes, by the name the protocol gives their check.
VALIDATORS = {
    "DependencyValidator": "dependencies",
    "MinverValidator": "minver",
    "ArchValidator": "arch",
    "DigestValidator": "digest",
}

# One adapter per `kernels` release series, the child's twin of
# python/kernel_preflight/_loader.py (scripts/kernels-releases.txt lists the
# releases CI tests; tests/python/test_releases.py holds the three to one
# another): the first patch release tested, the package that holds its
# loader's modules (`validate`, `deps`), and whether its loader runs kernel
# validators (the digest check) on a kernel once installed, before loading.
RELEASES = {
    "0.17": ("0.17.2", "kernels", False),
    "0.18": ("0.18.3", "kernels", True),
    "0.19": ("0.19.1", "kernels._internals", True),
}


def numbers(version):
    """The leading numbers of a version (`0.19.1rc1` -> (0, 19, 1))."""
    out = []
    for part in version.split("."):
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)


def release(version):
    """The adapter (package, validates_kernels) of `kernels` `version`, or
    None when no adapter covers it."""
    parts = numbers(version)
    found = RELEASES.get("%d.%d" % parts[:2]) if len(parts) >= 2 else None
    if found is None or parts < numbers(found[0]):
        return None
    return found[1], found[2]


def unknown():
    """Why the installed `kernels` has no adapter here (its version and the
    releases known), or None when it has one whose modules are there."""
    version = hub_package().__version__
    found = release(version)
    known = ", ".join(first for first, _, _ in sorted(RELEASES.values(), key=lambda r: numbers(r[0])))
    if found is None:
        return "kernels %s is a release preflight does not know (it knows %s)" % (version, known)
    if importlib.util.find_spec(found[0] + ".validate") is None:
        return "kernels %s has no %s.validate, where its release keeps it" % (version, found[0])
    return None


def module(name):
    """The installed loader's module `name` (`"deps"`), where its release
    keeps it."""
    return importlib.import_module("%s.%s" % (release(hub_package().__version__)[0], name))


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
        # `from kernels import digest` (0.18's validators) asks for a
        # submodule by attribute first: that is the submodule, not the
        # whole package.
        if not name.startswith("__") and importlib.util.find_spec("kernels." + name) is not None:
            return importlib.import_module("kernels." + name)
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = complete
    sys.modules["kernels"] = package
    return package


def by_kernels(variant, allowlist):
    """The installed hub loader's own parser and validators, in its order
    (`get_kernel`: the default metadata validators, then the arch check;
    from 0.18, once installed, the kernel validators that refuse: the
    digest check, whose warning for a metadata without a digest is not a
    refusal and is not said here)."""
    from kernels._rust import Metadata

    _, validates_kernels = release(hub_package().__version__)
    validate = module("validate")
    try:
        metadata = Metadata.read_from_file(os.path.join(variant, "metadata.json"))
    except Exception as e:  # ValueError, OSError: whatever the hub raises, it does not load
        raise acceptance.Refused("metadata", str(e)) from None
    name = os.path.basename(os.path.normpath(variant))
    for validator in validate.default_metadata_validators() + [validate.ArchValidator()]:
        try:
            validator.validate_metadata(metadata=metadata, variant=name)
        except Exception as e:
            check = VALIDATORS.get(type(validator).__name__, "other")
            package = None
            if check == "dependencies" and isinstance(e, ImportError):
                package = acceptance.part("hub_rules").missing_package(list(metadata.python_depends), allowlist)
            raise acceptance.Refused(check, str(e), package) from None
    if validates_kernels:
        from pathlib import Path

        kernel = module("resolver").LocalKernel(variant_path=Path(variant), metadata=metadata, origin=None)
        muted, validate.logger.disabled = validate.logger.disabled, True
        try:
            validate.DigestValidator().validate_kernel(kernel=kernel)
        except Exception as e:
            raise acceptance.Refused("digest", str(e)) from None
        finally:
            validate.logger.disabled = muted
