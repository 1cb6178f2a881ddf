#!/usr/bin/env bash
# The opt-in suite on real kernel code from PyPI (not part of
# scripts/test.sh: torch's default wheel brings about 5 GB of CUDA
# libraries). Creates .venv-real with torch, the hub's `kernels` and what
# the kernel packages need (scripts/requirements-real.txt), downloads the
# kernel packages' wheels (scripts/real-kernels.txt: liger-kernel,
# flash-attn-triton, quack-kernels) without installing them, builds
# preflight, and runs tests/python_real: each package wrapped in the hub
# layout, probed by `preflight check/select/warmup` with .venv-real's
# python, judged by `kernels.get_local_kernel`; and the real transformers,
# each release of scripts/transformers-releases.txt with the `kernels` it
# requires (5.22.2 with 0.17.2, 5.25.0 with 0.19.1), installed apart in
# .venv-real/transformers-<release> with scripts/requirements-transformers.txt,
# loading through KERNEL_PREFLIGHT=1, with the wheel built from this
# checkout installed in .venv-real. Each install is made once and kept.
# Prints how long the install took. Needs python3 with venv, a Rust
# toolchain and PyPI.
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
# Before one folder per transformers release, there was one folder.
rm -rf "$VENV/transformers"
while read -r transformers kernels; do
  [ -n "$transformers" ] || continue
  dir=$VENV/transformers-$transformers
  if [ ! -f "$dir/.installed" ]; then
    rm -rf "$dir"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir" \
      "transformers==$transformers" "kernels==$kernels" -r scripts/requirements-transformers.txt
    touch "$dir/.installed"
  fi
done < scripts/transformers-releases.txt
echo "install: $(($(date +%s) - start)) s ($(du -sh "$VENV" | cut -f1) in $VENV)"
cargo build --locked --quiet
# The wheel of this checkout (its start-up hook, its Python package), as
# scripts/test-python.sh builds it.
[ -x .wheelenv/bin/maturin ] || {
  "$PY" -m venv .wheelenv
  .wheelenv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-wheel.txt
}
rm -rf target/wheels-real
.wheelenv/bin/maturin build --quiet --profile dev --out target/wheels-real
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall target/wheels-real/kernel_preflight-*.whl
export PREFLIGHT_BIN=$PWD/target/debug/preflight
export PREFLIGHT_REAL_WHEELS=$VENV/wheels
export PREFLIGHT_REAL_TRANSFORMERS=$VENV
# The kernel packages import torch, which warns when numpy is missing: the
# suite keeps numpy out on purpose (the warning must never decide).
cd tests/python_real
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -v -rs -s "$@"
