#!/usr/bin/env bash
# Forked probes against fresh ones and the floor (benches/forked.rs), with
# .venv-real's torch and kernels: creates .venv-real first when it is missing
# (scripts/requirements-real.txt, ~5.7 GB, several minutes).
#   scripts/bench-forked.sh            # 3 interleaved rounds
#   PREFLIGHT_BENCH_ROUNDS=5 scripts/bench-forked.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PREFLIGHT_REAL_VENV:-.venv-real}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-real.txt
fi
[ -x .venv/bin/python ] || scripts/setup-env.sh
PREFLIGHT_BENCH_TORCH_PYTHON=$(cd "$VENV" && pwd)/bin/python exec cargo bench --locked --bench forked
