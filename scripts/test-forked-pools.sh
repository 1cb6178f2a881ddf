#!/usr/bin/env bash
# Opt-in: in an environment with torch and numpy (VENV, e.g. one with
# torch, kernels, transformers and numpy), a forked probe sees the thread
# pools a fresh one sees (docs/forked.md#thread-pools). One variant imports
# numpy and torch, runs a product in each and reports, in its import error,
# OpenBLAS's pool size, the process's threads after the imports and after
# each product, and torch's intra- and inter-op pool sizes; it is checked
# fresh (PREFLIGHT_FORK=0) and by default (forked where torch is
# installed). Fails when the probe was not forked or the two differ.
#   scripts/test-forked-pools.sh .venv-tf
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:?usage: scripts/test-forked-pools.sh VENV (with torch, kernels and numpy)}
PY=$(cd "$VENV" && pwd)/bin/python
"$PY" -c 'import torch, numpy, kernels' || { echo "test-forked-pools: $VENV lacks torch, numpy or kernels" >&2; exit 2; }
cargo build --locked --quiet --bin preflight
BIN=$PWD/target/debug/preflight
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
VARIANT=$TMP/pools/build/torch-universal
mkdir -p "$VARIANT"
echo '{"name": "pools", "id": "_pools_1", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "cpu"}}' >"$VARIANT/metadata.json"
cat >"$VARIANT/__init__.py" <<'PY'
import ctypes, os
import numpy, torch

threads = lambda: len(os.listdir("/proc/self/task"))
after_import = threads()
lib = next(l.split()[-1] for l in open("/proc/self/maps") if "openblas" in l)
blas = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD)
size = next(getattr(blas, f) for f in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads") if hasattr(blas, f))
a = numpy.ones((512, 512))
a @ a
after_numpy = threads()
t = torch.ones(512, 512)
t @ t
raise ImportError("openblas pool %d; threads: after import %d, after a numpy product %d, after a torch product %d; torch intra-op %d, inter-op %d" % (
    size(), after_import, after_numpy, threads(), torch.get_num_threads(), torch.get_num_interop_threads()))
PY
seen() {
  # `check` exits non-zero: the variant fails to import, on purpose.
  PREFLIGHT_CACHE=$TMP/cache PREFLIGHT_FORK=$1 "$BIN" check --json "$TMP/pools" --python "$PY" >"$TMP/out" 2>"$TMP/stderr" || true
  "$PY" -c 'import json, sys; o = json.load(sys.stdin)["results"][0]["outcome"]; print(o.get("made", "fresh"), "|", o["message"])' <"$TMP/out"
}
fresh=$(seen 0)
forked=$(seen "")
echo "fresh:  $fresh"
echo "forked: $forked"
grep -h warning "$TMP/stderr" || true
[ "${forked%% |*}" = forked ] || { echo "test-forked-pools: FAILED, the probe was not forked" >&2; exit 1; }
[ "${fresh#* | }" = "${forked#* | }" ] || { echo "test-forked-pools: FAILED, the pools differ" >&2; exit 1; }
echo "test-forked-pools: passed"
