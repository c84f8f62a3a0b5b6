#!/bin/sh
# A stand-in for a real agent CLI: reads the worker prompt on stdin, "works" on the selected
# phase by writing a note in its workspace (the current directory), streams some progress on
# both stdout and stderr, and ends with exactly one result block.
set -eu

# Tells the runner what the agent is doing and what it spent (sd_notify datagrams on
# $NOTIFY_SOCKET, docs/worker-protocol.md), when the runner gave it a socket and python3 is
# there to send one; a real agent uses its language's sd_notify helper or systemd-notify.
# The sender stays a moment, so that the runner can still tell it is one of the agent's.
notify() {
    [ -n "${NOTIFY_SOCKET:-}" ] && command -v python3 >/dev/null 2>&1 || return 0
    python3 - "$@" <<'PY' || true
import os, socket, sys, time
address = os.environ["NOTIFY_SOCKET"]
if address.startswith("@"):
    address = "\0" + address[1:]
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
    sock.sendto("\n".join(sys.argv[1:]).encode(), address)
time.sleep(0.2)
PY
}

prompt=$(cat)
phase_id=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_id: //p' | head -n 1)
phase_title=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_title: //p' | head -n 1)

echo "demo agent: starting $phase_id ($phase_title)"
echo "demo agent: reading AGENTS.md" >&2
notify "STATUS=writing notes/$phase_id.txt"
mkdir -p notes
printf 'Note for %s: %s\n' "$phase_id" "$phase_title" > "notes/$phase_id.txt"
echo "demo agent: wrote notes/$phase_id.txt"
# What a provider would have counted for this phase (the demo's own numbers).
notify 'X_AISH_USAGE={"input_tokens": 1200, "cached_input_tokens": 800, "output_tokens": 150, "model": "demo", "final": true}'

echo "<phase-complete>"
echo "Wrote notes/$phase_id.txt for \"$phase_title\"."
echo "Validation: the file exists ($(wc -c < "notes/$phase_id.txt") bytes)."
echo "</phase-complete>"
