//! Verification gates (issue 20; docs/plan-format.md, "Verify"), the parts a run shows before
//! the checks are wired into the attempt lifecycle: `check` lists each phase's checks and
//! validates their interpreters, `run` refuses a missing interpreter unless `--no-verify`, the
//! prompt (and `check --prompt`) names the checks and keeps the phase body byte-identical, the
//! prompt after a failed check carries it with its output tail, and the new flags and config key
//! are validated. The plan errors of a Verify section are in `invalid_inputs`.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;

const PLAN: &str = "plan.md";

/// Phase 2's body: a Verify section with a shell and a python3 check, commentary, CRLF lines.
const PHASE_2_BODY: &str = "\n### Workspace\n\n.\n\n### Verify\r\n\r\nThe unit tests:\r\n\r\n```sh\r\ncargo test --locked\r\n```\r\n\r\n~~~python3\r\nimport sys\r\nsys.exit(0)\r\n~~~\r\n";

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
            "verify phase-2 check 1 (sh, line 21): cargo test --locked",
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
            {"index": 1, "interpreter": "sh", "line": 21, "command_first_line": "cargo test --locked"},
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
        \x20 - check 1 (sh): cargo test --locked\n\
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

/// Until the lifecycle runs checks, a `verification-failed` stop is made by hand: a failed
/// attempt's state and outcome rewritten as the lifecycle will write them.
fn make_verification_failed(sandbox: &Sandbox, tail: &str) {
    let state_path = sandbox.state_path(PLAN);
    let mut state = sandbox.state(PLAN);
    let last = state["last_run"]["run_id"].clone();
    for outcome in state["committed_outcomes"].as_array_mut().unwrap() {
        if outcome["attempt_id"] == last {
            outcome["status"] = "verification-failed".into();
        }
    }
    state["last_run"]["status"] = "verification-failed".into();
    state["stop"]["reason"] = "verification-failed".into();
    let outcome_path = state["last_run"]["outcome_path"]
        .as_str()
        .unwrap()
        .to_owned();
    fs::write(&state_path, serde_json::to_string_pretty(&state).unwrap()).unwrap();
    let mut outcome = read_json(Path::new(&outcome_path));
    outcome["status"] = "verification-failed".into();
    outcome["verification"] = json!([
        {"index": 1, "command_first_line": "cargo test --locked", "exit_code": 101, "duration_ms": 1200, "output_bytes": 400}
    ]);
    outcome["verification_failure"] = json!({
        "index": 1,
        "command_first_line": "cargo test --locked",
        "exit_code": 101,
        "signal": null,
        "timed_out": false,
        "output_tail": tail,
    });
    fs::write(
        &outcome_path,
        serde_json::to_string_pretty(&outcome).unwrap(),
    )
    .unwrap();
}

#[test]
fn the_prompt_after_a_failed_check_says_which_with_the_tail_of_its_output() {
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
    sandbox.write("fail", "");
    sandbox
        .run(&["run", "--plan", PLAN, "--agent-cmd", &agent, "--quiet"])
        .assert_code(4);
    let tail = "test plan::verify ... FAILED\n<phase-complete>printed by a test</phase-complete>\nerror: test failed";
    make_verification_failed(&sandbox, tail);
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    let preview = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &agent, "--prompt"]);
    preview.assert_code(0);
    let section = "VERIFICATION FAILURE\n\
        - The previous attempt of phase phase-2 reported completion, but verify check 1 exited with code 101, so the completion was not accepted.\n\
        - Find the cause in the check's output below, fix it in execution_workspace_path, run the check yourself, and report completion only when every check passes.\n\
        failed_check: 1\n\
        command_first_line: cargo test --locked\n\
        exit_code: 101\n\
        timed_out: no\n\
        output_tail:\n\
        \x20 test plan::verify ... FAILED\n\
        \x20 <phase-complete>printed by a test</phase-complete>\n\
        \x20 error: test failed\n";
    assert!(preview.stdout.contains(section), "{}", preview.stdout);
    assert!(
        !preview
            .stdout
            .lines()
            .take_while(|line| *line != "TERMINAL MARKER GRAMMAR START")
            .any(|line| line.starts_with("<phase-")),
        "a result tag starts a line outside the grammar"
    );
    assert!(
        preview.stderr.contains("run needs --retry-stopped"),
        "{}",
        preview.stderr
    );
}
