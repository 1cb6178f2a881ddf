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
cargo test --all-targets --locked
