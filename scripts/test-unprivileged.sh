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
# Everything nobody needs, from wherever the checkout is (root's 0700 home
# included): the test binaries, preflight and the fixtures, linked (or
# copied) into a folder of their own under /var/tmp that every user can
# read, and a scratch there that nobody can write (tests/common/nobody.rs
# does the same for the tests that rerun themselves as nobody).
copy=$(mktemp -d /var/tmp/kernel-preflight-nobody.XXXXXX)
trap 'rm -rf "$copy"' EXIT
chmod 755 "$copy"
mkdir -m 1777 "$copy/scratch"
place() { ln -f "$1" "$2" 2>/dev/null || cp "$1" "$2"; chmod 755 "$2"; }
tests=(sandbox sandbox_escape sandbox_interrupt sandbox_fds sandbox_env sandbox_walls)
artifacts=$(cargo test --locked --no-run --message-format=json "${tests[@]/#/--test=}" 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] in (["test"], ["bin"]):
        print(m["target"]["kind"][0], m["executable"])')
cp -r tests/fixtures "$copy/fixtures"
chmod -R a+rX "$copy/fixtures"
binaries=()
while read -r kind path; do
  if [ "$kind" = bin ]; then
    [ "$(basename "$path")" = preflight ] && place "$path" "$copy/preflight"
  else
    place "$path" "$copy/$(basename "$path")"
    binaries+=("$copy/$(basename "$path")")
  fi
done <<<"$artifacts"
[ -x "$copy/preflight" ] || place target/debug/preflight "$copy/preflight"
status=0
for binary in "${binaries[@]}"; do
  echo "as nobody: $(basename "$binary")"
  # A login shell's minimal environment: the fixtures find python3 on PATH.
  if ! (cd "$copy/scratch" && setpriv --reuid=65534 --regid=65534 --clear-groups env -i \
    PATH=/usr/local/bin:/usr/bin:/bin HOME="$copy/scratch" TMPDIR=/tmp \
    PREFLIGHT_TEST_SCRATCH="$copy/scratch" PREFLIGHT_TEST_BINARY="$copy/preflight" \
    PREFLIGHT_TEST_FIXTURES="$copy/fixtures" "$binary" --test-threads=2 2>&1); then
    status=1
  fi
done
exit $status
