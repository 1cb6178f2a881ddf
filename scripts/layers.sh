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
  [fs]=-1 [hash]=-1 [sandbox]=-1 [stats]=-1 [text]=-1
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
