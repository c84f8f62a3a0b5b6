#!/usr/bin/env bash
# Opt-in end-to-end suite for the provider wrappers: the handler runs
# ai-session-handler-codex-high / -claude-high through the example launchers
# (examples/launchers/) against the REAL Claude Code and Codex CLIs, pinned in
# scripts/e2e-real-clis/package.json, which talk to the project's mock model API
# (scripts/e2e-real-clis/mock_api.py) on 127.0.0.1. Nothing leaves the machine.
#
# Not part of CI: the first run downloads the CLIs (about 660 MB) into the cache directory,
# and a full run takes a few minutes. Results of the last full run: docs/providers.md.
#
#   scripts/e2e-real-clis.sh [CASE...]       run every case, or the named ones
#   scripts/e2e-real-clis.sh --list          list the cases
#   scripts/e2e-real-clis.sh --record DIR [CLI/MODE/SCENARIO...]
#                                            record replay fixtures (tests/fixtures/replay):
#                                            all of them, or the named ones (codex/json/err529)
#   scripts/e2e-real-clis.sh --measure [CLI/SCENARIO...]
#                                            measure the CPU and I/O counters of the wrappers'
#                                            process trees while the CLIs stream, hang, sleep
#                                            in a tool or run a busy tool (the calibration of
#                                            the idle timeout's activity rule, docs/liveness.md)
#   scripts/e2e-real-clis.sh --probe CLI SCENARIO...
#                                            run the handler's own activity sampler and rule
#                                            against a wrapper (claude or codex) in a scenario
#                                            ("hang secs=60") and print its verdicts
#
# Environment:
#   E2E_HOME       cache and scratch directory (default ~/.cache/ai-session-handler-e2e):
#                  node_modules, and per run a throwaway HOME, CODEX_HOME, CLAUDE_CONFIG_DIR,
#                  TMPDIR, workspaces and logs
#   AISH_BIN_DIR   directory with prebuilt ai-session-handler binaries (default: build them
#                  with `cargo build --release` and use target/release)
#
# Every case runs with a unique AISH_E2E_TOKEN in its environment; processes inherit it, so
# "nothing survives" is checked by looking for the token in /proc/*/environ.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
here=$repo/scripts/e2e-real-clis
E2E_HOME=${E2E_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/ai-session-handler-e2e}
CLAUDE_VERSION=2.1.197
CODEX_VERSION=0.171.0

# The suite swaps HOME and PATH for the CLIs; --probe still needs the caller's cargo.
CALLER_CARGO=$(command -v cargo || true)
CALLER_CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
CALLER_RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}

say() { printf '%s\n' "$*" >&2; }
die() { say "e2e: $*"; exit 2; }

# --- setup ------------------------------------------------------------------------------

install_clis() {
    mkdir -p "$E2E_HOME"
    if ! cmp -s "$here/package.json" "$E2E_HOME/package.json" \
        || [ ! -x "$E2E_HOME/node_modules/.bin/claude" ] || [ ! -x "$E2E_HOME/node_modules/.bin/codex" ]; then
        command -v npm >/dev/null || die "npm is needed to install the pinned CLIs"
        say "e2e: installing Claude Code $CLAUDE_VERSION and Codex $CODEX_VERSION into $E2E_HOME"
        cp "$here/package.json" "$E2E_HOME/package.json"
        (cd "$E2E_HOME" && npm install --no-audit --no-fund >"$E2E_HOME/npm-install.log" 2>&1) \
            || die "npm install failed; see $E2E_HOME/npm-install.log"
    fi
    local claude codex
    claude=$("$E2E_HOME/node_modules/.bin/claude" --version 2>/dev/null) || die "claude does not start"
    codex=$("$E2E_HOME/node_modules/.bin/codex" --version 2>/dev/null) || die "codex does not start"
    case "$claude" in "$CLAUDE_VERSION"*) ;; *) die "expected Claude Code $CLAUDE_VERSION, got $claude" ;; esac
    case "$codex" in *"$CODEX_VERSION") ;; *) die "expected Codex $CODEX_VERSION, got $codex" ;; esac
    VERSIONS="Claude Code $CLAUDE_VERSION, Codex $CODEX_VERSION, $(node --version 2>/dev/null || echo 'node ?')"
}

build_binaries() {
    if [ -z "${AISH_BIN_DIR:-}" ]; then
        say "e2e: cargo build --release"
        (cd "$repo" && cargo build --release --quiet) || die "build failed"
        AISH_BIN_DIR=$repo/target/release
    fi
    [ -x "$AISH_BIN_DIR/ai-session-handler" ] || die "no ai-session-handler in $AISH_BIN_DIR"
}

# A throwaway home for the CLIs, so no user configuration, login or history is read or
# written, and no telemetry or update check is attempted.
isolate() {
    RUN_DIR=$E2E_HOME/runs/$(date -u +%Y%m%dT%H%M%SZ)-$$
    mkdir -p "$RUN_DIR"/{home,tmp,ws,logs}
    export HOME=$RUN_DIR/home
    export CLAUDE_CONFIG_DIR=$HOME/.claude CODEX_HOME=$HOME/.codex TMPDIR=$RUN_DIR/tmp
    mkdir -p "$CLAUDE_CONFIG_DIR" "$CODEX_HOME"
    export PATH="$repo/examples/launchers:$AISH_BIN_DIR:$E2E_HOME/node_modules/.bin:/usr/local/bin:/usr/bin:/bin"
    export ANTHROPIC_API_KEY=mock-key MOCK_OPENAI_KEY=mock-key
    export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
    export DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1
    unset ANTHROPIC_MODEL ANTHROPIC_BASE_URL CODEX_MODEL CODEX_REASONING_EFFORT OPENAI_API_KEY \
        OPENAI_BASE_URL CLAUDE_CODE_MAX_RETRIES RUST_LOG
    # The suite's home is disposable, which is what IS_SANDBOX=1 declares to Claude when the
    # suite runs as root (examples/launchers/claude-lean refuses root without it).
    if [ "$(id -u)" = 0 ]; then export IS_SANDBOX=1; fi
}

mock_start() {
    SCENARIO_FILE=$RUN_DIR/scenario
    echo ok >"$SCENARIO_FILE"
    python3 "$here/mock_api.py" --log "$RUN_DIR/logs/mock-requests.jsonl" \
        --scenario-file "$SCENARIO_FILE" --port-file "$RUN_DIR/mock.port" --lifetime 3600 \
        >"$RUN_DIR/logs/mock.out" 2>&1 &
    MOCK_PID=$!
    wait_for 10 test -s "$RUN_DIR/mock.port" || die "the mock API did not start"
    local port
    port=$(cat "$RUN_DIR/mock.port")
    export ANTHROPIC_BASE_URL=http://127.0.0.1:$port
    # Two retries instead of Codex's default 4/5, so error cases end within seconds.
    cat >"$CODEX_HOME/config.toml" <<TOML
model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:$port/v1"
wire_api = "responses"
env_key = "MOCK_OPENAI_KEY"
request_max_retries = 2
stream_max_retries = 2

# Codex's sandbox creates mount points (.git, .codex, …) in its writable roots and leaves them
# behind when it is killed, as the signal cases do: keep the machine's /tmp out of it (the
# suite's TMPDIR stays writable).
[sandbox_workspace_write]
exclude_slash_tmp = true
TOML
}

mock_stop() {
    if [ -n "${MOCK_PID:-}" ]; then
        kill "$MOCK_PID" 2>/dev/null
        wait "$MOCK_PID" 2>/dev/null
        MOCK_PID=
    fi
}

scenario() { echo "$*" >"$SCENARIO_FILE"; }

# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds or time is up.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# A fresh git workspace with AGENTS.md and a two-phase plan.
new_workspace() {
    WS=$RUN_DIR/ws/$1
    rm -rf "$WS"
    mkdir -p "$WS/docs/plans"
    printf '# Agents\n\nTest workspace for the e2e suite. Do only what the phase asks.\n' >"$WS/AGENTS.md"
    cat >"$WS/docs/plans/p.md" <<'PLAN'
# E2E plan

Plan-wide intent: exercise the provider wrappers end to end against a mock model API.

## Phase 1: First step

### Workspace

.

### Task

Do the first thing and report it.

## Phase 2: Second step

### Workspace

.

### Task

Do the second thing and report it.
PLAN
    git -C "$WS" init -q
    git -C "$WS" add -A
    git -C "$WS" -c user.email=e2e@example.invalid -c user.name=e2e commit -qm init
}

# --- observing a case -------------------------------------------------------------------

survivors() {
    local file pid
    # Zombies have an empty environ, so only live processes match.
    for file in $(grep -lzxF "AISH_E2E_TOKEN=$TOKEN" /proc/[0-9]*/environ 2>/dev/null); do
        pid=${file#/proc/}
        pid=${pid%/environ}
        printf '%s ' "$pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-60);"
    done
}

no_survivors() { [ -z "$(survivors)" ]; }

transcript_text() { cat "$WS"/.ai-session-handler/plans/*/transcripts/*.txt 2>/dev/null; }

outcome_field() {
    local file
    for file in "$WS"/.ai-session-handler/plans/*/outcomes/*.json; do
        [ -f "$file" ] && python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$file" "$1"
    done | tail -n 1
}

# The value at a dotted path of the last outcome (`usage.input_tokens`), `None` when absent.
outcome_path_value() {
    local file
    for file in "$WS"/.ai-session-handler/plans/*/outcomes/*.json; do
        [ -f "$file" ] && python3 -c '
import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value.get(key) if isinstance(value, dict) else None
print(value)' "$file" "$1"
    done | tail -n 1
}

# run_handler CASE AGENT SCENARIO [handler args...]: one `run --max-phases 1` in a fresh
# workspace; sets RC, ELAPSED (seconds) and the logs CASE.out / CASE.err.
run_handler() {
    local name=$1 agent=$2
    new_workspace "$name"
    scenario $3
    shift 3
    local started=$SECONDS
    (cd "$WS" && AISH_E2E_TOKEN=$TOKEN timeout -k 5 240 ai-session-handler run --plan docs/plans/p.md \
        --agent-cmd "$agent" --max-phases 1 "$@" >"$RUN_DIR/logs/$name.out" 2>"$RUN_DIR/logs/$name.err")
    RC=$?
    ELAPSED=$((SECONDS - started))
    transcript_text >"$RUN_DIR/logs/$name.transcript"
}

# start_handler / start_by_hand: the same, in the background (PID), for the signal cases.
start_handler() {
    local name=$1 agent=$2
    new_workspace "$name"
    scenario $3
    shift 3
    (cd "$WS" && exec env AISH_E2E_TOKEN="$TOKEN" ai-session-handler run --plan docs/plans/p.md \
        --agent-cmd "$agent" --max-phases 1 "$@" >"$RUN_DIR/logs/$name.out" 2>"$RUN_DIR/logs/$name.err") &
    PID=$!
}

start_by_hand() {
    local name=$1 wrapper=$2
    new_workspace "$name"
    scenario $3
    echo "Run the command and report." >"$RUN_DIR/$name.prompt"
    # exec: PID is the wrapper itself, which the signal cases signal.
    (cd "$WS" && exec env AISH_E2E_TOKEN="$TOKEN" "$wrapper" <"$RUN_DIR/$name.prompt" \
        >"$RUN_DIR/logs/$name.out" 2>"$RUN_DIR/logs/$name.err") &
    PID=$!
}

# A tool process of this case (`sleep N`, started by the CLI in its own session) is running.
tool_running() {
    local file
    for file in $(grep -lzxF "AISH_E2E_TOKEN=$TOKEN" /proc/[0-9]*/environ 2>/dev/null); do
        tr '\0' ' ' 2>/dev/null <"${file%/environ}/cmdline" | grep -qE '^sleep [0-9]+ $' && return 0
    done
    return 1
}

transcript_has() { transcript_text | grep -qF -- "$1"; }

# --- checks: each failed one is recorded; a case passes when none failed ----------------

FAILED=()
fail() { FAILED+=("$*"); }
expect_rc() { [ "$RC" = "$1" ] || fail "exit code $RC, expected $1"; }
expect_status() {
    local status
    status=$(outcome_field status)
    [ "$status" = "$1" ] || fail "outcome $status, expected $1"
}
expect_summary_has() {
    local summary
    summary=$(outcome_field summary)
    case "$summary" in *"$1"*) ;; *) fail "summary '$summary' lacks '$1'" ;; esac
}
expect_elapsed_at_most() {
    [ "$ELAPSED" -le "$1" ] || fail "took ${ELAPSED} s, expected at most $1 s"
}
expect_usage() {
    local value
    value=$(outcome_path_value "usage.$1")
    [ "$value" = "$2" ] || fail "usage.$1 is $value, expected $2"
}
expect_agent_exit() {
    local code
    code=$(outcome_field exit_code)
    [ "$code" = "$1" ] || fail "agent exit code $code, expected $1"
}
expect_line() { grep -qxF -- "$1" "$RUN_DIR/logs/$CASE.transcript" || fail "no line: $1"; }
expect_text() { grep -qF -- "$1" "$RUN_DIR/logs/$CASE.transcript" || fail "missing: $1"; }
expect_no_text() { grep -qF -- "$1" "$RUN_DIR/logs/$CASE.transcript" && fail "unexpected: $1"; }
expect_count() {
    local count
    count=$(grep -cF -- "$2" "$RUN_DIR/logs/$CASE.transcript")
    [ "$count" = "$1" ] || fail "$count lines with '$2', expected $1"
}
expect_no_blank_diagnostic() {
    grep -qxE '\[(codex|claude)\] ' "$RUN_DIR/logs/$CASE.transcript" && fail "an empty diagnostic line"
    # Live console: no blank line where a block was hidden, the wrapper's final block
    # included: the handler's console hides a block on lines of its own together with its
    # line end (docs/decisions.md, "A hidden block on lines of its own takes its line end
    # with it").
    [ "$(grep -cx '' "$RUN_DIR/logs/$CASE.out")" = 0 ] || fail "blank console lines"
}
expect_no_survivors() {
    wait_for 5 no_survivors || fail "survivors: $(survivors)"
}
expect_no_splice() {
    # A line with two prefixes means two streams' partial lines were joined.
    grep -qE '.\[(codex|claude)\] ' "$RUN_DIR/logs/$CASE.transcript" && fail "spliced lines"
}

# --- cases ------------------------------------------------------------------------------
# Each case_* function runs one scenario and checks it. CLAUDE_CODE_MAX_RETRIES=2 keeps
# error cases short (the CLI's default is 10 retries with growing delays). The handler records
# a wrapper's exit 75 as `rate-limited` (docs/unattended-runs.md).

case_codex_ok() {
    run_handler "$CASE" ai-session-handler-codex-high ok
    expect_rc 0; expect_status phase-complete
    expect_no_text "AI SESSION HANDLER WORKER PROTOCOL"
    expect_count 1 "Working on it."
    expect_count 1 "<phase-complete>"
    expect_no_blank_diagnostic; expect_no_splice; expect_no_survivors
}
case_codex_stop_regex_ignores_prompt() {
    run_handler "$CASE" ai-session-handler-codex-high ok --stop-on-regex 'git commit'
    expect_rc 0; expect_status phase-complete; expect_no_survivors
}
case_codex_tool_quoted() {
    run_handler "$CASE" ai-session-handler-codex-high tool_quoted
    expect_rc 0; expect_status phase-complete
    expect_text "[codex] reasoning: Secret thinking: "
    expect_text "&lt;phase-complete>x&lt;/phase-complete>"
    expect_text "[codex] print('&lt;phase-blocked>')"
    expect_no_blank_diagnostic; expect_no_splice; expect_no_survivors
}
case_codex_quoted_same() {
    # A tag quoted inline in the final message makes it ambiguous: no result (fail closed).
    run_handler "$CASE" ai-session-handler-codex-high quoted_same
    expect_rc 4; expect_status missing-marker
    expect_text "no result reported: the final message is not one well-framed result block"
    expect_no_splice; expect_no_survivors
}
case_codex_nomarker() {
    run_handler "$CASE" ai-session-handler-codex-high nomarker
    expect_rc 4; expect_status missing-marker; expect_no_survivors
}
case_codex_401() {
    run_handler "$CASE" ai-session-handler-codex-high err401
    expect_rc 4; expect_status agent-failed; expect_agent_exit 1
    expect_text "401 Unauthorized"; expect_no_survivors
}
case_codex_429_exits_75() {
    run_handler "$CASE" ai-session-handler-codex-high err429
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_count 1 "exceeded retry limit, last status: 429 Too Many Requests"
    expect_text "[codex] no result reported: rate limited"
    expect_no_survivors
}
case_codex_500_not_rate_limited() {
    run_handler "$CASE" ai-session-handler-codex-high err500
    expect_rc 4; expect_status agent-failed; expect_agent_exit 1
    expect_text "[codex] error: Reconnecting... 2/2 "
    expect_text "[codex] no result reported: codex-lean's turn failed"
    expect_no_survivors
}
case_codex_529_retries_exit_75() {
    # An overload Codex's retries did not get past is temporary, like a 429.
    run_handler "$CASE" ai-session-handler-codex-high err529
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "[codex] error: Reconnecting... 1/2 (unexpected status 529 "
    expect_text "[codex] error: Reconnecting... 2/2 (unexpected status 529 "
    expect_count 1 "[codex] error: unexpected status 529 "
    expect_text "[codex] no result reported: rate limited (the error above)"
    expect_no_survivors
}
case_codex_usage_limit_exits_75() {
    run_handler "$CASE" ai-session-handler-codex-high "usage_limit reset_in=1200"
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "hit your usage limit"; expect_text "try again at "
    expect_no_survivors
}
case_codex_slow_stream_beats_idle_timeout() {
    # Codex prints whole items, so a message streamed for 5 s shows nothing until it is
    # complete; the tokens arriving on its socket are a sign of life (issue 18, "Activity"),
    # so a 2 s idle timeout does not stop it.
    run_handler "$CASE" ai-session-handler-codex-high "slow interval=0.5 duration=5" --idle-timeout 2
    expect_rc 0; expect_status phase-complete; expect_no_survivors
}
case_codex_tool_progress_live() {
    # The command line is shown when the command starts, not when it ends.
    start_handler "$CASE" ai-session-handler-codex-high "tool_sleep secs=4"
    wait_for 60 tool_running || fail "the tool never started"
    # The tool runs for 4 s; the line must be there, with the tool still running, well before.
    { wait_for 3 transcript_has "[codex] exec: " && tool_running; } \
        || fail "the command was not shown while it ran"
    wait "$PID"; RC=$?
    transcript_text >"$RUN_DIR/logs/$CASE.transcript"
    expect_rc 0; expect_status phase-complete; expect_no_survivors
}
case_claude_ok() {
    run_handler "$CASE" ai-session-handler-claude-high ok
    expect_rc 0; expect_status phase-complete
    expect_count 1 "Working on it."
    expect_no_blank_diagnostic; expect_no_splice; expect_no_survivors
}
case_claude_tool_quoted() {
    run_handler "$CASE" ai-session-handler-claude-high tool_quoted
    expect_rc 0; expect_status phase-complete
    expect_text "[claude] tool: Bash echo hello && echo &lt;phase-complete>x&lt;/phase-complete>"
    expect_text "[claude] tool result (error"
    expect_no_text "Secret thinking"
    expect_no_blank_diagnostic; expect_no_survivors
}
case_claude_quoted_same() {
    # A tag quoted inline in the final message makes it ambiguous: no result (fail closed).
    run_handler "$CASE" ai-session-handler-claude-high quoted_same
    expect_rc 4; expect_status missing-marker
    expect_text "no result reported: the final message is not one well-framed result block"
    expect_no_survivors
}
case_claude_nomarker() {
    run_handler "$CASE" ai-session-handler-claude-high nomarker
    expect_rc 4; expect_status missing-marker; expect_no_survivors
}
case_claude_401_retries_visible() {
    CLAUDE_CODE_MAX_RETRIES=2 run_handler "$CASE" ai-session-handler-claude-high err401
    expect_rc 4; expect_status agent-failed; expect_agent_exit 1
    expect_text "[claude] API error 401 (authentication_failed); retry 1 of 2 in "
    expect_count 1 "Invalid API key"
    expect_text "API error 401: Invalid API key"
    expect_no_survivors
}
case_claude_500_not_rate_limited() {
    CLAUDE_CODE_MAX_RETRIES=2 run_handler "$CASE" ai-session-handler-claude-high err500
    expect_rc 4; expect_status agent-failed; expect_agent_exit 1
    expect_text "retry 2 of 2"; expect_no_survivors
}
case_claude_429_exits_75() {
    CLAUDE_CODE_MAX_RETRIES=2 run_handler "$CASE" ai-session-handler-claude-high err429
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "rate limited (API status 429): API Error: Request rejected (429)"
    expect_no_survivors
}
case_claude_529_retries_beat_idle_timeout() {
    # The CLI retries for about 4 s; each retry is a line of output, so a 3 s idle timeout
    # does not fire, and the exhausted overload exits 75.
    CLAUDE_CODE_MAX_RETRIES=3 run_handler "$CASE" ai-session-handler-claude-high err529 --idle-timeout 3
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "rate limited (API status 529)"; expect_no_survivors
}
case_claude_usage_limit_exits_75() {
    run_handler "$CASE" ai-session-handler-claude-high "usage_limit reset_in=1200"
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "usage limit reached (mock) ∙ resets "; expect_no_survivors
}
case_claude_slow_stream_beats_idle_timeout() {
    run_handler "$CASE" ai-session-handler-claude-high "slow interval=0.5 duration=5" --idle-timeout 2
    expect_rc 0; expect_status phase-complete
    expect_line "[claude] tick 3"; expect_count 1 "tick 3"
    expect_no_survivors
}

# --- liveness and usage (issues 18 and 19) ---
case_claude_529_storm_beats_idle_timeout() {
    # Seven retries back off to about 19 s and 32 s, longer than the 10 s idle timeout: each
    # announced delay extends the idle deadline (EXTEND_TIMEOUT_USEC), so the storm ends in
    # exit 75, rate-limited, not in a timeout.
    CLAUDE_CODE_MAX_RETRIES=7 run_handler "$CASE" ai-session-handler-claude-high err529 --idle-timeout 10
    expect_rc 4; expect_status rate-limited; expect_agent_exit 75
    expect_text "retry 7 of 7"; expect_no_survivors
    grep -qF '"event":"idle-deadline-extended"' "$WS"/.ai-session-handler/plans/*/events.jsonl \
        || fail "no idle-deadline-extended event"
}
idle_stop_case() {
    # A model stream that sends nothing after its first event: the CLI's timers are no sign
    # of life, so the idle timeout stops it within a few seconds of the limit.
    run_handler "$CASE" "$1" "hang secs=120" --idle-timeout 5
    expect_rc 4; expect_status timeout
    expect_summary_has "no output, notification or activity for 5 s (idle timeout); last status 'generating' "
    expect_elapsed_at_most 20; expect_no_survivors
}
case_claude_hung_stream_stopped_by_idle_timeout() { idle_stop_case ai-session-handler-claude-high; }
case_codex_hung_stream_stopped_by_idle_timeout() { idle_stop_case ai-session-handler-codex-high; }
busy_tool_case() {
    # A tool that is silent and CPU-busy for 12 s under a 5 s idle timeout: its CPU is a
    # sign of life.
    run_handler "$CASE" "$1" "tool_busy secs=12" --idle-timeout 5
    expect_rc 0; expect_status phase-complete; expect_no_survivors
}
case_claude_busy_tool_beats_idle_timeout() { busy_tool_case ai-session-handler-claude-high; }
case_codex_busy_tool_beats_idle_timeout() { busy_tool_case ai-session-handler-codex-high; }
sleeping_tool_case() {
    # A tool that sleeps is idle, whatever the CLI's polling of it costs.
    run_handler "$CASE" "$1" "tool_sleep secs=60" --idle-timeout 5
    expect_rc 4; expect_status timeout
    expect_summary_has "no output, notification or activity for 5 s (idle timeout); last status '"
    expect_elapsed_at_most 25; expect_no_survivors
}
case_claude_sleeping_tool_stopped_by_idle_timeout() { sleeping_tool_case ai-session-handler-claude-high; }
case_codex_sleeping_tool_stopped_by_idle_timeout() { sleeping_tool_case ai-session-handler-codex-high; }
case_claude_usage_recorded() {
    # The mock reports 1234 input tokens (1000 of them from a cache) and 567 output tokens.
    run_handler "$CASE" ai-session-handler-claude-high "usage usage_in=1234 usage_cached=1000 usage_out=567"
    expect_rc 0; expect_status phase-complete
    expect_usage completeness reported
    expect_usage input_tokens 1234; expect_usage cached_input_tokens 1000
    expect_usage output_tokens 567
    expect_text "[claude] usage: 1234 in (1000 cached), 567 out tokens"
    expect_no_survivors
}
case_codex_usage_recorded() {
    run_handler "$CASE" ai-session-handler-codex-high "usage usage_in=1234 usage_cached=1000 usage_out=567"
    expect_rc 0; expect_status phase-complete
    expect_usage completeness reported
    expect_usage input_tokens 1234; expect_usage cached_input_tokens 1000
    expect_usage output_tokens 567; expect_usage cost_usd None
    expect_no_survivors
}

# signal_case WRAPPER SCENARIO SIGNAL READY: SIGNAL to the handler once READY holds.
signal_case() {
    local wrapper=$1 scen=$2 signal=$3 ready=$4 code
    start_handler "$CASE" "$wrapper" "$scen"
    wait_for 60 $ready || fail "never got ready ($ready)"
    kill "-$signal" "$PID"
    wait "$PID"; RC=$?
    transcript_text >"$RUN_DIR/logs/$CASE.transcript"
    code=$([ "$signal" = INT ] && echo 130 || echo 143)
    expect_rc "$code"; expect_status interrupted; expect_no_survivors
}
streaming() { transcript_has "tick 2"; }
case_codex_sigterm_mid_tool() { signal_case ai-session-handler-codex-high "tool_sleep secs=45" TERM tool_running; }
case_codex_sigint_mid_tool() { signal_case ai-session-handler-codex-high "tool_sleep secs=45" INT tool_running; }
case_codex_sigterm_mid_stream() {
    # Codex shows nothing until the message is complete; wait for the request instead.
    signal_case ai-session-handler-codex-high "slow interval=0.5 duration=30" TERM mock_streaming
}
case_codex_sigint_mid_stream() {
    signal_case ai-session-handler-codex-high "slow interval=0.5 duration=30" INT mock_streaming
}
case_claude_sigterm_mid_tool() { signal_case ai-session-handler-claude-high "tool_sleep secs=45" TERM tool_running; }
case_claude_sigint_mid_tool() { signal_case ai-session-handler-claude-high "tool_sleep secs=45" INT tool_running; }
case_claude_sigterm_mid_stream() { signal_case ai-session-handler-claude-high "slow interval=0.5 duration=30" TERM streaming; }
case_claude_sigint_mid_stream() { signal_case ai-session-handler-claude-high "slow interval=0.5 duration=30" INT streaming; }
mock_streaming() { grep -q '"scenario": "slow"' "$RUN_DIR/logs/mock-requests.jsonl" && sleep 1; }

# by_hand_case WRAPPER SIGNAL: the wrapper without the handler, stopped mid-tool; it must
# leave nothing behind itself (the CLIs start tools in their own sessions).
by_hand_case() {
    local wrapper=$1 signal=$2
    start_by_hand "$CASE" "$wrapper" "tool_sleep secs=45"
    wait_for 60 tool_running || fail "the tool never started"
    kill "-$signal" "$PID"
    wait "$PID"; RC=$?
    expect_rc $([ "$signal" = INT ] && echo 130 || echo 143)
    expect_no_survivors
}
case_codex_by_hand_sigterm_mid_tool() { by_hand_case ai-session-handler-codex-high TERM; }
case_codex_by_hand_sigint_mid_tool() { by_hand_case ai-session-handler-codex-high INT; }
case_codex_by_hand_sigterm_mid_tool_unsandboxed() {
    # Without Codex's sandbox (whose helper dies with Codex) the tool outlives Codex.
    CODEX_LEAN_SANDBOX=danger by_hand_case ai-session-handler-codex-high TERM
}
case_codex_sigterm_mid_tool_unsandboxed() {
    CODEX_LEAN_SANDBOX=danger signal_case ai-session-handler-codex-high "tool_sleep secs=45" TERM tool_running
}
case_claude_by_hand_sigterm_mid_tool() { by_hand_case ai-session-handler-claude-high TERM; }
case_claude_by_hand_sigint_mid_tool() { by_hand_case ai-session-handler-claude-high INT; }

ALL_CASES=$(declare -F | awk '{print $3}' | sed -n 's/^case_//p')

run_cases() {
    local results=() passed=0 failed=0 name started
    for name in "$@"; do
        declare -F "case_$name" >/dev/null || die "no case $name (see --list)"
    done
    for name in "$@"; do
        CASE=$name FAILED=() TOKEN=$name-$$-$RANDOM
        started=$SECONDS
        "case_$name"
        if [ "${#FAILED[@]}" -eq 0 ]; then
            passed=$((passed + 1)); results+=("| $name | pass | $((SECONDS - started)) s |")
            say "PASS $name"
        else
            failed=$((failed + 1)); results+=("| $name | FAIL: $(IFS=';'; echo "${FAILED[*]}") | $((SECONDS - started)) s |")
            say "FAIL $name: $(IFS=';'; echo "${FAILED[*]}")"
        fi
        # Whatever a failed case left behind must not disturb the next one.
        for pid in $(survivors | grep -oE '(^|; )[0-9]+' | grep -oE '[0-9]+'); do kill -KILL "$pid" 2>/dev/null; done
    done
    {
        echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -sm); $VERSIONS; logs: $RUN_DIR/logs"
        echo
        echo "| Case | Result | Time |"
        echo "|---|---|---|"
        printf '%s\n' "${results[@]}"
        echo
        echo "$passed passed, $failed failed"
    } | tee "$RUN_DIR/summary.md"
    [ "$failed" -eq 0 ]
}

# --- recording replay fixtures ----------------------------------------------------------
# Records the CLIs' raw output for tests/it/wrapper_replay.rs: each launcher is run directly
# (no wrapper) with the arguments a wrapper passes, through record.py, with a real handler
# prompt on stdin. "json"/"partial" are the current wrappers' arguments; "human"/"whole" are
# those of the wrappers before issue 13, kept to show what a launcher that drops --json or
# --include-partial-messages produces.

record_one() {
    local dir=$1 cli=$2 mode=$3 scen=$4 launcher args=() out
    shift 4
    case "$cli/$mode" in
        codex/json) launcher=codex-lean; args=(exec --json --color never --output-last-message "$TMPDIR/final-message.txt") ;;
        codex/human) launcher=codex-lean; args=(exec --color never --output-last-message "$TMPDIR/final-message.txt") ;;
        claude/partial) launcher=claude-lean; args=(--effort high -p --output-format stream-json --verbose --include-partial-messages) ;;
        claude/whole) launcher=claude-lean; args=(--effort high -p --output-format stream-json --verbose) ;;
    esac
    out=$dir/$cli/$mode/${scen%% *}.json
    if [ "${#RECORD_ONLY[@]}" -gt 0 ] && ! printf '%s\n' "${RECORD_ONLY[@]}" | grep -qxF "$cli/$mode/${scen%% *}"; then
        return
    fi
    mkdir -p "$(dirname "$out")"
    rm -f "$TMPDIR/final-message.txt"
    new_workspace "record-$cli-$mode-${scen%% *}"
    scenario $scen
    (cd "$WS" && env CODEX_REASONING_EFFORT=high "$@" python3 "$here/record.py" --out "$out" \
        --cli "$cli $([ "$cli" = codex ] && echo "$CODEX_VERSION" || echo "$CLAUDE_VERSION")" \
        --scenario "$scen" -- "$repo/examples/launchers/$launcher" "${args[@]}" \
        <"$RUN_DIR/prompt.txt" >/dev/null 2>&1)
    RECORDED+=("$cli/$mode/${scen%% *}")
    say "recorded $out"
}

record_all() {
    local dir=$1 retries=CLAUDE_CODE_MAX_RETRIES=2 scen
    # A real worker prompt, as the handler renders it.
    new_workspace prompt
    printf '#!/bin/sh\ncat >"%s"\necho "<phase-complete>prompt saved</phase-complete>"\n' "$RUN_DIR/prompt.txt" >"$RUN_DIR/save-prompt"
    chmod +x "$RUN_DIR/save-prompt"
    (cd "$WS" && ai-session-handler run --plan docs/plans/p.md --agent-cmd "$RUN_DIR/save-prompt" --max-phases 1 --quiet >/dev/null)
    for scen in ok tool_quoted quoted_same nomarker err401 err429 err529 err500 \
        "usage_limit reset_in=1200" "slow interval=0.2 duration=2" "tool_sleep secs=2" \
        "usage usage_in=1234 usage_cached=1000 usage_out=567"; do
        record_one "$dir" codex json "$scen"
    done
    for scen in ok tool_quoted quoted_same err429 "usage_limit reset_in=1200" "tool_sleep secs=2"; do
        record_one "$dir" codex human "$scen"
    done
    for scen in ok tool_quoted quoted_same nomarker err401 err429 err529 err500 \
        "usage_limit reset_in=1200" "slow interval=0.2 duration=2" "tool_sleep secs=2" \
        "usage usage_in=1234 usage_cached=1000 usage_out=567"; do
        record_one "$dir" claude partial "$scen" $retries
    done
    for scen in ok tool_quoted err401 err429 err529 "usage_limit reset_in=1200" \
        "slow interval=0.2 duration=2" "tool_sleep secs=2"; do
        record_one "$dir" claude whole "$scen" $retries
    done
}

# --- measuring activity -----------------------------------------------------------------
# What the CLIs' processes do while the runner sees no output: the numbers the activity
# rule's thresholds come from (docs/liveness.md). Each scenario runs a wrapper (no handler)
# through measure_activity.py, which samples its process tree every 0.1 s and sums the
# changes per 1 s window over the part of the run the scenario is about.

measure_one() {
    local cli=$1 scen=$2 skip=$3 span=$4 wrapper out
    shift 4
    wrapper=ai-session-handler-$cli-high
    out=$RUN_DIR/measure/$cli-${scen// /_}
    if [ "${#MEASURE_ONLY[@]}" -gt 0 ] && ! printf '%s\n' "${MEASURE_ONLY[@]}" | grep -qxF "$cli/${scen%% *}"; then
        return
    fi
    mkdir -p "$RUN_DIR/measure"
    new_workspace "measure-$cli-${scen%% *}"
    scenario $scen
    (cd "$WS" && env "$@" python3 "$here/measure_activity.py" --mock-log "$RUN_DIR/logs/mock-requests.jsonl" \
        --samples "$out.samples.jsonl" --skip "$skip" --span "$span" --duration $((skip + span + 30)) \
        -- "$wrapper" >"$out.json") || say "e2e: measuring $cli $scen failed"
    python3 - "$cli" "$scen" "$out.json" <<'PY'
import json, sys
cli, scen, path = sys.argv[1:]
d = json.load(open(path))
w = d["windows"]
def col(key, scale=1.0):
    if not w:
        return "-"
    values = sorted(x[key] / x["seconds"] * scale for x in w)
    return "%.3g / %.3g / %.3g" % (values[0], values[len(values) // 2], values[-1])
print("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
    cli, scen, len(w), col("sched_ns", 1e-6), col("ticks", 10.0), col("rchar"), col("syscr"),
    col("vcsw"), col("tcp_rx")))
PY
}

measure_all() {
    echo "CPU in ms per second of wall time (schedstat ns; stat ticks x 10 ms), rchar in bytes/s,"
    echo "syscr and voluntary context switches per second, TCP bytes received per second:"
    echo "min / median / max over 1 s windows."
    echo
    echo "| CLI | Scenario | Windows | CPU ms/s (schedstat) | CPU ms/s (ticks) | rchar B/s | syscr/s | vcsw/s | TCP rx B/s |"
    echo "|---|---|---|---|---|---|---|---|---|"
    local cli
    for cli in claude codex; do
        measure_one "$cli" "hang secs=40" 3 20
        measure_one "$cli" "slow interval=0.5 duration=25" 3 18
        measure_one "$cli" "slow interval=2 duration=25" 3 18
        measure_one "$cli" "tool_sleep secs=25" 5 15
        measure_one "$cli" "tool_busy secs=25" 5 15
    done
}

# The handler's sampler and rule on a real CLI's process tree: 23 verdicts, 0.5 s apart.
probe() {
    local cli=$1 pid
    shift
    new_workspace "probe-$cli"
    scenario "$@"
    (cd "$WS" && echo "Do the phase." | exec setsid "ai-session-handler-$cli-high" >"$RUN_DIR/logs/probe.out" 2>&1) &
    pid=$!
    sleep 4
    [ -n "$CALLER_CARGO" ] || die "--probe needs cargo"
    (cd "$repo" && AISH_SAMPLE_PID=$pid CARGO_HOME=$CALLER_CARGO_HOME RUSTUP_HOME=$CALLER_RUSTUP_HOME \
        "$CALLER_CARGO" test --quiet --features failpoints --lib -- \
        --ignored --nocapture probe_a_running_process_tree 2>&1) | grep -E "^probe:|nothing to probe|error"
    kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# --- main -------------------------------------------------------------------------------

case "${1-}" in
    --list) printf '%s\n' $ALL_CASES; exit 0 ;;
    -h | --help) sed -n '2,34p' "$0"; exit 0 ;;
esac
command -v python3 >/dev/null || die "python3 is needed for the mock API"
install_clis
build_binaries
isolate
trap mock_stop EXIT
mock_start
if [ "${1-}" = --record ]; then
    [ -n "${2-}" ] || die "usage: $0 --record DIR [CLI/MODE/SCENARIO...]"
    mkdir -p "$2"
    dir=$(cd "$2" && pwd)
    RECORD_ONLY=("${@:3}") RECORDED=()
    record_all "$dir"
    for name in "${RECORD_ONLY[@]}"; do
        printf '%s\n' "${RECORDED[@]}" | grep -qxF "$name" || die "no recording $name (see record_all)"
    done
    exit 0
fi
if [ "${1-}" = --probe ]; then
    [ "$#" -ge 3 ] || die "usage: $0 --probe claude|codex SCENARIO..."
    probe "${@:2}"
    exit 0
fi
if [ "${1-}" = --measure ]; then
    MEASURE_ONLY=("${@:2}")
    measure_all | tee "$RUN_DIR/measure.md"
    exit 0
fi
if [ "$#" -eq 0 ]; then set -- $ALL_CASES; fi
run_cases "$@"
