"""Wrap a kernel package from PyPI in the hub layout, as a kernel author
porting it to the hub would (huggingface/kernels' `kernel-port` does the
same steps): the package's own files become the variant's module, its
absolute imports of itself become relative (the hub loads a variant under
its ops id, `_<name>_<backend>_<rev>`, so `import liger_kernel` would find
no such module — or another copy of it), `metadata.json` is written in
kernel-builder's form and finished by the hub's own code
(tests/oracle/hub_build.py: bytecode removed, digest from
`kernels._rust.Digest`).

The rewrite keeps every line where it was, so that tracebacks point at the
package's own line numbers.
"""

import ast
import re
import sys
import zipfile
from pathlib import Path

ORACLE = Path(__file__).resolve().parents[1] / "oracle"
sys.path.insert(0, str(ORACLE))
import hub_build  # noqa: E402


def unpack(wheel, top, dest):
    """The files of package `top` in `wheel`, under `dest` (no dist-info:
    a hub variant is not an installed distribution)."""
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(top + "/") and not name.endswith("/"):
                target = dest / name[len(top) + 1 :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))


def relativize(root, top):
    """Rewrite `from top.x import y` as `from ..x import y` and
    `import top.x as z` as `from .. import x as z`-like relative imports in
    every module under `root` (the former package `top`). Returns how many
    statements changed."""
    changed = 0
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        package = list(rel.parent.parts) if rel.name == "__init__.py" else list(rel.parent.parts)
        up = "." * (len(package) + 1)
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines(keepends=True)
        edits = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == top or node.module.startswith(top + ".")
            ):
                rest = node.module[len(top) + 1 :]
                edits.append((node.lineno, "from " + re.escape(node.module) + r"\b", "from " + up + rest))
            elif isinstance(node, ast.Import) and any(
                a.name == top or a.name.startswith(top + ".") for a in node.names
            ):
                if len(node.names) != 1 or node.lineno != node.end_lineno:
                    raise ValueError("%s:%d: cannot rewrite %s" % (path, node.lineno, ast.unparse(node)))
                alias = node.names[0]
                segment = ast.get_source_segment(text, node)
                parts = alias.name.split(".")[1:]
                if alias.asname and parts:
                    new = "from %s%s import %s as %s" % (up, ".".join(parts[:-1]), parts[-1], alias.asname)
                elif alias.asname:
                    new = "%s = __import__(__name__.split('.')[0])" % alias.asname
                else:
                    # `import top.x` binds `top`; the variant's top package
                    # is the first part of this module's name.
                    dotted = "".join("." + p for p in parts)
                    new = "%s = __import__(__name__.split('.')[0] + %r)" % (top, dotted) if parts else (
                        "%s = __import__(__name__.split('.')[0])" % top)
                edits.append((node.lineno, re.escape(segment), new))
        for lineno, pattern, new in edits:
            line = lines[lineno - 1]
            updated = re.sub(pattern, lambda _m: new, line, count=1)
            if updated == line:
                raise ValueError("%s:%d: no %r in %r" % (path, lineno, pattern, line))
            lines[lineno - 1] = updated
            changed += 1
        if edits:
            path.write_text("".join(lines), encoding="utf-8")
    return changed


def metadata(name, backend, python_depends):
    """kernel-builder's metadata for `name` on `backend` (before its hash
    step)."""
    module = name.replace("-", "_")
    return {
        "name": name,
        "id": "_%s_%s_5e1f00d" % (module, backend),
        "version": 1,
        "license": "Apache-2.0",
        "upstream": "https://pypi.org/project/%s/" % name,
        "python-depends": list(python_depends),
        "backend": {"type": backend},
        "provenance": {
            "kernel-builder": {"version": "0.17.2", "sha": "d0610aa58db33b142c86b59598a2a1c730f52996", "dirty": False},
        },
    }


def variant(repo, variant_name, wheel, top, name, backend, python_depends):
    """`repo/build/<variant_name>/`: package `top` of `wheel` as the
    variant's module, with hub metadata and digest. Returns (its path, how
    many imports were made relative)."""
    import json

    dest = repo / "build" / variant_name
    unpack(wheel, top, dest)
    changed = relativize(dest, top)
    (dest / "metadata.json").write_text(json.dumps(metadata(name, backend, python_depends)))
    hub_build.finish(dest)
    return dest, changed
