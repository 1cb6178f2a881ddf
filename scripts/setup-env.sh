#!/usr/bin/env bash
# Create the project-local Python environments the tests use: .venv with a
# real nvcc, NVVM, CRT, CUDA runtime, NVRTC and cuobjdump from NVIDIA's
# wheels (they work on a machine without a GPU) and the hub's own `kernels`
# package as the oracle for `resolve`; .venv-triton with real Triton (no
# torch) and `kernels`, for tests/real_triton.rs. Idempotent; needs only PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PREFLIGHT_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r scripts/requirements-test.txt
echo "environment ready: $VENV ($("$VENV/bin/python" --version))"
TRITON_VENV=${PREFLIGHT_TRITON_VENV:-.venv-triton}
if [ ! -x "$TRITON_VENV/bin/python" ]; then
  "$PY" -m venv "$TRITON_VENV"
fi
"$TRITON_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r scripts/requirements-triton.txt
echo "environment ready: $TRITON_VENV (triton $("$TRITON_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("triton"))'))"
# Each supported release of the hub loader (scripts/kernels-releases.txt),
# once, under .kernels-releases/<version>: put first on PYTHONPATH over
# .venv (whose packages satisfy every release's requirements), it is the
# oracle tests/resolve_oracle.rs compares `resolve` with.
while read -r release; do
  [ -n "$release" ] || continue
  dir=.kernels-releases/$release
  if [ ! -f "$dir/.installed" ]; then
    rm -rf "$dir"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      --no-deps --target "$dir" "kernels==$release"
    touch "$dir/.installed"
  fi
  echo "ready: $dir (kernels $release)"
done < scripts/kernels-releases.txt
# Real parts installed beside the venvs, put where a test needs them only:
# old einops / apache-tvm-ffi releases (API drift), CUDA 12.2's ptxas and
# numpy (the fork server's thread pools).
for target in drift:.deps-drift toolkit-12.2:.toolkit-12.2 numpy:.deps-numpy; do
  req=scripts/requirements-${target%%:*}.txt dir=${target#*:}
  if [ ! -f "$dir/.installed" ] || ! cmp -s "$req" "$dir/.installed"; then
    rm -rf "$dir"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      --no-deps --target "$dir" -r "$req"
    cp "$req" "$dir/.installed"
  fi
  echo "ready: $dir ($(grep -v '^#' "$req" | tr '\n' ' '))"
done
