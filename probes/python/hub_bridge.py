"""The bridge to the installed hub loader: the `kernels` package's own
metadata parser and validators decide, in its order, when the probed
interpreter has it (`acceptance.accept` chooses).

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
}


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
        raise acceptance.Refused("metadata", str(e)) from None
    name = os.path.basename(os.path.normpath(variant))
    for validator in default_metadata_validators() + [ArchValidator()]:
        try:
            validator.validate_metadata(metadata=metadata, variant=name)
        except Exception as e:
            check = VALIDATORS.get(type(validator).__name__, "other")
            package = None
            if check == "dependencies" and isinstance(e, ImportError):
                package = acceptance.part("hub_rules").missing_package(list(metadata.python_depends), allowlist)
            raise acceptance.Refused(check, str(e), package) from None
