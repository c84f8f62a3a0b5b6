//! Fault injection at every durable write (docs/session-lifecycle.md, docs/reliability.md): a failed prepared, running, outcome or
//! state write, a failed prompt or transcript header, each on the first and on a later phase.
//! After each failure the exit code, the report, `state.json` and the artifacts agree, `status`
//! shows the same thing, and `--retry-stopped` (without faults) completes the plan.
//!
//! Faults are injected through the `fail` crate's `FAILPOINTS` variable (`name=return`, or
//! `name=1*off->return` to let the first evaluation pass); the names are listed in
//! docs/reliability.md.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};

const PLAN: &str = "plan.md";

#[test]
fn a_failed_prepared_write_launches_nothing_and_changes_nothing() {
    for failpoint in [
        "state-prepare-write",
        "state-prepare-fsync",
        "state-prepare-rename",
    ] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(2));
        let agent = control_agent(&sandbox);
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=return"), &[]);
        run.assert_code(4);
        assert_eq!(
            report_lines(&run.stderr),
            [
                format!(
                    "execution-io-failed: could not prepare attempt state: {}: injected failure at failpoint {failpoint}",
                    sandbox.state_path(PLAN).display()
                ),
                format!(
                    "next: fix what made the state write fail, then ai-session-handler run --plan {PLAN} --agent-cmd {} --quiet",
                    agent.display()
                )
            ],
            "{failpoint}"
        );
        assert_eq!(run.stdout, "", "{failpoint}");
        assert!(launches(&sandbox).is_empty(), "{failpoint}");
        assert!(sandbox.state_bytes(PLAN).is_none(), "{failpoint}");
        assert_no_temp_files(&sandbox);
        for kind in ["prompts", "transcripts", "outcomes"] {
            assert!(
                sandbox.artifacts(PLAN, kind).is_empty(),
                "{failpoint} {kind}"
            );
        }

        let status = sandbox.run(&["status", "--plan", PLAN]);
        status.assert_code(0);
        assert_has_line(&status.stdout, "state file: not created yet");
        assert_has_line(&status.stdout, "next phase: phase-1 Step 1");
        recover(&sandbox, &agent, &["phase-1", "phase-2"]);
    }
}

#[test]
fn a_failed_prepared_write_for_a_later_phase_keeps_the_earlier_commit() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let run = run_with_faults(&sandbox, &agent, "state-prepare-write=1*off->return", &[]);
    run.assert_code(4);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("execution-io-failed: could not prepare attempt state: "),
        "{}",
        run.stderr
    );
    assert_eq!(launches(&sandbox), ["phase-1"]);
    let state = sandbox.state(PLAN);
    assert_eq!(state["completed_phase_ids"], serde_json::json!(["phase-1"]));
    assert!(state["active_attempt"].is_null());
    assert!(state["current_phase"].is_null());
    assert!(state["stop"].is_null());
    let phase_one = state["last_run"]["run_id"].as_str().unwrap();
    assert!(!run.stderr.contains(phase_one), "{}", run.stderr);
    assert_eq!(sandbox.artifacts(PLAN, "prompts").len(), 1);
    assert_no_temp_files(&sandbox);

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "next phase: phase-2 Step 2");
    recover(&sandbox, &agent, &["phase-1", "phase-2"]);
}

#[test]
fn a_failed_running_write_keeps_the_prepared_record_and_stops_the_worker() {
    for failpoint in ["state-running-write", "state-running-rename"] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        set_mode(&sandbox, "phase-1", "hang");
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=return"), &[]);
        run.assert_code(4);
        sandbox.assert_no_survivors();

        let state = sandbox.state(PLAN);
        let attempt = &state["active_attempt"];
        assert_eq!(attempt["status"], "prepared", "{failpoint}: {state:#}");
        assert!(attempt["process"].is_null(), "{failpoint}");
        assert!(state["stop"].is_null(), "{failpoint}");
        assert_eq!(state["committed_outcomes"], serde_json::json!([]));
        assert_unresolved_report(&run.stderr, attempt);
        assert!(
            Path::new(attempt["transcript_path"].as_str().unwrap()).exists(),
            "the worker was launched before the running write"
        );
        assert_no_temp_files(&sandbox);
        // Said once: the failed write is also what stopped the attempt.
        assert_eq!(
            run.stderr
                .matches(&format!("injected failure at failpoint {failpoint}"))
                .count(),
            1,
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.lines().next().is_some_and(|line| line.starts_with(
                "execution-io-failed: attempt execution IO failed: could not record running attempt: "
            )),
            "{}",
            run.stderr
        );

        let status = sandbox.run(&["status", "--plan", PLAN]);
        status.assert_code(0);
        assert_has_line(
            &status.stdout,
            &format!(
                "abandoned: phase-1 (prepared, attempt {})",
                attempt["id"].as_str().unwrap()
            ),
        );
        assert_has_line(&status.stdout, "worker process identity: unknown");
        recover(&sandbox, &agent, &["phase-1"]);
    }
}

#[test]
fn a_failed_outcome_write_keeps_the_running_record() {
    for failpoint in ["outcome-write", "outcome-fsync"] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=return"), &[]);
        run.assert_code(4);
        let state = sandbox.state(PLAN);
        let attempt = &state["active_attempt"];
        assert_eq!(attempt["status"], "running", "{failpoint}: {state:#}");
        assert!(attempt["process"]["pid"].as_u64().is_some());
        assert!(state["stop"].is_null());
        assert!(state["last_run"].is_null());
        assert_eq!(state["completed_phase_ids"], serde_json::json!([]));
        assert_eq!(state["committed_outcomes"], serde_json::json!([]));
        assert_eq!(
            report_lines(&run.stderr)[0],
            format!(
                "execution-io-failed: could not write attempt outcome: {}: injected failure at failpoint {failpoint}; the worker had reported phase-complete",
                attempt["outcome_path"].as_str().unwrap()
            )
        );
        assert_unresolved_report(&run.stderr, attempt);
        assert_no_temp_files(&sandbox);
        let outcome = Path::new(attempt["outcome_path"].as_str().unwrap());
        if failpoint == "outcome-write" {
            // The write fails after the file was created (as on a full disk): no partial
            // outcome is left for anyone to mistake for a record.
            assert!(!outcome.exists(), "no outcome file is left");
        }

        assert_status_shows_abandoned(&sandbox, attempt);
        let plain = sandbox.run_plan(PLAN, &agent, &[]);
        plain.assert_code(5);
        assert!(
            plain.stderr.contains("abandoned running attempt"),
            "{}",
            plain.stderr
        );
        recover(&sandbox, &agent, &["phase-1"]);
    }
}

#[test]
fn a_failed_state_commit_leaves_the_outcome_as_unreferenced_evidence() {
    for failpoint in [
        "state-commit-write",
        "state-commit-fsync",
        "state-commit-rename",
    ] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=return"), &[]);
        run.assert_code(4);
        let state = sandbox.state(PLAN);
        let attempt = &state["active_attempt"];
        assert_eq!(attempt["status"], "running", "{failpoint}: {state:#}");
        assert_eq!(state["committed_outcomes"], serde_json::json!([]));
        assert_eq!(state["completed_phase_ids"], serde_json::json!([]));
        assert!(state["stop"].is_null());
        assert_eq!(
            report_lines(&run.stderr)[0],
            format!(
                "execution-io-failed: could not record attempt outcome: {}: injected failure at failpoint {failpoint}; the worker had reported phase-complete",
                sandbox.state_path(PLAN).display()
            )
        );
        assert_unresolved_report(&run.stderr, attempt);
        assert_no_temp_files(&sandbox);

        // The outcome is on disk, says the phase completed, and is still not adopted.
        let orphan = PathBuf::from(attempt["outcome_path"].as_str().unwrap());
        let record = read_json(&orphan);
        assert_eq!(record["status"], "phase-complete");
        assert_status_shows_abandoned(&sandbox, attempt);

        recover(&sandbox, &agent, &["phase-1"]);
        let after = sandbox.state(PLAN);
        let committed = after["committed_outcomes"].as_array().unwrap();
        assert_eq!(committed.len(), 1);
        assert_ne!(committed[0]["path"], orphan.to_str().unwrap());
        assert_eq!(after["last_run"]["run_id"], committed[0]["attempt_id"]);
        assert!(orphan.exists(), "evidence is never deleted");
    }
}

/// The rename happened, so readers already see the committed outcome; only its durability is
/// unknown. The report must describe that state, not an unresolved attempt.
#[test]
fn a_failed_directory_fsync_after_the_commit_reports_what_readers_see() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let run = run_with_faults(&sandbox, &agent, "state-commit-dir-fsync=return", &[]);
    run.assert_code(4);
    assert_eq!(run.stdout, "");
    assert_eq!(
        launches(&sandbox),
        ["phase-1"],
        "the run stops after the failure"
    );
    let state = sandbox.state(PLAN);
    assert!(state["active_attempt"].is_null(), "{state:#}");
    assert_eq!(state["completed_phase_ids"], serde_json::json!(["phase-1"]));
    let outcome = state["last_run"]["outcome_path"].as_str().unwrap();
    assert_eq!(read_json(Path::new(outcome))["status"], "phase-complete");

    let first = &report_lines(&run.stderr)[0];
    assert!(
        first.starts_with("execution-io-failed: could not record attempt outcome: ")
            && first.ends_with(
                "replaced, but not durably: injected failure at failpoint state-commit-dir-fsync; the worker had reported phase-complete"
            ),
        "{first}"
    );
    assert_has_line(&run.stderr, &format!("outcome: {outcome}"));
    assert!(
        !run.stderr.contains("unresolved attempt") && !run.stderr.contains("(uncommitted)"),
        "the state has no unresolved attempt:\n{}",
        run.stderr
    );

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "next phase: phase-2 Step 2");
    recover(&sandbox, &agent, &["phase-1", "phase-2"]);
}

/// Whatever a failed directory fsync leaves visible, the report and `status` describe it.
#[test]
fn a_failed_directory_fsync_before_launch_or_while_running_is_reported_as_the_state_shows() {
    for failpoint in ["state-prepare-dir-fsync", "state-running-dir-fsync"] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        set_mode(&sandbox, "phase-1", "hang");
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=return"), &[]);
        run.assert_code(4);
        sandbox.assert_no_survivors();
        assert!(
            report_lines(&run.stderr)[0].contains(&format!(
                "replaced, but not durably: injected failure at failpoint {failpoint}"
            )),
            "{}",
            run.stderr
        );
        assert_no_temp_files(&sandbox);
        let state = sandbox.state(PLAN);
        let status = sandbox.run(&["status", "--plan", PLAN]);
        status.assert_code(0);
        match state["active_attempt"].as_object() {
            Some(_) => {
                let attempt = &state["active_attempt"];
                assert_unresolved_report(&run.stderr, attempt);
                assert_status_shows_abandoned(&sandbox, attempt);
            }
            None => {
                assert!(!run.stderr.contains("unresolved attempt"), "{}", run.stderr);
                let stop = &state["stop"];
                assert_eq!(stop["reason"], "execution-io-failed", "{state:#}");
                assert_has_line(
                    &run.stderr,
                    &format!(
                        "outcome: {}",
                        state["last_run"]["outcome_path"].as_str().unwrap()
                    ),
                );
                assert_has_line(&status.stdout, "stopped: phase-1 (execution-io-failed)");
            }
        }
        if failpoint == "state-prepare-dir-fsync" {
            assert!(
                launches(&sandbox).is_empty(),
                "nothing launches after a failed prepare"
            );
        }
        recover(&sandbox, &agent, &["phase-1"]);
    }
}

#[test]
fn a_failed_transcript_header_is_recorded_and_nothing_launches() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let run = run_with_faults(&sandbox, &agent, "transcript-header-write=return", &[]);
    run.assert_code(4);
    assert!(launches(&sandbox).is_empty());
    let state = sandbox.state(PLAN);
    assert!(state["active_attempt"].is_null());
    assert_eq!(state["stop"]["reason"], "execution-io-failed");
    assert_eq!(
        state["committed_outcomes"][0]["status"],
        "execution-io-failed"
    );
    let last_run = &state["last_run"];
    let transcript = last_run["transcript_path"].as_str().unwrap();
    let report = report_lines(&run.stderr);
    assert!(
        report[0].starts_with("execution-io-failed: attempt execution IO failed: ")
            && report[0].ends_with("injected failure at failpoint transcript-header-write"),
        "{}",
        run.stderr
    );
    assert_eq!(
        report[1..3],
        [
            format!("outcome: {}", last_run["outcome_path"].as_str().unwrap()),
            format!("transcript: {transcript}"),
        ]
    );
    assert_eq!(
        format!(
            "execution-io-failed: {}",
            state["stop"]["message"].as_str().unwrap()
        ),
        report[0],
        "the stop message is the reported failure"
    );
    let outcome = read_json(Path::new(last_run["outcome_path"].as_str().unwrap()));
    assert_eq!(outcome["status"], "execution-io-failed");
    assert!(outcome["exit_code"].is_null());

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "stopped: phase-1 (execution-io-failed)");
    let plain = sandbox.run_plan(PLAN, &agent, &[]);
    plain.assert_code(5);
    assert_has_line(
        &plain.stderr,
        "error: phase phase-1 is stopped: execution-io-failed",
    );
    recover(&sandbox, &agent, &["phase-1"]);
}

#[test]
fn a_failed_prompt_write_is_recorded_and_nothing_launches() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let run = run_with_faults(&sandbox, &agent, "prompt-write=return", &[]);
    run.assert_code(4);
    assert!(launches(&sandbox).is_empty());
    let state = sandbox.state(PLAN);
    assert!(state["active_attempt"].is_null());
    assert_eq!(state["stop"]["reason"], "execution-io-failed");
    let first = &report_lines(&run.stderr)[0];
    assert!(
        first.starts_with("execution-io-failed: attempt execution IO failed: ")
            && first.ends_with("injected failure at failpoint prompt-write"),
        "{first}"
    );
    assert_has_line(
        &run.stderr,
        &format!(
            "outcome: {}",
            state["last_run"]["outcome_path"].as_str().unwrap()
        ),
    );
    assert!(sandbox.artifacts(PLAN, "prompts").is_empty());
    assert!(
        sandbox.artifacts(PLAN, "transcripts").is_empty(),
        "no transcript without a prompt"
    );

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(&status.stdout, "stopped: phase-1 (execution-io-failed)");
    recover(&sandbox, &agent, &["phase-1"]);
}

/// Phase 1 commits; phase 2's outcome or state write fails. Only phase 2's artifacts are
/// reported.
#[test]
fn a_failed_write_in_the_second_phase_reports_only_that_phase() {
    for failpoint in ["outcome-write", "state-commit-write"] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(2));
        let agent = control_agent(&sandbox);
        let run = run_with_faults(&sandbox, &agent, &format!("{failpoint}=1*off->return"), &[]);
        run.assert_code(4);
        assert_eq!(run.stdout, "", "{failpoint}");
        let state = sandbox.state(PLAN);
        let attempt = &state["active_attempt"];
        assert_eq!(attempt["phase"]["id"], "phase-2", "{failpoint}: {state:#}");
        assert_eq!(attempt["status"], "running");
        assert_eq!(state["completed_phase_ids"], serde_json::json!(["phase-1"]));
        assert_eq!(state["committed_outcomes"].as_array().unwrap().len(), 1);
        let phase_one = &state["last_run"];
        assert_eq!(phase_one["phase_id"], "phase-1");
        assert_eq!(phase_one["status"], "phase-complete");

        let expected = if failpoint == "outcome-write" {
            "execution-io-failed: could not write attempt outcome: "
        } else {
            "execution-io-failed: could not record attempt outcome: "
        };
        assert!(
            report_lines(&run.stderr)[0].starts_with(expected),
            "{}",
            run.stderr
        );
        assert_unresolved_report(&run.stderr, attempt);
        assert_has_line(&run.stderr, "diagnostics for phase-2");
        for path in [
            phase_one["run_id"].as_str().unwrap(),
            phase_one["transcript_path"].as_str().unwrap(),
            phase_one["outcome_path"].as_str().unwrap(),
        ] {
            assert!(
                !run.stderr.contains(path),
                "phase-1 artifact reported: {path}\n{}",
                run.stderr
            );
        }
        assert!(!run.stderr.contains("diagnostics for phase-1"));
        let planned = Path::new(attempt["outcome_path"].as_str().unwrap());
        assert_eq!(
            planned.exists(),
            failpoint == "state-commit-write",
            "{failpoint}"
        );

        assert_status_shows_abandoned(&sandbox, attempt);
        recover(&sandbox, &agent, &["phase-1", "phase-2"]);
    }
}

#[test]
fn a_failed_transcript_header_in_the_second_phase_reports_only_that_phase() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let run = run_with_faults(
        &sandbox,
        &agent,
        "transcript-header-write=1*off->return",
        &[],
    );
    run.assert_code(4);
    assert_eq!(launches(&sandbox), ["phase-1"]);
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["phase_id"], "phase-2");
    assert_eq!(state["last_run"]["phase_id"], "phase-2");
    let phase_one = &state["committed_outcomes"][0];
    assert_eq!(phase_one["phase_id"], "phase-1");
    assert!(
        !run.stderr
            .contains(phase_one["attempt_id"].as_str().unwrap()),
        "{}",
        run.stderr
    );
    assert_has_line(
        &run.stderr,
        &format!(
            "transcript: {}",
            state["last_run"]["transcript_path"].as_str().unwrap()
        ),
    );
    recover(&sandbox, &agent, &["phase-1", "phase-2"]);
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// `run --quiet` with `FAILPOINTS` set for the handler (live output would mix the agent's
/// stderr into the report). A handler that does not finish in time is killed and fails the
/// test, so a fault that never fires cannot hang it.
fn run_with_faults(sandbox: &Sandbox, agent: &Path, failpoints: &str, extra: &[&str]) -> Run {
    run_bounded(sandbox, agent, Some(failpoints), extra)
}

fn run_bounded(sandbox: &Sandbox, agent: &Path, failpoints: Option<&str>, extra: &[&str]) -> Run {
    let mut command = sandbox.quiet_run_command(PLAN, agent, extra);
    if let Some(failpoints) = failpoints {
        command.env("FAILPOINTS", failpoints);
    }
    let handler = command.spawn().expect("spawn handler");
    wait_for_exit(handler, PATIENCE)
}

/// With the agent completing every phase, `--retry-stopped` without faults finishes the plan.
#[track_caller]
fn recover(sandbox: &Sandbox, agent: &Path, phases: &[&str]) {
    for phase in phases {
        set_mode(sandbox, phase, "complete");
    }
    let retry = run_bounded(sandbox, agent, None, &["--retry-stopped"]);
    retry.assert_code(0);
    assert_eq!(retry.stdout, "runner-complete: all phases complete\n");
    let state = sandbox.state(PLAN);
    assert_eq!(state["completed_phase_ids"], serde_json::json!(phases));
    assert!(state["active_attempt"].is_null());
    assert!(state["stop"].is_null());
    assert!(state["current_phase"].is_null());
    sandbox.assert_no_survivors();
}

/// The report of an attempt whose outcome is not committed names it and its own artifacts.
#[track_caller]
fn assert_unresolved_report(stderr: &str, attempt: &Value) {
    for line in [
        format!(
            "unresolved attempt: {} ({}, attempt {})",
            attempt["phase"]["id"].as_str().unwrap(),
            attempt["status"].as_str().unwrap(),
            attempt["id"].as_str().unwrap()
        ),
        format!(
            "transcript: {}",
            attempt["transcript_path"].as_str().unwrap()
        ),
        format!(
            "planned outcome (uncommitted): {}",
            attempt["outcome_path"].as_str().unwrap()
        ),
    ] {
        assert_has_line(stderr, &line);
    }
    // The last line is the way on.
    let last = report_lines(stderr).pop().unwrap_or_default();
    assert!(
        last.starts_with("next: inspect the workspace, then ai-session-handler run --plan ")
            && last.ends_with(" --retry-stopped"),
        "{stderr}"
    );
}

#[track_caller]
fn assert_status_shows_abandoned(sandbox: &Sandbox, attempt: &Value) {
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!(
            "abandoned: {} ({}, attempt {})",
            attempt["phase"]["id"].as_str().unwrap(),
            attempt["status"].as_str().unwrap(),
            attempt["id"].as_str().unwrap()
        ),
    );
    assert_has_line(
        &status.stdout,
        &format!(
            "attempt outcome (uncommitted): {}",
            attempt["outcome_path"].as_str().unwrap()
        ),
    );
    let json = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    json.assert_code(0);
    let json: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["active_attempt"]["id"], attempt["id"]);
    assert_eq!(json["active_attempt"]["outcome_committed"], false);
}

/// A failed replacement removes its temp file: nothing but `state.json`, the artifact
/// directories and the event stream is left in the keyed directory.
#[track_caller]
fn assert_no_temp_files(sandbox: &Sandbox) {
    let Ok(entries) = fs::read_dir(sandbox.state_dir(PLAN)) else {
        return;
    };
    for entry in entries {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            [
                "state.json",
                "prompts",
                "transcripts",
                "outcomes",
                "events.jsonl"
            ]
            .contains(&name.as_str()),
            "unexpected file {name} in the keyed directory"
        );
    }
}

/// Stderr without log events (default `warn` tracing lines start with a timestamp).
fn report_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|line| !is_log_line(line))
        .map(str::to_owned)
        .collect()
}

fn is_log_line(line: &str) -> bool {
    let plain = strip_ansi(line);
    let bytes = plain.as_bytes();
    bytes.len() > 20
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && [" WARN ", " ERROR ", " INFO "]
            .iter()
            .any(|level| plain.contains(level))
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The handler's JSON log, one event per line, with the time of each.
fn log_events(log: &Path) -> Vec<(chrono::DateTime<chrono::FixedOffset>, Value)> {
    fs::read_to_string(log)
        .expect("log file")
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("a JSON log line");
            let at = chrono::DateTime::parse_from_rfc3339(event["timestamp"].as_str().unwrap())
                .expect("an RFC 3339 timestamp");
            (at, event)
        })
        .collect()
}

/// When the first event whose message is `message` (and whose fields include `field`) was
/// logged.
#[track_caller]
fn logged_at(
    events: &[(chrono::DateTime<chrono::FixedOffset>, Value)],
    message: &str,
    field: Option<(&str, &str)>,
) -> chrono::DateTime<chrono::FixedOffset> {
    events
        .iter()
        .find(|(_, event)| {
            event["fields"]["message"] == message
                && field.is_none_or(|(key, value)| event["fields"][key] == value)
        })
        .map(|(at, _)| *at)
        .unwrap_or_else(|| panic!("no {message:?} event with {field:?} in the log"))
}

fn json_log_args(log: &Path) -> [&str; 6] {
    [
        "--log-level",
        "info",
        "--log-format",
        "json",
        "--log-file",
        log.to_str().expect("utf-8 path"),
    ]
}

/// A state write that takes seconds (here the `running` record) does not delay a timeout:
/// the group gets SIGTERM right at the deadline, long before the write completes, and the
/// attempt is recorded as timed out once the write is durable.
#[test]
fn a_timeout_is_acted_on_while_a_state_write_is_held() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let log = sandbox.path("handler.log");
    let mut extra = vec!["--timeout", "1"];
    extra.extend(json_log_args(&log));
    let run = run_with_faults(&sandbox, &agent, "state-running-write=sleep(3000)", &extra);
    run.assert_code(4);
    sandbox.assert_no_survivors();
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "timeout", "{state:#}");
    assert_eq!(state["last_run"]["status"], "timeout");
    let events = log_events(&log);
    let deadline = logged_at(&events, "wall-clock deadline reached", None);
    let terminated = logged_at(
        &events,
        "signal sent to process group",
        Some(("signal", "SIGTERM")),
    );
    let running_durable = logged_at(&events, "state committed", Some(("write", "state-running")));
    // The write is held for 3 s; acting on the deadline promptly means well inside that
    // (the bound is generous for a loaded machine; typically it is under a millisecond).
    let lag = terminated - deadline;
    assert!(
        lag < chrono::Duration::milliseconds(1000),
        "SIGTERM {lag} after the deadline"
    );
    assert!(
        terminated < running_durable,
        "the group was stopped only after the held write: {terminated} vs {running_durable}"
    );
}

/// The run supervisor never waits on a durable write itself: while the acceptance of an edited,
/// already complete plan is held in its fsync for 2 s, a SIGTERM is taken at once (logged as
/// caught before the held write is committed, well inside the hold), and the run ends with
/// 143 once the write is done, instead of the signal queueing behind the write and being lost.
#[test]
fn a_signal_is_acted_on_while_the_run_waits_for_a_durable_write() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    run_bounded(&sandbox, &agent, None, &[]).assert_code(0);
    let mut plan = plan_with_phases(1);
    plan.push_str("\nAn edit after the phase completed.\n");
    sandbox.write(PLAN, plan);
    let log = sandbox.path("handler.log");
    let mut extra = vec!["--accept-plan-change"];
    extra.extend(json_log_args(&log));
    let mut command = sandbox.quiet_run_command(PLAN, &agent, &extra);
    command.env("FAILPOINTS", "state-accept-fsync=sleep(2000)");
    let handler = command.spawn().expect("spawn handler");
    let state_dir = sandbox.state_dir(PLAN);
    let write_in_flight = || {
        fs::read_dir(&state_dir).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.starts_with(".state.json.") && name.ends_with(".tmp")
            })
        })
    };
    assert!(
        wait_until(PATIENCE, write_in_flight),
        "the acceptance write never started"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(handler.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal the handler");
    let run = wait_for_exit(handler, PATIENCE);
    run.assert_code(143);
    assert_eq!(
        report_lines(&run.stderr).first().map(String::as_str),
        Some(
            "error: interrupted by SIGTERM after the last phase completed; every phase is complete and nothing was left to launch"
        ),
        "{}",
        run.stderr
    );
    let state = sandbox.state(PLAN);
    assert_eq!(
        state["completed_phase_ids"],
        json!(["phase-1"]),
        "{state:#}"
    );
    let events = log_events(&log);
    let received = logged_at(&events, "signal received", None);
    let caught = logged_at(&events, "signal caught", None);
    let accepted = logged_at(&events, "state committed", Some(("write", "state-accept")));
    assert!(
        caught < accepted,
        "the signal was taken only after the held write: {caught} vs {accepted}"
    );
    // Typically well under a millisecond; the bound is generous for a loaded machine and
    // still half the hold.
    let lag = caught - received;
    assert!(
        lag < chrono::Duration::milliseconds(1000),
        "the run supervisor took the signal {lag} after it arrived"
    );
}

/// A signal that arrives after the attempt's outcome was decided — here while its commit is
/// held by a failpoint — never rewrites it: the outcome is committed as decided (`timeout`,
/// with the retry the policy scheduled in the same write), nothing more is launched, and the
/// run exits 143 (docs/decisions.md, "State").
#[test]
fn a_signal_while_the_decided_outcome_is_committed_keeps_it_and_launches_nothing_more() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let mut command =
        sandbox.quiet_run_command(PLAN, &agent, &["--timeout", "1", "--retries", "1"]);
    command.env("FAILPOINTS", "state-commit-write=sleep(4000)");
    let handler = command.spawn().expect("spawn handler");
    // The outcome file is written after the decision and before the held commit.
    assert!(
        wait_until(PATIENCE, || !sandbox.artifacts(PLAN, "outcomes").is_empty()),
        "the outcome was never written"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(handler.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal the handler");
    let run = wait_for_exit(handler, PATIENCE);
    run.assert_code(143);
    sandbox.assert_no_survivors();

    let state = sandbox.state(PLAN);
    assert!(state["active_attempt"].is_null(), "{state:#}");
    assert_eq!(state["last_run"]["status"], "timeout", "{state:#}");
    assert_eq!(state["stop"]["reason"], "timeout", "{state:#}");
    assert_eq!(state["retry_schedule"]["attempt"], 2, "{state:#}");
    let outcome = read_json(&sandbox.artifacts(PLAN, "outcomes")[0]);
    assert_eq!(outcome["status"], "timeout");
    // No retry and no next phase.
    assert_eq!(launches(&sandbox), ["phase-1"]);
    assert_eq!(sandbox.artifacts(PLAN, "prompts").len(), 1);
    let report = report_lines(&run.stderr);
    assert_eq!(
        report.first().map(String::as_str),
        Some("timeout: agent command timed out after 1 seconds"),
        "{}",
        run.stderr
    );
    assert_eq!(
        report[report.len() - 2..],
        [
            "interrupted by SIGTERM after the attempt's outcome was decided; the outcome stands as recorded (timeout) and nothing more was launched; the retry stays scheduled in the state, and a later run with the same retry policy resumes it".to_owned(),
            // The same policy resumes the schedule: the same command, no recovery flag.
            format!(
                "next: ai-session-handler run --plan {PLAN} --agent-cmd {} --timeout 1 --retries 1 --quiet",
                agent.display()
            ),
        ],
        "{}",
        run.stderr
    );
    let status = sandbox.run(&["status", "--plan", PLAN]);
    assert_has_line(&status.stdout, "stopped: phase-1 (timeout)");
}

/// A transcript write that takes seconds does not delay a SIGTERM to the handler: the worker's
/// group is stopped at once and the attempt is recorded as interrupted.
#[test]
fn a_signal_is_acted_on_while_a_transcript_write_is_held() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let log = sandbox.path("handler.log");
    let mut command = sandbox.quiet_run_command(PLAN, &agent, &json_log_args(&log));
    command.env("FAILPOINTS", "transcript-write=1*sleep(3000)");
    let handler = command.spawn().expect("spawn handler");
    assert!(
        wait_until(PATIENCE, || sandbox.path("ctl/ready-phase-1").exists()),
        "the agent never started"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(handler.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal the handler");
    let run = wait_for_exit(handler, PATIENCE);
    run.assert_code(143);
    sandbox.assert_no_survivors();
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "interrupted", "{state:#}");
    let events = log_events(&log);
    let received = logged_at(&events, "signal received", None);
    let terminated = logged_at(
        &events,
        "signal sent to process group",
        Some(("signal", "SIGTERM")),
    );
    let lag = terminated - received;
    assert!(
        lag < chrono::Duration::milliseconds(1000),
        "SIGTERM reached the group {lag} after the handler got it"
    );
    let transcript = fs::read_to_string(&sandbox.artifacts(PLAN, "transcripts")[0]).unwrap();
    assert!(transcript.contains("working on phase-1\n"), "{transcript}");
}
