# shellcheck shell=bash
# What both device checks share (scripts/gpu-check-native.sh and
# scripts/gpu-check-python.sh; docs/gpu-validation.md): where the evidence
# goes, one line per expectation, sections run against a time budget, and
# every command under a deadline that never passes the budget's end.
#
# Evidence, all under $OUT (the device tool's folder that comes back; a
# folder of its own elsewhere): NAME.log (everything every command printed),
# NAME.results.jsonl (one JSON object per expectation), NAME.sections.tsv
# (each section: ran or skipped, and its seconds), NAME.summary.json, and
# NAME/ (the work folder: every JSON result, kept). The console gets the
# PASS / FAIL / SKIP lines and the summary only: a device tool that returns
# the last 12,000 characters loses nothing that is not also in $OUT.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${1:-${PREFLIGHT:-$ROOT/target/release/preflight}}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
PY=${PYTHON:-python3}
OUT=${OUT:-$ROOT/gpu-check-out}
BUDGET=${GPU_CHECK_BUDGET:-285}
# Prebuilt nvcc artifacts (scripts/gpu-check/prepare.sh), carried with the
# binary to a machine without nvcc.
PREBUILT=${GPU_CHECK_PREBUILT:-$ROOT/target/gpu-check}
STARTED=$(date +%s)

mkdir -p "$OUT/$NAME"
W=$OUT/$NAME
LOG=$OUT/$NAME.log
RESULTS=$OUT/$NAME.results.jsonl
SECTIONS=$OUT/$NAME.sections.tsv
: >"$RESULTS"
printf 'section\tstatus\tseconds\tnote\n' >"$SECTIONS"
# fd 3 is the console; everything else goes to the log.
exec 3>&1 >>"$LOG" 2>&1
passed=0 failed=0 skipped=0
SECTION=setup

say() { echo "$*"; echo "$*" >&3; }
# Lines of stdin to the log and the console (never `tee /dev/fd/3`: that
# opens the console's file again, from its start).
both() { local line; while IFS= read -r line; do say "$line"; done; }
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t' '  ')"; }
record() { # record STATUS CHECK [WANT GOT]
  printf '{"script":"%s","section":"%s","status":"%s","check":%s,"want":%s,"got":%s,"at_s":%s}\n' \
    "$NAME" "$SECTION" "$1" "$(json_str "$2")" "$(json_str "${3:-}")" "$(json_str "${4:-}")" \
    "$(($(date +%s) - STARTED))" >>"$RESULTS"
}
pass() { say "PASS $*"; passed=$((passed + 1)); record pass "$*"; }
fail() { say "FAIL $*"; failed=$((failed + 1)); record fail "$*"; }
skip() { say "SKIP $*"; skipped=$((skipped + 1)); record skip "$*"; }
expect() { # expect DESCRIPTION WANT GOT
  if [ "$2" = "$3" ]; then
    say "PASS $1 ($3)"; passed=$((passed + 1)); record pass "$1" "$2" "$3"
  else
    say "FAIL $1: expected $2, got $3"; failed=$((failed + 1)); record fail "$1" "$2" "$3"
  fi
}
left() { echo $((BUDGET - ($(date +%s) - STARTED))); }
# t SECONDS COMMAND…: under a deadline, never past the budget's end.
t() {
  local s=$1 l
  shift
  l=$(($(left) - 3))
  [ "$l" -lt "$s" ] && s=$l
  [ "$s" -lt 1 ] && { echo "t: no time left for $*"; return 124; }
  timeout --kill-after=3 "$s" "$@"
}
# jget FILE EXPR: a Python expression over the JSON document `d`, else "?".
jget() {
  timeout 20 "$JPY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null || echo "?"
}
JPY=$(command -v python3 || echo "$PY")

# section ID NEED FUNCTION: run FUNCTION as section ID when NEED seconds
# (what it takes on a GPU, cold) are left in the budget; say why not else.
section() {
  local id=$1 need=$2 fn=$3 begin rc
  SECTION=$id
  if [ "$(left)" -lt "$need" ]; then
    skip "section $id: ~${need}s needed, $(left)s left in the ${BUDGET}s budget"
    printf '%s\tskipped\t0\tout of time\n' "$id" >>"$SECTIONS"
    return
  fi
  echo "=== section $id ($(date -u +%T), $(left)s left)"
  begin=$(date +%s)
  "$fn"
  rc=$?
  printf '%s\tran\t%s\t%s\n' "$id" "$(($(date +%s) - begin))" "rc=$rc" >>"$SECTIONS"
}

finish() {
  SECTION=summary
  local took=$(($(date +%s) - STARTED))
  printf '{"script":"%s","passed":%s,"failed":%s,"skipped":%s,"seconds":%s,"budget":%s,"binary":%s}\n' \
    "$NAME" "$passed" "$failed" "$skipped" "$took" "$BUDGET" "$(json_str "$BIN")" >"$OUT/$NAME.summary.json"
  say "sections (seconds): $(tail -n +2 "$SECTIONS" | awk -F'\t' '{printf "%s%s=%s", sep, $1, ($2=="ran" ? $3 : "skipped"); sep=" "}')"
  say "$NAME: $passed passed, $failed failed, $skipped skipped in ${took}s (budget ${BUDGET}s); evidence in $OUT"
  [ "$failed" -eq 0 ]
  exit $?
}

# With persistence mode off the driver tears the GPU's state down whenever
# its last client closes it, and every probe's cuInit pays the set-up again
# (a second or more). An NVML client left polling holds the GPU open for
# the run instead: no setting of the device changes.
hold_driver() {
  command -v nvidia-smi >/dev/null || return
  local mode
  mode=$(t 20 nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | sort -u | tr '\n' ' ')
  echo "persistence mode: $mode"
  case $mode in
    *Disabled*)
      nvidia-smi --query-gpu=timestamp --format=csv,noheader -lms 5000 >/dev/null 2>&1 &
      HOLDER=$!
      trap 'kill "$HOLDER" 2>/dev/null' EXIT
      say "note: persistence mode is off: an NVML client (pid $HOLDER) holds the GPU open for this run; no setting changed"
      ;;
  esac
}

# The interpreter's path, for --python.
pybin() { t 20 "$PY" -c 'import sys; print(sys.executable)' 2>/dev/null || echo "$PY"; }

# The checks are only as good as the binary: stop at once without one.
need_binary() {
  if [ ! -x "$BIN" ]; then
    fail "preflight binary at $BIN (carry target/release/preflight, or pass its path)"
    finish
  fi
  say "preflight: $BIN ($(t 10 "$BIN" --version)); budget ${BUDGET}s; evidence in $OUT"
  export PREFLIGHT_CACHE=$W/cache
}

# check NAME WANT-EXIT WANT-KIND [WANT-DEPTH]: `check --json` of $W/NAME,
# probed now (--no-cache; CHECK_ARGS adds options), its JSON kept.
check() {
  local json=$W/$1.check.json code kinds
  # shellcheck disable=SC2086
  t "${CHECK_T:-90}" "$BIN" check --json --no-cache ${PYBIN:+--python "$PYBIN"} ${CHECK_ARGS:-} "$W/$1" \
    >"$json" 2>"$W/$1.check.err"
  code=$?
  expect "check $1: exit status" "$2" "$code"
  kinds=$(jget "$json" "' '.join(sorted(set(r['outcome']['kind'] for r in d['results'])))")
  expect "check $1: outcome" "$3" "$kinds"
  if [ -n "${4:-}" ]; then
    expect "check $1: depth" "$4" "$(jget "$json" "' '.join(sorted(set(str(r['outcome']['depth']) for r in d['results'])))")"
  fi
  if [ "$kinds" != "$3" ]; then
    jget "$json" "'\n'.join(r['variant']+': '+r['outcome']['message'] for r in d['results'])" | sed 's/^/    /' | both
    tail -n 5 "$W/$1.check.err" | sed 's/^/    /' >&3
  fi
}

# ptx_want: pass where the artifacts' nvcc is not newer than the driver's
# CUDA (the fingerprint's), ptx_too_new where it is: a driver JIT-compiles
# no PTX of a newer ISA.
ptx_want() {
  local nvcc_cuda driver newer
  nvcc_cuda=$(cat "$ART/nvcc-version")
  driver=$(jget "$OUT/fingerprint.json" "d['gpus']['cuda_driver_api']")
  newer=$(printf '%s\n%s\n' "$nvcc_cuda" "$driver" | sort -V | tail -n 1)
  if [ "$nvcc_cuda" != "$driver" ] && [ "$newer" = "$nvcc_cuda" ]; then echo ptx_too_new; else echo pass; fi
}

# The nvcc a kernel's build would find: CUDA_HOME, CUDA_PATH, PATH,
# /usr/local/cuda; nothing where there is none.
local_nvcc() {
  local c
  for c in ${CUDA_HOME:+$CUDA_HOME/bin/nvcc} ${CUDA_PATH:+$CUDA_PATH/bin/nvcc} "$(command -v nvcc)" /usr/local/cuda/bin/nvcc; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return; fi
  done
}

# The nvcc artifacts: carried, else built here by a local nvcc, else none.
artifacts() {
  if [ -f "$PREBUILT/nvcc-version" ]; then
    ART=$PREBUILT
    say "nvcc artifacts: carried in $ART (nvcc $(cat "$ART/nvcc-version"))"
  elif [ -n "$(local_nvcc)" ]; then
    if NVCC=$(local_nvcc) t 120 "$ROOT/scripts/gpu-check/prepare.sh" "$W/prebuilt"; then
      ART=$W/prebuilt
      pass "nvcc artifacts built here with $(local_nvcc)"
    else
      fail "nvcc artifacts built here with $(local_nvcc): see $LOG"
    fi
  else
    skip "nvcc artifacts: none carried ($PREBUILT) and no nvcc here: the nvcc sections are skipped"
  fi
}
