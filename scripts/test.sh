#!/usr/bin/env bash
# The project's whole test suite, from a fresh clone: the Python test
# environment (real nvcc / NVRTC / cuobjdump wheels, the hub's `kernels`
# package), formatting, lints, then every test, then the Python package's
# tests against the wheel built from this checkout (scripts/test-python.sh);
# the probe fixtures once more with forked probes (scripts/test-forked.sh).
# As root it also runs the sandbox tests as nobody (scripts/test-unprivileged.sh).
# Needs a Rust toolchain, python3 with venv, a C compiler, and access to
# crates.io and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-env.sh
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
scripts/layers.sh
# Every doc link resolves (a public item's docs naming a private one is a
# dead link in the rendered docs).
RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --locked --quiet
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --all-targets --locked 2>&1 | tee "$log"
# The probe fixtures again, every probe forked from a fork server.
scripts/test-forked.sh 2>&1 | tee -a "$log"
# As root, the sandbox's tests again as nobody (the user-namespace path).
scripts/test-unprivileged.sh 2>&1 | tee -a "$log"
scripts/test-python.sh 2>&1 | tee -a "$log"
# One closing line for the whole suite (cargo prints one per test binary,
# pytest its own; an expected failure counts as skipped).
awk '/^test result:/ { p += $4; f += $6; i += $8 }
     /^=+ .*(passed|failed).* in [0-9.]+s/ {
       for (k = 2; k < NF; k++) {
         n = $k + 0; w = $(k + 1); sub(/,$/, "", w)
         if (w == "passed") p += n; else if (w == "failed" || w == "error" || w == "errors") f += n
         else if (w == "skipped" || w == "xfailed") i += n
       }
     }
     END { printf "all tests: %d passed, %d failed, %d skipped\n", p, f, i }' "$log"
