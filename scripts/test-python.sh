#!/usr/bin/env bash
# The Python door's tests: build the wheel from this checkout with maturin,
# install it into a virtual environment with each `kernels` release
# kernel-preflight supports (scripts/kernels-releases.txt), and run
# tests/python there, once per release (offline: hub caches built by the
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

# Each supported `kernels` release (scripts/kernels-releases.txt) in turn:
# a test environment with the wheel and that release, a plain one with the
# release alone (tests/python/test_transparency.py compares with it) and
# the release's own test suite from its sdist (test_kernels_suite.py). Each
# is made once and kept (.pytest-venv/<release>, .plain-venv/<release>,
# target/kernels-sdist/kernels-<release>); a run reinstalls only the wheel.
# KERNELS_RELEASES="0.19.1" runs a subset.
unset PREFLIGHT_BIN
. scripts/scratch.sh
releases=${KERNELS_RELEASES:-$(cat scripts/kernels-releases.txt)}
sdist=target/kernels-sdist
# Before one environment per release, each of these was one environment.
for old in .pytest-venv .plain-venv; do [ ! -e "$old/bin" ] || rm -rf "$old"; done
mkdir -p "$sdist" .pytest-venv .plain-venv

fetch_sdist() { # $1 = release: its sdist unpacked under $sdist
  [ -d "$sdist/kernels-$1/kernels/tests" ] && return
  rm -rf "$sdist/kernels-$1" "$sdist/kernels-$1.tar.gz"
  # `pip download --no-binary kernels` prepares the sdist's metadata, which
  # asks cargo for the Rust crates of kernels 0.18 and later (a git
  # dependency: needs a git host); without it, the same file from the index
  # pip reads (its JSON API, PEP 691), checked against the index's sha256.
  if ! "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary kernels \
      -d "$sdist" "kernels==$1" 2>/dev/null; then
    # The index pip itself reads: PIP_INDEX_URL, else pip's default.
    index=${PIP_INDEX_URL:-$("$PY" -c 'from pip._internal.models.index import PyPI; print(PyPI.simple_url)')}
    "$PY" - "$1" "$sdist" "${index%/}/kernels/" <<'PYEOF'
import hashlib, json, sys, urllib.parse, urllib.request
release, folder, url = sys.argv[1:4]
index = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
name = f"kernels-{release}.tar.gz"
(entry,) = [f for f in json.load(urllib.request.urlopen(index, timeout=60))["files"] if f["filename"] == name]
data = urllib.request.urlopen(urllib.parse.urljoin(url, entry["url"]), timeout=120).read()
if hashlib.sha256(data).hexdigest() != entry["hashes"]["sha256"]:
    sys.exit(f"{name}: sha256 differs from the index's")
open(f"{folder}/{name}", "wb").write(data)
PYEOF
  fi
  tar -xzf "$sdist/kernels-$1.tar.gz" -C "$sdist"
}

venv_with() { # $1 = folder, $2 = release, rest: more to install; kept while its kernels is that release
  if ! "$1/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('kernels') != '$2')" 2>/dev/null; then
    rm -rf "$1" && "$PY" -m venv "$1"
    install "$1" "kernels==$2" "${@:3}"
  fi
}

status=0
for release in $releases; do
  start=$SECONDS
  echo "== kernels $release"
  test_venv=.pytest-venv/$release plain_venv=.plain-venv/$release
  venv_with "$test_venv" "$release" -r scripts/requirements-wheel-test.txt
  install "$test_venv" --force-reinstall --no-deps "$wheel"
  venv_with "$plain_venv" "$release"
  fetch_sdist "$release"
  basetemp="$(scratch_base)/pytest-tmp-$release"
  PREFLIGHT_PLAIN_PYTHON=$PWD/$plain_venv/bin/python PREFLIGHT_KERNELS_TESTS=$PWD/$sdist/kernels-$release/kernels \
    PREFLIGHT_KERNELS_RELEASE=$release \
    "$test_venv/bin/python" -m pytest tests/python -p no:cacheprovider --basetemp "$basetemp" "$@" || status=1
  echo "== kernels $release: $((SECONDS - start)) s"
done
exit $status
