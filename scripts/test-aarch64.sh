#!/usr/bin/env bash
# The aarch64-linux binary, run under user-mode emulation (qemu-aarch64-static)
# on this x86_64 machine, against the x86_64 build of the same tree:
#   --version; resolve of examples/kernels/relu-demo (the same decisions as
#   the x86_64 binary told `--system cpu=aarch64`); inspect of a fatbin and a
#   shared object nvcc built from tests/fixtures/cuda/add.cu (the same JSON);
#   fingerprint (aarch64, a 64-digit hash on its own line).
# Builds the binary first (scripts/build-aarch64.sh --binary, dev profile:
# about 4 min from nothing on the shared 2-core VM). Opt-in, not in
# scripts/test.sh: with Debian's toolchain to install it would take CI from
# about 12 to about 17 minutes (docs/wheels.md).
#
# glibc: the binary asks for /lib/ld-linux-aarch64.so.1. Run it with
# QEMU_LD_PREFIX unset: the loader and libc are then both Debian's
# multiarch libc6:arm64 (one glibc). QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
# alone pairs the cross package's loader (libc6-arm64-cross) with the
# multiarch libc the host's ld.so.cache names: two builds of glibc in one
# process, which spins at 100 % CPU in the first thread it starts. With that
# prefix, add `-E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib` (both from the
# cross package). See docs/wheels.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-aarch64.sh --binary >/dev/null
ARM=target/aarch64/aarch64-unknown-linux-gnu/debug/preflight
X86=target/debug/preflight
[ -x "$X86" ] || cargo build --locked --bin preflight
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PREFLIGHT_CACHE=$tmp/cache
arm() { env -u QEMU_LD_PREFIX timeout 120 qemu-aarch64-static "$ARM" "$@"; }

passed=0 failed=0
check() { # name, then a command that must succeed
  local name=$1
  shift
  if "$@" >"$tmp/out" 2>&1; then
    passed=$((passed + 1))
    echo "ok: $name"
  else
    failed=$((failed + 1))
    echo "FAILED: $name"
    sed 's/^/    /' "$tmp/out" | tail -20
  fi
}
same() { # two commands whose stdout must be equal
  diff <(eval "$1") <(eval "$2")
}

NVCC=.venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc
[ -x "$NVCC" ] || scripts/setup-env.sh >/dev/null
"$NVCC" -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90 \
  tests/fixtures/cuda/add.cu -o "$tmp/add.fatbin"
"$NVCC" -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 \
  tests/fixtures/cuda/add.cu -o "$tmp/libadd.so"

file "$ARM" | grep -q 'ARM aarch64' || { echo "$ARM is not an aarch64 binary" >&2; exit 1; }
check "--version" same "arm --version" "$X86 --version"
check "resolve relu-demo: the x86_64 decisions for cpu=aarch64" \
  same "arm resolve examples/kernels/relu-demo --json" \
  "$X86 resolve examples/kernels/relu-demo --system cpu=aarch64 --json"
check "resolve relu-demo: the table, torch-cpu preferred" \
  bash -c "$(declare -f arm); ARM=$ARM; arm resolve examples/kernels/relu-demo | grep -q 'the hub loader would pick torch-cpu'"
check "inspect a fatbin and a shared object" \
  same "arm inspect $tmp/add.fatbin $tmp/libadd.so --json" "$X86 inspect $tmp/add.fatbin $tmp/libadd.so --json"
check "fingerprint: aarch64" \
  bash -c "$(declare -f arm); ARM=$ARM; arm fingerprint --json | grep -q '\"arch\": \"aarch64\"'"
check "fingerprint: the hash on its own line" \
  bash -c "$(declare -f arm); ARM=$ARM; arm fingerprint | tail -1 | grep -Eqx '[0-9a-f]{64}'"
# The wheel scripts/build-aarch64.sh made, when there is one: its binary.
for wheel in target/wheels-aarch64/kernel_preflight-*_aarch64.whl; do
  [ -f "$wheel" ] || continue
  unzip -q -o -j "$wheel" 'kernel_preflight-*.data/scripts/preflight' -d "$tmp/wheel"
  check "the wheel's binary: $(basename "$wheel")" \
    same "env -u QEMU_LD_PREFIX timeout 120 qemu-aarch64-static $tmp/wheel/preflight --version" "$X86 --version"
done
echo "aarch64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
