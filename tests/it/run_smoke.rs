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

/// The README's first command after the install: the bundled demo (`examples/run-demo.sh`,
/// the installed binary on `PATH`) runs the three-phase plan with the demo agent to the end,
/// its Verify check included, and `status` shows each phase's tokens and the run's total.
#[test]
fn the_bundled_demo_runs_to_the_end_and_shows_its_usage() {
    let sandbox = Sandbox::new();
    let bin_dir = std::path::Path::new(BIN)
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::create_dir(sandbox.path("tmp")).expect("tmp");
    let output = sandbox
        .command_for(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/run-demo.sh"))
        .env("PATH", path)
        .env("TMPDIR", sandbox.path("tmp"))
        .output()
        .expect("run the demo");
    let run = Run::from_output(output);
    run.assert_code(0);
    assert!(
        run.stdout.contains("runner-complete: all phases complete"),
        "{}",
        run.stdout
    );
    assert!(
        run.raw_stderr.contains("--- verify 1: "),
        "the Verify check of phase 1 ran: {}",
        run.raw_stderr
    );
    let table = |phase: &str| {
        run.stdout
            .lines()
            .find(|line| line.starts_with(phase) && line.contains(" done "))
            .unwrap_or_else(|| panic!("no row of {phase} in {}", run.stdout))
            .to_owned()
    };
    for phase in ["phase-1", "phase-2", "phase-3"] {
        assert!(table(phase).contains(" 1350 "), "{}", table(phase));
    }
    assert!(
        run.stdout
            .contains("totals: 3/3 phases done · 3 attempts · ")
            && run.stdout.contains(" · tokens 4050 · cost –"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("usage: 3600 in (2400 cached), 450 out tokens"),
        "{}",
        run.stdout
    );
    sandbox.assert_no_survivors();
}
