#!/usr/bin/env bash
# The opt-in suite on real kernel code from PyPI (not part of
# scripts/test.sh: torch's default wheel brings about 5 GB of CUDA
# libraries). Creates .venv-real with torch, the hub's `kernels` and what
# the kernel packages need (scripts/requirements-real.txt), downloads the
# kernel packages' wheels (scripts/real-kernels.txt: liger-kernel,
# flash-attn-triton, quack-kernels) without installing them, builds
# preflight, and runs tests/python_real: each package wrapped in the hub
# layout, probed by `preflight check/select/warmup` with .venv-real's
# python, judged by `kernels.get_local_kernel`. Prints how long the
# install took. Needs python3 with venv, a Rust toolchain and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PREFLIGHT_REAL_VENV:-.venv-real}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
VENV=$(cd "$VENV" && pwd)
start=$(date +%s)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-real.txt
mkdir -p "$VENV/wheels"
"$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
  -d "$VENV/wheels" -r scripts/real-kernels.txt
echo "install: $(($(date +%s) - start)) s ($(du -sh "$VENV" | cut -f1) in $VENV)"
cargo build --locked --quiet
export PREFLIGHT_BIN=$PWD/target/debug/preflight
export PREFLIGHT_REAL_WHEELS=$VENV/wheels
# The kernel packages import torch, which warns when numpy is missing: the
# suite keeps numpy out on purpose (the warning must never decide).
cd tests/python_real
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -v -rs -s "$@"
