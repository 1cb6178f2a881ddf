"""The hub loader's acceptance of a variant, checked by preflight's python
executor before the variant is imported (loaded by the driver from the
sandbox directory).

`kernels.get_kernel` parses `metadata.json` with its own parser and runs its
metadata validators (python-depends allowlisted and installed,
`kernels-minver`, a warning for dirty builds, archs vs the device) before it
imports anything; what it refuses never loads, so it is never a pass. With
the `kernels` package in this interpreter, its own code decides here too
(`hub_bridge.py`). Without it, preflight applies the same rules itself
(`hub_rules.py`, over its copy of the hub's parser, `hub_metadata.py`).
Each part is loaded on first use, so a probe compiles only the way it
judges by; `judge.py` replays verdicts decided ahead.

Works on Python 3.8+.
"""

import importlib.util
import json
import os
import stat
import sys

# The acceptance label of preflight's own copy of the rules.
PREFLIGHT = "preflight"


class Refused(Exception):
    """The hub loader refuses the variant: which check, its message, and the
    distribution to install when an allowed dependency is missing."""

    def __init__(self, validator, message, package=None):
        super().__init__(message)
        self.validator = validator
        self.message = message
        self.package = package
        self.who = PREFLIGHT


def part(name):
    """One of acceptance's files (`hub_bridge`, `hub_rules`, `hub_metadata`),
    loaded on first use: written next to this one under a `preflight_` name
    (src/probe/python.rs: DRIVER_FILES), or by its own name in the source
    tree."""
    full = "preflight_" + name
    module = sys.modules.get(full)
    if module is None:
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, full + ".py")
        if not os.path.exists(path):
            path = os.path.join(here, name + ".py")
        spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return module


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
    (`kernels X.Y.Z`; `preflight` without `kernels`; `preflight: <why>`
    for a `kernels` release the bridge has no adapter for), raises
    `Refused` (naming who) when it says no. A `kernels` that does not
    import raises what it raises: the hub loader cannot load anything
    then."""
    if not regular_metadata(variant):
        path = os.path.join(variant, "metadata.json")
        raise Refused("metadata", "`%s` is not a regular file" % path)
    if importlib.util.find_spec("kernels") is None:
        judge, who = part("hub_rules").by_rules, PREFLIGHT
    else:
        bridge = part("hub_bridge")
        unknown = bridge.unknown()
        if unknown is None:
            judge, who = bridge.by_kernels, "kernels %s" % bridge.hub_package().__version__
        else:
            # Not the loader's judgment, and not the kernel's fault: the
            # rules preflight copied, said as such, and the probe goes on.
            judge, who = part("hub_rules").by_rules, "%s: %s" % (PREFLIGHT, unknown)
    try:
        judge(variant, allowlist)
    except Refused as refused:
        refused.who = who
        raise
    return who


def validate_dependencies(module_name, dependencies, backend, allowlist):
    """Preflight's copy of `kernels.python_deps.validate_dependencies`
    (`hub_rules.py`)."""
    part("hub_rules").validate_dependencies(module_name, dependencies, backend, allowlist)


def load_allowlist(path):
    with open(path) as f:
        return json.load(f)


# Verdicts decided ahead by one judge child (`judge.py`), loaded only by the
# judge child and by probes that have verdicts to replay.


def judge_all(variants, allowlist, out):
    """`judge.judge_all`: judge `variants` in order into the file `out`."""
    part("judge").judge_all(variants, allowlist, out)


def judged(path, variant, raw):
    """`judge.judged`: the judge's verdict on `variant` as its metadata reads now."""
    return part("judge").judged(path, variant, raw)


def replay(verdict):
    """`judge.replay`: what `accept` said when the judge asked it."""
    return part("judge").replay(verdict)
