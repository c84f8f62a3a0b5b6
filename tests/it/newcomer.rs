//! What a newcomer and a calling agent trip over (docs/cli.md, docs/worker-protocol.md):
//! `check` and `run` follow a provider wrapper to its launcher, the worker's `AISH_*`
//! environment, the `--quiet` status line cleared on Ctrl-C, `watch` after and across runs,
//! and the log records of a race.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use crate::wrappers::CLAUDE_HIGH;

const PLAN: &str = "plan.md";

// ---- a wrapper's launcher, looked for before anything is written ----

/// A sandbox whose `wrappers/` holds `ai-session-handler-claude-high` (a link to the built
/// wrapper) and whose `launchers/` is empty; the PATH to use is returned with it.
fn wrapper_sandbox() -> (Sandbox, String) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    fs::create_dir_all(sandbox.path("wrappers")).unwrap();
    fs::create_dir_all(sandbox.path("launchers")).unwrap();
    std::os::unix::fs::symlink(
        CLAUDE_HIGH,
        sandbox.path("wrappers/ai-session-handler-claude-high"),
    )
    .unwrap();
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        sandbox.path("wrappers").display(),
        sandbox.path("launchers").display()
    );
    (sandbox, path)
}

fn run_with_path(sandbox: &Sandbox, path: &str, args: &[&str]) -> Run {
    Run::from_output(
        sandbox
            .command()
            .env("PATH", path)
            .args(args)
            .output()
            .expect("run handler"),
    )
}

#[test]
fn a_wrapper_whose_launcher_is_missing_is_refused_before_anything_is_written() {
    let (sandbox, path) = wrapper_sandbox();
    let tree = tree_snapshot(&sandbox.root);
    let searched = path.replace(':', ", ");
    let expected = format!(
        "error: --agent-cmd: agent program 'ai-session-handler-claude-high' starts its launcher from PATH: launcher 'claude-lean' not found in PATH (searched {searched}); install it (docs/providers.md, \"Installing the CLIs and the launchers\") or add its directory to PATH"
    );
    for command in ["check", "run"] {
        let refused = run_with_path(
            &sandbox,
            &path,
            &[
                command,
                "--plan",
                PLAN,
                "--agent-cmd",
                "ai-session-handler-claude-high",
            ],
        );
        refused.assert_code(5);
        assert_has_line(&refused.stderr, &expected);
        assert_eq!(
            tree_snapshot(&sandbox.root),
            tree,
            "{command} changed something"
        );
    }
    assert!(!sandbox.path(".ai-session-handler").exists());

    // A launcher without execute permission is refused too, and never run.
    let ran = sandbox.path("launcher-ran");
    let launcher = sandbox.write(
        "launchers/claude-lean",
        format!("#!/bin/sh\ntouch '{}'\n", ran.display()),
    );
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o644)).unwrap();
    let refused = run_with_path(
        &sandbox,
        &path,
        &[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            "ai-session-handler-claude-high",
        ],
    );
    refused.assert_code(5);
    assert_has_line(
        &refused.stderr,
        &format!(
            "error: --agent-cmd: agent program 'ai-session-handler-claude-high' starts its launcher from PATH: launcher 'claude-lean' at {} is not executable; make it executable (chmod +x) or name another program",
            launcher.display()
        ),
    );

    // Found and executable: `check` is satisfied without starting it.
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755)).unwrap();
    run_with_path(
        &sandbox,
        &path,
        &[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            "ai-session-handler-claude-high",
        ],
    )
    .assert_code(0);
    assert!(!ran.exists(), "check ran the launcher");
}

#[test]
fn a_wrapper_reached_through_a_renamed_link_is_followed_and_a_fallback_too() {
    let (sandbox, path) = wrapper_sandbox();
    std::os::unix::fs::symlink(CLAUDE_HIGH, sandbox.path("wrappers/my-agent")).unwrap();
    let config = sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"agent_cmd": "my-agent", "rate_limit": {"fallback_agent_cmds": ["ai-session-handler-claude-high --model x"]}}"#,
    );
    let refused = run_with_path(&sandbox, &path, &["check", "--plan", PLAN]);
    refused.assert_code(5);
    let config = config.display();
    for origin in [
        format!("{config}: agent_cmd: agent program 'my-agent'"),
        format!(
            "{config}: rate_limit.fallback_agent_cmds[0]: agent program 'ai-session-handler-claude-high'"
        ),
    ] {
        assert!(
            refused.stderr.lines().any(|line| line.contains(&origin)
                && line.contains("launcher 'claude-lean' not found in PATH")),
            "no refusal for {origin} in:\n{}",
            refused.stderr
        );
    }
}

// ---- the worker's environment: the same AISH_* facts a hook gets ----

/// The `AISH_*` lines of an `env | sort` dump.
fn aish_lines(path: &std::path::Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .lines()
        .filter(|line| {
            line.starts_with("AISH_") || line.starts_with("AI_SESSION_HANDLER_ATTEMPT_ID=")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_worker_gets_the_run_facts_in_aish_variables_named_as_a_hook_gets_them() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        plan_with_phases(1).replace("### Workspace\n\n.\n", "### Workspace\n\nsub\n"),
    );
    sandbox.write("sub/AGENTS.md", "# sub\n");
    let agent_env = sandbox.path("agent-env");
    let agent = agent(
        &sandbox,
        &format!(
            "env | sort > '{}'\necho '<phase-complete>ok</phase-complete>'\n",
            agent_env.display()
        ),
    );
    let hook = format!(
        "phase-complete=sh -c 'env | sort > {}'",
        sandbox.path("hook-env").display()
    );
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--hook", &hook])
        .assert_code(0);

    let prepared = event_stream(&sandbox, PLAN)
        .into_iter()
        .find(|event| event["event"] == "attempt-prepared")
        .expect("an attempt-prepared record");
    let run_id = prepared["run_id"].as_str().unwrap();
    let attempt_id = prepared["attempt_id"].as_str().unwrap();
    let root = sandbox.root.display();
    let expected = [
        format!("AISH_ATTEMPT_ID={attempt_id}"),
        "AISH_PHASE_ID=phase-1".to_owned(),
        "AISH_PHASE_TITLE=Step 1".to_owned(),
        format!("AISH_PLAN={root}/{PLAN}"),
        format!("AISH_PLAN_WORKSPACE={root}"),
        format!("AISH_RUN_ID={run_id}"),
        format!("AISH_STATE_FILE={}", sandbox.state_path(PLAN).display()),
        format!("AISH_WORKSPACE={root}/sub"),
        format!("AI_SESSION_HANDLER_ATTEMPT_ID={attempt_id}"),
    ];
    assert_eq!(aish_lines(&agent_env), expected);
    assert_ne!(
        run_id, attempt_id,
        "the invocation and the attempt have ids of their own"
    );

    // The hook, fired for the same attempt, is told the same facts under the same names.
    assert!(wait_until(PATIENCE, || sandbox.path("hook-env").exists()));
    let hook_lines = aish_lines(&sandbox.path("hook-env"));
    for line in &expected[..8] {
        assert!(
            hook_lines.contains(line),
            "the hook lacks {line}: {hook_lines:#?}"
        );
    }
}
