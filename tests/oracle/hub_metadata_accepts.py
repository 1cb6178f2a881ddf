"""Oracle for `discover`'s metadata.json parser: the loader's own
(`kernels._rust.Metadata.from_bytes`).

Reads a JSON list of metadata.json texts from stdin and prints
{"release": <kernels version>, "errors": [null | message, ...]} (null:
accepted), with whichever `kernels` is importable.
"""

import importlib.metadata
import json
import sys

from kernels._rust import Metadata


def error(text):
    try:
        Metadata.from_bytes(text.encode("utf-8"))
    except ValueError as e:
        return str(e)
    return None


json.dump(
    {"release": importlib.metadata.version("kernels"), "errors": [error(t) for t in json.load(sys.stdin)]},
    sys.stdout,
)
