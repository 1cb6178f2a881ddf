#!/usr/bin/env bash
# Ray placement by preflight's labels: after `preflight warmup`, a Ray head
# node on loopback started with `--labels-file` from `preflight labels
# --format ray`; a task with a label_selector on a passing kernel's label
# runs there, and one on a failing kernel's label is not placed.
# Opt-in (Ray is ~290 MB): give a venv with Ray installed,
#   python3 -m venv /var/tmp/ray-venv && /var/tmp/ray-venv/bin/pip install ray
# Usage: scripts/ray-check.sh [RAY_VENV] [path/to/preflight]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=${1:-/var/tmp/ray-venv}
preflight=${2:-$repo/target/debug/preflight}
python=$repo/.venv/bin/python
[ -x "$venv/bin/ray" ] || { echo "ray-check: no Ray in $venv (pip install ray there)" >&2; exit 2; }
t=$(mktemp -d /var/tmp/ray-check.XXXXXX)
trap '"$venv/bin/ray" stop --force >/dev/null 2>&1 || true; rm -rf "$t"' EXIT
start=$(date +%s)
kernel() {
  local name=$1 commit=$2 body=$3
  local dir=$t/hub/kernels--acme--$name/snapshots/$commit/build/torch-universal
  mkdir -p "$dir" "$t/hub/kernels--acme--$name/refs"
  printf '%s\n' "$body" > "$dir/__init__.py"
  printf '{"name":"%s","id":"_%s","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}\n' "$name" "$name" > "$dir/metadata.json"
  printf '%s' "$commit" > "$t/hub/kernels--acme--$name/refs/v1"
}
kernel relu "$(printf '1%.0s' {1..40})" 'X = 1'
kernel broken "$(printf '2%.0s' {1..40})" "raise ImportError('no kernel here')"
export KERNELS_CACHE=$t/hub PREFLIGHT_CACHE=$t/outcomes
"$preflight" warmup --python "$python" >/dev/null
"$preflight" labels --python "$python" --format ray --output "$t/labels.json"
cat "$t/labels.json"
"$venv/bin/ray" start --head --node-ip-address=127.0.0.1 --port=0 --num-cpus=1 \
  --include-dashboard=false --labels-file="$t/labels.json" --disable-usage-stats >/dev/null
"$venv/bin/python" - <<'PY'
import ray
ray.init(address="auto")
ok = "preflight.kernels.hf.co/acme.relu.v1"
bad = "preflight.kernels.hf.co/acme.broken.v1"
labels = ray.nodes()[0]["Labels"]
assert labels.get(ok) == "true" and labels.get(bad) == "false", labels

@ray.remote(num_cpus=0)
def where():
    return ray.get_runtime_context().get_node_id()

node = ray.get(where.options(label_selector={ok: "true"}).remote(), timeout=60)
assert node == ray.nodes()[0]["NodeID"], node
print(f"ray-check: ok: a task with label_selector {{{ok}: true}} ran on the labeled node")
pending = where.options(label_selector={bad: "true"}).remote()
ready, _ = ray.wait([pending], timeout=10)
assert not ready, "a task on a failing kernel's label was placed"
print(f"ray-check: ok: a task with label_selector {{{bad}: true}} is not placed (10 s)")
PY
echo "ray-check: all passed in $(( $(date +%s) - start )) s"
