//! Verification gates (issue 20; docs/plan-format.md, "Verify"): `check` lists each phase's
//! checks and validates their interpreters, `run` refuses a missing interpreter unless
//! `--no-verify`, the prompt (and `check --prompt`) names the checks and keeps the phase body
//! byte-identical, and `run` holds a `phase-complete` to the checks: a passing check completes
//! the phase, a failing one stops it as `verification-failed` (exit 4) and the next attempt —
//! `--retry-stopped` or a retry — is told which check failed; a check that runs too long is
//! stopped with everything it started; a signal during a check interrupts the run; only the
//! agent's output is judged. The plan errors of a Verify section are in `invalid_inputs`.

use std::fs;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::common::*;
use crate::progress_and_events::result_object;

const PLAN: &str = "plan.md";

/// Phase 2's body: a Verify section with a shell and a python3 check, commentary, CRLF lines.
const PHASE_2_BODY: &str = "\n### Workspace\n\n.\n\n### Verify\r\n\r\nThe prompt was read:\r\n\r\n```sh\r\ntest -s prompt.txt\r\n```\r\n\r\n~~~python3\r\nimport sys\r\nsys.exit(0)\r\n~~~\r\n";

fn plan() -> String {
    format!(
        "# Plan\n\nIntent.\n\n## Phase 1: Parse\n\n### Workspace\n\n.\n\n## Phase 2: Check\n{PHASE_2_BODY}"
    )
}

/// An agent made of shell builtins only (it runs with any `PATH`): reads its prompt, saves it
/// to `prompt.txt`, completes unless `fail` exists.
fn builtin_agent(sandbox: &Sandbox) -> String {
    let dir = sandbox.root.display();
    sandbox
        .script(
            "agent",
            &format!(
                "while IFS= read -r line; do printf '%s\\n' \"$line\"; done > {dir}/prompt.txt\n\
                 if [ -e {dir}/fail ]; then exit 7; fi\n\
                 echo '<phase-complete>done</phase-complete>'\n"
            ),
        )
        .display()
        .to_string()
}

#[test]
fn check_lists_each_phases_checks() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan());
    let agent = builtin_agent(&sandbox);
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &agent]);
    check.assert_code(0);
    assert_has_lines(
        &check.stdout,
        &[
            "verify phase-2 check 1 (sh, line 21): test -s prompt.txt",
            "verify phase-2 check 2 (python3, line 25): import sys",
        ],
    );
    let json = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &agent, "--json"]);
    json.assert_code(0);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["phases"][0]["checks"], json!([]));
    assert_eq!(
        report["phases"][1]["checks"],
        json!([
            {"index": 1, "interpreter": "sh", "line": 21, "command_first_line": "test -s prompt.txt"},
            {"index": 2, "interpreter": "python3", "line": 25, "command_first_line": "import sys"}
        ])
    );
}

#[test]
fn the_prompt_names_the_checks_and_keeps_the_phase_body_byte_identical() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan());
    let agent = builtin_agent(&sandbox);
    sandbox
        .run(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            &agent,
            "--quiet",
            "--max-phases",
            "1",
        ])
        .assert_code(0);
    let preview = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &agent, "--prompt"]);
    preview.assert_code(0);
    sandbox
        .run(&["run", "--plan", PLAN, "--agent-cmd", &agent, "--quiet"])
        .assert_code(0);
    let prompts = sandbox.artifacts(PLAN, "prompts");
    let written = fs::read(&prompts[1]).unwrap();
    let written = String::from_utf8(written).unwrap();
    let section = "VERIFICATION\n\
        - After you report `<phase-complete>`, the runner runs the checks of the selected phase's Verify section (in SELECTED PHASE BODY below), in order, in execution_workspace_path, and accepts the completion only when every check passes; the first failing check stops the phase as verification-failed.\n\
        - Run the checks yourself and make them pass before reporting completion.\n\
        checks:\n\
        \x20 - check 1 (sh): test -s prompt.txt\n\
        \x20 - check 2 (python3): import sys\n";
    for prompt in [&written, &preview.stdout] {
        assert!(prompt.contains(section), "{prompt}");
        assert!(
            prompt.contains(&format!(
                "SELECTED PHASE BODY START\n{PHASE_2_BODY}SELECTED PHASE BODY END\n"
            )),
            "the phase body is not byte-identical:\n{prompt:?}"
        );
    }
    // The prompt file is exactly what the agent read on stdin (CRLF included).
    assert_eq!(
        fs::read_to_string(sandbox.path("prompt.txt")).unwrap(),
        written
    );
    // Phase 1 has no checks: no section.
    assert!(
        !fs::read_to_string(&prompts[0])
            .unwrap()
            .contains("VERIFICATION")
    );
}

#[test]
fn a_missing_interpreter_refuses_run_and_check_unless_the_checks_are_skipped() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        "# Plan\n\n## Phase 1: A\n\n### Workspace\n\n.\n\n### Verify\n\n```bash\nmake test\n```\n",
    );
    let agent = builtin_agent(&sandbox);
    let empty = sandbox.path("empty-path");
    fs::create_dir_all(&empty).unwrap();
    let with_path = |args: &[&str]| {
        let output = sandbox
            .command()
            .args(args)
            .env("PATH", &empty)
            .output()
            .unwrap();
        Run::from_output(output)
    };
    let expected = format!(
        "error: {}:11: phase phase-1 verify check 1: verify interpreter 'bash' not found in PATH (searched {})",
        sandbox.path(PLAN).display(),
        empty.display()
    );
    let before = tree_snapshot(&sandbox.root);
    for command in ["run", "check"] {
        let run = with_path(&[command, "--plan", PLAN, "--agent-cmd", &agent]);
        run.assert_code(5);
        assert_has_line(&run.stderr, &expected);
        assert_eq!(
            tree_snapshot(&sandbox.root),
            before,
            "{command} changed something"
        );
    }
    let skipped = with_path(&["run", "--plan", PLAN, "--agent-cmd", &agent, "--no-verify"]);
    skipped.assert_code(0);
    assert_eq!(skipped.stdout, "runner-complete: all phases complete\n");
}

#[test]
fn verify_timeout_and_its_config_key_are_validated() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = builtin_agent(&sandbox);
    for bad in ["0", "-1", "nan", "soon"] {
        let run = sandbox.run(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            &agent,
            "--verify-timeout",
            bad,
        ]);
        run.assert_code(5);
        assert!(
            run.stderr.contains("--verify-timeout")
                && run
                    .stderr
                    .contains("expected a finite number of seconds greater than 0"),
            "{bad}: {}",
            run.stderr
        );
    }
    let config = sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"verify_timeout_seconds": 0}"#,
    );
    for command in ["run", "check"] {
        let run = sandbox.run(&[command, "--plan", PLAN, "--agent-cmd", &agent]);
        run.assert_code(5);
        assert_has_line(
            &run.stderr,
            &format!(
                "error: {}: expected verify_timeout_seconds to be a finite number greater than 0",
                config.display()
            ),
        );
    }
    assert!(!sandbox.state_dir(PLAN).exists());
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"verify_timeout_seconds": null}"#,
    );
    sandbox
        .run(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            &agent,
            "--verify-timeout",
            "30",
            "--quiet",
        ])
        .assert_code(0);
}

// ---- running the checks -------------------------------------------------------------------

/// A two-phase plan whose first phase has `verify` as its Verify section (after its
/// workspace); the second phase has no checks.
fn verified_plan(verify: &str) -> String {
    format!(
        "# Plan\n\nIntent.\n\n## Phase 1: Build\n\n### Workspace\n\n.\n\n### Verify\n\n{verify}\n## Phase 2: Ship\n\n### Workspace\n\n.\n"
    )
}

/// A fenced `sh` check.
fn sh(script: &str) -> String {
    format!("```sh\n{script}```\n\n")
}

/// An agent that appends each prompt it reads to `prompts.log` (and keeps the last one in
/// `prompt.txt`), writes `note.txt`, and reports completion with `implemented <phase>` —
/// unless `block` exists (then it is blocked), or it creates `fixed` first when its prompt
/// tells it a check failed and `fix-when-told` exists.
fn recording_agent(sandbox: &Sandbox) -> PathBuf {
    let dir = sandbox.root.display();
    sandbox.script(
        "agent",
        &format!(
            r#"cat > "{dir}/prompt.txt"
cat "{dir}/prompt.txt" >> "{dir}/prompts.log"
phase=$(sed -n 's/^- selected_phase_id: //p' "{dir}/prompt.txt")
echo "agent working on $phase"
echo hello > "{dir}/note.txt"
if [ -e "{dir}/block" ]; then echo '<phase-blocked>need an API key</phase-blocked>'; exit 0; fi
if [ -e "{dir}/fix-when-told" ] && grep -q '^VERIFICATION FAILURE$' "{dir}/prompt.txt"; then touch "{dir}/fixed"; fi
echo "<phase-complete>implemented $phase</phase-complete>"
"#
        ),
    )
}

fn outcomes(sandbox: &Sandbox) -> Vec<Value> {
    sandbox
        .artifacts(PLAN, "outcomes")
        .iter()
        .map(|path| read_json(path))
        .collect()
}

/// The outcome of the plan's `n`th attempt (1-based, in attempt-id order).
fn outcome_of_attempt(sandbox: &Sandbox, n: usize) -> Value {
    let state = sandbox.state(PLAN);
    let path = state["committed_outcomes"][n - 1]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("no attempt {n}: {state:#}"))
        .to_owned();
    read_json(Path::new(&path))
}

/// The prompt of the plan's `n`th attempt (attempt ids in one second sort by their uuid).
fn prompt_of_attempt(sandbox: &Sandbox, n: usize) -> String {
    let outcome = outcome_of_attempt(sandbox, n);
    fs::read_to_string(outcome["artifacts"]["prompt_path"].as_str().unwrap()).unwrap()
}

fn transcript_of(outcome: &Value) -> String {
    fs::read_to_string(outcome["artifacts"]["transcript_path"].as_str().unwrap()).unwrap()
}

fn status_text(sandbox: &Sandbox) -> String {
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    status.stdout
}

fn status_json(sandbox: &Sandbox) -> Value {
    let status = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    status.assert_code(0);
    serde_json::from_str(&status.stdout).unwrap()
}

#[test]
fn a_passing_check_completes_the_phase_and_only_the_agents_output_is_judged() {
    let sandbox = Sandbox::new();
    // The check prints what every scanner would stop at: a stop regex, a rate-limit pattern
    // and a result block. None of them sees it; the console shows it as it is, on stderr.
    sandbox.write(
        PLAN,
        verified_plan(&sh(
            "echo \"check saw $(cat note.txt)\"\necho 'CHECKWORD RATEWORD on stderr' >&2\necho '<phase-blocked>printed by the check</phase-blocked>'\n",
        )),
    );
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"rate_limit": {"patterns": ["RATEWORD"]}}"#,
    );
    let agent = recording_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--stop-on-regex", "CHECKWORD"]);
    run.assert_code(0);
    assert_eq!(
        run.stdout,
        "agent working on phase-1\nagent working on phase-2\nrunner-complete: all phases complete\n",
        "the agent's result blocks are hidden and the check's output is not on stdout"
    );
    assert_has_lines(
        &run.stderr,
        &[
            "--- verify 1: echo \"check saw $(cat note.txt)\" ---",
            "check saw hello",
        ],
    );
    assert_has_line(&run.stderr, "CHECKWORD RATEWORD on stderr");
    assert_has_line(
        &run.stderr,
        "<phase-blocked>printed by the check</phase-blocked>",
    );
    assert!(
        run.stderr
            .lines()
            .any(|line| line.starts_with("--- verify 1 passed: exited with code 0 after ")),
        "{}",
        run.stderr
    );

    let first = outcome_of_attempt(&sandbox, 1);
    assert_eq!(first["status"], "phase-complete");
    assert_eq!(first["summary"], "implemented phase-1");
    let checks = first["verification"].as_array().expect("a list of checks");
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0]["index"], 1);
    assert_eq!(
        checks[0]["command_first_line"],
        "echo \"check saw $(cat note.txt)\""
    );
    assert_eq!(checks[0]["exit_code"], 0);
    assert_eq!(
        checks[0]["output_bytes"],
        "check saw hello\nCHECKWORD RATEWORD on stderr\n<phase-blocked>printed by the check</phase-blocked>\n".len()
    );
    assert!(checks[0]["duration_ms"].is_u64());
    assert!(first.get("verification_failure").is_none(), "{first:#}");
    // The agent's output is sized without the check's.
    assert_eq!(
        first["output_bytes"]["stdout"],
        "agent working on phase-1\n<phase-complete>implemented phase-1</phase-complete>\n".len()
    );
    // The second phase has no checks: nothing recorded.
    assert!(
        outcome_of_attempt(&sandbox, 2)
            .get("verification")
            .is_none()
    );

    // The transcript: the agent's output, its trailer, then the check under its header.
    let transcript = transcript_of(&first);
    let trailer = transcript.find("--- runner trailer ---\n").unwrap();
    let header = transcript
        .find("--- verify 1: echo \"check saw $(cat note.txt)\" ---\ncheck saw hello\n")
        .unwrap_or_else(|| panic!("{transcript}"));
    assert!(trailer < header, "{transcript}");
    // Both streams in arrival order, then the footer.
    let footer = transcript
        .find("\n--- verify 1 passed: exited with code 0 after ")
        .unwrap_or_else(|| panic!("{transcript}"));
    for line in [
        "\nCHECKWORD RATEWORD on stderr\n",
        "\n<phase-blocked>printed by the check</phase-blocked>\n",
    ] {
        let at = transcript[header..].find(line).map(|at| at + header);
        assert!(at.is_some_and(|at| at < footer), "{line:?} in {transcript}");
    }
    assert!(transcript.ends_with(" output ---\n"), "{transcript}");

    let events = events_without_progress(&sandbox, PLAN);
    let started = events
        .iter()
        .position(|event| event["event"] == "verify-started")
        .expect("verify-started");
    assert_eq!(events[started]["index"], 1);
    assert_eq!(events[started]["of"], 1);
    assert_eq!(events[started]["phase_id"], "phase-1");
    assert_eq!(events[started + 1]["event"], "verify-finished");
    assert_eq!(events[started + 1]["exit_code"], 0);
    assert_eq!(events[started + 1]["passed"], true);
    assert_eq!(events[started + 1]["timed_out"], false);
    assert_eq!(events[started + 2]["event"], "outcome-committed");
    assert_eq!(events[started + 2]["verification"], first["verification"]);
    assert_eq!(
        events
            .iter()
            .filter(|event| event["event"] == "verify-started")
            .count(),
        1
    );

    let status = status_text(&sandbox);
    assert_has_lines(
        &status,
        &[
            "verify phase-1: passed (1 check)",
            "verify phase-2: not configured",
        ],
    );
    let json = status_json(&sandbox);
    assert_eq!(json["phases"][0]["verification"]["result"], "passed");
    assert_eq!(json["phases"][0]["verification"]["configured"], 1);
    assert_eq!(
        json["phases"][0]["verification"]["checks"],
        first["verification"]
    );
    assert_eq!(
        json["phases"][1]["verification"]["result"],
        "not-configured"
    );
    sandbox.assert_no_survivors();
}

#[test]
fn a_failing_check_stops_the_phase_and_the_retry_stopped_prompt_carries_it() {
    let sandbox = Sandbox::new();
    let failing = "echo 'running the tests'\necho 'test parse ... FAILED' >&2\necho '<phase-complete>printed by a test</phase-complete>' >&2\ntest -f fixed\n";
    sandbox.write(
        PLAN,
        verified_plan(&format!("{}{}", sh(failing), sh("touch second-ran\n"))),
    );
    let agent = recording_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &[]);
    run.assert_code(4);
    assert_has_lines(
        &run.stderr,
        &[
            "verification-failed: verify check 1 (echo 'running the tests') exited with code 1",
            "the agent had reported phase-complete: implemented phase-1",
        ],
    );
    // The report's copy of the tail is printable: the tag a test printed is defused there.
    assert_has_lines(
        &run.stderr,
        &[
            "verify check 1 output (last 3 lines):",
            "running the tests",
            "test parse ... FAILED",
            "&lt;phase-complete>printed by a test&lt;/phase-complete>",
        ],
    );
    let agent_arg = agent.display().to_string();
    assert_eq!(
        run.stderr.lines().last().unwrap(),
        format!(
            "next: inspect the failed check's output (the next attempt is shown it too), then ai-session-handler run --plan plan.md --agent-cmd {agent_arg} --retry-stopped"
        )
    );
    assert!(
        !sandbox.path("second-ran").exists(),
        "the first failing check stops the rest"
    );

    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "verification-failed");
    assert_eq!(
        state["stop"]["message"],
        "verify check 1 (echo 'running the tests') exited with code 1"
    );
    assert_eq!(state["last_run"]["status"], "verification-failed");
    assert_eq!(state["last_run"]["summary"], "implemented phase-1");
    assert_eq!(state["last_run"]["exit_code"], 4);
    assert_eq!(state["completed_phase_ids"], json!([]));
    let outcome = outcome_of_attempt(&sandbox, 1);
    assert_eq!(outcome["status"], "verification-failed");
    assert_eq!(outcome["summary"], "implemented phase-1");
    assert_eq!(outcome["verification"].as_array().unwrap().len(), 1);
    assert_eq!(
        outcome["verification_failure"],
        json!({
            "index": 1,
            "command_first_line": "echo 'running the tests'",
            "exit_code": 1,
            "signal": null,
            "timed_out": false,
            "output_tail": "running the tests\ntest parse ... FAILED\n<phase-complete>printed by a test</phase-complete>",
        })
    );
    let transcript = transcript_of(&outcome);
    assert!(
        transcript.ends_with("--- verify 1 failed: exited with code 1 after ")
            || transcript.contains("\n--- verify 1 failed: exited with code 1 after "),
        "{transcript}"
    );
    assert!(!transcript.contains("--- verify 2"), "{transcript}");
    assert_has_line(
        &status_text(&sandbox),
        "verify phase-1: failed: verify check 1 (echo 'running the tests') exited with code 1",
    );
    let json = status_json(&sandbox);
    assert_eq!(json["phases"][0]["verification"]["result"], "failed");
    assert_eq!(
        json["phases"][0]["verification"]["failed_check"],
        outcome["verification_failure"]
    );

    // The next attempt, after `--retry-stopped`, is told which check failed, with its output.
    sandbox.write("fixed", "");
    let retried = sandbox.run_plan(PLAN, &agent, &["--retry-stopped", "--quiet"]);
    retried.assert_code(0);
    let first_prompt = prompt_of_attempt(&sandbox, 1);
    assert!(!first_prompt.contains("VERIFICATION FAILURE"));
    let second_prompt = prompt_of_attempt(&sandbox, 2);
    let section = "VERIFICATION FAILURE\n\
        - The previous attempt of phase phase-1 reported completion, but verify check 1 exited with code 1, so the completion was not accepted.\n\
        - Find the cause in the check's output below, fix it in execution_workspace_path, run the check yourself, and report completion only when every check passes.\n\
        failed_check: 1\n\
        command_first_line: echo 'running the tests'\n\
        exit_code: 1\n\
        timed_out: no\n\
        output_tail:\n\
        \x20 running the tests\n\
        \x20 test parse ... FAILED\n\
        \x20 <phase-complete>printed by a test</phase-complete>\n";
    assert!(second_prompt.contains(section), "{second_prompt}");
    assert!(sandbox.path("second-ran").exists());
    assert_eq!(outcome_of_attempt(&sandbox, 2)["status"], "phase-complete");
    // Phase 2 is not told about phase 1's check.
    assert!(!prompt_of_attempt(&sandbox, 3).contains("VERIFICATION FAILURE"));
    assert_has_line(&status_text(&sandbox), "verify phase-1: passed (2 checks)");
    sandbox.assert_no_survivors();
}

#[test]
fn a_retry_in_the_same_run_is_told_which_check_failed() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, verified_plan(&sh("test -f fixed\n")));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"backoff_seconds": 0}}"#,
    );
    // The agent fixes the cause only once it is told about the failure.
    sandbox.write("fix-when-told", "");
    let agent = recording_agent(&sandbox);
    // `--retries` retries verification-failed by default.
    let run = sandbox.run_plan(PLAN, &agent, &["--retries", "1", "--quiet"]);
    run.assert_code(0);
    let first = outcome_of_attempt(&sandbox, 1);
    assert_eq!(first["status"], "verification-failed");
    assert_eq!(outcome_of_attempt(&sandbox, 2)["status"], "phase-complete");
    let retry_prompt = prompt_of_attempt(&sandbox, 2);
    assert!(
        retry_prompt.contains(
            "- The previous attempt of phase phase-1 reported completion, but verify check 1 exited with code 1, so the completion was not accepted.\n"
        ),
        "{retry_prompt}"
    );
    assert!(retry_prompt.contains("RETRY\n"), "{retry_prompt}");
    assert!(
        retry_prompt.contains("status: verification-failed\n"),
        "{retry_prompt}"
    );
    assert!(!prompt_of_attempt(&sandbox, 1).contains("VERIFICATION FAILURE"));
    sandbox.assert_no_survivors();
}

#[test]
fn a_check_that_runs_too_long_is_stopped_with_everything_it_started() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        verified_plan(&sh(
            "(trap '' TERM; while :; do sleep 1; done) &\nsetsid sh -c 'trap \"\" TERM; while :; do sleep 1; done' &\ntrap '' TERM\necho 'still checking'\nwhile :; do sleep 1; done\n",
        )),
    );
    let agent = recording_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--verify-timeout", "1", "--quiet"]);
    run.assert_code(4);
    assert_has_line(
        &run.stderr,
        "verification-failed: verify check 1 ((trap '' TERM; while :; do sleep 1; done) &) timed out and was stopped",
    );
    sandbox.assert_no_survivors();
    let outcome = outcome_of_attempt(&sandbox, 1);
    assert_eq!(outcome["status"], "verification-failed");
    assert_eq!(outcome["verification_failure"]["timed_out"], true);
    assert_eq!(outcome["verification_failure"]["exit_code"], Value::Null);
    assert_eq!(
        outcome["verification_failure"]["output_tail"],
        "still checking"
    );
    let transcript = transcript_of(&outcome);
    assert!(
        transcript.contains("--- verify 1 failed: timed out and was stopped after "),
        "{transcript}"
    );
    assert!(
        transcript.contains("\nescaped_descendants_killed: "),
        "the setsid one was swept: {transcript}"
    );
}

#[test]
fn sigterm_during_a_check_interrupts_the_run_with_143() {
    let sandbox = Sandbox::new();
    let ready = sandbox.path("check-ready");
    sandbox.write(
        PLAN,
        verified_plan(&sh(&format!(
            "(trap '' TERM; while :; do sleep 1; done) &\ntrap '' TERM\ntouch '{}'\nwhile :; do sleep 1; done\n",
            ready.display()
        ))),
    );
    let agent = recording_agent(&sandbox);
    let agent_arg = agent.display().to_string();
    let child = sandbox.spawn(&["run", "--plan", PLAN, "--agent-cmd", &agent_arg, "--quiet"]);
    assert!(
        wait_until(PATIENCE, || ready.exists()),
        "the check never started"
    );
    send_signal(&child, Signal::SIGTERM);
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(143);
    assert_has_line(
        &run.stderr,
        "interrupted: handler interrupted while verify check 1 ((trap '' TERM; while :; do sleep 1; done) &) ran (SIGTERM); the agent had reported phase-complete: implemented phase-1",
    );
    sandbox.assert_no_survivors();
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "interrupted");
    assert!(state["active_attempt"].is_null());
    let outcome = outcome_of_attempt(&sandbox, 1);
    assert_eq!(outcome["status"], "interrupted");
    assert!(outcome.get("verification_failure").is_none(), "{outcome:#}");
    let checks = outcome["verification"].as_array().unwrap();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0]["exit_code"], Value::Null, "it was killed");
    assert!(
        transcript_of(&outcome).contains("--- verify 1 stopped by the handler: was killed by "),
        "{}",
        transcript_of(&outcome)
    );
    assert_has_line(
        &status_text(&sandbox),
        "verify phase-1: stopped during verify check 1 ((trap '' TERM; while :; do sleep 1; done) &)",
    );
    let stops: Vec<Value> = events_without_progress(&sandbox, PLAN)
        .into_iter()
        .filter(|event| event["event"] == "stop-requested")
        .collect();
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["cause"], "interrupted");
    assert_eq!(
        stops[0]["detail"],
        "handler interrupted while a verify check ran (SIGTERM)"
    );
}

#[test]
fn a_python3_check_runs_in_the_workspace_without_stdin_or_the_notify_socket() {
    let sandbox = Sandbox::new();
    fs::create_dir_all(sandbox.path("svc")).unwrap();
    sandbox.write("svc/AGENTS.md", "# svc\n");
    let check = "```python3\nimport os, sys\nprint('cwd', os.getcwd())\nprint('stdin', repr(sys.stdin.read()))\nprint('notify', os.environ.get('NOTIFY_SOCKET'))\nsys.exit(0 if os.path.exists('ready') else 2)\n```\n";
    sandbox.write(
        PLAN,
        format!("# Plan\n\n## Phase 1: Service\n\n### Workspace\n\nsvc\n\n### Verify\n\n{check}"),
    );
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho '<phase-complete>service done</phase-complete>'\n",
    );
    let agent_arg = agent.display().to_string();
    let output = sandbox
        .command()
        .args(["run", "--plan", PLAN, "--agent-cmd", &agent_arg, "--quiet"])
        .env("NOTIFY_SOCKET", "/run/systemd/notify-of-the-handler")
        .output()
        .unwrap();
    let run = Run::from_output(output);
    run.assert_code(4);
    assert_has_line(
        &run.stderr,
        "verification-failed: verify check 1 (import os, sys) exited with code 2",
    );
    let svc = fs::canonicalize(sandbox.path("svc")).unwrap();
    assert_has_lines(
        &run.stderr,
        &[&format!("cwd {}", svc.display()), "stdin ''", "notify None"],
    );
    sandbox.write("svc/ready", "");
    sandbox
        .run(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            &agent_arg,
            "--quiet",
            "--retry-stopped",
        ])
        .assert_code(0);
    let outcome = outcome_of_attempt(&sandbox, 2);
    assert_eq!(outcome["status"], "phase-complete");
    assert_eq!(outcome["verification"][0]["exit_code"], 0);
}

#[test]
fn no_verify_skips_the_checks_and_records_them_as_skipped() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, verified_plan(&sh("touch check-ran\nfalse\n")));
    let agent = recording_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--no-verify"]);
    run.assert_code(0);
    assert!(!sandbox.path("check-ran").exists());
    assert!(!run.stderr.contains("--- verify"), "{}", run.stderr);
    let outcome = outcome_of_attempt(&sandbox, 1);
    assert_eq!(outcome["status"], "phase-complete");
    assert_eq!(outcome["verification"], "skipped");
    assert!(outcome.get("verification_failure").is_none());
    // A phase without checks has nothing to skip.
    assert!(
        outcome_of_attempt(&sandbox, 2)
            .get("verification")
            .is_none()
    );
    assert!(
        !events_without_progress(&sandbox, PLAN)
            .iter()
            .any(|event| event["event"] == "verify-started")
    );
    assert_has_line(
        &status_text(&sandbox),
        "verify phase-1: skipped (--no-verify)",
    );
    assert_eq!(
        status_json(&sandbox)["phases"][0]["verification"]["result"],
        "skipped"
    );
}

#[test]
fn a_blocked_attempt_runs_no_check() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, verified_plan(&sh("touch check-ran\n")));
    sandbox.write("block", "");
    let agent = recording_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &[]);
    run.assert_code(2);
    assert_eq!(
        run.stdout.lines().last(),
        Some("phase-blocked: need an API key")
    );
    assert!(!sandbox.path("check-ran").exists());
    assert!(!run.stderr.contains("--- verify"), "{}", run.stderr);
    let outcome = outcome_of_attempt(&sandbox, 1);
    assert_eq!(outcome["status"], "blocked");
    assert!(outcome.get("verification").is_none(), "{outcome:#}");
    assert_has_line(&status_text(&sandbox), "verify phase-1: not run (1 check)");
    assert_eq!(outcomes(&sandbox).len(), 1);
}

#[test]
fn run_json_says_what_the_last_attempts_checks_came_to() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        verified_plan(&sh("echo 'check output'\ntest -f fixed\n")),
    );
    let agent = recording_agent(&sandbox);
    let agent_arg = agent.display().to_string();
    let failed = sandbox.run(&["run", "--plan", PLAN, "--agent-cmd", &agent_arg, "--json"]);
    failed.assert_code(4);
    let object = result_object(&failed);
    assert_eq!(object["result"], "failed");
    assert_eq!(object["status"], "verification-failed");
    assert_eq!(
        object["message"],
        "verification-failed: verify check 1 (echo 'check output') exited with code 1"
    );
    assert_eq!(object["next"]["flags"], json!(["--retry-stopped"]));
    assert_eq!(object["verification"]["result"], "failed");
    assert_eq!(object["verification"]["configured"], 1);
    assert_eq!(
        object["verification"]["failed_check"]["output_tail"],
        "check output"
    );
    // The check's output goes to stderr with --json too: stdout is the object alone.
    assert!(
        failed.stderr.contains("check output\n"),
        "{}",
        failed.stderr
    );

    sandbox.write("fixed", "");
    let passed = sandbox.run(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        &agent_arg,
        "--json",
        "--retry-stopped",
        "--max-phases",
        "1",
    ]);
    passed.assert_code(0);
    let object = result_object(&passed);
    assert_eq!(object["verification"]["result"], "passed");
    assert_eq!(object["verification"]["checks"][0]["exit_code"], 0);
    assert_eq!(object["verification"]["failed_check"], Value::Null);

    let last = sandbox.run(&["run", "--plan", PLAN, "--agent-cmd", &agent_arg, "--json"]);
    last.assert_code(0);
    let object = result_object(&last);
    assert_eq!(object["verification"]["result"], "not-configured");
    assert_eq!(object["verification"]["configured"], 0);
}

#[test]
fn watch_shows_each_check_and_how_it_ended() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        verified_plan(&format!("{}{}", sh("true\n"), sh("test -f fixed\n"))),
    );
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ntouch STARTED\nwhile [ ! -f GO ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    let agent_arg = agent.display().to_string();
    let run = sandbox.spawn(&["run", "--plan", PLAN, "--agent-cmd", &agent_arg, "--quiet"]);
    assert!(wait_until(PATIENCE, || sandbox.path("STARTED").exists()));
    let screen = sandbox.path("watch.out");
    let watch = sandbox
        .command()
        .args(["watch", "--plan", PLAN])
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(PATIENCE, || fs::read_to_string(&screen)
            .is_ok_and(|text| text.contains("worker started: pid "))),
        "watch did not catch up with the run"
    );
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(4);
    wait_for_exit(watch, PATIENCE).assert_code(0);
    assert_has_lines(
        &fs::read_to_string(&screen).unwrap(),
        &[
            "phase-1 verify 1 of 2: true",
            "phase-1 verify 1 passed: exited with code 0",
            "phase-1 verify 2 of 2: test -f fixed",
            "phase-1 verify 2 failed: exited with code 1",
        ],
    );
}
