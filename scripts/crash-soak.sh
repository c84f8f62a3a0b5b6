#!/bin/sh
# SIGKILL soak: runs the crash test (tests/it/crash.rs) for N iterations in a release build with line tables (the profiling profile).
#
#   scripts/crash-soak.sh [N]          N defaults to 500
#   ASH_CRASH_SEED=123 scripts/crash-soak.sh 200   replay a seed printed by an earlier run
#
# Without ASH_CRASH_SEED each soak draws new kill points (the seed is printed first).
# Design and recorded results: docs/reliability.md.
set -eu

iterations="${1:-500}"
case "$iterations" in
    ''|*[!0-9]*) echo "usage: $0 [ITERATIONS]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
ASH_CRASH_ITERATIONS="$iterations"
ASH_CRASH_SEED="${ASH_CRASH_SEED:-$(date +%s)}"
export ASH_CRASH_ITERATIONS ASH_CRASH_SEED
exec cargo test --profile profiling --features failpoints --test it -- --nocapture crash::
