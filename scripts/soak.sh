#!/bin/sh
# Attempt soak: runs the ignored soak in tests/it/soak.rs in a release build with line tables (the profiling profile) — ATTEMPTS short
# attempts (default 1000) with random exits, result blocks, big outputs, timeouts, pipe
# holders and signals, checking after every handler exit that no process of the run
# survives, that the handler's descriptors do not grow and that the state is consistent.
#
#   scripts/soak.sh [ATTEMPTS] [SEED]      defaults: 1000, the test's fixed seed
#   ASH_SOAK_SEED=123 scripts/soak.sh 200  the same, seed from the environment
#
# The seed is printed first; the same seed replays the same sequence of behaviours.
# Design and recorded results: docs/soak.md.
set -eu

attempts="${1:-${ASH_SOAK_ATTEMPTS:-1000}}"
seed="${2:-${ASH_SOAK_SEED:-}}"
case "$attempts" in
    ''|*[!0-9]*) echo "usage: $0 [ATTEMPTS] [SEED]" >&2; exit 2 ;;
esac
case "$seed" in
    *[!0-9]*) echo "usage: $0 [ATTEMPTS] [SEED] (SEED is a decimal number)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
ASH_SOAK_ATTEMPTS="$attempts"
export ASH_SOAK_ATTEMPTS
if [ -n "$seed" ]; then
    ASH_SOAK_SEED="$seed"
    export ASH_SOAK_SEED
fi
exec cargo test --profile profiling --features failpoints --test it -- --ignored --nocapture soak::soak_random_attempts
