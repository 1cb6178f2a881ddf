#!/usr/bin/env bash
# The second of the two device checks (docs/gpu-validation.md): what needs
# Python on the GPU — torch (and Triton where installed) in PYTHON (python3
# by default): the device depth of compiled hub variants (one container, PTX
# only, two containers of which one is for other GPUs), an allocation beyond
# the device, probes forked and fresh (torch and Triton), import guards, a
# smoke timed on cuda:1 where there are two GPUs, bench of two hub variants,
# a JIT kernel where nvcc is, and preflight's smokes of the hub kernels the
# hub cache holds, with what is left of the budget. Without torch for CUDA
# every section says so and is skipped: the interpreter is the machine's.
#
#   OUT=/where/the/evidence/goes PYTHON=python3 scripts/gpu-check-python.sh [PATH/TO/preflight]
#
# Everything measured is under $OUT (lib.sh says what). Exit 1 when
# anything failed.
NAME=python
# shellcheck source=gpu-check/lib.sh
. "$(dirname "$0")/gpu-check/lib.sh"
need_binary
PYBIN=$(pybin)
ART="" cc="" other=80 torch_cuda=False devices=0 triton=None

s_setup() {
  hold_driver
  # One interpreter start answers every question about it.
  t 60 "$PY" - >"$OUT/python-env.json" 2>"$W/python-env.err" <<'PY'
import importlib, json, sys
d = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import torch
    d.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
    d["devices"] = torch.cuda.device_count() if d["cuda_available"] else 0
    if d["devices"]:
        d["capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
except Exception as e:
    d["torch_error"] = "%s: %s" % (type(e).__name__, e)
for name in ("triton", "kernels"):
    try:
        d[name] = importlib.import_module(name).__version__
    except Exception as e:
        d[name] = None
print(json.dumps(d))
PY
  cat "$OUT/python-env.json" >&3
  torch_cuda=$(jget "$OUT/python-env.json" "d.get('cuda_available', False)")
  devices=$(jget "$OUT/python-env.json" "d.get('devices', 0)")
  cc=$(jget "$OUT/python-env.json" "d.get('capability', '')")
  triton=$(jget "$OUT/python-env.json" "d.get('triton')")
  [ "${cc%%.*}" = 8 ] && other=90
  t 90 "$BIN" fingerprint --full --json --python "$PYBIN" >"$OUT/fingerprint.json" 2>"$W/fingerprint.err"
  expect "fingerprint --full with $PYBIN: exit status" 0 "$?"
  if [ "$torch_cuda" = True ]; then
    expect "fingerprint --full: torch's device 0 is CUDA's" "$cc" \
      "$(jget "$OUT/fingerprint.json" "[g['compute_capability'] for g in d['gpus']['devices'] if g['cuda_index']==0][0]")"
  fi
}

torch_needed() {
  [ "$torch_cuda" = True ] && return 0
  skip "$1: no torch with CUDA in $PYBIN ($(jget "$OUT/python-env.json" "d.get('torch_error') or 'torch ' + str(d.get('torch')) + ', cuda available: ' + str(d.get('cuda_available'))"))"
  return 1
}

# kernel REPO VARIANT INIT [BACKEND]: $W/REPO/build/VARIANT with __init__.py
# INIT; BACKEND is the metadata's (cuda; cpu for a universal variant, as
# the hub's metadata has it).
kernel() {
  local dir=$W/$1/build/$2
  mkdir -p "$dir"
  printf '%s' "$3" >"$dir/__init__.py"
  printf '{"name": "%s", "id": "_%s_%s", "version": 1, "license": "MIT", "python-depends": [], "backend": {"type": "%s"}}\n' \
    "$1" "$1" "${2//-/_}" "${4:-cuda}" >"$dir/metadata.json"
}

s_depth() {
  torch_needed "device depth of compiled hub variants" || return 0
  artifacts
  [ -n "$ART" ] || return 0
  kernel sassother torch-cuda 'X = 1
'
  cp "$ART/ops_sm$other.so" "$W/sassother/build/torch-cuda/_ops.so"
  check sassother 1 unsupported_arch
  expect "check sassother: phase (device depth, no smoke)" load "$(jget "$W/sassother.check.json" "d['results'][0]['outcome']['phase']")"
  expect "check sassother: the driver's code" 209 "$(jget "$W/sassother.check.json" "d['results'][0]['outcome']['embedded'][0]['error']['code']")"
  kernel ptxonly torch-cuda 'X = 1
'
  cp "$ART/ops_compute80.so" "$W/ptxonly/build/torch-cuda/_ops.so"
  if [ "$(ptx_want)" = pass ]; then
    check ptxonly 0 pass device
    expect "check ptxonly: the image taken (inferred)" "compute_80 PTX, JIT" \
      "$(jget "$W/ptxonly.check.json" "d['results'][0]['outcome']['embedded'][0].get('taken')")"
  else
    check ptxonly 1 ptx_too_new
  fi
  # Two containers, one of them (sm_100a) for other GPUs on a 9.0 GPU, or
  # the sm_90/sm_80 one on a 10.0 GPU: the file passes on what loads.
  kernel multi torch-cuda 'X = 1
'
  cp "$ART/ops_sm$( [ "$other" = 90 ] && echo 80 || echo 90)_sm100a.so" "$W/multi/build/torch-cuda/_ops.so"
  check multi 0 pass device
  expect "check multi: one container loaded, one for other GPUs" "1 1" \
    "$(jget "$W/multi.check.json" "'%d %d' % (d['results'][0]['outcome']['embedded'][0]['loaded'], d['results'][0]['outcome']['embedded'][0].get('other_gpus', 0))")"
}

s_oom() {
  torch_needed "out_of_memory" || return 0
  kernel oom torch-universal 'X = 1
' cpu
  printf 'def smoke(kernel, device):\n    import torch\n    torch.empty(1 << 50, dtype=torch.uint8, device=device)\n' >"$W/oom.py"
  (
    cd "$W" || exit
    # Kept twice in one cache: a transient outcome is probed again.
    for i in 1 2; do
      t 60 "$BIN" check --json --python "$PYBIN" --smoke "$W/oom.py" "$W/oom" >"$W/oom$i.check.json" 2>"$W/oom$i.err"
    done
  )
  expect "check oom: outcome" out_of_memory "$(jget "$W/oom2.check.json" "d['results'][0]['outcome']['kind']")"
  expect "check oom: not cached (a transient outcome)" False "$(jget "$W/oom2.check.json" "d['results'][0]['cached']")"
}

# forked NAME SMOKE REPOS…: the repos probed forked and fresh alike.
forked() {
  local name=$1 smoke=$2 fork
  shift 2
  for fork in 1 0; do
    PREFLIGHT_FORK=$fork t 90 "$BIN" check --json --no-cache --jobs 2 --smoke "$smoke" --python "$PYBIN" "$@" \
      >"$W/$name-fork$fork.json" 2>"$W/$name-fork$fork.err"
    expect "$name (PREFLIGHT_FORK=$fork): exit status" 0 "$?"
  done
  expect "$name: every child forked" forked \
    "$(jget "$W/$name-fork1.json" "' '.join(sorted(set(str(r['outcome'].get('made')) for r in d['results'])))")"
  expect "$name: outcomes as fresh ones" \
    "$(jget "$W/$name-fork0.json" "' '.join(r['outcome']['kind']+'/'+str(r['outcome']['depth']) for r in d['results'])")" \
    "$(jget "$W/$name-fork1.json" "' '.join(r['outcome']['kind']+'/'+str(r['outcome']['depth']) for r in d['results'])")"
  if grep -q "not forked" "$W/$name-fork1.err"; then
    fail "$name: the fork server was given up: $(grep 'not forked' "$W/$name-fork1.err")"
  else
    pass "$name: the fork server was kept"
  fi
}

s_forked() {
  torch_needed "forked probes" || return 0
  local repos=() i
  for i in 0 1 2 3; do
    kernel "forked$i" torch-cuda 'import torch
ONES = torch.ones(1024, device="cuda")


def add(a, b):
    return a + b
'
    repos+=("$W/forked$i")
  done
  printf 'def smoke(kernel, device):\n    import torch\n    return kernel.add(torch.arange(8.0, device=device), kernel.ONES[:8]), torch.arange(1.0, 9.0, device=device)\n' >"$W/forked-smoke.py"
  forked "forked torch" "$W/forked-smoke.py" "${repos[@]}"
}

s_triton() {
  torch_needed "Triton probes" || return 0
  if [ "$triton" = None ]; then
    skip "Triton probes: no triton in $PYBIN"
    return 0
  fi
  kernel tritonadd torch-cuda 'import torch
import triton
import triton.language as tl


@triton.jit
def _add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    _add[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out
'
  printf 'def smoke(kernel, device):\n    import torch\n    x = torch.arange(1000.0, device=device)\n    return kernel.add(x, x), x * 2\n' >"$W/triton-smoke.py"
  forked "Triton" "$W/triton-smoke.py" "$W/tritonadd"
  expect "Triton: verified" verified "$(jget "$W/Triton-fork0.json" "d['results'][0]['outcome']['depth']")"
}

s_guards() {
  torch_needed "import guards" || return 0
  local major=${cc%%.*}
  kernel guardarch torch-cuda "import torch

major, minor = torch.cuda.get_device_capability()
if major < $((major + 1)):
    raise ImportError(\"guard-arch requires SM$((major + 1))0 or newer; current device is SM%d%d.\" % (major, minor))
"
  kernel guardcuda torch-cuda 'import torch

if not torch.cuda.is_available():
    raise ImportError("guard-cuda kernel requires CUDA, but CUDA is not available.")
'
  check guardarch 1 unsupported_arch
  CUDA_VISIBLE_DEVICES= check guardcuda 1 no_device
  expect "check guardcuda: the kernel's words kept" True \
    "$(jget "$W/guardcuda.check.json" "'requires CUDA, but CUDA is not available' in d['results'][0]['outcome']['message']")"
}

s_cuda1() {
  torch_needed "a smoke timed on cuda:1" || return 0
  if [ "$devices" -lt 2 ]; then
    skip "a smoke timed on cuda:1: $devices GPU(s) here"
    return 0
  fi
  # The probe's own Timer, on cuda:1 while device 0 is current, against
  # events recorded on cuda:1's stream by hand.
  PYTHONPATH=$ROOT/probes/python t 60 "$PY" - >"$W/cuda1.txt" 2>&1 <<'PY'
import importlib.util, os, sys
import torch
spec = importlib.util.spec_from_file_location("preflight_compare", os.environ["PYTHONPATH"] + "/compare.py")
compare = importlib.util.module_from_spec(spec); spec.loader.exec_module(compare)
sys.modules["preflight_compare"] = compare
import smoke
x = torch.randn(4096, 4096, device="cuda:1")
work = lambda: [x @ x for _ in range(8)]
torch.cuda.set_device(0)
work(); torch.cuda.synchronize(1)
with smoke.Timer("cuda:1") as timer:
    work()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
stream = torch.cuda.current_stream(1)
a.record(stream); work(); b.record(stream); b.synchronize()
print("%.3f %.3f" % (timer.ms(), a.elapsed_time(b)))
PY
  local got
  got=$(tail -n 1 "$W/cuda1.txt")
  expect "Timer on cuda:1 within 25% of cuda:1's own events ($got ms)" True \
    "$(echo "$got" | awk '{print ($1 > 0.75 * $2 && $1 < 1.25 * $2) ? "True" : "False"}')"
}

s_bench() {
  torch_needed "bench of hub variants" || return 0
  local br=$W/benchkernel
  kernel benchkernel torch-universal 'def mm(out, x, y):
    out.copy_(x @ y)
' cpu
  kernel benchkernel torch-cuda 'def mm(out, x, y):
    step = x.shape[0] // 16
    for rows in range(0, x.shape[0], step):
        out[rows:rows + step] = x[rows:rows + step] @ y
'
  printf 'import torch\n\n\ndef smoke(kernel, device):\n    x = torch.randn(2048, 2048, device=device)\n    out = torch.empty_like(x)\n    kernel.mm(out, x, x)\n    return {\"actual\": out, \"expected\": x @ x, \"rtol\": 1e-2, \"atol\": 1e-2}\n' >"$W/bench-smoke.py"
  t 120 "$BIN" bench --json --timeout 5 --python "$PYBIN" --smoke "$W/bench-smoke.py" "$br" >"$W/bench.json" 2>"$W/bench.err"
  expect "bench (torch): exit status" 0 "$?"
  expect "bench: the faster variant first" torch-universal "$(jget "$W/bench.json" "d['variants'][0]['variant']")"
  expect "bench: the slower one's verdict" slower "$(jget "$W/bench.json" "d['variants'][1]['vs_fastest']['verdict']")"
  expect "bench: timer" device_events "$(jget "$W/bench.json" "d['variants'][0]['status']['timer']")"
  expect "bench: L2 flushed" True "$(jget "$W/bench.json" "d['flush_l2']")"
}

s_jitarch() {
  torch_needed "a JIT kernel built for sm_<cc>a" || return 0
  local nvcc ccn=${cc/./} want
  nvcc=$(local_nvcc)
  if [ -z "$nvcc" ]; then
    skip "a JIT kernel built for sm_${ccn}a: no nvcc here (a kernel's JIT needs one)"
    return 0
  fi
  kernel jitarch torch-universal 'import os
import subprocess
import tempfile


def build(arch):
    out = tempfile.mkdtemp()
    source = os.path.join(out, "k.cu")
    with open(source, "w") as f:
        f.write("extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    subprocess.run([os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"), "--gpu-architecture=" + arch,
                    "-cubin", "-o", os.path.join(out, "k.cubin"), source], check=True, capture_output=True)
    return True
' cpu
  printf 'def smoke(kernel, device):\n    return (kernel.build("sm_%sa"), True)\n' "$ccn" >"$W/jitarch.py"
  case $ccn in 90 | 100 | 101 | 103 | 110 | 120 | 121) want="0 pass" ;; *) want="1 unsupported_arch" ;; esac
  # shellcheck disable=SC2086
  CUDA_HOME=$(dirname "$(dirname "$nvcc")") CHECK_ARGS="--smoke $W/jitarch.py" check jitarch $want
}

s_hub() {
  torch_needed "smokes of hub kernels" || return 0
  local hub=${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub} k dir found=0
  for k in deep-gemm finegrained-fp8 sonic-moe flash-attn2 flash-attn3 vllm-flash-attn3 nvfp4-gemm gpt-oss-triton-kernels; do
    dir=$hub/kernels--kernels-community--$k
    [ -d "$dir" ] || continue
    found=1
    if [ "$(left)" -lt 70 ]; then
      skip "smoke of $k: $(left)s left in the budget"
      continue
    fi
    t 60 "$BIN" check --json --no-cache --python "$PYBIN" "$dir" >"$W/hub-$k.json" 2>"$W/hub-$k.err"
    case $(jget "$W/hub-$k.json" "'verified' if any(r['outcome']['kind']=='pass' and r['outcome']['depth']=='verified' for r in d['results']) else ('named' if all(r['outcome']['kind'] not in ('exited','probe_error','crashed','pass') for r in d['results']) else 'unnamed')") in
      verified) pass "smoke of $k: verified on $cc" ;;
      named) pass "smoke of $k: no variant works on $cc, each failure named" ;;
      *) fail "smoke of $k on $cc: $(jget "$W/hub-$k.json" "'; '.join(r['variant']+': '+r['outcome']['kind'] for r in d['results'])")" ;;
    esac
  done
  [ "$found" = 1 ] || skip "smokes of hub kernels: none in the hub cache $hub (this check downloads nothing)"
}

section setup 40 s_setup
section depth 40 s_depth
section oom 25 s_oom
section forked 60 s_forked
section triton 45 s_triton
section guards 20 s_guards
section cuda1 20 s_cuda1
section bench 45 s_bench
section jitarch 15 s_jitarch
section hub 70 s_hub
finish
