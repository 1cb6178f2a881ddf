#!/usr/bin/env bash
# The python executor's fixture suites again with every probe forked from a
# fork server (PREFLIGHT_TEST_FORKED=1: tests/probe_fixtures `made`): each
# test asserts the outcome a fresh process gives, and that its probe was in
# fact forked (no silent fallback). Run by scripts/test.sh; on its own:
#   scripts/test-forked.sh [-- TEST FILTER]
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(probe probe_diagnosis probe_device probe_flood hub_acceptance hub_judged
  smoke_library sandbox_hostile sandbox_escape sandbox_walls_hostile)
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
PREFLIGHT_TEST_FORKED=1 cargo test --locked --no-fail-fast "${args[@]}" "$@"
