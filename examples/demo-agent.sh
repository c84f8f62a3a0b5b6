#!/bin/sh
# A stand-in for a real agent CLI: reads the worker prompt on stdin, "works" on the selected
# phase by writing a note in its workspace (the current directory), streams some progress on
# both stdout and stderr, and ends with exactly one result block.
set -eu

prompt=$(cat)
phase_id=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_id: //p' | head -n 1)
phase_title=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_title: //p' | head -n 1)

echo "demo agent: starting $phase_id ($phase_title)"
echo "demo agent: reading AGENTS.md" >&2
mkdir -p notes
sleep 0.2
printf 'Note for %s: %s\n' "$phase_id" "$phase_title" > "notes/$phase_id.txt"
echo "demo agent: wrote notes/$phase_id.txt"
sleep 0.2

echo "<phase-complete>"
echo "Wrote notes/$phase_id.txt for \"$phase_title\"."
echo "Validation: the file exists ($(wc -c < "notes/$phase_id.txt") bytes)."
echo "</phase-complete>"
