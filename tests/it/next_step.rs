//! The next step everywhere (docs/cli.md, "The `next:` line"): as data with an action kind in
//! `run --json`, `status` and the hooks; runnable from anywhere (the binary's absolute path and
//! the directory it is run from); refusals told apart by a field; and a stop that says only
//! what helps, `next:` last.

use std::os::unix::fs::symlink;
use std::path::Path;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::common::*;
use crate::progress_and_events::result_object;

const PLAN: &str = "plan.md";

fn asking_agent(sandbox: &Sandbox) -> std::path::PathBuf {
    agent(
        sandbox,
        "echo '<phase-needs-clarification>Which API version?</phase-needs-clarification>'\n",
    )
}

/// A question: `run --json`, `status --json` and `status` all name the `answer` step, with the
/// stopped run's own options, and the question.
#[test]
fn a_question_is_an_answer_step_in_run_json_and_status() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = asking_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet", "--json"]);
    run.assert_code(3);
    let object = result_object(&run);
    let next = &object["next"];
    assert_eq!(next["action"], "answer", "{next:#}");
    assert_eq!(next["answer"], json!([BIN, "answer", "--plan", PLAN]));
    assert_eq!(next["cwd"], sandbox.root.to_str().unwrap());
    assert_eq!(
        next["flags"],
        json!(["--retry-stopped", "--accept-plan-change"])
    );
    assert_eq!(next["argv"][0], BIN);

    let status = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    status.assert_code(0);
    let report: Value = serde_json::from_str(&status.stdout).unwrap();
    let plan = sandbox.path(PLAN).display().to_string();
    assert_eq!(
        report["stop"]["clarification_request"],
        "Which API version?"
    );
    assert_eq!(report["next"]["action"], "answer", "{report:#}");
    assert_eq!(
        report["next"]["answer"],
        json!([BIN, "answer", "--plan", plan])
    );
    // The stopped run's own options (from its `run-started` event), the plan absolute.
    assert_eq!(
        report["next"]["argv"],
        json!([
            BIN,
            "run",
            "--plan",
            plan,
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--quiet",
            "--json",
            "--retry-stopped",
            "--accept-plan-change"
        ])
    );

    let text = sandbox.run(&["status", "--plan", PLAN]);
    text.assert_code(0);
    assert_has_line(&text.stdout, "clarification: Which API version?");
    assert_eq!(
        text.stdout.lines().last(),
        Some(format!("next: ai-session-handler answer --plan {plan} TEXT --run").as_str()),
        "{}",
        text.stdout
    );

    // Answered: the step runs the phase again; nothing is stopped any more once it completes.
    sandbox
        .run(&["answer", "--plan", PLAN, "version 2"])
        .assert_code(0);
    let done = agent_completing(&sandbox);
    let continued = sandbox.run_plan(
        PLAN,
        &done,
        &[
            "--quiet",
            "--json",
            "--retry-stopped",
            "--accept-plan-change",
        ],
    );
    continued.assert_code(0);
    assert!(result_object(&continued)["next"].is_null());
    let status = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    let report: Value = serde_json::from_str(&status.stdout).unwrap();
    assert!(report["next"].is_null(), "{report:#}");
}

fn agent_completing(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox.script("done", "echo '<phase-complete>done</phase-complete>'\n")
}

/// Invoked through a relative path, `next.argv[0]` is that path made absolute (a symbolic
/// link kept, not resolved): the same binary a caller runs from anywhere.
#[test]
fn the_program_is_the_running_binary_as_invoked() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    symlink(BIN, sandbox.path("ash")).unwrap();
    let agent = asking_agent(&sandbox);
    let output = sandbox
        .command_for("./ash")
        .args(["run", "--plan", PLAN, "--json", "--agent-cmd"])
        .arg(&agent)
        .output()
        .unwrap();
    let run = Run::from_output(output);
    run.assert_code(3);
    let object = result_object(&run);
    let program = sandbox.path("ash").display().to_string();
    assert_eq!(object["next"]["argv"][0], program.as_str());
    assert_eq!(object["next"]["answer"][0], program.as_str());
}

/// `refused` says why by a field: another handler holds the plan (wait) or a stopped phase
/// needs a decision.
#[test]
fn a_refusal_says_by_a_field_whether_to_wait_or_decide() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let holder = agent(
        &sandbox,
        &format!(
            "touch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.05; done\necho '<phase-blocked>need a key</phase-blocked>'\n",
            at(&sandbox, "READY"),
            at(&sandbox, "GO")
        ),
    );
    let first = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--quiet",
        "--agent-cmd",
        holder.to_str().unwrap(),
    ]);
    wait_running(&sandbox, PLAN, "READY");
    let held = sandbox.run_plan(PLAN, &holder, &["--quiet", "--json"]);
    held.assert_code(5);
    let object = result_object(&held);
    assert_eq!(object["result"], "refused");
    assert_eq!(object["refusal"], "lock-held");
    assert_eq!(object["next"]["action"], "wait-for-handler");

    sandbox.write("GO", "");
    wait_for_exit(first, PATIENCE).assert_code(2);
    let stopped = sandbox.run_plan(PLAN, &holder, &["--quiet", "--json"]);
    stopped.assert_code(5);
    let object = result_object(&stopped);
    assert_eq!(object["result"], "refused");
    assert_eq!(object["refusal"], "phase-stopped");
    assert_eq!(object["next"]["action"], "fix-and-retry");
    assert_eq!(object["next"]["flags"], json!(["--retry-stopped"]));
    sandbox.assert_no_survivors();
}

/// After a SIGKILLed handler whose watchdog stopped the worker, the refusal says when and
/// which group, and does not ask to make sure no worker runs.
#[test]
fn an_abandoned_attempt_stopped_by_the_watchdog_is_refused_with_what_it_did() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let sleeper = agent(
        &sandbox,
        &format!(
            "touch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    let mut handler = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--quiet",
        "--agent-cmd",
        sleeper.to_str().unwrap(),
    ]);
    wait_running(&sandbox, PLAN, "READY");
    let group = sandbox.state(PLAN)["active_attempt"]["process"]["process_group_id"].clone();
    handler.kill().unwrap();
    handler.wait().unwrap();
    assert!(
        wait_until(PATIENCE, || event_stream(&sandbox, PLAN)
            .iter()
            .any(|event| event["event"] == "watchdog-stopped")),
        "the watchdog recorded nothing"
    );
    sandbox.assert_no_survivors();

    let refused = sandbox.run_plan(PLAN, &sleeper, &["--quiet"]);
    refused.assert_code(5);
    let first = refused.stderr.lines().next().unwrap();
    assert!(
        first.contains(&format!("its watchdog stopped process group {group}"))
            && first.contains(&format!("its handler (pid {})", handler.id())),
        "{}",
        refused.stderr
    );
    let last = refused.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("next: inspect its partial changes, then ai-session-handler run "),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("make sure no worker"));

    let json = sandbox.run_plan(PLAN, &sleeper, &["--quiet", "--json"]);
    let object = result_object(&json);
    assert_eq!(object["refusal"], "attempt-abandoned");
    assert_eq!(object["next"]["action"], "retry");
}

/// Ctrl-C: the outcome, the paths and `next:`; no transcript tail, no signal number. A hook
/// that fails at the run's end warns before `next:`, which stays the last line.
#[test]
fn an_interrupt_prints_the_outcome_the_paths_and_next_last() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = agent(
        &sandbox,
        &format!(
            "echo 'some work'\ntouch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    let handler = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--quiet",
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--hook",
        "run-finished=false",
    ]);
    wait_running(&sandbox, PLAN, "READY");
    send_signal(&handler, Signal::SIGINT);
    let run = wait_for_exit(handler, PATIENCE);
    run.assert_code(130);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(lines[0].starts_with("interrupted: "), "{}", run.stderr);
    assert!(lines.iter().any(|line| line.starts_with("outcome: ")));
    assert!(lines.iter().any(|line| line.starts_with("transcript: ")));
    assert!(!run.stderr.contains("transcript tail"), "{}", run.stderr);
    assert!(!run.stderr.contains("some work"), "{}", run.stderr);
    assert!(!run.stderr.contains("signal: 2"), "{}", run.stderr);
    assert!(
        lines.iter().any(|line| line.starts_with("warning: hook ")),
        "{}",
        run.stderr
    );
    assert!(
        lines
            .last()
            .is_some_and(|line| line.starts_with("next: inspect the partial changes, then ")),
        "{}",
        run.stderr
    );
    // The transcript names the signal too.
    let transcript = sandbox.artifacts(PLAN, "transcripts");
    let text = std::fs::read_to_string(&transcript[0]).unwrap();
    assert!(
        !text.contains("\nsignal: 2\n") && !text.contains("\nsignal: 15\n"),
        "{text}"
    );
    sandbox.assert_no_survivors();
}

/// A hook is told the next step as data: `AISH_NEXT_*` and the payload's `next`, the same step
/// as `recovery`.
#[test]
fn a_hook_gets_the_next_step_as_data() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = asking_agent(&sandbox);
    let hook = sandbox.script(
        "hook",
        &format!(
            "env | grep '^AISH_NEXT' | sort > '{}'\ncat > '{}'\n",
            at(&sandbox, "env"),
            at(&sandbox, "payload")
        ),
    );
    let hook_flag = format!("phase-stopped={}", hook.display());
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--hook", &hook_flag])
        .assert_code(3);
    let env = std::fs::read_to_string(sandbox.path("env")).unwrap();
    let payload: Value =
        serde_json::from_str(&std::fs::read_to_string(sandbox.path("payload")).unwrap()).unwrap();
    assert_has_line(&env, "AISH_NEXT_ACTION=answer");
    assert_has_line(
        &env,
        &format!("AISH_NEXT_ANSWER={BIN} answer --plan {PLAN}"),
    );
    assert_has_line(
        &env,
        &format!(
            "AISH_NEXT_COMMAND={}",
            payload["recovery"].as_str().unwrap()
        ),
    );
    assert_eq!(payload["next"]["action"], "answer");
    assert_eq!(payload["next"]["argv"][0], BIN);
    let recovery = payload["recovery"].as_str().unwrap();
    assert!(
        recovery.starts_with(&format!(
            "cd {} && {BIN} run --plan {PLAN} ",
            sandbox.root.display()
        )) && recovery.ends_with(" --retry-stopped --accept-plan-change"),
        "{recovery}"
    );
    assert!(Path::new(BIN).is_absolute());
}

/// Without `--quiet`, the summary table of a run of several attempts is left out after an
/// interrupt too: the outcome, the paths and `next:` are what helps.
#[test]
fn an_interrupt_after_several_attempts_prints_no_summary_table() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-2", "hang");
    let handler = sandbox.spawn_plan(PLAN, &agent, &[]);
    wait_running(&sandbox, PLAN, "ctl/ready-phase-2");
    send_signal(&handler, Signal::SIGTERM);
    let run = wait_for_exit(handler, PATIENCE);
    run.assert_code(143);
    assert!(
        !run.raw_stderr
            .lines()
            .any(|line| line.starts_with("phase ") && line.contains("duration")),
        "{}",
        run.raw_stderr
    );
    assert_has_line(
        &run.stderr,
        "interrupted: handler interrupted while the worker was active (SIGTERM)",
    );
    assert!(
        run.stderr
            .lines()
            .last()
            .is_some_and(|line| line.starts_with("next: ")),
        "{}",
        run.stderr
    );
    sandbox.assert_no_survivors();
}
