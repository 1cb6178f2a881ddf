#!/usr/bin/env bash
# The project's whole test suite, from a fresh clone: the Python test
# environment (real nvcc / NVRTC / cuobjdump wheels, the hub's `kernels`
# package), formatting, lints, then every test. Needs a Rust toolchain,
# python3 with venv, a C compiler, and access to crates.io and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-env.sh
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --all-targets --locked 2>&1 | tee "$log"
# One closing line for the whole suite (cargo prints one per test binary).
awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "all tests: %d passed, %d failed, %d skipped\n", p, f, i }' "$log"
