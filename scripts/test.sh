#!/usr/bin/env bash
# The project's whole test suite, from a fresh clone: the Python test
# environment (real nvcc / NVRTC / cuobjdump wheels, the hub's `kernels`
# package), formatting, lints, then every test, then the Python package's
# tests against the wheel built from this checkout (scripts/test-python.sh);
# the probe fixtures once more with forked probes (scripts/test-forked.sh);
# a small fleet of real nodes sharing one Redis (scripts/fleet-sim.py).
# As root it also runs the sandbox tests as nobody (scripts/test-unprivileged.sh)
# and a real single-node Slurm (scripts/slurm-check.sh).
# Every stage runs even when one before it failed; the last line is the
# whole suite's count, and the exit status is non-zero if anything failed.
# Needs a Rust toolchain, python3 with venv, a C compiler, and access to
# crates.io and PyPI.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Every stage runs, whatever an earlier one gave; the run fails at the end
# if any did. A stage's output also goes to the log the closing line counts.
failed=()
stage() {
  local name=$1
  shift
  if ! "$@" 2>&1 | tee -a "$log"; then
    failed+=("$name")
    echo "stage failed: $name" >&2
  fi
}
stage setup-env scripts/setup-env.sh
stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --all-targets --locked -- -D warnings
stage layers scripts/layers.sh
# Every doc link resolves (a public item's docs naming a private one is a
# dead link in the rendered docs).
stage doc env RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --locked --quiet
stage cargo-test cargo test --all-targets --locked --no-fail-fast
# A small fleet (20 real nodes, two machine classes, 16 jobs) against one
# redis-server: each (class, variant) probed once, no node answering alone.
stage fleet-sim env PREFLIGHT_BIN="$PWD/target/debug/preflight" \
  python3 scripts/fleet-sim.py --nodes 20 --classes 15,5 --kernels 4 --variants 4 --deadline 300
# The probe fixtures again, every probe forked from a fork server.
stage forked scripts/test-forked.sh
# As root, the sandbox's tests again as nobody (the user-namespace path).
stage unprivileged scripts/test-unprivileged.sh
stage python scripts/test-python.sh
# A real single-node Slurm placing jobs by preflight's features and draining
# on its health check (root, Debian's slurm packages; skipped without them).
stage slurm scripts/slurm-check.sh
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed stages: ${failed[*]}"
fi
# One closing line for the whole suite (cargo prints one per test binary,
# pytest its own; an expected failure counts as skipped).
awk '/^test result:/ { p += $4; f += $6; i += $8 }
     /^=+ .*(passed|failed).* in [0-9.]+s/ {
       for (k = 2; k < NF; k++) {
         n = $k + 0; w = $(k + 1); sub(/,$/, "", w)
         if (w == "passed") p += n; else if (w == "failed" || w == "error" || w == "errors") f += n
         else if (w == "skipped" || w == "xfailed") i += n
       }
     }
     END { printf "all tests: %d passed, %d failed, %d skipped\n", p, f, i }' "$log"
[ ${#failed[@]} -eq 0 ]
