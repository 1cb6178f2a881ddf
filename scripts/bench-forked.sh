#!/usr/bin/env bash
# Forked probes against fresh ones and the floor (benches/forked.rs), with
# the torch and kernels of VENV (default .venv-real: created first when it
# is missing, scripts/requirements-real.txt, ~5.7 GB, several minutes).
#   scripts/bench-forked.sh            # 3 interleaved rounds, .venv-real
#   scripts/bench-forked.sh .venv-tf   # a venv of yours (torch, kernels,
#                                      # transformers, numpy): not created
#   PREFLIGHT_BENCH_ROUNDS=5 scripts/bench-forked.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-${PREFLIGHT_REAL_VENV:-.venv-real}}
if [ ! -x "$VENV/bin/python" ]; then
  if [ $# -gt 0 ]; then
    echo "bench-forked: $VENV/bin/python is missing" >&2
    exit 2
  fi
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-real.txt
fi
[ -x .venv/bin/python ] || scripts/setup-env.sh
PREFLIGHT_BENCH_TORCH_PYTHON=$(cd "$VENV" && pwd)/bin/python exec cargo bench --locked --bench forked
