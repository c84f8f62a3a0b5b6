//! Invalid inputs: every bad plan, config, command template, workspace and stored state is
//! refused with exit 5 and an `error:` line naming the file, key, flag or line to fix —
//! before anything is launched and without changing a single byte on disk.

use crate::common::*;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

/// A minimal valid workspace section.
const WS: &str = "### Workspace\n.\n";

const COMPLETE: &str = "cat >/dev/null\necho '<phase-complete>ok</phase-complete>'\n";

/// Control for every case below: with valid inputs the marker agent does run, and the tree
/// snapshot does see the state it leaves behind.
#[test]
fn control_valid_inputs_launch_the_marker_agent_and_change_the_tree() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    let before = tree_snapshot(&fixture.sandbox.root);
    let run = fixture.sandbox.run_plan("plan.md", &fixture.agent, &[]);
    run.assert_code(0);
    assert!(fixture.marker.exists());
    let after = tree_snapshot(&fixture.sandbox.root);
    assert_ne!(after, before);
    assert!(
        after.contains_key(
            fixture
                .sandbox
                .state_path("plan.md")
                .strip_prefix(&fixture.sandbox.root)
                .unwrap()
        )
    );
}

// ---- plan ---------------------------------------------------------------------------------

#[test]
fn plan_without_phase_headings() {
    plan_case(
        b"# Plan\n\n## Stage 1: Build\n### Issue 2: Fix\n\nNo phases.\n",
        &["plan.md: expected at least one executable phase heading like '## Phase 1: Title'"],
    );
}

/// A plan whose only heading is a near miss names that line: it is why there is no phase.
#[test]
fn plan_whose_only_heading_is_a_near_miss_names_that_line() {
    plan_case(
        b"# Plan\n\n## phase 1: lower\n\n### Workspace\n\n.\n",
        &[
            "plan.md:3: '## phase 1: lower' is not a phase heading (write exactly '## Phase N: Title': no indent, one space after the #s, 'Phase' capitalized, a title after the colon); expected at least one executable phase heading like '## Phase 1: Title'",
        ],
    );
}

#[test]
fn plan_with_unclosed_backtick_fence_names_the_opening_line() {
    plan_case(
        b"# Plan\n\n## Phase 1: A\n\n### Workspace\n\n.\n\n```sh\n## Phase 2: Inside\n",
        &["plan.md:9: unclosed backtick code fence"],
    );
}

#[test]
fn plan_with_unclosed_tilde_fence_names_the_opening_line() {
    // A backtick line cannot close a tilde fence.
    plan_case(
        b"# Plan\n\n~~~~text\nexample\n```\n## Phase 1: A\n### Workspace\n.\n",
        &["plan.md:3: unclosed tilde code fence"],
    );
}

#[test]
fn plan_with_duplicate_phase_number() {
    plan_case(
        format!("# Plan\n## Phase 1: A\n{WS}## Phase 1: B\n{WS}").as_bytes(),
        &["plan.md:5: duplicate phase number 1"],
    );
}

#[test]
fn plan_with_decreasing_phase_number() {
    plan_case(
        format!("## Phase 3: A\n{WS}## Phase 2: B\n{WS}").as_bytes(),
        &["plan.md:4: phase number 2 appears after phase 3"],
    );
}

#[test]
fn plan_with_phase_zero() {
    plan_case(
        format!("# Plan\n\n## Phase 0: Zero\n{WS}").as_bytes(),
        &["plan.md:3: phase number must be positive"],
    );
}

#[test]
fn plan_phase_without_workspace_section() {
    plan_case(
        b"# Plan\n\n## Phase 1: A\n\n### Goal\n\nDo it.\n",
        &["plan.md:3: phase 1 is missing required '### Workspace' section"],
    );
}

#[test]
fn plan_phase_with_two_workspace_sections() {
    plan_case(
        b"## Phase 1: A\n### Workspace\n.\n### Goal\nx\n### Workspace\n.\n",
        &["plan.md:6: phase 1 has duplicate '### Workspace' sections"],
    );
}

#[test]
fn plan_phase_with_empty_workspace() {
    plan_case(
        b"## Phase 1: A\n### Workspace\n\n   \n### Goal\nx\n",
        &["plan.md:2: phase 1 has an empty workspace declaration"],
    );
}

#[test]
fn plan_phase_with_two_workspace_path_lines() {
    plan_case(
        b"## Phase 1: A\n### Workspace\n.\n\nsvc\n### Goal\nx\n",
        &[
            "plan.md:5: phase 1 workspace declaration must contain exactly one relative path line; after the path on line 3 the section also has line 5 'svc'; move instructions under a heading of their own after it (e.g. '### Goal')",
        ],
    );
}

#[test]
fn plan_phase_with_absolute_posix_workspace() {
    plan_case(
        b"## Phase 1: A\n### Workspace\n/abs\n",
        &["plan.md:3: phase 1 workspace path must be relative, got '/abs'"],
    );
}

#[test]
fn plan_phase_with_absolute_windows_workspace() {
    plan_case(
        b"## Phase 1: A\n### Workspace\n`C:\\repo`\n",
        &["plan.md:3: phase 1 workspace path must be relative, got 'C:\\repo'"],
    );
}

#[test]
fn plan_phase_with_wrong_workspace_heading() {
    plan_case(
        b"## Phase 1: A\n## Workspace\n.\n",
        &["plan.md:2: phase 1 workspace section must use the exact heading '### Workspace'"],
    );
}

// ---- verify sections (issue 20) -----------------------------------------------------------

/// A one-phase plan whose body ends with `verify`.
fn verify_plan(verify: &str) -> Vec<u8> {
    format!("# Plan\n\n## Phase 1: A\n\n### Workspace\n\n.\n\n{verify}").into_bytes()
}

#[test]
fn plan_with_two_verify_sections() {
    plan_case(
        &verify_plan("### Verify\n```sh\ntrue\n```\n\n#### Verify\n```sh\ntrue\n```\n"),
        &["plan.md:14: phase 1 has duplicate 'Verify' sections (the first at line 9)"],
    );
}

#[test]
fn plan_with_a_verify_section_without_a_fenced_block() {
    plan_case(
        &verify_plan("### Verify\n\nRun the tests by hand.\n\n### Notes\n"),
        &["plan.md:9: phase 1 '### Verify' section has no fenced code block"],
    );
}

#[test]
fn plan_with_an_empty_verify_block() {
    plan_case(
        &verify_plan("### Verify\n\n```sh\n\n```\n"),
        &["plan.md:11: phase 1 verify block is empty"],
    );
}

#[test]
fn plan_with_an_unclosed_verify_block() {
    plan_case(
        &verify_plan("### Verify\n\n```sh\ncargo test\n"),
        &["plan.md:11: unclosed backtick code fence"],
    );
}

#[test]
fn plan_with_an_unknown_verify_interpreter() {
    plan_case(
        &verify_plan("### Verify\n\n```shell\nls\n```\n"),
        &[
            "plan.md:11: phase 1 verify block: unknown verify interpreter 'shell' in the fence's info string; use one of sh, bash, dash, zsh, ksh, python3, python, perl, ruby, node, or no info string for /bin/sh -e",
        ],
    );
}

#[test]
fn plan_with_a_verify_section_no_deeper_than_its_phase() {
    plan_case(
        &verify_plan("## Verify\n\n```sh\ntrue\n```\n"),
        &[
            "plan.md:9: phase 1 verify section '## Verify' must be at a heading level deeper than its phase heading (e.g. '### Verify')",
        ],
    );
}

#[test]
fn plan_that_is_not_utf8() {
    plan_case(
        b"# Plan\n\n## Phase 1: Caf\xe9\n### Workspace\n.\n",
        &["plan.md:3: plan is not valid UTF-8 at byte 24"],
    );
}

#[test]
fn plan_workspace_directory_missing() {
    let fixture = Fixture::new();
    let name = format!("missing-{}", fixture.sandbox.token);
    fixture.sandbox.write(
        "plan.md",
        format!("# Plan\n\n## Phase 1: A\n\n### Workspace\n\n../{name}\n"),
    );
    let resolved = fixture.sandbox.root.parent().unwrap().join(&name);
    let message = format!(
        "plan.md:7: phase phase-1 workspace '../{name}' resolves to {}, which is not an existing directory",
        resolved.display()
    );
    fixture.refuse_run("plan.md", &[], &[&message]);
    fixture.refuse_check("plan.md", &[&message]);
}

#[test]
fn plan_workspace_without_agents_md() {
    let fixture = Fixture::new();
    fs::create_dir(fixture.sandbox.path("svc")).unwrap();
    fixture
        .sandbox
        .write("svc/README.md", "not an agents file\n");
    fixture
        .sandbox
        .write("plan.md", "## Phase 1: A\n### Workspace\n`svc`\n");
    let message = format!(
        "plan.md:3: phase phase-1 workspace 'svc' resolves to {}, which does not contain AGENTS.md at its root",
        fixture.sandbox.path("svc").display()
    );
    fixture.refuse_run("plan.md", &[], &[&message]);
    fixture.refuse_check("plan.md", &[&message]);
}

#[test]
fn plan_file_missing() {
    let fixture = Fixture::new();
    fixture.refuse_run(
        "nope.md",
        &[],
        &["error: --plan nope.md: cannot open plan: No such file or directory"],
    );
    fixture.refuse(
        &["status", "--plan", "nope.md"],
        &["--plan nope.md: cannot open plan"],
    );
}

#[test]
fn plan_is_a_directory() {
    let fixture = Fixture::new();
    fs::create_dir(fixture.sandbox.path("docs")).unwrap();
    let message = format!(
        "--plan {}: is a directory; expected a Markdown plan file",
        fixture.sandbox.path("docs").display()
    );
    fixture.refuse_run("docs", &[], &[&message]);
    fixture.refuse(&["status", "--plan", "docs"], &[&message]);
}

#[test]
fn plan_without_any_plan_workspace_marker() {
    let fixture = Fixture::new();
    let bare = tempfile::Builder::new()
        .prefix("ash-bare-")
        .tempdir()
        .expect("temp dir");
    let bare_root = fs::canonicalize(bare.path()).unwrap();
    for dir in bare_root.ancestors() {
        for marker in [".ai-session-handler", ".git", "AGENTS.md"] {
            assert!(
                !dir.join(marker).exists(),
                "precondition: {} must not exist for this test",
                dir.join(marker).display()
            );
        }
    }
    fs::create_dir(bare_root.join("docs")).unwrap();
    let plan = bare_root.join("docs/plan.md");
    fs::write(&plan, plan_with_phases(1)).unwrap();
    let bare_before = tree_snapshot(&bare_root);
    let run = fixture.refuse(
        &[
            "run",
            "--plan",
            plan.to_str().unwrap(),
            "--agent-cmd",
            fixture.agent(),
        ],
        &[
            &format!("{}: no plan workspace found", plan.display()),
            ".git or AGENTS.md",
        ],
    );
    assert!(
        run.stderr
            .contains(&bare_root.join("docs").display().to_string())
    );
    assert_eq!(tree_snapshot(&bare_root), bare_before);
}

// ---- config -------------------------------------------------------------------------------

#[test]
fn config_invalid_json() {
    config_case("{", &["invalid JSON at line 1, column 2"]);
}

#[test]
fn config_invalid_json_on_a_later_line() {
    config_case(
        "{\n  \"agent_cmd\": ,\n}\n",
        &["invalid JSON at line 2, column 16"],
    );
}

#[test]
fn config_not_an_object() {
    config_case("[\"codex exec\"]", &["expected config to be an object"]);
}

#[test]
fn config_unknown_key_lists_the_known_keys() {
    config_case(
        "{\"agent_cmd\": \"codex exec\", \"timeout\": 5}",
        &[
            "unknown key 'timeout'; known keys: agent_cmd, max_phases, timeout_seconds, stop_on_regex, idle_timeout_seconds, retry, rate_limit, hooks, verify_timeout_seconds, budget",
        ],
    );
}

#[test]
fn config_agent_cmd_number() {
    config_case(
        "{\"agent_cmd\": 5}",
        &["expected agent_cmd to be a string or null"],
    );
}

#[test]
fn config_max_phases_zero() {
    config_case(
        "{\"max_phases\": 0}",
        &["expected max_phases to be at least 1"],
    );
}

#[test]
fn config_max_phases_string() {
    config_case(
        "{\"max_phases\": \"1\"}",
        &["expected max_phases to be an integer or null"],
    );
}

#[test]
fn config_timeout_seconds_negative() {
    config_case(
        "{\"timeout_seconds\": -1}",
        &["expected timeout_seconds to be a finite number greater than 0"],
    );
}

#[test]
fn config_timeout_seconds_boolean() {
    config_case(
        "{\"timeout_seconds\": true}",
        &["expected timeout_seconds to be a number or null"],
    );
}

#[test]
fn config_idle_timeout_seconds_zero() {
    config_case(
        "{\"idle_timeout_seconds\": 0}",
        &["expected idle_timeout_seconds to be a finite number greater than 0"],
    );
}

#[test]
fn config_stop_on_regex_not_a_list() {
    config_case(
        "{\"stop_on_regex\": \"rate limit\"}",
        &["expected stop_on_regex to be a list"],
    );
}

#[test]
fn config_stop_on_regex_item_not_a_string() {
    config_case(
        "{\"stop_on_regex\": [\"ok\", 1]}",
        &["expected stop_on_regex[1] to be a string"],
    );
}

#[test]
fn config_stop_on_regex_invalid_pattern() {
    config_case(
        "{\"stop_on_regex\": [\"fine\", \"[\"]}",
        &["config.json: stop_on_regex[1]: invalid stop regex '['"],
    );
}

// ---- budget caps (issue 19) ----------------------------------------------------------------

/// `--max-tokens` and `--max-cost` values that are not a usable cap: exit 5 naming the flag,
/// nothing launched or written, for `run` and `check` alike.
#[test]
fn cli_budget_caps_that_are_not_usable() {
    let cases = [
        (
            "--max-tokens",
            "0",
            "expected a whole number of tokens of at least 1, got '0'",
        ),
        ("--max-tokens", "-1", "got '-1'"),
        ("--max-tokens", "1.5", "got '1.5'"),
        ("--max-tokens", "lots", "got 'lots'"),
        (
            "--max-cost",
            "nan",
            "expected US dollars as a finite number greater than 0, got 'nan'",
        ),
        ("--max-cost", "inf", "got 'inf'"),
        ("--max-cost", "-1", "got '-1'"),
        ("--max-cost", "0", "got '0'"),
        ("--max-cost", "five", "got 'five'"),
    ];
    for (flag, value, fragment) in cases {
        let fixture = Fixture::new();
        fixture.sandbox.write("plan.md", plan_with_phases(1));
        let named = format!("'{flag} <");
        fixture.refuse_run("plan.md", &[flag, value], &[&named, fragment]);
        fixture.refuse(
            &[
                "check",
                "--plan",
                "plan.md",
                "--agent-cmd",
                fixture.agent(),
                flag,
                value,
            ],
            &[&named, fragment],
        );
    }
}

#[test]
fn config_budget_unknown_key() {
    config_case(
        "{\"budget\": {\"max_tokens\": 5, \"max_cost\": 1}}",
        &["unknown key 'budget.max_cost'; known keys: max_tokens, max_cost_usd"],
    );
}

#[test]
fn config_budget_values_that_are_not_usable() {
    for (config, fragment) in [
        (
            "{\"budget\": {\"max_tokens\": 0}}",
            "expected budget.max_tokens to be at least 1",
        ),
        (
            "{\"budget\": {\"max_tokens\": 2.5}}",
            "expected budget.max_tokens to be an integer",
        ),
        (
            "{\"budget\": {\"max_cost_usd\": -1}}",
            "expected budget.max_cost_usd to be a finite number greater than 0",
        ),
        (
            "{\"budget\": {\"max_cost_usd\": \"1\"}}",
            "expected budget.max_cost_usd to be a number",
        ),
        ("{\"budget\": 5}", "expected budget to be an object or null"),
    ] {
        config_case(config, &[fragment]);
    }
}

#[test]
fn cli_stop_on_regex_invalid_pattern() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    fixture.refuse_run(
        "plan.md",
        &["--stop-on-regex", "ok", "--stop-on-regex", "("],
        &["error: --stop-on-regex: invalid stop regex '('"],
    );
}

/// Issue 14: a pattern that can match empty text would stop every attempt.
#[test]
fn cli_stop_on_regex_matching_empty_text() {
    for (pattern, fragment) in [
        (
            "x*",
            "error: --stop-on-regex: invalid stop regex 'x*': it matches empty text, so it would stop every attempt",
        ),
        (
            "",
            "error: --stop-on-regex: invalid stop regex '': it matches empty text, so it would stop every attempt",
        ),
        (
            r"\b",
            r"error: --stop-on-regex: invalid stop regex '\b': it matches empty text",
        ),
    ] {
        let fixture = Fixture::new();
        fixture.sandbox.write("plan.md", plan_with_phases(1));
        fixture.refuse_run(
            "plan.md",
            &["--stop-on-regex", "(?m)^FATAL", "--stop-on-regex", pattern],
            &[fragment],
        );
    }
}

#[test]
fn config_stop_on_regex_matching_empty_text() {
    config_case(
        "{\"stop_on_regex\": [\"(?m)^FATAL\", \"^\"]}",
        &[
            "config.json: stop_on_regex[1]: invalid stop regex '^': it matches empty text, so it would stop every attempt",
        ],
    );
}

#[test]
fn no_agent_cmd_anywhere() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    fixture.refuse(
        &["run", "--plan", "plan.md"],
        &["error: --agent-cmd is required when config does not provide agent_cmd"],
    );
    // An empty flag falls back to the config, which has none either.
    fixture.refuse(
        &["run", "--plan", "plan.md", "--agent-cmd", ""],
        &["--agent-cmd is required when config does not provide agent_cmd"],
    );
    fixture
        .sandbox
        .write(".ai-session-handler/config.json", "{\"agent_cmd\": null}\n");
    fixture.refuse(
        &["run", "--plan", "plan.md"],
        &["--agent-cmd is required when config does not provide agent_cmd"],
    );
}

// ---- command template ---------------------------------------------------------------------

#[test]
fn template_empty_in_config() {
    config_template_case("", &["agent command template produced an empty command"]);
}

#[test]
fn template_blank_in_config() {
    config_template_case("   ", &["agent command template produced an empty command"]);
}

/// Only an empty flag falls back to the config; blanks are the command the caller asked for,
/// and it is empty (the config's command must not run in its place).
#[test]
fn template_blank_flag_is_not_replaced_by_the_config() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    fixture.sandbox.write(
        ".ai-session-handler/config.json",
        "{\"agent_cmd\": \"echo from-config\"}\n",
    );
    fixture.refuse(
        &["check", "--plan", "plan.md", "--agent-cmd", "   "],
        &["error: --agent-cmd: agent command template produced an empty command"],
    );
    fixture.refuse(
        &["run", "--plan", "plan.md", "--agent-cmd", "   "],
        &["error: --agent-cmd: agent command template produced an empty command"],
    );
}

#[test]
fn template_empty_quoted_program() {
    flag_template_case(
        "'' {workspace}",
        &["agent command template produced an empty command"],
    );
}

#[test]
fn template_positional_placeholder() {
    flag_template_case(
        "AGENT {}",
        &["positional command placeholder is not allowed: {}"],
    );
}

#[test]
fn template_numbered_placeholder() {
    flag_template_case(
        "AGENT {0}",
        &["positional command placeholder is not allowed: {0}"],
    );
}

#[test]
fn template_attribute_access() {
    flag_template_case(
        "AGENT {workspace.name}",
        &["attribute and index access are not allowed in command placeholder: {workspace.name}"],
    );
}

#[test]
fn template_index_access() {
    flag_template_case(
        "AGENT {workspace[0]}",
        &["attribute and index access are not allowed in command placeholder: {workspace[0]}"],
    );
}

#[test]
fn template_conversion() {
    flag_template_case(
        "AGENT {workspace!r}",
        &["conversion is not allowed in command placeholder: {workspace!r}"],
    );
}

#[test]
fn template_format_spec() {
    flag_template_case(
        "AGENT {workspace:>20}",
        &["format specification is not allowed in command placeholder: {workspace:>20}"],
    );
}

#[test]
fn template_unknown_placeholder() {
    flag_template_case(
        "AGENT --run {unknown}",
        &["unsupported command placeholder: {unknown}"],
    );
}

/// A misspelt placeholder gets the nearest valid one and the list of all of them.
#[test]
fn template_misspelt_placeholder_suggests_the_one_meant() {
    flag_template_case(
        "AGENT --prompt {promptfile}",
        &[
            "unsupported command placeholder: {promptfile}; did you mean {prompt_file}? (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)",
        ],
    );
}

#[test]
fn template_unclosed_brace() {
    flag_template_case(
        "AGENT {workspace",
        &["invalid command template syntax: expected '}' before end of string"],
    );
}

#[test]
fn template_lone_closing_brace() {
    flag_template_case(
        "AGENT }",
        &["invalid command template syntax: single '}' encountered in format string"],
    );
}

#[test]
fn template_unterminated_quote() {
    flag_template_case(
        "AGENT \"unterminated",
        &["invalid command template quoting: missing closing quote"],
    );
}

#[test]
fn template_error_in_config_names_the_config_key() {
    config_template_case(
        "AGENT {prompt}",
        &["unsupported command placeholder: {prompt}"],
    );
}

/// The template is validated before state is read: a garbage state file does not hide the
/// template error, and is left alone.
#[test]
fn invalid_template_is_reported_before_garbage_state_is_read() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    let state_path = fixture.sandbox.state_path("plan.md");
    let garbage = b"{ this is not state \xff";
    fixture.sandbox.write(
        state_path
            .strip_prefix(&fixture.sandbox.root)
            .unwrap()
            .to_str()
            .unwrap(),
        garbage,
    );
    let template = format!("{} {{}}", fixture.agent());
    let run = fixture.refuse(
        &["run", "--plan", "plan.md", "--agent-cmd", &template],
        &["error: --agent-cmd: positional command placeholder is not allowed: {}"],
    );
    assert!(!run.stderr.contains("state.json"), "{}", run.stderr);
    assert_eq!(fixture.sandbox.state_bytes("plan.md").unwrap(), garbage);
}

#[test]
fn invalid_config_is_reported_before_garbage_state_is_read() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    fixture
        .sandbox
        .write(".ai-session-handler/config.json", "{\"max_phases\": 0}");
    let state_path = fixture.sandbox.state_path("plan.md");
    fixture.sandbox.write(
        state_path
            .strip_prefix(&fixture.sandbox.root)
            .unwrap()
            .to_str()
            .unwrap(),
        "{",
    );
    let run = fixture.refuse_run(
        "plan.md",
        &[],
        &["config.json: expected max_phases to be at least 1"],
    );
    assert!(!run.stderr.contains("state.json"), "{}", run.stderr);
}

// ---- stored state -------------------------------------------------------------------------

#[test]
fn state_invalid_json() {
    state_case(
        |_| StateEdit::Raw(b"{".to_vec()),
        &["invalid JSON at line 1, column 2"],
    );
}

#[test]
fn state_with_schema_version() {
    state_case(
        |state| {
            state["schema_version"] = json!(1);
            StateEdit::Json
        },
        &["unexpected key schema_version"],
    );
}

#[test]
fn state_without_active_attempt() {
    state_case(
        |state| {
            state.as_object_mut().unwrap().remove("active_attempt");
            StateEdit::Json
        },
        &["missing required key active_attempt"],
    );
}

#[test]
fn state_with_plan_version() {
    state_case(
        |state| {
            state["plan"]["version"] = json!(2);
            StateEdit::Json
        },
        &["unexpected key plan.version"],
    );
}

#[test]
fn state_with_wrong_type() {
    state_case(
        |state| {
            state["completed_phase_ids"] = json!("x");
            StateEdit::Json
        },
        &["expected completed_phase_ids to be a list"],
    );
}

#[test]
fn state_with_both_active_attempt_and_stop() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(2));
    let setup = fixture.sandbox.script(
        "setup",
        "cat >/dev/null\necho '<phase-blocked>need credentials</phase-blocked>'\n",
    );
    fixture
        .sandbox
        .run_plan("plan.md", &setup, &[])
        .assert_code(2);
    let mut state = fixture.sandbox.state("plan.md");
    assert!(state["stop"].is_object());
    let last_run = state["last_run"].clone();
    state["active_attempt"] = json!({
        "id": last_run["run_id"],
        "status": "prepared",
        "phase": state["current_phase"],
        "snapshot": {"path": state["plan"]["path"], "sha256": state["plan"]["sha256"]},
        "execution_workspace": last_run["execution_workspace"],
        "started_at": last_run["started_at"],
        "prompt_path": last_run["prompt_path"],
        "transcript_path": last_run["transcript_path"],
        "outcome_path": last_run["outcome_path"],
        "process": null
    });
    write_state(&fixture.sandbox, &state);
    let expected = ["state.json: active_attempt and stop cannot both be set"];
    fixture.refuse_run("plan.md", &["--retry-stopped"], &expected);
    fixture.refuse(&["status", "--plan", "plan.md"], &expected);
    fixture.refuse_check("plan.md", &expected);
}

/// `status --json` on malformed state prints one JSON object naming the problem.
#[test]
fn status_json_on_malformed_state_prints_the_error_as_json() {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    let state_path = fixture.sandbox.state_path("plan.md");
    fixture.sandbox.write(
        state_path
            .strip_prefix(&fixture.sandbox.root)
            .unwrap()
            .to_str()
            .unwrap(),
        "{",
    );
    let before = tree_snapshot(&fixture.sandbox.root);
    let run = fixture
        .sandbox
        .run(&["status", "--plan", "plan.md", "--json"]);
    run.assert_code(5);
    let report: Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    let error = report["error"].as_str().expect("error string");
    assert!(
        error.contains(&format!(
            "{}: invalid JSON at line 1, column 2",
            state_path.display()
        )),
        "{error}"
    );
    assert!(run.stderr.contains("error: "), "{}", run.stderr);
    assert_eq!(tree_snapshot(&fixture.sandbox.root), before);
}

// ---- helpers ------------------------------------------------------------------------------

/// A sandbox whose fake agent creates `launched` in the sandbox root when it runs.
struct Fixture {
    sandbox: Sandbox,
    agent: PathBuf,
    marker: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let sandbox = Sandbox::new();
        let marker = sandbox.path("launched");
        let agent = sandbox.script(
            "agent",
            &format!("touch '{}'\n{COMPLETE}", marker.display()),
        );
        Fixture {
            sandbox,
            agent,
            marker,
        }
    }

    fn agent(&self) -> &str {
        self.agent.to_str().expect("utf-8 agent path")
    }

    /// Runs `args` and asserts the refusal: exit 5, nothing on stdout (except `check`, which
    /// prints what it could parse), `error:` and every `expected` fragment on stderr, no
    /// panic, no launch, and not one byte changed under the sandbox.
    #[track_caller]
    fn refuse(&self, args: &[&str], expected: &[&str]) -> Run {
        let before = tree_snapshot(&self.sandbox.root);
        let run = self.sandbox.run(args);
        run.assert_code(5);
        if args.first() != Some(&"check") {
            assert_eq!(run.stdout, "", "{args:?}: stdout must be empty");
        }
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}: stderr must start with `error: `\n{}",
            run.stderr
        );
        for fragment in expected {
            assert!(
                run.stderr.contains(fragment),
                "{args:?}: stderr lacks {fragment:?}\n{}",
                run.stderr
            );
        }
        for forbidden in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
            assert!(!run.stderr.contains(forbidden), "{}", run.stderr);
        }
        assert!(!self.marker.exists(), "{args:?}: the agent was launched");
        assert_eq!(
            tree_snapshot(&self.sandbox.root),
            before,
            "{args:?}: files changed on disk"
        );
        run
    }

    #[track_caller]
    fn refuse_run(&self, plan: &str, extra: &[&str], expected: &[&str]) -> Run {
        let mut args = vec!["run", "--plan", plan, "--agent-cmd", self.agent()];
        args.extend_from_slice(extra);
        self.refuse(&args, expected)
    }

    #[track_caller]
    fn refuse_check(&self, plan: &str, expected: &[&str]) -> Run {
        self.refuse(
            &["check", "--plan", plan, "--agent-cmd", self.agent()],
            expected,
        )
    }
}

/// A plan file that `run` and `check` must both refuse, naming `expected`.
#[track_caller]
fn plan_case(plan: &[u8], expected: &[&str]) {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan);
    let path = fixture.sandbox.path("plan.md").display().to_string();
    let located: Vec<String> = expected
        .iter()
        .map(|fragment| match fragment.strip_prefix("plan.md") {
            // The plan is named by its canonical absolute path.
            Some(rest) => format!("error: {path}{rest}"),
            None => (*fragment).to_owned(),
        })
        .collect();
    let located: Vec<&str> = located.iter().map(String::as_str).collect();
    fixture.refuse_run("plan.md", &[], &located);
    fixture.refuse_check("plan.md", &located);
}

/// A config file `run` must refuse (even with `--agent-cmd` given), naming the file.
#[track_caller]
fn config_case(config: &str, expected: &[&str]) {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    fixture
        .sandbox
        .write(".ai-session-handler/config.json", config);
    let config_path = fixture
        .sandbox
        .path(".ai-session-handler/config.json")
        .display()
        .to_string();
    let mut all = vec![config_path.as_str()];
    all.extend_from_slice(expected);
    fixture.refuse_run("plan.md", &[], &all);
    fixture.refuse_check("plan.md", &all);
}

/// A config `agent_cmd` that must be refused as `<config>: agent_cmd: <message>`; `AGENT`
/// stands for the marker agent's path.
#[track_caller]
fn config_template_case(template: &str, expected: &[&str]) {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    let template = template.replace("AGENT", fixture.agent());
    fixture.sandbox.write(
        ".ai-session-handler/config.json",
        serde_json::to_string(&json!({ "agent_cmd": template })).unwrap(),
    );
    let prefix = format!(
        "error: {}: agent_cmd: ",
        fixture
            .sandbox
            .path(".ai-session-handler/config.json")
            .display()
    );
    let mut all = vec![prefix.as_str()];
    all.extend_from_slice(expected);
    fixture.refuse(&["run", "--plan", "plan.md"], &all);
    fixture.refuse(&["check", "--plan", "plan.md"], &all);
}

/// An `--agent-cmd` template that must be refused as `--agent-cmd: <message>`; `AGENT`
/// stands for the marker agent's path, so an accepted template would launch it.
#[track_caller]
fn flag_template_case(template: &str, expected: &[&str]) {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(1));
    let template = template.replace("AGENT", fixture.agent());
    let mut all = vec!["error: --agent-cmd: "];
    all.extend_from_slice(expected);
    fixture.refuse(
        &["run", "--plan", "plan.md", "--agent-cmd", &template],
        &all,
    );
    fixture.refuse(
        &["check", "--plan", "plan.md", "--agent-cmd", &template],
        &all,
    );
}

enum StateEdit {
    /// Write the edited JSON value.
    Json,
    /// Write these bytes instead.
    Raw(Vec<u8>),
}

/// Completes phase 1 of a two-phase plan (so a valid state would let `run` launch phase 2),
/// applies `edit` to the state file, then checks that `run`, `status` and `check` refuse it
/// naming the state file and `expected`, with the state bytes untouched.
#[track_caller]
fn state_case(edit: impl FnOnce(&mut Value) -> StateEdit, expected: &[&str]) {
    let fixture = Fixture::new();
    fixture.sandbox.write("plan.md", plan_with_phases(2));
    let setup = fixture.sandbox.script("setup", COMPLETE);
    fixture
        .sandbox
        .run_plan("plan.md", &setup, &["--max-phases", "1"])
        .assert_code(0);
    let mut state = fixture.sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    match edit(&mut state) {
        StateEdit::Json => write_state(&fixture.sandbox, &state),
        StateEdit::Raw(bytes) => {
            fs::write(fixture.sandbox.state_path("plan.md"), bytes).unwrap();
        }
    }
    let bytes = fixture.sandbox.state_bytes("plan.md").unwrap();
    let prefix = format!(
        "error: {}: ",
        fixture.sandbox.state_path("plan.md").display()
    );
    let mut all = vec![prefix.as_str()];
    all.extend_from_slice(expected);
    fixture.refuse_run("plan.md", &[], &all);
    fixture.refuse(&["status", "--plan", "plan.md"], &all);
    fixture.refuse_check("plan.md", &all);
    assert_eq!(fixture.sandbox.state_bytes("plan.md").unwrap(), bytes);
}

fn write_state(sandbox: &Sandbox, state: &Value) {
    let mut text = serde_json::to_string_pretty(state).unwrap();
    text.push('\n');
    fs::write(sandbox.state_path("plan.md"), text).unwrap();
}
