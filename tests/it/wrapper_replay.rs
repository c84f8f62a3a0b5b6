//! Replays of the real Claude Code 2.1.197 and Codex 0.171.0 CLIs through the wrappers and
//! the handler (issue 13, and issue 11's exit-75 rate-limit protocol).
//!
//! Each test runs the real handler and wrapper binaries against a fake launcher that
//! re-emits a recording of the real CLI byte for byte, chunk for chunk
//! ([`crate::replay_launcher`]). The recordings were made against the project's mock model
//! API by `scripts/e2e-real-clis.sh --record`. Every defect the real CLIs exposed has a test
//! here, named in its doc comment; each of those failed against the wrappers as they were
//! before the fix, for the reason the defect describes (the replay gives the old wrappers the
//! output the real CLI gives their arguments). The other tests guard behaviour around them.
//!
//! Tests that look at what is shown *while* the CLI is busy hold the replay at a gate and
//! wait for the transcript (written as output arrives) to show it, so nothing depends on
//! timing.

use std::fs;
use std::process::{Child, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::common::*;
use crate::replay_launcher::Replay;
use crate::wrappers::{
    CLAUDE_HIGH, CODEX, assert_contains, path_with_fakes, run_wrapped, spawn_wrapper, transcript,
};

/// The diagnostics part of a transcript: after the header, before the trailer.
fn transcript_body(sandbox: &Sandbox) -> String {
    let text = transcript(sandbox);
    let body = text
        .split_once("\n---\n")
        .map_or(text.as_str(), |(_, rest)| rest);
    body.split_once("--- runner trailer ---")
        .map_or(body, |(body, _)| body)
        .to_owned()
}

/// The transcript so far, or nothing before the attempt has one.
fn transcript_so_far(sandbox: &Sandbox) -> String {
    sandbox
        .artifacts("plan.md", "transcripts")
        .first()
        .and_then(|path| fs::read_to_string(path).ok())
        .unwrap_or_default()
}

#[track_caller]
fn assert_lacks(haystack: &str, needle: &str) {
    assert!(
        !haystack.contains(needle),
        "unexpected {needle:?} in:\n{haystack}"
    );
}

#[track_caller]
fn assert_count(haystack: &str, needle: &str, count: usize) {
    assert_eq!(
        haystack.matches(needle).count(),
        count,
        "{needle:?} in:\n{haystack}"
    );
}

/// `run` on a one-phase plan in the background, like [`run_wrapped`].
fn spawn_wrapped(sandbox: &Sandbox, wrapper: &str, handler_args: &[&str]) -> Child {
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox
        .command()
        .env("PATH", path_with_fakes(sandbox))
        .env_remove("CODEX_MODEL")
        .env_remove("ANTHROPIC_MODEL")
        .args(["run", "--plan", "plan.md", "--agent-cmd", wrapper])
        .args(handler_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn handler")
}

/// Waits until the transcript contains `needle` while the replay is held at gate `gate`,
/// then lets the replay go on and returns whether it did (the gate is opened either way, so
/// a failing test does not leave the launcher waiting).
fn seen_while_held(sandbox: &Sandbox, gate: &str, needle: &str) -> bool {
    let seen = wait_until(PATIENCE, || transcript_so_far(sandbox).contains(needle));
    Replay::open_gate(sandbox, gate);
    seen
}

fn outcome(sandbox: &Sandbox) -> serde_json::Value {
    let outcomes = sandbox.artifacts("plan.md", "outcomes");
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    read_json(&outcomes[0])
}

/// A stand-in for a tool the CLI starts in its own session (both CLIs do), as the hook of a
/// replay: it outlives the CLI unless someone stops it.
const DETACHED_TOOL: &str =
    "setsid sleep 300 </dev/null >/dev/null 2>&1 &\ntouch \"$(dirname \"$0\")/../tool-started\"";

// --- Codex --------------------------------------------------------------------------------

/// Defect 1: `codex exec` echoed the 7 KB prompt, so `--stop-on-regex 'git commit'` matched
/// the handler's own instructions ("Do not run git commit, …") and stopped the phase.
#[test]
fn codex_prompt_is_not_passed_through_to_stop_regexes() {
    let sandbox = Sandbox::new();
    Replay::codex("ok").install(&sandbox);
    let run = run_wrapped(
        &sandbox,
        CODEX,
        &[],
        &["--quiet", "--stop-on-regex", "git commit"],
        &[],
    );
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
    assert_lacks(&transcript_body(&sandbox), "WORKER PROTOCOL");
    sandbox.assert_no_survivors();
}

/// Defect 1, for a launcher that does not pass `--json` on: the echoed prompt becomes one note.
#[test]
fn codex_echoed_prompt_is_one_note() {
    let sandbox = Sandbox::new();
    Replay::codex("ok").ignoring_arguments().install(&sandbox);
    let run = run_wrapped(
        &sandbox,
        CODEX,
        &[],
        &["--quiet", "--stop-on-regex", "git commit"],
        &[],
    );
    run.assert_code(0);
    let body = transcript_body(&sandbox);
    assert_lacks(&body, "WORKER PROTOCOL");
    let prompt = fs::read(&sandbox.artifacts("plan.md", "prompts")[0]).expect("prompt");
    assert_has_lines(
        &body,
        &[
            "[codex] user",
            &format!(
                "[codex] (the prompt, {} bytes, echoed by codex-lean; not shown)",
                prompt.len()
            ),
        ],
    );
}

/// Defect 6: the final message was shown two or three times (stderr item, stdout copy,
/// result block).
#[test]
fn codex_final_message_is_shown_once() {
    let sandbox = Sandbox::new();
    Replay::codex("ok").install(&sandbox);
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(0);
    let body = transcript_body(&sandbox);
    assert_count(&body, "Working on it.", 1);
    assert_count(&body, "<phase-complete>", 1);
    assert_count(&body, "Did the thing.", 1);
}

/// Defect 6: the reasoning summary was unlabelled, and a tag pair in a command line cut it
/// short (`/bin/bash -lc 'echo hello # print ' in …`).
#[test]
fn codex_reasoning_is_labelled_and_command_lines_are_escaped_whole() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_quoted").install(&sandbox);
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(0);
    let body = transcript_body(&sandbox);
    assert_contains(&body, "[codex] reasoning: Secret thinking:");
    assert_contains(
        &body,
        "[codex] exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'\n",
    );
    assert_contains(&body, "[codex] exec result (exit 2, 3 lines): hello");
    assert_contains(&body, "[codex] print('&lt;phase-blocked>')\n");
    assert_lacks(&body, "never shown");
    assert_eq!(outcome(&sandbox)["summary"], "Ran echo; it printed hello.");
}

/// Defect 6: partial lines were forwarded as they came, so a partial stderr line and a stdout
/// line were joined in the transcript (`[codex] tokens used[codex] The command…`). The
/// recording has `tokens used` read alone, then its line end and the stdout message 0 ms
/// later on the other pipe; a reader may take either pipe first, and the replay delivers
/// stdout first, which is what produced the splice.
#[test]
fn codex_stdout_and_stderr_lines_never_splice() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_sleep")
        .ignoring_arguments()
        .stdout_first_after(&["tokens used"], "partial", "stdout")
        .install(&sandbox);
    let child = spawn_wrapped(&sandbox, CODEX, &["--quiet"]);
    // The partial line has reached the transcript before the other pipe's line comes, and
    // that line has before the partial one ends.
    let partial_seen = seen_while_held(&sandbox, "partial", "[codex] tokens used");
    let stdout_seen = seen_while_held(&sandbox, "stdout", "The command printed hello.");
    let run = wait_for_exit(child, PATIENCE);
    assert!(
        partial_seen && stdout_seen,
        "the replay did not get through"
    );
    run.assert_code(0);
    let body = transcript_body(&sandbox);
    for line in body.lines() {
        let prefixes = line.matches("[codex] ").count();
        assert!(
            prefixes == 0 || (prefixes == 1 && line.starts_with("[codex] ")),
            "spliced line {line:?} in:\n{body}"
        );
    }
    assert_has_line(&body, "[codex] tokens used");
}

/// Issue 11, item 3: a 429 Codex's own retries did not get past exits 75 with its message.
#[test]
fn codex_rate_limit_exits_75_with_the_message() {
    let sandbox = Sandbox::new();
    Replay::codex("err429").install(&sandbox);
    let run = run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]);
    run.assert_code(4);
    assert_contains(&run.stderr, "agent command exited with code 75");
    assert_eq!(outcome(&sandbox)["exit_code"], 75);
    let body = transcript_body(&sandbox);
    assert_count(
        &body,
        "exceeded retry limit, last status: 429 Too Many Requests",
        1,
    );
    assert_contains(&body, "[codex] no result reported: rate limited");
}

/// Issue 13: an overload (529) Codex retried and gave up on is shown retry by retry, and
/// exits 75 like a rate limit.
#[test]
fn codex_overload_shows_its_retries_and_exits_75() {
    let sandbox = Sandbox::new();
    Replay::codex("err529").install(&sandbox);
    let run = run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]);
    run.assert_code(4);
    assert_contains(
        &run.stderr,
        "agent command exited with code 75 (temporary failure: rate limited)",
    );
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "rate-limited");
    assert_eq!(outcome["exit_code"], 75);
    let body = transcript_body(&sandbox);
    for retry in ["1/2", "2/2"] {
        assert_contains(
            &body,
            &format!("[codex] error: Reconnecting... {retry} (unexpected status 529 "),
        );
    }
    // The error that ended the turn, once (the URL names the mock's port of the recording).
    let last_error = "[codex] error: unexpected status 529 &lt;unknown status code>: mock 529 server_is_overloaded, url: ";
    assert_eq!(
        body.lines()
            .filter(|line| line.starts_with(last_error))
            .count(),
        1,
        "{body}"
    );
    assert_has_line(
        &body,
        "[codex] no result reported: rate limited (the error above)",
    );
    assert_lacks(&body, "<phase-");
    sandbox.assert_no_survivors();
}

/// Issue 11, item 3: a usage limit exits 75, and its reset time survives in the output.
#[test]
fn codex_usage_limit_exits_75_with_the_reset_time() {
    let sandbox = Sandbox::new();
    Replay::codex("usage_limit").install(&sandbox);
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(4);
    assert_eq!(outcome(&sandbox)["exit_code"], 75);
    let body = transcript_body(&sandbox);
    assert_contains(&body, "You’ve hit your usage limit.");
    assert_contains(&body, "try again at 1:");
}

/// An error that is not a rate limit keeps the CLI's exit code and is said once.
#[test]
fn codex_other_errors_keep_the_exit_code() {
    for scenario in ["err401", "err500"] {
        let sandbox = Sandbox::new();
        Replay::codex(scenario).install(&sandbox);
        run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(4);
        assert_eq!(outcome(&sandbox)["exit_code"], 1, "{scenario}");
        let body = transcript_body(&sandbox);
        assert_contains(&body, "[codex] error: Reconnecting... 1/2");
        assert_contains(
            &body,
            "[codex] no result reported: codex-lean's turn failed",
        );
    }
}

/// Codex prints whole items; a command is shown when it starts, not when it ends.
#[test]
fn codex_commands_are_shown_when_they_start() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_sleep")
        .gate_after(&["\"item.started\""], "running")
        .install(&sandbox);
    let child = spawn_wrapped(&sandbox, CODEX, &["--quiet"]);
    let seen = seen_while_held(
        &sandbox,
        "running",
        "[codex] exec: /bin/bash -lc 'sleep 2; echo hello'\n",
    );
    let run = wait_for_exit(child, PATIENCE);
    assert!(seen, "the command was not shown while it ran");
    run.assert_code(0);
}

/// Codex reports a long message whole, once it is complete: each line of it once.
#[test]
fn codex_long_message_is_shown_once_when_complete() {
    let sandbox = Sandbox::new();
    Replay::codex("slow").install(&sandbox);
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(0);
    let body = transcript_body(&sandbox);
    for tick in 1..=9 {
        assert_count(&body, &format!("[codex] tick {tick}\n"), 1);
    }
    assert_eq!(outcome(&sandbox)["summary"], "Slow stream finished.");
}

// --- Both ---------------------------------------------------------------------------------

/// A final message without a block, or with a tag quoted inline before its block, is no
/// result (fail closed), and the wrapper says why.
#[test]
fn final_messages_that_are_not_one_block_are_no_result() {
    let cases = [
        (CODEX, Replay::codex("nomarker"), "it has no result block"),
        (
            CLAUDE_HIGH,
            Replay::claude("nomarker"),
            "it has no result block",
        ),
        (
            CODEX,
            Replay::codex("quoted_same"),
            "multiple terminal markers in stdout",
        ),
        (
            CLAUDE_HIGH,
            Replay::claude("quoted_same"),
            "multiple terminal markers in stdout",
        ),
    ];
    for (wrapper, replay, why) in cases {
        let sandbox = Sandbox::new();
        replay.install(&sandbox);
        run_wrapped(&sandbox, wrapper, &[], &["--quiet"], &[]).assert_code(4);
        assert_eq!(outcome(&sandbox)["status"], "missing-marker");
        let body = transcript_body(&sandbox);
        assert_contains(
            &body,
            "no result reported: the final message is not one well-framed result block: ",
        );
        assert_contains(&body, why);
        assert!(!body.contains("<phase-"), "{body}");
    }
}

// --- Claude -------------------------------------------------------------------------------

/// Defect 2: API retries were invisible (176 s of silence for a 401 with default retries).
#[test]
fn claude_api_retries_are_shown_as_they_happen() {
    let sandbox = Sandbox::new();
    Replay::claude("err401")
        .gate_after(&["\"attempt\":2"], "retrying")
        .install(&sandbox);
    let child = spawn_wrapped(&sandbox, CLAUDE_HIGH, &["--quiet"]);
    let seen = seen_while_held(
        &sandbox,
        "retrying",
        "[claude] API error 401 (authentication_failed); retry 2 of 2 in 1.0 s\n",
    );
    let run = wait_for_exit(child, PATIENCE);
    assert!(seen, "the retry was not shown while the CLI retried");
    run.assert_code(4);
    assert_contains(
        &transcript_body(&sandbox),
        "[claude] API error 401 (authentication_failed); retry 1 of 2 in 0.6 s\n",
    );
}

/// Defect 5: the error was printed twice and without the HTTP status.
#[test]
fn claude_api_error_is_reported_once_with_its_status() {
    let sandbox = Sandbox::new();
    Replay::claude("err401").install(&sandbox);
    run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &[]).assert_code(4);
    assert_eq!(outcome(&sandbox)["exit_code"], 1);
    let body = transcript_body(&sandbox);
    assert_count(&body, "Invalid API key", 1);
    assert_contains(
        &body,
        "[claude] no result reported: claude-lean reported API error 401: Invalid API key · Fix external API key\n",
    );
}

/// Defect 3: without `--include-partial-messages` text appeared only once a whole message
/// was complete, so a model streaming for longer than the idle timeout was stopped.
#[test]
fn claude_text_is_shown_as_it_streams_and_only_once() {
    let sandbox = Sandbox::new();
    Replay::claude("slow")
        .gate_at_time_of("tick 3", "streaming")
        .install(&sandbox);
    let child = spawn_wrapped(&sandbox, CLAUDE_HIGH, &["--quiet"]);
    let seen = seen_while_held(&sandbox, "streaming", "[claude] tick 3\n");
    let run = wait_for_exit(child, PATIENCE);
    assert!(seen, "the text was not shown while it streamed");
    run.assert_code(0);
    let body = transcript_body(&sandbox);
    assert_count(&body, "tick 3", 1);
    assert_count(&body, "<phase-complete>", 1);
    assert!(
        fs::read_to_string(sandbox.path("replay/argv"))
            .expect("argv")
            .contains("--include-partial-messages"),
    );
}

/// Defect 6: a hidden live block left an empty `[claude] ` line, on the console too.
#[test]
fn claude_hidden_block_leaves_no_empty_line() {
    let sandbox = Sandbox::new();
    Replay::claude("ok").install(&sandbox);
    let run = run_wrapped(&sandbox, CLAUDE_HIGH, &[], &[], &[]);
    run.assert_code(0);
    // No blank line either: the handler's console hides the wrapper's final block together
    // with its line end (docs/decisions.md, "A hidden block on lines of its own takes its line
    // end with it").
    assert_eq!(
        run.stdout,
        "[claude] Working on it.\n\
         [claude] usage: 10 in (0 cached), 20 out tokens, $0.0006 (Claude Code's estimate, not a bill)\n\
         runner-complete: all phases complete\n"
    );
    let body = transcript_body(&sandbox);
    assert!(!body.lines().any(|line| line == "[claude] "), "{body}");
    assert_count(&body, "Working on it.", 1);
}

/// Defect 6: a tag pair in a tool's command was cut (`tool: Bash echo hello && echo`), and
/// tool results were never shown.
#[test]
fn claude_tool_lines_escape_tags_and_results_are_summarised() {
    let sandbox = Sandbox::new();
    Replay::claude("tool_quoted").install(&sandbox);
    run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &[]).assert_code(0);
    let body = transcript_body(&sandbox);
    assert_contains(
        &body,
        "[claude] tool: Bash echo hello && echo &lt;phase-complete>x&lt;/phase-complete>\n",
    );
    assert_contains(
        &body,
        "[claude] tool result (error, 4 lines): Exit code 2 hello /bin/bash: eval: line 3: syntax error",
    );
    assert_lacks(&body, "Secret thinking");
    assert_eq!(outcome(&sandbox)["summary"], "Ran echo; it printed hello.");
}

/// Issue 11, item 3: a 429, a 529 or a usage limit the CLI's retries did not get past exits
/// 75 with the provider's message, reset time included.
#[test]
fn claude_rate_limits_exit_75_with_the_message() {
    let cases = [
        (
            "err429",
            "[claude] no result reported: rate limited (API status 429): API Error: Request rejected (429) · Number of requests has exceeded your rate limit (mock)\n",
        ),
        (
            "err529",
            "[claude] no result reported: rate limited (API status 529): API Error: 529 Overloaded (mock).",
        ),
        (
            "usage_limit",
            "[claude] no result reported: rate limited (API status 429): API Error: Request rejected (429) · 5-hour usage limit reached (mock) ∙ resets ",
        ),
    ];
    for (scenario, shown) in cases {
        let sandbox = Sandbox::new();
        Replay::claude(scenario).install(&sandbox);
        let run = run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &[]);
        run.assert_code(4);
        assert_eq!(outcome(&sandbox)["exit_code"], 75, "{scenario}");
        assert_contains(&transcript_body(&sandbox), shown);
    }
}

/// A server error is not a rate limit: the CLI's exit code stays.
#[test]
fn claude_server_error_is_not_a_rate_limit() {
    let sandbox = Sandbox::new();
    Replay::claude("err500").install(&sandbox);
    run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &[]).assert_code(4);
    assert_eq!(outcome(&sandbox)["exit_code"], 1);
    assert_contains(
        &transcript_body(&sandbox),
        "[claude] no result reported: claude-lean reported API error 500: API Error: 500",
    );
}

// --- Processes ----------------------------------------------------------------------------

/// Defect 4: run by hand and stopped, a wrapper left the CLI's tool (in its own session)
/// running. Now it stops its child's descendants itself when no handler does.
#[test]
fn by_hand_a_stopped_wrapper_leaves_no_process() {
    let cases = [
        (CODEX, Replay::codex("tool_sleep"), "sleep 2; echo hello"),
        (
            CLAUDE_HIGH,
            Replay::claude("tool_sleep"),
            "\"type\":\"tool_use\"",
        ),
    ];
    for (wrapper, replay, needle) in cases {
        let sandbox = Sandbox::new();
        replay
            .before(&[needle], DETACHED_TOOL)
            .gate_after(&[needle], "never")
            .install(&sandbox);
        let child = spawn_wrapper(&sandbox, wrapper);
        assert!(wait_until(PATIENCE, || sandbox
            .path("tool-started")
            .exists()));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("signal wrapper");
        let run = wait_for_exit(child, PATIENCE);
        run.assert_code(143);
        sandbox.assert_no_survivors();
    }
}

/// By hand, descendants left behind by a launcher that finished are stopped too, and named.
#[test]
fn by_hand_leftover_descendants_are_stopped_and_named() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_sleep")
        .before(&["sleep 2; echo hello"], DETACHED_TOOL)
        .install(&sandbox);
    let run = wait_for_exit(spawn_wrapper(&sandbox, CODEX), PATIENCE);
    run.assert_code(0);
    assert_contains(
        &run.stderr,
        "[codex] stopped 1 leftover process of codex-lean: ",
    );
    sandbox.assert_no_survivors();
}

/// Under the handler the wrapper leaves that to the handler, whose transcript trailer then
/// names what it stopped.
#[test]
fn under_the_handler_the_handler_stops_leftovers() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_sleep")
        .before(&["sleep 2; echo hello"], DETACHED_TOOL)
        .install(&sandbox);
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]).assert_code(0);
    let text = transcript(&sandbox);
    assert_contains(&text, "escaped_descendants_killed: ");
    assert_lacks(&text, "leftover process");
    sandbox.assert_no_survivors();
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
}

// --- Notifications (issues 18 and 19) ---------------------------------------------------------
//
// The wrapper is run directly with `NOTIFY_SOCKET` naming a datagram socket the test binds
// itself, as the runner's would be; what arrives there is what the runner would hear.

/// A socket in the sandbox the wrapper notifies, read after the wrapper is done.
struct NotifyInbox {
    socket: std::os::unix::net::UnixDatagram,
    path: std::path::PathBuf,
    received: std::cell::RefCell<Vec<String>>,
}

impl NotifyInbox {
    fn bind(sandbox: &Sandbox) -> Self {
        let path = sandbox.path("notify.sock");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).expect("bind notify socket");
        socket.set_nonblocking(true).expect("non-blocking");
        Self {
            socket,
            path,
            received: Default::default(),
        }
    }

    /// Every datagram received so far.
    fn datagrams(&self) -> Vec<String> {
        let mut buffer = vec![0u8; 65_536];
        let mut received = self.received.borrow_mut();
        while let Ok(len) = self.socket.recv(&mut buffer) {
            received.push(String::from_utf8_lossy(&buffer[..len]).into_owned());
        }
        received.clone()
    }
}

/// Starts `wrapper` by hand with `NOTIFY_SOCKET` set to `inbox`.
fn spawn_notifying(sandbox: &Sandbox, wrapper: &str, inbox: &NotifyInbox) -> Child {
    std::process::Command::new(wrapper)
        .current_dir(&sandbox.root)
        .env("PATH", path_with_fakes(sandbox))
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .env("NOTIFY_SOCKET", &inbox.path)
        .env_remove("CODEX_MODEL")
        .env_remove("ANTHROPIC_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wrapper")
}

fn statuses(datagrams: &[String]) -> Vec<&str> {
    datagrams
        .iter()
        .filter_map(|datagram| datagram.strip_prefix("STATUS="))
        .collect()
}

fn usage_reports(datagrams: &[String]) -> Vec<serde_json::Value> {
    datagrams
        .iter()
        .filter_map(|datagram| datagram.strip_prefix("X_AISH_USAGE="))
        .map(|report| serde_json::from_str(report).expect("a usage report is JSON"))
        .collect()
}

/// Claude under a 529 storm: each announced retry is a status, and extends the idle deadline
/// by its delay plus 5 s (issue 18 item 4), so `--idle-timeout` does not stop it while it
/// waits as told.
#[test]
fn claude_retries_are_statuses_that_extend_the_idle_deadline() {
    let sandbox = Sandbox::new();
    Replay::claude("err529").install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    let run = wait_for_exit(spawn_notifying(&sandbox, CLAUDE_HIGH, &inbox), PATIENCE);
    run.assert_code(75);
    let datagrams = inbox.datagrams();
    let retries = statuses(&datagrams)
        .into_iter()
        .filter(|status| status.starts_with("API error 529 (overloaded); retry"))
        .collect::<Vec<_>>();
    assert_eq!(
        retries,
        [
            "API error 529 (overloaded); retry 1 of 2 in 0.6 s",
            "API error 529 (overloaded); retry 2 of 2 in 1.2 s"
        ],
        "{datagrams:#?}"
    );
    // The recorded delays, 601.126 ms and 1178.555 ms, plus 5 s.
    let extensions: Vec<&String> = datagrams
        .iter()
        .filter(|datagram| datagram.starts_with("EXTEND_TIMEOUT_USEC="))
        .collect();
    assert_eq!(
        extensions,
        ["EXTEND_TIMEOUT_USEC=5601126", "EXTEND_TIMEOUT_USEC=6178554"]
    );
}

/// Claude's thinking, tool use and generation are statuses; the tool's carries the tool line
/// (tag text defused as in the diagnostics).
#[test]
fn claude_thinking_tool_use_and_generation_are_statuses() {
    let sandbox = Sandbox::new();
    Replay::claude("tool_quoted").install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    wait_for_exit(spawn_notifying(&sandbox, CLAUDE_HIGH, &inbox), PATIENCE).assert_code(0);
    let datagrams = inbox.datagrams();
    let statuses = statuses(&datagrams);
    assert_eq!(
        statuses,
        [
            "generating",
            "thinking",
            "generating",
            "tool: Bash",
            "tool: Bash echo hello && echo &lt;phase-complete>x&lt;/phase-complete>",
            "generating",
            "generating",
        ]
        .iter()
        .copied()
        // Repeats are not sent: the notifier keeps only changes.
        .fold(Vec::new(), |mut kept: Vec<&str>, status| {
            if kept.last() != Some(&status) {
                kept.push(status);
            }
            kept
        }),
        "{datagrams:#?}"
    );
}

/// Claude's usage: running totals per message as `final: false`, then the result event's
/// totals as `final: true`, input counting cache reads (issue 19 item 2).
#[test]
fn claude_usage_is_reported_as_it_goes_then_finally() {
    let sandbox = Sandbox::new();
    Replay::claude("usage").install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    let run = wait_for_exit(spawn_notifying(&sandbox, CLAUDE_HIGH, &inbox), PATIENCE);
    run.assert_code(0);
    let reports = usage_reports(&inbox.datagrams());
    let (last, running) = reports.split_last().expect("usage reports");
    assert!(!running.is_empty(), "{reports:#?}");
    for report in running {
        assert_eq!(report.get("final"), None, "{report}");
        assert_eq!(report["input_tokens"], 1234, "{report}");
        assert_eq!(report["cached_input_tokens"], 1000, "{report}");
    }
    assert_eq!(running.last().unwrap()["output_tokens"], 567);
    assert_eq!(
        *last,
        json!({"input_tokens": 1234, "cached_input_tokens": 1000, "output_tokens": 567,
            "cost_usd": 0.015845, "models": {"claude-opus-4-8[1m]": {"input_tokens": 1234,
            "cached_input_tokens": 1000, "output_tokens": 567, "cost_usd": 0.015845}},
            "final": true})
    );
    assert_contains(
        &run.stdout,
        "[claude] usage: 1234 in (1000 cached), 567 out tokens, $0.0158 (Claude Code's estimate, not a bill)\n",
    );
}

/// Stopped mid-tool, Claude leaves only running totals: nothing says final.
#[test]
fn a_stopped_claude_leaves_only_running_totals() {
    let sandbox = Sandbox::new();
    Replay::claude("tool_sleep")
        .gate_after(&["\"type\":\"tool_use\""], "never")
        .install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    let child = spawn_notifying(&sandbox, CLAUDE_HIGH, &inbox);
    // The tool started, and the wrapper has said so.
    assert!(
        wait_until(PATIENCE, || statuses(&inbox.datagrams())
            .contains(&"tool: Bash")),
        "{:#?}",
        inbox.datagrams()
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("signal wrapper");
    wait_for_exit(child, PATIENCE).assert_code(143);
    let reports = usage_reports(&inbox.datagrams());
    assert!(!reports.is_empty());
    assert!(
        reports.iter().all(|report| report.get("final").is_none()),
        "{reports:#?}"
    );
}

/// Codex: a turn in progress is `generating`; each command, reasoning and message item is a
/// status of its own.
#[test]
fn codex_items_are_statuses() {
    let sandbox = Sandbox::new();
    Replay::codex("tool_quoted").install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    wait_for_exit(spawn_notifying(&sandbox, CODEX, &inbox), PATIENCE).assert_code(0);
    let datagrams = inbox.datagrams();
    let statuses = statuses(&datagrams);
    assert_eq!(statuses[0], "generating", "{datagrams:#?}");
    for expected in [
        "reasoning: Secret thinking: &lt;phase-blocked>never shown&lt;/phase-blocked>",
        "exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'",
        "message: The command printed hello. &lt;phase-complete> Ran echo; it printed hello. &lt;/phase-complete>",
    ] {
        assert!(
            statuses.contains(&expected),
            "{expected:?} in {statuses:#?}"
        );
    }
    let exec = statuses
        .iter()
        .position(|status| status.starts_with("exec: "))
        .unwrap();
    assert_eq!(
        statuses[exec + 1],
        "generating",
        "the command ended: {statuses:#?}"
    );
}

/// Codex's usage comes from `turn.completed` (cached input already counted in the input), and
/// is final once Codex has exited by itself (issue 19 item 2).
#[test]
fn codex_usage_comes_from_the_completed_turn_and_is_final_at_the_end() {
    let sandbox = Sandbox::new();
    Replay::codex("usage").install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    wait_for_exit(spawn_notifying(&sandbox, CODEX, &inbox), PATIENCE).assert_code(0);
    let reports = usage_reports(&inbox.datagrams());
    let totals = json!({"input_tokens": 1234, "cached_input_tokens": 1000,
        "output_tokens": 567, "reasoning_tokens": 0});
    let mut last = totals.clone();
    last["final"] = json!(true);
    assert_eq!(reports, [totals, last]);
}

/// The launcher never gets `NOTIFY_SOCKET`: what the CLI and its tools start must not notify
/// the runner in the wrapper's name.
#[test]
fn the_launcher_never_gets_notify_socket() {
    let sandbox = Sandbox::new();
    Replay::codex("ok")
        .before(
            &["turn.started"],
            "echo \"${NOTIFY_SOCKET-unset}\" > \"$(dirname \"$0\")/../launcher-notify-socket\"",
        )
        .install(&sandbox);
    let inbox = NotifyInbox::bind(&sandbox);
    wait_for_exit(spawn_notifying(&sandbox, CODEX, &inbox), PATIENCE).assert_code(0);
    assert_eq!(
        fs::read_to_string(sandbox.path("launcher-notify-socket")).expect("the hook ran"),
        "unset\n"
    );
    assert!(!inbox.datagrams().is_empty(), "the wrapper itself notified");
}
