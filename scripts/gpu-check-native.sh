#!/usr/bin/env bash
# The first of the two device checks (docs/gpu-validation.md): what the
# preflight binary shows on a GPU with no Python and no Rust toolchain —
# the driver and device (fingerprint --full), doctor once, doctor --health,
# NVRTC targets (a pass, a compile error, a device fault, an endless kernel,
# PTX for the driver's JIT, no visible device), shared memory past 48 KiB
# (static and dynamic together), nvcc-built code (carried from
# scripts/gpu-check/prepare.sh, or built with a local nvcc), inspect, bench
# of .cu and cubin targets, and the probe's namespaces. Within its budget
# (GPU_CHECK_BUDGET, 285 s): a section that would overrun it is skipped and
# said so; nothing ends the run early but a missing binary.
#
#   OUT=/where/the/evidence/goes scripts/gpu-check-native.sh [PATH/TO/preflight]
#
# Everything measured is under $OUT (lib.sh says what); the console gets
# one PASS / FAIL / SKIP line per expectation and the summary. Exit 1 when
# anything failed.
NAME=native
# shellcheck source=gpu-check/lib.sh
. "$(dirname "$0")/gpu-check/lib.sh"
need_binary
FIX=$ROOT/tests/fixtures/native
cc="" ccn="" major="" driver_cuda="" ngpus=0 ART=""

s_setup() {
  hold_driver
  if command -v nvidia-smi >/dev/null; then
    t 30 nvidia-smi -q >"$OUT/nvidia-smi.txt" 2>&1
    t 10 nvidia-smi -L | both
    say "compute mode: $(t 10 nvidia-smi --query-gpu=compute_mode --format=csv,noheader | sort -u | tr '\n' ' ')"
  else
    skip "nvidia-smi: not on PATH (the driver's own tool; the checks below need only libcuda)"
  fi
}

s_fingerprint() {
  PREFLIGHT_PYTHON=none t 60 "$BIN" fingerprint --full --json >"$OUT/fingerprint.json" 2>"$W/fingerprint.err"
  expect "fingerprint --full (no Python): exit status" 0 "$?"
  PREFLIGHT_PYTHON=none t 30 "$BIN" fingerprint --full >"$OUT/fingerprint.txt" 2>&1
  cat "$OUT/fingerprint.txt"
  expect "fingerprint --full: libcuda" ok "$(jget "$OUT/fingerprint.json" "d['gpus']['libcuda']['status']")"
  cc=$(jget "$OUT/fingerprint.json" "[g['compute_capability'] for g in d['gpus']['devices'] if g['cuda_index']==0][0]")
  driver_cuda=$(jget "$OUT/fingerprint.json" "d['gpus']['cuda_driver_api']")
  ngpus=$(jget "$OUT/fingerprint.json" "len([g for g in d['gpus']['devices'] if g['cuda_index'] is not None])")
  # Every GPU this container reaches, no more (a 1-of-N container included).
  if command -v nvidia-smi >/dev/null; then
    expect "fingerprint: the GPUs reachable here, as nvidia-smi lists them" \
      "$(t 10 nvidia-smi -L | grep -c '^GPU ')" "$ngpus"
  fi
  grep -q "compute $cc" "$OUT/fingerprint.txt" && pass "fingerprint --full shows compute $cc" ||
    fail "fingerprint --full shows compute $cc"
}

s_doctor() {
  t 150 "$BIN" doctor --json --python "$(pybin)" >"$OUT/doctor.json" 2>"$W/doctor.err"
  local code=$?
  if [ "$code" = 124 ] || [ "$code" = 137 ]; then
    skip "doctor: did not finish within 150 s; its expectations are skipped, the device comes from fingerprint --full"
    return
  fi
  expect "doctor exits 0" 0 "$code"
  jget "$OUT/doctor.json" "'\n'.join(c['name']+': '+c['verdict']+' '+c.get('message','') for c in d['checks'])"
  local dmajor dminor
  dmajor=$(jget "$OUT/doctor.json" "d['device']['major']")
  dminor=$(jget "$OUT/doctor.json" "d['device']['minor']")
  if [ "$cc" = "?" ] || [ -z "$cc" ]; then cc=$dmajor.$dminor; fi
  expect "doctor and fingerprint --full: the same device 0" "$cc" "$dmajor.$dminor"
  [ "$driver_cuda" = "?" ] && driver_cuda=$(jget "$OUT/doctor.json" "d['driver_cuda']")
  verdict() { jget "$OUT/doctor.json" "[c for c in d['checks'] if c['name']=='$1'][0]['verdict']"; }
  expect "doctor: CUDA driver and devices" pass "$(verdict driver)"
  expect "doctor: PTX JIT" pass "$(verdict ptx_jit)"
  expect "doctor: NVRTC compile + load + launch" pass "$(verdict nvrtc)"
  if [ -n "$(local_nvcc)" ]; then
    expect "doctor: nvcc compile + load + launch" pass "$(verdict nvcc)"
  else
    skip "doctor: nvcc (none here; doctor says $(verdict nvcc))"
  fi
  local n=${cc/./}
  want() { if [ "$1" = yes ]; then echo pass; else echo skipped; fi; }
  expect "doctor: bf16 kernel" "$(want "$([ "$n" -ge 80 ] && echo yes)")" "$(verdict bf16)"
  expect "doctor: fp8 kernel" "$(want "$([ "$n" -ge 89 ] && echo yes)")" "$(verdict fp8)"
  expect "doctor: wgmma kernel" "$(want "$([ "$n" -eq 90 ] && echo yes)")" "$(verdict wgmma)"
}

s_health() {
  t 60 "$BIN" doctor --health >"$OUT/health.txt" 2>"$W/health.err"
  local code=$?
  cat "$OUT/health.txt" >&3
  expect "doctor --health: exit status" 0 "$code"
  expect "doctor --health: one line, healthy" healthy "$(cut -d: -f1 "$OUT/health.txt" | head -n 1)"
}

launch_toml() { # launch_toml [SHARED_MEM_BYTES]: the axpy launch, verified
  printf '[[module.launch]]\nfunction = "preflight_axpy"\ngrid = 4\nblock = 256\n'
  if [ -n "${1:-}" ]; then printf 'shared_mem_bytes = %s\n' "$1"; fi
  printf 'args = [\n  { scalar = "f32", value = 2.0 },\n  { buffer = "f32", len = 1000, init = 1.5 },\n'
  printf '  { buffer = "f32", len = 1000, init = 1.0, expect = 4.0 },\n  { scalar = "u32", value = 1000 },\n]\n'
}
target() { # target NAME FILE [TARGET [SHARED]]: $W/NAME with FILE (copied in) as its one module
  mkdir -p "$W/$1"
  cp "$2" "$W/$1/"
  {
    printf '[[module]]\nfile = "%s"\n' "$(basename "$2")"
    if [ -n "${3:-}" ]; then printf 'target = "%s"\n' "$3"; fi
    printf '\n'
    launch_toml "${4:-}"
  } >"$W/$1/preflight.toml"
}
cu() { # cu NAME BODY [TARGET [SHARED]]: a .cu target for NVRTC with axpy's signature
  printf 'extern "C" __global__ void preflight_axpy(float a, const float *x, float *y, unsigned n) {\n%s\n}\n' "$2" >"$W/$1.cu"
  target "$1" "$W/$1.cu" "${3:-}" "${4:-}"
}
AXPY='  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;'

s_nvrtc() {
  target nvrtc "$FIX/axpy/axpy.cu"
  check nvrtc 0 pass verified
  # NVRTC's PTX for the device's own compute capability: the driver JITs it.
  target ptxjit "$FIX/axpy/axpy.cu" "compute_${cc/./}"
  check ptxjit 0 pass verified
  mkdir -p "$W/broken"
  cp "$FIX/broken.cu" "$W/broken/axpy.cu"
  target broken "$W/broken/axpy.cu"
  check broken 1 jit_compile_error
  cu fault "$AXPY
  if (i < n) ((volatile float *)0x10)[i] = a * x[i] + y[i];"
  check fault 1 crashed
  expect "check fault: phase" launch "$(jget "$W/fault.check.json" "d['results'][0]['outcome']['phase']")"
  check nvrtc 0 pass verified # the next probe still works
  cu hang "  volatile unsigned spin = 1;
  while (spin) { }
$AXPY
  if (i < n) y[i] = a * x[i] + y[i];"
  CHECK_ARGS="--timeout 10" CHECK_T=40 check hang 1 timeout
  CUDA_VISIBLE_DEVICES= check nvrtc 1 no_device
}

s_shared() {
  # 16 KiB of static shared memory and 40 KiB dynamic: under 48 KiB each,
  # over it together; the launch must raise the kernel's limit first.
  cu static_dynamic "  __shared__ float fixed[4096];
  extern __shared__ float scratch[];
$AXPY
  fixed[threadIdx.x] = a;
  scratch[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = fixed[threadIdx.x] * scratch[threadIdx.x] + y[i];" "" 40960
  check static_dynamic 0 pass verified
  cu too_much "  extern __shared__ float scratch[];
$AXPY
  if (i < n) y[i] = a * x[i] + y[i];" "" 307200
  check too_much 1 probe_error
  expect "check too_much: both numbers said" True \
    "$(jget "$W/too_much.check.json" "'307200 bytes' in d['results'][0]['outcome']['message'] and 'opt-in maximum' in d['results'][0]['outcome']['message']")"
  if [ "$cc" = 9.0 ]; then
    cu wgmma "  extern __shared__ float scratch[];
  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");
$AXPY
  scratch[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = a * scratch[threadIdx.x] + y[i];" sm_90a 102400
    check wgmma 0 pass verified
  else
    skip "sm_90a wgmma module with 100 KiB of dynamic shared memory: this GPU is $cc, not 9.0"
  fi
}

s_nvcc() {
  artifacts
  [ -n "$ART" ] || return 0
  local n=${cc/./} other=80 ptx_want
  [ "${cc%%.*}" = 8 ] && other=90
  ptx_want=$(ptx_want)
  if [ -f "$ART/axpy_sm$n.cubin" ]; then
    target cubin "$ART/axpy_sm$n.cubin"
    check cubin 0 pass verified
    expect "check cubin: declared (inspect's rule)" True "$(jget "$W/cubin.check.json" "all(r['declared']['accepted'] for r in d['results'])")"
  else
    skip "a cubin for sm_$n: not among the artifacts (sm_80, sm_90, sm_100)"
  fi
  target wrong "$ART/axpy_sm$other.fatbin"
  check wrong 1 unsupported_arch
  expect "check wrong: phase" load "$(jget "$W/wrong.check.json" "d['results'][0]['outcome']['phase']")"
  expect "check wrong: declared (inspect's rule)" False "$(jget "$W/wrong.check.json" "d['results'][0]['declared']['accepted']")"
  target ptx "$ART/axpy_compute80.ptx"
  target ptxfat "$ART/axpy_compute80.fatbin"
  if [ "$ptx_want" = pass ]; then
    check ptx 0 pass verified
    check ptxfat 0 pass verified
  else
    check ptx 1 ptx_too_new
    check ptxfat 1 ptx_too_new
  fi
  mkdir -p "$W/ptxnew"
  sed 's/^\.version .*/.version 99.0/' "$ART/axpy_compute80.ptx" >"$W/ptxnew/axpy.ptx"
  target ptxnew "$W/ptxnew/axpy.ptx"
  check ptxnew 1 ptx_too_new
  inspect() { # inspect FILE WANT-EXIT WANT-IMAGES
    t 30 "$BIN" inspect --json --gpu "$cc" "$1" >"$W/inspect.json" 2>"$W/inspect.err"
    local code=$?
    expect "inspect --gpu $cc $(basename "$1"): exit status" "$2" "$code"
    expect "inspect $(basename "$1"): images" "$3" "$(jget "$W/inspect.json" "' '.join(i['kind']+' '+i['target'] for i in d['files'][0]['images'])")"
  }
  [ -f "$ART/axpy_sm$n.cubin" ] && inspect "$ART/axpy_sm$n.cubin" 0 "sass sm_$n"
  inspect "$ART/axpy_sm$other.fatbin" 1 "sass sm_$other"
  inspect "$ART/axpy_compute80.fatbin" 0 "ptx compute_80"
}

bench() { # bench NAME FAST SLOW: `bench --json FAST SLOW` in $W, the faster first
  (cd "$W" && t 100 "$BIN" bench --json --timeout 5 "$2" "$3") >"$W/$1.bench.json" 2>"$W/$1.bench.err"
  expect "bench $1: exit status" 0 "$?"
  expect "bench $1: the faster first" "$2" "$(jget "$W/$1.bench.json" "d['variants'][0]['variant']")"
  expect "bench $1: the slower one's verdict" slower "$(jget "$W/$1.bench.json" "d['variants'][1]['vs_fastest']['verdict']")"
  expect "bench $1: timer" device_events "$(jget "$W/$1.bench.json" "d['variants'][0]['status']['timer']")"
  expect "bench $1: L2 flushed" True "$(jget "$W/$1.bench.json" "d['flush_l2']")"
  jget "$W/$1.bench.json" "'\n'.join(v['variant']+': '+str(v['status'].get('summary',{}).get('median'))+' ms' for v in d['variants'])" | sed 's/^/    /' >&3
}

s_bench() {
  # Two .cu targets (NVRTC in the bench child too): axpy, and the same
  # result through a loop of 16 n dependent FMAs.
  cu fastcu "$AXPY
  if (i < n) y[i] = a * x[i] + y[i];"
  cu slowcu "$AXPY
  if (i >= n) return;
  float acc = 0.0f;
  for (unsigned k = 0; k < 16 * n; ++k) acc = fmaf(acc, 0.5f, 1.0f);
  y[i] = a * x[i] + y[i] * (acc - 1.0f);"
  bench cu fastcu slowcu
  local n=${cc/./}
  if [ -n "$ART" ] && [ -f "$ART/loop_o3_sm$n.cubin" ]; then
    target o3 "$ART/loop_o3_sm$n.cubin"
    target debug "$ART/loop_g_sm$n.cubin"
    bench cubin o3 debug
  else
    skip "bench of -O3 and -G cubins: no nvcc artifacts for sm_$n"
  fi
}

s_namespaces() {
  local kind
  kind=$(jget "$W/nvrtc.check.json" "d['isolation']['kind']")
  if [ "$kind" != namespaces ]; then
    skip "probes in namespaces: this environment refuses them ($(jget "$W/nvrtc.check.json" "d['isolation'].get('reason')")); the environment's, not a failure"
    return
  fi
  pass "check nvrtc: probes ran in namespaces, the GPU reached through them"
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    t 20 setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'test -x "$0"' "$BIN"; then
    chmod -R a+rX "$W"
    mkdir -p -m 1777 "$W/nobody"
    HOME=$W/nobody PREFLIGHT_CACHE=$W/nobody/cache t 60 setpriv --reuid 65534 --regid 65534 --clear-groups \
      "$BIN" check --json "$W/nvrtc" >"$W/nobody/nvrtc.json" 2>"$W/nobody/nvrtc.err"
    expect "check nvrtc as nobody (user namespace): exit status" 0 "$?"
    expect "check nvrtc as nobody: in a user namespace" True "$(jget "$W/nobody/nvrtc.json" "d['isolation'].get('user_namespace')")"
  else
    skip "the GPU from a user namespace as nobody: not root, no setpriv, or nobody cannot run $BIN"
  fi
}

section setup 10 s_setup
section fingerprint 30 s_fingerprint
# The probes use the interpreter where there is one: NVRTC may come from
# its wheels alone (a pip-only torch machine has no toolkit).
if command -v "$PY" >/dev/null; then PYBIN=$(pybin); fi
[ -z "$cc" ] || [ "$cc" = "?" ] && say "note: fingerprint --full gave no device 0; doctor's is used"
section doctor 60 s_doctor
if [ -z "$cc" ] || [ "$cc" = "?" ]; then
  fail "a CUDA device 0 (neither fingerprint --full nor doctor found one): device sections skipped"
  finish
fi
section health 20 s_health
section nvrtc 50 s_nvrtc
section shared 15 s_shared
section nvcc 40 s_nvcc
section bench 60 s_bench
section namespaces 20 s_namespaces
finish
