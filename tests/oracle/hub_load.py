"""The oracle of acceptance: the hub loader itself.

`kernels.get_local_kernel(variant_dir)` on each variant named in the JSON
list argv[1], offline, each in this one interpreter; prints
{"kernels": version, "results": [null | "Type: message", ...]} (null: it
loaded). Run it from an empty folder, so that no folder of the working
directory can stand in for a package.
"""

import json
import sys
from pathlib import Path

import kernels


def main():
    results = []
    for path in json.loads(sys.argv[1]):
        try:
            kernels.get_local_kernel(Path(path))
            results.append(None)
        except Exception as e:
            results.append("%s: %s" % (type(e).__name__, e))
    print(json.dumps({"kernels": kernels.__version__, "results": results}))


if __name__ == "__main__":
    main()
