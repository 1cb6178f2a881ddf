"""Oracle for the revision choice: the snapshot `get_kernel` loads offline.

Reads a JSON list of cases from stdin, each {"repo": "ORG/NAME", "revision":
str|null, "version": int|null}, and prints, per case, {"snapshot": PATH} or
{"error": TYPE, "message": TEXT}. Runs the hub loader's own offline resolver
(`HubCacheResolver`, what `get_kernel` uses when HF_HUB_OFFLINE=1) against
the cache at KERNELS_CACHE; every snapshot in the tests holds a loadable
`build/torch-universal`, so the variant is the snapshot's, never the error.
"""

import json
import logging
import sys

logging.disable(logging.WARNING)

from kernels._rust import KernelDependency, KernelVersion  # noqa: E402
from kernels.hf_hub import _get_hf_api  # noqa: E402
from kernels.resolver import HubCacheResolver  # noqa: E402


def answer(case):
    if case["version"] is not None:
        version = KernelVersion.Version(case["version"])
    else:
        version = KernelVersion.Revision(case["revision"])
    try:
        location = HubCacheResolver(trust_remote_code=True).resolve(
            api=_get_hf_api(),
            backend=None,
            kernel=KernelDependency(repo_id=case["repo"], version=version),
        )
    except (ValueError, FileNotFoundError) as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"snapshot": str(location.variant_path.parent.parent)}


def main():
    print(json.dumps([answer(case) for case in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
