//! Adversarial cases from issue 14 (docs/reliability.md, "Adversarial cases"): hostile
//! agents, stalled and vanished consoles, hangups, special files, nesting and control
//! characters. Each test drives the real binary and asserts only what a user can observe.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use crate::common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// How long a handler may take to finish once nothing holds it any more.
const HANG_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A one-phase plan and an agent with `body` after `cat >/dev/null`.
fn one_phase(body: &str) -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(&sandbox, body);
    (sandbox, agent)
}

fn spawn_run(sandbox: &Sandbox, agent: &Path, extra: &[&str]) -> Child {
    let mut args = vec![
        "run",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    sandbox.spawn(&args)
}

fn read_state(sandbox: &Sandbox) -> Option<Value> {
    let bytes = sandbox.state_bytes("plan.md")?;
    Some(serde_json::from_slice(&bytes).expect("state.json parses"))
}

fn only(files: Vec<std::path::PathBuf>) -> std::path::PathBuf {
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().expect("one file")
}

fn transcript(sandbox: &Sandbox) -> String {
    String::from_utf8_lossy(
        &fs::read(only(sandbox.artifacts("plan.md", "transcripts"))).expect("transcript"),
    )
    .into_owned()
}

fn outcome(sandbox: &Sandbox) -> Value {
    read_json(&only(sandbox.artifacts("plan.md", "outcomes")))
}

#[track_caller]
fn assert_stopped_as(sandbox: &Sandbox, status: &str) {
    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null(), "{state:#}");
    assert_eq!(state["stop"]["reason"], status, "{state:#}");
    assert_eq!(state["last_run"]["status"], status, "{state:#}");
    assert_eq!(outcome(sandbox)["status"], status);
}

// ---------------------------------------------------------------------------------------------
// Framing: an opening tag closed by another kind is broken framing
// ---------------------------------------------------------------------------------------------

#[test]
fn a_block_closed_by_another_kind_is_invalid_marker() {
    let (sandbox, agent) =
        one_phase("echo '<phase-complete>'\necho 'all done'\necho '</phase-blocked>'\n");
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(4);
    assert!(
        run.stderr.starts_with(
            "invalid-marker: agent output contained an invalid terminal marker (mismatched terminal marker in stdout)\n"
        ),
        "{}",
        run.stderr
    );
    assert_stopped_as(&sandbox, "invalid-marker");
    sandbox.assert_no_survivors();
}

#[test]
fn nested_blocks_stay_multiple_markers() {
    let (sandbox, agent) = one_phase(
        "echo '<phase-complete>'\necho '<phase-blocked>'\necho 'x'\necho '</phase-blocked>'\necho '</phase-complete>'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(4);
    assert!(
        run.stderr.starts_with("multiple-markers: "),
        "{}",
        run.stderr
    );
    assert_stopped_as(&sandbox, "multiple-markers");
}

// ---------------------------------------------------------------------------------------------
// Finding 1: SIGHUP and SIGQUIT are handled like SIGTERM
// ---------------------------------------------------------------------------------------------

#[test]
fn sighup_mid_run_stops_the_group_and_records_interrupted() {
    hangup_like_signal_mid_run(Signal::SIGHUP, 129, "SIGHUP");
}

#[test]
fn sigquit_mid_run_stops_the_group_and_records_interrupted() {
    hangup_like_signal_mid_run(Signal::SIGQUIT, 131, "SIGQUIT");
}

fn hangup_like_signal_mid_run(signal: Signal, code: i32, name: &str) {
    let (sandbox, _) = one_phase("");
    let agent = agent(
        &sandbox,
        &format!(
            "echo working\n(trap '' TERM HUP; while :; do sleep 1; done) &\ntouch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    let child = spawn_run(&sandbox, &agent, &[]);
    wait_running(&sandbox, "plan.md", "READY");
    send_signal(&child, signal);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(code);
    assert_has_line(
        &run.stderr,
        &format!("interrupted: handler interrupted while the worker was active ({name})"),
    );
    sandbox.assert_no_survivors();
    assert_stopped_as(&sandbox, "interrupted");
    assert_eq!(sandbox.state("plan.md")["completed_phase_ids"], json!([]));
}

// ---------------------------------------------------------------------------------------------
// Finding 11: smaller reports
// ---------------------------------------------------------------------------------------------

/// The signal lands while the last phase's outcome is being committed (the outcome fsync is
/// held by a failpoint): the phase completes, and the report must not speak of a next phase.
#[cfg(feature = "failpoints")]
#[test]
fn a_signal_after_the_last_commit_does_not_speak_of_a_next_phase() {
    let (sandbox, agent) = one_phase("echo '<phase-complete>done</phase-complete>'\n");
    let child = sandbox
        .quiet_run_command("plan.md", &agent, &[])
        .env("FAILPOINTS", "outcome-fsync=sleep(3000)")
        .spawn()
        .expect("spawn handler");
    assert!(
        wait_until(PATIENCE, || !sandbox
            .artifacts("plan.md", "outcomes")
            .is_empty()),
        "outcome never written"
    );
    send_signal(&child, Signal::SIGTERM);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(143);
    assert_eq!(
        run.stderr,
        "error: interrupted by SIGTERM after the last phase completed; every phase is complete and nothing was left to launch\n"
    );
    assert_eq!(run.stdout, "");
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert!(state["stop"].is_null(), "{state:#}");
}

/// The transcript was never created (its header write failed): the report says the tail is
/// unavailable in one line, not as a one-line "tail".
#[cfg(feature = "failpoints")]
#[test]
fn a_missing_transcript_tail_is_one_plain_line() {
    let (sandbox, agent) = one_phase("echo '<phase-complete>done</phase-complete>'\n");
    let run = Run::from_output(
        sandbox
            .quiet_run_command("plan.md", &agent, &[])
            .env("FAILPOINTS", "transcript-header-write=return")
            .output()
            .expect("run handler"),
    );
    run.assert_code(4);
    let transcript = sandbox.state("plan.md")["last_run"]["transcript_path"]
        .as_str()
        .expect("transcript path")
        .to_owned();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 5, "{}", run.stderr);
    assert_eq!(
        lines[3],
        format!("transcript tail unavailable: {transcript}: No such file or directory")
    );
    assert!(lines[4].starts_with("next: "), "{}", run.stderr);
}

#[test]
fn a_plan_with_a_byte_order_mark_runs_its_phases() {
    let sandbox = Sandbox::new();
    let plan = plan_with_phases(1).replace("# Test plan\n\nGlobal intent.\n\n", "");
    sandbox.write("plan.md", format!("\u{feff}{plan}"));
    let agent = agent(&sandbox, "echo '<phase-complete>done</phase-complete>'\n");
    let check = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", "true"]);
    check.assert_code(0);
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
}

#[test]
fn a_script_with_a_missing_interpreter_names_the_interpreter() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let script = sandbox.write("bin/agent.sh", "#!/nonexistent/interpreter -e\necho hi\n");
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let run = sandbox.run_plan("plan.md", &script, &["--quiet"]);
    run.assert_code(4);
    let expected = format!(
        "launch-failed: could not launch agent command: {}: interpreter /nonexistent/interpreter named on its #! line was not found (the script itself exists)",
        script.display()
    );
    assert_eq!(
        run.stderr.lines().next(),
        Some(expected.as_str()),
        "{}",
        run.stderr
    );
    assert_stopped_as(&sandbox, "launch-failed");
}

// A missing program, or a directory named as one, is refused before anything is written
// (exit 5; observability.rs covers both): only what fails at exec time is a launch-failed
// stop, and is explained as above.

// ---------------------------------------------------------------------------------------------
// Findings 7 and 9: what the runner prints holds no live result tag and no control character
// ---------------------------------------------------------------------------------------------

/// What an outer handler would make of this output: its framing verdict over both streams.
fn outer_verdict(run: &Run) -> ai_session_handler::domain::marker::MarkerVerdict {
    ai_session_handler::domain::marker::validate_streams(
        run.stdout.as_bytes(),
        run.stderr.as_bytes(),
    )
}

#[track_caller]
fn assert_no_tag_for_an_outer_handler(run: &Run) {
    assert!(
        matches!(
            outer_verdict(run),
            ai_session_handler::domain::marker::MarkerVerdict::Missing(_)
        ),
        "an outer handler would see a result tag ({:?}) in:\n--- stdout ---\n{}\n--- stderr ---\n{}",
        outer_verdict(run),
        run.stdout,
        run.stderr
    );
}

/// A nested run: the inner worker completed, then failed. The failure report's transcript
/// tail holds its `<phase-complete>` at a line start; the outer handler reading the inner
/// handler's output must see no tag at all — in the report, the refusal and `status`.
#[test]
fn reports_refusals_and_status_show_no_live_result_tag() {
    let (sandbox, agent) = one_phase(
        "echo 'inner work'\necho '<phase-complete>inner done</phase-complete>'\nexit 1\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(4);
    // The tail shows the tags as the agent printed them (a zero-width joiner after `<` keeps
    // them inert for an outer handler).
    assert_has_line(
        &run.stderr,
        "<\u{2060}phase-complete>inner done<\u{2060}/phase-complete>",
    );
    assert_no_tag_for_an_outer_handler(&run);
    // The transcript keeps the bytes.
    assert!(transcript(&sandbox).contains("\n<phase-complete>inner done</phase-complete>\n"));

    let refused = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    refused.assert_code(5);
    assert_has_line(
        &refused.stderr,
        "<\u{2060}phase-complete>inner done<\u{2060}/phase-complete>",
    );
    assert_no_tag_for_an_outer_handler(&refused);

    // A blocked reason quoting a tag, in the result line and in `status` (text and JSON).
    let blocked = agent_blocked_with(
        &sandbox,
        "use the &lt;phase-complete> tag? no: < /phase-complete>",
    );
    let run = sandbox.run_plan("plan.md", &blocked, &["--quiet", "--retry-stopped"]);
    run.assert_code(4);
    assert_no_tag_for_an_outer_handler(&run);
    for args in [
        &["status", "--plan", "plan.md"][..],
        &["status", "--plan", "plan.md", "--json"][..],
        &[
            "check",
            "--plan",
            "plan.md",
            "--agent-cmd",
            "true",
            "--json",
        ][..],
    ] {
        let shown = sandbox.run(args);
        shown.assert_code(0);
        assert_no_tag_for_an_outer_handler(&shown);
    }
}

/// An agent whose blocked reason is `reason` (printed with printf, so escapes in `reason`
/// become bytes).
fn agent_blocked_with(sandbox: &Sandbox, reason: &str) -> PathBuf {
    agent(
        sandbox,
        &format!("printf '<phase-blocked>{reason}</phase-blocked>\\n'\n"),
    )
}

#[test]
fn control_characters_from_agents_are_escaped_in_everything_printed() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    // ESC ] 0 ; title BEL (an OSC that retitles the terminal), a lone CR that would let the
    // rest overwrite the line, NUL, and CSI 2 J (clear the screen).
    let agent = agent_blocked_with(&sandbox, "evil\\033]0;pwned\\007 \\rok\\000 \\033[2J!");
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(2);
    assert_eq!(
        run.stdout,
        "phase-blocked: evil\\u{1b}]0;pwned\\u{7} \\rok\\u{0} \\u{1b}[2J!\n"
    );
    // The transcript and the outcome keep the agent's bytes.
    assert!(transcript(&sandbox).contains("evil\u{1b}]0;pwned\u{7} \rok\0 \u{1b}[2J!"));
    assert_eq!(
        outcome(&sandbox)["summary"],
        "evil\u{1b}]0;pwned\u{7} \rok\0 \u{1b}[2J!"
    );

    let clean = |text: &str| {
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    };
    let refused = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    refused.assert_code(5);
    assert!(clean(&refused.stderr), "{:?}", refused.stderr);
    assert!(
        refused.stderr.contains("evil\\u{1b}]0;pwned"),
        "{}",
        refused.stderr
    );
    for args in [
        &["status", "--plan", "plan.md"][..],
        &["status", "--plan", "plan.md", "--json"][..],
    ] {
        let shown = sandbox.run(args);
        shown.assert_code(0);
        assert!(clean(&shown.stdout), "{:?}", shown.stdout);
        assert!(shown.stdout.contains("evil\\u"), "{}", shown.stdout);
    }
    let json: Value = serde_json::from_str(
        &sandbox
            .run(&["status", "--plan", "plan.md", "--json"])
            .stdout,
    )
    .expect("status --json parses");
    assert_eq!(
        json["stop"]["clarification_request"],
        Value::Null,
        "{json:#}"
    );
    assert_eq!(
        json["last_run"]["summary"], "evil\u{1b}]0;pwned\u{7} \rok\0 \u{1b}[2J!",
        "the JSON escapes decode to the agent's text"
    );
}

// ---------------------------------------------------------------------------------------------
// Finding 5: special files never block, never exhaust memory
// ---------------------------------------------------------------------------------------------

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
}

/// Runs the handler with `args` and waits (bounded) for it: a handler blocked on a FIFO fails
/// the test instead of hanging it.
fn run_bounded(sandbox: &Sandbox, args: &[&str]) -> Run {
    wait_for_exit(sandbox.spawn(args), HANG_LIMIT)
}

#[test]
fn a_fifo_plan_is_refused_at_once_by_run_check_and_status() {
    let sandbox = Sandbox::new();
    let plan = sandbox.path("plan.md");
    mkfifo(&plan);
    let expected = format!(
        "error: {}: cannot read plan: not a regular file (a FIFO)",
        plan.display()
    );
    for args in [
        &["run", "--plan", "plan.md", "--agent-cmd", "true"][..],
        &["check", "--plan", "plan.md", "--agent-cmd", "true"][..],
        &["status", "--plan", "plan.md"][..],
    ] {
        let run = run_bounded(&sandbox, args);
        run.assert_code(5);
        assert_has_line(&run.stderr, &expected);
    }
    assert!(!sandbox.path(".ai-session-handler").exists());
}

#[test]
fn a_sparse_giant_plan_is_refused_by_its_size() {
    let sandbox = Sandbox::new();
    let plan = sandbox.path("plan.md");
    fs::File::create(&plan)
        .expect("plan")
        .set_len(3 << 30)
        .expect("sparse 3 GiB");
    let run = run_bounded(
        &sandbox,
        &["check", "--plan", "plan.md", "--agent-cmd", "true"],
    );
    run.assert_code(5);
    assert_has_line(
        &run.stderr,
        &format!(
            "error: {}: cannot read plan: 3221225472 bytes is over the 16777216-byte limit",
            plan.display()
        ),
    );
}

#[test]
fn fifo_config_and_state_are_refused_at_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let config = sandbox.path(".ai-session-handler/config.json");
    fs::create_dir_all(config.parent().expect("dir")).expect("mkdir");
    mkfifo(&config);
    let run = run_bounded(
        &sandbox,
        &["run", "--plan", "plan.md", "--agent-cmd", "true"],
    );
    run.assert_code(5);
    assert_has_line(
        &run.stderr,
        &format!(
            "error: {}: cannot read config: not a regular file (a FIFO)",
            config.display()
        ),
    );
    fs::remove_file(&config).expect("rm fifo");

    let state = sandbox.state_path("plan.md");
    fs::create_dir_all(state.parent().expect("dir")).expect("mkdir");
    mkfifo(&state);
    for args in [
        &["status", "--plan", "plan.md"][..],
        &["run", "--plan", "plan.md", "--agent-cmd", "true"][..],
    ] {
        let run = run_bounded(&sandbox, args);
        run.assert_code(5);
        assert_has_line(
            &run.stderr,
            &format!(
                "error: {}: cannot read state: not a regular file (a FIFO)",
                state.display()
            ),
        );
    }
}

/// Phase 1 replaces the plan with a FIFO: the re-hash before phase 2 must not block in
/// `open()`; the run stops with an input error and phase 1's completion kept.
#[test]
fn a_plan_replaced_by_a_fifo_mid_run_stops_the_run_at_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let plan = sandbox.path("plan.md");
    let agent = agent(
        &sandbox,
        &format!(
            "rm '{plan}'\nmkfifo '{plan}'\necho '<phase-complete>done</phase-complete>'\n",
            plan = plan.display()
        ),
    );
    let run = wait_for_exit(
        sandbox
            .quiet_run_command("plan.md", &agent, &[])
            .spawn()
            .expect("spawn"),
        HANG_LIMIT,
    );
    run.assert_code(5);
    assert_has_line(
        &run.stderr,
        &format!(
            "error: {}: cannot read plan: not a regular file (a FIFO)",
            plan.display()
        ),
    );
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
    sandbox.assert_no_survivors();
}

#[test]
fn a_fifo_log_file_is_refused_at_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let log = sandbox.path("log.fifo");
    mkfifo(&log);
    let log_arg = log.to_str().expect("utf-8");
    let run = run_bounded(
        &sandbox,
        &[
            "--log-level",
            "info",
            "--log-file",
            log_arg,
            "status",
            "--plan",
            "plan.md",
        ],
    );
    run.assert_code(5);
    assert_eq!(
        run.stderr,
        format!("error: --log-file {log_arg}: not a regular file (a FIFO)\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Finding 8: `status` and `check` during a healthy run
// ---------------------------------------------------------------------------------------------

#[test]
fn status_and_check_during_a_healthy_run_say_a_run_is_in_progress() {
    let (sandbox, _) = one_phase("");
    let agent = agent(
        &sandbox,
        &format!(
            "touch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    let child = spawn_run(&sandbox, &agent, &["--quiet"]);
    wait_running(&sandbox, "plan.md", "READY");
    let state = read_state(&sandbox).expect("state");
    let attempt = &state["active_attempt"];
    let (attempt_id, worker) = (
        attempt["id"].as_str().expect("id").to_owned(),
        attempt["process"]["pid"].as_u64().expect("pid"),
    );
    let handler = child.id();

    let status = sandbox.run(&["status", "--plan", "plan.md"]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!("run in progress: handler pid {handler} holds the plan workspace lock"),
    );
    assert_has_line(
        &status.stdout,
        &format!("active: phase-1 (running, attempt {attempt_id})"),
    );
    assert!(!status.stdout.contains("abandoned"), "{}", status.stdout);
    let json: Value = serde_json::from_str(
        &sandbox
            .run(&["status", "--plan", "plan.md", "--json"])
            .stdout,
    )
    .expect("json");
    assert_eq!(json["run_in_progress"], true);
    assert_eq!(json["handler_pid"], handler);

    let check = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", "true"]);
    check.assert_code(0);
    assert_has_line(
        &check.stdout,
        &format!(
            "note: a run is in progress: handler pid {handler} holds the plan workspace lock; run refuses until it ends"
        ),
    );
    assert_has_line(
        &check.stdout,
        &format!("note: phase phase-1 attempt {attempt_id} is running (worker pid {worker})"),
    );
    assert!(!check.stdout.contains("abandoned"), "{}", check.stdout);
    assert!(!check.stderr.contains("still alive"), "{}", check.stderr);

    send_signal(&child, Signal::SIGTERM);
    wait_for_exit(child, HANG_LIMIT).assert_code(143);
    sandbox.assert_no_survivors();
    // Afterwards nothing holds the workspace: status reports the state alone.
    let status = sandbox.run(&["status", "--plan", "plan.md"]);
    assert!(
        !status.stdout.contains("run in progress"),
        "{}",
        status.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// Findings 3, 4 and 10: the live console never holds the lifecycle up
// ---------------------------------------------------------------------------------------------

/// A reader that never reads: `sleep` with the handler's stdout as its stdin (like
/// `run … | (sleep 600)`). Killed when dropped.
struct StalledReader(std::process::Child);

impl StalledReader {
    fn start() -> Self {
        Self(
            std::process::Command::new("sleep")
                .arg("600")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("spawn sleep"),
        )
    }

    /// The write end of its stdin, for the handler's stdout.
    fn stdin(&mut self) -> std::process::Stdio {
        self.0.stdin.take().expect("stdin").into()
    }
}

impl Drop for StalledReader {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent that touches READY and then writes to stdout without end: with nobody reading
/// the handler's stdout, the console stalls within the first chunk.
fn chatty_agent(sandbox: &Sandbox) -> PathBuf {
    agent(
        sandbox,
        &format!(
            "touch '{}'\nwhile :; do echo 'chatter chatter chatter chatter chatter chatter'; done\n",
            at(sandbox, "READY")
        ),
    )
}

fn spawn_into(
    sandbox: &Sandbox,
    agent: &Path,
    stdout: std::process::Stdio,
    extra: &[&str],
) -> Child {
    let mut args = vec![
        "run",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    sandbox
        .command()
        .args(&args)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn handler")
}

#[track_caller]
fn assert_trailer_has(sandbox: &Sandbox, prefix: &str) {
    let text = transcript(sandbox);
    let (_, trailer) = text
        .rsplit_once("--- runner trailer ---\n")
        .unwrap_or_else(|| panic!("no trailer in the transcript"));
    assert!(
        trailer.lines().any(|line| line.starts_with(prefix)),
        "no `{prefix}` line in the trailer:\n{trailer}"
    );
}

/// `run … | (sleep 600)` with a chatty agent and `--timeout 2`: the handler finishes and
/// records the timeout while the reader still reads nothing.
#[test]
fn a_stalled_console_does_not_stall_a_timeout() {
    let (sandbox, _) = one_phase("");
    let agent = chatty_agent(&sandbox);
    let mut reader = StalledReader::start();
    let child = spawn_into(&sandbox, &agent, reader.stdin(), &["--timeout", "2"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert!(
        run.stderr
            .starts_with("timeout: agent command timed out after 2 seconds\n"),
        "{}",
        run.stderr
    );
    assert_stopped_as(&sandbox, "timeout");
    assert_trailer_has(&sandbox, "live_output_dropped: ");
    sandbox.assert_no_survivors();
    drop(reader);
}

/// SIGINT while the console is stalled (and the worker blocked by backpressure) is acted on:
/// the group is stopped, `interrupted` recorded, exit 130.
#[test]
fn a_signal_during_a_console_stall_is_acted_on() {
    let (sandbox, _) = one_phase("");
    let agent = chatty_agent(&sandbox);
    let mut reader = StalledReader::start();
    let child = spawn_into(&sandbox, &agent, reader.stdin(), &[]);
    wait_running(&sandbox, "plan.md", "READY");
    // The first chunk reaches the transcript while its echo is stuck.
    assert!(
        wait_until(PATIENCE, || transcript(&sandbox).contains("chatter")),
        "no output reached the transcript"
    );
    send_signal(&child, Signal::SIGINT);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(130);
    assert!(
        run.stderr
            .starts_with("interrupted: handler interrupted while the worker was active (SIGINT)\n"),
        "{}",
        run.stderr
    );
    assert_stopped_as(&sandbox, "interrupted");
    sandbox.assert_no_survivors();
    drop(reader);
}

/// A pipe whose read end nobody reads and whose buffer is already full: the first write to
/// the write end blocks. Returns (read end, write end).
fn full_pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    fcntl(&writer, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("non-blocking");
    let chunk = [b'x'; 4096];
    loop {
        match nix::unistd::write(&writer, &chunk) {
            Ok(_) => {}
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(error) => panic!("filling the pipe: {error}"),
        }
    }
    // The status flags belong to the open file, which the handler shares: blocking again.
    fcntl(&writer, FcntlArg::F_SETFL(OFlag::empty())).expect("blocking");
    (reader, writer)
}

/// Whether the process `pid` (its main thread) sleeps in a write to a pipe.
fn blocked_in_pipe_write(pid: u32) -> bool {
    let wchan = fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    // `pipe_write`, `anon_pipe_write` on newer kernels; where wchan is hidden, the syscall
    // (x86_64: write = 1) to fd 1.
    wchan.contains("pipe_write")
        || fs::read_to_string(format!("/proc/{pid}/syscall"))
            .is_ok_and(|syscall| syscall.starts_with("1 0x1 "))
}

/// Once everything is recorded the stopping signals have their default action again: the
/// final report, blocked on a stdout nobody reads, ends at SIGTERM like any program's output
/// instead of ignoring it.
#[test]
fn a_final_report_blocked_on_a_full_stdout_ends_at_sigterm() {
    use std::os::unix::process::ExitStatusExt;
    let (sandbox, agent) = one_phase("echo '<phase-complete>done</phase-complete>'\n");
    let (reader, writer) = full_pipe();
    let mut child = sandbox
        .quiet_run_command("plan.md", &agent, &[])
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn handler");
    let pid = child.id();
    let blocked = wait_until(PATIENCE, || {
        read_state(&sandbox).is_some_and(|state| state["completed_phase_ids"] == json!(["phase-1"]))
            && blocked_in_pipe_write(pid)
    });
    assert!(blocked, "the handler never blocked in its final report");
    send_signal(&child, Signal::SIGTERM);
    let exited = wait_until(HANG_LIMIT, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("SIGTERM did not end a handler blocked in its final report");
    }
    let status = child.wait().expect("status");
    assert_eq!(status.signal(), Some(Signal::SIGTERM as i32), "{status:?}");
    // The record was complete before the report: nothing of it was lost.
    let state = read_state(&sandbox).expect("state");
    assert!(state["stop"].is_null(), "{state:#}");
    assert!(state["active_attempt"].is_null(), "{state:#}");
    sandbox.assert_no_survivors();
    drop(reader);
}

/// `run … | head -2`: the viewer goes away; the agent finishes, the phase completes and the
/// transcript keeps everything.
#[test]
fn losing_the_viewer_does_not_fail_the_attempt() {
    let (sandbox, _) = one_phase("");
    let agent = agent(
        &sandbox,
        &format!(
            "echo one\necho two\necho three\nuntil [ -e '{go}' ]; do sleep 0.02; done\nfor i in $(seq 1 2000); do echo \"after $i\"; done\necho '<phase-complete>finished</phase-complete>'\n",
            go = at(&sandbox, "GO")
        ),
    );
    let mut child = spawn_into(&sandbox, &agent, std::process::Stdio::piped(), &[]);
    {
        // Read two lines, like `head -2`, then close the pipe.
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        assert_eq!(lines.next().expect("line").expect("read"), "one");
        assert_eq!(lines.next().expect("line").expect("read"), "two");
    }
    fs::write(sandbox.path("GO"), "").expect("go");
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(0);
    let state = sandbox.state("plan.md");
    assert_eq!(
        state["completed_phase_ids"],
        json!(["phase-1"]),
        "{state:#}"
    );
    assert_eq!(outcome(&sandbox)["summary"], "finished");
    let text = transcript(&sandbox);
    assert!(
        text.contains("after 2000\n"),
        "the transcript keeps everything"
    );
    assert_trailer_has(&sandbox, "live_output_stopped: stdout: ");
    sandbox.assert_no_survivors();
}

/// An opening tag that is never closed: the text after it reaches the console while the
/// attempt still runs, and the transcript and the verdict are unchanged.
#[test]
fn an_unclosed_opening_tag_releases_the_live_console() {
    let (sandbox, _) = one_phase("");
    let agent = agent(
        &sandbox,
        &format!(
            "echo 'before'\necho '<phase-complete>'\necho 'still working'\nuntil [ -e '{go}' ]; do sleep 0.02; done\necho '</phase-complete>'\n",
            go = at(&sandbox, "GO")
        ),
    );
    let mut child = spawn_into(&sandbox, &agent, std::process::Stdio::piped(), &[]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let collector = {
        let seen = seen.clone();
        let mut stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buffer = [0u8; 4096];
            while let Ok(read) = stdout.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                seen.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        })
    };
    assert!(
        wait_until(PATIENCE, || seen
            .lock()
            .expect("lock")
            .contains("still working")),
        "the held text never reached the console while the attempt ran: {:?}",
        seen.lock().expect("lock")
    );
    assert!(!sandbox.path("GO").exists());
    fs::write(sandbox.path("GO"), "").expect("go");
    let run = wait_for_exit(child, HANG_LIMIT);
    collector.join().expect("collector");
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["summary"], "still working");
    assert!(
        transcript(&sandbox)
            .contains("before\n<phase-complete>\nstill working\n</phase-complete>\n")
    );
    let shown = seen.lock().expect("lock").clone();
    assert!(
        shown.starts_with("before\n<phase-complete>\nstill working\n"),
        "{shown:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Finding 6: a self-respawning setsid daemon
// ---------------------------------------------------------------------------------------------

/// Stops and kills every process with the sandbox's token until none is left (a respawning
/// chain survives one round of SIGKILL): the test's own cleanup, whatever the handler did.
fn stop_token_holders(sandbox: &Sandbox) {
    for _ in 0..1000 {
        let pids = sandbox.survivors();
        if pids.is_empty() {
            return;
        }
        for signal in [Signal::SIGSTOP, Signal::SIGKILL] {
            for pid in &pids {
                let _ = kill(Pid::from_raw(*pid as i32), signal);
            }
        }
    }
}

/// Kills the sandbox's processes when dropped, even when an assertion failed.
struct ChainGuard<'a>(&'a Sandbox);

impl Drop for ChainGuard<'_> {
    fn drop(&mut self) {
        stop_token_holders(self.0);
    }
}

/// Each generation starts the next in a new session at once, then lingers 50 ms: a lineage
/// that outruns a sweep stopping one generation per pass. The sweep must stop all of it and
/// the trailer must not claim a kill that did not happen.
#[test]
fn a_self_respawning_setsid_daemon_does_not_outlive_the_sweep() {
    for _ in 0..3 {
        let sandbox = Sandbox::new();
        let _guard = ChainGuard(&sandbox);
        sandbox.write("plan.md", plan_with_phases(1));
        let generation = sandbox.script(
            "generation",
            &format!(
                "setsid '{me}' >/dev/null 2>&1 </dev/null &\nsleep 0.05\n",
                me = at(&sandbox, "bin/generation")
            ),
        );
        let agent = agent(
            &sandbox,
            &format!(
                "setsid '{}' >/dev/null 2>&1 </dev/null &\nsleep 0.3\necho '<phase-complete>done</phase-complete>'\n",
                generation.display()
            ),
        );
        let run = wait_for_exit(spawn_run(&sandbox, &agent, &["--quiet"]), HANG_LIMIT);
        run.assert_code(0);
        let survivors = sandbox.survivors();
        let text = transcript(&sandbox);
        let (_, trailer) = text
            .rsplit_once("--- runner trailer ---\n")
            .expect("trailer");
        assert!(
            survivors.is_empty(),
            "the chain outlived the sweep: {survivors:?}\n{trailer}"
        );
        assert!(
            trailer
                .lines()
                .any(|line| line.starts_with("escaped_descendants_killed: ")),
            "{trailer}"
        );
        assert!(
            !trailer.contains("processes_surviving_sigkill"),
            "{trailer}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 2: a SIGKILLed handler leaves no worker running (the watchdog)
// ---------------------------------------------------------------------------------------------

/// An agent that, the first time, ignores SIGTERM, leaves a SIGTERM-ignoring grandchild in
/// its group (holding no pipe), touches READY and sleeps for ever; later it completes.
fn stubborn_first_time_agent(sandbox: &Sandbox) -> PathBuf {
    agent(
        sandbox,
        &format!(
            "if [ -e '{first}' ]; then echo '<phase-complete>done</phase-complete>'; exit 0; fi\ntouch '{first}'\n(trap '' TERM; exec sleep 600) >/dev/null 2>&1 &\ntrap '' TERM\ntouch '{ready}'\nwhile :; do sleep 1; done\n",
            first = at(sandbox, "FIRST"),
            ready = at(sandbox, "READY")
        ),
    )
}

#[test]
fn a_sigkilled_handler_leaves_no_worker_running() {
    let (sandbox, _) = one_phase("");
    let agent = stubborn_first_time_agent(&sandbox);
    let mut child = spawn_run(&sandbox, &agent, &["--quiet"]);
    wait_running(&sandbox, "plan.md", "READY");
    let state = read_state(&sandbox).expect("state");
    let attempt_id = state["active_attempt"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    child.kill().expect("SIGKILL the handler");
    child.wait().expect("reap the handler");

    // The watchdog stops the worker and its grandchild, then exits itself.
    sandbox.assert_no_survivors();

    // `status` and `check` see an abandoned attempt whose worker is dead.
    let status = sandbox.run(&["status", "--plan", "plan.md"]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!("abandoned: phase-1 (running, attempt {attempt_id})"),
    );
    assert!(
        !status.stdout.contains("run in progress"),
        "{}",
        status.stdout
    );
    assert_has_line(&status.stdout, "worker process: not running");
    let agent_arg = agent.to_str().expect("utf-8");
    let check = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", agent_arg]);
    check.assert_code(0);
    assert_has_line(
        &check.stdout,
        &format!(
            "note: phase phase-1 has an abandoned running attempt {attempt_id}; run requires --retry-stopped"
        ),
    );
    // And `--retry-stopped` finds no live worker to refuse on.
    let retry = sandbox.run_plan("plan.md", &agent, &["--quiet", "--retry-stopped"]);
    retry.assert_code(0);
    assert_eq!(retry.stdout, "runner-complete: all phases complete\n");
    sandbox.assert_no_survivors();
}

/// A hangup, Ctrl-C or `kill` aimed at the handler's whole process group never reaches the
/// watchdog (it runs in a session of its own): when the handler then dies by SIGKILL before
/// its own cleanup, the worker is still stopped.
#[test]
fn the_watchdog_outlives_signals_to_the_handlers_group() {
    for group_signal in [Signal::SIGHUP, Signal::SIGINT, Signal::SIGTERM] {
        let (sandbox, _) = one_phase("");
        let agent = stubborn_first_time_agent(&sandbox);
        let mut command = sandbox.command();
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .args(["run", "--plan", "plan.md", "--quiet", "--agent-cmd"])
            .arg(&agent)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn handler");
        wait_running(&sandbox, "plan.md", "READY");
        let group = Pid::from_raw(child.id() as i32);
        nix::sys::signal::killpg(group, group_signal).expect("signal the handler's group");
        child.kill().expect("SIGKILL the handler");
        child.wait().expect("reap the handler");
        sandbox.assert_no_survivors();
    }
}

// ---------------------------------------------------------------------------------------------
// A paused terminal (Ctrl-S) under `--quiet`
// ---------------------------------------------------------------------------------------------

/// A pseudo-terminal for the handler's stderr whose output is paused, as after Ctrl-S: writes
/// to it block until [`PausedTerminal::resume`]. Whatever the handler draws is read into
/// memory once resumed.
struct PausedTerminal {
    master: std::os::fd::OwnedFd,
    slave: std::os::fd::OwnedFd,
}

impl PausedTerminal {
    fn open() -> Self {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let terminal = Self {
            master: pty.master,
            slave: pty.slave,
        };
        // The user types Ctrl-S: with IXON (a new terminal's default) output stops at once.
        nix::unistd::write(&terminal.master, b"\x13").expect("type Ctrl-S");
        terminal
    }

    fn stderr(&self) -> std::process::Stdio {
        std::process::Stdio::from(self.slave.try_clone().expect("dup the terminal"))
    }

    /// Types Ctrl-Q and keeps reading what the handler draws, so it is never held again.
    fn resume(self) -> std::thread::JoinHandle<Vec<u8>> {
        nix::unistd::write(&self.master, b"\x11").expect("type Ctrl-Q");
        drop(self.slave);
        let mut master = fs::File::from(self.master);
        std::thread::spawn(move || {
            let mut screen = Vec::new();
            // EIO once the handler, the last holder of the terminal, has exited.
            let _ = std::io::Read::read_to_end(&mut master, &mut screen);
            screen
        })
    }
}

/// An agent whose first attempt ends without a result block (retried) and whose second
/// completes, leaving `attempt-N` files behind.
fn retried_once_agent(sandbox: &Sandbox) -> PathBuf {
    let counter = at(sandbox, "attempts");
    agent(
        sandbox,
        &format!(
            "n=$(($(cat {counter} 2>/dev/null || echo 0) + 1))\necho $n > {counter}\ntouch attempt-$n\nif [ $n -ge 2 ]; then echo '<phase-complete>done</phase-complete>'; fi\n"
        ),
    )
}

/// `--quiet` on a paused terminal: the status line and the retry line wait for the terminal,
/// the run does not — the retry starts, the phase completes and the outcome is committed while
/// the terminal stays paused; the final report follows once it is resumed.
#[test]
fn a_paused_terminal_never_delays_a_retry() {
    let (sandbox, _) = one_phase("");
    let agent = retried_once_agent(&sandbox);
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"backoff_seconds": 0}}"#,
    );
    let terminal = PausedTerminal::open();
    let mut child = sandbox
        .command()
        .args(["run", "--plan", "plan.md", "--agent-cmd"])
        .arg(&agent)
        .args(["--quiet", "--retries", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(terminal.stderr())
        .spawn()
        .expect("spawn handler");
    let completed = wait_until(PATIENCE, || {
        sandbox.path("attempt-2").exists()
            && read_state(&sandbox)
                .is_some_and(|state| state["completed_phase_ids"] == json!(["phase-1"]))
    });
    let screen = terminal.resume();
    let exited = wait_until(HANG_LIMIT, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
    }
    let screen = String::from_utf8_lossy(&screen.join().unwrap_or_default()).into_owned();
    assert!(
        completed,
        "the retry did not run while the terminal was paused:\n{screen:?}"
    );
    assert!(exited, "the handler did not exit once the terminal resumed");
    assert_eq!(child.wait().unwrap().code(), Some(0), "{screen:?}");
    assert!(
        screen.contains("retrying phase-1 (attempt 2 of 2) after missing-marker"),
        "the retry line was lost:\n{screen:?}"
    );
    sandbox.assert_no_survivors();
}

/// SIGTERM during a retry wait while the terminal is paused is acted on at once: the run ends
/// (`run-finished` with 143 in the event stream) before the terminal is resumed.
#[test]
fn a_signal_during_a_retry_wait_on_a_paused_terminal_is_acted_on() {
    let (sandbox, _) = one_phase("");
    let agent = retried_once_agent(&sandbox);
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"backoff_seconds": 600}}"#,
    );
    let terminal = PausedTerminal::open();
    let child = sandbox
        .command()
        .args(["run", "--plan", "plan.md", "--agent-cmd"])
        .arg(&agent)
        .args(["--quiet", "--retries", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(terminal.stderr())
        .spawn()
        .expect("spawn handler");
    let events = || {
        fs::read_to_string(sandbox.state_dir("plan.md").join("events.jsonl")).unwrap_or_default()
    };
    let waiting = wait_until(PATIENCE, || events().contains("\"retry-scheduled\""));
    send_signal(&child, Signal::SIGTERM);
    let finished = wait_until(PATIENCE, || events().contains("\"run-finished\""));
    let screen = terminal.resume();
    let run = wait_for_exit(child, HANG_LIMIT);
    drop(screen);
    assert!(waiting, "the retry was never scheduled:\n{}", events());
    assert!(
        finished,
        "the signal was not acted on while the terminal was paused:\n{}",
        events()
    );
    assert!(events().contains("\"exit_code\":143"), "{}", events());
    run.assert_code(143);
    sandbox.assert_no_survivors();
}
