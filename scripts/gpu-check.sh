#!/usr/bin/env bash
# GPU checks for preflight: what CI (no GPU) cannot test. Run on a machine
# with an NVIDIA GPU, its driver and a local CUDA toolkit (nvcc), from a
# checkout of this repository, with a prebuilt binary:
#
#   scripts/gpu-check.sh [PATH/TO/preflight]     # or PREFLIGHT=…; default target/release/preflight
#
# Needs nothing from the network and no Rust toolchain. It runs `doctor`
# (with the interpreter PYTHON, the same one the hub checks use), the full
# fingerprint without Python, builds with the local nvcc a kernel for this
# GPU's architecture, one with SASS only for an architecture this GPU lacks
# (no PTX), one with PTX only, and one with PTX newer than the driver; runs
# `check` (native preflight.toml targets) and `inspect` on them; then the
# failures a real device shows: a device fault (crashed, and the next probe
# still passes), an endless kernel (timeout), an allocation beyond the
# device (out_of_memory, never cached; needs torch with CUDA in PYTHON), an
# sm_90a wgmma module with a launch of more than 48 KiB of dynamic shared
# memory (on compute capability 9.0), no visible device
# (CUDA_VISIBLE_DEVICES=); and the device depth of compiled hub variants
# (a shared object with only SASS for another architecture is
# unsupported_arch at depth device, one with PTX passes with its JIT time;
# needs torch with CUDA in PYTHON); and `bench` of one kernel built twice
# (-O3 and -G) as two native targets, the -O3 one called faster with a
# verdict, and of two hub variants of one torch kernel, the faster called
# with device events and an L2 flush (needs torch with CUDA in PYTHON); the
# conditions transformers checks by hand: a JIT kernel's `sm_<cc>a` build
# (passes where the GPU has such a target, unsupported_arch where not),
# import guards for an architecture above this GPU (unsupported_arch) and
# for CUDA with no visible device (no_device), and preflight's smoke
# workloads on the hub kernels transformers loads, where the hub cache
# holds them; and that a probe in its namespaces still reaches the GPU (/dev/nvidia*,
# /proc/driver/nvidia, torch on the device), as root and, through a user
# namespace, as nobody; forked probes (PREFLIGHT_FORK=1), each child
# initialising CUDA itself, with the outcomes of fresh ones (not yet run on
# a GPU). Every command runs under `timeout`.
# Prints one PASS/FAIL/SKIP line per expectation and `N passed, N failed`;
# exits 1 when anything failed. When cargo is on PATH it also runs the Rust
# tests marked `#[ignore = "needs a GPU…"]` (they need the test environment
# of scripts/setup-env.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${1:-${PREFLIGHT:-target/release/preflight}}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
PY=${PYTHON:-python3}
passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
expect() { # expect DESCRIPTION WANT GOT
  if [ "$2" = "$3" ]; then pass "$1 ($3)"; else fail "$1: expected $2, got $3"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
skip() { echo "SKIP $*"; }
# t SECONDS COMMAND…: every command of this script runs under a deadline,
# so that a hung driver or probe fails the check instead of stalling it.
t() { timeout --kill-after=10 "$@"; }
# jget FILE EXPR: evaluate a Python expression over the JSON document `d`.
jget() {
  t 30 "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null || echo "?"
}

[ -x "$BIN" ] || { fail "preflight binary at $BIN (build it with cargo build --release, or pass its path)"; finish; }
command -v "$PY" >/dev/null || { fail "python3 to read JSON (set PYTHON)"; finish; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/preflight-gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# A cache of this run's own: every expectation below is met by a probe now,
# not by an outcome an earlier run left.
export PREFLIGHT_CACHE=$WORK/cache
echo "preflight: $BIN ($(t 10 "$BIN" --version))"
echo "work dir:  $WORK"

# 1. doctor
PYBIN=$(t 10 "$PY" -c 'import sys; print(sys.executable)')
t 240 "$BIN" doctor --json --python "$PYBIN" >"$WORK/doctor.json" 2>"$WORK/doctor.err"
code=$?
expect "doctor exits 0" 0 "$code"
t 240 "$BIN" doctor --python "$PYBIN" 2>&1 | sed 's/^/    /'
check_verdict() { jget "$WORK/doctor.json" "[c for c in d['checks'] if c['name']=='$1'][0]['verdict']"; }
major=$(jget "$WORK/doctor.json" "d['device']['major']")
minor=$(jget "$WORK/doctor.json" "d['device']['minor']")
driver_cuda=$(jget "$WORK/doctor.json" "d['driver_cuda']")
if [ "$major" = "?" ]; then
  fail "doctor finds a GPU (device 0): $(jget "$WORK/doctor.json" "d['summary']")"
  finish
fi
cc=$major.$minor
sm=sm_$major$minor
pass "doctor finds a GPU: $sm, driver CUDA $driver_cuda"
expect "doctor: CUDA driver and devices" pass "$(check_verdict driver)"
expect "doctor: PTX JIT" pass "$(check_verdict ptx_jit)"
expect "doctor: NVRTC compile + load + launch" pass "$(check_verdict nvrtc)"
expect "doctor: nvcc compile + load + launch" pass "$(check_verdict nvcc)"
ccn=$((major * 10 + minor))
want() { if [ "$1" = yes ]; then echo pass; else echo skipped; fi; }
expect "doctor: bf16 kernel" "$(want $([ $ccn -ge 80 ] && echo yes))" "$(check_verdict bf16)"
expect "doctor: fp8 kernel" "$(want $([ $ccn -ge 89 ] && echo yes))" "$(check_verdict fp8)"
expect "doctor: wgmma kernel" "$(want $([ $ccn -eq 90 ] && echo yes))" "$(check_verdict wgmma)"
importable() { t 120 "$PY" -c "import $1" >/dev/null 2>&1 && echo pass || echo missing; }
expect "doctor: torch" "$(importable torch)" "$(check_verdict torch)"
expect "doctor: Triton" "$(importable triton)" "$(check_verdict triton)"
expect "doctor: CuTe-DSL" "$(importable cutlass)" "$(check_verdict cute_dsl)"

# 1b. full fingerprint without Python: the cuda child measures CUDA's device 0
PREFLIGHT_PYTHON=none PREFLIGHT_CACHE=$WORK/fingerprint-cache t 240 \
  "$BIN" fingerprint --full --json >"$WORK/fingerprint.json" 2>"$WORK/fingerprint.err"
expect "fingerprint --full without Python: exit status" 0 "$?"
expect "fingerprint --full: libcuda" ok "$(jget "$WORK/fingerprint.json" "d['gpus']['libcuda']['status']")"
expect "fingerprint --full: CUDA driver API" "$driver_cuda" "$(jget "$WORK/fingerprint.json" "d['gpus']['cuda_driver_api']")"
expect "fingerprint --full: CUDA device 0 compute capability" "$cc" \
  "$(jget "$WORK/fingerprint.json" "[g['compute_capability'] for g in d['gpus']['devices'] if g['cuda_index']==0][0]")"
PREFLIGHT_PYTHON=none PREFLIGHT_CACHE=$WORK/fingerprint-cache t 240 \
  "$BIN" fingerprint --full >"$WORK/fingerprint.txt" 2>&1
grep -q "compute $cc" "$WORK/fingerprint.txt" && pass "fingerprint --full shows compute $cc" \
  || fail "fingerprint --full shows compute $cc: $(grep -i cuda "$WORK/fingerprint.txt" | head -n 3)"
grep -q "$driver_cuda" "$WORK/fingerprint.txt" && pass "fingerprint --full shows the driver API $driver_cuda" \
  || fail "fingerprint --full shows the driver API $driver_cuda"
sed 's/^/    /' "$WORK/fingerprint.txt"

# 2. kernels built with the local nvcc
NVCC=""
for c in ${CUDA_HOME:+$CUDA_HOME/bin/nvcc} ${CUDA_PATH:+$CUDA_PATH/bin/nvcc} "$(command -v nvcc)" /usr/local/cuda/bin/nvcc; do
  if [ -n "$c" ] && [ -x "$c" ]; then NVCC=$c; break; fi
done
[ -n "$NVCC" ] || { fail "a local nvcc (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"; finish; }
nvcc_cuda=$(t 30 "$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
pass "local nvcc: $NVCC (CUDA $nvcc_cuda)"
other=80
[ "$major" = 8 ] && other=90
SRC=$ROOT/tests/fixtures/native
manifest() { # manifest DIR FILE: a preflight.toml with the fixture's first launch for FILE
  {
    printf '[[module]]\nfile = "%s"\n\n' "$2"
    sed -n '/^\[\[module.launch\]\]/,/^\]/p' "$SRC/axpy/preflight.toml" | awk 'NR==1,/^\]/'
  } >"$1/preflight.toml"
}
build() { # build NAME FILE NVCC-ARGS…
  local name=$1 file=$2
  local dir=$WORK/$name
  shift 2
  mkdir -p "$dir"
  if t 300 "$NVCC" "$@" -o "$dir/$file" "$SRC/axpy/axpy.cu" 2>"$dir/nvcc.err"; then
    manifest "$dir" "$file"
    pass "nvcc $* builds $name/$file"
  else
    fail "nvcc $* builds $name/$file: $(tail -n 2 "$dir/nvcc.err")"
  fi
}
mkdir -p "$WORK/native"
cp "$SRC/axpy/axpy.cu" "$SRC/axpy/preflight.toml" "$WORK/native/"
t 300 "$NVCC" -cubin -arch="$sm" -o "$WORK/native/axpy.cubin" "$SRC/axpy/axpy.cu" \
  && pass "nvcc builds a cubin for this GPU ($sm)" || fail "nvcc builds a cubin for $sm"
build wrong axpy.fatbin -fatbin -gencode "arch=compute_$other,code=sm_$other"
build ptx axpy.ptx -ptx -arch="compute_$major$minor"
build ptxfat axpy.fatbin -fatbin -gencode "arch=compute_$major$minor,code=compute_$major$minor"
mkdir -p "$WORK/ptxnew" "$WORK/broken"
if [ -f "$WORK/ptx/axpy.ptx" ]; then
  # One PTX ISA major beyond any driver of this CUDA major.
  sed 's/^\.version .*/.version 99.0/' "$WORK/ptx/axpy.ptx" >"$WORK/ptxnew/axpy.ptx"
  manifest "$WORK/ptxnew" axpy.ptx
fi
cp "$SRC/broken.cu" "$WORK/broken/axpy.cu"
manifest "$WORK/broken" axpy.cu

# 3. check
# PTX from an nvcc newer than the driver is ptx_too_new; otherwise it JITs.
newer=$(t 30 "$PY" -c "import sys; v=lambda s: tuple(map(int, s.split('.'))); print(v(sys.argv[1]) > v(sys.argv[2]))" "$nvcc_cuda" "$driver_cuda" 2>/dev/null)
ptx_want=pass
[ "$newer" = True ] && ptx_want=ptx_too_new
check() { # check NAME WANT-EXIT WANT-KIND [WANT-DEPTH]  (CHECK_ARGS: more options)
  local json=$WORK/$1.check.json
  # shellcheck disable=SC2086
  t 180 "$BIN" check --json --python "$PYBIN" ${CHECK_ARGS:-} "$WORK/$1" >"$json" 2>"$WORK/$1.check.err"
  local code=$?
  expect "check $1: exit status" "$2" "$code"
  local kinds
  kinds=$(jget "$json" "' '.join(sorted(set(r['outcome']['kind'] for r in d['results'])))")
  expect "check $1: outcome" "$3" "$kinds"
  if [ -n "${4:-}" ]; then
    expect "check $1: depth" "$4" "$(jget "$json" "' '.join(sorted(set(str(r['outcome']['depth']) for r in d['results'])))")"
  fi
  if [ "$kinds" != "$3" ]; then
    jget "$json" "'\n'.join(r['variant']+': '+r['outcome']['message'] for r in d['results'])" | sed 's/^/    /'
  fi
}
check native 0 pass verified
check wrong 1 unsupported_arch
expect "check wrong: phase" load "$(jget "$WORK/wrong.check.json" "d['results'][0]['outcome']['phase']")"
expect "check wrong: declared (inspect's rule)" False "$(jget "$WORK/wrong.check.json" "d['results'][0]['declared']['accepted']")"
expect "check native: declared (inspect's rule)" True "$(jget "$WORK/native.check.json" "all(r['declared']['accepted'] for r in d['results'])")"
if [ "$ptx_want" = pass ]; then
  check ptx 0 pass verified
  check ptxfat 0 pass verified
else
  check ptx 1 ptx_too_new
  check ptxfat 1 ptx_too_new
fi
check ptxnew 1 ptx_too_new
check broken 1 jit_compile_error
t 180 "$BIN" check "$WORK/native" "$WORK/wrong" 2>&1 | sed 's/^/    /'

# 4. inspect
inspect() { # inspect FILE WANT-EXIT WANT-KIND WANT-TARGET
  local json=$WORK/inspect.json
  t 60 "$BIN" inspect --json --gpu "$cc" "$WORK/$1" >"$json" 2>"$WORK/inspect.err"
  expect "inspect --gpu $cc $1: exit status" "$2" "$?"
  expect "inspect $1: images" "$3 $4" "$(jget "$json" "' '.join(i['kind']+' '+i['target'] for i in d['files'][0]['images'])")"
}
inspect native/axpy.cubin 0 sass "$sm"
inspect wrong/axpy.fatbin 1 sass "sm_$other"
inspect ptxfat/axpy.fatbin 0 ptx "compute_$major$minor"

# 5. what only a real device shows
launch_toml() { # launch_toml [SHARED_MEM_BYTES]: the axpy launch, verified
  printf '[[module.launch]]\nfunction = "preflight_axpy"\ngrid = 4\nblock = 256\n'
  if [ -n "${1:-}" ]; then printf 'shared_mem_bytes = %s\n' "$1"; fi
  printf 'args = [\n  { scalar = "f32", value = 2.0 },\n  { buffer = "f32", len = 1000, init = 1.5 },\n'
  printf '  { buffer = "f32", len = 1000, init = 1.0, expect = 4.0 },\n  { scalar = "u32", value = 1000 },\n]\n'
}
cu_target() { # cu_target NAME BODY [TARGET [SHARED_MEM_BYTES]]: a .cu module for NVRTC
  mkdir -p "$WORK/$1"
  printf 'extern "C" __global__ void preflight_axpy(float a, const float *x, float *y, unsigned n) {\n%s\n}\n' "$2" >"$WORK/$1/axpy.cu"
  {
    printf '[[module]]\nfile = "axpy.cu"\n'
    if [ -n "${3:-}" ]; then printf 'target = "%s"\n' "$3"; fi
    printf '\n'
    launch_toml "${4:-}"
  } >"$WORK/$1/preflight.toml"
}
AXPY='  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;'
cu_target fault "$AXPY
  if (i < n) ((volatile float *)0x10)[i] = a * x[i] + y[i];"
CHECK_ARGS=--no-cache check fault 1 crashed
expect "check fault: phase" launch "$(jget "$WORK/fault.check.json" "d['results'][0]['outcome']['phase']")"
CHECK_ARGS=--no-cache check native 0 pass verified # the next probe still works
cu_target hang "  volatile unsigned spin = 1;
  while (spin) { }
$AXPY
  if (i < n) y[i] = a * x[i] + y[i];"
CHECK_ARGS="--timeout 10 --no-cache" check hang 1 timeout
if [ "$cc" = 9.0 ]; then
  cu_target wgmma "  extern __shared__ float scratch[];
  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");
$AXPY
  scratch[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = a * scratch[threadIdx.x] + y[i];" sm_90a 102400
  check wgmma 0 pass verified
else
  skip "sm_90a wgmma module with 100 KiB of dynamic shared memory: this GPU is $sm, not 9.0"
fi
CUDA_VISIBLE_DEVICES= PREFLIGHT_CACHE=$WORK/invisible-cache check native 1 no_device

# 6. the device depth of compiled hub variants, and the device's memory, as
# the hub loader would meet them (torch with CUDA in PYTHON)
if t 120 "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  hub_variant() { # hub_variant REPO NVCC-ARGS…: build/torch-cuda with _ops.so
    local dir=$WORK/$1/build/torch-cuda
    local repo=$1
    shift
    mkdir -p "$dir"
    printf 'X = 1\n' >"$dir/__init__.py"
    printf '{"name": "%s", "id": "_%s_0", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "cuda"}}\n' \
      "$repo" "$repo" >"$dir/metadata.json"
    if t 300 "$NVCC" -Xcompiler -fPIC -shared "$@" -o "$dir/_ops.so" "$ROOT/tests/fixtures/cuda/add.cu" 2>"$WORK/$repo.nvcc.err"; then
      pass "nvcc $* builds $repo/build/torch-cuda/_ops.so"
    else
      fail "nvcc $* builds $repo/build/torch-cuda/_ops.so: $(tail -n 2 "$WORK/$repo.nvcc.err")"
    fi
  }
  hub_variant sassother -gencode "arch=compute_$other,code=sm_$other"
  check sassother 1 unsupported_arch
  expect "check sassother: phase (device depth, no smoke)" load "$(jget "$WORK/sassother.check.json" "d['results'][0]['outcome']['phase']")"
  expect "check sassother: the driver's code" 209 "$(jget "$WORK/sassother.check.json" "d['results'][0]['outcome']['embedded'][0]['error']['code']")"
  hub_variant ptxonly -gencode "arch=compute_$other,code=compute_$other"
  if [ "$other" -gt "$ccn" ]; then
    # PTX for a newer architecture does not JIT down.
    check ptxonly 1 unsupported_arch
  elif [ "$ptx_want" = pass ]; then
    check ptxonly 0 pass device
    jit=$(jget "$WORK/ptxonly.check.json" "d['results'][0]['outcome']['embedded'][0]['jit_ms']")
    case $jit in ''|None|'?') fail "check ptxonly: PTX JIT time reported (got $jit)" ;; *) pass "check ptxonly: PTX JIT time reported ($jit ms)" ;; esac
    expect "check ptxonly: the image taken (inferred)" "compute_$other PTX, JIT" \
      "$(jget "$WORK/ptxonly.check.json" "d['results'][0]['outcome']['embedded'][0]['taken']")"
  else
    check ptxonly 1 ptx_too_new
  fi
  t 180 "$BIN" check --python "$PYBIN" "$WORK/sassother" "$WORK/ptxonly" 2>&1 | sed 's/^/    /'
  mkdir -p "$WORK/oom/build/torch-universal"
  printf 'X = 1\n' >"$WORK/oom/build/torch-universal/__init__.py"
  printf '{"name": "oom", "id": "_oom_0", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "universal"}}\n' \
    >"$WORK/oom/build/torch-universal/metadata.json"
  printf 'def smoke(kernel, device):\n    import torch\n    torch.empty(1 << 50, dtype=torch.uint8, device=device)\n' >"$WORK/oom.py"
  CHECK_ARGS="--smoke $WORK/oom.py" PREFLIGHT_CACHE=$WORK/oom-cache check oom 1 out_of_memory
  CHECK_ARGS="--smoke $WORK/oom.py" PREFLIGHT_CACHE=$WORK/oom-cache check oom 1 out_of_memory
  expect "check oom: not cached (a transient outcome)" False "$(jget "$WORK/oom.check.json" "d['results'][0]['cached']")"
else
  skip "device depth of hub variants and out_of_memory: no torch with CUDA in $PY (set PYTHON)"
fi

# 6b. Forked probes on the GPU (issue 23; NOT YET RUN on a GPU: written on a
# machine without one). Four kernels whose variant initialises CUDA when it
# is imported and whose smoke runs on the device, probed forked from one
# fork server (PREFLIGHT_FORK=1) and fresh (PREFLIGHT_FORK=0): each forked
# child initialises CUDA itself, which fails ("Cannot re-initialize CUDA in
# forked subprocess") if anything in the server touched the device; both
# ways give the same outcomes.
if t 120 "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  forked_targets=()
  for i in 0 1 2 3; do
    dir=$WORK/forked$i/build/torch-cuda
    mkdir -p "$dir"
    printf 'import torch
ONES = torch.ones(1024, device="cuda")
def add(a, b):
    return a + b
' >"$dir/__init__.py"
    printf '{"name": "forked%s", "id": "_forked%s_0", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "cuda"}}\n' \
      "$i" "$i" >"$dir/metadata.json"
    forked_targets+=("$WORK/forked$i")
  done
  printf 'def smoke(kernel, device):
    import torch
    kernel.add(torch.arange(8, device=device), kernel.ONES[:8])
    torch.cuda.synchronize()
' >"$WORK/forked-smoke.py"
  for fork in 1 0; do
    PREFLIGHT_FORK=$fork PREFLIGHT_CACHE=$WORK/forked-cache-$fork t 300 "$BIN" check --json --jobs 2 \
      --smoke "$WORK/forked-smoke.py" --python "$PYBIN" "${forked_targets[@]}" >"$WORK/forked-$fork.json" 2>"$WORK/forked-$fork.err"
    expect "forked probes on the GPU (PREFLIGHT_FORK=$fork): exit status" 0 "$?"
  done
  expect "forked probes on the GPU: every child forked" forked \
    "$(jget "$WORK/forked-1.json" "' '.join(sorted(set(str(r['outcome'].get('made')) for r in d['results'])))")"
  expect "forked probes on the GPU: outcomes as fresh ones" \
    "$(jget "$WORK/forked-0.json" "' '.join(r['outcome']['kind']+'/'+str(r['outcome']['depth']) for r in d['results'])")" \
    "$(jget "$WORK/forked-1.json" "' '.join(r['outcome']['kind']+'/'+str(r['outcome']['depth']) for r in d['results'])")"
  if grep -q "not forked" "$WORK/forked-1.err"; then
    fail "forked probes on the GPU: the fork server was given up: $(grep 'not forked' "$WORK/forked-1.err")"
  else
    pass "forked probes on the GPU: the fork server was kept"
  fi
else
  skip "forked probes on the GPU: no torch with CUDA in $PY (set PYTHON)"
fi

# 7. bench on the GPU.
# 7a. native: one kernel built twice with the local nvcc, -O3 and a -G debug
# build, as two native targets; the cuda executor's bench mode times each
# with CUDA events and an L2 flush, and must call the -O3 one faster with a
# verdict (faster/slower, not ambiguous). The kernel has axpy's signature
# and result, with a dependent loop of 16 n FMAs that a -G build keeps in
# local memory (acc converges to exactly 2.0, so y = a x + y).
NB=$WORK/nbench
mkdir -p "$NB/o3" "$NB/debug"
cat >"$NB/axpy_loop.cu" <<'CU'
extern "C" __global__ void preflight_axpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (unsigned k = 0; k < 16 * n; ++k) acc = fmaf(acc, 0.5f, 1.0f);
    y[i] = a * x[i] + y[i] * (acc - 1.0f);
}
CU
nbuild() { # nbuild DIR NVCC-ARGS…: DIR/axpy.cubin of the loop kernel, with the fixture's launch
  local dir=$1
  shift
  if t 300 "$NVCC" -cubin -arch="$sm" "$@" -o "$dir/axpy.cubin" "$NB/axpy_loop.cu" 2>"$dir/nvcc.err"; then
    manifest "$dir" axpy.cubin
    pass "nvcc -cubin $* builds $(basename "$dir")/axpy.cubin"
  else
    fail "nvcc -cubin $* builds $(basename "$dir")/axpy.cubin: $(tail -n 2 "$dir/nvcc.err")"
  fi
}
nbuild "$NB/o3" -O3
nbuild "$NB/debug" -G
(cd "$NB" && PREFLIGHT_CACHE=$WORK/nbench-cache t 300 "$BIN" bench --json o3 debug) \
  >"$WORK/nbench.json" 2>"$WORK/nbench.err"
expect "bench (GPU, native -O3 and -G): exit status" 0 "$?"
expect "bench native: the -O3 build first" o3 "$(jget "$WORK/nbench.json" "d['variants'][0]['variant']")"
expect "bench native: the -G build's verdict" slower "$(jget "$WORK/nbench.json" "d['variants'][1]['vs_fastest']['verdict']")"
expect "bench native: timer" device_events "$(jget "$WORK/nbench.json" "d['variants'][0]['status']['timer']")"
expect "bench native: L2 flushed" True "$(jget "$WORK/nbench.json" "d['flush_l2']")"
expect "bench native: kept in the cache" 2 "$(find "$WORK/nbench-cache/bench-v1" -name '*.json' 2>/dev/null | wc -l | tr -d ' ')"
(cd "$NB" && PREFLIGHT_CACHE=$WORK/nbench-cache t 300 "$BIN" bench o3 debug 2>/dev/null) | sed 's/^/    /'

# 7b. hub: two variants of one hub kernel (torch), one a single matmul, the
# other the same product in 16 row blocks (16 launches); bench times them
# with device events and an L2 flush and calls the faster.
if t 120 "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  BR=$WORK/benchkernel
  for v in torch-universal torch-cuda; do
    mkdir -p "$BR/build/$v"
    printf '{"name":"mm","id":"_mm_%s","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cuda"}}\n' \
      "${v#torch-}" >"$BR/build/$v/metadata.json"
  done
  printf 'def mm(out, x, y):\n    out.copy_(x @ y)\n' >"$BR/build/torch-universal/__init__.py"
  printf 'def mm(out, x, y):\n    for rows in range(0, x.shape[0], x.shape[0] // 16):\n        out[rows:rows + x.shape[0] // 16] = x[rows:rows + x.shape[0] // 16] @ y\n' \
    >"$BR/build/torch-cuda/__init__.py"
  mkdir -p "$BR/benchmarks"
  cat >"$BR/benchmarks/benchmark_mm.py" <<'PY'
import torch
from kernels.benchmark import Benchmark


class Mm(Benchmark):
    seed = 0

    def setup(self):
        self.x = torch.randn(2048, 2048, device=self.device)
        self.y = torch.randn(2048, 2048, device=self.device)
        self.out = torch.empty(2048, 2048, device=self.device)

    def benchmark_mm(self):
        self.kernel.mm(self.out, self.x, self.y)

    def verify_mm(self):
        return self.x @ self.y
PY
  PREFLIGHT_CACHE=$WORK/bench-cache t 300 "$BIN" bench --json --python "$PYBIN" \
    "$BR" >"$WORK/bench.json" 2>"$WORK/bench.err"
  expect "bench (GPU, torch): exit status" 0 "$?"
  expect "bench: the faster variant first" torch-universal "$(jget "$WORK/bench.json" "d['variants'][0]['variant']")"
  expect "bench: the slower one's verdict" slower "$(jget "$WORK/bench.json" "d['variants'][1]['vs_fastest']['verdict']")"
  expect "bench: timer" device_events "$(jget "$WORK/bench.json" "d['variants'][0]['status']['timer']")"
  expect "bench: L2 flushed" True "$(jget "$WORK/bench.json" "d['flush_l2']")"
  expect "bench: the reference timed" timed "$(jget "$WORK/bench.json" "d['reference']['status']['status']")"
  PREFLIGHT_CACHE=$WORK/bench-cache t 300 "$BIN" bench --python "$PYBIN" --format markdown "$BR" 2>/dev/null | sed 's/^/    /'
else
  skip "bench on the GPU: no torch with CUDA in $PY (set PYTHON)"
fi

# 8. The conditions transformers' integrations check by hand (docs/transformers-checks.md).
# 8a. A JIT kernel (DeepGEMM's way: the CUDA home found like torch's
# _find_cuda_home, then `nvcc --gpu-architecture=sm_<cc>a`) with the local
# nvcc: on a GPU that has an arch-specific target (9.0, 10.x, 11.0, 12.x) it
# compiles and passes; on one that has none (8.x) nvcc refuses it and the
# GPU is named (unsupported_arch), never "use a newer nvcc".
JK=$WORK/jitarch
mkdir -p "$JK/build/torch-universal"
printf '{"name":"jit-arch","id":"_jit_arch_0","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}\n' \
  >"$JK/build/torch-universal/metadata.json"
cat >"$JK/build/torch-universal/__init__.py" <<'PY'
import os
import shutil
import subprocess
import tempfile


def _find_cuda_home():
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home is None:
        nvcc = shutil.which("nvcc")
        if nvcc is not None:
            cuda_home = os.path.dirname(os.path.dirname(nvcc))
        elif os.path.isdir("/usr/local/cuda"):
            cuda_home = "/usr/local/cuda"
    assert cuda_home is not None
    return cuda_home


def build(arch):
    out = tempfile.mkdtemp()
    source = os.path.join(out, "k.cu")
    with open(source, "w") as f:
        f.write('extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n')
    subprocess.run([os.path.join(_find_cuda_home(), "bin", "nvcc"), "--gpu-architecture=" + arch,
                    "-cubin", "-o", os.path.join(out, "k.cubin"), source], check=True, capture_output=True)
    return True
PY
printf 'def smoke(kernel, device):\n    return (kernel.build("sm_%sa"), True)\n' "$ccn" >"$WORK/jitarch.py"
case $ccn in
  90|100|101|103|110|120|121) jit_want="0 pass" ;;
  *) jit_want="1 unsupported_arch" ;;
esac
# shellcheck disable=SC2086
CUDA_HOME=$(dirname "$(dirname "$NVCC")") CHECK_ARGS="--smoke $WORK/jitarch.py" check jitarch $jit_want
# 8b. Import guards, the way transformers writes them, inside a cuda
# variant (needs torch with CUDA in PYTHON): one that needs an architecture
# above this GPU is unsupported_arch; "requires CUDA" with no visible
# device (CUDA_VISIBLE_DEVICES=) is no_device; both keep the kernel's words.
if t 120 "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  for g in guardarch guardcuda; do
    mkdir -p "$WORK/$g/build/torch-cuda"
    printf '{"name":"%s","id":"_%s_0","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cuda"}}\n' \
      "$g" "$g" >"$WORK/$g/build/torch-cuda/metadata.json"
  done
  cat >"$WORK/guardarch/build/torch-cuda/__init__.py" <<PY
import torch

major, minor = torch.cuda.get_device_capability()
if major < $((major + 1)):
    raise ImportError("guard-arch requires SM$((major + 1))0 or newer; current device is SM%d%d." % (major, minor))
PY
  cat >"$WORK/guardcuda/build/torch-cuda/__init__.py" <<'PY'
import torch

if not torch.cuda.is_available():
    raise ImportError("guard-cuda kernel requires CUDA, but CUDA is not available.")
PY
  check guardarch 1 unsupported_arch
  expect "check guardarch: the kernel's words kept" True \
    "$(jget "$WORK/guardarch.check.json" "'requires SM' in d['results'][0]['outcome']['message']")"
  CUDA_VISIBLE_DEVICES= check guardcuda 1 no_device
  expect "check guardcuda: the kernel's words kept" True \
    "$(jget "$WORK/guardcuda.check.json" "'requires CUDA, but CUDA is not available' in d['results'][0]['outcome']['message']")"
else
  skip "import guards on the GPU: no torch with CUDA in $PY (set PYTHON)"
fi
# 8c. preflight's smoke workloads (probes/kernels/) on the real hub kernels
# transformers loads, where the hub cache has them (this check downloads
# nothing): at least one variant verified on a GPU the kernel supports,
# else every failure named (never exited or probe_error).
HUB=${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}
for k in deep-gemm finegrained-fp8 sonic-moe flash-attn2 flash-attn3 vllm-flash-attn3 nvfp4-gemm gpt-oss-triton-kernels; do
  dir=""
  for d in "$HUB/kernels--kernels-community--$k" "$HUB/models--kernels-community--$k"; do
    [ -d "$d" ] && dir=$d && break
  done
  if [ -z "$dir" ]; then
    skip "smoke of $k: not in the hub cache $HUB (get_kernel(\"kernels-community/$k\") once, where there is a network)"
    continue
  fi
  t 900 "$BIN" check --json --python "$PYBIN" "$dir" >"$WORK/hub-$k.json" 2>"$WORK/hub-$k.err"
  verdict=$(jget "$WORK/hub-$k.json" "'verified' if any(r['outcome']['kind']=='pass' and r['outcome']['depth']=='verified' for r in d['results']) else ('named' if all(r['outcome']['kind'] not in ('exited','probe_error','crashed','pass') for r in d['results']) else 'unnamed')")
  case $verdict in
    verified) pass "smoke of $k: verified on $sm" ;;
    named) pass "smoke of $k: no variant works on $sm, each failure named: $(jget "$WORK/hub-$k.json" "sorted(set(r['outcome']['kind'] for r in d['results']))")" ;;
    *) fail "smoke of $k on $sm: $(jget "$WORK/hub-$k.json" "'; '.join(r['variant']+': '+r['outcome']['kind']+' '+r['outcome']['message'] for r in d['results'])")" ;;
  esac
done
case $ccn in
  90|100) if [ -f "$WORK/hub-deep-gemm.json" ]; then
      expect "smoke of deep-gemm verified on $sm (its JIT works here)" True \
        "$(jget "$WORK/hub-deep-gemm.json" "any(r['outcome']['kind']=='pass' and r['outcome']['depth']=='verified' for r in d['results'])")"
    fi ;;
esac

# 9. The GPU from inside the probe's namespaces: every probe above ran in a
# pid and mount namespace of its own (and, not root, a user namespace), with
# the device nodes and /proc/driver it needs reached through them. Said
# explicitly here, and again as an unprivileged user (a user namespace),
# where a preflight that is root can become one.
expect "check native: probes ran in namespaces" namespaces \
  "$(jget "$WORK/native.check.json" "d['isolation']['kind']")"
mkdir -p "$WORK/devices/build/torch-universal"
printf '{"name": "devices", "id": "_devices_0", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "universal"}}\n' \
  >"$WORK/devices/build/torch-universal/metadata.json"
cat >"$WORK/devices/build/torch-universal/__init__.py" <<'PY'
import glob
import os

assert glob.glob("/dev/nvidia*"), "no /dev/nvidia* inside the sandbox"
assert os.path.isdir("/proc/driver/nvidia"), "no /proc/driver/nvidia inside the sandbox"
assert sorted(int(p) for p in os.listdir("/proc") if p.isdigit()) == [1, os.getpid()], "a pid namespace of its own"
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    assert torch.cuda.is_available(), "torch sees no GPU inside the sandbox"
    assert torch.ones(4, device="cuda").sum().item() == 4.0
PY
check devices 0 pass
expect "check devices: in namespaces" namespaces "$(jget "$WORK/devices.check.json" "d['isolation']['kind']")"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 &&
  t 30 setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'test -x "$0"' "$BIN" >/dev/null 2>&1; then
  chmod -R a+rX "$WORK"
  mkdir -m 1777 "$WORK/nobody"
  nobody=(setpriv --reuid 65534 --regid 65534 --clear-groups)
  # An interpreter nobody may run (one under /root is out of its reach).
  nobody_py=
  for candidate in "$PYBIN" /usr/bin/python3; do
    if t 60 "${nobody[@]}" sh -c 'test -x "$0" && exec "$0" -c pass' "$candidate" >/dev/null 2>&1; then
      nobody_py=$candidate
      break
    fi
  done
  for target in native devices; do
    if [ "$target" = devices ] && [ -z "$nobody_py" ]; then
      skip "check devices as nobody: no Python interpreter that nobody may run"
      continue
    fi
    HOME=$WORK/nobody PREFLIGHT_CACHE=$WORK/nobody/cache-$target t 180 "${nobody[@]}" \
      "$BIN" check --json ${nobody_py:+--python "$nobody_py"} "$WORK/$target" \
      >"$WORK/nobody/$target.json" 2>"$WORK/nobody/$target.err"
    expect "check $target as nobody (user namespace): exit status" 0 "$?"
    expect "check $target as nobody: outcome" pass "$(jget "$WORK/nobody/$target.json" "' '.join(sorted(set(r['outcome']['kind'] for r in d['results'])))")"
    expect "check $target as nobody: in a user namespace" True "$(jget "$WORK/nobody/$target.json" "d['isolation']['user_namespace']")"
  done
else
  skip "the GPU from a user namespace: not root, or nobody cannot run $BIN (a non-root run's probes already were in one)"
fi

# 10. Rust tests that need a GPU, where there is a toolchain
if command -v cargo >/dev/null 2>&1; then
  if t 3600 cargo test --release --locked -- --ignored >"$WORK/cargo.log" 2>&1; then
    pass "cargo test -- --ignored (GPU tests)"
  else
    fail "cargo test -- --ignored (GPU tests):"
    tail -n 30 "$WORK/cargo.log" | sed 's/^/    /'
  fi
else
  echo "SKIP cargo test -- --ignored: no cargo here (the GPU tests run where a Rust toolchain is)"
fi
finish
