"""Read Rust-serialized documents with the Python mirror types and say,
field by field, where they disagree.

stdin: {"outcomes": [Outcome JSON, ...], "results": [check row JSON, ...],
"summaries": [warmup line JSON, ...]}.
stdout: {"passed": [bool per outcome], "problems": ["...", ...],
"unmirrored": {"Outcome": [Rust fields Python does not read], ...}}.
"""

import dataclasses
import json
import sys
import typing

from kernel_preflight import _types

JSON_TYPES = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}


def fits(value, hint) -> bool:
    """Whether a JSON value is one the Python annotation accepts."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union:
        return any(fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint in JSON_TYPES:
        if hint is not bool and isinstance(value, bool):
            return False
        return isinstance(value, JSON_TYPES[hint])
    if dataclasses.is_dataclass(hint):
        return isinstance(value, dict)
    return True


def compare(cls, doc, problems, unmirrored, renamed=None):
    """Every Python field of `cls` against the Rust document `doc`."""
    renamed = renamed or {}
    hints = typing.get_type_hints(cls)
    names = set()
    for f in dataclasses.fields(cls):
        if f.name == "raw":
            continue
        key = renamed.get(f.name, f.name)
        names.add(key.split(".")[0])
        value = doc
        for part in key.split("."):
            value = value.get(part, KeyError) if isinstance(value, dict) else KeyError
        if value is KeyError:
            # serde leaves out empty optional fields; the default must then be
            # what Rust means by the absence.
            if f.default is dataclasses.MISSING:
                problems.append(f"{cls.__name__}.{f.name}: required, not in Rust's JSON")
            continue
        if not fits(value, hints[f.name]):
            problems.append(
                f"{cls.__name__}.{f.name}: Rust writes {value!r}, Python reads {hints[f.name]}"
            )
    extra = sorted(set(doc) - names)
    unmirrored.setdefault(cls.__name__, set()).update(extra)


def main():
    doc = json.load(sys.stdin)
    problems, unmirrored, passed = [], {}, []
    for o in doc["outcomes"]:
        compare(_types.Outcome, o, problems, unmirrored)
        passed.append(_types.Outcome.from_json(o).passed)
    for s in doc.get("summaries", []):
        compare(_types.KernelSummary, s, problems, unmirrored)
    for r in doc["results"]:
        compare(
            _types.VariantResult,
            r,
            problems,
            unmirrored,
            renamed={"accepted": "declared.accepted", "reason": "declared.reason"},
        )
        compare(_types.Timings, r["timings"], problems, unmirrored)
        parsed = _types.VariantResult.from_json(r)
        if parsed.outcome != _types.Outcome.from_json(r["outcome"]):
            problems.append("VariantResult.outcome: not the outcome it was given")
    out = {
        "passed": passed,
        "problems": problems,
        "unmirrored": {k: sorted(v) for k, v in unmirrored.items()},
    }
    json.dump(out, sys.stdout)


main()
