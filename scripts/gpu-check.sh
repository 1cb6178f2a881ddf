#!/usr/bin/env bash
# GPU checks for preflight: what CI (no GPU) cannot test. Run on a machine
# with an NVIDIA GPU, its driver and a local CUDA toolkit (nvcc), from a
# checkout of this repository, with a prebuilt binary:
#
#   scripts/gpu-check.sh [PATH/TO/preflight]     # or PREFLIGHT=…; default target/release/preflight
#
# Needs nothing from the network and no Rust toolchain. It runs `doctor`,
# the full fingerprint without Python, builds with the local nvcc a kernel for this GPU's architecture, one with
# SASS only for an architecture this GPU lacks (no PTX), one with PTX only,
# and one with PTX newer than the driver; runs `check` (native preflight.toml
# targets) and `inspect` on them; prints one PASS/FAIL line per expectation
# and `N passed, N failed`; exits 1 when anything failed. When cargo is on
# PATH it also runs the Rust tests marked `#[ignore = "needs a GPU…"]`
# (they need the test environment of scripts/setup-env.sh).
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
# jget FILE EXPR: evaluate a Python expression over the JSON document `d`.
jget() {
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null || echo "?"
}

[ -x "$BIN" ] || { fail "preflight binary at $BIN (build it with cargo build --release, or pass its path)"; finish; }
command -v "$PY" >/dev/null || { fail "python3 to read JSON (set PYTHON)"; finish; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/preflight-gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "preflight: $BIN ($("$BIN" --version))"
echo "work dir:  $WORK"

# 1. doctor
timeout 240 "$BIN" doctor --json >"$WORK/doctor.json" 2>"$WORK/doctor.err"
code=$?
expect "doctor exits 0" 0 "$code"
"$BIN" doctor 2>&1 | sed 's/^/    /'
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
importable() { "$PY" -c "import $1" >/dev/null 2>&1 && echo pass || echo missing; }
expect "doctor: torch" "$(importable torch)" "$(check_verdict torch)"
expect "doctor: Triton" "$(importable triton)" "$(check_verdict triton)"
expect "doctor: CuTe-DSL" "$(importable cutlass)" "$(check_verdict cute_dsl)"

# 1b. full fingerprint without Python: the cuda child measures CUDA's device 0
PREFLIGHT_PYTHON=none PREFLIGHT_CACHE=$WORK/fingerprint-cache timeout 240 \
  "$BIN" fingerprint --full --json >"$WORK/fingerprint.json" 2>"$WORK/fingerprint.err"
expect "fingerprint --full without Python: exit status" 0 "$?"
expect "fingerprint --full: libcuda" ok "$(jget "$WORK/fingerprint.json" "d['gpus']['libcuda']['status']")"
expect "fingerprint --full: CUDA driver API" "$driver_cuda" "$(jget "$WORK/fingerprint.json" "d['gpus']['cuda_driver_api']")"
expect "fingerprint --full: CUDA device 0 compute capability" "$cc" \
  "$(jget "$WORK/fingerprint.json" "[g['compute_capability'] for g in d['gpus']['devices'] if g['cuda_index']==0][0]")"

# 2. kernels built with the local nvcc
NVCC=""
for c in ${CUDA_HOME:+$CUDA_HOME/bin/nvcc} ${CUDA_PATH:+$CUDA_PATH/bin/nvcc} "$(command -v nvcc)" /usr/local/cuda/bin/nvcc; do
  if [ -n "$c" ] && [ -x "$c" ]; then NVCC=$c; break; fi
done
[ -n "$NVCC" ] || { fail "a local nvcc (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"; finish; }
nvcc_cuda=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
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
  if "$NVCC" "$@" -o "$dir/$file" "$SRC/axpy/axpy.cu" 2>"$dir/nvcc.err"; then
    manifest "$dir" "$file"
    pass "nvcc $* builds $name/$file"
  else
    fail "nvcc $* builds $name/$file: $(tail -n 2 "$dir/nvcc.err")"
  fi
}
mkdir -p "$WORK/native"
cp "$SRC/axpy/axpy.cu" "$SRC/axpy/preflight.toml" "$WORK/native/"
"$NVCC" -cubin -arch="$sm" -o "$WORK/native/axpy.cubin" "$SRC/axpy/axpy.cu" \
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
newer=$("$PY" -c "import sys; v=lambda s: tuple(map(int, s.split('.'))); print(v(sys.argv[1]) > v(sys.argv[2]))" "$nvcc_cuda" "$driver_cuda" 2>/dev/null)
ptx_want=pass
[ "$newer" = True ] && ptx_want=ptx_too_new
check() { # check NAME WANT-EXIT WANT-KIND [WANT-DEPTH]
  local json=$WORK/$1.check.json
  timeout 120 "$BIN" check --json "$WORK/$1" >"$json" 2>"$WORK/$1.check.err"
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
"$BIN" check "$WORK/native" "$WORK/wrong" 2>&1 | sed 's/^/    /'

# 4. inspect
inspect() { # inspect FILE WANT-EXIT WANT-KIND WANT-TARGET
  local json=$WORK/inspect.json
  "$BIN" inspect --json --gpu "$cc" "$WORK/$1" >"$json" 2>"$WORK/inspect.err"
  expect "inspect --gpu $cc $1: exit status" "$2" "$?"
  expect "inspect $1: images" "$3 $4" "$(jget "$json" "' '.join(i['kind']+' '+i['target'] for i in d['files'][0]['images'])")"
}
inspect native/axpy.cubin 0 sass "$sm"
inspect wrong/axpy.fatbin 1 sass "sm_$other"
inspect ptxfat/axpy.fatbin 0 ptx "compute_$major$minor"

# 4b. bench on the GPU: two variants of one hub kernel (torch), one a single
# matmul, the other the same product in 16 row blocks (16 launches); bench
# times them with device events and an L2 flush and calls the faster. (The
# cuda executor has no bench mode yet: native -O3 against -G builds wait
# for it.)
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
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
  PREFLIGHT_CACHE=$WORK/bench-cache timeout 300 "$BIN" bench --json --python "$(command -v "$PY")" \
    "$BR" >"$WORK/bench.json" 2>"$WORK/bench.err"
  expect "bench (GPU, torch): exit status" 0 "$?"
  expect "bench: the faster variant first" torch-universal "$(jget "$WORK/bench.json" "d['variants'][0]['variant']")"
  expect "bench: the slower one's verdict" slower "$(jget "$WORK/bench.json" "d['variants'][1]['vs_fastest']['verdict']")"
  expect "bench: timer" device_events "$(jget "$WORK/bench.json" "d['variants'][0]['status']['timer']")"
  expect "bench: L2 flushed" True "$(jget "$WORK/bench.json" "d['flush_l2']")"
  expect "bench: the reference timed" timed "$(jget "$WORK/bench.json" "d['reference']['status']['status']")"
  "$BIN" bench --python "$(command -v "$PY")" --format markdown "$BR" 2>/dev/null | sed 's/^/    /'
else
  echo "SKIP bench on the GPU: $PY has no torch with CUDA"
fi

# 5. Rust tests that need a GPU, where there is a toolchain
if command -v cargo >/dev/null 2>&1; then
  if cargo test --release --locked -- --ignored >"$WORK/cargo.log" 2>&1; then
    pass "cargo test -- --ignored (GPU tests)"
  else
    fail "cargo test -- --ignored (GPU tests):"
    tail -n 30 "$WORK/cargo.log" | sed 's/^/    /'
  fi
else
  echo "SKIP cargo test -- --ignored: no cargo here (the GPU tests run where a Rust toolchain is)"
fi
finish
