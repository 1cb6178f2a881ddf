"""The oracle of acceptance: the hub loader itself.

`kernels.get_local_kernel(variant_dir)` on each variant named in the JSON
list argv[1], offline, each in a process of its own (a variant may end its
process while loading); prints {"kernels": version, "results": [null |
"Type: message", ...]} (null: it loaded). Run it from an empty folder, so
that no folder of the working directory can stand in for a package.
"""

import json
import subprocess
import sys
from pathlib import Path


def one(path):
    import kernels

    try:
        kernels.get_local_kernel(Path(path))
        result = None
    except Exception as e:
        result = "%s: %s" % (type(e).__name__, e)
    print(json.dumps({"kernels": kernels.__version__, "result": result}))


def main():
    if sys.argv[1] == "--one":
        one(sys.argv[2])
        return
    results = []
    version = None
    for path in json.loads(sys.argv[1]):
        out = subprocess.run([sys.executable, __file__, "--one", path], capture_output=True, text=True)
        lines = out.stdout.strip().splitlines()
        try:
            said = json.loads(lines[-1])
        except (IndexError, ValueError):
            results.append("exited with code %d" % out.returncode)
            continue
        version = said["kernels"]
        results.append(said["result"])
    if version is None:
        import kernels

        version = kernels.__version__
    print(json.dumps({"kernels": version, "results": results}))


if __name__ == "__main__":
    main()
