# Sourced by the test scripts: scratch_base prints a folder for the tests'
# scratch, one where what a probe or its child writes reaches the test that
# waits for it. A probe's /tmp and TMPDIR are private layers (docs/sandbox.md),
# so the checkout's target/ serves only when it is elsewhere; a checkout
# under /tmp gets a folder named after it in /var/tmp (reachable by the
# runs as nobody too), else under ~/.cache. tests/common/mod.rs
# (scratch_root) chooses the same way for the Rust tests.

# Whether $1 (an existing folder) is below /tmp or TMPDIR.
is_private() {
  local real tmp
  real=$(realpath "$1")
  tmp=$(realpath "${TMPDIR:-/tmp}" 2>/dev/null || echo /tmp)
  case "$real/" in
    /tmp/*) return 0 ;;
  esac
  [ "$tmp" != / ] && case "$real/" in "$tmp"/*) return 0 ;; esac
  return 1
}

scratch_base() {
  mkdir -p target
  if ! is_private target; then
    echo "$PWD/target"
    return
  fi
  local name base
  name=$(printf '%s' "$PWD" | cksum | cut -d' ' -f1)
  base=/var/tmp/kernel-preflight-tests-$(id -u)
  if mkdir -p "$base" 2>/dev/null && [ -O "$base" ] && [ ! -L "$base" ]; then
    mkdir -p "$base/$name" && echo "$base/$name"
    return
  fi
  base=${XDG_CACHE_HOME:-$HOME/.cache}/kernel-preflight-tests/$name
  mkdir -p "$base" && echo "$base"
}
