"""Oracle for preflight's copy of the hub's metadata parser: the hub's own
(`kernels._rust.Metadata`).

Reads a JSON list of metadata.json texts from stdin and prints, per text,
what each parser said: {"hub": null | message, "preflight": null | message}
(null: accepted). The hub's messages end in serde's "at line L column C",
which preflight's do not have.
"""

import importlib.util
import json
import os
import sys

from kernels._rust import Metadata


def load_parser():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "probes", "python", "hub_metadata.py")
    spec = importlib.util.spec_from_file_location("preflight_hub_metadata", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hub(text):
    try:
        Metadata.from_bytes(text.encode("utf-8"))
    except ValueError as e:
        return str(e)
    return None


def main():
    parser = load_parser()
    out = []
    for text in json.load(sys.stdin):
        _, problem = parser.parse_metadata(text.encode("utf-8"))
        out.append({"hub": hub(text), "preflight": problem})
    json.dump(out, sys.stdout)


main()
