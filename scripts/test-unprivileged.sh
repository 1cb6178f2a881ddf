#!/usr/bin/env bash
# The sandbox's tests once more as an unprivileged user (`nobody`, through
# setpriv), when run as root: an ordinary user's probes get a user
# namespace too, a path root's never takes. As another user already, there
# is nothing to add (the suite just ran as one). Needs the test binaries
# built (`cargo test --no-run`), which this finds by asking cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "unprivileged: already not root, nothing to add"
  exit 0
fi
# Where a probe's writes reach the tests, which read what their children
# wrote into this folder (scripts/scratch.sh).
. scripts/scratch.sh
scratch=$(mktemp -d "$(scratch_base)/unprivileged.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
chmod 1777 "$scratch"
tests=(sandbox sandbox_escape sandbox_interrupt sandbox_fds sandbox_env sandbox_bounds)
binaries=$(cargo test --locked --no-run --message-format=json "${tests[@]/#/--test=}" 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
status=0
for binary in $binaries; do
  echo "as nobody: $(basename "$binary")"
  # A login shell's minimal environment: the fixtures find python3 on PATH.
  if ! setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
    HOME="$scratch" TMPDIR=/tmp PREFLIGHT_TEST_SCRATCH="$scratch" "$binary" --test-threads=2 2>&1; then
    status=1
  fi
done
exit $status
