//! CLI basics: help and version, usage errors (always exit 5, never 2), `init`, `check`,
//! `status` (text and JSON, read-only), plan resolution from other directories, and plan keys.

use crate::common::*;

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

const COMPLETE: &str = "cat >/dev/null\necho '<phase-complete>ok</phase-complete>'\n";
const BLOCKED: &str = "cat >/dev/null\necho '<phase-blocked>need credentials</phase-blocked>'\n";
const CLARIFY: &str = "cat >/dev/null\necho '<phase-needs-clarification>Which database?</phase-needs-clarification>'\n";

// ---- help and version ---------------------------------------------------------------------

#[test]
fn top_level_help_describes_the_program() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["--help"]);
    run.assert_code(0);
    assert!(
        run.stdout
            .contains("Run a provider-agnostic AI agent plan to completion."),
        "{}",
        run.stdout
    );
    for command in ["run", "status", "check", "init"] {
        assert!(
            run.stdout
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{command} "))),
            "subcommand {command} not listed:\n{}",
            run.stdout
        );
    }
    assert_eq!(run.stderr, "");
}

#[test]
fn run_help_documents_every_flag() {
    assert_flags_documented(
        &["run", "--help"],
        &[
            "--plan",
            "--agent-cmd",
            "--max-phases",
            "--timeout",
            "--idle-timeout",
            "--stop-on-regex",
            "--quiet",
            "--retry-stopped",
            "--accept-plan-change",
            "--max-tokens",
            "--max-cost",
            "--log-level",
            "--log-file",
            "--log-format",
        ],
    );
}

#[test]
fn status_help_documents_every_flag() {
    assert_flags_documented(&["status", "--help"], &["--plan", "--json"]);
}

#[test]
fn check_help_documents_every_flag() {
    assert_flags_documented(
        &["check", "--help"],
        &[
            "--plan",
            "--agent-cmd",
            "--max-tokens",
            "--max-cost",
            "--json",
        ],
    );
}

#[test]
fn init_help_is_documented() {
    let run = assert_flags_documented(&["init", "--help"], &["--log-level", "--help"]);
    assert!(
        run.stdout.contains(".ai-session-handler/config.json"),
        "{}",
        run.stdout
    );
    for absent in ["--plan", "--config"] {
        assert!(!run.stdout.contains(absent), "{}", run.stdout);
    }
}

#[test]
fn version_prints_name_and_cargo_version() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["--version"]);
    run.assert_code(0);
    assert_eq!(
        run.stdout,
        format!("ai-session-handler {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn no_subcommand_prints_help_and_exits_zero() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[]);
    run.assert_code(0);
    assert!(
        run.stdout
            .contains("Run a provider-agnostic AI agent plan to completion."),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Usage:"), "{}", run.stdout);
    assert!(!sandbox.path(".ai-session-handler").exists());
}

// ---- usage errors -------------------------------------------------------------------------

/// Each usage error exits 5 (2 would mean "blocked" to a calling agent), prints nothing on
/// stdout, names the offending flag or value in one line on stderr and creates nothing.
#[test]
fn usage_errors_exit_5_and_name_the_problem() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", "touch \"$0.launched\"\ncat >/dev/null\n");
    let agent = agent.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--plan", "plan.md", "--bogus"], "--bogus"),
        (vec!["run", "--agent-cmd", agent], "--plan"),
        (vec!["status"], "--plan"),
        (vec!["check"], "--plan"),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--max-phases",
                "0",
            ],
            "--max-phases",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--max-phases",
                "x",
            ],
            "--max-phases",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--timeout",
                "nan",
            ],
            "--timeout",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--timeout",
                "0",
            ],
            "--timeout",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--timeout",
                "-1",
            ],
            "--timeout",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--max-phases",
                "-3",
            ],
            "--max-phases",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--timeout=-1",
            ],
            "--timeout",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--idle-timeout",
                "inf",
            ],
            "--idle-timeout",
        ),
        (vec!["bogus"], "bogus"),
        (vec!["init", "--config", "x"], "--config"),
        (
            vec!["status", "--plan", "plan.md", "--state", "x"],
            "--state",
        ),
        (
            vec![
                "run",
                "--plan",
                "plan.md",
                "--agent-cmd",
                agent,
                "--config",
                "x",
            ],
            "--config",
        ),
        (vec!["--log-format", "yaml", "init"], "--log-format"),
        (vec!["--log-level", "inof", "init"], "unknown level 'inof'"),
    ];
    let before = tree_snapshot(&sandbox.root);
    for (args, named) in cases {
        let run = sandbox.run(&args);
        assert_eq!(run.code, 5, "{args:?}\n{}", run.stderr);
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}\n{}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        assert!(
            run.stderr.contains(named),
            "{args:?} should name {named}\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    assert_eq!(tree_snapshot(&sandbox.root), before);
    assert!(!sandbox.path("bin/agent.launched").exists());
}

// ---- init ---------------------------------------------------------------------------------

/// On a machine without codex the example config cannot run as it is: init says so, naming the
/// file and key to edit, and `check` agrees.
#[test]
fn init_says_the_example_agent_cmd_must_be_edited_where_codex_is_missing() {
    let sandbox = Sandbox::new();
    let project = sandbox.path("project");
    fs::create_dir(&project).unwrap();
    let in_project = |args: &[&str]| {
        Run::from_output(
            sandbox
                .command()
                .current_dir(&project)
                .env("PATH", "/usr/bin:/bin")
                .args(args)
                .output()
                .expect("run handler"),
        )
    };
    let run = in_project(&["init"]);
    run.assert_code(0);
    let config = project.join(".ai-session-handler/config.json");
    let lines: Vec<&str> = run.stdout.lines().collect();
    // The created files, this note, then what would run here instead (tests/it/setup.rs).
    assert_eq!(lines.len(), 6, "{}", run.stdout);
    assert_eq!(
        lines[3],
        format!(
            "note: the example agent_cmd \"codex exec\" will not run here: agent program 'codex' not found in PATH (searched /usr/bin, /bin); edit agent_cmd in {} (or pass --agent-cmd to run and check) before the first run",
            config.display()
        )
    );
    fs::write(project.join("AGENTS.md"), "# project\n").unwrap();
    fs::write(project.join("plan.md"), plan_with_phases(1)).unwrap();
    let check = in_project(&["check", "--plan", "plan.md"]);
    check.assert_code(5);
    assert!(
        check
            .stderr
            .contains("agent program 'codex' not found in PATH"),
        "{}",
        check.stderr
    );
}

#[test]
fn init_creates_the_example_config_and_plans_dir() {
    let sandbox = Sandbox::new();
    let project = sandbox.path("project");
    fs::create_dir(&project).unwrap();
    // A machine with codex: the example config runs as it is, and init says nothing more.
    sandbox.script("codex", "exit 0\n");
    let path = format!("{}:/usr/bin:/bin", sandbox.path("bin").display());
    let run = Run::from_output(
        sandbox
            .command()
            .current_dir(&project)
            .env("PATH", &path)
            .arg("init")
            .output()
            .expect("run init"),
    );
    run.assert_code(0);
    let handler_dir = project.join(".ai-session-handler");
    assert_eq!(
        run.stdout,
        format!(
            "created {}\ncreated {}/ (generated state of this workspace's plans: state, prompts, transcripts, outcomes, events; plan files go elsewhere, e.g. docs/plans/)\ncreated {} (keeps plans/ out of git; commit config.json)\n",
            handler_dir.join("config.json").display(),
            handler_dir.join("plans").display(),
            handler_dir.join(".gitignore").display()
        )
    );
    assert_eq!(run.stderr, "");
    let bytes = fs::read(handler_dir.join("config.json")).unwrap();
    let config: Value = serde_json::from_slice(&bytes).expect("config parses");
    assert_eq!(
        config,
        json!({
            "agent_cmd": "codex exec",
            "max_phases": null,
            "timeout_seconds": 3600,
            "stop_on_regex": []
        })
    );
    assert!(config["timeout_seconds"].is_u64(), "3600 is an integer");
    let keys: Vec<&str> = config
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "agent_cmd",
            "max_phases",
            "timeout_seconds",
            "stop_on_regex"
        ]
    );
    assert!(bytes.ends_with(b"}\n"));
    assert_eq!(
        list_dir(&handler_dir),
        [
            ".gitignore".to_owned(),
            "config.json".to_owned(),
            "plans".to_owned()
        ]
    );
    assert!(handler_dir.join("plans").is_dir());
    assert!(list_dir(&handler_dir.join("plans")).is_empty());
    assert!(!handler_dir.join("prompts").exists());
    assert!(!handler_dir.join("transcripts").exists());
}

#[test]
fn init_in_the_sandbox_root_uses_the_current_directory() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init"]);
    run.assert_code(0);
    assert!(sandbox.path(".ai-session-handler/config.json").is_file());
    assert!(sandbox.path(".ai-session-handler/plans").is_dir());
}

/// Whatever `init` refuses, it refuses before creating anything.
#[test]
fn init_refuses_odd_entries_without_creating_anything() {
    let sandbox = Sandbox::new();
    // `plans` is a file.
    let project = sandbox.path("plans-file");
    fs::create_dir_all(project.join(".ai-session-handler")).unwrap();
    fs::write(project.join(".ai-session-handler/plans"), "").unwrap();
    let before = tree_snapshot(&project);
    let run = run_in(&sandbox, &project, &["init"]);
    run.assert_code(5);
    assert_eq!(
        run.stderr,
        format!(
            "error: {}: exists but is not a directory; move it aside first\n",
            project.join(".ai-session-handler/plans").display()
        )
    );
    assert_eq!(tree_snapshot(&project), before);

    // A dangling symlink where the config would go counts as an existing config.
    let project = sandbox.path("dangling");
    fs::create_dir_all(project.join(".ai-session-handler")).unwrap();
    std::os::unix::fs::symlink(
        project.join("nowhere.json"),
        project.join(".ai-session-handler/config.json"),
    )
    .unwrap();
    let run = run_in(&sandbox, &project, &["init"]);
    run.assert_code(5);
    assert!(
        run.stderr.contains("config already exists"),
        "{}",
        run.stderr
    );
    assert!(!project.join(".ai-session-handler/plans").exists());
    assert!(!project.join("nowhere.json").exists());
}

#[test]
fn second_init_refuses_and_keeps_the_config() {
    let sandbox = Sandbox::new();
    sandbox.run(&["init"]).assert_code(0);
    let config = sandbox.path(".ai-session-handler/config.json");
    fs::write(&config, "{\"agent_cmd\": \"my agent\"}\n").unwrap();
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["init"]);
    run.assert_code(5);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with(&format!("error: {}", config.display())),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    assert_eq!(
        fs::read(&config).unwrap(),
        b"{\"agent_cmd\": \"my agent\"}\n"
    );
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

// ---- check --------------------------------------------------------------------------------

#[test]
fn check_prints_the_phase_table_and_changes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", "touch \"$0.launched\"\ncat >/dev/null\n");
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    let root = sandbox.root.display().to_string();
    let rows = table_rows(&run.stdout);
    assert_eq!(
        rows,
        vec![
            vec![
                "phase-1".to_owned(),
                "pending".into(),
                root.clone(),
                "Step 1".into()
            ],
            vec![
                "phase-2".to_owned(),
                "pending".into(),
                root.clone(),
                "Step 2".into()
            ],
        ]
    );
    assert!(
        run.stdout.contains(&format!(
            "state path: {}",
            sandbox.state_path("plan.md").display()
        )),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.lines().last(), Some("check: ok"));
    assert_eq!(tree_snapshot(&sandbox.root), before);
    assert!(!sandbox.path(".ai-session-handler").exists());
    assert!(!sandbox.path("bin/agent.launched").exists());
}

/// A long execution workspace path widens its column: the path is whole, two spaces from the
/// title, and every title starts in the same column.
#[test]
fn check_s_workspace_column_fits_long_paths() {
    let sandbox = Sandbox::new();
    let long = "services/an-execution-workspace-with-a-rather-long-name";
    sandbox.write(&format!("{long}/AGENTS.md"), "# service\n");
    let plan = plan_with_phases(2).replacen(
        "### Workspace\n\n.\n",
        &format!("### Workspace\n\n{long}\n"),
        1,
    );
    sandbox.write("plan.md", plan);
    let run = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", "true"]);
    run.assert_code(0);
    let full = sandbox.path(long).display().to_string();
    let table: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("id ") || line.starts_with("phase-"))
        .collect();
    assert_eq!(table.len(), 3, "{}", run.stdout);
    assert!(
        table[1].contains(&format!(" {full}  Step 1")),
        "{}",
        run.stdout
    );
    let title_at: Vec<usize> = table
        .iter()
        .map(|line| line.rfind("  ").map(|at| at + 2).expect("a title column"))
        .collect();
    assert!(
        title_at.windows(2).all(|pair| pair[0] == pair[1]),
        "titles are not aligned:\n{}",
        table.join("\n")
    );
}

/// `check` shows the budget caps as `run` with the same flags would use them: the command line
/// over the config, key by key, each cap naming where it came from (issue 19).
#[test]
fn check_shows_the_budget_caps() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--plan", "plan.md", "--agent-cmd", "true"];
        args.extend_from_slice(extra);
        let run = sandbox.run(&args);
        run.assert_code(0);
        run
    };
    assert!(check(&[]).stdout.contains("\nbudget: no caps\n"));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"budget": {"max_tokens": 100000, "max_cost_usd": 5}}"#,
    );
    assert!(check(&[]).stdout.contains(
        "\nbudget: at most 100000 tokens, input + output (budget.max_tokens) and $5 \
             (budget.max_cost_usd) for the whole plan\n"
    ));
    let run = check(&["--max-tokens", "2000", "--json"]);
    let report: Value = serde_json::from_str(&run.stdout).expect("check --json parses");
    assert_eq!(
        report["budget"],
        json!(
            "at most 2000 tokens, input + output (--max-tokens) and $5 \
             (budget.max_cost_usd) for the whole plan"
        )
    );
}

/// A heading that reads like a phase heading but is not one is ordinary text, as the plan
/// format says; `check` (like `run`) warns about it, naming the line.
#[test]
fn check_warns_about_a_heading_that_is_almost_a_phase() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "plan.md",
        "## Phase 1: A\n### Workspace\n.\n##  Phase 2: B\n```\n## phase 3: example\n```\n",
    );
    let run = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", "true"]);
    run.assert_code(0);
    assert!(run.stdout.contains("check: ok"), "{}", run.stdout);
    // A user-facing line, not a log record with a timestamp and module path.
    let warning = format!(
        "warning: {}:4: '##  Phase 2: B' is not a phase heading (write exactly '## Phase N: Title': no indent, one space after the #s, 'Phase' capitalized, a title after the colon); its text belongs to what comes before it",
        sandbox.path("plan.md").display()
    );
    assert_eq!(run.stderr, format!("{warning}\n"));
    assert!(!run.stderr.contains("phase 3"), "{}", run.stderr);
    let json = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        "true",
        "--json",
    ]);
    json.assert_code(0);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        report["warnings"][0],
        warning.strip_prefix("warning: ").unwrap()
    );
}

#[test]
fn check_json_is_one_object_with_the_phase_rows() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", COMPLETE);
    let run = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--json",
    ]);
    run.assert_code(0);
    let report: Value = serde_json::from_str(&run.stdout).expect("check --json parses");
    assert_eq!(report["ok"], json!(true));
    assert_eq!(report["errors"], json!([]));
    let root = sandbox.root.display().to_string();
    assert_eq!(report["plan_workspace"], json!(root));
    assert_eq!(
        report["plan_path"],
        json!(sandbox.path("plan.md").display().to_string())
    );
    assert_eq!(
        report["state_path"],
        json!(sandbox.state_path("plan.md").display().to_string())
    );
    assert_eq!(
        report["phases"],
        json!([
            {"id": "phase-1", "title": "Step 1", "workspace": ".", "execution_workspace": root, "status": "pending", "checks": []},
            {"id": "phase-2", "title": "Step 2", "workspace": ".", "execution_workspace": root, "status": "pending", "checks": []},
        ])
    );
    assert_eq!(report["hooks"], json!([]));
    assert!(!sandbox.path(".ai-session-handler").exists());
}

#[test]
fn check_after_a_complete_run_shows_done_and_keeps_state() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", COMPLETE);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(0);
    let before = tree_snapshot(&sandbox.root);
    let state_before = sandbox.state_bytes("plan.md").unwrap();
    let run = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    run.assert_code(0);
    let statuses: Vec<String> = table_rows(&run.stdout)
        .into_iter()
        .map(|row| row[1].clone())
        .collect();
    assert_eq!(statuses, ["done", "done"]);
    assert_has_line(&run.stdout, "plan: matches the accepted snapshot");
    assert_eq!(run.stdout.lines().last(), Some("check: ok"));
    assert_eq!(sandbox.state_bytes("plan.md").unwrap(), state_before);
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn check_after_a_blocked_run_shows_stopped_with_a_note_and_exits_zero() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", BLOCKED);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(2);
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    run.assert_code(0);
    let statuses: Vec<String> = table_rows(&run.stdout)
        .into_iter()
        .map(|row| row[1].clone())
        .collect();
    assert_eq!(statuses, ["stopped", "pending"]);
    assert!(
        run.stdout.lines().any(|line| line.starts_with("note: ")
            && line.contains("phase-1")
            && line.contains("--retry-stopped")),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.lines().last(), Some("check: ok"));
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn check_refuses_a_plan_edited_after_the_run() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", COMPLETE);
    sandbox
        .run_plan("plan.md", &agent, &["--max-phases", "1"])
        .assert_code(0);
    let mut plan = plan_with_phases(2);
    plan.push_str("Edited after the run.\n");
    sandbox.write("plan.md", &plan);
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&[
        "check",
        "--plan",
        "plan.md",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    run.assert_code(5);
    assert!(
        run.stderr.contains("error: plan hash mismatch"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&sandbox.path("plan.md").display().to_string()),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("check: ok"), "{}", run.stdout);
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn check_reports_an_invalid_plan_in_text_and_json() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "plan.md",
        "# Plan\n\n## Phase 1: A\n\n### Goal\n\nNo workspace.\n",
    );
    let agent = sandbox.script("agent", COMPLETE);
    let agent = agent.to_str().unwrap();
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", agent]);
    run.assert_code(5);
    assert!(
        run.stderr
            .contains("plan.md:3: phase 1 is missing required '### Workspace' section"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("check: ok"), "{}", run.stdout);
    let run = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", agent, "--json"]);
    run.assert_code(5);
    let report: Value = serde_json::from_str(&run.stdout).expect("check --json parses");
    assert_eq!(report["ok"], json!(false));
    let errors = report["errors"].as_array().expect("errors list");
    assert!(
        errors.iter().any(|error| error
            .as_str()
            .unwrap()
            .contains("plan.md:3: phase 1 is missing required '### Workspace' section")),
        "{errors:?}"
    );
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

/// A valid `--agent-cmd` replaces an invalid config `agent_cmd`; without it the config's
/// template is validated and named.
#[test]
fn check_agent_cmd_overrides_the_config() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        "{\"agent_cmd\": \"agent {}\"}\n",
    );
    let agent = sandbox.script("agent", COMPLETE);
    let agent = agent.to_str().unwrap();
    let run = sandbox.run(&["check", "--plan", "plan.md", "--agent-cmd", agent]);
    run.assert_code(0);
    assert!(
        run.stdout.contains(&format!("agent_cmd: {agent}")),
        "{}",
        run.stdout
    );
    let run = sandbox.run(&["check", "--plan", "plan.md", "--json"]);
    run.assert_code(5);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["ok"], json!(false));
    assert!(
        run.stderr.contains(&format!(
            "{}: agent_cmd: positional command placeholder is not allowed: {{}}",
            sandbox.path(".ai-session-handler/config.json").display()
        )),
        "{}",
        run.stderr
    );
}

// ---- status -------------------------------------------------------------------------------

#[test]
fn status_of_a_fresh_plan_shows_the_next_phase_and_creates_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    let root = sandbox.root.display().to_string();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&"next phase: phase-1 Step 1"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&format!("plan workspace path: {root}").as_str()),
        "{}",
        run.stdout
    );
    let state_line = format!("state path: {}", sandbox.state_path("plan.md").display());
    assert!(
        lines.iter().any(|line| line.starts_with(&state_line)),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&format!("execution workspace path: {root}").as_str()),
        "{}",
        run.stdout
    );
    assert!(lines.contains(&"latest transcript: none"), "{}", run.stdout);
    assert!(
        lines.contains(&"latest committed outcome: none"),
        "{}",
        run.stdout
    );
    assert!(lines.contains(&"completed phases: none"), "{}", run.stdout);
    assert_eq!(tree_snapshot(&sandbox.root), before);
    assert!(!sandbox.path(".ai-session-handler").exists());
}

#[test]
fn status_after_a_complete_run_shows_completion_and_the_outcome() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", COMPLETE);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(0);
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    let state = sandbox.state("plan.md");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines.contains(&"all complete"), "{}", run.stdout);
    assert!(
        lines.contains(&"completed phases: phase-1, phase-2"),
        "{}",
        run.stdout
    );
    let outcome = state["last_run"]["outcome_path"].as_str().unwrap();
    assert_eq!(
        outcome,
        sandbox.artifacts("plan.md", "outcomes")[1]
            .to_str()
            .unwrap()
    );
    assert!(
        lines.contains(&format!("latest committed outcome: {outcome}").as_str()),
        "{}",
        run.stdout
    );
    let transcript = state["last_run"]["transcript_path"].as_str().unwrap();
    assert!(
        lines.contains(&format!("latest transcript: {transcript}").as_str()),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&"plan: matches the accepted snapshot"),
        "{}",
        run.stdout
    );
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn status_after_a_blocked_run_shows_the_stop_and_message() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", BLOCKED);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(2);
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&"stopped: phase-1 (blocked)"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&"message: need credentials"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&"current phase: phase-1 Step 1"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&format!("execution workspace path: {}", sandbox.root.display()).as_str()),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("next phase:"), "{}", run.stdout);
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn status_after_a_clarification_shows_the_question() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", CLARIFY);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(3);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&"stopped: phase-1 (needs-clarification)"),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&"clarification: Which database?"),
        "{}",
        run.stdout
    );
}

/// docs/cli.md: a changed plan is one line of the report with both hashes; status still exits 0
/// and writes nothing.
#[test]
fn status_reports_a_plan_edited_after_the_run_and_exits_zero() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", COMPLETE);
    sandbox
        .run_plan("plan.md", &agent, &["--max-phases", "1"])
        .assert_code(0);
    let accepted = sandbox.state("plan.md")["plan"]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let edited = format!("{}Edited.\n", plan_with_phases(2));
    sandbox.write("plan.md", &edited);
    let actual = ai_session_handler::domain::plan_key::sha256_hex(edited.as_bytes());
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    assert!(
        run.stdout
            .lines()
            .any(|line| line.contains("plan changed since accepted")
                && line.contains(&accepted)
                && line.contains(&actual)),
        "{}",
        run.stdout
    );
    assert_eq!(tree_snapshot(&sandbox.root), before);
    let json = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    json.assert_code(0);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["plan"]["status"], json!("changed"));
    assert_eq!(report["plan"]["accepted_sha256"], json!(accepted));
    assert_eq!(report["plan"]["current_sha256"], json!(actual));
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn status_json_matches_the_stored_state() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", BLOCKED);
    sandbox.run_plan("plan.md", &agent, &[]).assert_code(2);
    let before = tree_snapshot(&sandbox.root);
    let run = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    let report: Value = serde_json::from_str(&run.stdout).expect("status --json parses");
    let state = sandbox.state("plan.md");
    assert_eq!(
        report["plan_path"],
        json!(sandbox.path("plan.md").display().to_string())
    );
    assert_eq!(
        report["plan_workspace"],
        json!(sandbox.root.display().to_string())
    );
    assert_eq!(
        report["state_path"],
        json!(sandbox.state_path("plan.md").display().to_string())
    );
    assert_eq!(report["completed_phase_ids"], state["completed_phase_ids"]);
    assert_eq!(report["stop"], state["stop"]);
    assert_eq!(report["stop"]["reason"], json!("blocked"));
    assert_eq!(report["current_phase"], state["current_phase"]);
    assert_eq!(report["active_attempt"], Value::Null);
    assert_eq!(report["last_run"]["run_id"], state["last_run"]["run_id"]);
    assert_eq!(report["last_run"]["status"], json!("blocked"));
    assert_eq!(
        report["last_run"]["outcome_path"],
        state["last_run"]["outcome_path"]
    );
    assert_eq!(
        report["latest_committed_outcome"],
        state["last_run"]["outcome_path"]
    );
    assert_eq!(report["plan"]["status"], json!("unchanged"));
    assert_eq!(report["plan"]["accepted_sha256"], state["plan"]["sha256"]);
    assert_eq!(tree_snapshot(&sandbox.root), before);
}

#[test]
fn status_json_of_a_fresh_plan() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let run = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    run.assert_code(0);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["completed_phase_ids"], json!([]));
    assert_eq!(report["stop"], Value::Null);
    assert_eq!(report["active_attempt"], Value::Null);
    assert_eq!(report["last_run"], Value::Null);
    assert_eq!(
        report["next_phase"],
        json!({"id": "phase-1", "title": "Step 1"})
    );
    assert_eq!(report["plan"]["status"], json!("not-accepted"));
    assert_eq!(
        report["execution_workspace"],
        json!(sandbox.root.display().to_string())
    );
    assert!(!sandbox.path(".ai-session-handler").exists());
}

#[test]
fn plan_relative_to_a_nested_cwd_resolves_to_the_plan_workspace() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/p.md", plan_with_phases(1));
    fs::create_dir(sandbox.path("tools")).unwrap();
    let tools = sandbox.path("tools");
    let agent = sandbox.script("agent", COMPLETE);
    let run = run_in(
        &sandbox,
        &tools,
        &[
            "run",
            "--plan",
            "../plans/p.md",
            "--agent-cmd",
            agent.to_str().unwrap(),
        ],
    );
    run.assert_code(0);
    assert_eq!(
        sandbox.state("plans/p.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
    let run = run_in(&sandbox, &tools, &["status", "--plan", "../plans/p.md"]);
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines.contains(&"all complete"), "{}", run.stdout);
    assert!(
        lines.contains(&format!("plan workspace path: {}", sandbox.root.display()).as_str()),
        "{}",
        run.stdout
    );
    assert!(!tools.join(".ai-session-handler").exists());
}

#[test]
fn plan_in_a_sibling_repo_with_spaces_uses_that_repo() {
    let sandbox = Sandbox::new();
    sandbox.write("app/AGENTS.md", "# app\n");
    sandbox.write("target repository/AGENTS.md", "# target\n");
    sandbox.write(
        "target repository/docs/plans/plan with spaces.md",
        plan_with_phases(1),
    );
    let target = sandbox.path("target repository");
    let run = run_in(
        &sandbox,
        &sandbox.path("app"),
        &[
            "status",
            "--plan",
            "../target repository/docs/plans/plan with spaces.md",
        ],
    );
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&format!("plan workspace path: {}", target.display()).as_str()),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&format!("execution workspace path: {}", target.display()).as_str()),
        "{}",
        run.stdout
    );
    let key =
        ai_session_handler::domain::plan_key::plan_key(["docs", "plans", "plan with spaces.md"]);
    let state_line = format!(
        "state path: {}",
        target
            .join(".ai-session-handler/plans")
            .join(key)
            .join("state.json")
            .display()
    );
    assert!(
        lines.iter().any(|line| line.starts_with(&state_line)),
        "{}",
        run.stdout
    );
    assert!(
        lines.contains(&"next phase: phase-1 Step 1"),
        "{}",
        run.stdout
    );
    assert!(!sandbox.path("app/.ai-session-handler").exists());
    assert!(!target.join(".ai-session-handler").exists());
}

#[test]
fn legacy_state_file_is_ignored_by_status_and_run() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let legacy = b"{\"completed_phase_ids\": [\"phase-1\"], \"schema_version\": 1}\n";
    let legacy_path = sandbox.write(".ai-session-handler/plan.json", legacy);
    let run = sandbox.run(&["status", "--plan", "plan.md"]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout
            .lines()
            .any(|line| line == "next phase: phase-1 Step 1"),
        "{}",
        run.stdout
    );
    assert!(!sandbox.state_dir("plan.md").exists());
    let agent = sandbox.script("agent", COMPLETE);
    let run = sandbox.run_plan("plan.md", &agent, &[]);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    assert_eq!(
        sandbox.state("plan.md")["completed_phase_ids"],
        json!(["phase-1"])
    );
    assert_eq!(fs::read(&legacy_path).unwrap(), legacy);
}

// ---- plan keys ----------------------------------------------------------------------------

#[test]
fn a_plan_reached_through_a_symlinked_directory_shares_state() {
    let sandbox = Sandbox::new();
    sandbox.write("docs/plans/p.md", plan_with_phases(2));
    std::os::unix::fs::symlink(sandbox.path("docs"), sandbox.path("alias")).unwrap();
    let agent = sandbox.script("agent", COMPLETE);
    sandbox
        .run_plan("alias/plans/p.md", &agent, &["--max-phases", "1"])
        .assert_code(0);
    assert_eq!(
        list_dir(&sandbox.path(".ai-session-handler/plans")),
        [sandbox
            .state_dir("docs/plans/p.md")
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()]
    );
    let state = sandbox.state("docs/plans/p.md");
    assert_eq!(
        state["plan"]["path"],
        json!(sandbox.path("docs/plans/p.md").display().to_string())
    );
    // The second phase runs from the real path, continuing the same history.
    sandbox
        .run_plan("docs/plans/../plans/p.md", &agent, &[])
        .assert_code(0);
    assert_eq!(
        sandbox.state("docs/plans/p.md")["completed_phase_ids"],
        json!(["phase-1", "phase-2"])
    );
    let run = sandbox.run(&["status", "--plan", "alias/plans/p.md"]);
    run.assert_code(0);
    assert!(
        run.stdout.lines().any(|line| line == "all complete"),
        "{}",
        run.stdout
    );
    assert_eq!(
        list_dir(&sandbox.path(".ai-session-handler/plans")).len(),
        1
    );
}

#[test]
fn identical_plans_at_two_paths_have_separate_state() {
    let sandbox = Sandbox::new();
    sandbox.write("docs/first/plan.md", plan_with_phases(1));
    sandbox.write("docs/second/plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", COMPLETE);
    sandbox
        .run_plan("docs/first/plan.md", &agent, &[])
        .assert_code(0);
    sandbox
        .run_plan("docs/second/plan.md", &agent, &[])
        .assert_code(0);
    let first = sandbox.state_dir("docs/first/plan.md");
    let second = sandbox.state_dir("docs/second/plan.md");
    assert_ne!(first, second);
    let mut expected = vec![
        first.file_name().unwrap().to_str().unwrap().to_owned(),
        second.file_name().unwrap().to_str().unwrap().to_owned(),
    ];
    expected.sort();
    assert_eq!(
        list_dir(&sandbox.path(".ai-session-handler/plans")),
        expected
    );
    for plan in ["docs/first/plan.md", "docs/second/plan.md"] {
        let state = sandbox.state(plan);
        assert_eq!(
            state["plan"]["path"],
            json!(sandbox.path(plan).display().to_string())
        );
        assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
        assert_eq!(sandbox.artifacts(plan, "prompts").len(), 1);
    }
}

// ---- helpers ------------------------------------------------------------------------------

/// Runs `args`; each flag must appear on its own help line with a description (on that line or
/// the next, for the long help layout). Returns the run for further checks.
fn assert_flags_documented(args: &[&str], flags: &[&str]) -> Run {
    let sandbox = Sandbox::new();
    let run = sandbox.run(args);
    run.assert_code(0);
    assert_eq!(run.stderr, "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    for flag in flags {
        let index = lines
            .iter()
            .position(|line| {
                let trimmed = line.trim_start();
                // A short form first: `-h, --help`, `-q, --quiet`.
                let trimmed = match trimmed.as_bytes() {
                    [b'-', short, b',', b' ', ..] if short.is_ascii_alphabetic() => &trimmed[4..],
                    _ => trimmed,
                };
                trimmed
                    .strip_prefix(flag)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            })
            .unwrap_or_else(|| panic!("{flag} not in help of {args:?}:\n{}", run.stdout));
        let rest = lines[index].trim_start();
        let after_flag = &rest[rest.find(flag).unwrap() + flag.len()..];
        let after_value = match after_flag.trim_start().strip_prefix('<') {
            Some(value) => value.split_once('>').map_or("", |(_, rest)| rest),
            None => after_flag,
        };
        let described = !after_value.trim().is_empty()
            || lines
                .get(index + 1)
                .is_some_and(|next| !next.trim().is_empty() && !next.trim_start().starts_with('-'));
        assert!(
            described,
            "{flag} has no help text in {args:?}:\n{}",
            run.stdout
        );
    }
    run
}

/// The rows of `check`'s phase table: id, status, execution workspace, title.
fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|line| line.starts_with("phase-"))
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// Runs the handler with `cwd` as its working directory.
fn run_in(sandbox: &Sandbox, cwd: &Path, args: &[&str]) -> Run {
    let output = sandbox
        .command()
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("run handler");
    Run::from_output(output)
}

/// Sorted names in a directory.
fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---- the installed size ----

/// The lines of one `[profile.NAME]` section of the manifest.
fn profile_section(manifest: &str, name: &str) -> Vec<String> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != format!("[profile.{name}]"))
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .map(|line| line.trim().to_owned())
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

/// `cargo install` ships stripped binaries without debug info (182 MB before, about 21 MB
/// now: docs/architecture.md, "Binary size"); the profiling profile, which the benchmark
/// script builds, keeps line tables and symbols.
#[test]
fn installed_binaries_are_stripped_and_profiling_keeps_line_tables() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let release = profile_section(&manifest, "release");
    assert!(release.contains(&"strip = true".to_owned()), "{release:?}");
    assert!(release.contains(&"debug = false".to_owned()), "{release:?}");
    let profiling = profile_section(&manifest, "profiling");
    for line in [
        "inherits = \"release\"",
        "debug = \"line-tables-only\"",
        "strip = false",
    ] {
        assert!(
            profiling.contains(&line.to_owned()),
            "{line}: {profiling:?}"
        );
    }
    let bench_script = fs::read_to_string(format!("{root}/benches/run.sh")).unwrap();
    assert!(bench_script.contains("cargo build --profile profiling"));
    assert!(bench_script.contains("/profiling/ai-session-handler"));
}
