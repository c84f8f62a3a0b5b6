#!/bin/sh
# SIGKILL soak during hooks and Verify checks that leave setsid daemons: runs
# hook_processes::sigkills_at_random_moments_during_hooks_and_checks_leave_no_process
# (tests/it/hook_processes.rs) for N iterations; every one must leave no process of the run.
#
#   scripts/hook-kill-soak.sh [N]          N defaults to 60
#   ASH_HOOK_KILL_SEED=123 scripts/hook-kill-soak.sh 200   replay a seed printed by an earlier run
#
# Design and recorded results: docs/reliability.md.
set -eu

iterations="${1:-60}"
case "$iterations" in
    ''|*[!0-9]*) echo "usage: $0 [ITERATIONS]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
ASH_HOOK_KILL_ITERATIONS="$iterations"
ASH_HOOK_KILL_SEED="${ASH_HOOK_KILL_SEED:-$(date +%s)}"
export ASH_HOOK_KILL_ITERATIONS ASH_HOOK_KILL_SEED
echo "seed: $ASH_HOOK_KILL_SEED"
exec cargo test --features failpoints --test it -- --nocapture hook_processes::sigkills_at_random_moments
