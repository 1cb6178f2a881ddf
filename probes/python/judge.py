"""Judging ahead: the hub's acceptance of many variants decided by one
child, and replayed by each probe child (src/probe/judge.rs starts it).

Importing the hub's parser and validators costs a probe child more than
the rest of the driver together. When many variants are probed, one child
of the same interpreter, environment and sandbox judges them all first
(`judge_all`), and each probe child replays its own verdict (`judged`,
`replay`), or judges itself when there is none for the very bytes of its
`metadata.json`.

Loaded by `acceptance.py` on first use; it asks its `accept`.

Works on Python 3.8+.
"""

import json
import os
import sys

# It loads this file (`acceptance.part`).
acceptance = sys.modules["preflight_acceptance"]
accept, Refused, regular_metadata = acceptance.accept, acceptance.Refused, acceptance.regular_metadata

# Refusals after which the judge goes on: the hub's parser and its minver
# check have no side effect, so the next verdict is what a fresh
# interpreter would give. After any other refusal (one that may come from a
# failed `import torch`, say) it stops: the variants left judge themselves.
PURE_REFUSALS = ("metadata", "minver")


def judge_all(variants, allowlist, out):
    """Judge `variants` in order, appending one JSON line per verdict to the
    file `out`: the variant, the `metadata.json` text it judged (latin-1,
    byte for byte), who judged and the refusal if any. Stops (leaving the
    rest to their own children) at the first variant whose judgment wrote
    anything on stderr (file descriptor 2 must be a regular file): a probe
    child's stderr is evidence, and a warning printed once here would not
    be printed for the next variant; and after a refusal that is not pure."""
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for variant in variants:
            if not regular_metadata(variant):
                return
            try:
                with open(os.path.join(variant, "metadata.json"), "rb") as f:
                    raw = f.read()
            except OSError:
                return
            verdict = {"variant": variant, "metadata": raw.decode("latin-1"), "refused": None}
            try:
                verdict["who"] = accept(variant, allowlist)
            except Refused as refused:
                verdict["who"] = refused.who
                verdict["refused"] = {"validator": refused.validator, "message": refused.message,
                                      "package": refused.package}
            sys.stderr.flush()
            if os.fstat(2).st_size:
                return
            os.write(fd, (json.dumps(verdict, ensure_ascii=True) + "\n").encode("ascii"))
            if verdict["refused"] is not None and verdict["refused"]["validator"] not in PURE_REFUSALS:
                return
    finally:
        os.close(fd)


def judged(path, variant, raw):
    """The verdict in the judge's file `path` on `variant` as its
    `metadata.json` reads now (`raw`), if the judge saw these very bytes;
    else None (a line the judge did not finish is skipped)."""
    if path is None or raw is None:
        return None
    text = raw.decode("latin-1")
    try:
        f = open(path)
    except OSError:
        return None
    with f:
        for line in f:
            try:
                verdict = json.loads(line)
            except ValueError:
                continue
            if isinstance(verdict, dict) and verdict.get("variant") == variant and verdict.get("metadata") == text:
                return verdict if from_this_loader(verdict) else None
    return None


def installed_kernels():
    """The version of the `kernels` this interpreter would import, from the
    first `kernels-*.dist-info` folder on `sys.path` (nothing imported);
    None when there is none."""
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("kernels-") and name.endswith(".dist-info"):
                return name[len("kernels-"):-len(".dist-info")]
    return None


def from_this_loader(verdict):
    """Whether `verdict` is what this interpreter would judge: its judge is
    not a `kernels` release, or is the very one installed here (a verdict
    handed over by the caller's loader names its own)."""
    who = verdict.get("who")
    if not isinstance(who, str) or not who.startswith("kernels "):
        return True
    return who == "kernels %s" % installed_kernels()


def replay(verdict):
    """What `accept` said when the judge asked it: who judged, or its `Refused`."""
    refused = verdict["refused"]
    if refused is not None:
        error = Refused(refused["validator"], refused["message"], refused["package"])
        error.who = verdict["who"]
        raise error
    return verdict["who"]
