#!/bin/sh
# Runs the bundled demo plan end to end in a fresh copy of examples/demo, so it can be run
# any number of times without touching the repository. Needs `ai-session-handler` on PATH
# (`cargo install --locked --path .`).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
workdir=$(mktemp -d "${TMPDIR:-/tmp}/ai-session-handler-demo.XXXXXX")
cp -R "$here/demo/." "$workdir/"
cp "$here/demo-agent.sh" "$workdir/demo-agent.sh"
chmod +x "$workdir/demo-agent.sh"

echo "demo workspace: $workdir"
ai-session-handler check --plan "$workdir/plans/hello.md" --agent-cmd "$workdir/demo-agent.sh"
status=0
ai-session-handler run --plan "$workdir/plans/hello.md" --agent-cmd "$workdir/demo-agent.sh" || status=$?
echo
ai-session-handler status --plan "$workdir/plans/hello.md"
exit "$status"
