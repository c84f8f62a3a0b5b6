//! End-to-end smoke tests: the main paths of `run` against fake agents.

use crate::common::*;

#[test]
fn completes_every_phase_and_records_state() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho working\necho '<phase-complete>done</phase-complete>'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(0);
    // The block is hidden from live output together with the line end after its closing tag,
    // so a phase leaves no empty line where its result was.
    assert_eq!(
        run.stdout,
        "working\nworking\nrunner-complete: all phases complete\n"
    );
    let state = sandbox.state("plan.md");
    assert_eq!(
        state["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
    assert!(state["active_attempt"].is_null());
    assert_eq!(sandbox.artifacts("plan.md", "outcomes").len(), 2);
    assert_eq!(sandbox.artifacts("plan.md", "transcripts").len(), 2);
    assert_eq!(sandbox.artifacts("plan.md", "prompts").len(), 2);
    sandbox.assert_no_survivors();
}

#[test]
fn nonzero_exit_is_agent_failed() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", "cat >/dev/null\nexit 7\n");
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(4);
    assert!(
        run.stderr
            .contains("agent-failed: agent command exited with code 7"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("[runner] process exited with code 7 without stdout/stderr output"),
        "{}",
        run.stderr
    );
}

#[test]
fn timeout_kills_term_ignoring_grandchild() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\n(trap '' TERM; while true; do sleep 1; done) &\ntrap '' TERM\nwhile true; do sleep 1; done\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--timeout", "0.5"]);
    run.assert_code(4);
    assert!(
        run.stderr
            .contains("timeout: agent command timed out after 0.5 seconds"),
        "{}",
        run.stderr
    );
    sandbox.assert_no_survivors();
}

/// Live output written straight to files (the console's inline path, no console thread) is the
/// same filtered stream as through pipes.
#[test]
fn live_output_to_regular_files_is_filtered_the_same() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho 'out <b>bold</b>'\necho 'err line' >&2\nprintf '<phase-comp'\nprintf 'lete>done</phase-complete>\\n'\n",
    );
    let stdout = std::fs::File::create(sandbox.path("stdout.txt")).unwrap();
    let stderr = std::fs::File::create(sandbox.path("stderr.txt")).unwrap();
    let status = sandbox
        .command()
        .args([
            "run",
            "--plan",
            "plan.md",
            "--agent-cmd",
            agent.to_str().unwrap(),
        ])
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(sandbox.path("stdout.txt")).unwrap(),
        "out <b>bold</b>\nrunner-complete: all phases complete\n"
    );
    assert_eq!(
        without_progress(&std::fs::read_to_string(sandbox.path("stderr.txt")).unwrap()),
        "err line\n"
    );
}
