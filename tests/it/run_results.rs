//! Execution engine, part A: what one `run` produces. Every result exit code and its exact
//! output lines, every result-block framing rule of docs/worker-protocol.md through the real binary, live output
//! filtering and `--quiet`, the transcript layout, the worker prompt, command-template
//! placeholders and the child's working directory, state and artifact records, plan edits during
//! a run, and the refusal of a stopped phase followed by `--retry-stopped`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use regex::Regex;
use serde_json::{Value, json};

const RUNNER_COMPLETE: &str = "runner-complete: all phases complete\n";
const TIMESTAMP: &str = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z";

// ---------------------------------------------------------------------------------------------
// Result exit codes
// ---------------------------------------------------------------------------------------------

#[test]
fn complete_exits_0_with_runner_complete_last() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(
        &sandbox,
        "echo working\necho '<phase-complete>Built it.</phase-complete>'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(0);
    assert!(run.stdout.ends_with(RUNNER_COMPLETE), "{}", run.stdout);
    assert_eq!(run.stderr, "");
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert_eq!(state["last_run"]["status"], "phase-complete");
    assert_eq!(state["last_run"]["summary"], "Built it.");
    assert!(state["stop"].is_null());
    sandbox.assert_no_survivors();
}

#[test]
fn blocked_exits_2_and_prints_the_two_line_reason_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = agent(
        &sandbox,
        "echo working\nprintf '<phase-blocked>Need credentials.\\nAsk the admin.</phase-blocked>\\n'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(2);
    assert_eq!(
        run.stdout,
        "working\nphase-blocked: Need credentials.\nAsk the admin.\n"
    );
    assert_eq!(run.stdout.matches("Need credentials.").count(), 1);
    assert!(!run.stdout.contains("<phase-"), "{}", run.stdout);
    // The way on, as the last line: the same command with --retry-stopped.
    assert_eq!(
        run.stderr,
        format!(
            "next: resolve the blocker, then ai-session-handler run --plan plan.md --agent-cmd {} --retry-stopped\n",
            agent.display()
        )
    );

    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!([]));
    assert_eq!(
        state["stop"],
        json!({
            "reason": "blocked",
            "phase_id": "phase-1",
            "message": "Need credentials.\nAsk the admin.",
            "clarification_request": null,
        })
    );
    assert_eq!(
        state["current_phase"],
        json!({"id": "phase-1", "title": "Step 1"})
    );
    assert_eq!(state["last_run"]["status"], "blocked");
    assert_eq!(state["last_run"]["exit_code"], 2);
    // The run stopped: phase 2 was never launched.
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    sandbox.assert_no_survivors();
}

#[test]
fn needs_clarification_exits_3_and_records_the_question() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(
        &sandbox,
        "echo '<phase-needs-clarification>Which API version?</phase-needs-clarification>'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(3);
    assert_eq!(
        run.stdout,
        "phase-needs-clarification: Which API version?\n"
    );
    // The stop points at `answer`, which writes the answer into the plan and continues.
    assert_eq!(
        run.stderr,
        "next: ai-session-handler answer --plan plan.md TEXT --run\n"
    );
    let state = sandbox.state("plan.md");
    assert_eq!(
        state["stop"],
        json!({
            "reason": "needs-clarification",
            "phase_id": "phase-1",
            "message": null,
            "clarification_request": "Which API version?",
        })
    );
    assert_eq!(state["last_run"]["status"], "needs-clarification");
    assert_eq!(state["last_run"]["exit_code"], 3);
    assert_eq!(state["completed_phase_ids"], json!([]));
    sandbox.assert_no_survivors();
}

#[test]
fn failure_exits_4_with_paths_and_the_transcript_tail() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(
        &sandbox,
        "i=1\nwhile [ $i -le 50 ]; do echo \"line $i\"; i=$((i+1)); done\nexit 9\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(4);

    let outcome = only(sandbox.artifacts("plan.md", "outcomes"));
    let transcript = only(sandbox.artifacts("plan.md", "transcripts"));
    let transcript_text = read_text(&transcript);
    let transcript_lines: Vec<&str> = transcript_text.lines().collect();
    let tail = &transcript_lines[transcript_lines.len() - 40..];
    let mut expected = vec![
        "agent-failed: agent command exited with code 9".to_owned(),
        format!("outcome: {}", outcome.display()),
        format!("transcript: {}", transcript.display()),
        "transcript tail (last 40 lines):".to_owned(),
    ];
    expected.extend(tail.iter().map(|line| (*line).to_owned()));
    expected.push(format!(
        "next: inspect the transcript and fix the cause, then ai-session-handler run --plan plan.md --agent-cmd {} --retry-stopped",
        agent.display()
    ));
    assert_eq!(run.stderr.lines().collect::<Vec<_>>(), expected);
    // The agent's last lines are in the tail; its early ones are not.
    let stderr_lines: Vec<&str> = run.stderr.lines().collect();
    assert!(stderr_lines.contains(&"line 50"));
    assert!(stderr_lines.contains(&"line 16"));
    assert!(!stderr_lines.contains(&"line 15"));
    // Live output went to stdout as it was produced; the failure report only to stderr.
    assert!(run.stdout.starts_with("line 1\nline 2\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("agent-failed"));

    let state = sandbox.state("plan.md");
    assert_eq!(state["last_run"]["status"], "agent-failed");
    assert_eq!(state["last_run"]["exit_code"], 4);
    assert_eq!(state["stop"]["reason"], "agent-failed");
    assert_eq!(state["stop"]["message"], "agent command exited with code 9");
    assert_eq!(read_json(&outcome)["exit_code"], 9);
    sandbox.assert_no_survivors();
}

#[test]
fn max_phases_1_on_three_phases_runs_exactly_one() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    let launches = sandbox.path("launches");
    let agent = agent(
        &sandbox,
        &format!(
            "echo \"$1\" >> '{}'\nprintf '<phase-complete>done</phase-complete>'\n",
            launches.display()
        ),
    );
    let template = format!("{} {{run_id}}", agent.display());
    let run = sandbox.run(&[
        "run",
        "--plan",
        "plan.md",
        "--agent-cmd",
        &template,
        "--max-phases",
        "1",
    ]);
    run.assert_code(0);
    assert_eq!(run.stdout, "phase-complete: phase-1\n");
    // The command that runs the phases left, quoted to paste.
    assert_eq!(
        run.stderr,
        format!(
            "next: ai-session-handler run --plan plan.md --agent-cmd '{template}' --max-phases 1\n"
        )
    );
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert!(state["current_phase"].is_null());
    let launched = read_text(&launches);
    assert_eq!(launched.lines().count(), 1, "{launched}");
    assert!(launched.contains("-phase-1-"), "{launched}");
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    sandbox.assert_no_survivors();
}

/// A limit that the plan's end reaches first stops nothing: the run reports completion
/// (docs/worker-protocol.md `runner-complete` "when nothing remains"). Either report re-checks the plan bytes
/// first (docs/state-and-recovery.md).
#[test]
fn max_phases_equal_to_the_remaining_phases_reports_runner_complete() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let worker = agent(&sandbox, "printf '<phase-complete>done</phase-complete>'\n");
    let run = sandbox.run_plan("plan.md", &worker, &["--max-phases", "2"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");

    // The limit reached with phases left, or at the plan's end, when the last phase run
    // edits the plan: the phase's outcome stays committed, but completion is not reported.
    for phases in [2, 1] {
        let edited = Sandbox::new();
        edited.write("plan.md", plan_with_phases(phases));
        let plan = edited.path("plan.md");
        let editor = agent(
            &edited,
            &format!(
                "echo '<!-- edited -->' >> '{}'\nprintf '<phase-complete>done</phase-complete>'\n",
                plan.display()
            ),
        );
        let run = edited.run_plan("plan.md", &editor, &["--max-phases", "1"]);
        run.assert_code(5);
        assert_eq!(run.stdout, "", "{phases} phases");
        assert!(run.stderr.contains("plan hash mismatch"), "{}", run.stderr);
        assert_eq!(
            edited.state("plan.md")["completed_phase_ids"],
            json!(["phase-1"])
        );
    }
}

/// Limits too large for the clock are finite and positive, so valid: they never fire, and
/// nothing panics.
#[test]
fn enormous_timeouts_mean_no_deadline() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        "{\"timeout_seconds\": 1e300, \"idle_timeout_seconds\": 1e300}\n",
    );
    let worker = agent(&sandbox, "printf '<phase-complete>done</phase-complete>'\n");
    let run = sandbox.run_plan("plan.md", &worker, &[]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");

    let flags = Sandbox::new();
    flags.write("plan.md", plan_with_phases(1));
    let worker = agent(&flags, "printf '<phase-complete>done</phase-complete>'\n");
    let run = flags.run_plan(
        "plan.md",
        &worker,
        &[
            "--timeout",
            "2e19",
            "--idle-timeout",
            "1.7976931348623157e308",
        ],
    );
    run.assert_code(0);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    flags.assert_no_survivors();
}

/// A blocked attempt does not use up the limit: the limit counts successful phases of this
/// invocation only.
#[test]
fn max_phases_counts_successful_phases_of_this_invocation() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(4));
    let launches = sandbox.path("launches");
    let blocked_once = sandbox.path("blocked-once");
    let agent = agent(
        &sandbox,
        &format!(
            r#"echo "$1" >> '{launches}'
case "$1" in
  *-phase-2-*)
    if [ ! -e '{flag}' ]; then
      touch '{flag}'
      printf '<phase-blocked>Need a decision.</phase-blocked>'
      exit 0
    fi
    ;;
esac
printf '<phase-complete>done</phase-complete>'
"#,
            launches = launches.display(),
            flag = blocked_once.display()
        ),
    );
    let template = format!("{} {{run_id}}", agent.display());
    let args = [
        "run",
        "--plan",
        "plan.md",
        "--agent-cmd",
        &template,
        "--max-phases",
        "2",
    ];

    let first = sandbox.run(&args);
    first.assert_code(2);
    assert_eq!(first.stdout, "phase-blocked: Need a decision.\n");

    let mut retry = args.to_vec();
    retry.push("--retry-stopped");
    let second = sandbox.run(&retry);
    second.assert_code(0);
    assert_eq!(second.stdout, "phase-complete: phase-3\n");
    // The flag this run needed is not part of the next one.
    assert_eq!(
        second.stderr,
        format!(
            "next: ai-session-handler run --plan plan.md --agent-cmd '{template}' --max-phases 2\n"
        )
    );

    let state = sandbox.state("plan.md");
    assert_eq!(
        state["completed_phase_ids"],
        json!(["phase-1", "phase-2", "phase-3"])
    );
    let launched: Vec<String> = read_text(&launches).lines().map(str::to_owned).collect();
    assert_eq!(launched.len(), 4, "{launched:?}");
    assert!(
        launched.iter().all(|id| !id.contains("-phase-4-")),
        "{launched:?}"
    );
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Result block framing (docs/worker-protocol.md), each with a zero exit from the agent
// ---------------------------------------------------------------------------------------------

const INVALID: &str = "agent output contained an invalid terminal marker";
const MULTIPLE: &str = "agent output contained multiple terminal markers";
const MISSING: &str = "agent output did not contain a terminal marker";

#[test]
fn inline_tag_is_invalid_marker() {
    let (sandbox, run) = run_one_phase(
        "echo 'fixture: <phase-complete>x</phase-complete>'\necho 'RuntimeError: failed'\n",
    );
    assert_attempt_failed(&sandbox, &run, "invalid-marker", INVALID);
    // The prose around the quoted tag is kept in the transcript.
    assert!(last_transcript(&sandbox).contains("RuntimeError: failed"));
}

#[test]
fn inline_tag_alone_is_invalid_marker() {
    let (sandbox, run) = run_one_phase("echo 'fixture: <phase-complete>x</phase-complete>'\n");
    assert_attempt_failed(&sandbox, &run, "invalid-marker", INVALID);
}

#[test]
fn fenced_block_is_invalid_marker() {
    let (sandbox, run) =
        run_one_phase("printf '```text\\n<phase-complete>done</phase-complete>\\n'\n");
    assert_attempt_failed(&sandbox, &run, "invalid-marker", INVALID);
}

#[test]
fn empty_body_is_invalid_marker() {
    let (sandbox, run) = run_one_phase("printf '<phase-complete>  \\n  </phase-complete>\\n'\n");
    assert_attempt_failed(&sandbox, &run, "invalid-marker", INVALID);
}

#[test]
fn trailing_text_after_the_close_is_invalid_marker() {
    let (sandbox, run) = run_one_phase(
        "echo '<phase-complete>done</phase-complete>'\necho 'RuntimeError: implementation failed'\n",
    );
    assert_attempt_failed(&sandbox, &run, "invalid-marker", INVALID);
}

#[test]
fn two_blocks_are_multiple_markers() {
    let (sandbox, run) = run_one_phase(
        "echo '<phase-complete>one</phase-complete>'\necho '<phase-complete>two</phase-complete>'\n",
    );
    assert_attempt_failed(&sandbox, &run, "multiple-markers", MULTIPLE);
}

#[test]
fn results_on_both_streams_are_multiple_markers() {
    let (sandbox, run) = run_one_phase(
        "echo '<phase-complete>done</phase-complete>'\necho '<phase-blocked>stuck</phase-blocked>' >&2\n",
    );
    assert_attempt_failed(&sandbox, &run, "multiple-markers", MULTIPLE);
    // Live stderr showed nothing of the hidden block, then the report.
    assert!(
        run.stderr.starts_with(&format!(
            "multiple-markers: {MULTIPLE} (terminal result was emitted on both stdout and stderr)\n"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn stderr_diagnostics_with_a_stdout_result_complete() {
    let (sandbox, run) = run_one_phase(
        "echo 'warning: something odd' >&2\necho 'progress'\necho '<phase-complete>done</phase-complete>'\n",
    );
    run.assert_code(0);
    assert!(run.stdout.ends_with(RUNNER_COMPLETE));
    assert_eq!(run.stderr, "warning: something odd\n");
    assert_completed_with(&sandbox, "done");
}

#[test]
fn result_on_stderr_only_is_accepted() {
    let (sandbox, run) = run_one_phase(
        "echo 'ordinary stdout'\necho '<phase-complete>from stderr</phase-complete>' >&2\n",
    );
    run.assert_code(0);
    assert_eq!(run.stdout, format!("ordinary stdout\n{RUNNER_COMPLETE}"));
    // The hidden block takes its line end with it: nothing reaches the live stderr.
    assert_eq!(run.stderr, "");
    assert_completed_with(&sandbox, "from stderr");
}

/// Tags and a UTF-8 `é` (0xC3 0xA9) are split across separate writes with pauses between them.
#[test]
fn block_split_across_writes_completes_with_exact_summary() {
    let (sandbox, run) = run_one_phase(
        r"printf 'progress\n<phase-'
sleep 0.05
printf 'complete>Changed caf\303'
sleep 0.05
printf '\251.txt.\nTests pass.</phase-com'
sleep 0.05
printf 'plete>\n'
",
    );
    run.assert_code(0);
    assert_eq!(run.stdout, format!("progress\n{RUNNER_COMPLETE}"));
    assert_completed_with(&sandbox, "Changed café.txt.\nTests pass.");
    assert!(
        last_transcript(&sandbox)
            .contains("<phase-complete>Changed café.txt.\nTests pass.</phase-complete>")
    );
}

#[test]
fn crlf_around_and_inside_the_block_completes() {
    let (sandbox, run) = run_one_phase(
        r"printf 'progress\r\n<phase-complete>\r\nline one\r\nline two\r\n</phase-complete>\r\n'
",
    );
    run.assert_code(0);
    assert!(run.stdout.ends_with(RUNNER_COMPLETE));
    assert_completed_with(&sandbox, "line one\r\nline two");
}

#[test]
fn ten_mib_body_completes_with_the_whole_summary() {
    const BODY_BYTES: usize = 10 * 1024 * 1024;
    let (sandbox, run) = run_one_phase(&format!(
        "printf '<phase-complete>'\nhead -c {BODY_BYTES} /dev/zero | tr '\\0' x\nprintf '</phase-complete>\\n'\n"
    ));
    run.assert_code(0);
    // The body never reaches the live output.
    assert_eq!(run.stdout, RUNNER_COMPLETE);
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    let outcome = read_json(&only(sandbox.artifacts("plan.md", "outcomes")));
    assert_eq!(outcome["status"], "phase-complete");
    let summary = outcome["summary"].as_str().expect("summary is text");
    assert_eq!(summary.len(), BODY_BYTES);
    assert!(summary.bytes().all(|byte| byte == b'x'));
    let transcript = fs::metadata(only(sandbox.artifacts("plan.md", "transcripts")))
        .expect("transcript")
        .len();
    assert!(
        transcript > BODY_BYTES as u64,
        "transcript has {transcript} bytes"
    );
}

#[test]
fn valid_block_after_nonzero_exit_is_agent_failed() {
    let (sandbox, run) = run_one_phase("echo '<phase-complete>done</phase-complete>'\nexit 3\n");
    assert_attempt_failed(
        &sandbox,
        &run,
        "agent-failed",
        "agent command exited with code 3",
    );
    assert_eq!(
        first_line(&run.stderr),
        "agent-failed: agent command exited with code 3"
    );
}

#[test]
fn no_tag_is_missing_marker() {
    let (sandbox, run) = run_one_phase("echo 'no marker here'\n");
    assert_attempt_failed(&sandbox, &run, "missing-marker", MISSING);
    assert_eq!(
        first_line(&run.stderr),
        format!("missing-marker: {MISSING}")
    );
}

#[test]
fn longer_tag_word_is_missing_marker() {
    let (sandbox, run) = run_one_phase("echo '<phase-completed>'\n");
    assert_attempt_failed(&sandbox, &run, "missing-marker", MISSING);
    assert_eq!(
        first_line(&run.stderr),
        format!("missing-marker: {MISSING}")
    );
}

// ---------------------------------------------------------------------------------------------
// Live output
// ---------------------------------------------------------------------------------------------

/// Phase 1 ends with a block split across writes on stdout, phase 2 on stderr: both are hidden
/// from the live stream they were written to and kept in the transcripts.
#[test]
fn split_blocks_are_hidden_from_live_output_on_both_streams() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = agent(
        &sandbox,
        r"case $1 in
  *-phase-1-*)
    echo 'chatter one'
    printf '<phase-'; sleep 0.05
    printf 'complete>secret one'; sleep 0.05
    printf '</phase-'; sleep 0.05
    printf 'complete>'
    ;;
  *)
    echo 'chatter two' >&2
    printf '<phase-com' >&2; sleep 0.05
    printf 'plete>secret two' >&2; sleep 0.05
    printf '</phase-complete' >&2; sleep 0.05
    printf '>' >&2
    ;;
esac
",
    );
    let template = format!("{} {{run_id}}", agent.display());
    let run = sandbox.run(&["run", "--plan", "plan.md", "--agent-cmd", &template]);
    run.assert_code(0);
    assert_eq!(run.stdout, format!("chatter one\n{RUNNER_COMPLETE}"));
    assert_eq!(run.stderr, "chatter two\n");

    let transcripts = sandbox.artifacts("plan.md", "transcripts");
    let first = read_text(&find_by_phase(&transcripts, "phase-1"));
    let second = read_text(&find_by_phase(&transcripts, "phase-2"));
    assert!(first.contains("chatter one\n<phase-complete>secret one</phase-complete>"));
    assert!(second.contains("chatter two\n<phase-complete>secret two</phase-complete>"));
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1", "phase-2"]));
    sandbox.assert_no_survivors();
}

#[test]
fn quiet_prints_only_the_result_line_and_keeps_the_transcript() {
    let (sandbox, run) = run_one_phase_with(
        "echo 'chatter on stdout'\necho 'chatter on stderr' >&2\necho '<phase-complete>quiet done</phase-complete>'\n",
        &["--quiet"],
    );
    run.assert_code(0);
    assert_eq!(run.stdout, RUNNER_COMPLETE);
    assert_eq!(run.stderr, "");
    let transcript = last_transcript(&sandbox);
    assert!(transcript.contains("chatter on stdout\n"));
    assert!(transcript.contains("chatter on stderr\n"));
    assert!(transcript.contains("<phase-complete>quiet done</phase-complete>\n"));
    assert_completed_with(&sandbox, "quiet done");
}

#[test]
fn live_output_keeps_each_stream() {
    let (_sandbox, run) = run_one_phase(
        "echo 'to stdout'\necho 'to stderr' >&2\necho 'more stdout'\nprintf '<phase-complete>done</phase-complete>'\n",
    );
    run.assert_code(0);
    assert_eq!(
        run.stdout,
        format!("to stdout\nmore stdout\n{RUNNER_COMPLETE}")
    );
    assert_eq!(run.stderr, "to stderr\n");
}

// ---------------------------------------------------------------------------------------------
// Transcript layout
// ---------------------------------------------------------------------------------------------

#[test]
fn transcript_has_header_output_and_trailer() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(
        &sandbox,
        "echo 'agent output'\necho '<phase-complete>done</phase-complete>'\n",
    );
    let template = format!(
        "{} --prompt {{prompt_file}} 'two words' \"it's\"",
        agent.display()
    );
    let run = sandbox.run(&["run", "--plan", "plan.md", "--agent-cmd", &template]);
    run.assert_code(0);

    let state = sandbox.state("plan.md");
    let attempt = state["last_run"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let dir = sandbox.state_dir("plan.md");
    let prompt = dir.join("prompts").join(format!("{attempt}.txt"));
    let root = sandbox.root.display().to_string();
    let text = read_text(&dir.join("transcripts").join(format!("{attempt}.txt")));
    let lines: Vec<&str> = text.lines().collect();
    let header = [
        format!("run_id: {attempt}"),
        "phase: phase-1 Step 1".to_owned(),
        format!("plan: {root}/plan.md"),
        format!("state: {}", dir.join("state.json").display()),
        format!("plan_workspace_path: {root}"),
        format!("execution_workspace_path: {root}"),
    ];
    assert_eq!(lines[..6], header);
    assert!(
        Regex::new(&format!("^started_at: {TIMESTAMP}$"))
            .unwrap()
            .is_match(lines[6]),
        "{}",
        lines[6]
    );
    assert_eq!(lines[7], format!("agent_cmd: {template}"));
    assert_eq!(
        lines[8],
        format!(
            "argv: {} --prompt {} 'two words' 'it'\"'\"'s'",
            agent.display(),
            prompt.display()
        )
    );
    assert_eq!(lines[9], "---");
    assert_eq!(lines[10], "agent output");
    assert_eq!(lines[11], "<phase-complete>done</phase-complete>");
    assert!(lines.contains(&"exit_code: 0"), "{text}");
    let finished = Regex::new(&format!("(?m)^finished_at: {TIMESTAMP}$")).unwrap();
    assert!(finished.is_match(&text), "{text}");
    assert!(!text.contains("without stdout/stderr output"));
    sandbox.assert_no_survivors();
}

#[test]
fn silent_agent_is_named_in_the_transcript() {
    let (sandbox, run) = run_one_phase("");
    assert_attempt_failed(&sandbox, &run, "missing-marker", MISSING);
    let transcript = last_transcript(&sandbox);
    let after_header = transcript
        .split_once("\n---\n")
        .expect("header separator")
        .1;
    assert!(
        after_header
            .starts_with("[runner] process exited with code 0 without stdout/stderr output\n"),
        "{transcript}"
    );
    assert!(transcript.contains("\nexit_code: 0\n"), "{transcript}");
    assert!(
        Regex::new(&format!("(?m)^finished_at: {TIMESTAMP}$"))
            .unwrap()
            .is_match(&transcript)
    );
    // The failure report's tail shows it too.
    assert!(
        run.stderr
            .contains("[runner] process exited with code 0 without stdout/stderr output"),
        "{}",
        run.stderr
    );
}

#[test]
fn silent_agent_killed_by_a_signal_is_named_as_such() {
    let (sandbox, run) = run_one_phase("kill -KILL $$\n");
    assert_attempt_failed(
        &sandbox,
        &run,
        "agent-failed",
        "agent command was killed by SIGKILL",
    );
    let transcript = last_transcript(&sandbox);
    assert!(
        transcript
            .contains("\n[runner] process was killed by SIGKILL without stdout/stderr output\n"),
        "{transcript}"
    );
    assert!(transcript.contains("\nsignal: SIGKILL\n"), "{transcript}");
}

// ---------------------------------------------------------------------------------------------
// Worker prompt
// ---------------------------------------------------------------------------------------------

#[test]
fn prompt_file_is_what_the_agent_read_and_carries_the_exact_plan_text() {
    let sandbox = Sandbox::new();
    let preamble = "# CRLF plan\r\n\r\nKeep names stable.\r\n\r\n";
    let body = "\r\n### Workspace\r\n\r\n.\r\n\r\n### Goal\r\n\r\nUse CRLF.\r\nNo trailing newline";
    sandbox.write(
        "plan.md",
        format!("{preamble}## Phase 1: Crlf Step\r\n{body}"),
    );
    let stdin_copy = sandbox.path("stdin-copy.txt");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat > '{}'\nprintf '<phase-complete>done</phase-complete>'\n",
            stdin_copy.display()
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(0);

    let attempt = sandbox.state("plan.md")["last_run"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let dir = sandbox.state_dir("plan.md");
    let prompt_path = only(sandbox.artifacts("plan.md", "prompts"));
    assert_eq!(
        prompt_path,
        dir.join("prompts").join(format!("{attempt}.txt"))
    );
    let prompt = fs::read(&prompt_path).expect("prompt");
    assert_eq!(prompt, fs::read(&stdin_copy).expect("stdin copy"));
    let prompt = String::from_utf8(prompt).expect("UTF-8 prompt");

    assert!(prompt.starts_with("AI SESSION HANDLER WORKER PROTOCOL\n"));
    for line in [
        "- selected_phase_id: phase-1\n".to_owned(),
        "- selected_phase_title: Crlf Step\n".to_owned(),
        format!("- run_id: {attempt}\n"),
        format!("- state_path: {}\n", dir.join("state.json").display()),
        format!("- plan_path: {}\n", sandbox.path("plan.md").display()),
    ] {
        assert!(prompt.contains(&line), "missing {line:?} in\n{prompt}");
    }
    assert!(prompt.contains(&format!(
        "\nGLOBAL PLAN INTENT START\n{preamble}GLOBAL PLAN INTENT END\n"
    )));
    assert!(prompt.contains(&format!(
        "\nSELECTED PHASE BODY START\n{body}\nSELECTED PHASE BODY END\n"
    )));
    sandbox.assert_no_survivors();
}

#[test]
fn next_phase_prompt_shows_the_previous_summary_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = agent(
        &sandbox,
        r"case $1 in
  *-phase-1-*) printf '<phase-complete>Phase one summary alpha\nsecond line beta</phase-complete>' ;;
  *) printf '<phase-complete>Phase two done</phase-complete>' ;;
esac
",
    );
    let template = format!("{} {{run_id}}", agent.display());
    sandbox
        .run(&["run", "--plan", "plan.md", "--agent-cmd", &template])
        .assert_code(0);

    let state = sandbox.state("plan.md");
    let first = &state["committed_outcomes"][0];
    assert_eq!(first["phase_id"], "phase-1");
    let prompt = read_text(&find_by_phase(
        &sandbox.artifacts("plan.md", "prompts"),
        "phase-2",
    ));
    let expected = format!(
        "DURABLE HANDOFF CONTEXT START\n\
         latest_relevant_summary:\n  \
         attempt_id: {id}\n  \
         phase_id: phase-1\n  \
         status: phase-complete\n  \
         outcome_path: {path}\n  \
         summary:\n    \
         Phase one summary alpha\n    \
         second line beta\n\
         earlier_committed_outcomes: none\n\
         DURABLE HANDOFF CONTEXT END\n",
        id = first["attempt_id"].as_str().unwrap(),
        path = first["path"].as_str().unwrap(),
    );
    assert!(prompt.contains(&expected), "{prompt}");
    assert_eq!(prompt.matches("Phase one summary alpha").count(), 1);
    assert!(!prompt.contains("phase-1 | phase-complete"));
    sandbox.assert_no_survivors();
}

/// Phase 2 blocks once; the retry's prompt shows the block as the latest summary and indexes
/// phase 1, and phase 3's prompt indexes both earlier outcomes with their statuses.
#[test]
fn prompts_index_earlier_outcomes_with_their_statuses_after_a_blocked_retry() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    let flag = sandbox.path("blocked-once");
    let agent = agent(
        &sandbox,
        &format!(
            r#"case "$1" in
  *-phase-2-*)
    if [ ! -e '{flag}' ]; then
      touch '{flag}'
      printf '<phase-blocked>Need the staging key.</phase-blocked>'
      exit 0
    fi
    ;;
esac
printf '<phase-complete>Done.</phase-complete>'
"#,
            flag = flag.display()
        ),
    );
    let template = format!("{} {{run_id}}", agent.display());
    let args = ["run", "--plan", "plan.md", "--agent-cmd", &template];
    sandbox.run(&args).assert_code(2);
    let mut retry = args.to_vec();
    retry.push("--retry-stopped");
    sandbox.run(&retry).assert_code(0);

    let state = sandbox.state("plan.md");
    let committed = state["committed_outcomes"].as_array().expect("list");
    let statuses: Vec<&str> = committed
        .iter()
        .map(|entry| entry["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "phase-complete",
            "blocked",
            "phase-complete",
            "phase-complete"
        ]
    );
    let path = |index: usize| committed[index]["path"].as_str().unwrap().to_owned();

    let retry_prompt = read_text(&PathBuf::from(
        committed[2]["path"]
            .as_str()
            .unwrap()
            .replace("/outcomes/", "/prompts/")
            .replace(".json", ".txt"),
    ));
    assert!(
        retry_prompt.contains(&format!(
            "  status: blocked\n  outcome_path: {}\n  summary:\n    Need the staging key.\n\
             earlier_committed_outcomes:\n  - phase-1 | phase-complete | {}\nDURABLE HANDOFF CONTEXT END\n",
            path(1),
            path(0)
        )),
        "{retry_prompt}"
    );
    assert_eq!(retry_prompt.matches("Need the staging key.").count(), 1);

    let last_prompt = read_text(&find_by_phase(
        &sandbox.artifacts("plan.md", "prompts"),
        "phase-3",
    ));
    assert!(
        last_prompt.contains(&format!(
            "earlier_committed_outcomes:\n  - phase-1 | phase-complete | {}\n  - phase-2 | blocked | {}\nDURABLE HANDOFF CONTEXT END\n",
            path(0),
            path(1)
        )),
        "{last_prompt}"
    );
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Command template placeholders and the execution workspace
// ---------------------------------------------------------------------------------------------

#[test]
fn placeholders_stay_single_arguments_in_a_path_with_spaces_and_quotes() {
    let sandbox = Sandbox::new();
    let workspace_name = "my work's \"dir\"";
    sandbox.write(&format!("{workspace_name}/AGENTS.md"), "# odd workspace\n");
    sandbox.write(&format!("{workspace_name}/plan.md"), plan_with_phases(1));
    let args_file = sandbox.path("args.txt");
    let agent = agent(
        &sandbox,
        &format!(
            "printf '%s\\n' \"$@\" > '{}'\nprintf '<phase-complete>done</phase-complete>'\n",
            args_file.display()
        ),
    );
    let template = format!(
        "{} {}",
        agent.display(),
        r#"{prompt_file} {workspace} {run_id} {transcript_file} {state_file} '{{"k": 1}}' --ws={workspace}"#
    );
    let plan = format!("{workspace_name}/plan.md");
    let run = sandbox.run(&["run", "--plan", &plan, "--agent-cmd", &template]);
    run.assert_code(0);

    let workspace = sandbox.path(workspace_name);
    let plans = workspace.join(".ai-session-handler/plans");
    let state_dir = only(
        fs::read_dir(&plans)
            .expect("plans dir")
            .map(|e| e.unwrap().path())
            .collect(),
    );
    assert_eq!(
        state_dir.file_name().unwrap().to_str().unwrap(),
        ai_session_handler::domain::plan_key::sha256_hex(b"plan.md")
    );
    let state: Value = read_json(&state_dir.join("state.json"));
    let attempt = state["last_run"]["run_id"].as_str().unwrap().to_owned();
    let prompt = state_dir.join("prompts").join(format!("{attempt}.txt"));
    let transcript = state_dir.join("transcripts").join(format!("{attempt}.txt"));
    let expected = vec![
        prompt.display().to_string(),
        workspace.display().to_string(),
        attempt.clone(),
        transcript.display().to_string(),
        state_dir.join("state.json").display().to_string(),
        r#"{"k": 1}"#.to_owned(),
        format!("--ws={}", workspace.display()),
    ];
    let seen = read_text(&args_file);
    assert_eq!(seen.lines().collect::<Vec<_>>(), expected);
    assert!(prompt.exists());

    let quoted: Vec<String> = std::iter::once(agent.display().to_string())
        .chain(expected.iter().cloned())
        .map(|word| shlex_quote(&word))
        .collect();
    let transcript_text = read_text(&transcript);
    assert!(
        transcript_text.contains(&format!("\nargv: {}\n", quoted.join(" "))),
        "{transcript_text}"
    );
    sandbox.assert_no_survivors();
}

/// Phase 1 runs in the plan workspace, phase 2 in `../svc`: cwd and `{workspace}` follow the
/// phase, while state and artifacts stay in the plan workspace.
#[test]
fn agent_runs_in_the_phase_execution_workspace() {
    let sandbox = Sandbox::new();
    sandbox.write("repo/AGENTS.md", "# repo\n");
    sandbox.write("svc/AGENTS.md", "# service\n");
    sandbox.write(
        "repo/plan.md",
        "# Two repos\n\n## Phase 1: Repo\n\n### Workspace\n\n.\n\n## Phase 2: Service\n\n### Workspace\n\n`../svc`\n",
    );
    let pwds = sandbox.path("pwds");
    let workspace_args = sandbox.path("workspace-args");
    let agent = agent(
        &sandbox,
        &format!(
            "pwd -P >> '{}'\necho \"$1\" >> '{}'\nprintf '<phase-complete>done</phase-complete>'\n",
            pwds.display(),
            workspace_args.display()
        ),
    );
    let template = format!("{} {{workspace}}", agent.display());
    let run = sandbox.run(&["run", "--plan", "repo/plan.md", "--agent-cmd", &template]);
    run.assert_code(0);

    let repo = sandbox.path("repo").display().to_string();
    let svc = sandbox.path("svc").display().to_string();
    let expected = format!("{repo}\n{svc}\n");
    assert_eq!(read_text(&pwds), expected);
    assert_eq!(read_text(&workspace_args), expected);

    let state_dir = sandbox
        .path("repo/.ai-session-handler/plans")
        .join(ai_session_handler::domain::plan_key::sha256_hex(b"plan.md"));
    let state: Value = read_json(&state_dir.join("state.json"));
    assert_eq!(state["completed_phase_ids"], json!(["phase-1", "phase-2"]));
    assert_eq!(state["last_run"]["execution_workspace"], svc.as_str());
    let outcome = read_json(Path::new(
        state["last_run"]["outcome_path"].as_str().unwrap(),
    ));
    assert_eq!(outcome["execution_workspace"], svc.as_str());
    let transcript = read_text(Path::new(
        state["last_run"]["transcript_path"].as_str().unwrap(),
    ));
    assert!(transcript.contains(&format!("\nplan_workspace_path: {repo}\n")));
    assert!(transcript.contains(&format!("\nexecution_workspace_path: {svc}\n")));
    let prompt = read_text(Path::new(
        state["last_run"]["prompt_path"].as_str().unwrap(),
    ));
    assert!(prompt.contains(&format!("- plan_workspace_path: {repo}\n")));
    assert!(prompt.contains(&format!("- execution_workspace_path: {svc}\n")));
    assert!(!sandbox.path("svc/.ai-session-handler").exists());
    assert!(!sandbox.path(".ai-session-handler").exists());
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// State and artifact records
// ---------------------------------------------------------------------------------------------

#[test]
fn three_phases_record_consistent_state_and_artifacts() {
    let sandbox = Sandbox::new();
    let plan_text = plan_with_phases(3);
    sandbox.write("plan.md", &plan_text);
    let agent = agent(
        &sandbox,
        "printf '<phase-complete>Finished %s.</phase-complete>' \"$1\"\n",
    );
    let template = format!("{} {{run_id}}", agent.display());
    let run = sandbox.run(&["run", "--plan", "plan.md", "--agent-cmd", &template]);
    run.assert_code(0);
    assert_eq!(run.stdout, RUNNER_COMPLETE);

    let dir = sandbox.state_dir("plan.md");
    let root = sandbox.root.display().to_string();
    let plan_path = format!("{root}/plan.md");
    let plan_sha = ai_session_handler::domain::plan_key::sha256_hex(plan_text.as_bytes());
    for kind in ["prompts", "transcripts", "outcomes"] {
        assert_eq!(sandbox.artifacts("plan.md", kind).len(), 3, "{kind}");
    }

    let state = sandbox.state("plan.md");
    assert_eq!(
        keys(&state),
        [
            "plan",
            "completed_phase_ids",
            "committed_outcomes",
            "current_phase",
            "active_attempt",
            "stop",
            "last_run"
        ]
    );
    assert_eq!(state["plan"]["path"], plan_path.as_str());
    assert_eq!(state["plan"]["sha256"], plan_sha.as_str());
    assert_eq!(
        state["completed_phase_ids"],
        json!(["phase-1", "phase-2", "phase-3"])
    );
    assert!(state["current_phase"].is_null());
    assert!(state["active_attempt"].is_null());
    assert!(state["stop"].is_null());

    let timestamp = Regex::new(&format!("^{TIMESTAMP}$")).unwrap();
    let committed = state["committed_outcomes"].as_array().expect("list");
    assert_eq!(committed.len(), 3);
    for (index, entry) in committed.iter().enumerate() {
        let phase = format!("phase-{}", index + 1);
        let id = entry["attempt_id"].as_str().unwrap();
        let id_format =
            Regex::new(&format!(r"^\d{{8}}T\d{{6}}Z-{phase}-[0-9a-f-]{{36}}$")).unwrap();
        assert!(id_format.is_match(id), "{id}");
        let outcome_path = dir.join("outcomes").join(format!("{id}.json"));
        let prompt_path = dir.join("prompts").join(format!("{id}.txt"));
        let transcript_path = dir.join("transcripts").join(format!("{id}.txt"));
        // The entry carries the outcome's duration and its output on both streams together,
        // for `status` (docs/state-and-recovery.md, "Schema evolution").
        let recorded = read_json(&outcome_path);
        let output = &recorded["output_bytes"];
        assert_eq!(
            *entry,
            json!({
                "attempt_id": id,
                "phase_id": phase,
                "status": "phase-complete",
                "path": outcome_path.display().to_string(),
                "duration_ms": recorded["duration_ms"],
                "output_bytes": output["stdout"].as_u64().unwrap() + output["stderr"].as_u64().unwrap(),
                "usage": recorded["usage"],
            })
        );
        assert!(prompt_path.is_file() && transcript_path.is_file());

        let outcome = read_json(&outcome_path);
        assert_eq!(
            keys(&outcome),
            [
                "attempt_id",
                "plan",
                "phase",
                "status",
                "summary",
                "started_at",
                "finished_at",
                "execution_workspace",
                "artifacts",
                "exit_code",
                "signal",
                "duration_ms",
                "output_bytes",
                "phase_attempt",
                "agent_cmd",
                "usage",
                "changes"
            ]
        );
        // The sandbox is no git work tree: the outcome says so.
        assert_eq!(outcome["changes"]["recorded"], "no");
        assert_eq!(outcome["changes"]["reason"], "not-a-git-work-tree");
        // The agent reports no usage: unknown, every number null (never 0).
        assert_eq!(
            outcome["usage"],
            json!({"input_tokens": null, "cached_input_tokens": null, "output_tokens": null,
                "reasoning_tokens": null, "cost_usd": null, "models": {}, "completeness": "unknown"})
        );
        assert_eq!(outcome["attempt_id"], id);
        assert_eq!(
            outcome["plan"],
            json!({"path": plan_path, "sha256": plan_sha})
        );
        assert_eq!(keys(&outcome["plan"]), ["path", "sha256"]);
        assert_eq!(
            outcome["phase"],
            json!({"id": phase, "title": format!("Step {}", index + 1)})
        );
        assert_eq!(keys(&outcome["phase"]), ["id", "title"]);
        assert_eq!(outcome["status"], "phase-complete");
        assert_eq!(outcome["summary"], format!("Finished {id}."));
        assert!(timestamp.is_match(outcome["started_at"].as_str().unwrap()));
        assert!(timestamp.is_match(outcome["finished_at"].as_str().unwrap()));
        assert_eq!(outcome["execution_workspace"], root.as_str());
        assert_eq!(
            outcome["artifacts"],
            json!({
                "prompt_path": prompt_path.display().to_string(),
                "transcript_path": transcript_path.display().to_string(),
            })
        );
        assert_eq!(
            keys(&outcome["artifacts"]),
            ["prompt_path", "transcript_path"]
        );
        assert_eq!(outcome["exit_code"], 0);
        assert!(outcome["signal"].is_null());
        assert!(outcome["duration_ms"].is_u64(), "{outcome:#}");
        // The agent printed only its result block, on stdout.
        let block = format!("<phase-complete>Finished {id}.</phase-complete>");
        assert_eq!(
            outcome["output_bytes"],
            json!({"stdout": block.len(), "stderr": 0})
        );
        assert_eq!(outcome["phase_attempt"], 1);
        assert_eq!(outcome["agent_cmd"], template.as_str());
    }

    let last = &state["last_run"];
    let last_id = committed[2]["attempt_id"].as_str().unwrap();
    let last_outcome = read_json(&dir.join("outcomes").join(format!("{last_id}.json")));
    assert_eq!(
        keys(last),
        [
            "run_id",
            "phase_id",
            "status",
            "started_at",
            "finished_at",
            "exit_code",
            "execution_workspace",
            "prompt_path",
            "transcript_path",
            "outcome_path",
            "summary"
        ]
    );
    assert_eq!(
        *last,
        json!({
            "run_id": last_id,
            "phase_id": "phase-3",
            "status": "phase-complete",
            "started_at": last_outcome["started_at"],
            "finished_at": last_outcome["finished_at"],
            "exit_code": 0,
            "execution_workspace": root,
            "prompt_path": last_outcome["artifacts"]["prompt_path"],
            "transcript_path": last_outcome["artifacts"]["transcript_path"],
            "outcome_path": committed[2]["path"],
            "summary": format!("Finished {last_id}."),
        })
    );
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Plan edited during a run
// ---------------------------------------------------------------------------------------------

#[test]
fn plan_edited_during_phase_1_stops_before_phase_2() {
    let sandbox = Sandbox::new();
    let original = plan_with_phases(2);
    let plan = sandbox.write("plan.md", &original);
    let agent = agent(
        &sandbox,
        &format!(
            "case \"$1\" in\n  *-phase-1-*) printf '\\nEdited by the agent.\\n' >> '{}' ;;\nesac\nprintf '<phase-complete>Phase %s done.</phase-complete>' \"${{1##*Z-}}\"\n",
            plan.display()
        ),
    );
    let template = format!("{} {{run_id}}", agent.display());
    let args = ["run", "--plan", "plan.md", "--agent-cmd", &template];
    let run = sandbox.run(&args);
    run.assert_code(5);
    let edited = fs::read(&plan).expect("plan");
    let stderr: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        stderr[..3],
        [
            format!("plan hash mismatch: {}", plan.display()),
            format!(
                "expected: {}",
                ai_session_handler::domain::plan_key::sha256_hex(original.as_bytes())
            ),
            format!(
                "actual:   {}",
                ai_session_handler::domain::plan_key::sha256_hex(&edited)
            ),
        ],
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("runner-complete"));

    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert_eq!(state["last_run"]["phase_id"], "phase-1");
    let summary = state["last_run"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("Phase phase-1-") && summary.ends_with(" done."),
        "{summary}"
    );
    let outcome = read_json(&only(sandbox.artifacts("plan.md", "outcomes")));
    assert_eq!(outcome["summary"], summary);
    // Phase 2 was never launched.
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    assert!(state["active_attempt"].is_null());

    // A plain rerun refuses the edited plan; accepting it continues with phase 2.
    let refused = sandbox.run(&args);
    refused.assert_code(5);
    assert!(
        refused.stderr.starts_with("plan hash mismatch: "),
        "{}",
        refused.stderr
    );
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);

    let mut accept = args.to_vec();
    accept.push("--accept-plan-change");
    let accepted = sandbox.run(&accept);
    accepted.assert_code(0);
    assert_eq!(accepted.stdout, RUNNER_COMPLETE);
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1", "phase-2"]));
    assert_eq!(
        state["plan"]["sha256"],
        ai_session_handler::domain::plan_key::sha256_hex(&edited).as_str()
    );
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 2);
    sandbox.assert_no_survivors();
}

#[test]
fn single_phase_plan_edited_reports_mismatch_instead_of_completion() {
    let sandbox = Sandbox::new();
    let original = plan_with_phases(1);
    let plan = sandbox.write("plan.md", &original);
    let agent = agent(
        &sandbox,
        &format!(
            "printf '\\nEdited.\\n' >> '{}'\nprintf '<phase-complete>Edited the plan.</phase-complete>'\n",
            plan.display()
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(5);
    assert_eq!(run.stdout, "");
    let edited = fs::read(&plan).expect("plan");
    assert!(
        run.stderr.starts_with(&format!(
            "plan hash mismatch: {}\nexpected: {}\nactual:   {}\n",
            plan.display(),
            ai_session_handler::domain::plan_key::sha256_hex(original.as_bytes()),
            ai_session_handler::domain::plan_key::sha256_hex(&edited)
        )),
        "{}",
        run.stderr
    );
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert_eq!(state["last_run"]["summary"], "Edited the plan.");

    let accepted = sandbox.run_plan("plan.md", &agent, &["--accept-plan-change"]);
    accepted.assert_code(0);
    assert_eq!(accepted.stdout, RUNNER_COMPLETE);
    assert_eq!(accepted.stderr, "");
    assert_eq!(
        sandbox.state("plan.md")["plan"]["sha256"],
        ai_session_handler::domain::plan_key::sha256_hex(&edited).as_str()
    );
    // Nothing was left to run.
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Stopped phase: refusal and --retry-stopped
// ---------------------------------------------------------------------------------------------

#[test]
fn stopped_phase_refuses_plain_run_and_retry_stopped_reruns_it() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let flag = sandbox.path("blocked-once");
    let agent = agent(
        &sandbox,
        &format!(
            "if [ ! -e '{flag}' ]; then\n  touch '{flag}'\n  printf '<phase-blocked>Need the API key.</phase-blocked>'\n  exit 0\nfi\nprintf '<phase-complete>Done now.</phase-complete>'\n",
            flag = flag.display()
        ),
    );
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(2);
    let before = sandbox.state_bytes("plan.md").expect("state written");
    let state = sandbox.state("plan.md");
    let blocked_id = state["last_run"]["run_id"].as_str().unwrap().to_owned();
    let root = sandbox.root.display().to_string();

    let refused = sandbox.run_plan("plan.md", &agent, &[]);
    refused.assert_code(5);
    assert_eq!(refused.stdout, "");
    let lines: Vec<&str> = refused.stderr.lines().collect();
    assert_eq!(
        lines[..7],
        [
            "error: phase phase-1 is stopped: blocked".to_owned(),
            "message: Need the API key.".to_owned(),
            format!("plan workspace path: {root}"),
            format!("execution workspace path: {root}"),
            format!("last run: {blocked_id} (blocked)"),
            format!(
                "transcript: {}",
                state["last_run"]["transcript_path"].as_str().unwrap()
            ),
            format!(
                "outcome: {}",
                state["last_run"]["outcome_path"].as_str().unwrap()
            ),
        ],
        "{}",
        refused.stderr
    );
    assert!(
        lines[7].starts_with("transcript tail (last "),
        "{}",
        refused.stderr
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!(
            "next: resolve the blocker, then ai-session-handler run --plan plan.md --agent-cmd {} --retry-stopped",
            agent.display()
        ),
        "{}",
        refused.stderr
    );
    assert_eq!(sandbox.state_bytes("plan.md").unwrap(), before);
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 1);

    let retried = sandbox.run_plan("plan.md", &agent, &["--retry-stopped"]);
    retried.assert_code(0);
    assert_eq!(retried.stdout, RUNNER_COMPLETE);
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert!(state["stop"].is_null());
    let committed = state["committed_outcomes"].as_array().unwrap();
    assert_eq!(committed.len(), 2);
    assert_eq!(committed[0]["attempt_id"], blocked_id.as_str());
    assert_eq!(committed[0]["status"], "blocked");
    assert_eq!(committed[1]["phase_id"], "phase-1");
    assert_eq!(committed[1]["status"], "phase-complete");
    let retry_id = committed[1]["attempt_id"].as_str().unwrap();
    assert_ne!(retry_id, blocked_id);
    assert!(retry_id.contains("-phase-1-"));
    assert_eq!(state["last_run"]["summary"], "Done now.");
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 2);
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// One single-phase run of a fake agent with `body`.
fn run_one_phase(body: &str) -> (Sandbox, Run) {
    run_one_phase_with(body, &[])
}

fn run_one_phase_with(body: &str, extra: &[&str]) -> (Sandbox, Run) {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = agent(&sandbox, body);
    let run = sandbox.run_plan("plan.md", &agent, extra);
    sandbox.assert_no_survivors();
    (sandbox, run)
}

/// Exit 4, `<status>: <message>` first on stderr with the outcome and transcript paths, nothing
/// completed, and the status recorded in state and in the outcome file.
#[track_caller]
fn assert_attempt_failed(sandbox: &Sandbox, run: &Run, status: &str, message: &str) {
    run.assert_code(4);
    assert!(!run.stdout.contains("runner-complete"), "{}", run.stdout);
    // The report follows whatever the agent wrote live to stderr.
    let lines: Vec<&str> = run.stderr.lines().collect();
    let report = lines
        .iter()
        .position(|line| line.starts_with(&format!("{status}: ")))
        .unwrap_or_else(|| panic!("no `{status}: ` line on stderr:\n{}", run.stderr));
    assert!(
        lines[report].starts_with(&format!("{status}: {message}")),
        "{}",
        run.stderr
    );
    let outcome_path = only(sandbox.artifacts("plan.md", "outcomes"));
    let transcript_path = only(sandbox.artifacts("plan.md", "transcripts"));
    assert_eq!(
        lines[report + 1],
        format!("outcome: {}", outcome_path.display())
    );
    assert_eq!(
        lines[report + 2],
        format!("transcript: {}", transcript_path.display())
    );
    assert!(
        lines[report + 3].starts_with("transcript tail (last "),
        "{}",
        run.stderr
    );

    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!([]));
    assert_eq!(state["last_run"]["status"], status);
    assert_eq!(state["last_run"]["exit_code"], 4);
    assert_eq!(state["stop"]["reason"], status);
    assert!(state["active_attempt"].is_null());
    let outcome = read_json(&outcome_path);
    assert_eq!(outcome["status"], status);
    let summary = outcome["summary"].as_str().expect("summary");
    assert!(summary.starts_with(message), "{summary}");
    assert_eq!(state["stop"]["message"], summary);
}

#[track_caller]
fn assert_completed_with(sandbox: &Sandbox, summary: &str) {
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert_eq!(state["last_run"]["status"], "phase-complete");
    assert_eq!(state["last_run"]["summary"], summary);
    let outcome = read_json(&only(sandbox.artifacts("plan.md", "outcomes")));
    assert_eq!(outcome["status"], "phase-complete");
    assert_eq!(outcome["summary"], summary);
}

fn last_transcript(sandbox: &Sandbox) -> String {
    let transcripts = sandbox.artifacts("plan.md", "transcripts");
    read_text(transcripts.last().expect("a transcript"))
}

/// The one artifact whose attempt id names `phase_id`.
#[track_caller]
fn find_by_phase(files: &[PathBuf], phase_id: &str) -> PathBuf {
    let marker = format!("-{phase_id}-");
    let matching: Vec<PathBuf> = files
        .iter()
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .contains(&marker)
        })
        .cloned()
        .collect();
    assert_eq!(matching.len(), 1, "{files:?}");
    matching.into_iter().next().unwrap()
}

#[track_caller]
fn only<T: std::fmt::Debug>(items: Vec<T>) -> T {
    assert_eq!(items.len(), 1, "expected exactly one: {items:?}");
    items.into_iter().next().unwrap()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn read_text(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn keys(object: &Value) -> Vec<&str> {
    object
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// POSIX shell quoting as Python's `shlex.quote` does it.
fn shlex_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r#"'"'"'"#))
    }
}
