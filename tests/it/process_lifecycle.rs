//! Process lifecycle of `run` against the real binary and fake agents: wall-clock and idle
//! timeouts, the leak sweep after a normal exit, streaming stop regexes, workspace locks under a
//! real concurrent second handler, SIGINT/SIGTERM to the handler (mid-run, at launch, during
//! cleanup, twice, between phases) and the worker's own session/process group and recorded
//! identity.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// Upper bound that only catches hangs; never a performance assertion.
const HANG_LIMIT: Duration = Duration::from_secs(20);

/// A worker that ignores SIGTERM, starts a SIGTERM-ignoring grandchild and a background process
/// holding the output pipes, after printing progress and a complete block.
const STUBBORN_WORKER: &str = "cat >/dev/null
echo 'progress before the timeout'
echo '<phase-complete>done too early</phase-complete>'
(trap '' TERM; while :; do sleep 1; done) &
sleep 1000 &
trap '' TERM
while :; do sleep 1; done
";

// ---------------------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------------------

#[test]
fn timeout_kills_stubborn_tree_and_pipe_holder() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", STUBBORN_WORKER);
    let started = Instant::now();
    let child = spawn_plan(&sandbox, "plan.md", &agent, &["--timeout", "1"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    assert!(started.elapsed() < HANG_LIMIT, "handler hung");
    run.assert_code(4);
    assert_err_line(&run, "timeout: agent command timed out after 1 seconds");
    sandbox.assert_no_survivors();

    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null());
    assert_eq!(state["stop"]["reason"], "timeout");
    assert_eq!(state["last_run"]["status"], "timeout");
    assert_eq!(state["completed_phase_ids"], json!([]));
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        transcript.contains("progress before the timeout\n"),
        "{transcript}"
    );
    assert!(
        transcript.contains("<phase-complete>done too early</phase-complete>"),
        "{transcript}"
    );
    assert_eq!(only_outcome(&sandbox, "plan.md")["status"], "timeout");
}

#[test]
fn timeout_with_term_honouring_worker_beats_earlier_complete_block() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho 'partial work'\necho '<phase-complete>done</phase-complete>'\nsleep 1000\n",
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &["--timeout", "1"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(&run, "timeout: agent command timed out after 1 seconds");
    // Live output still shows the progress, never the block.
    assert!(run.stdout.contains("partial work\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("<phase-complete>"), "{}", run.stdout);
    sandbox.assert_no_survivors();

    let state = sandbox.state("plan.md");
    assert_eq!(state["stop"]["reason"], "timeout");
    assert_eq!(state["completed_phase_ids"], json!([]));
    let outcome = only_outcome(&sandbox, "plan.md");
    assert_eq!(outcome["status"], "timeout");
    assert_eq!(
        outcome["summary"],
        "agent command timed out after 1 seconds"
    );
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(transcript.contains("partial work\n"), "{transcript}");
}

#[test]
fn idle_timeout_stops_silent_worker() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", "cat >/dev/null\nsleep 1000\n");
    let child = spawn_plan(&sandbox, "plan.md", &agent, &["--idle-timeout", "1"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    let first = report_line(&run, "timeout: ");
    assert!(first.contains("idle timeout"), "{}", run.stderr);
    assert_eq!(
        first,
        "timeout: no output, notification or activity for 1 s (idle timeout)"
    );
    sandbox.assert_no_survivors();
    assert_eq!(sandbox.state("plan.md")["stop"]["reason"], "timeout");
}

#[test]
fn idle_timeout_spares_chatty_slow_worker() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    // About 3 s in total, never silent for more than ~0.2 s.
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ni=0\nwhile [ $i -lt 15 ]; do echo \"tick $i\"; sleep 0.2; i=$((i+1)); done\necho '<phase-complete>done</phase-complete>'\n",
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &["--idle-timeout", "1"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(0);
    assert!(run.stdout.contains("tick 14\n"), "{}", run.stdout);
    assert!(
        run.stdout
            .ends_with("runner-complete: all phases complete\n"),
        "{}",
        run.stdout
    );
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
    sandbox.assert_no_survivors();
}

#[test]
fn config_idle_timeout_seconds_stops_silent_worker() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        "{\"idle_timeout_seconds\": 1}\n",
    );
    let agent = sandbox.script("agent", "cat >/dev/null\nsleep 1000\n");
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(
        &run,
        "timeout: no output, notification or activity for 1 s (idle timeout)",
    );
    sandbox.assert_no_survivors();
    assert_eq!(sandbox.state("plan.md")["stop"]["reason"], "timeout");
}

// ---------------------------------------------------------------------------------------------
// Leak sweep after a normal exit
// ---------------------------------------------------------------------------------------------

#[test]
fn leaked_pipe_holder_is_killed_after_normal_exit() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let leak_pid = sandbox.path("leak.pid");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\nsleep 1000 &\necho $! > '{}'\nexit 0\n",
            leak_pid.display()
        ),
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(run.stderr, "");
    sandbox.assert_no_survivors();
    let pid = read_pid(&leak_pid);
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        trailer_lines(&transcript)
            .iter()
            .any(|line| line == &format!("leaked_descendants_killed: {pid}")),
        "{transcript}"
    );
    assert!(transcript.contains("\nexit_code: 0\n"), "{transcript}");
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
}

#[test]
fn leaked_process_with_closed_pipes_is_killed_too() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let leak_pid = sandbox.path("leak.pid");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\nsleep 1000 >/dev/null 2>&1 &\necho $! > '{}'\nexit 0\n",
            leak_pid.display()
        ),
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(0);
    sandbox.assert_no_survivors();
    let pid = read_pid(&leak_pid);
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        trailer_lines(&transcript)
            .iter()
            .any(|line| line == &format!("leaked_descendants_killed: {pid}")),
        "{transcript}"
    );
}

/// A descendant that leaves the group (`setsid`) is adopted by the handler (a child
/// subreaper) once its parent exits, and killed after the group is empty.
#[test]
fn escaped_descendant_is_adopted_and_killed() {
    for redirect in ["", " >/dev/null 2>&1"] {
        let sandbox = Sandbox::new();
        sandbox.write("plan.md", plan_with_phases(1));
        let escaped_pid = sandbox.path("escaped.pid");
        let agent = sandbox.script(
            "agent",
            &format!(
                // The agent exits only once the child has left its group (its own session),
                // so the child is an escapee, never a member left behind.
                "cat >/dev/null\nsetsid sleep 1000{redirect} &\necho $! > '{}'\n\
                 while [ \"$(cut -d' ' -f6 /proc/$!/stat)\" != \"$!\" ]; do sleep 0.01; done\n\
                 echo '<phase-complete>done</phase-complete>'\nexit 0\n",
                escaped_pid.display()
            ),
        );
        let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
        let run = wait_for_exit(child, HANG_LIMIT);
        run.assert_code(0);
        sandbox.assert_no_survivors();
        let pid = read_pid(&escaped_pid);
        let transcript = only_transcript(&sandbox, "plan.md");
        assert!(
            trailer_lines(&transcript)
                .iter()
                .any(|line| line == &format!("escaped_descendants_killed: {pid}")),
            "{transcript}"
        );
    }
}

/// A child the handler inherited across `exec` (a shell's background job) is not the
/// worker's: the adopted-descendant sweep leaves it alone and does not report it.
#[test]
fn a_child_inherited_across_exec_is_left_alone() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\n",
    );
    let sibling_pid = sandbox.path("sibling.pid");
    let script = format!(
        "sleep 1000 >/dev/null 2>&1 & echo $! > '{}'; exec '{BIN}' run --plan plan.md --agent-cmd '{}'",
        sibling_pid.display(),
        agent.display()
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn shell");
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(0);
    let pid = read_pid(&sibling_pid);
    // Alive: listed and not a zombie (state is the first field after the command name).
    let alive = fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|text| {
        text.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
    });
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    assert!(alive, "the inherited child was killed");
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        !transcript.contains("escaped_descendants_killed"),
        "{transcript}"
    );
    sandbox.assert_no_survivors();
}

/// The same after a timeout: the escaped process is found once the group is gone.
#[test]
fn escaped_descendant_is_killed_after_a_timeout() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nsetsid sleep 1000 &\nwhile :; do sleep 1; done\n",
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &["--timeout", "0.5"]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    sandbox.assert_no_survivors();
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        trailer_lines(&transcript)
            .iter()
            .any(|line| line.starts_with("escaped_descendants_killed: ")),
        "{transcript}"
    );
}

#[test]
fn no_leak_line_when_nothing_outlives_the_worker() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\n",
    );
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(0);
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        !transcript.contains("leaked_descendants_killed"),
        "{transcript}"
    );
    assert!(trailer_lines(&transcript).contains(&"exit_code: 0".to_owned()));
}

// ---------------------------------------------------------------------------------------------
// Stop regexes
// ---------------------------------------------------------------------------------------------

#[test]
fn stop_regex_matches_across_chunk_boundary() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    // `mit` is written only once the transcript shows `rate li`: two separate reads.
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nprintf 'rate li'\nuntil grep -q '^rate li' \"$1\"; do sleep 0.02; done\nprintf 'mit\\n'\nwhile :; do sleep 1; done\n",
    );
    let child = spawn_plan_cmd(
        &sandbox,
        "plan.md",
        &format!("{} {{transcript_file}}", agent.display()),
        &["--stop-on-regex", "rate limit", "--timeout", "15"],
    );
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(&run, "stop-regex: output matched stop regex: rate limit");
    sandbox.assert_no_survivors();
    let state = sandbox.state("plan.md");
    assert_eq!(state["stop"]["reason"], "stop-regex");
    assert!(state["active_attempt"].is_null());
    assert!(only_transcript(&sandbox, "plan.md").contains("rate limit\n"));
}

#[test]
fn stop_regex_matches_across_stdout_and_stderr_in_arrival_order() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nprintf 'rate '\nuntil grep -q '^rate ' \"$1\"; do sleep 0.02; done\nprintf 'limit\\n' >&2\nwhile :; do sleep 1; done\n",
    );
    let child = spawn_plan_cmd(
        &sandbox,
        "plan.md",
        &format!("{} {{transcript_file}}", agent.display()),
        &["--stop-on-regex", "rate limit", "--timeout", "15"],
    );
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(&run, "stop-regex: output matched stop regex: rate limit");
    sandbox.assert_no_survivors();
    assert_eq!(sandbox.state("plan.md")["stop"]["reason"], "stop-regex");
}

/// Issue 14: a Unicode `\b` streams like any other pattern — no warning about retaining
/// output, a match across a chunk seam, and `é` counts as a word character.
#[test]
fn unicode_word_boundary_stop_regex_streams_without_a_warning() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nprintf 'rate limited, \\303\\251rate limit\\n'\nprintf 'rate li'\nuntil grep -q '^rate li' \"$1\"; do sleep 0.02; done\nprintf 'mit\\n'\nwhile :; do sleep 1; done\n",
    );
    let pattern = r"\brate limit\b";
    let child = spawn_plan_cmd(
        &sandbox,
        "plan.md",
        &format!("{} {{transcript_file}}", agent.display()),
        &["--stop-on-regex", pattern, "--timeout", "15"],
    );
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(
        &run,
        &format!("stop-regex: output matched stop regex: {pattern}"),
    );
    for warning in ["WARN", "falls back", "retaining", "(?-u:"] {
        assert!(
            !run.stderr.contains(warning),
            "{warning:?} in\n{}",
            run.stderr
        );
    }
    sandbox.assert_no_survivors();
    assert_eq!(sandbox.state("plan.md")["stop"]["reason"], "stop-regex");
    let transcript = only_transcript(&sandbox, "plan.md");
    assert!(
        transcript.contains("rate limited, érate limit\nrate limit\n"),
        "{transcript}"
    );
}

#[test]
fn stop_regex_matches_at_end_of_output_without_newline() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nprintf 'ordinary output\\nfinal stop text'\nexit 0\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--stop-on-regex", "final stop text$"]);
    run.assert_code(4);
    assert_err_line(
        &run,
        "stop-regex: output matched stop regex: final stop text$",
    );
    let state = sandbox.state("plan.md");
    assert_eq!(state["stop"]["reason"], "stop-regex");
    assert_eq!(state["last_run"]["exit_code"], 4);
    let outcome = only_outcome(&sandbox, "plan.md");
    assert_eq!(outcome["status"], "stop-regex");
    // The match may be seen (at the chunk's end-of-input peek) before the worker's own exit,
    // in which case the group is stopped: either way the worker's end is recorded.
    assert!(
        outcome["exit_code"] == 0 || outcome["signal"].is_number(),
        "{outcome}"
    );
    sandbox.assert_no_survivors();
}

#[test]
fn stop_regex_beats_complete_block() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho 'Claimed completion'\necho '<phase-complete>done</phase-complete>'\nexit 0\n",
    );
    let run = sandbox.run_plan(
        "plan.md",
        &agent,
        &["--stop-on-regex", "Claimed completion"],
    );
    run.assert_code(4);
    assert_err_line(
        &run,
        "stop-regex: output matched stop regex: Claimed completion",
    );
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!([]));
    assert_eq!(state["stop"]["reason"], "stop-regex");
    sandbox.assert_no_survivors();
}

#[test]
fn config_and_cli_stop_regexes_both_apply() {
    for (printed, expected) in [
        ("cli says stop", "cli says stop"),
        ("config says stop", "config says stop"),
    ] {
        let sandbox = Sandbox::new();
        sandbox.write("plan.md", plan_with_phases(1));
        sandbox.write(
            ".ai-session-handler/config.json",
            "{\"stop_on_regex\": [\"config says stop\"]}\n",
        );
        let agent = sandbox.script(
            "agent",
            &format!("cat >/dev/null\necho '{printed}'\nwhile :; do sleep 1; done\n"),
        );
        let child = spawn_plan(
            &sandbox,
            "plan.md",
            &agent,
            &["--stop-on-regex", "cli says stop", "--timeout", "15"],
        );
        let run = wait_for_exit(child, HANG_LIMIT);
        run.assert_code(4);
        assert_err_line(
            &run,
            &format!("stop-regex: output matched stop regex: {expected}"),
        );
        sandbox.assert_no_survivors();
    }
}

#[test]
fn multiline_anchored_stop_regex_matches_only_at_line_start() {
    let pattern = "(?m)^FATAL: .*$";
    // Inline mention only: no match, the phase completes.
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho 'note: FATAL: inline mention'\necho '<phase-complete>done</phase-complete>'\n",
    );
    sandbox
        .run_plan("plan.md", &agent, &["--stop-on-regex", pattern])
        .assert_code(0);

    // A FATAL line mid-output stops the running worker.
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho 'note: FATAL: inline mention'\necho 'FATAL: disk full'\nwhile :; do sleep 1; done\n",
    );
    let child = spawn_plan(
        &sandbox,
        "plan.md",
        &agent,
        &["--stop-on-regex", pattern, "--timeout", "15"],
    );
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(4);
    assert_err_line(
        &run,
        "stop-regex: output matched stop regex: (?m)^FATAL: .*$",
    );
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Locks
// ---------------------------------------------------------------------------------------------

#[test]
fn second_handler_on_same_plan_is_refused_while_first_runs() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let holder = sandbox.script("holder", &blocking_agent(&sandbox, "READY", "GO"));
    let contender = sandbox.script(
        "contender",
        &format!("touch '{}'\n", sandbox.path("LAUNCHED2").display()),
    );
    let before_first = listing(&sandbox.root);
    let first = spawn_plan(&sandbox, "plan.md", &holder, &[]);
    wait_ready_and_running(&sandbox, "plan.md", "READY");

    let state_before = sandbox.state_bytes("plan.md");
    let listing_before = listing(&sandbox.root);
    let second = sandbox.run_plan("plan.md", &contender, &[]);
    second.assert_code(5);
    // The holder is named, and the way on is to wait for it.
    assert_eq!(
        second.stderr,
        format!(
            "error: plan workspace {} is already owned by another ai-session-handler invocation (handler pid {pid})\n\
             next: wait for handler pid {pid} to end, then ai-session-handler run --plan plan.md --agent-cmd {}\n",
            sandbox.root.display(),
            contender.display(),
            pid = first.id()
        )
    );
    assert_eq!(second.stdout, "");
    assert!(!sandbox.path("LAUNCHED2").exists(), "contender launched");
    assert_eq!(sandbox.state_bytes("plan.md"), state_before);
    assert_eq!(
        listing(&sandbox.root),
        listing_before,
        "contender created files"
    );

    sandbox.write("GO", "");
    let run = wait_for_exit(first, PATIENCE);
    run.assert_code(0);
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
    assert_only_expected_files(&sandbox, "plan.md", &before_first, &["READY", "GO"]);
    sandbox.assert_no_survivors();
}

#[test]
fn second_plan_in_same_plan_workspace_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write("first.md", plan_with_phases(1));
    sandbox.write("second.md", plan_with_phases(1));
    let holder = sandbox.script("holder", &blocking_agent(&sandbox, "READY", "GO"));
    let contender = sandbox.script(
        "contender",
        &format!("touch '{}'\n", sandbox.path("LAUNCHED2").display()),
    );
    let first = spawn_plan(&sandbox, "first.md", &holder, &[]);
    wait_ready_and_running(&sandbox, "first.md", "READY");
    let state_before = sandbox.state_bytes("first.md");

    let second = sandbox.run_plan("second.md", &contender, &[]);
    second.assert_code(5);
    assert_eq!(
        second.stderr,
        format!(
            "error: plan workspace {} is already owned by another ai-session-handler invocation (handler pid {pid})\n\
             next: wait for handler pid {pid} to end, then ai-session-handler run --plan second.md --agent-cmd {}\n",
            sandbox.root.display(),
            contender.display(),
            pid = first.id()
        )
    );
    assert!(!sandbox.path("LAUNCHED2").exists(), "contender launched");
    assert!(
        !sandbox.state_dir("second.md").exists(),
        "state created for the refused plan"
    );
    assert_eq!(sandbox.state_bytes("first.md"), state_before);

    sandbox.write("GO", "");
    wait_for_exit(first, PATIENCE).assert_code(0);
    sandbox.assert_no_survivors();
}

#[test]
fn shared_execution_workspace_through_symlink_alias_is_refused() {
    let first_root = Sandbox::new();
    first_root.write("shared/AGENTS.md", "# shared\n");
    first_root.write("plan.md", plan_in_workspace("shared", 1));
    let shared = first_root.path("shared");

    let second_root = Sandbox::new();
    std::os::unix::fs::symlink(&shared, second_root.path("alias")).expect("symlink");
    second_root.write("plan.md", plan_in_workspace("alias", 1));

    let holder = first_root.script("holder", &blocking_agent(&first_root, "READY", "GO"));
    let contender = second_root.script(
        "contender",
        &format!("touch '{}'\n", second_root.path("LAUNCHED2").display()),
    );
    let first = spawn_plan(&first_root, "plan.md", &holder, &[]);
    wait_ready_and_running(&first_root, "plan.md", "READY");
    let state_before = first_root.state_bytes("plan.md");
    let shared_before = listing(&shared);

    let second = second_root.run_plan("plan.md", &contender, &[]);
    second.assert_code(5);
    assert_eq!(
        second.stderr,
        format!(
            "error: execution workspace {} is already owned by another ai-session-handler invocation (handler pid {pid})\n\
             next: wait for handler pid {pid} to end, then ai-session-handler run --plan plan.md --agent-cmd {}\n",
            shared.display(),
            contender.display(),
            pid = first.id()
        )
    );
    assert!(
        !second_root.path("LAUNCHED2").exists(),
        "contender launched"
    );
    assert!(
        !second_root.state_path("plan.md").exists(),
        "state written for the refused run"
    );
    assert_eq!(first_root.state_bytes("plan.md"), state_before);
    assert_eq!(
        listing(&shared),
        shared_before,
        "files created in the shared workspace"
    );

    first_root.write("GO", "");
    wait_for_exit(first, PATIENCE).assert_code(0);
    first_root.assert_no_survivors();
    second_root.assert_no_survivors();
}

#[test]
fn independent_workspaces_run_concurrently() {
    let one = Sandbox::new();
    let two = Sandbox::new();
    let mut children = Vec::new();
    for sandbox in [&one, &two] {
        sandbox.write("plan.md", plan_with_phases(1));
        let agent = sandbox.script("agent", &blocking_agent(sandbox, "READY", "GO"));
        children.push(spawn_plan(sandbox, "plan.md", &agent, &[]));
    }
    // Both workers are running at the same time before either may finish.
    for sandbox in [&one, &two] {
        assert!(
            wait_until(PATIENCE, || sandbox.path("READY").exists()),
            "worker never started"
        );
    }
    for sandbox in [&one, &two] {
        sandbox.write("GO", "");
    }
    for (sandbox, child) in [&one, &two].into_iter().zip(children) {
        let run = wait_for_exit(child, PATIENCE);
        run.assert_code(0);
        assert_eq!(run.stderr, "");
        assert_eq!(
            sandbox.state("plan.md")["completed_phase_ids"],
            json!(["phase-1"])
        );
        sandbox.assert_no_survivors();
    }
}

// ---------------------------------------------------------------------------------------------
// Signals to the handler
// ---------------------------------------------------------------------------------------------

#[test]
fn sigint_mid_run_records_interrupted() {
    signal_mid_run(Signal::SIGINT, 130, "SIGINT");
}

#[test]
fn sigterm_mid_run_records_interrupted() {
    signal_mid_run(Signal::SIGTERM, 143, "SIGTERM");
}

fn signal_mid_run(signal: Signal, code: i32, name: &str) {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho 'working'\n(trap '' TERM; while :; do sleep 1; done) &\ntouch '{}'\nwhile :; do sleep 1; done\n",
            sandbox.path("READY").display()
        ),
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    wait_ready_and_running(&sandbox, "plan.md", "READY");
    send_signal(&child, signal);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(code);
    assert_err_line(
        &run,
        &format!("interrupted: handler interrupted while the worker was active ({name})"),
    );
    sandbox.assert_no_survivors();

    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null(), "{state:#}");
    assert_eq!(state["stop"]["reason"], "interrupted");
    assert_eq!(state["stop"]["phase_id"], "phase-1");
    assert_eq!(state["last_run"]["status"], "interrupted");
    assert_eq!(state["completed_phase_ids"], json!([]));
    assert_eq!(only_outcome(&sandbox, "plan.md")["status"], "interrupted");
    assert!(only_transcript(&sandbox, "plan.md").contains("working\n"));
}

#[test]
fn sigint_at_launch_is_deferred_then_acted_on() {
    signal_at_launch(Signal::SIGINT, 130);
}

#[test]
fn sigterm_at_launch_is_deferred_then_acted_on() {
    signal_at_launch(Signal::SIGTERM, 143);
}

/// The signal lands as soon as the prepared attempt is visible (prompt or state); the agent
/// would run for ever, so anything but `interrupted` (or no attempt at all) is wrong.
fn signal_at_launch(signal: Signal, code: i32) {
    for _ in 0..3 {
        let sandbox = Sandbox::new();
        sandbox.write("plan.md", plan_with_phases(1));
        let agent = sandbox.script(
            "agent",
            "cat >/dev/null\ntrap '' TERM\nwhile :; do sleep 1; done\n",
        );
        let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
        let seen = poll_tight(PATIENCE, || {
            !sandbox.artifacts("plan.md", "prompts").is_empty()
                || read_state(&sandbox, "plan.md")
                    .is_some_and(|state| !state["active_attempt"].is_null())
        });
        assert!(seen, "no attempt was ever prepared");
        send_signal(&child, signal);
        let run = wait_for_exit(child, HANG_LIMIT);
        run.assert_code(code);
        sandbox.assert_no_survivors();
        assert_interrupted_or_untouched(&sandbox, "plan.md", &run);
    }
}

/// Signals before any attempt exists (at once, or when the state directory appears): the
/// handler ends with the signal's code and never leaves a worker, an active attempt or a
/// completion behind.
#[test]
fn signal_before_the_attempt_never_leaves_a_worker_or_completion() {
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        for wait_for_state_dir in [false, true] {
            let sandbox = Sandbox::new();
            sandbox.write("plan.md", plan_with_phases(1));
            let agent = sandbox.script(
                "agent",
                "cat >/dev/null\ntrap '' TERM\nwhile :; do sleep 1; done\n",
            );
            let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
            // Before the intake is registered the default disposition ends the handler;
            // afterwards the signal is deferred or acted on.
            if wait_for_state_dir {
                let seen = poll_tight(PATIENCE, || sandbox.state_dir("plan.md").exists());
                assert!(seen, "state directory never created");
            }
            send_signal(&child, signal);
            let run = wait_for_exit(child, HANG_LIMIT);
            run.assert_code(code);
            sandbox.assert_no_survivors();
            assert_interrupted_or_untouched(&sandbox, "plan.md", &run);
        }
    }
}

#[test]
fn sigterm_then_sigint_during_cleanup_after_complete_block() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let count = sandbox.path("launches");
    let exiting = sandbox.path("EXITING");
    // Launch 1: complete block, a SIGTERM-ignoring child holding the pipes, exit 0.
    // Any later launch just runs (so the handler cannot finish before the signals land).
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho x >> '{count}'\nif [ \"$(wc -l < '{count}')\" -gt 1 ]; then trap '' TERM; while :; do sleep 1; done; fi\necho '<phase-complete>done</phase-complete>'\n(trap '' TERM; while :; do sleep 1; done) &\ntouch '{exiting}'\nexit 0\n",
            count = count.display(),
            exiting = exiting.display()
        ),
    );
    let log = sandbox.path("handler.log");
    let child = spawn_plan(&sandbox, "plan.md", &agent, &log_args(&log));
    assert!(
        wait_until(PATIENCE, || exiting.exists()),
        "agent never got to exit"
    );
    // SIGINT only once the handler has taken SIGTERM: the first signal decides the code.
    send_signal(&child, Signal::SIGTERM);
    wait_signals_received(&log, 1);
    send_signal(&child, Signal::SIGINT);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(143);
    sandbox.assert_no_survivors();

    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null(), "{state:#}");
    let outcomes = state["committed_outcomes"]
        .as_array()
        .expect("list")
        .clone();
    if state["completed_phase_ids"] == json!([]) {
        // The signal decided phase 1.
        assert_eq!(outcomes.len(), 1, "{state:#}");
        assert_eq!(outcomes[0]["status"], "interrupted");
        assert_eq!(state["stop"]["reason"], "interrupted");
        assert_eq!(state["stop"]["phase_id"], "phase-1");
        assert_eq!(state["last_run"]["status"], "interrupted");
        assert_err_line(
            &run,
            "interrupted: handler interrupted while the worker was active (SIGTERM)",
        );
    } else {
        // Phase 1 was committed before the signal: phase 2 was interrupted or never launched.
        assert_eq!(
            state["completed_phase_ids"],
            json!(["phase-1"]),
            "{state:#}"
        );
        assert_eq!(outcomes[0]["status"], "phase-complete");
        match outcomes.len() {
            1 => {
                assert!(state["stop"].is_null(), "{state:#}");
                assert_err_line(
                    &run,
                    "error: interrupted by SIGTERM before launching the next phase; no worker was started",
                );
            }
            2 => {
                assert_eq!(outcomes[1]["status"], "interrupted");
                assert_eq!(state["stop"]["reason"], "interrupted");
                assert_eq!(state["stop"]["phase_id"], "phase-2");
            }
            _ => panic!("unexpected outcomes: {state:#}"),
        }
    }
}

/// A signal that lands while a timeout is stopping a SIGTERM-ignoring worker (inside the
/// TERM→KILL grace) is acted on: the handler exits 143 and the record says `interrupted`,
/// keeping the timeout in the summary, so the exit code and `state.json` agree.
#[test]
fn sigterm_during_timeout_cleanup_records_interrupted() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null
trap '' TERM INT
while :; do sleep 1; done
",
    );
    let log = sandbox.path("handler.log");
    let mut args = vec!["--timeout", "1"];
    args.extend(log_args(&log));
    let child = spawn_plan(&sandbox, "plan.md", &agent, &args);
    assert!(
        wait_until(PATIENCE, || fs::read_to_string(&log)
            .is_ok_and(|text| text.contains("stopping the attempt"))),
        "the timeout never fired"
    );
    send_signal(&child, Signal::SIGTERM);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(143);
    sandbox.assert_no_survivors();

    let text = fs::read_to_string(&log).expect("handler log");
    let received = text.find("signal received").expect("signal logged");
    let committed = text.find("outcome committed").expect("outcome logged");
    let state = sandbox.state("plan.md");
    if received > committed {
        // The machine was slow enough that the grace ended and the outcome was committed
        // before the signal arrived; then the timeout stands.
        assert_eq!(state["stop"]["reason"], "timeout", "{state:#}");
        return;
    }
    assert_eq!(state["stop"]["reason"], "interrupted", "{state:#}");
    assert_eq!(state["last_run"]["status"], "interrupted");
    assert_eq!(only_outcome(&sandbox, "plan.md")["status"], "interrupted");
    assert_err_line(
        &run,
        "interrupted: handler interrupted while the worker was active (SIGTERM); the attempt was already stopping: agent command timed out after 1 seconds",
    );
}

#[test]
fn two_signals_in_a_row_end_a_term_ignoring_worker_promptly() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\ntrap '' TERM\n(trap '' TERM; while :; do sleep 1; done) &\ntouch '{}'\nwhile :; do sleep 1; done\n",
            sandbox.path("READY").display()
        ),
    );
    let log = sandbox.path("handler.log");
    let child = spawn_plan(&sandbox, "plan.md", &agent, &log_args(&log));
    wait_ready_and_running(&sandbox, "plan.md", "READY");
    let started = Instant::now();
    send_signal(&child, Signal::SIGTERM);
    wait_signals_received(&log, 1);
    send_signal(&child, Signal::SIGINT);
    let run = wait_for_exit(child, HANG_LIMIT);
    assert!(started.elapsed() < HANG_LIMIT);
    run.assert_code(143);
    assert_err_line(
        &run,
        "interrupted: handler interrupted while the worker was active (SIGTERM)",
    );
    sandbox.assert_no_survivors();
    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null());
    assert_eq!(state["stop"]["reason"], "interrupted");
}

#[test]
fn signal_between_phases_stops_before_the_next_launch() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let launches = sandbox.path("launches");
    // The worker's parent is the handler itself (no shell in between).
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho x >> '{}'\necho '<phase-complete>done</phase-complete>'\nkill -TERM $PPID\nexit 0\n",
            launches.display()
        ),
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(143);
    sandbox.assert_no_survivors();
    assert_eq!(
        fs::read_to_string(&launches).expect("launch count"),
        "x\n",
        "phase 2 was launched"
    );
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    let state = sandbox.state("plan.md");
    assert!(state["active_attempt"].is_null(), "{state:#}");
    let outcomes = state["committed_outcomes"].as_array().expect("list");
    assert_eq!(outcomes.len(), 1, "{state:#}");
    assert_eq!(outcomes[0]["phase_id"], "phase-1");
    match outcomes[0]["status"].as_str() {
        Some("phase-complete") => {
            assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
            assert_err_line(
                &run,
                "error: interrupted by SIGTERM before launching the next phase; no worker was started",
            );
        }
        Some("interrupted") => {
            assert_eq!(state["completed_phase_ids"], json!([]));
            assert_eq!(state["stop"]["reason"], "interrupted");
        }
        other => panic!("unexpected phase-1 status {other:?}: {state:#}"),
    }
}

/// The signal lands while phase 1's outcome is being committed (the outcome fsync is slowed
/// by a failpoint): phase 1 completes, phase 2 is never launched.
#[cfg(feature = "failpoints")]
#[test]
fn signal_during_commit_completes_phase_and_launches_nothing_more() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let launches = sandbox.path("launches");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho x >> '{}'\necho '<phase-complete>done</phase-complete>'\n",
            launches.display()
        ),
    );
    let mut command = sandbox.command();
    command
        .env("FAILPOINTS", "outcome-fsync=sleep(3000)")
        .args(["run", "--plan", "plan.md", "--agent-cmd"])
        .arg(&agent)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().expect("spawn handler");
    assert!(
        wait_until(PATIENCE, || !sandbox
            .artifacts("plan.md", "outcomes")
            .is_empty()),
        "phase 1 outcome never written"
    );
    send_signal(&child, Signal::SIGTERM);
    let run = wait_for_exit(child, HANG_LIMIT);
    run.assert_code(143);
    assert_err_line(
        &run,
        "error: interrupted by SIGTERM before launching the next phase; no worker was started",
    );
    assert_eq!(fs::read_to_string(&launches).expect("launches"), "x\n");
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert!(state["active_attempt"].is_null());
    assert!(state["stop"].is_null(), "{state:#}");
    assert_eq!(
        state["committed_outcomes"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Process group and recorded identity
// ---------------------------------------------------------------------------------------------

#[test]
fn worker_runs_in_own_session_and_group_with_identity_recorded() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent_pid = sandbox.path("agent.pid");
    let ids = sandbox.path("agent.ids");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho $$ > '{pid}'\nps -o pgid=,sid= -p $$ > '{ids}'\n{wait}",
            pid = agent_pid.display(),
            ids = ids.display(),
            wait = blocking_agent(&sandbox, "READY", "GO"),
        ),
    );
    let child = spawn_plan(&sandbox, "plan.md", &agent, &[]);
    wait_ready_and_running(&sandbox, "plan.md", "READY");
    let handler_pid = child.id();
    let handler_pgid = nix::unistd::getpgid(Some(Pid::from_raw(handler_pid as i32)))
        .expect("handler pgid")
        .as_raw() as u32;

    let pid = read_pid(&agent_pid);
    let stat = proc_stat(pid);
    assert_eq!(stat.pgrp, pid, "worker is not its group's leader");
    assert_eq!(stat.session, pid, "worker is not its session's leader");
    assert_ne!(stat.pgrp, handler_pgid);
    assert_ne!(stat.pgrp, handler_pid);
    assert_eq!(stat.ppid, handler_pid, "worker is not the handler's child");
    let shown: Vec<u32> = fs::read_to_string(&ids)
        .expect("ps output")
        .split_whitespace()
        .map(|field| field.parse().expect("number"))
        .collect();
    assert_eq!(shown, vec![pid, pid], "ps -o pgid=,sid=");

    let state = sandbox.state("plan.md");
    let attempt = &state["active_attempt"];
    assert_eq!(attempt["status"], "running");
    let process = &attempt["process"];
    assert_eq!(process["pid"], pid);
    assert_eq!(process["process_group_id"], pid);
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    assert_eq!(process["boot_id"], boot_id.trim());
    assert_eq!(process["start_time_ticks"], stat.start_time_ticks);

    sandbox.write("GO", "");
    wait_for_exit(child, PATIENCE).assert_code(0);
    assert!(sandbox.state("plan.md")["active_attempt"].is_null());
    sandbox.assert_no_survivors();
}

/// Workers start with an empty signal mask and SIGPIPE at its default, whichever way they are
/// started (the handler itself blocks and ignores signals a worker must not inherit).
#[test]
fn worker_starts_with_no_blocked_or_ignored_pipe_signal() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let masks = sandbox.path("masks");
    let agent = sandbox.script(
        "agent",
        &format!(
            // The masks the worker got, read by grep as the worker itself (a shell waiting for a
            // child blocks signals for a moment, so the shell's own would be racy).
            "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\n\
             exec grep -E '^Sig(Blk|Ign):' /proc/self/status > '{masks}'\n",
            masks = masks.display(),
        ),
    );
    sandbox
        .run_plan("plan.md", &agent, &["--quiet"])
        .assert_code(0);
    let masks = fs::read_to_string(&masks).expect("masks");
    let mask = |name: &str| {
        let line = masks
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {masks}"));
        u64::from_str_radix(line[name.len()..].trim(), 16).expect("hex mask")
    };
    assert_eq!(mask("SigBlk:"), 0, "{masks}");
    let sigpipe = 1u64 << (Signal::SIGPIPE as u32 - 1);
    assert_eq!(mask("SigIgn:") & sigpipe, 0, "SIGPIPE ignored: {masks}");
    sandbox.assert_no_survivors();
}

/// A script without a `#!` line runs under `/bin/sh`, as `execvp` runs it.
#[test]
fn a_worker_script_without_an_interpreter_line_runs_under_sh() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.write(
        "bin/agent",
        "cat >/dev/null\necho \"<phase-complete>ran as $0</phase-complete>\"\n",
    );
    fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    sandbox
        .run_plan("plan.md", &agent, &["--quiet"])
        .assert_code(0);
    let state = sandbox.state("plan.md");
    assert_eq!(
        state["completed_phase_ids"].as_array().map(Vec::len),
        Some(2),
        "{state}"
    );
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn spawn_plan(sandbox: &Sandbox, plan: &str, agent: &Path, extra: &[&str]) -> Child {
    sandbox.spawn_plan(plan, agent, extra)
}

fn spawn_plan_cmd(sandbox: &Sandbox, plan: &str, agent_cmd: &str, extra: &[&str]) -> Child {
    let mut args = vec!["run", "--plan", plan, "--agent-cmd", agent_cmd];
    args.extend_from_slice(extra);
    sandbox.spawn(&args)
}

/// Agent body: touch `ready`, wait for `go`, then print a complete block.
fn blocking_agent(sandbox: &Sandbox, ready: &str, go: &str) -> String {
    format!(
        "cat >/dev/null\ntouch '{ready}'\nuntil [ -e '{go}' ]; do sleep 0.02; done\necho '<phase-complete>done</phase-complete>'\n",
        ready = sandbox.path(ready).display(),
        go = sandbox.path(go).display()
    )
}

/// A plan whose phases all use `workspace`.
fn plan_in_workspace(workspace: &str, count: usize) -> String {
    plan_with_phases(count).replace(
        "### Workspace\n\n.\n",
        &format!("### Workspace\n\n{workspace}\n"),
    )
}

/// Waits for the agent's ready file and for the `running` record.
#[track_caller]
fn wait_ready_and_running(sandbox: &Sandbox, plan: &str, ready: &str) {
    assert!(
        wait_until(PATIENCE, || sandbox.path(ready).exists()),
        "agent never became ready"
    );
    assert!(
        wait_until(PATIENCE, || {
            read_state(sandbox, plan)
                .is_some_and(|state| state["active_attempt"]["status"] == "running")
        }),
        "running attempt never recorded"
    );
}

fn read_state(sandbox: &Sandbox, plan: &str) -> Option<Value> {
    let bytes = sandbox.state_bytes(plan)?;
    Some(serde_json::from_slice(&bytes).expect("state.json parses"))
}

/// Like `wait_until`, polling every millisecond (to land a signal early in a window).
fn poll_tight(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// `--log-level info --log-file <log>`: the log shows when the handler took a signal.
fn log_args(log: &Path) -> [&str; 4] {
    [
        "--log-level",
        "info",
        "--log-file",
        log.to_str().expect("utf-8 path"),
    ]
}

/// Waits until the handler's log records `count` received signals.
#[track_caller]
fn wait_signals_received(log: &Path, count: usize) {
    let seen = wait_until(PATIENCE, || {
        fs::read_to_string(log).is_ok_and(|text| text.matches("signal received").count() >= count)
    });
    assert!(seen, "handler never logged {count} received signal(s)");
}

/// After a signal near launch: the state parses, nothing completed, no attempt left active,
/// and any recorded attempt is `interrupted`.
#[track_caller]
fn assert_interrupted_or_untouched(sandbox: &Sandbox, plan: &str, run: &Run) {
    let Some(state) = read_state(sandbox, plan) else {
        assert!(
            sandbox.artifacts(plan, "prompts").is_empty(),
            "prompt without state"
        );
        return;
    };
    assert!(
        state["active_attempt"].is_null(),
        "{state:#}\n{}",
        run.stderr
    );
    assert_eq!(state["completed_phase_ids"], json!([]), "{state:#}");
    let outcomes = state["committed_outcomes"].as_array().expect("list");
    match outcomes.len() {
        0 => {
            assert!(state["last_run"].is_null(), "{state:#}");
            assert!(sandbox.artifacts(plan, "prompts").is_empty(), "{state:#}");
        }
        1 => {
            assert_eq!(outcomes[0]["status"], "interrupted", "{state:#}");
            assert_eq!(state["stop"]["reason"], "interrupted");
            assert_eq!(state["last_run"]["status"], "interrupted");
            assert_eq!(only_outcome(sandbox, plan)["status"], "interrupted");
            assert!(run.stderr.starts_with("interrupted: "), "{}", run.stderr);
        }
        _ => panic!("more than one attempt: {state:#}"),
    }
}

/// The runner's first report line on stderr (live agent stderr comes before it).
fn report_line<'a>(run: &'a Run, prefix: &str) -> &'a str {
    run.stderr
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in stderr:\n{}", run.stderr))
}

/// Stderr holds `expected` as a whole line.
#[track_caller]
fn assert_err_line(run: &Run, expected: &str) {
    assert!(
        run.stderr.lines().any(|line| line == expected),
        "expected stderr line {expected:?}\nexit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.code,
        run.stdout,
        run.stderr
    );
}

fn only_transcript(sandbox: &Sandbox, plan: &str) -> String {
    let files = sandbox.artifacts(plan, "transcripts");
    assert_eq!(files.len(), 1, "transcripts: {files:?}");
    fs::read_to_string(&files[0]).expect("transcript")
}

fn only_outcome(sandbox: &Sandbox, plan: &str) -> Value {
    let files = sandbox.artifacts(plan, "outcomes");
    assert_eq!(files.len(), 1, "outcomes: {files:?}");
    serde_json::from_slice(&fs::read(&files[0]).expect("outcome")).expect("outcome parses")
}

/// The lines after `--- runner trailer ---`.
fn trailer_lines(transcript: &str) -> Vec<String> {
    let (_, trailer) = transcript
        .rsplit_once("--- runner trailer ---\n")
        .unwrap_or_else(|| panic!("no trailer in:\n{transcript}"));
    trailer.lines().map(str::to_owned).collect()
}

#[track_caller]
fn read_pid(path: &Path) -> u32 {
    fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .trim()
        .parse()
        .expect("pid")
}

struct ProcStat {
    ppid: u32,
    pgrp: u32,
    session: u32,
    start_time_ticks: u64,
}

fn proc_stat(pid: u32) -> ProcStat {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let (_, rest) = text.rsplit_once(')').expect("stat format");
    // Fields from 3 (state) on.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    ProcStat {
        ppid: fields[1].parse().expect("ppid"),
        pgrp: fields[2].parse().expect("pgrp"),
        session: fields[3].parse().expect("session"),
        start_time_ticks: fields[19].parse().expect("starttime"),
    }
}

/// Every path under `root` (relative), recursively, without following symlinks.
fn listing(root: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            out.insert(path.strip_prefix(root).expect("under root").to_path_buf());
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// After one completed attempt, the only new paths are the state layout of that attempt and
/// the named extras: no lock file, no temporary file.
#[track_caller]
fn assert_only_expected_files(
    sandbox: &Sandbox,
    plan: &str,
    before: &BTreeSet<PathBuf>,
    extras: &[&str],
) {
    let state = sandbox.state(plan);
    let id = state["last_run"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let dir = sandbox
        .state_dir(plan)
        .strip_prefix(&sandbox.root)
        .expect("state dir under root")
        .to_path_buf();
    let mut expected: BTreeSet<PathBuf> = before.clone();
    expected.insert(PathBuf::from(".ai-session-handler"));
    expected.insert(PathBuf::from(".ai-session-handler/plans"));
    for relative in [
        String::new(),
        "state.json".into(),
        "prompts".into(),
        format!("prompts/{id}.txt"),
        "transcripts".into(),
        format!("transcripts/{id}.txt"),
        "outcomes".into(),
        format!("outcomes/{id}.json"),
        // The run's event stream (docs/cli.md).
        "events.jsonl".into(),
    ] {
        expected.insert(if relative.is_empty() {
            dir.clone()
        } else {
            dir.join(relative)
        });
    }
    for extra in extras {
        expected.insert(PathBuf::from(extra));
    }
    assert_eq!(listing(&sandbox.root), expected);
}
