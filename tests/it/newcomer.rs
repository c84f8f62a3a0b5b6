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
            &[command, "--plan", PLAN, "--agent-cmd", "ai-session-handler-claude-high"],
        );
        refused.assert_code(5);
        assert_has_line(&refused.stderr, &expected);
        assert_eq!(tree_snapshot(&sandbox.root), tree, "{command} changed something");
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
        &["check", "--plan", PLAN, "--agent-cmd", "ai-session-handler-claude-high"],
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
        &["check", "--plan", PLAN, "--agent-cmd", "ai-session-handler-claude-high"],
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
        format!("{config}: rate_limit.fallback_agent_cmds[0]: agent program 'ai-session-handler-claude-high'"),
    ] {
        assert!(
            refused.stderr.lines().any(|line| line.contains(&origin)
                && line.contains("launcher 'claude-lean' not found in PATH")),
            "no refusal for {origin} in:\n{}",
            refused.stderr
        );
    }
}
