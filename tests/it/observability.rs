//! Observability for people and callers (issue 12; docs/cli.md): the `status` phase table and
//! totals in text and JSON at every shape of the state (old entries without figures
//! included), `check --prompt` against the prompt the following run really writes, the
//! completion scripts and manual pages, and the agent program resolved before anything is
//! written.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::*;

const PLAN: &str = "plan.md";

/// A sandbox with a three-phase plan and the control agent.
fn three_phases() -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(3));
    let agent = control_agent(&sandbox);
    (sandbox, agent)
}

fn status_json(sandbox: &Sandbox) -> Value {
    let status = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    status.assert_code(0);
    serde_json::from_str(&status.stdout).expect("status --json is one object")
}

fn status_text(sandbox: &Sandbox) -> String {
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    status.stdout
}

/// The table row of `phase`, its cells split on runs of two or more spaces.
fn row(text: &str, phase: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|line| line.starts_with(&format!("{phase}  ")))
        .unwrap_or_else(|| panic!("no row for {phase} in:\n{text}"));
    line.split("  ")
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .map(str::to_owned)
        .collect()
}

fn totals_line(text: &str) -> &str {
    text.lines()
        .find(|line| line.starts_with("totals: "))
        .unwrap_or_else(|| panic!("no totals line in:\n{text}"))
}

/// The outcome record of the `index`-th committed outcome.
fn committed_outcome(sandbox: &Sandbox, index: usize) -> Value {
    let state = sandbox.state(PLAN);
    let path = state["committed_outcomes"][index]["path"].as_str().unwrap();
    read_json(Path::new(path))
}

// ---- status: the phase table and totals ----

#[test]
fn status_shows_the_phase_table_and_totals_as_a_plan_progresses() {
    let (sandbox, agent) = three_phases();

    // Fresh: every phase pending, nothing tallied.
    let text = status_text(&sandbox);
    assert_has_line(
        &text,
        "phase    status   attempts  duration  output  tokens  cost  title",
    );
    assert_eq!(
        row(&text, "phase-1"),
        ["phase-1", "pending", "0", "–", "–", "–", "–", "Step 1"]
    );
    assert_eq!(
        totals_line(&text),
        "totals: 0/3 phases done · 0 attempts · 0ms · 0 B output"
    );
    let json = status_json(&sandbox);
    assert_eq!(json["phases"].as_array().unwrap().len(), 3);
    assert_eq!(json["phases"][0]["status"], "pending");
    assert_eq!(json["phases"][0]["attempts"], 0);
    assert_eq!(json["phases"][0]["last_attempt"], Value::Null);
    assert_eq!(json["totals"]["phases_total"], 3);
    assert_eq!(json["totals"]["attempts"], 0);
    // The fields that were there before are still there, unchanged in form.
    assert_eq!(json["all_complete"], false);
    assert_eq!(json["next_phase"]["id"], "phase-1");
    assert_eq!(json["plan"]["status"], "not-accepted");

    // Mid-plan: phase 1 done; its figures are the outcome record's.
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1", "--quiet"])
        .assert_code(0);
    let outcome = committed_outcome(&sandbox, 0);
    let duration = outcome["duration_ms"]
        .as_u64()
        .expect("duration_ms recorded");
    let output = outcome["output_bytes"]["stdout"].as_u64().unwrap()
        + outcome["output_bytes"]["stderr"].as_u64().unwrap();
    assert!(output > 0, "the control agent prints on both streams");
    let entry = &sandbox.state(PLAN)["committed_outcomes"][0];
    assert_eq!(entry["duration_ms"].as_u64(), Some(duration));
    assert_eq!(entry["output_bytes"].as_u64(), Some(output));
    let json = status_json(&sandbox);
    let first = &json["phases"][0];
    assert_eq!(first["status"], "done");
    assert_eq!(first["attempts"], 1);
    assert_eq!(first["last_attempt"]["status"], "phase-complete");
    assert_eq!(
        first["last_attempt"]["duration_ms"].as_u64(),
        Some(duration)
    );
    assert_eq!(first["last_attempt"]["output_bytes"].as_u64(), Some(output));
    assert_eq!(first["last_attempt"]["attempt_id"], outcome["attempt_id"]);
    assert_eq!(json["totals"]["phases_done"], 1);
    assert_eq!(json["totals"]["output_bytes"].as_u64(), Some(output));
    let text = status_text(&sandbox);
    let cells = row(&text, "phase-1");
    assert_eq!(cells[..3], ["phase-1", "done", "1"]);
    assert_eq!(cells[4], format!("{output} B"));
    assert!(totals_line(&text).starts_with("totals: 1/3 phases done · 1 attempt · "));

    // Stopped: phase 2 blocked.
    set_mode(&sandbox, "phase-2", "block");
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(2);
    let json = status_json(&sandbox);
    assert_eq!(json["phases"][1]["status"], "stopped");
    assert_eq!(json["phases"][1]["stop_reason"], "blocked");
    assert_eq!(json["phases"][1]["last_attempt"]["status"], "blocked");
    assert_eq!(json["stop"]["reason"], "blocked");
    let text = status_text(&sandbox);
    assert_eq!(
        row(&text, "phase-2")[..3],
        ["phase-2", "stopped (blocked)", "1"]
    );

    // Complete, after a retry: phase 2 took two attempts.
    set_mode(&sandbox, "phase-2", "complete");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--retry-stopped"])
        .assert_code(0);
    let json = status_json(&sandbox);
    assert_eq!(json["all_complete"], true);
    assert!(
        json["phases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|phase| phase["status"] == "done")
    );
    assert_eq!(json["phases"][1]["attempts"], 2);
    assert_eq!(
        json["phases"][1]["last_attempt"]["status"],
        "phase-complete"
    );
    assert_eq!(json["totals"]["attempts"], 4);
    assert_eq!(json["totals"]["attempts_without_figures"], 0);
    let state = sandbox.state(PLAN);
    let sum = |key: &str| -> u64 {
        state["committed_outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry[key].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        json["totals"]["duration_ms"].as_u64(),
        Some(sum("duration_ms"))
    );
    assert_eq!(
        json["totals"]["output_bytes"].as_u64(),
        Some(sum("output_bytes"))
    );
    let text = status_text(&sandbox);
    assert!(
        totals_line(&text).starts_with("totals: 3/3 phases done · 4 attempts · "),
        "{text}"
    );
}

#[test]
fn status_shows_the_running_attempt_as_running() {
    let (sandbox, agent) = three_phases();
    set_mode(&sandbox, "phase-1", "hang");
    let handler = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
    ]);
    let running = wait_until(PATIENCE, || {
        sandbox
            .state_bytes(PLAN)
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|state| state["active_attempt"]["status"] == "running")
    });
    assert!(running, "the running record was never written");
    let json = status_json(&sandbox);
    assert_eq!(json["phases"][0]["status"], "running");
    assert_eq!(json["phases"][0]["attempts"], 1);
    assert_eq!(json["phases"][0]["last_attempt"], Value::Null);
    assert_eq!(json["totals"]["attempts"], 1);
    assert_eq!(
        row(&status_text(&sandbox), "phase-1")[..3],
        ["phase-1", "running", "1"]
    );
    nix::sys::signal::kill(Pid::from_raw(handler.id() as i32), Signal::SIGTERM).unwrap();
    wait_for_exit(handler, PATIENCE).assert_code(143);
    sandbox.assert_no_survivors();
}

#[test]
fn entries_committed_before_the_figures_existed_show_dashes_and_null() {
    let (sandbox, agent) = three_phases();
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "2", "--quiet"])
        .assert_code(0);
    // The first entry as an older runner wrote it: without the two keys.
    let mut state = sandbox.state(PLAN);
    let entry = state["committed_outcomes"][0].as_object_mut().unwrap();
    entry.remove("duration_ms");
    entry.remove("output_bytes");
    entry.remove("usage");
    fs::write(
        sandbox.state_path(PLAN),
        serde_json::to_string_pretty(&state).unwrap(),
    )
    .unwrap();
    let second = sandbox.state(PLAN)["committed_outcomes"][1].clone();

    let json = status_json(&sandbox);
    assert_eq!(json["phases"][0]["status"], "done");
    assert_eq!(json["phases"][0]["attempts"], 1);
    assert_eq!(
        json["phases"][0]["last_attempt"]["duration_ms"],
        Value::Null
    );
    assert_eq!(
        json["phases"][0]["last_attempt"]["output_bytes"],
        Value::Null
    );
    assert_eq!(json["totals"]["attempts"], 2);
    assert_eq!(json["totals"]["attempts_without_figures"], 1);
    assert_eq!(json["totals"]["duration_ms"], second["duration_ms"]);
    assert_eq!(json["totals"]["output_bytes"], second["output_bytes"]);
    let text = status_text(&sandbox);
    // Its usage is unknown, and so the sum's.
    assert_eq!(
        row(&text, "phase-1"),
        ["phase-1", "done", "1", "–", "–", "?", "?", "Step 1"]
    );
    assert!(
        totals_line(&text).ends_with(
            " output (1 attempt recorded without duration and size) · tokens ? · cost ?"
        ),
        "{text}"
    );
    assert_eq!(
        json["phases"][0]["last_attempt"]["usage"]["completeness"],
        "unknown"
    );
    // The older file is still valid input for everything else.
    sandbox
        .run(&[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
        ])
        .assert_code(0);
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
}

// ---- check --prompt ----

/// The prompt file a run wrote after `before` (the prompt files that existed), and the
/// preview with every launch-time placeholder replaced by that attempt's value.
fn fill_in(sandbox: &Sandbox, preview: &str, before: &[PathBuf]) -> (String, String) {
    let written: Vec<PathBuf> = sandbox
        .artifacts(PLAN, "prompts")
        .into_iter()
        .filter(|path| !before.contains(path))
        .collect();
    assert_eq!(written.len(), 1, "one new prompt: {written:?}");
    let id = written[0].file_stem().unwrap().to_str().unwrap().to_owned();
    let dir = sandbox.state_dir(PLAN);
    let outcome = read_json(&dir.join(format!("outcomes/{id}.json")));
    let state = sandbox.state(PLAN);
    let filled = preview
        .replace(
            "<prompt-path>",
            &format!("{}/prompts/{id}.txt", dir.display()),
        )
        .replace(
            "<transcript-path>",
            &format!("{}/transcripts/{id}.txt", dir.display()),
        )
        .replace(
            "<outcome-path>",
            &format!("{}/outcomes/{id}.json", dir.display()),
        )
        .replace("<attempt-id>", &id)
        .replace("<started-at>", outcome["started_at"].as_str().unwrap())
        .replace(
            "<accepted-at>",
            state["plan"]["accepted_at"].as_str().unwrap(),
        );
    (filled, fs::read_to_string(&written[0]).unwrap())
}

/// `check --prompt` (exit 0, nothing written), then `run` with `run_args`; the preview with
/// the launch-time values filled in must be the prompt file the run wrote, byte for byte.
#[track_caller]
fn preview_then_run(sandbox: &Sandbox, agent: &Path, run_args: &[&str], code: i32) -> Run {
    let agent_cmd = agent.to_str().unwrap();
    let tree = tree_snapshot(&sandbox.root);
    let preview = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_cmd,
        "--prompt",
    ]);
    preview.assert_code(0);
    assert_eq!(
        tree_snapshot(&sandbox.root),
        tree,
        "check --prompt wrote something"
    );
    let before = sandbox.artifacts(PLAN, "prompts");
    sandbox.run_plan(PLAN, agent, run_args).assert_code(code);
    let (filled, written) = fill_in(sandbox, &preview.stdout, &before);
    assert_eq!(filled, written, "preview and prompt differ");
    preview
}

#[test]
fn check_prompt_is_the_prompt_the_following_run_writes() {
    let (sandbox, agent) = three_phases();

    // First run: the plan is accepted in the same write (<accepted-at>).
    let first = preview_then_run(&sandbox, &agent, &["--max-phases", "1", "--quiet"], 0);
    assert!(
        first.stdout.contains("- run_id: <attempt-id>\n"),
        "{}",
        first.stdout
    );
    assert!(first.stdout.contains("  accepted_at: <accepted-at>\n"));
    assert!(first.stdout.contains("- selected_phase_id: phase-1\n"));
    assert_eq!(first.stderr, "");

    // Mid-plan: nothing accepted, the handoff names phase 1.
    let second = preview_then_run(&sandbox, &agent, &["--max-phases", "1", "--quiet"], 0);
    assert!(second.stdout.contains("- selected_phase_id: phase-2\n"));
    assert!(!second.stdout.contains("<accepted-at>"));

    // A clarification answered in the plan: run needs both recovery flags, the preview says
    // so and already carries the edited preamble.
    set_mode(&sandbox, "phase-3", "clarify");
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(3);
    let plan = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    sandbox.write(
        PLAN,
        plan.replacen(
            "Global intent.\n",
            "Global intent.\n\nANSWER: postgres\n",
            1,
        ),
    );
    let third = preview_then_run(
        &sandbox,
        &agent,
        &["--quiet", "--retry-stopped", "--accept-plan-change"],
        0,
    );
    assert!(third.stdout.contains("\nANSWER: postgres\n"));
    assert!(third.stdout.contains("  accepted_at: <accepted-at>\n"));
    assert_has_line(
        &third.stderr,
        "note: run needs --retry-stopped --accept-plan-change for this attempt",
    );

    // Every phase complete: nothing would run.
    let done = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--prompt",
    ]);
    done.assert_code(0);
    assert_eq!(done.stdout, "");
    assert_has_line(
        &done.stderr,
        "note: every phase is complete; no attempt would run",
    );
}

#[test]
fn check_prompt_previews_the_retry_of_an_abandoned_attempt() {
    let (sandbox, agent) = three_phases();
    set_mode(&sandbox, "phase-1", "hang");
    let mut handler = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    let running = wait_until(PATIENCE, || {
        sandbox
            .state_bytes(PLAN)
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|state| state["active_attempt"]["status"] == "running")
    });
    assert!(running, "the running record was never written");
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    let state = sandbox.state(PLAN);
    let pgid = state["active_attempt"]["process"]["process_group_id"]
        .as_u64()
        .unwrap();
    killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL).unwrap();
    sandbox.assert_no_survivors();

    set_mode(&sandbox, "phase-1", "complete");
    let preview = preview_then_run(
        &sandbox,
        &agent,
        &["--max-phases", "1", "--quiet", "--retry-stopped"],
        0,
    );
    // The abandoned attempt is resolved in the same write: it is the last run, finished
    // when the new attempt starts.
    let abandoned = state["active_attempt"]["id"].as_str().unwrap();
    assert!(preview.stdout.contains(&format!("  run_id: {abandoned}\n")));
    assert!(preview.stdout.contains("  finished_at: <started-at>\n"));
    assert_has_line(
        &preview.stderr,
        "note: run needs --retry-stopped for this attempt",
    );
}

#[test]
fn check_prompt_previews_the_attempt_a_resumed_retry_schedule_runs() {
    let (sandbox, agent) = three_phases();
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"max_attempts": 2, "backoff_seconds": 30}}"#,
    );
    set_mode(&sandbox, "phase-1", "fail");
    let stderr = fs::File::create(sandbox.path("stderr.txt")).unwrap();
    let handler = sandbox
        .command()
        .args(["run", "--plan", PLAN, "--quiet", "--agent-cmd"])
        .arg(&agent)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn handler");
    let waiting = wait_until(PATIENCE, || {
        fs::read_to_string(sandbox.path("stderr.txt")).is_ok_and(|text| {
            text.contains("retrying phase-1 (attempt 2 of 2) after agent-failed in 30 s\n")
        })
    });
    assert!(waiting, "the handler never said it waits");
    nix::sys::signal::kill(Pid::from_raw(handler.id() as i32), Signal::SIGINT).unwrap();
    wait_for_exit(handler, PATIENCE).assert_code(130);
    // The wait shortened, as the clock would after 30 s (the unattended tests do the same).
    let mut state = sandbox.state(PLAN);
    let soon = chrono::Utc::now() + chrono::Duration::seconds(1);
    state["retry_schedule"]["not_before"] = soon.format("%Y-%m-%dT%H:%M:%SZ").to_string().into();
    fs::write(
        sandbox.state_path(PLAN),
        serde_json::to_string_pretty(&state).unwrap(),
    )
    .unwrap();

    set_mode(&sandbox, "phase-1", "complete");
    // A plain run resumes the schedule: no recovery flag, and the prompt has its RETRY
    // section naming the failed attempt.
    let preview = preview_then_run(&sandbox, &agent, &["--max-phases", "1", "--quiet"], 0);
    assert!(
        preview.stdout.contains("this is attempt 2 of 2.\n"),
        "{}",
        preview.stdout
    );
    let failed = state["last_run"]["run_id"].as_str().unwrap();
    assert!(
        preview
            .stdout
            .contains(&format!("  - attempt_id: {failed}\n"))
    );
    assert!(
        preview.stderr.starts_with(
            "note: run resumes the retry scheduled for phase-1: attempt 2, not before "
        ),
        "{}",
        preview.stderr
    );
    assert!(!preview.stderr.contains("--retry-stopped"));
}

#[test]
fn check_prompt_for_a_named_phase_and_its_refusals() {
    let (sandbox, agent) = three_phases();
    let agent_cmd = agent.to_str().unwrap();
    let tree = tree_snapshot(&sandbox.root);
    let named = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_cmd,
        "--prompt",
        "--phase",
        "phase-2",
    ]);
    named.assert_code(0);
    assert!(named.stdout.contains("- selected_phase_id: phase-2\n"));
    assert!(named.stdout.contains("Do step 2."));
    assert_has_line(
        &named.stderr,
        "note: phase-2 is not the next phase (phase-1); this is the prompt it would receive if it ran next",
    );

    let unknown = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_cmd,
        "--prompt",
        "--phase",
        "phase-9",
    ]);
    unknown.assert_code(5);
    assert_eq!(unknown.stdout, "");
    assert_has_line(
        &unknown.stderr,
        "error: --phase phase-9: the plan has no such phase; its phases: phase-1, phase-2, phase-3",
    );
    // --phase needs --prompt; --prompt is not JSON.
    sandbox
        .run(&[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent_cmd,
            "--phase",
            "phase-1",
        ])
        .assert_code(5);
    sandbox
        .run(&[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent_cmd,
            "--prompt",
            "--json",
        ])
        .assert_code(5);
    assert_eq!(tree_snapshot(&sandbox.root), tree, "nothing was written");

    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1", "--quiet"])
        .assert_code(0);
    let done = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_cmd,
        "--prompt",
        "--phase",
        "phase-1",
    ]);
    done.assert_code(5);
    assert_has_line(
        &done.stderr,
        "error: --phase phase-1: the phase is complete; no attempt would run it",
    );
}

// ---- one duration per attempt ----

/// An attempt has one duration (docs/decisions.md, "One duration per attempt"): the outcome,
/// `state.json`, `status`, the event stream, the phase's end line and `run --json` all say the
/// same. The commit is held for 600 ms, so a duration taken after it would differ.
#[cfg(feature = "failpoints")]
#[test]
fn an_attempt_has_one_duration_everywhere() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let run = Run::from_output(
        sandbox
            .command()
            .args(["run", "--plan", PLAN, "--agent-cmd"])
            .arg(&agent)
            .arg("--json")
            .env("FAILPOINTS", "state-commit-write=sleep(600)")
            .output()
            .expect("run handler"),
    );
    run.assert_code(0);
    let outcome = committed_outcome(&sandbox, 0);
    let duration = outcome["duration_ms"].as_u64().expect("duration_ms");
    assert_eq!(
        sandbox.state(PLAN)["committed_outcomes"][0]["duration_ms"].as_u64(),
        Some(duration)
    );
    let committed = fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["event"] == "outcome-committed")
        .expect("an outcome-committed event");
    assert_eq!(committed["duration_ms"].as_u64(), Some(duration));
    let object: Value = serde_json::from_str(run.stdout.trim_end()).unwrap();
    assert_eq!(object["attempt_duration_ms"].as_u64(), Some(duration));
    // The end line and the status table word the same milliseconds the same way.
    let end = run
        .raw_stderr
        .lines()
        .find_map(|line| line.strip_prefix("phase-1 complete in "))
        .expect("an end line");
    let shown = end.split(" · ").next().unwrap();
    assert_eq!(row(&status_text(&sandbox), "phase-1")[3], shown);
}

// ---- attempt labels ----

/// After a failure and `--retry-stopped`, the banner's attempt number is the phase's second
/// attempt, as `status` counts it.
#[test]
fn the_banner_counts_the_attempts_status_counts() {
    let (sandbox, agent) = three_phases();
    set_mode(&sandbox, "phase-1", "fail");
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(4);
    set_mode(&sandbox, "phase-1", "complete");
    let retried = sandbox.run_plan(PLAN, &agent, &["--retry-stopped", "--max-phases", "1"]);
    retried.assert_code(0);
    assert_has_line(&retried.raw_stderr, "phase-1 (1/3) Step 1 · attempt 2");
    assert_eq!(
        row(&status_text(&sandbox), "phase-1")[..3],
        ["phase-1", "done", "2"]
    );
    // Under a retry policy the run's own count is added when the two differ.
    set_mode(&sandbox, "phase-2", "fail");
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(4);
    set_mode(&sandbox, "phase-2", "complete");
    let policy = sandbox.run_plan(
        PLAN,
        &agent,
        &["--retry-stopped", "--retries", "1", "--max-phases", "1"],
    );
    policy.assert_code(0);
    assert_has_line(
        &policy.raw_stderr,
        "phase-2 (2/3) Step 2 · attempt 2 (1 of 2 in this run)",
    );
}

/// A plan that no longer parses does not turn every recorded phase into one "not in the
/// plan": `status` says the plan cannot be read and shows the recorded phases.
#[test]
fn status_of_an_unparseable_plan_shows_the_recorded_phases() {
    let (sandbox, agent) = three_phases();
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "2", "--quiet"])
        .assert_code(0);
    sandbox.write(PLAN, "# no phases any more\n");
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(5);
    assert!(
        !status.stdout.contains("(not in the plan)"),
        "{}",
        status.stdout
    );
    assert_has_line(
        &status.stdout,
        "plan: cannot be read (see the error below); the phases are the ones the state records",
    );
    assert_eq!(
        row(&status.stdout, "phase-1")[..3],
        ["phase-1", "done", "1"]
    );
    assert_eq!(
        row(&status.stdout, "phase-2")[..3],
        ["phase-2", "done", "1"]
    );
    assert!(status.stderr.starts_with("error: "), "{}", status.stderr);
}

// ---- completions and man ----

/// Each shell's script registers a function that asks this binary for the candidates
/// (`AI_SESSION_HANDLER_COMPLETE=<shell> ai-session-handler -- <words>`), and the binary
/// knows every command and flag.
#[test]
fn completion_scripts_are_generated_for_bash_zsh_and_fish() {
    let sandbox = Sandbox::new();
    for (shell, marker) in [
        (
            "bash",
            "-F _clap_complete_ai_session_handler ai-session-handler",
        ),
        ("zsh", "#compdef ai-session-handler"),
        (
            "fish",
            "complete --keep-order --exclusive --command ai-session-handler",
        ),
    ] {
        let script = sandbox.run(&["completions", shell]);
        script.assert_code(0);
        assert!(
            script.stdout.contains(marker),
            "{shell}:\n{}",
            script.stdout
        );
        assert!(
            script
                .stdout
                .contains(&format!("AI_SESSION_HANDLER_COMPLETE=\"{shell}\""))
                || script
                    .stdout
                    .contains(&format!("AI_SESSION_HANDLER_COMPLETE={shell}")),
            "{shell}:\n{}",
            script.stdout
        );
        assert!(script.stdout.contains(BIN), "{shell}:\n{}", script.stdout);
        for (words, word) in [
            (&["run", "--"][..], "--retry-stopped"),
            (&["run", "--"][..], "--accept-plan-change"),
            (&["check", "--"][..], "--prompt"),
            (&[""][..], "status"),
            (&[""][..], "completions"),
        ] {
            let asked = sandbox
                .command()
                .env("AI_SESSION_HANDLER_COMPLETE", shell)
                .env("_CLAP_COMPLETE_INDEX", (words.len()).to_string())
                .args(["--", "ai-session-handler"])
                .args(words)
                .output()
                .expect("ask the binary");
            let offered = String::from_utf8_lossy(&asked.stdout);
            assert!(asked.status.success(), "{shell} {words:?}");
            assert!(
                offered
                    .split(['\n', '\u{b}', '\t', ':'])
                    .any(|candidate| candidate == word),
                "{shell} lacks {word}: {offered:?}"
            );
        }
        assert_eq!(script.stderr, "");
    }
    // The bash script is valid bash.
    let script = sandbox.run(&["completions", "bash"]).stdout;
    let path = sandbox.write("completion.bash", &script);
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash runs");
    assert!(checked.success());

    let bad = sandbox.run(&["completions", "tcsh"]);
    bad.assert_code(5);
    assert!(
        bad.stderr.starts_with("error: invalid value 'tcsh'"),
        "{}",
        bad.stderr
    );
}

#[test]
fn man_pages_are_roff_naming_every_command() {
    let sandbox = Sandbox::new();
    let page = sandbox.run(&["man"]);
    page.assert_code(0);
    assert!(
        page.stdout.contains("\n.TH ai-session-handler 1 "),
        "{}",
        page.stdout
    );
    assert!(page.stdout.contains("\n.SH SYNOPSIS\n"));
    assert!(page.stdout.contains("\n.SH SUBCOMMANDS\n"));
    for command in [
        "run",
        "status",
        "check",
        "init",
        "watch",
        "completions",
        "man",
    ] {
        assert!(
            page.stdout
                .contains(&format!("ai\\-session\\-handler\\-{command}(1)")),
            "{command} missing"
        );
        let sub = sandbox.run(&["man", command]);
        sub.assert_code(0);
        assert!(
            sub.stdout
                .contains(&format!("\n.TH ai-session-handler-{command} 1 ")),
            "{}",
            sub.stdout
        );
    }
    let run_page = sandbox.run(&["man", "run"]).stdout;
    assert!(run_page.contains("\\-\\-retry\\-stopped"));
    // The synopsis shows values with --plan first; global options, the exit status (every
    // code) and examples have sections of their own.
    assert!(
        run_page.contains(
            "\n.SH SYNOPSIS\n\\fBai\\-session\\-handler run\\fR \\-\\-plan <PATH> [\\-\\-agent\\-cmd <TEMPLATE>]"
        ),
        "{run_page}"
    );
    for page in [&page.stdout, &run_page] {
        for section in [
            "\n.SH \"GLOBAL OPTIONS\"\n",
            "\n.SH \"EXIT STATUS\"\n",
            "\n.SH EXAMPLES\n",
        ] {
            assert!(page.contains(section), "{section:?} missing:\n{page}");
        }
        for code in [
            "\\fB0\\fR",
            "\\fB2\\fR",
            "\\fB3\\fR",
            "\\fB4\\fR",
            "\\fB5\\fR",
            "\\fB130/143/129/131\\fR",
        ] {
            assert!(page.contains(code), "{code:?} missing:\n{page}");
        }
    }
    let unknown = sandbox.run(&["man", "walk"]);
    unknown.assert_code(5);
    assert_has_line(
        &unknown.stderr,
        "error: man: no manual page for 'walk'; commands: run, status, check, init, answer, report, watch, completions, man",
    );
}

/// `run --help` (and the main `--help`) carry the synopsis with values and `--plan` first,
/// the global options apart, and the EXIT STATUS and EXAMPLES sections; `--log-level` lists
/// `off`.
#[test]
fn help_shows_the_synopsis_global_options_exit_status_and_examples() {
    let sandbox = Sandbox::new();
    let help = sandbox.run(&["run", "--help"]);
    help.assert_code(0);
    let text = &help.stdout;
    assert!(
        text.contains("Usage: ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>] [--max-phases <N>]"),
        "{text}"
    );
    let global = text
        .find("\nGlobal options:\n")
        .expect("a global options section");
    let own = text.find("\nOptions:\n").expect("an options section");
    assert!(own < global, "{text}");
    assert!(!text[own..global].contains("--log-level"), "{text}");
    assert!(text[global..].contains("--log-level <LEVEL>"), "{text}");
    assert!(
        text.contains("(off, error, warn, info, debug, trace"),
        "{text}"
    );
    let exit = text
        .find("\nExit status:\n")
        .expect("an exit status section");
    for code in ["  0 ", "  2 ", "  3 ", "  4 ", "  5 ", "  130/143/129/131 "] {
        assert!(text[exit..].contains(code), "{code:?} missing:\n{text}");
    }
    assert!(text[exit..].contains("\nExamples:\n"), "{text}");
    assert!(
        text.contains("--retry-stopped --accept-plan-change"),
        "{text}"
    );
    let main = sandbox.run(&["--help"]);
    main.assert_code(0);
    assert!(
        main.stdout
            .contains("Usage: ai-session-handler [GLOBAL OPTIONS] <COMMAND>")
    );
    assert!(main.stdout.contains("\nExit status:\n"), "{}", main.stdout);
    assert!(
        main.stdout.contains("\nGlobal options:\n"),
        "{}",
        main.stdout
    );
    let status = sandbox.run(&["status", "--help"]);
    assert!(
        status
            .stdout
            .contains("Usage: ai-session-handler status --plan <PATH> [--json] [GLOBAL OPTIONS]"),
        "{}",
        status.stdout
    );
}

// ---- the agent program, resolved before anything is written ----

/// `run` and `check` both refuse `agent_cmd` (exit 5, `expected` on stderr) and nothing
/// under the sandbox changes — on a fresh plan not even the state directory appears.
#[track_caller]
fn refused_before_anything_is_written(sandbox: &Sandbox, agent_cmd: &str, expected: &str) {
    let tree = tree_snapshot(&sandbox.root);
    for command in ["run", "check"] {
        let refused = sandbox.run(&[command, "--plan", PLAN, "--agent-cmd", agent_cmd]);
        refused.assert_code(5);
        assert_has_line(&refused.stderr, expected);
        assert_eq!(
            tree_snapshot(&sandbox.root),
            tree,
            "{command} changed something"
        );
    }
    assert!(!sandbox.path(".ai-session-handler").exists());
    sandbox.assert_no_survivors();
}

#[test]
fn a_missing_agent_program_is_refused_naming_where_it_was_looked_for() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let path = std::env::var("PATH").unwrap();
    let searched = path
        .split(':')
        .map(|dir| if dir.is_empty() { "." } else { dir })
        .collect::<Vec<_>>()
        .join(", ");
    refused_before_anything_is_written(
        &sandbox,
        "no-such-agent-4d1c --flag",
        &format!(
            "error: --agent-cmd: agent program 'no-such-agent-4d1c' not found in PATH (searched {searched})"
        ),
    );
    refused_before_anything_is_written(
        &sandbox,
        "./bin/missing {prompt_file}",
        &format!(
            "error: --agent-cmd: agent program './bin/missing' not found: no file at {}/bin/missing (a relative program path is resolved against the phase's execution workspace)",
            sandbox.root.display()
        ),
    );
}

#[test]
fn a_program_without_execute_permission_or_a_directory_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let script = sandbox.write("agent.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    refused_before_anything_is_written(
        &sandbox,
        script.to_str().unwrap(),
        &format!(
            "error: --agent-cmd: agent program '{0}' at {0} is not executable; make it executable (chmod +x) or name another program",
            script.display()
        ),
    );
    fs::create_dir_all(sandbox.path("tools")).unwrap();
    refused_before_anything_is_written(
        &sandbox,
        "./tools",
        &format!(
            "error: --agent-cmd: agent program './tools' at {}/tools is a directory, not a program",
            sandbox.root.display()
        ),
    );
}

#[test]
fn every_fallback_agent_program_is_resolved_too_and_a_stopped_state_is_untouched() {
    let (sandbox, agent) = three_phases();
    set_mode(&sandbox, "phase-1", "block");
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(2);
    let config = sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"rate_limit": {"fallback_agent_cmds": ["missing-fallback-9e2 --x"]}}"#,
    );
    let tree = tree_snapshot(&sandbox.root);
    let expected = format!(
        "error: {}: rate_limit.fallback_agent_cmds[0]: agent program 'missing-fallback-9e2' not found in PATH",
        config.display()
    );
    for command in ["run", "check"] {
        let refused = sandbox.run(&[
            command,
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
        ]);
        refused.assert_code(5);
        assert!(
            refused
                .stderr
                .lines()
                .any(|line| line.starts_with(&expected)),
            "{command}: {}",
            refused.stderr
        );
    }
    let retried = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    retried.assert_code(5);
    assert_eq!(
        tree_snapshot(&sandbox.root),
        tree,
        "the stopped state changed"
    );
}

#[test]
fn a_failure_inside_exec_is_still_a_launch_failure() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    // The file exists and is executable, so it is resolved; its interpreter does not.
    let agent = sandbox.script("agent", "echo never\n");
    let text = fs::read_to_string(&agent).unwrap();
    fs::write(
        &agent,
        text.replacen("#!/bin/sh", "#!/nonexistent/interpreter", 1),
    )
    .unwrap();
    sandbox
        .run(&[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
        ])
        .assert_code(0);
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(4);
    assert!(
        run.stderr
            .starts_with("launch-failed: could not launch agent command: "),
        "{}",
        run.stderr
    );
    assert_eq!(sandbox.state(PLAN)["stop"]["reason"], "launch-failed");
}

#[test]
fn a_program_word_with_a_placeholder_is_left_to_the_launch() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    sandbox.script(
        "agent",
        "cat >/dev/null\necho '<phase-complete>ok</phase-complete>'\n",
    );
    // {workspace} is the phase's execution workspace, known only per attempt.
    let template = "{workspace}/bin/agent --prompt {prompt_file}";
    sandbox
        .run(&["check", "--plan", PLAN, "--agent-cmd", template])
        .assert_code(0);
    sandbox
        .run(&["run", "--plan", PLAN, "--agent-cmd", template, "--quiet"])
        .assert_code(0);
}
