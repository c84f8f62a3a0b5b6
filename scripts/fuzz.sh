#!/usr/bin/env bash
# Builds every cargo-fuzz target under fuzz/ and runs each one for the given number of seconds
# (default 60), one target at a time with a single libFuzzer job. Exits nonzero if any target
# crashed, timed out or ran out of memory; the failing input is in fuzz/artifacts/<target>/.
# See docs/fuzzing.md.
#
# Environment: FUZZ_SANITIZER=address|none (default address), FUZZ_TARGETS="a b" to run a subset.
set -euo pipefail

seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [seconds-per-target]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is not installed: cargo install cargo-fuzz --locked" >&2
  exit 2
fi

# cargo-fuzz passes nightly-only flags (-Zsanitizer, sancov passes); this lets the stable
# toolchain accept them.
export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-address}"
targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"

cargo fuzz build --sanitizer "$sanitizer"

logs="fuzz/target/logs"
mkdir -p "$logs"
failed=()
for target in $targets; do
  # libFuzzer adds new inputs to the first corpus directory; keep them out of the committed
  # seeds (fuzz/corpus/<target>), which are only read.
  work="fuzz/target/corpus-work/$target"
  mkdir -p "$work"
  echo "== $target: ${seconds}s"
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
  if [ -f "fuzz/dicts/$target.dict" ]; then
    options+=(-dict="fuzz/dicts/$target.dict")
  fi
  corpora=("$work")
  if [ -d "fuzz/corpus/$target" ]; then
    corpora+=("fuzz/corpus/$target")
  fi
  rc=0
  cargo fuzz run --sanitizer "$sanitizer" "$target" "${corpora[@]}" -- "${options[@]}" \
    >"$logs/$target.log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|SUMMARY|.*Test unit written)' \
    "$logs/$target.log" || true
  if [ "$rc" -ne 0 ]; then
    failed+=("$target")
    echo "!! $target failed (exit $rc); see $logs/$target.log and fuzz/artifacts/$target/" >&2
  fi
done

if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzzing found failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzzing: no failures in ${seconds}s per target"
