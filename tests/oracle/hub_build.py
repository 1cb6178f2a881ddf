"""Finish kernel variants the way the hub's build tooling does, with the
hub's own code for everything it computes.

kernel-builder writes each variant's `metadata.json` pretty-printed from its
`Metadata` struct, removes Python bytecode (`remove-bytecode-hook`), then
runs `kernel-builder hash` (`hash-kernel-hook`), which adds
`"digest": Digest::hash_variant(SHA256, variant)` and writes the file again,
pretty-printed. Here the digest comes from the installed `kernels`
(`kernels._rust.Digest.hash_variant`, the same `kernels-data` code), and the
keys are written in the struct's order (serde_json's pretty printer: two
spaces, `": "`, no trailing newline; `json.dumps(indent=2)` writes the same).

Usage: hub_build.py VARIANT_DIR... (each has a metadata.json without digest).
"""

import json
import shutil
import sys
from pathlib import Path

from kernels._rust import Digest, DigestAlgorithm

# kernels-data's `Metadata` field order (kebab-case). `kernels-minver` is
# newer than the stored sources; it goes after `license`.
ORDER = [
    "name", "id", "version", "license", "kernels-minver", "upstream", "source",
    "python-depends", "kernel-depends", "backend", "digest", "provenance",
]


def finish(variant):
    for cache in list(variant.rglob("__pycache__")):
        shutil.rmtree(cache)
    path = variant / "metadata.json"
    metadata = json.loads(path.read_text())
    digest = Digest.hash_variant(DigestAlgorithm.SHA256, variant)
    metadata["digest"] = {"algorithm": "sha256", "files": dict(sorted(digest.files.items()))}
    # `kernel-depends` has a serde default and no skip: always written.
    metadata.setdefault("kernel-depends", [])
    ordered = {k: metadata[k] for k in ORDER if k in metadata}
    ordered.update((k, v) for k, v in metadata.items() if k not in ordered)
    path.write_text(json.dumps(ordered, indent=2, ensure_ascii=False))


def main():
    for arg in sys.argv[1:]:
        finish(Path(arg))


if __name__ == "__main__":
    main()
