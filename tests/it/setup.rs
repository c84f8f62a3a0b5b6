//! Setting up, as a newcomer does it (docs/cli.md, `init` and `check`): `init` keeps the
//! generated state out of `git status` and says what `plans/` is for; where the example's
//! `codex` is missing it names what would run instead (the installed wrappers, a script
//! agent); `check --prompt` needs no installed agent; `check` lists every plan error it finds,
//! while `run` still reports the first.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::*;

const PLAN: &str = "plan.md";
const COMPLETE: &str = "echo '<phase-complete>done</phase-complete>'\n";

/// The handler run in `dir` with `PATH` set to `path`.
fn run_in(sandbox: &Sandbox, dir: &Path, path: &str, args: &[&str]) -> Run {
    Run::from_output(
        sandbox
            .command()
            .current_dir(dir)
            .env("PATH", path)
            .args(args)
            .output()
            .expect("run handler"),
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// After `init` and a run that left a transcript, an outcome, the event stream and a hook log,
/// `git status` shows the config and the `.gitignore`, and nothing of the generated state.
#[test]
fn init_keeps_the_generated_state_out_of_git_status() {
    let sandbox = Sandbox::new();
    let project = sandbox.path("project");
    fs::create_dir_all(&project).unwrap();
    git(&project, &["init", "-q"]);
    let path = std::env::var("PATH").unwrap_or_default();
    let init = run_in(&sandbox, &project, &path, &["init"]);
    init.assert_code(0);
    let handler_dir = project.join(".ai-session-handler");
    let lines: Vec<&str> = init.stdout.lines().collect();
    assert_eq!(
        lines[1],
        format!(
            "created {}/ (generated state of this workspace's plans: state, prompts, transcripts, outcomes, events; plan files go elsewhere, e.g. docs/plans/)",
            handler_dir.join("plans").display()
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "created {} (keeps plans/ out of git; commit config.json)",
            handler_dir.join(".gitignore").display()
        )
    );

    fs::write(project.join("AGENTS.md"), "# project\n").unwrap();
    fs::write(project.join(PLAN), plan_with_phases(1)).unwrap();
    let agent = agent(&sandbox, COMPLETE);
    let run = run_in(
        &sandbox,
        &project,
        &path,
        &[
            "run",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--hook",
            "run-finished=echo finished",
        ],
    );
    run.assert_code(0);
    let state_dir = handler_dir
        .join("plans")
        .join(ai_session_handler::domain::plan_key::plan_key([PLAN]));
    for generated in ["state.json", "events.jsonl", "hooks.log"] {
        assert!(state_dir.join(generated).is_file(), "no {generated}");
    }
    assert!(
        fs::read_dir(state_dir.join("transcripts"))
            .unwrap()
            .next()
            .is_some()
    );

    let status = git(
        &project,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    let listed: Vec<&str> = status.lines().map(|line| &line[3..]).collect();
    assert_eq!(
        listed,
        [
            ".ai-session-handler/.gitignore",
            ".ai-session-handler/config.json",
            "AGENTS.md",
            PLAN
        ],
        "{status}"
    );
}

/// A `.gitignore` that is there already is the user's: kept byte for byte, and said so.
#[test]
fn init_keeps_an_existing_gitignore() {
    let sandbox = Sandbox::new();
    let gitignore = sandbox.write(".ai-session-handler/.gitignore", "# mine\n*.tmp\n");
    let run = sandbox.run(&["init"]);
    run.assert_code(0);
    assert_has_line(
        &run.stdout,
        &format!(
            "kept {} (it exists; it should ignore plans/)",
            gitignore.display()
        ),
    );
    assert_eq!(fs::read(&gitignore).unwrap(), b"# mine\n*.tmp\n");
    assert!(sandbox.path(".ai-session-handler/config.json").is_file());
}

/// Without `codex`, `init` names the provider wrappers that would run here — by name when
/// `PATH` finds them, by path when they sit beside the binary — and the script-agent way.
#[test]
fn init_without_codex_names_the_installed_wrappers_and_a_script_agent() {
    let sandbox = Sandbox::new();
    let beside = |name: &str| -> PathBuf { Path::new(BIN).parent().unwrap().join(name) };
    for wrapper in [
        "ai-session-handler-claude-high",
        "ai-session-handler-claude-medium",
        "ai-session-handler-codex-high",
    ] {
        assert!(
            beside(wrapper).is_file(),
            "{wrapper} is not built beside {BIN}"
        );
    }
    // One wrapper is also in PATH.
    sandbox.script("ai-session-handler-codex-high", "exit 0\n");
    let path = format!("{}:/usr/bin:/bin", sandbox.path("bin").display());
    let project = sandbox.path("project");
    fs::create_dir_all(&project).unwrap();
    let run = run_in(&sandbox, &project, &path, &["init"]);
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", run.stdout);
    assert!(
        lines[3].starts_with("note: the example agent_cmd \"codex exec\" will not run here"),
        "{}",
        run.stdout
    );
    assert_eq!(
        lines[4],
        format!(
            "note: installed provider wrappers, each a complete agent_cmd: {}, {}, ai-session-handler-codex-high (each runs a launcher you install: docs/providers.md)",
            beside("ai-session-handler-claude-high").display(),
            beside("ai-session-handler-claude-medium").display()
        )
    );
    assert_eq!(
        lines[5],
        "note: or a script agent: any program that reads the prompt on stdin and ends its output with one result block (examples/demo-agent.sh; docs/worker-protocol.md)"
    );
}

/// The prompt does not depend on the agent: `check --prompt` shows it where the example's
/// `codex` is not installed, with a note; `check` itself still refuses for it.
#[test]
fn check_prompt_needs_no_installed_agent() {
    let sandbox = Sandbox::new();
    let path = "/usr/bin:/bin";
    sandbox.write(PLAN, plan_with_phases(2));
    run_in(&sandbox, &sandbox.root, path, &["init"]).assert_code(0);
    let preview = run_in(&sandbox, &sandbox.root, path, &["check", PLAN, "--prompt"]);
    preview.assert_code(0);
    assert!(preview.stdout.contains("Step 1"), "{}", preview.stdout);
    let config = sandbox.path(".ai-session-handler/config.json");
    assert_eq!(
        preview.stderr,
        format!(
            "note: {}: agent_cmd: agent program 'codex' not found in PATH (searched /usr/bin, /bin); run refuses until it is found\n",
            config.display()
        )
    );
    let with_phase = run_in(
        &sandbox,
        &sandbox.root,
        path,
        &["check", PLAN, "--prompt", "--phase", "phase-2"],
    );
    with_phase.assert_code(0);
    assert!(
        with_phase.stdout.contains("Step 2"),
        "{}",
        with_phase.stdout
    );
    let check = run_in(&sandbox, &sandbox.root, path, &["check", PLAN]);
    check.assert_code(5);
    assert!(
        check
            .stderr
            .contains("agent program 'codex' not found in PATH"),
        "{}",
        check.stderr
    );
}

/// A plan with errors in several phases: `check` lists every one (text and JSON), `run` the
/// first, in the same words; past 20, `check` says how many more there are.
#[test]
fn check_reports_every_plan_error_and_run_the_first() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        "# Plan\n\n## Phase 1: A\n\nNo workspace.\n\n## Phase 2: B\n\n### Workspace\n\n/abs\n\n## Phase 3: C\n\n### Workspace\n\n.\n\n### verify\n\n```sh\ntrue\n```\n",
    );
    let agent = agent(&sandbox, COMPLETE);
    let agent = agent.to_str().unwrap();
    let plan = sandbox.path(PLAN).display().to_string();
    let expected = [
        format!("error: {plan}:3: phase 1 is missing required '### Workspace' section"),
        format!("error: {plan}:11: phase 2 workspace path must be relative, got '/abs'"),
        format!(
            "error: {plan}:19: phase 3 verify section heading must be spelled exactly 'Verify' (e.g. '### Verify'), got '### verify'"
        ),
    ];
    let before = tree_snapshot(&sandbox.root);
    let check = sandbox.run(&["check", PLAN, "--agent-cmd", agent]);
    check.assert_code(5);
    let errors: Vec<&str> = check.stderr.lines().collect();
    assert_eq!(errors, expected, "{}", check.stderr);
    let json = sandbox.run(&["check", PLAN, "--agent-cmd", agent, "--json"]);
    json.assert_code(5);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["errors"].as_array().unwrap().len(), 3, "{report}");
    let run = sandbox.run(&["run", PLAN, "--agent-cmd", agent]);
    run.assert_code(5);
    assert_eq!(run.stderr, format!("{}\n", expected[0]));
    assert_eq!(tree_snapshot(&sandbox.root), before);

    let mut many = String::from("# Plan\n\n");
    for number in 1..=25 {
        many.push_str(&format!("## Phase {number}: P\n\nNo workspace.\n\n"));
    }
    sandbox.write(PLAN, many);
    let check = sandbox.run(&["check", PLAN, "--agent-cmd", agent]);
    check.assert_code(5);
    let errors: Vec<&str> = check.stderr.lines().collect();
    assert_eq!(errors.len(), 21, "{}", check.stderr);
    assert!(
        errors[19].contains("phase 20 is missing required '### Workspace' section"),
        "{}",
        check.stderr
    );
    assert_eq!(
        errors[20],
        format!("error: {plan}: 5 more plan errors not shown (check shows the first 20)")
    );
}
