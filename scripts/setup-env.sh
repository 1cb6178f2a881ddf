#!/usr/bin/env bash
# Create the project-local Python environment the tests use: a real nvcc,
# NVVM, CRT, CUDA runtime, NVRTC and cuobjdump from NVIDIA's wheels (they work
# on a machine without a GPU), and the hub's own `kernels` package as the
# oracle for `resolve`. Idempotent; needs only PyPI.
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
