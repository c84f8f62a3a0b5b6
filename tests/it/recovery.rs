//! Recovery and `status` (docs/state-and-recovery.md, docs/session-lifecycle.md, docs/cli.md): abandoned attempts after a SIGKILLed handler,
//! the liveness check behind `--retry-stopped`, plan edits after a clarification, moved plans,
//! and a read-only `status` report for every shape the state can take.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const PLAN: &str = "plan.md";

#[test]
fn retry_is_refused_while_the_worker_lives_and_allowed_after_it_dies() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-1");

    let attempt = &state["active_attempt"];
    let id = attempt["id"].as_str().unwrap().to_owned();
    let pid = attempt["process"]["pid"].as_u64().unwrap();
    let pgid = attempt["process"]["process_group_id"].as_u64().unwrap();
    assert_eq!(attempt["status"], "running");
    assert_eq!(pgid, pid, "the worker leads its own process group");
    assert!(attempt["process"]["start_time_ticks"].as_u64().unwrap() > 0);
    assert!(!attempt["process"]["boot_id"].as_str().unwrap().is_empty());
    assert!(
        sandbox.survivors().contains(&(pid as u32)),
        "the worker outlives a SIGKILLed handler whose watchdog was SIGKILLed too"
    );
    let before = sandbox.state_bytes(PLAN).unwrap();

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!("abandoned: phase-1 (running, attempt {id})"),
    );
    assert_has_line(
        &status.stdout,
        &format!(
            "attempt outcome (uncommitted): {}",
            attempt["outcome_path"].as_str().unwrap()
        ),
    );
    assert_has_line(
        &status.stdout,
        &format!("worker process id: {pid} (process group {pgid})"),
    );
    assert_has_line(&status.stdout, "worker process: still running");

    let plain = sandbox.run_plan(PLAN, &agent, &[]);
    plain.assert_code(5);
    assert_has_line(
        &plain.stderr,
        &format!(
            "error: phase phase-1 has an abandoned running attempt {id}; inspect partial changes and stop any surviving worker before retrying"
        ),
    );
    assert_has_line(
        &plain.stderr,
        &format!("recorded worker pid: {pid} (process group {pgid})"),
    );
    assert_has_line(&plain.stderr, "retry requires: --retry-stopped");
    assert_eq!(
        plain.stderr.lines().last().unwrap(),
        format!(
            "next: make sure no worker of attempt {id} is still running (status shows it) and inspect its partial changes, then ai-session-handler run --plan {PLAN} --agent-cmd {} --retry-stopped",
            agent.display()
        )
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), before);

    set_mode(&sandbox, "phase-1", "complete");
    let alive = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    alive.assert_code(5);
    assert_eq!(
        alive.stderr,
        format!(
            "error: attempt {id} worker pid {pid} is still alive; stop it and inspect partial changes before retrying\n\
             next: stop worker pid {pid} (or wait for it to exit) and inspect its partial changes, then ai-session-handler run --plan {PLAN} --agent-cmd {} --retry-stopped\n",
            agent.display()
        )
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), before);
    assert_eq!(
        launches(&sandbox),
        ["phase-1"],
        "a refused retry launches nothing"
    );
    // `check` refuses what `run --retry-stopped` refuses, and says why.
    let agent_cmd = agent.to_str().unwrap();
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", agent_cmd]);
    check.assert_code(5);
    assert_has_line(
        &check.stderr,
        &format!(
            "error: attempt {id} worker pid {pid} is still alive; stop it and inspect partial changes before retrying"
        ),
    );

    kill_worker(&sandbox, &state);
    sandbox
        .run(&["check", "--plan", PLAN, "--agent-cmd", agent_cmd])
        .assert_code(0);
    let retry = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    retry.assert_code(0);
    assert!(
        retry
            .stdout
            .ends_with("runner-complete: all phases complete\n"),
        "{}",
        retry.stdout
    );
    let after = sandbox.state(PLAN);
    assert!(after["active_attempt"].is_null());
    assert!(after["stop"].is_null());
    assert_eq!(after["completed_phase_ids"], serde_json::json!(["phase-1"]));
    let committed = after["committed_outcomes"].as_array().unwrap();
    assert_eq!(
        committed.len(),
        1,
        "the abandoned attempt is never committed"
    );
    assert_ne!(committed[0]["attempt_id"], id.as_str());
    assert_eq!(committed[0]["status"], "phase-complete");
    assert_eq!(after["last_run"]["run_id"], committed[0]["attempt_id"]);
    assert_eq!(after["last_run"]["status"], "phase-complete");

    // The retry's prompt was rendered from the prepared write, which resolved the abandoned
    // attempt as interrupted in the same replacement.
    let retry_id = committed[0]["attempt_id"].as_str().unwrap();
    let prompt = fs::read_to_string(prompt_path(&sandbox, retry_id)).unwrap();
    assert!(
        prompt.contains(&format!(
            "last_run:\n  run_id: {id}\n  phase_id: phase-1\n  status: interrupted\n"
        )),
        "{prompt}"
    );
    assert!(prompt.contains("  outcome_path: none\n"), "{prompt}");
    sandbox.assert_no_survivors();
}

#[test]
fn retry_is_allowed_when_the_recorded_identity_does_not_match_a_live_process() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-1");
    kill_worker(&sandbox, &state);
    set_mode(&sandbox, "phase-1", "complete");

    // Point the record at this test process: a live, unrelated process. Only the exact
    // identity (pid, pgid, boot id, start time) counts as alive.
    let me = std::process::id();
    let stat = fs::read_to_string("/proc/self/stat").unwrap();
    let stat = ai_session_handler::domain::identity::parse_proc_stat(&stat).unwrap();
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let live = serde_json::json!({
        "pid": me,
        "process_group_id": stat.pgrp,
        "boot_id": boot_id.trim(),
        "start_time_ticks": stat.start_time_ticks,
    });

    let alive = with_process(&state, live.clone());
    write_state(&sandbox, &alive);
    let refused = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    refused.assert_code(5);
    assert!(
        refused
            .stderr
            .contains(&format!("worker pid {me} is still alive")),
        "{}",
        refused.stderr
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), alive.as_bytes());

    let mut variants = Vec::new();
    let mut reused = live.clone();
    reused["start_time_ticks"] = (stat.start_time_ticks + 1).into();
    variants.push(("reused pid (other start time)", reused));
    let mut other_boot = live.clone();
    other_boot["boot_id"] = "00000000-0000-0000-0000-000000000000".into();
    variants.push(("other boot", other_boot));
    let mut other_group = live.clone();
    other_group["process_group_id"] = (stat.pgrp + 1).into();
    variants.push(("other process group", other_group));
    variants.push(("no identity", Value::Null));

    for (label, process) in variants {
        write_state(&sandbox, &with_process(&state, process));
        let retry = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
        assert_eq!(retry.code, 0, "{label}: {retry:?}");
        let after = sandbox.state(PLAN);
        assert_eq!(
            after["completed_phase_ids"],
            serde_json::json!(["phase-1"]),
            "{label}"
        );
        assert!(after["active_attempt"].is_null(), "{label}");
    }
    sandbox.assert_no_survivors();
}

#[test]
fn a_prepared_attempt_without_identity_is_retried_on_request() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-1");
    kill_worker(&sandbox, &state);
    let mut prepared: Value = serde_json::from_str(&with_process(&state, Value::Null)).unwrap();
    prepared["active_attempt"]["status"] = "prepared".into();
    let id = prepared["active_attempt"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let prepared = to_state_text(&prepared);
    write_state(&sandbox, &prepared);

    let plain = sandbox.run_plan(PLAN, &agent, &[]);
    plain.assert_code(5);
    assert!(
        plain
            .stderr
            .contains(&format!("has an abandoned prepared attempt {id}")),
        "{}",
        plain.stderr
    );
    assert_has_line(
        &plain.stderr,
        "worker process identity: unknown (prepared, launch not recorded)",
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), prepared.as_bytes());

    set_mode(&sandbox, "phase-1", "complete");
    sandbox
        .run_plan(PLAN, &agent, &["--retry-stopped"])
        .assert_code(0);
    let after = sandbox.state(PLAN);
    assert_eq!(after["completed_phase_ids"], serde_json::json!(["phase-1"]));
    assert_eq!(after["committed_outcomes"].as_array().unwrap().len(), 1);
    sandbox.assert_no_survivors();
}

#[test]
fn clarification_answered_in_the_plan_needs_both_recovery_flags() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "clarify");

    let first = sandbox.run_plan(PLAN, &agent, &[]);
    first.assert_code(3);
    assert_eq!(
        first.stdout,
        "working on phase-1\nphase-needs-clarification: which database?\n"
    );
    let stopped = sandbox.state(PLAN);
    assert_eq!(stopped["stop"]["reason"], "needs-clarification");
    assert_eq!(stopped["stop"]["clarification_request"], "which database?");
    let stopped_bytes = sandbox.state_bytes(PLAN).unwrap();

    // The answer goes into the plan preamble, never into state.
    let answered = plan_with_phases(2).replace(
        "Global intent.\n",
        "Global intent.\n\nANSWER: use postgres\n",
    );
    sandbox.write(PLAN, &answered);

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "stopped: phase-1 (needs-clarification)");
    assert_has_line(&status.stdout, "clarification: which database?");
    assert!(
        status
            .stdout
            .contains("\nplan changed since accepted: expected "),
        "{}",
        status.stdout
    );

    let retry_only = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    retry_only.assert_code(5);
    assert_has_lines(
        &retry_only.stderr,
        &[
            &format!("plan hash mismatch: {}", sandbox.path(PLAN).display()),
            &format!("expected: {}", stopped["plan"]["sha256"].as_str().unwrap()),
            &format!(
                "actual:   {}",
                ai_session_handler::domain::plan_key::sha256_hex(answered.as_bytes())
            ),
        ],
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), stopped_bytes);

    let accept_only = sandbox.run_plan(PLAN, &agent, &["--accept-plan-change"]);
    accept_only.assert_code(5);
    assert_has_line(
        &accept_only.stderr,
        "error: phase phase-1 is stopped: needs-clarification",
    );
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), stopped_bytes);
    assert_eq!(launches(&sandbox), ["phase-1"]);

    let retry = sandbox.run_plan(PLAN, &agent, &["--retry-stopped", "--accept-plan-change"]);
    retry.assert_code(0);
    assert!(
        retry
            .stdout
            .ends_with("runner-complete: all phases complete\n"),
        "{}",
        retry.stdout
    );
    let after = sandbox.state(PLAN);
    assert_eq!(
        after["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
    assert_ne!(after["plan"]["sha256"], stopped["plan"]["sha256"]);
    let retry_id = after["committed_outcomes"][1]["attempt_id"]
        .as_str()
        .unwrap();
    assert_eq!(after["committed_outcomes"][1]["phase_id"], "phase-1");
    let prompt = fs::read_to_string(prompt_path(&sandbox, retry_id)).unwrap();
    assert!(prompt.contains("\nANSWER: use postgres\n"), "{prompt}");
    let outcome: Value = read_json(&outcome_path(&sandbox, retry_id));
    assert_eq!(outcome["summary"], "answered phase-1");
}

#[test]
fn accepting_a_plan_change_refuses_when_a_completed_phase_is_gone() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(0);
    let before = sandbox.state_bytes(PLAN).unwrap();

    // Keep only phase 2: phase-1 is completed but no longer exists.
    let without_first = plan_with_phases(2).replace(
        "## Phase 1: Step 1\n\n### Workspace\n\n.\n\n### Goal\n\nDo step 1.\n\n",
        "",
    );
    assert!(!without_first.contains("Phase 1:"));
    sandbox.write(PLAN, &without_first);
    for flags in [
        &["--accept-plan-change"][..],
        &["--accept-plan-change", "--retry-stopped"][..],
    ] {
        let refused = sandbox.run_plan(PLAN, &agent, flags);
        refused.assert_code(5);
        assert_has_line(
            &refused.stderr,
            &format!(
                "error: {}: cannot accept plan change; completed phase ids are missing: phase-1",
                sandbox.path(PLAN).display()
            ),
        );
        assert_eq!(sandbox.state_bytes(PLAN).unwrap(), before);
    }
    assert_eq!(launches(&sandbox), ["phase-1"]);
}

/// A stopped phase deleted from the plan cannot be retried: `check` says so (it would
/// otherwise point at `--retry-stopped`), `run` refuses with the same words, and restoring
/// the phase is the way back.
#[test]
fn a_stopped_phase_removed_from_the_plan_is_refused_by_check_and_run_alike() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(3));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-2", "block");
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(2);
    let before = sandbox.state_bytes(PLAN).unwrap();

    let original = plan_with_phases(3);
    let without_second = original.replace(
        "## Phase 2: Step 2\n\n### Workspace\n\n.\n\n### Goal\n\nDo step 2.\n\n",
        "",
    );
    assert!(!without_second.contains("Phase 2:"));
    sandbox.write(PLAN, &without_second);
    let expected = "error: stopped phase phase-2 does not exist in plan";
    let agent_cmd = agent.to_str().unwrap();
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", agent_cmd]);
    check.assert_code(5);
    assert_has_line(&check.stderr, expected);
    let refused = sandbox.run_plan(PLAN, &agent, &["--retry-stopped", "--accept-plan-change"]);
    refused.assert_code(5);
    assert_has_line(&refused.stderr, expected);
    assert_eq!(sandbox.state_bytes(PLAN).unwrap(), before);

    sandbox.write(PLAN, &original);
    sandbox
        .run(&["check", "--plan", PLAN, "--agent-cmd", agent_cmd])
        .assert_code(0);
    set_mode(&sandbox, "phase-2", "complete");
    let retry = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    retry.assert_code(0);
    assert_eq!(
        launches(&sandbox),
        ["phase-1", "phase-2", "phase-2", "phase-3"]
    );
}

#[test]
fn a_renamed_plan_starts_fresh_under_its_new_key() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(0);
    let old_state = sandbox.state_bytes(PLAN).unwrap();

    fs::rename(sandbox.path(PLAN), sandbox.path("renamed.md")).unwrap();
    let status = sandbox.run(&["status", "--plan", "renamed.md"]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!("state path: {}", sandbox.state_path("renamed.md").display()),
    );
    assert_has_line(&status.stdout, "state file: not created yet");
    assert_has_line(&status.stdout, "next phase: phase-1 Step 1");

    sandbox.run_plan("renamed.md", &agent, &[]).assert_code(0);
    assert_eq!(launches(&sandbox), ["phase-1", "phase-1", "phase-2"]);
    assert_eq!(
        sandbox.state("renamed.md")["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
    assert_eq!(
        sandbox.state_bytes(PLAN).unwrap(),
        old_state,
        "the old key's history is left alone"
    );
}

#[test]
fn a_renamed_plan_carries_its_history_when_the_keyed_directory_moves_with_it() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(0);

    // The documented procedure: move the keyed directory to the new key and rewrite the
    // paths the state records (the plan path and every artifact path under the old key).
    let old_dir = sandbox.state_dir(PLAN);
    let new_dir = sandbox.state_dir("renamed.md");
    fs::rename(sandbox.path(PLAN), sandbox.path("renamed.md")).unwrap();
    fs::rename(&old_dir, &new_dir).unwrap();
    let text = fs::read_to_string(new_dir.join("state.json"))
        .unwrap()
        .replace(
            &old_dir.display().to_string(),
            &new_dir.display().to_string(),
        )
        .replace(
            &sandbox.path(PLAN).display().to_string(),
            &sandbox.path("renamed.md").display().to_string(),
        );
    fs::write(new_dir.join("state.json"), text).unwrap();

    let status = sandbox.run(&["status", "--plan", "renamed.md"]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "next phase: phase-2 Step 2");
    assert_has_line(&status.stdout, "plan: matches the accepted snapshot");
    sandbox.run_plan("renamed.md", &agent, &[]).assert_code(0);
    assert_eq!(launches(&sandbox), ["phase-1", "phase-2"]);
    let state = sandbox.state("renamed.md");
    assert_eq!(
        state["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
    assert_eq!(state["committed_outcomes"].as_array().unwrap().len(), 2);
}

#[test]
fn a_state_recorded_for_another_plan_path_is_never_accepted_implicitly() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(0);
    let mut state = sandbox.state(PLAN);
    let elsewhere = sandbox.path("elsewhere/plan.md").display().to_string();
    state["plan"]["path"] = elsewhere.clone().into();
    let edited = to_state_text(&state);
    write_state(&sandbox, &edited);

    for flags in [
        &[][..],
        &["--accept-plan-change"][..],
        &["--retry-stopped", "--accept-plan-change"][..],
    ] {
        let refused = sandbox.run_plan(PLAN, &agent, flags);
        refused.assert_code(5);
        assert!(
            refused.stderr.lines().any(|line| line.starts_with(&format!(
                "error: {}: plan path mismatch; state belongs to {elsewhere}.",
                sandbox.path(PLAN).display()
            ))),
            "{flags:?}: {}",
            refused.stderr
        );
        assert!(
            refused.stderr.contains("docs/state-and-recovery.md"),
            "{}",
            refused.stderr
        );
        assert_eq!(sandbox.state_bytes(PLAN).unwrap(), edited.as_bytes());
    }
    assert_eq!(launches(&sandbox), ["phase-1"]);

    let status = status_read_only(&sandbox, 0);
    assert_has_line(
        &status.text,
        "plan path differs from the accepted plan path (moved or renamed plan)",
    );
    assert_eq!(status.json["plan"]["status"], "moved");
}

/// The key (a relative path) survives moving the whole workspace, but the absolute paths in
/// the state do not: the state is refused until they are rewritten.
#[test]
fn a_moved_workspace_is_refused_until_the_recorded_paths_are_rewritten() {
    let sandbox = Sandbox::new();
    sandbox.write("old/AGENTS.md", "# workspace\n");
    sandbox.write("old/plan.md", plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan("old/plan.md", &agent, &["--max-phases", "1"])
        .assert_code(0);
    fs::rename(sandbox.path("old"), sandbox.path("new")).unwrap();
    let key = ai_session_handler::domain::plan_key::plan_key(["plan.md"]);
    let state_path = sandbox.path(&format!("new/.ai-session-handler/plans/{key}/state.json"));
    let moved = fs::read(&state_path).unwrap();

    for args in [
        vec!["status", "--plan", "new/plan.md"],
        vec![
            "run",
            "--plan",
            "new/plan.md",
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--accept-plan-change",
        ],
    ] {
        let refused = sandbox.run(&args);
        refused.assert_code(5);
        assert!(
            refused.stderr.contains(&format!(
                "{}: expected committed_outcomes[0].path to be {}/",
                state_path.display(),
                sandbox.path("new").display()
            )),
            "{args:?}: {}",
            refused.stderr
        );
        assert_eq!(fs::read(&state_path).unwrap(), moved);
    }
    assert_eq!(launches(&sandbox), ["phase-1"]);

    // The documented procedure: rewrite every recorded path under the old workspace.
    let rewritten = String::from_utf8(moved).unwrap().replace(
        &sandbox.path("old").display().to_string(),
        &sandbox.path("new").display().to_string(),
    );
    fs::write(&state_path, rewritten).unwrap();
    sandbox.run_plan("new/plan.md", &agent, &[]).assert_code(0);
    assert_eq!(launches(&sandbox), ["phase-1", "phase-2"]);
}

#[test]
fn status_of_a_fresh_plan_creates_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let status = status_read_only(&sandbox, 0);
    assert_eq!(
        status.text,
        format!(
            "plan path: {plan}\nplan workspace path: {root}\nstate path: {state}\nstate file: not created yet\nnext phase: phase-1 Step 1\ncompleted phases: none\ncurrent phase: none\nexecution workspace path: {root}\nlatest transcript: none\nlatest committed outcome: none\nplan: not accepted yet (no run recorded)\nphase    status   attempts  duration  output  tokens  cost  title\nphase-1  pending  0         –         –       –       –     Step 1\nphase-2  pending  0         –         –       –       –     Step 2\ntotals: 0/2 phases done · 0 attempts · 0ms · 0 B output\nnext: ai-session-handler run --plan {plan}\n",
            plan = sandbox.path(PLAN).display(),
            root = sandbox.root.display(),
            state = sandbox.state_path(PLAN).display(),
        )
    );
    assert!(!sandbox.path(".ai-session-handler").exists());
    assert_eq!(status.json["state_exists"], false);
    assert_eq!(status.json["next_phase"]["id"], "phase-1");
    assert_eq!(status.json["plan"]["status"], "not-accepted");
    assert!(status.json["active_attempt"].is_null());
}

/// `status` stays read-only and exits 0 when the next phase's workspace is missing, and says
/// why it cannot show it.
#[test]
fn status_says_why_the_next_execution_workspace_is_unavailable() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        "## Phase 1: Elsewhere\n\n### Workspace\n\n../missing\n",
    );
    let status = status_read_only(&sandbox, 0);
    assert_has_line(
        &status.text,
        &format!(
            "execution workspace path unavailable: {}:5: phase phase-1 workspace '../missing' resolves to {}, which is not an existing directory",
            sandbox.path(PLAN).display(),
            sandbox.root.parent().unwrap().join("missing").display()
        ),
    );
    assert!(status.json["execution_workspace"].is_null());
    assert!(
        status.json["execution_workspace_error"]
            .as_str()
            .is_some_and(|error| error.contains("not an existing directory")),
        "{:#}",
        status.json
    );
}

/// An edit that breaks the plan is still reported as a change, with both hashes, before the
/// parse error (exit 5: the plan is invalid input).
#[test]
fn status_of_an_edited_plan_that_no_longer_parses_shows_the_change() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "block");
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(2);
    let accepted = sandbox.state(PLAN)["plan"]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let broken = format!("{}```\nunclosed fence\n", plan_with_phases(1));
    sandbox.write(PLAN, &broken);
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(5);
    assert_has_line(&status.stdout, "stopped: phase-1 (blocked)");
    assert_has_line(
        &status.stdout,
        &format!(
            "plan changed since accepted: expected {accepted}, actual {}",
            ai_session_handler::domain::plan_key::sha256_hex(broken.as_bytes())
        ),
    );
    assert!(status.stderr.contains("unclosed"), "{}", status.stderr);
}

/// A deleted plan file still has its recorded state reported: the stop, then the error.
#[test]
fn status_of_a_deleted_plan_reports_the_recorded_stop_then_the_error() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "block");
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(2);
    fs::remove_file(sandbox.path(PLAN)).unwrap();
    let before = tree(&sandbox.root);

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(5);
    assert_has_line(&status.stdout, "stopped: phase-1 (blocked)");
    assert_has_line(&status.stdout, "message: need an API key");
    assert!(
        status.stderr.starts_with(&format!(
            "error: {}: cannot read plan: ",
            sandbox.path(PLAN).display()
        )),
        "{}",
        status.stderr
    );
    assert_eq!(tree(&sandbox.root), before);
}

#[test]
fn status_of_a_prepared_attempt_reports_unknown_identity() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-1");
    kill_worker(&sandbox, &state);
    let mut prepared: Value = serde_json::from_str(&with_process(&state, Value::Null)).unwrap();
    prepared["active_attempt"]["status"] = "prepared".into();
    write_state(&sandbox, &to_state_text(&prepared));
    let attempt = &prepared["active_attempt"];

    let status = status_read_only(&sandbox, 0);
    assert_has_line(
        &status.text,
        &format!(
            "abandoned: phase-1 (prepared, attempt {})",
            attempt["id"].as_str().unwrap()
        ),
    );
    assert_has_line(&status.text, "worker process identity: unknown");
    assert_eq!(status.json["active_attempt"]["status"], "prepared");
    assert!(status.json["active_attempt"]["pid"].is_null());
    assert_eq!(status.json["active_attempt"]["outcome_committed"], false);
}

#[test]
fn status_of_a_running_attempt_prefers_it_over_the_last_run() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-2");
    kill_worker(&sandbox, &state);
    let attempt = &state["active_attempt"];
    let last_run = &state["last_run"];
    assert_eq!(last_run["phase_id"], "phase-1");

    let status = status_read_only(&sandbox, 0);
    let transcript = attempt["transcript_path"].as_str().unwrap();
    for line in [
        format!(
            "abandoned: phase-2 (running, attempt {})",
            attempt["id"].as_str().unwrap()
        ),
        format!(
            "attempt prompt: {}",
            attempt["prompt_path"].as_str().unwrap()
        ),
        format!("attempt transcript: {transcript}"),
        format!(
            "attempt outcome (uncommitted): {}",
            attempt["outcome_path"].as_str().unwrap()
        ),
        format!("latest transcript: {transcript}"),
        "completed phases: phase-1".to_owned(),
        "current phase: phase-2 Step 2".to_owned(),
        format!("execution workspace path: {}", sandbox.root.display()),
    ] {
        assert_has_line(&status.text, &line);
    }
    assert!(
        !status
            .text
            .contains(last_run["transcript_path"].as_str().unwrap())
    );
    assert_eq!(status.json["active_attempt"]["transcript_exists"], true);
    assert_eq!(status.json["latest_transcript"], transcript);
}

#[test]
fn status_reports_a_missing_transcript_at_its_own_path() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-2");
    kill_worker(&sandbox, &state);
    let transcript = state["active_attempt"]["transcript_path"].as_str().unwrap();
    fs::remove_file(transcript).unwrap();

    let status = status_read_only(&sandbox, 0);
    assert_has_line(&status.text, &format!("attempt transcript: {transcript}"));
    assert_has_line(
        &status.text,
        &format!("attempt transcript missing: {transcript}"),
    );
    assert_has_line(&status.text, &format!("latest transcript: {transcript}"));
    assert_has_line(
        &status.text,
        &format!("latest transcript missing: {transcript}"),
    );
    assert!(
        !status
            .text
            .contains(state["last_run"]["transcript_path"].as_str().unwrap()),
        "an earlier phase's transcript is never shown instead:\n{}",
        status.text
    );
    assert_eq!(status.json["active_attempt"]["transcript_exists"], false);
    assert_eq!(status.json["latest_transcript"], transcript);
}

#[test]
fn status_of_stopped_phases_names_the_reason_and_its_text() {
    for (mode, reason, detail, code) in [
        ("block", "blocked", "message: need an API key", 2),
        (
            "clarify",
            "needs-clarification",
            "clarification: which database?",
            3,
        ),
        (
            "fail",
            "agent-failed",
            "message: agent command exited with code 7",
            4,
        ),
    ] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(2));
        let agent = control_agent(&sandbox);
        set_mode(&sandbox, "phase-2", mode);
        sandbox.run_plan(PLAN, &agent, &[]).assert_code(code);
        let state = sandbox.state(PLAN);
        let last_run = &state["last_run"];

        let status = status_read_only(&sandbox, 0);
        for line in [
            format!("stopped: phase-2 ({reason})"),
            detail.to_owned(),
            "completed phases: phase-1".to_owned(),
            "current phase: phase-2 Step 2".to_owned(),
            format!(
                "latest transcript: {}",
                last_run["transcript_path"].as_str().unwrap()
            ),
            format!(
                "latest committed outcome: {}",
                last_run["outcome_path"].as_str().unwrap()
            ),
            format!(
                "last run: {} ({reason})",
                last_run["run_id"].as_str().unwrap()
            ),
            "plan: matches the accepted snapshot".to_owned(),
        ] {
            assert_has_line(&status.text, &line);
        }
        assert!(!status.text.contains("abandoned: "), "{mode}");
        assert_eq!(status.json["stop"]["reason"], reason, "{mode}");
        assert_eq!(status.json["stop"]["phase_id"], "phase-2", "{mode}");
        assert_eq!(status.json["last_run"]["status"], reason, "{mode}");
        assert!(status.json["active_attempt"].is_null(), "{mode}");
    }
}

#[test]
fn status_of_a_completed_plan() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(0);
    let state = sandbox.state(PLAN);

    let status = status_read_only(&sandbox, 0);
    for line in [
        "all complete",
        "completed phases: phase-1, phase-2",
        "current phase: none",
        "execution workspace path: none",
        "plan: matches the accepted snapshot",
    ] {
        assert_has_line(&status.text, line);
    }
    assert_has_line(
        &status.text,
        &format!(
            "latest committed outcome: {}",
            state["last_run"]["outcome_path"].as_str().unwrap()
        ),
    );
    assert_eq!(status.json["all_complete"], true);
    assert_eq!(status.json["plan"]["status"], "unchanged");
    assert_eq!(
        status.json["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
}

#[test]
fn status_reports_a_changed_plan_and_still_exits_zero() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    sandbox
        .run_plan(PLAN, &agent, &["--max-phases", "1"])
        .assert_code(0);
    let accepted = sandbox.state(PLAN)["plan"]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    sandbox.write(PLAN, plan_with_phases(3));
    let actual =
        ai_session_handler::domain::plan_key::sha256_hex(&fs::read(sandbox.path(PLAN)).unwrap());

    let status = status_read_only(&sandbox, 0);
    assert_has_line(
        &status.text,
        &format!("plan changed since accepted: expected {accepted}, actual {actual}"),
    );
    assert_has_line(&status.text, "next phase: phase-2 Step 2");
    assert_eq!(status.json["plan"]["status"], "changed");
    assert_eq!(status.json["plan"]["accepted_sha256"], accepted.as_str());
    assert_eq!(status.json["plan"]["current_sha256"], actual.as_str());
}

#[test]
fn status_of_malformed_state_exits_5_naming_the_key() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    sandbox.run_plan(PLAN, &agent, &[]).assert_code(0);
    let mut state = sandbox.state(PLAN);
    state["obsolete"] = 1.into();
    write_state(&sandbox, &to_state_text(&state));

    let status = status_read_only(&sandbox, 5);
    assert_eq!(status.text, "");
    let expected = format!(
        "{}: unexpected key obsolete",
        sandbox.state_path(PLAN).display()
    );
    assert_eq!(status.stderr, format!("error: {expected}\n"));
    assert_eq!(status.json["error"], expected.as_str());

    // A missing key is named too.
    let mut state = sandbox.state(PLAN);
    state.as_object_mut().unwrap().remove("obsolete");
    state.as_object_mut().unwrap().remove("active_attempt");
    write_state(&sandbox, &to_state_text(&state));
    let status = status_read_only(&sandbox, 5);
    assert!(
        status
            .stderr
            .ends_with(": missing required key active_attempt\n"),
        "{}",
        status.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Runs the plan until `phase` hangs with a durable `running` record, then SIGKILLs the
/// handler (not the worker, which lives on in its own session). Returns the state left behind.
/// An attempt abandoned by a SIGKILLed handler and resolved by `--retry-stopped` still counts:
/// the retry's banner says attempt 2, `status` counts two attempts for the phase (one without
/// figures), and the phase row of the abandoned attempt said `abandoned`, not `running`.
#[test]
fn an_abandoned_attempt_counts_after_its_retry() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let state = abandon_running(&sandbox, &agent, "phase-1");
    kill_worker(&sandbox, &state);
    let abandoned = status_read_only(&sandbox, 0);
    assert_eq!(abandoned.json["phases"][0]["status"], "abandoned");
    let row = abandoned
        .text
        .lines()
        .find(|line| line.starts_with("phase-1  "))
        .expect("a phase-1 row");
    assert!(row.starts_with("phase-1  abandoned "), "{row}");
    let check = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    check.assert_code(0);
    assert!(
        check
            .stdout
            .lines()
            .any(|line| line.starts_with("phase-1  abandoned ")),
        "{}",
        check.stdout
    );

    set_mode(&sandbox, "phase-1", "complete");
    let retried = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    retried.assert_code(0);
    assert_has_line(&retried.raw_stderr, "phase-1 (1/1) Step 1 · attempt 2");
    let status = status_read_only(&sandbox, 0);
    assert_eq!(status.json["phases"][0]["attempts"], 2);
    assert_eq!(status.json["totals"]["attempts"], 2);
    assert_eq!(status.json["totals"]["attempts_without_figures"], 1);
    let recorded = sandbox.state(PLAN);
    assert_eq!(
        recorded["abandoned_attempts"][0]["attempt_id"],
        state["active_attempt"]["id"]
    );
    let outcome = read_json(Path::new(
        recorded["committed_outcomes"][0]["path"].as_str().unwrap(),
    ));
    assert_eq!(outcome["phase_attempt"], 2);
}

fn abandon_running(sandbox: &Sandbox, agent: &Path, phase: &str) -> Value {
    set_mode(sandbox, phase, "hang");
    let mut handler = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    let ready = sandbox.path(&format!("ctl/ready-{phase}"));
    assert!(
        wait_until(PATIENCE, || ready.exists()),
        "the agent never started {phase}"
    );
    let running = wait_until(PATIENCE, || {
        sandbox
            .state_bytes(PLAN)
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .is_some_and(|state| state["active_attempt"]["status"] == "running")
    });
    assert!(running, "the running record was never written");
    // The handler's watchdog would stop the worker once the handler is gone; killing it first
    // leaves a worker that outlives its handler (both SIGKILLed, as by `kill -9` of both),
    // the case the liveness check of `--retry-stopped` exists for.
    kill_watchdog(sandbox);
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    let state = sandbox.state(PLAN);
    assert_eq!(state["active_attempt"]["phase"]["id"], phase);
    state
}

/// Kills the recorded worker's process group and waits until nothing of the run is left.
fn kill_worker(sandbox: &Sandbox, state: &Value) {
    let pgid = state["active_attempt"]["process"]["process_group_id"]
        .as_i64()
        .expect("recorded process group");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-(pgid as i32)),
        nix::sys::signal::Signal::SIGKILL,
    );
    sandbox.assert_no_survivors();
}

/// The state document with `active_attempt.process` replaced, as the runner would write it.
fn with_process(state: &Value, process: Value) -> String {
    let mut state = state.clone();
    state["active_attempt"]["process"] = process;
    to_state_text(&state)
}

/// 2-space indented JSON with a trailing newline (key order preserved).
fn to_state_text(state: &Value) -> String {
    let mut text = serde_json::to_string_pretty(state).unwrap();
    text.push('\n');
    text
}

fn write_state(sandbox: &Sandbox, text: &str) {
    fs::write(sandbox.state_path(PLAN), text).unwrap();
}

fn prompt_path(sandbox: &Sandbox, attempt_id: &str) -> PathBuf {
    sandbox
        .state_dir(PLAN)
        .join(format!("prompts/{attempt_id}.txt"))
}

fn outcome_path(sandbox: &Sandbox, attempt_id: &str) -> PathBuf {
    sandbox
        .state_dir(PLAN)
        .join(format!("outcomes/{attempt_id}.json"))
}

/// `status` as text and as `--json`, both with the same exit code and neither changing a
/// single file or directory of the sandbox.
struct StatusReport {
    text: String,
    stderr: String,
    json: Value,
}

#[track_caller]
fn status_read_only(sandbox: &Sandbox, code: i32) -> StatusReport {
    let before = tree(&sandbox.root);
    let text = sandbox.run(&["status", "--plan", PLAN]);
    text.assert_code(code);
    let json = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    json.assert_code(code);
    assert_eq!(json.stderr, text.stderr);
    let parsed: Value = serde_json::from_str(&json.stdout)
        .unwrap_or_else(|error| panic!("status --json does not parse: {error}\n{}", json.stdout));
    assert!(parsed.is_object());
    assert!(tree(&sandbox.root) == before, "status changed the sandbox");
    StatusReport {
        text: text.stdout,
        stderr: text.stderr,
        json: parsed,
    }
}

/// Every path under `root` with its contents (`None` for directories).
fn tree(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.insert(path.clone(), None);
                pending.push(path);
            } else {
                found.insert(path.clone(), Some(fs::read(&path).unwrap()));
            }
        }
    }
    found
}
