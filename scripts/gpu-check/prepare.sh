#!/usr/bin/env bash
# Builds, with nvcc, every artifact the device checks load (docs/gpu-validation.md),
# so that a device machine without nvcc (a pip-only torch machine has none)
# still runs them: run it on the build machine and carry the folder with the
# binary. scripts/gpu-check-native.sh runs it itself where the device has nvcc
# and nothing was carried.
#
#   scripts/gpu-check/prepare.sh [OUT]     # default target/gpu-check
#
# nvcc: $NVCC, else $CUDA_HOME/bin/nvcc, else the CUDA 13 wheel of the test
# environment (.venv, scripts/setup-env.sh), else nvcc on PATH. Artifacts, for
# sm_80, sm_90 and sm_100 alike (the device's capability is not known here):
#   axpy_smXX.cubin, axpy_smXX.fatbin (SASS only), axpy_computeXX.ptx,
#   axpy_computeXX.fatbin (PTX only)            the axpy fixture kernel
#   loop_o3_smXX.cubin, loop_g_smXX.cubin         a loop kernel, -O3 and -G
#   ops_sm80.so, ops_sm90.so, ops_compute80.so    hub _ops.so, one container
#   ops_sm90_sm100a.so, ops_sm80_sm100a.so        two containers (a kernel
#                                                 section of its own)
#   nvcc-version                                  the CUDA release that built them
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/target/gpu-check}
NVCC=${NVCC:-}
if [ -z "$NVCC" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc; fi
if [ -z "$NVCC" ]; then NVCC=$(ls "$ROOT"/.venv/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -n 1 || true); fi
if [ -z "$NVCC" ]; then NVCC=$(command -v nvcc || true); fi
[ -n "$NVCC" ] && [ -x "$NVCC" ] || { echo "prepare.sh: no nvcc (set NVCC or CUDA_HOME)" >&2; exit 2; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
AXPY=$ROOT/tests/fixtures/native/axpy/axpy.cu
ADD=$ROOT/tests/fixtures/cuda/add.cu
SCALE=$ROOT/tests/fixtures/cuda/scale.cu
cat >"$TMP/loop.cu" <<'CU'
// axpy's signature and result, with a dependent loop of 16 n FMAs that a -G
// build keeps in local memory (acc converges to exactly 2.0: y = a x + y).
extern "C" __global__ void preflight_axpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (unsigned k = 0; k < 16 * n; ++k) acc = fmaf(acc, 0.5f, 1.0f);
    y[i] = a * x[i] + y[i] * (acc - 1.0f);
}
CU
nv() { "$NVCC" "$@"; }
obj() { # obj OUT.o SOURCE NVCC-ARGS…
  local out=$1 src=$2
  shift 2
  nv -Xcompiler -fPIC -c "$@" "$src" -o "$out"
}
for cc in 80 90 100; do
  nv -cubin -arch=sm_$cc -o "$OUT/axpy_sm$cc.cubin" "$AXPY"
  nv -fatbin -gencode "arch=compute_$cc,code=sm_$cc" -o "$OUT/axpy_sm$cc.fatbin" "$AXPY"
  nv -ptx -arch=compute_$cc -o "$OUT/axpy_compute$cc.ptx" "$AXPY"
  nv -fatbin -gencode "arch=compute_$cc,code=compute_$cc" -o "$OUT/axpy_compute$cc.fatbin" "$AXPY"
  nv -cubin -arch=sm_$cc -O3 -o "$OUT/loop_o3_sm$cc.cubin" "$TMP/loop.cu"
  nv -cubin -arch=sm_$cc -G -o "$OUT/loop_g_sm$cc.cubin" "$TMP/loop.cu"
done
for cc in 80 90; do
  nv -Xcompiler -fPIC -shared -gencode "arch=compute_$cc,code=sm_$cc" -o "$OUT/ops_sm$cc.so" "$ADD"
done
nv -Xcompiler -fPIC -shared -gencode "arch=compute_80,code=compute_80" -o "$OUT/ops_compute80.so" "$ADD"
obj "$TMP/scale.o" "$SCALE" -gencode "arch=compute_100a,code=sm_100a"
for cc in 80 90; do
  obj "$TMP/add$cc.o" "$ADD" -gencode "arch=compute_$cc,code=sm_$cc"
  # Host code only at the link, as a build's linker does (nvcc's device
  # link would add a default sm_75 container).
  nv -shared --no-device-link "$TMP/add$cc.o" "$TMP/scale.o" -o "$OUT/ops_sm${cc}_sm100a.so"
done
nv --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' >"$OUT/nvcc-version"
echo "prepare.sh: $(ls "$OUT" | wc -l) artifacts in $OUT (nvcc $(cat "$OUT/nvcc-version"): $NVCC)"
