#!/bin/sh
# Start a Ray worker with this node's kernel verdicts as Ray node labels,
# then schedule by them:
#   @ray.remote(label_selector={"preflight.kernels.hf.co/kernels-community.relu.v1": "true"})
#
# The node must provide: the GPU and its driver; preflight; the Python
# environment Ray's workers run in (the same one warmup probes, --python);
# the hub cache with the kernels the lock pins (or network: --download).
# Labels are read once, when Ray starts: after a driver or environment
# change, run this again (docs/fleet.md).
set -eu
lock=${PREFLIGHT_LOCK:-/etc/preflight/kernels.lock}
python=${PREFLIGHT_PYTHON:-$(command -v python3)}
labels=$(mktemp)
trap 'rm -f "$labels"' EXIT
preflight warmup --lock "$lock" --python "$python"
preflight labels --lock "$lock" --python "$python" --format ray --output "$labels"
ray start --address="${RAY_ADDRESS:?the head node, host:port}" --labels-file="$labels" "$@"
