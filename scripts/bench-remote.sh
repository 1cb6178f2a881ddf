#!/usr/bin/env bash
# The remote outcome store's costs, measured (docs/fleet.md quotes them):
#   1. a warm `select` with and without PREFLIGHT_REMOTE (a local hit never
#      asks the remote);
#   2. the delay a store that is down (nothing listening) or stopped
#      (SIGSTOP: it accepts and never answers) adds to a cold `check`;
#   3. N nodes (separate caches, one machine) warming the same kernel at
#      once, with the remote and without: CPU time summed over all nodes.
# Needs redis-server and the test environment (scripts/setup-env.sh).
# Usage: scripts/bench-remote.sh [NODES] (default 20); PREFLIGHT_BIN=PATH
# measures that binary instead of a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-20}
if [ -z "${PREFLIGHT_BIN:-}" ]; then
  cargo build --release --quiet
fi
bin=${PREFLIGHT_BIN:-$PWD/target/release/preflight}
python=$PWD/.venv/bin/python
work=$(mktemp -d "$PWD/target/bench-remote.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null &
redis=$!
trap 'kill -CONT $redis 2>/dev/null; kill $redis 2>/dev/null; rm -rf "$work"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
head -c 32 /dev/urandom | base64 >"$work/secret"
export PREFLIGHT_REMOTE_SECRET_FILE=$work/secret
url=redis://127.0.0.1:$port/0

# A kernel of 6 pure-Python variants that import in about 0.3 s each.
repo=$work/kernel
for v in torch-universal torch-cpu torch20-cpu-x86_64-linux torch21-cpu-x86_64-linux \
  torch22-cpu-x86_64-linux torch23-cpu-x86_64-linux; do
  mkdir -p "$repo/build/$v"
  printf 'import time\ntime.sleep(0.3)\nX = 1\n' >"$repo/build/$v/__init__.py"
  printf '{"name":"bench-kernel","id":"_bench_kernel_%s","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}' \
    "${v//-/_}" >"$repo/build/$v/metadata.json"
done

# Milliseconds of wall time of "$@", the median of 15 runs.
median_ms() {
  local times=()
  for _ in $(seq 15); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 8p
}

echo "== 1. warm select (median of 15)"
PREFLIGHT_CACHE=$work/warm PREFLIGHT_REMOTE=$url "$bin" select "$repo" --python "$python" >/dev/null 2>&1
echo "without remote: $(PREFLIGHT_CACHE=$work/warm median_ms "$bin" select "$repo" --python "$python") ms"
echo "with remote:    $(PREFLIGHT_CACHE=$work/warm PREFLIGHT_REMOTE=$url median_ms "$bin" select "$repo" --python "$python") ms"
kill -STOP $redis
echo "with remote stopped (SIGSTOP): $(PREFLIGHT_CACHE=$work/warm PREFLIGHT_REMOTE=$url median_ms "$bin" select "$repo" --python "$python") ms"
kill -CONT $redis

echo "== 2. cold check, the store unusable (one run each)"
cold() {
  local dir
  dir=$(mktemp -d "$work/cold.XXXXXX")
  local t0 t1
  t0=$(date +%s%N)
  PREFLIGHT_CACHE=$dir "$@" check "$repo" --python "$python" >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
echo "no remote:         $(cold "$bin") ms"
closed=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "nothing listening: $(cold env PREFLIGHT_REMOTE=redis://127.0.0.1:$closed/0 "$bin") ms"
kill -STOP $redis
echo "stopped (SIGSTOP): $(cold env PREFLIGHT_REMOTE=$url "$bin") ms"
kill -CONT $redis

echo "== 3. $nodes nodes warming up together: CPU seconds summed over the nodes"
fleet() {
  redis-cli -p "$port" flushall >/dev/null
  local tag=$1
  shift
  local t0 t1
  t0=$(date +%s%N)
  # `times` counts the children this subshell waited for: every node and
  # its probes.
  (
    for i in $(seq "$nodes"); do
      PREFLIGHT_CACHE=$work/$tag-$i "$@" warmup "$repo" --python "$python" >/dev/null 2>&1 &
    done
    wait
    times >"$work/$tag.times"
  )
  t1=$(date +%s%N)
  # "XmY.YYYs XmY.YYYs": user and system time of the children.
  local cpu
  cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); t += p[1] * 60 + p[2] } } END { printf "%.1f", t }' "$work/$tag.times")
  echo "$tag: ${cpu} s CPU, $(((t1 - t0) / 1000000)) ms wall"
}
fleet alone "$bin"
fleet remote env PREFLIGHT_REMOTE="$url" "$bin"
