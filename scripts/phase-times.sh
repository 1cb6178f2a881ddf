#!/usr/bin/env bash
# Where a warm `preflight select` spends its time, phase by phase: builds
# this checkout with benches/phases/ticks.patch applied (a line on stderr
# with the time since `main` and the page faults so far, at each phase
# boundary, when PF_T is set), answers a warm select of a 20-variant kernel
# ROUNDS times (default 200), and prints the median of each phase.
#
#   scripts/phase-times.sh            # needs .venv (scripts/setup-env.sh)
#
# The patch is kept out of the binary on purpose (no timing code in
# what users run); when the code it touches moves, it stops applying and
# this script says so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${ROUNDS:-200}"
python="$root/.venv/bin/python"
[ -x "$python" ] || { echo "phase-times: no $python (run scripts/setup-env.sh)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'git -C "$root" worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/src" HEAD >/dev/null 2>&1
git -C "$work/src" apply "$root/benches/phases/ticks.patch" \
  || { echo "phase-times: benches/phases/ticks.patch no longer applies to this checkout" >&2; exit 2; }
CARGO_TARGET_DIR="$root/target/phase-times" cargo build --release --quiet --manifest-path "$work/src/Cargo.toml"
cp "$root/target/phase-times/release/preflight" "$work/preflight"
"$python" - "$work" <<'PY'
import os, platform, sys
work = sys.argv[1]
arch = platform.machine()
names = (["torch-universal", "torch-cpu"] + [f"torch2{m}-cpu-{arch}-linux" for m in range(20)])[:20]
for i, v in enumerate(names):
    d = f"{work}/kernel/build/{v}"
    os.makedirs(d)
    open(f"{d}/__init__.py", "w").write("x = 1\n")
    open(f"{d}/_ops.so", "wb").write(bytes([i]) * (1 << 20))
    open(f"{d}/metadata.json", "w").write(
        '{"name":"demo","id":"_demo_%d","version":1,"license":"MIT","python-depends":[],"backend":{"type":"cpu"}}' % i)
PY
export VIRTUAL_ENV="$root/.venv" PREFLIGHT_CACHE="$work/cache" PATH="$root/.venv/bin:$PATH"
"$work/preflight" select "$work/kernel" >/dev/null
# A warm record is written only for files older than 2 s (cache/warm.rs).
sleep 2.5
"$work/preflight" select "$work/kernel" >/dev/null
for _ in $(seq "$rounds"); do PF_T=1 "$work/preflight" select "$work/kernel" 2>&1 >/dev/null; done >"$work/ticks"
"$python" - "$work/ticks" "$rounds" <<'PY'
import collections, statistics, sys
times, faults, order = collections.defaultdict(list), collections.defaultdict(list), []
for line in open(sys.argv[1]):
    _, phase, us, minflt = line.split()
    times[phase].append(float(us)); faults[phase].append(int(minflt))
    if phase not in order:
        order.append(phase)
print(f"warm select of 20 variants, median of {sys.argv[2]} runs; time since main, page faults since exec")
print(f"{'phase ends':14} {'µs':>8} {'(this phase)':>13} {'faults':>7} {'(this)':>7}")
pt = pf = 0
for phase in order:
    t, f = statistics.median(times[phase]), statistics.median(faults[phase])
    print(f"{phase:14} {t:8.1f} {t - pt:+13.1f} {f:7.0f} {f - pf:+7.0f}")
    pt, pf = t, f
PY
