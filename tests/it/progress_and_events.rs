//! What a run shows while it goes and tells its callers (docs/cli.md): progress lines on
//! stderr, the live status line on a terminal, `run --json`, the event stream and `watch`, and
//! a nested caller using `run --json --quiet`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::*;

const PLAN: &str = "plan.md";

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["event"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn schema() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/run-result.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).expect("a valid schema")
}

/// Parses `run --json` output: exactly one object, valid against the published schema.
#[track_caller]
pub(crate) fn result_object(run: &Run) -> Value {
    let value: Value = serde_json::from_str(run.stdout.trim_end())
        .unwrap_or_else(|error| panic!("stdout is not one JSON object ({error}):\n{}", run.stdout));
    let errors: Vec<String> = schema()
        .iter_errors(&value)
        .map(|error| error.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{value:#}\nviolates the schema: {errors:?}"
    );
    assert_eq!(value["exit_code"], run.code);
    value
}

#[test]
fn without_quiet_each_phase_has_a_banner_before_its_output_and_an_end_line() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &[]);
    run.assert_code(0);
    let lines: Vec<&str> = run.raw_stderr.lines().collect();
    let at = |line: &str| {
        lines
            .iter()
            .position(|candidate| candidate.starts_with(line))
            .unwrap_or_else(|| panic!("no line starting {line:?} in:\n{}", run.raw_stderr))
    };
    assert!(at("phase-1 (1/2) Step 1 · attempt 1") < at("diagnostics for phase-1"));
    assert!(at("diagnostics for phase-1") < at("phase-1 complete in "));
    assert!(at("phase-1 complete in ") < at("phase-2 (2/2) Step 2 · attempt 1"));
    assert!(at("phase-2 (2/2) Step 2 · attempt 1") < at("diagnostics for phase-2"));
    let end = lines[at("phase-2 complete in ")];
    assert!(end.ends_with(" B output"), "{end}");
    // After several attempts, a summary table.
    assert!(at("phase-2 complete in ") < at("phase "));
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("phase-1  phase-complete"))
    );
    assert_eq!(
        run.stdout.lines().last(),
        Some("runner-complete: all phases complete")
    );
}

#[test]
fn quiet_without_a_terminal_prints_nothing_new() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(0);
    assert_eq!(run.raw_stderr, "");
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
}

#[test]
fn quiet_on_a_terminal_shows_a_live_status_line_and_clears_it() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nfor i in 1 2 3 4 5 6; do echo \"working step $i\"; sleep 0.25; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    // `script` gives the handler a pseudo-terminal as stdin, stdout and stderr.
    let command = format!(
        "{} run --plan {PLAN} --agent-cmd {} --quiet",
        BIN,
        agent.display()
    );
    let output = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen}");
    assert!(
        screen.contains("phase-1 (1/1) "),
        "no status line:\n{screen:?}"
    );
    assert!(
        screen.contains("working step"),
        "no last output line:\n{screen:?}"
    );
    // The line is erased before the final report, which is then the last thing on screen.
    let last_draw = screen.rfind("phase-1 (1/1) ").unwrap();
    let report = screen
        .rfind("runner-complete: all phases complete")
        .unwrap();
    let cleared = screen[last_draw..report].contains("\x1b[2K");
    assert!(
        cleared,
        "status line not cleared:\n{:?}",
        &screen[last_draw..]
    );
    sandbox.assert_no_survivors();
}

#[test]
fn run_json_prints_one_schema_valid_object_for_every_exit_code() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(3));
    let agent = control_agent(&sandbox);

    set_mode(&sandbox, "phase-2", "block");
    let blocked = sandbox.run_plan(PLAN, &agent, &["--json"]);
    blocked.assert_code(2);
    let object = result_object(&blocked);
    assert_eq!(object["result"], "blocked");
    assert_eq!(object["status"], "blocked");
    assert_eq!(object["phase"], json!({"id": "phase-2", "title": "Step 2"}));
    assert_eq!(object["text"], "need an API key");
    // A nested caller gets the reason as the message, the phase to continue and how.
    assert_eq!(object["message"], "phase-blocked: need an API key");
    assert_eq!(object["phases_completed"], json!(["phase-1"]));
    assert_eq!(
        object["next_phase"],
        json!({"id": "phase-2", "title": "Step 2"})
    );
    let agent_path = agent.to_str().unwrap();
    // The running binary by its absolute path, run from the invocation's directory; a
    // blocker can also be answered.
    let root = sandbox.root.to_str().unwrap();
    assert_eq!(
        object["next"],
        json!({
            "argv": [BIN, "run", "--plan", PLAN, "--agent-cmd", agent_path, "--json", "--retry-stopped"],
            "flags": ["--retry-stopped"],
            "why": "resolve the blocker",
            "action": "fix-and-retry",
            "answer": [BIN, "answer", "--plan", PLAN],
            "cwd": root,
        })
    );
    assert_eq!(object["plan_path"], sandbox.path(PLAN).to_str().unwrap());
    assert_eq!(
        object["state_path"],
        sandbox.state_path(PLAN).to_str().unwrap()
    );
    assert_eq!(object["attempts"], 2);
    assert!(Path::new(object["outcome_path"].as_str().unwrap()).is_file());
    assert!(Path::new(object["prompt_path"].as_str().unwrap()).is_file());
    // Live agent output went to stderr: stdout is only the object.
    assert!(
        blocked.stderr.contains("working on phase-1"),
        "{}",
        blocked.stderr
    );

    let refused = sandbox.run_plan(PLAN, &agent, &["--json"]);
    refused.assert_code(5);
    let object = result_object(&refused);
    assert_eq!(object["result"], "refused");
    assert_eq!(object["error"], "error: phase phase-2 is stopped: blocked");
    assert_eq!(object["message"], object["error"]);
    assert_eq!(object["next"]["flags"], json!(["--retry-stopped"]));
    assert_eq!(
        object["next_phase"],
        json!({"id": "phase-2", "title": "Step 2"})
    );

    set_mode(&sandbox, "phase-2", "clarify");
    let clarify = sandbox.run_plan(PLAN, &agent, &["--json", "--retry-stopped"]);
    clarify.assert_code(3);
    let object = result_object(&clarify);
    assert_eq!(object["result"], "needs-clarification");
    assert_eq!(object["text"], "which database?");
    assert_eq!(
        object["message"],
        "phase-needs-clarification: which database?"
    );
    assert_eq!(
        object["next"]["flags"],
        json!(["--retry-stopped", "--accept-plan-change"])
    );
    assert_eq!(
        object["next"]["why"],
        "answer in the plan or the repository"
    );

    set_mode(&sandbox, "phase-2", "fail");
    let failed = sandbox.run_plan(PLAN, &agent, &["--json", "--retry-stopped", "--quiet"]);
    failed.assert_code(4);
    let object = result_object(&failed);
    assert_eq!(object["result"], "failed");
    assert_eq!(object["status"], "agent-failed");
    assert_eq!(
        object["message"],
        "agent-failed: agent command exited with code 7"
    );
    assert!(object["error"].is_null());
    assert_eq!(
        object["next"]["argv"],
        json!([
            BIN,
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent_path,
            "--quiet",
            "--json",
            "--retry-stopped"
        ])
    );
    assert_eq!(
        object["next"]["why"],
        "inspect the transcript and fix the cause"
    );

    set_mode(&sandbox, "phase-2", "complete");
    let complete = sandbox.run_plan(PLAN, &agent, &["--json", "--retry-stopped"]);
    complete.assert_code(0);
    let object = result_object(&complete);
    assert_eq!(object["result"], "complete");
    assert_eq!(object["phases_completed"], json!(["phase-2", "phase-3"]));
    assert!(object["next_phase"].is_null());
    assert!(object["message"].is_null());
    assert!(object["next"].is_null());

    let invalid = sandbox.run(&[
        "run",
        "--plan",
        "missing.md",
        "--agent-cmd",
        "true",
        "--json",
    ]);
    invalid.assert_code(5);
    let object = result_object(&invalid);
    assert_eq!(object["result"], "invalid-input");
    assert!(
        object["error"]
            .as_str()
            .unwrap()
            .starts_with("error: --plan missing.md")
    );
    assert!(object["next"].is_null() && object["plan_path"].is_null());
}

#[test]
fn run_json_reports_an_interruption() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || sandbox
        .path("ctl/ready-phase-1")
        .exists()));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(130);
    let object = result_object(&run);
    assert_eq!(object["result"], "interrupted");
    assert_eq!(object["status"], "interrupted");
    sandbox.assert_no_survivors();
}

#[test]
fn the_event_stream_records_a_completed_attempt_in_order() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let args = [
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
    ];
    let handler = sandbox.spawn(&args);
    let handler_pid = handler.id();
    wait_for_exit(handler, PATIENCE).assert_code(0);
    let events = events_without_progress(&sandbox, PLAN);
    assert_eq!(
        kinds(&events),
        [
            "run-started",
            "attempt-prepared",
            "worker-spawned",
            "group-stopped",
            "outcome-committed",
            "run-finished"
        ]
    );
    let run_id = events[0]["run_id"].as_str().unwrap();
    let attempt_id = events[1]["attempt_id"].as_str().unwrap();
    let millis = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$").unwrap();
    for event in &events {
        assert_eq!(event["run_id"], run_id, "{event}");
        assert!(millis.is_match(event["at"].as_str().unwrap()), "{event}");
    }
    for event in &events[1..events.len() - 1] {
        assert_eq!(event["attempt_id"], attempt_id, "{event}");
    }
    // The handler's own pid, version and command line.
    assert_eq!(events[0]["pid"], handler_pid);
    assert_eq!(events[0]["version"], env!("CARGO_PKG_VERSION"));
    let mut argv = vec![BIN];
    argv.extend(args);
    assert_eq!(events[0]["args"], json!(argv));
    assert_eq!(events[0]["phases"], 1);
    assert_eq!(events[0]["completed"], 0);
    assert_eq!(
        events[0]["plan"],
        sandbox.path(PLAN).to_str().unwrap(),
        "the canonical plan path"
    );
    assert_eq!(events[2]["pid"], events[2]["pgid"]);
    let committed = &events[events.len() - 2];
    assert_eq!(committed["status"], "phase-complete");
    assert_eq!(committed["summary"], "done phase-1");
    assert_eq!(events.last().unwrap()["exit_code"], 0);
}

#[test]
fn the_event_stream_records_a_timeout_and_an_interruption() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--timeout", "1"])
        .assert_code(4);
    let timed_out = events_without_progress(&sandbox, PLAN);
    assert_eq!(
        kinds(&timed_out),
        [
            "run-started",
            "attempt-prepared",
            "worker-spawned",
            "stop-requested",
            "group-stopped",
            "outcome-committed",
            "run-finished"
        ]
    );
    assert_eq!(timed_out[3]["cause"], "timeout");
    assert_eq!(
        timed_out[3]["detail"],
        "agent command timed out after 1 seconds"
    );
    assert_eq!(timed_out[5]["status"], "timeout");

    let child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
        "--retry-stopped",
    ]);
    let launched = |count: usize| {
        wait_until(PATIENCE, || {
            fs::read_to_string(sandbox.path("ctl/launches"))
                .is_ok_and(|text| text.lines().count() >= count)
        })
    };
    assert!(launched(2));
    assert!(wait_until(PATIENCE, || {
        kinds(&events_without_progress(&sandbox, PLAN))
            .iter()
            .filter(|kind| *kind == "worker-spawned")
            .count()
            == 2
    }));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    wait_for_exit(child, PATIENCE).assert_code(143);
    let all = events_without_progress(&sandbox, PLAN);
    let interrupted = &all[timed_out.len()..];
    assert_eq!(
        kinds(interrupted),
        [
            "run-started",
            "attempt-prepared",
            "worker-spawned",
            "signal-received",
            "stop-requested",
            "group-stopped",
            "outcome-committed",
            "run-finished"
        ]
    );
    assert_eq!(interrupted[3]["signal"], "SIGTERM");
    assert!(interrupted[3]["attempt_id"].is_null());
    let stop = interrupted
        .iter()
        .find(|event| event["event"] == "stop-requested")
        .unwrap();
    assert_eq!(stop["cause"], "interrupted");
    assert_eq!(interrupted.last().unwrap()["exit_code"], 143);
    assert_ne!(interrupted[0]["run_id"], timed_out[0]["run_id"]);
}

#[test]
fn the_event_stream_records_a_retried_attempt() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nif [ -f tried ]; then echo '<phase-complete>second time</phase-complete>'; else touch tried; echo 'forgot the block'; fi\n",
    );
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"backoff_seconds": 0}}"#,
    );
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--retries", "1"])
        .assert_code(0);
    let events = events_without_progress(&sandbox, PLAN);
    assert_eq!(
        kinds(&events),
        [
            "run-started",
            "attempt-prepared",
            "worker-spawned",
            "group-stopped",
            "outcome-committed",
            "retry-scheduled",
            "retry-due",
            "attempt-prepared",
            "worker-spawned",
            "group-stopped",
            "outcome-committed",
            "run-finished"
        ]
    );
    let scheduled = &events[5];
    assert_eq!(scheduled["schedule"]["after"], "missing-marker");
    assert_eq!(scheduled["schedule"]["attempt"], 2);
    assert_eq!(scheduled["schedule"]["reason"], "backoff");
    assert_eq!(events[7]["attempt"], 2);
    assert_eq!(events[7]["of"], 2);
    assert_eq!(events[7]["phase_attempt"], 2);
    assert_ne!(events[1]["attempt_id"], events[7]["attempt_id"]);
}

#[test]
fn watch_follows_a_run_that_starts_after_it_and_exits_with_it() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nwhile [ ! -f GO ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    let watch = sandbox.spawn(&["watch", "--plan", PLAN]);
    let json_watch = sandbox.spawn(&["watch", "--plan", PLAN, "--json"]);
    let run = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || sandbox
        .state_dir(PLAN)
        .join("events.jsonl")
        .exists()));
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    watched.assert_code(0);
    let lines: Vec<&str> = watched.stdout.lines().collect();
    assert_eq!(lines[0], "waiting for a run of this plan to start");
    assert!(lines[1].starts_with("run started: "), "{}", watched.stdout);
    assert_has_line(&watched.stdout, "phase-1 (1/2) Step 1 · attempt 1");
    assert_has_line(&watched.stdout, "phase-2 (2/2) Step 2 · attempt 1");
    assert!(
        watched
            .stdout
            .lines()
            .any(|line| line.starts_with("phase-2 complete in ")),
        "{}",
        watched.stdout
    );
    assert_eq!(lines.last(), Some(&"run finished: exit 0"));

    let passed = wait_for_exit(json_watch, PATIENCE);
    passed.assert_code(0);
    let stream = fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl")).unwrap();
    assert_eq!(
        passed.stdout, stream,
        "--json passes the run's events through"
    );
}

#[test]
fn watch_picks_up_a_run_in_progress() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ntouch STARTED\nwhile [ ! -f GO ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    let run = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || {
        sandbox.path("STARTED").exists()
            && fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
                .is_ok_and(|stream| stream.contains("\"worker-spawned\""))
    }));
    let screen = sandbox.path("watch.out");
    let watch = sandbox
        .command()
        .args(["watch", "--plan", PLAN])
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The watcher has caught up once it shows the worker the run started before it.
    assert!(
        wait_until(PATIENCE, || fs::read_to_string(&screen)
            .is_ok_and(|text| text.contains("worker started: pid "))),
        "watch did not catch up with the run: {:?}",
        fs::read_to_string(&screen)
    );
    // The agent is silent, yet the watcher shows the attempt's status line again after a
    // few seconds, its elapsed time moving.
    assert!(
        wait_until(PATIENCE, || fs::read_to_string(&screen)
            .is_ok_and(|text| text.lines().any(|line| line
                .starts_with("phase-1 (1/1) ")
                && line.ends_with(" · 0 B")))),
        "watch showed no status line for the silent attempt: {:?}",
        fs::read_to_string(&screen)
    );
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    wait_for_exit(watch, PATIENCE).assert_code(0);
    let watched = fs::read_to_string(&screen).unwrap();
    assert!(watched.starts_with("run started: "), "{watched}");
    assert_has_line(&watched, "phase-1 (1/1) Step 1 · attempt 1");
    assert_eq!(watched.lines().last(), Some("run finished: exit 0"));
}

/// A nested caller: the outer phase's agent runs an inner plan with `run --json --quiet` and
/// reports what the inner run said.
#[test]
fn a_nested_caller_reads_the_inner_result_object() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    sandbox.write("inner/AGENTS.md", "# inner workspace\n");
    sandbox.write("inner/plan.md", plan_with_phases(1));
    let inner_agent = sandbox.script(
        "inner-agent",
        "cat >/dev/null\necho 'inner chatter'\necho '<phase-complete>inner work done</phase-complete>'\n",
    );
    let outer_agent = sandbox.script(
        "outer-agent",
        &format!(
            r#"cat >/dev/null
result=$("{BIN}" run --plan "{inner}/plan.md" --agent-cmd "{agent}" --json --quiet)
code=$?
text=$(printf '%s' "$result" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["result"], r["exit_code"], r["text"])')
echo "<phase-complete>inner run: $text (exit $code)</phase-complete>"
"#,
            inner = sandbox.path("inner").display(),
            agent = inner_agent.display()
        ),
    );
    let run = sandbox.run_plan(PLAN, &outer_agent, &["--quiet"]);
    run.assert_code(0);
    let state = sandbox.state(PLAN);
    assert_eq!(
        state["last_run"]["summary"],
        "inner run: complete 0 inner work done (exit 0)"
    );
    sandbox.assert_no_survivors();
}

/// The JSON log is structured: causes and verdicts are words, and every event inside a run
/// carries the run id (and inside an attempt, the attempt id) in its spans.
#[test]
fn the_json_log_has_structured_fields_and_the_run_and_attempt_ids() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let log = sandbox.path("handler.log");
    let run = sandbox.run_plan(
        PLAN,
        &agent,
        &[
            "--quiet",
            "--timeout",
            "1",
            "--log-level",
            "info",
            "--log-format",
            "json",
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    run.assert_code(4);
    let lines: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let stopping = lines
        .iter()
        .find(|line| line["fields"]["message"] == "stopping the attempt")
        .expect("a stopping event");
    assert_eq!(stopping["fields"]["cause"], "timeout");
    assert_eq!(
        stopping["fields"]["detail"],
        "agent command timed out after 1 seconds"
    );
    let verdict = lines
        .iter()
        .find(|line| line["fields"]["message"] == "marker verdict")
        .expect("a verdict event");
    assert_eq!(verdict["fields"]["verdict"], "missing");
    let run_id = events_without_progress(&sandbox, PLAN)[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let attempt_id = events_without_progress(&sandbox, PLAN)[1]["attempt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let span = |name: &str| {
        stopping["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|span| span["name"] == name)
            .unwrap_or_else(|| panic!("no {name} span in {stopping}"))
            .clone()
    };
    assert_eq!(span("run")["run_id"], run_id.as_str());
    assert_eq!(span("attempt")["attempt_id"], attempt_id.as_str());
    for line in &lines {
        let text = line.to_string();
        assert!(
            !text.contains("Timeout {") && !text.contains("Some("),
            "a Debug-formatted value in the log: {text}"
        );
    }
}

/// Every record of a run carries the run id, and every record of an attempt's actors — the
/// group killer's SIGTERM and SIGKILL, the deadline timer, the readers, the marker parser, the
/// lock release, the watchdog's start — the attempt id too, so a lifecycle race can be read
/// from the log alone (docs/cli.md, "Logging").
#[test]
fn every_record_of_an_attempts_actors_carries_the_run_and_attempt_ids() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ntrap '' TERM\necho started\nwhile :; do sleep 0.05; done\n",
    );
    let log = sandbox.path("handler.log");
    let run = sandbox.run_plan(
        PLAN,
        &agent,
        &[
            "--quiet",
            "--timeout",
            "1",
            "--log-level",
            "debug",
            "--log-format",
            "json",
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    run.assert_code(4);
    sandbox.assert_no_survivors();
    let lines: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let run_id = events_without_progress(&sandbox, PLAN)[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let attempt_id = events_without_progress(&sandbox, PLAN)[1]["attempt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let span_field = |line: &Value, span: &str, field: &str| -> Option<String> {
        line["spans"]
            .as_array()?
            .iter()
            .find(|candidate| candidate["name"] == span)?
            .get(field)?
            .as_str()
            .map(str::to_owned)
    };
    for line in &lines {
        let target = line["target"].as_str().unwrap_or_default();
        if !target.starts_with("ai_session_handler::actors")
            && line["fields"]["message"] != "watchdog started"
        {
            continue;
        }
        assert_eq!(
            span_field(line, "run", "run_id").as_deref(),
            Some(run_id.as_str()),
            "a record without the run id: {line}"
        );
        if target.starts_with("ai_session_handler::actors::attempt") {
            assert_eq!(
                span_field(line, "attempt", "attempt_id").as_deref(),
                Some(attempt_id.as_str()),
                "an attempt record without the attempt id: {line}"
            );
        }
    }
    let signalled: Vec<&Value> = lines
        .iter()
        .filter(|line| line["fields"]["message"] == "signal sent to process group")
        .collect();
    let signals: Vec<&str> = signalled
        .iter()
        .map(|line| line["fields"]["signal"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(signals, ["SIGTERM", "SIGKILL"], "{signalled:?}");
    for line in signalled {
        assert_eq!(
            span_field(line, "attempt", "attempt_id").as_deref(),
            Some(attempt_id.as_str()),
            "{line}"
        );
    }
    for message in [
        "watchdog started",
        "lock released",
        "deadline reached",
        "pipe EOF",
    ] {
        assert!(
            lines.iter().any(|line| line["fields"]["message"]
                .as_str()
                .is_some_and(|text| text.contains(message))),
            "no {message:?} record in the log"
        );
    }
}

/// The live status line recomputes its elapsed time on its own: an agent that prints nothing
/// still shows the time moving on (the line is not redrawn only when output arrives).
#[test]
fn the_status_line_elapsed_time_advances_while_the_agent_is_silent() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nwhile [ ! -f GO ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    let screen = sandbox.path("screen.out");
    let command = format!(
        "{} run --plan {PLAN} --agent-cmd {} --quiet",
        BIN,
        agent.display()
    );
    // `script` gives the handler a pseudo-terminal; what it draws is copied to the file.
    let mut terminal = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script");
    let elapsed = regex::Regex::new(r"phase-1 \(1/1\) (\d+\.\ds) · 0 B").unwrap();
    let seconds_shown = || -> std::collections::BTreeSet<String> {
        let bytes = fs::read(&screen).unwrap_or_default();
        elapsed
            .captures_iter(&String::from_utf8_lossy(&bytes))
            .map(|found| found[1].to_owned())
            .collect()
    };
    // Two different times past the first second, with no output at all in between.
    let advanced = wait_until(PATIENCE, || seconds_shown().len() >= 2);
    sandbox.write("GO", "");
    let exited = wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = terminal.kill();
    }
    let bytes = fs::read(&screen).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        advanced,
        "the elapsed time did not advance: {:?}\n{text:?}",
        seconds_shown()
    );
    assert!(exited, "the run did not end:\n{text:?}");
    assert!(terminal.wait().unwrap().success(), "{text:?}");
    let last_draw = text.rfind("phase-1 (1/1) ").unwrap();
    let report = text.rfind("runner-complete: all phases complete").unwrap();
    assert!(text[last_draw..report].contains("\x1b[2K"), "not cleared");
    sandbox.assert_no_survivors();
}

/// A caller of `run --json` gets its object for input errors that clap and the logging setup
/// find before the command starts, too (exit 5, `error` set, the text error on stderr).
#[test]
fn run_json_prints_the_object_for_usage_and_logging_errors() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let agent = agent.to_str().unwrap();
    let log_dir = sandbox.path("logs");
    fs::create_dir_all(&log_dir).unwrap();
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec![
                "run",
                "--json",
                "--plan",
                PLAN,
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
                PLAN,
                "--json",
                "--agent-cmd",
                agent,
                "--bogus",
            ],
            "--bogus",
        ),
        (vec!["run", "--json"], "--plan"),
        (
            vec![
                "--log-level",
                "inof",
                "run",
                "--plan",
                PLAN,
                "--agent-cmd",
                agent,
                "--json",
            ],
            "--log-level inof: unknown level 'inof'",
        ),
        (
            vec![
                "run",
                "--plan",
                PLAN,
                "--agent-cmd",
                agent,
                "--json",
                "--log-file",
                log_dir.to_str().unwrap(),
            ],
            "--log-file",
        ),
    ];
    for (args, names) in cases {
        let run = sandbox.run(&args);
        run.assert_code(5);
        let object = result_object(&run);
        assert_eq!(object["result"], "invalid-input", "{args:?}");
        let error = object["error"].as_str().unwrap();
        assert!(
            error.starts_with("error: ") && error.contains(names),
            "{args:?}: {error}"
        );
        assert_eq!(object["message"], error);
        // stderr keeps the text error, the same line.
        assert_eq!(run.stderr, format!("{error}\n"), "{args:?}");
    }
    // Without --json, stdout stays empty.
    let plain = sandbox.run(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent,
        "--max-phases",
        "0",
    ]);
    plain.assert_code(5);
    assert_eq!(plain.stdout, "");
    // `status --json` is not `run --json`: clap's error stays text only.
    let status = sandbox.run(&["status", "--json", "--bogus"]);
    status.assert_code(5);
    assert_eq!(status.stdout, "");
    assert!(!sandbox.state_dir(PLAN).exists(), "nothing was written");
}

/// `run --json`, the event stream and `watch --json` write a summary's DEL, C1 controls, escape
/// and bidirectional overrides as JSON escapes, and still decode to the exact text.
#[test]
fn json_output_escapes_terminal_controls_and_decodes_to_the_exact_text() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nwhile [ ! -f GO ]; do sleep 0.05; done\nprintf '<phase-complete>odd \\177 \\302\\233 \\342\\200\\256 \\033[31m red</phase-complete>\\n'\n",
    );
    let summary = "odd \u{7f} \u{9b} \u{202e} \u{1b}[31m red";
    let raw = ['\u{7f}', '\u{9b}', '\u{202e}', '\u{1b}'];
    let watched = sandbox.path("watch.out");
    let watch = sandbox
        .command()
        .args(["watch", "--plan", PLAN, "--json"])
        .stdout(fs::File::create(&watched).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || fs::read_to_string(&watched)
        .is_ok_and(|text| text.contains("\"worker-spawned\""))));
    sandbox.write("GO", "");
    let run = wait_for_exit(run, PATIENCE);
    run.assert_code(0);
    wait_for_exit(watch, PATIENCE).assert_code(0);

    assert!(!run.stdout.contains(raw), "raw controls: {:?}", run.stdout);
    let object = result_object(&run);
    assert_eq!(object["text"], summary);

    let stream = fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl")).unwrap();
    assert!(
        !stream.contains(raw),
        "raw controls in the stream: {stream:?}"
    );
    let passed = fs::read_to_string(&watched).unwrap();
    assert!(!passed.contains(raw), "raw controls from watch: {passed:?}");
    for text in [&stream, &passed] {
        let committed = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|event| event["event"] == "outcome-committed")
            .expect("an outcome-committed event");
        assert_eq!(committed["summary"], summary);
    }
}

/// An agent that writes for longer than the stream's progress interval gets output-progress
/// lines, and the last one carries the attempt's final figures (the throttle defers the last
/// update of a burst; it never drops it).
#[test]
fn the_event_stream_reports_the_output_of_a_long_writer() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ni=0\nwhile [ $i -lt 15 ]; do i=$((i + 1)); echo \"step $i\"; echo \"note $i\" >&2; sleep 0.2; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
    let all: Vec<Value> = fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let progress: Vec<&Value> = all
        .iter()
        .filter(|event| event["event"] == "output-progress")
        .collect();
    assert!(!progress.is_empty(), "no output-progress event: {all:#?}");
    let attempt_id = &all[1]["attempt_id"];
    for event in &progress {
        assert_eq!(&event["attempt_id"], attempt_id);
        assert!(event["stdout_bytes"].as_u64().is_some(), "{event}");
    }
    let committed = all
        .iter()
        .find(|event| event["event"] == "outcome-committed")
        .unwrap();
    let last = progress.last().unwrap();
    assert_eq!(last["stdout_bytes"], committed["stdout_bytes"], "{all:#?}");
    assert_eq!(last["stderr_bytes"], committed["stderr_bytes"], "{all:#?}");
    let position = |event: &Value| all.iter().position(|other| other == event).unwrap();
    assert!(position(last) < position(committed));
}

#[test]
fn run_json_reports_sigterm_a_phase_limit_an_unresolved_attempt_and_refusals() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let agent_path = agent.to_str().unwrap();

    // SIGTERM while the worker runs: 143.
    set_mode(&sandbox, "phase-1", "hang");
    let child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_path,
        "--json",
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || sandbox
        .path("ctl/ready-phase-1")
        .exists()));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(143);
    let object = result_object(&run);
    assert_eq!(object["result"], "interrupted");
    assert_eq!(object["status"], "interrupted");
    assert_eq!(
        object["message"],
        "interrupted: handler interrupted while the worker was active (SIGTERM)"
    );
    assert!(object["error"].is_null());
    assert_eq!(
        object["next_phase"],
        json!({"id": "phase-1", "title": "Step 1"})
    );
    assert_eq!(object["next"]["flags"], json!(["--retry-stopped"]));
    sandbox.assert_no_survivors();

    // The outcome cannot be written: the attempt stays unresolved (exit 4).
    set_mode(&sandbox, "phase-1", "complete");
    let run = Run::from_output(
        sandbox
            .quiet_run_command(PLAN, &agent, &["--json", "--retry-stopped"])
            .env("FAILPOINTS", "outcome-write=return")
            .output()
            .unwrap(),
    );
    run.assert_code(4);
    let object = result_object(&run);
    assert_eq!(object["result"], "unresolved");
    let active = sandbox.state(PLAN)["active_attempt"].clone();
    assert_eq!(object["attempt_id"], active["id"]);
    assert_eq!(object["phase"], json!({"id": "phase-1", "title": "Step 1"}));
    assert_eq!(object["transcript_path"], active["transcript_path"]);
    assert!(
        object["message"]
            .as_str()
            .unwrap()
            .starts_with("execution-io-failed: could not write attempt outcome: "),
        "{object:#}"
    );

    // The abandoned attempt is refused (exit 5) until --retry-stopped.
    let refused = sandbox.run_plan(PLAN, &agent, &["--json", "--quiet"]);
    refused.assert_code(5);
    let object = result_object(&refused);
    assert_eq!(object["result"], "refused");
    let error = object["error"].as_str().unwrap();
    assert!(
        error.starts_with("error: phase phase-1 has an abandoned running attempt"),
        "{error}"
    );
    assert_eq!(object["attempts"], 0);

    // A phase limit with a phase left: exit 0, the next phase named.
    let limited = sandbox.run_plan(
        PLAN,
        &agent,
        &["--json", "--quiet", "--retry-stopped", "--max-phases", "1"],
    );
    limited.assert_code(0);
    let object = result_object(&limited);
    assert_eq!(object["result"], "phase-limit");
    assert_eq!(object["status"], "phase-complete");
    assert_eq!(object["text"], "done phase-1");
    assert_eq!(object["phases_completed"], json!(["phase-1"]));
    assert_eq!(
        object["next_phase"],
        json!({"id": "phase-2", "title": "Step 2"})
    );
    assert!(object["message"].is_null() && object["error"].is_null());
    // The phase limit was the caller's: the same command runs the next phase.
    assert_eq!(
        object["next"],
        json!({
            "argv": [BIN, "run", "--plan", PLAN, "--agent-cmd", agent_path, "--max-phases", "1", "--quiet", "--json"],
            "flags": [],
            "why": null,
            "action": "continue",
            "cwd": sandbox.root.to_str().unwrap(),
        })
    );

    // The plan changed since it was accepted: refused (exit 5).
    let mut plan = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    plan.push_str("An edit.\n");
    sandbox.write(PLAN, plan);
    let changed = sandbox.run_plan(PLAN, &agent, &["--json", "--quiet"]);
    changed.assert_code(5);
    let object = result_object(&changed);
    assert_eq!(object["result"], "plan-changed");
    let error = object["error"].as_str().unwrap();
    assert!(error.starts_with("plan hash mismatch: "), "{error}");
    assert!(object["attempt_id"].is_null());
    assert_eq!(object["phases_completed"], json!([]));
}

/// Pid lists are JSON arrays in the JSON log, and the lines of an attempt carry the run and
/// attempt ids in their spans.
#[test]
fn the_json_log_writes_pid_lists_as_arrays() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let leak_pid = sandbox.path("leak.pid");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\nsleep 1000 &\necho $! > '{}'\nexit 0\n",
            leak_pid.display()
        ),
    );
    let log = sandbox.path("handler.log");
    sandbox
        .run_plan(
            PLAN,
            &agent,
            &[
                "--quiet",
                "--log-level",
                "debug",
                "--log-format",
                "json",
                "--log-file",
                log.to_str().unwrap(),
            ],
        )
        .assert_code(0);
    sandbox.assert_no_survivors();
    let pid: u64 = fs::read_to_string(&leak_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let lines: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    let events = events_without_progress(&sandbox, PLAN);
    let run_id = events[0]["run_id"].clone();
    let attempt_id = events[1]["attempt_id"].clone();
    let stopped = lines
        .iter()
        .find(|line| line["fields"]["message"] == "group stopped")
        .expect("a 'group stopped' line");
    assert_eq!(stopped["fields"]["leaked"], json!([pid]), "{stopped}");
    assert_eq!(stopped["fields"]["escaped"], json!([]), "{stopped}");
    assert_eq!(stopped["fields"]["survivors"], json!([]), "{stopped}");
    let outlived = lines
        .iter()
        .find(|line| line["fields"]["message"] == "descendants outlived the worker")
        .expect("a 'descendants outlived the worker' line");
    assert_eq!(outlived["fields"]["leaked"], json!([pid]), "{outlived}");
    for line in [stopped, outlived] {
        let spans = line["spans"].as_array().expect("a span list");
        let span = |name: &str| {
            spans
                .iter()
                .find(|span| span["name"] == name)
                .unwrap_or_else(|| panic!("no {name} span in {line}"))
        };
        assert_eq!(span("run")["run_id"], run_id);
        assert_eq!(span("attempt")["attempt_id"], attempt_id);
        assert_eq!(line["span"]["name"], "attempt");
        assert!(line["timestamp"].is_string() && line["target"].is_string());
    }
    // No list or struct survives as a string anywhere in the log.
    for line in &lines {
        for (key, value) in line["fields"].as_object().unwrap() {
            if key != "message"
                && let Some(text) = value.as_str()
            {
                assert!(
                    serde_json::from_str::<Vec<Value>>(text).is_err(),
                    "a list written as a string: {line}"
                );
                assert!(
                    !text.contains("ActorId") && !text.contains("Local("),
                    "{line}"
                );
            }
        }
    }
}

// ---- the console on a terminal ----

/// The pid of the sandbox's `run` handler (not its watchdog, not `script`).
#[cfg(feature = "failpoints")]
fn handler_under_terminal(sandbox: &Sandbox) -> Option<i32> {
    sandbox.survivors().into_iter().find_map(|pid| {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let words: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        (words.first() == Some(&BIN.as_bytes()) && words.get(1) == Some(&&b"run"[..]))
            .then_some(pid as i32)
    })
}

/// `command` under a pseudo-terminal (`script`), what it draws copied to `screen`.
fn under_terminal(
    sandbox: &Sandbox,
    command: &str,
    screen: &Path,
    env: &[(&str, &str)],
) -> std::process::Child {
    let mut terminal = Command::new("script");
    terminal
        .args(["-qefc", command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .stdout(fs::File::create(screen).unwrap())
        .stderr(Stdio::null());
    for (key, value) in env {
        terminal.env(key, value);
    }
    terminal.spawn().expect("run script")
}

fn screen_text(screen: &Path) -> String {
    String::from_utf8_lossy(&fs::read(screen).unwrap_or_default()).into_owned()
}

#[track_caller]
fn wait_terminal(mut terminal: std::process::Child, screen: &Path) -> (bool, String) {
    let exited = wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = terminal.kill();
    }
    let text = screen_text(screen);
    assert!(exited, "the run did not end:\n{text:?}");
    (terminal.wait().unwrap().success(), text)
}

/// A stopping signal clears the `--quiet` status line at once: it is not drawn again while the
/// stop is recorded (held here for 2 s), and the `interrupted:` report follows a cleared line.
#[cfg(feature = "failpoints")]
#[test]
fn a_signal_clears_the_quiet_status_line_before_the_report() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho working\ntouch STARTED\nexec sleep 600\n",
    );
    let screen = sandbox.path("screen.out");
    let command = format!(
        "{BIN} run --plan {PLAN} --agent-cmd {} --quiet",
        agent.display()
    );
    let terminal = under_terminal(
        &sandbox,
        &command,
        &screen,
        &[("FAILPOINTS", "state-commit-write=sleep(2000)")],
    );
    assert!(
        wait_until(PATIENCE, || sandbox.path("STARTED").exists()
            && screen_text(&screen).contains("phase-1 (1/1) ")),
        "no status line: {:?}",
        screen_text(&screen)
    );
    let handler = handler_under_terminal(&sandbox).expect("the handler's pid");
    let drawn_before = screen_text(&screen).len();
    kill(Pid::from_raw(handler), Signal::SIGTERM).unwrap();
    let (_, text) = wait_terminal(terminal, &screen);
    let report = text
        .find("interrupted: handler interrupted while the worker was active (SIGTERM)")
        .unwrap_or_else(|| panic!("no interrupted report:\n{text:?}"));
    // At most the one draw that was under way when the signal came; without the clear on
    // the signal the line is redrawn four times a second through the 2 s commit.
    let redraws = text[drawn_before..report].matches("phase-1 (1/1) ").count();
    assert!(
        redraws <= 1,
        "{redraws} draws after the signal:\n{:?}",
        &text[drawn_before..]
    );
    let last_draw = text[..report].rfind("phase-1 (1/1) ").unwrap();
    assert!(
        text[last_draw..report].contains("\x1b[2K"),
        "not cleared:\n{:?}",
        &text[last_draw..]
    );
    sandbox.assert_no_survivors();
}

/// Without `--quiet`, an agent that has been silent for a few seconds gets a sign of life on a
/// terminal (one rewritten line with the elapsed and silent times), erased before what follows.
#[test]
fn a_silent_agent_gets_a_sign_of_life_on_a_terminal() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\necho started\nwhile [ ! -f GO ]; do sleep 0.05; done\necho finished\necho '<phase-complete>done</phase-complete>'\n",
    );
    let screen = sandbox.path("screen.out");
    let command = format!("{BIN} run --plan {PLAN} --agent-cmd {}", agent.display());
    let terminal = under_terminal(&sandbox, &command, &screen, &[]);
    let sign = regex::Regex::new(r"phase-1 \(1/1\) \S+ · 8 B · no output for (\d+)\.0s").unwrap();
    let shown = wait_until(PATIENCE, || {
        sign.captures_iter(&screen_text(&screen))
            .filter_map(|found| found[1].parse::<u64>().ok())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            >= 2
    });
    sandbox.write("GO", "");
    let (success, text) = wait_terminal(terminal, &screen);
    assert!(shown, "no sign of life that moves on:\n{text:?}");
    assert!(success, "{text:?}");
    // Erased before the agent's next output, which starts its own line.
    let last_sign = text.rfind("no output for").unwrap();
    let finished = text.rfind("finished").unwrap();
    assert!(last_sign < finished);
    assert!(
        text[last_sign..finished].contains("\r\x1b[2K"),
        "{:?}",
        &text[last_sign..]
    );
    sandbox.assert_no_survivors();
}

/// Where stderr is not a terminal there is no sign of life: nothing extra in logs.
#[test]
fn a_silent_agent_gets_no_sign_of_life_in_a_pipe() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    // Silent for longer than the sign of life waits on a terminal.
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\nsleep 4\necho '<phase-complete>done</phase-complete>'\n",
    );
    let run = sandbox.run_plan(PLAN, &agent, &[]);
    run.assert_code(0);
    assert!(
        !run.raw_stderr.contains("no output for"),
        "{}",
        run.raw_stderr
    );
    assert!(!run.raw_stderr.contains('\x1b'), "{:?}", run.raw_stderr);
}

/// After a `--quiet` run on a terminal the per-phase end lines and the summary table stay on
/// screen: they are printed above the status line, which alone is cleared.
#[test]
fn quiet_on_a_terminal_keeps_the_per_phase_lines() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let screen = sandbox.path("screen.out");
    let command = format!(
        "{BIN} run --plan {PLAN} --agent-cmd {} --quiet",
        agent.display()
    );
    let (success, text) = wait_terminal(under_terminal(&sandbox, &command, &screen, &[]), &screen);
    assert!(success, "{text:?}");
    // They are printed as whole lines above the status line, so its clearing never touches
    // them.
    for line in [
        "phase-1 complete in ",
        "phase-2 complete in ",
        "phase    status",
        "phase-1  phase-complete",
        "phase-2  phase-complete",
    ] {
        assert!(text.contains(line), "{line:?} is not on screen:\n{text:?}");
    }
    let table = text.find("phase    status").unwrap();
    let report = text.rfind("runner-complete: all phases complete").unwrap();
    assert!(table < report);
}

/// `output-progress` lines in the event stream are 2 s apart (by their `at`), the last one of a
/// burst (written before the event that ends it) aside.
#[test]
fn output_progress_lines_are_two_seconds_apart() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\ni=0\nwhile [ $i -lt 7 ]; do echo \"step $i\"; i=$((i + 1)); sleep 1; done\necho '<phase-complete>done</phase-complete>'\n",
    );
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
    let all: Vec<Value> = fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let at = |event: &Value| {
        chrono::DateTime::parse_from_rfc3339(event["at"].as_str().unwrap()).unwrap()
    };
    let mut checked = 0;
    for window in all.windows(3) {
        let [first, second, after] = window else {
            unreachable!()
        };
        if [first, second, after]
            .iter()
            .all(|event| event["event"] == "output-progress")
        {
            let gap = at(second) - at(first);
            assert!(
                gap >= chrono::TimeDelta::seconds(2),
                "output-progress lines {gap} apart:\n{first}\n{second}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 1, "too few progress lines to compare: {all:#?}");
}

// ---- run --json on the remaining exit paths ----

/// SIGHUP and SIGQUIT (129, 131), a held lock, a plan edited during the run and a signal during
/// a retry wait: each ends with the one schema-valid object, the way on in `next`.
#[test]
fn run_json_is_schema_valid_on_the_remaining_exit_paths() {
    for (signal, code) in [(Signal::SIGHUP, 129), (Signal::SIGQUIT, 131)] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        set_mode(&sandbox, "phase-1", "hang");
        let child = sandbox.spawn(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--json",
            "--quiet",
        ]);
        assert!(wait_until(PATIENCE, || sandbox
            .path("ctl/ready-phase-1")
            .exists()));
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let run = wait_for_exit(child, PATIENCE);
        run.assert_code(code);
        let object = result_object(&run);
        assert_eq!(object["result"], "interrupted", "{signal}");
        assert_eq!(
            object["next"]["flags"],
            json!(["--retry-stopped"]),
            "{signal}"
        );
        sandbox.assert_no_survivors();
    }

    // Another run holds the plan workspace: refused, naming the holder.
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let holder = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || sandbox
        .path("ctl/ready-phase-1")
        .exists()));
    let refused = sandbox.run_plan(PLAN, &agent, &["--json"]);
    refused.assert_code(5);
    let object = result_object(&refused);
    assert_eq!(object["result"], "refused");
    assert!(
        object["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("(handler pid {})", holder.id())),
        "{object:#}"
    );
    assert_eq!(
        object["next"]["why"],
        format!("wait for handler pid {} to end", holder.id())
    );
    kill(Pid::from_raw(holder.id() as i32), Signal::SIGTERM).unwrap();
    wait_for_exit(holder, PATIENCE).assert_code(143);

    // The plan is edited while the run goes on: the run stops at the next checkpoint.
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let editor = sandbox.script(
        "editor",
        &format!(
            "cat >/dev/null\necho 'An edit.' >> '{}'\necho '<phase-complete>edited</phase-complete>'\n",
            sandbox.path(PLAN).display()
        ),
    );
    let changed = sandbox.run_plan(PLAN, &editor, &["--json", "--quiet"]);
    changed.assert_code(5);
    let object = result_object(&changed);
    assert_eq!(object["result"], "plan-changed");
    assert_eq!(object["phases_completed"], json!(["phase-1"]));
    assert_eq!(
        object["next_phase"],
        json!({"id": "phase-2", "title": "Step 2"})
    );
    assert_eq!(object["next"]["flags"], json!(["--accept-plan-change"]));

    // A signal during a retry wait: the same command with the same policy resumes it.
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"backoff_seconds": 600}}"#,
    );
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "fail");
    let agent_path = agent.to_str().unwrap();
    let waiting = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent_path,
        "--retries",
        "1",
        "--json",
        "--quiet",
    ]);
    assert!(wait_until(PATIENCE, || fs::read_to_string(
        sandbox.state_dir(PLAN).join("events.jsonl")
    )
    .is_ok_and(|stream| stream.contains("\"retry-scheduled\""))));
    kill(Pid::from_raw(waiting.id() as i32), Signal::SIGINT).unwrap();
    let run = wait_for_exit(waiting, PATIENCE);
    run.assert_code(130);
    let object = result_object(&run);
    assert_eq!(object["result"], "interrupted");
    // The same command resumes the schedule when it is due.
    let due = sandbox.state(PLAN)["retry_schedule"]["not_before"].clone();
    assert!(due.is_string(), "{due}");
    assert_eq!(
        object["next"],
        json!({
            "argv": [BIN, "run", "--plan", PLAN, "--agent-cmd", agent_path, "--retries", "1", "--quiet", "--json"],
            "flags": [],
            "why": null,
            "action": "wait-until",
            "until": due,
            "cwd": sandbox.root.to_str().unwrap(),
        })
    );
    sandbox.assert_no_survivors();
}

/// `run --json` when the prepared record cannot be written says so: nothing was launched and
/// nothing is unresolved (issue 23; it said `unresolved` with no attempt).
#[cfg(feature = "failpoints")]
#[test]
fn run_json_says_not_prepared_when_the_prepared_write_fails() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let run = Run::from_output(
        sandbox
            .quiet_run_command(PLAN, &agent, &["--json"])
            .env("FAILPOINTS", "state-prepare-write=return")
            .output()
            .unwrap(),
    );
    run.assert_code(4);
    let object = result_object(&run);
    assert_eq!(object["result"], "not-prepared");
    assert!(object["attempt_id"].is_null());
    assert!(
        object["message"]
            .as_str()
            .unwrap()
            .starts_with("execution-io-failed: could not prepare attempt state: "),
        "{object:#}"
    );
    assert!(sandbox.state_bytes(PLAN).is_none());
}

/// `run --json=yes` is a usage error, and its caller still gets the one object.
#[test]
fn run_json_with_a_value_still_prints_the_object() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let run = sandbox.run(&["run", "--json=yes", "--plan", PLAN]);
    run.assert_code(5);
    let object = result_object(&run);
    assert_eq!(object["result"], "invalid-input");
    assert!(
        object["error"].as_str().unwrap().contains("--json"),
        "{object:#}"
    );
}
