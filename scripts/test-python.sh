#!/usr/bin/env bash
# The Python door's tests: build the wheel from this checkout with maturin,
# install it into a fresh virtual environment with the hub's `kernels`
# 0.17.2, and run tests/python there (offline: hub caches built by the
# tests, HF_HUB_OFFLINE=1; the download tests talk to a stand-in hub on
# 127.0.0.1). Needs python3 with venv and access to PyPI.
#
# The wheel is built with cargo's `dev` profile by default: it reuses the
# binary `cargo test` has just built (about 10 s), where the published
# `release` profile (fat LTO) recompiles everything (2 to 8 min on the
# shared 2-core VM, by its load: docs/wheels.md); PREFLIGHT_WHEEL_PROFILE=release
# tests that one. The
# tests run against the binary inside the wheel (PREFLIGHT_BIN is ignored).
# Arguments go to pytest (scripts/test-python.sh -k hint).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD_VENV=.wheelenv
TEST_VENV=.pytest-venv
PROFILE=${PREFLIGHT_WHEEL_PROFILE:-dev}
install() { "$1/bin/python" -m pip install --quiet --disable-pip-version-check "${@:2}"; }

if [ ! -x "$BUILD_VENV/bin/maturin" ]; then
  "$PY" -m venv "$BUILD_VENV"
  install "$BUILD_VENV" -r scripts/requirements-wheel.txt
fi
rm -rf target/wheels-test
"$BUILD_VENV/bin/maturin" build --quiet --profile "$PROFILE" --out target/wheels-test
wheel=$(ls target/wheels-test/kernel_preflight-*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"

rm -rf "$TEST_VENV"
"$PY" -m venv "$TEST_VENV"
install "$TEST_VENV" "$wheel" -r scripts/requirements-wheel-test.txt
unset PREFLIGHT_BIN
# Plain `kernels`, without kernel-preflight, for tests/python/test_transparency.py;
# and the hub loader's own test suite, from its sdist, for test_kernels_suite.py.
PLAIN_VENV=.plain-venv
[ -x "$PLAIN_VENV/bin/python" ] || "$PY" -m venv "$PLAIN_VENV"
install "$PLAIN_VENV" kernels==0.17.2
export PREFLIGHT_PLAIN_PYTHON=$PWD/$PLAIN_VENV/bin/python
sdist=target/kernels-sdist
if [ ! -d "$sdist/kernels-0.17.2/kernels/tests" ]; then
  rm -rf "$sdist" && mkdir -p "$sdist"
  "$TEST_VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$sdist" kernels==0.17.2
  tar -xzf "$sdist"/kernels-0.17.2.tar.gz -C "$sdist"
fi
export PREFLIGHT_KERNELS_TESTS=$PWD/$sdist/kernels-0.17.2/kernels
# The tests' folders where a probe's writes reach them (scripts/scratch.sh):
# some tests read what a probe wrote.
. scripts/scratch.sh
basetemp="$(scratch_base)/pytest-tmp"
"$TEST_VENV/bin/python" -m pytest tests/python -p no:cacheprovider --basetemp "$basetemp" "$@"
