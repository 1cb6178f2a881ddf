#!/usr/bin/env bash
# The module graph follows DESIGN.md's layers: a module may use the modules
# of its own layer or above it (earlier in the data flow), never one below.
# Lists every `crate::MODULE` reference between top-level library modules
# (doc comments and tests aside) and fails on an edge that points down.
set -euo pipefail
cd "$(dirname "$0")/.."
# layer of each top-level module; utilities (-1) may be used by anyone
# and may use only other utilities.
declare -A layer=(
  [fs]=-1 [hash]=-1 [sandbox]=-1 [seen]=-1 [stats]=-1 [text]=-1
  [variant]=0 [discover]=1 [fingerprint]=2 [declared]=3 [protocol]=4
  [probe]=5 [classify]=6 [cache]=7 [run]=8 [doctor]=9 [bench]=9 [labels]=9 [report]=9
)
bad=0
edges=0
while IFS=: read -r file _ text; do
  from=${file#src/}; from=${from%%/*}; from=${from%.rs}
  [ -n "${layer[$from]+x}" ] || continue
  for to in $(grep -o 'crate::[a-z_]*' <<<"$text" | sed 's/crate:://' | sort -u); do
    [ "$to" != "$from" ] && [ -n "${layer[$to]+x}" ] || continue
    edges=$((edges + 1))
    if [ "${layer[$to]}" -gt "${layer[$from]}" ]; then
      echo "layers: $file: $from (layer ${layer[$from]}) uses $to (layer ${layer[$to]}): $text" >&2
      bad=$((bad + 1))
    fi
  done
# Skip comments and test modules (tests may reach any layer).
done < <(grep -rn --include='*.rs' 'crate::' src \
  | grep -v -E '^src/[a-z_/]*tests?(/|\.rs)|^src/[a-z_/]*_tests\.rs' \
  | grep -v -E ':[0-9]+:\s*//')
if [ "$bad" -gt 0 ]; then
  echo "layers: $bad upward edge(s)" >&2
  exit 1
fi
echo "layers: $edges cross-module references, none upward"

# The cache's buckets, records and keys are `pub(crate)` (the compiler
# keeps them inside the crate); inside it, `run`'s seam (`src/run/cached/`)
# is their one user. Elsewhere only the surface is named: the cache, its
# errors, keys and lookups, its outcome entries (`cache ls`) and `ops`.
inside=$(grep -rn --include='*.rs' -o -E 'crate::cache::(\{[^}]*\}|[A-Za-z_]+)' src \
  | grep -v -E '^src/cache/|^src/run/cached/' \
  | grep -v -E 'crate::cache::(Cache|CacheError|Key|Lookup|OutcomeEntry|ops)$' || true)
if [ -n "$inside" ]; then
  echo "$inside" | sed 's/^/layers: only run\/cached\/ reaches into the cache: /' >&2
  exit 1
fi
echo "layers: the cache's internals are reached through run/cached/ only"

# The command line is arguments -> one library call -> one `report`
# function: it names no executor (the registry in `run` makes them), none
# of the cache's internals (its buckets, records and keys: `Cache` and
# `cache::ops` are the surface `preflight cache` manages) and no Python
# script (children and downloads are the library's). `cuda_child.rs` is
# the cuda executor's child mode, which the binary re-executes itself in.
shell=$(grep -rn -E \
  'CudaExecutor|PythonExecutor|Executors::|probe::cuda::(Cuda|nvrtc|driver|launch)|probe::python|cache::(bucket|identity|job|key|outcomes|warm|bench|facts)|BenchRecord|OutcomeRecord|WarmRecord|Bucket|Shelf|import sys|python3? -c|"-c"' \
  src/cli \
  | grep -v -E '^src/cli/cuda_child\.rs:' \
  | grep -v -E ':[0-9]+:\s*//' || true)
if [ -n "$shell" ]; then
  echo "$shell" | sed 's/^/layers: cli does library work: /' >&2
  exit 1
fi
echo "layers: cli names no executor, cache internal or Python script"
