#!/usr/bin/env bash
# Every GPU check, on a machine with an NVIDIA GPU and no time limit of its
# own: the two device checks one after the other (scripts/gpu-check-native.sh,
# then scripts/gpu-check-python.sh; docs/gpu-validation.md), each within its
# own budget and writing its evidence under $OUT, then, where cargo exists,
# the Rust tests marked `#[ignore = "needs a GPU…"]` (they need the test
# environment of scripts/setup-env.sh). Where the device comes for fifteen
# minutes, run the two checks as two commands instead (docs/gpu-validation.md).
#
#   OUT=gpu-check-out PYTHON=python3 scripts/gpu-check.sh [PATH/TO/preflight]
#
# Exits 1 when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/gpu-check-out}
status=0
scripts/gpu-check-native.sh "$@" || status=1
scripts/gpu-check-python.sh "$@" || status=1
if command -v cargo >/dev/null 2>&1; then
  if timeout 3600 cargo test --release --locked -- --ignored >"$OUT/cargo.log" 2>&1; then
    echo "PASS cargo test -- --ignored (GPU tests)"
  else
    echo "FAIL cargo test -- --ignored (GPU tests): see $OUT/cargo.log"
    tail -n 30 "$OUT/cargo.log" | sed 's/^/    /'
    status=1
  fi
else
  echo "SKIP cargo test -- --ignored: no cargo here (the GPU tests run where a Rust toolchain is)"
fi
exit $status
