//! Hooks (docs/cli.md, "Notifications"): every event fires with the documented stdin, event
//! file, environment and template values; a hook never changes a run's outcome, state or exit
//! code, never writes to the handler's stdout, and never outlives its time limit or the
//! handler; `check` lists and validates hooks.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::*;

const PLAN: &str = "plan.md";

/// One firing as the recording hook saw it.
#[derive(Debug)]
struct Firing {
    argv: Vec<String>,
    stdin: Value,
    /// The `{event_file}` contents.
    file: Value,
    /// Its path and mode, while the hook ran.
    file_path: PathBuf,
    file_mode: String,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
}

impl Firing {
    fn event(&self) -> &str {
        self.stdin["event"].as_str().unwrap_or_default()
    }
}

/// A hook that records each firing under `fired/<n>/` (hooks run one at a time): its argv
/// (the template passes `{event_file} {plan} {run_id} {phase_id} {status}`), stdin, a copy
/// and the mode of the event file, its `AISH_*` environment and working directory.
fn recording_hook(sandbox: &Sandbox) -> String {
    let out = sandbox.path("fired");
    fs::create_dir_all(&out).unwrap();
    let out = out.display();
    let script = sandbox.script(
        "record-hook",
        &format!(
            r#"n=$(( $(cat "{out}/count" 2>/dev/null || echo 0) + 1 ))
echo $n > "{out}/count"
d="{out}/$n"
mkdir -p "$d"
for arg in "$@"; do printf '%s\n' "$arg"; done > "$d/argv"
cat > "$d/stdin"
cp "$1" "$d/file"
stat -c %a "$1" > "$d/mode"
env | grep '^AISH_' | sort > "$d/env"
pwd > "$d/cwd"
"#
        ),
    );
    format!(
        "{} {{event_file}} {{plan}} {{run_id}} {{phase_id}} {{status}}",
        script.display()
    )
}

fn firings(sandbox: &Sandbox) -> Vec<Firing> {
    let count: usize = fs::read_to_string(sandbox.path("fired/count"))
        .map(|text| text.trim().parse().unwrap())
        .unwrap_or(0);
    (1..=count)
        .map(|n| {
            let dir = sandbox.path(&format!("fired/{n}"));
            let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap();
            let argv: Vec<String> = read("argv").lines().map(str::to_owned).collect();
            Firing {
                file_path: PathBuf::from(&argv[0]),
                argv,
                stdin: serde_json::from_str(&read("stdin")).unwrap(),
                file: serde_json::from_str(&read("file")).unwrap(),
                file_mode: read("mode").trim().to_owned(),
                env: read("env")
                    .lines()
                    .filter_map(|line| line.split_once('='))
                    .map(|(name, value)| (name.to_owned(), value.to_owned()))
                    .collect(),
                cwd: PathBuf::from(read("cwd").trim()),
            }
        })
        .collect()
}

fn config(sandbox: &Sandbox, config: Value) {
    sandbox.write(
        ".ai-session-handler/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
}

fn every_event() -> Value {
    json!([
        "run-finished",
        "phase-stopped",
        "phase-complete",
        "wait-started",
        "wait-finished",
        "interrupted"
    ])
}

/// A sandbox with a two-phase plan, the control agent, and the recording hook on every event.
fn recorded_sandbox() -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    let hook = recording_hook(&sandbox);
    config(
        &sandbox,
        json!({"hooks": [{"on": every_event(), "command": hook}]}),
    );
    (sandbox, agent)
}

fn events_of(sandbox: &Sandbox) -> Vec<Value> {
    fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn hook_failures(sandbox: &Sandbox) -> Vec<Value> {
    events_of(sandbox)
        .into_iter()
        .filter(|event| event["event"] == "hook-failed")
        .collect()
}

/// The checks every firing passes: stdin and the event file hold the same object, the file was
/// private and is gone, the environment and the template values match the object, and the
/// hook ran in the plan workspace.
#[track_caller]
fn assert_well_formed(sandbox: &Sandbox, firing: &Firing) {
    assert_eq!(firing.stdin, firing.file, "stdin and {{event_file}} differ");
    assert_eq!(firing.file_mode, "600", "the event file is private");
    assert!(
        !firing.file_path.exists(),
        "the event file is removed afterwards"
    );
    assert_eq!(firing.cwd, sandbox.root);
    let object = &firing.stdin;
    let plan = sandbox.path(PLAN).display().to_string();
    assert_eq!(object["plan_path"], plan.as_str());
    assert_eq!(
        object["state_path"],
        sandbox.state_path(PLAN).display().to_string()
    );
    for key in [
        "at",
        "run_id",
        "attempt_id",
        "event",
        "phase",
        "status",
        "exit_code",
        "message",
        "question",
        "reason",
        "recovery",
        "next",
    ] {
        assert!(object.get(key).is_some(), "missing key {key}: {object:#}");
    }
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let phase_id = text(&object["phase"]["id"]);
    let exit_code = object["exit_code"]
        .as_i64()
        .map(|code| code.to_string())
        .unwrap_or_default();
    // The phases of these plans all run in the plan workspace.
    let workspace = if phase_id.is_empty() {
        String::new()
    } else {
        sandbox.root.display().to_string()
    };
    let expected_env: BTreeMap<String, String> = [
        ("AISH_EVENT", text(&object["event"])),
        ("AISH_EXIT_CODE", exit_code),
        ("AISH_PHASE_ID", phase_id.clone()),
        ("AISH_PLAN", plan.clone()),
        ("AISH_STATUS", text(&object["status"])),
        ("AISH_PHASE_TITLE", text(&object["phase"]["title"])),
        ("AISH_PLAN_WORKSPACE", sandbox.root.display().to_string()),
        ("AISH_STATE_FILE", text(&object["state_path"])),
        ("AISH_RUN_ID", text(&object["run_id"])),
        ("AISH_ATTEMPT_ID", text(&object["attempt_id"])),
        ("AISH_WORKSPACE", workspace),
        ("AISH_NEXT_ACTION", text(&object["next"]["action"])),
        ("AISH_NEXT_COMMAND", text(&object["recovery"])),
        ("AISH_NEXT_WHY", text(&object["next"]["why"])),
        ("AISH_NEXT_UNTIL", text(&object["next"]["until"])),
        (
            "AISH_NEXT_ANSWER",
            object["next"]["answer"]
                .as_array()
                .map(|words| words.iter().map(&text).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
        ),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    assert_eq!(firing.env, expected_env);
    // `recovery` is `next` as one command line: from its directory, the same argv.
    if let Some(next) = object["next"].as_object() {
        let recovery = text(&object["recovery"]);
        let argv: Vec<String> = next["argv"].as_array().unwrap().iter().map(text).collect();
        assert!(
            Path::new(&argv[0]).is_absolute() && argv[0] == BIN,
            "argv[0] is the running binary: {next:?}"
        );
        assert!(
            recovery.starts_with(&format!("cd {} && {} ", text(&next["cwd"]), argv[0])),
            "{recovery}"
        );
    } else {
        assert_eq!(object["recovery"], Value::Null);
    }
    assert_eq!(
        firing.argv[1..],
        [
            plan,
            text(&object["run_id"]),
            phase_id,
            text(&object["status"])
        ]
    );
}

#[test]
fn a_run_that_completes_a_phase_then_blocks_fires_complete_stopped_and_finished() {
    let (sandbox, agent) = recorded_sandbox();
    set_mode(&sandbox, "phase-2", "block");
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(2);
    assert_eq!(run.stdout, "phase-blocked: need an API key\n");
    sandbox.assert_no_survivors();
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired.iter().map(Firing::event).collect();
    assert_eq!(events, ["phase-complete", "phase-stopped", "run-finished"]);
    for firing in &fired {
        assert_well_formed(&sandbox, firing);
    }
    let state = sandbox.state(PLAN);
    let outcomes = state["committed_outcomes"].as_array().unwrap();

    let complete = &fired[0].stdin;
    assert_eq!(
        complete["phase"],
        json!({"id": "phase-1", "title": "Step 1"})
    );
    assert_eq!(complete["status"], "phase-complete");
    assert_eq!(complete["message"], "done phase-1");
    assert_eq!(complete["exit_code"], Value::Null);
    assert_eq!(complete["recovery"], Value::Null);
    // The matching events.jsonl record's own keys.
    assert_eq!(complete["attempt_id"], outcomes[0]["attempt_id"]);
    assert_eq!(complete["outcome_path"], outcomes[0]["path"]);
    assert_eq!(complete["summary"], "done phase-1");

    let stopped = &fired[1].stdin;
    assert_eq!(
        stopped["phase"],
        json!({"id": "phase-2", "title": "Step 2"})
    );
    assert_eq!(stopped["status"], "blocked");
    assert_eq!(stopped["exit_code"], 2);
    assert_eq!(stopped["reason"], "need an API key");
    assert_eq!(stopped["question"], Value::Null);
    assert_eq!(stopped["message"], "phase-blocked: need an API key");
    assert_eq!(stopped["attempt_id"], outcomes[1]["attempt_id"]);

    let finished = &fired[2].stdin;
    assert_eq!(finished["exit_code"], 2);
    assert_eq!(finished["status"], "blocked");
    assert_eq!(finished["recovery"], stopped["recovery"]);
    assert!(hook_failures(&sandbox).is_empty());

    // The recovery command is the invocation again, from its directory, with --retry-stopped:
    // it works as it is once the cause is fixed.
    let recovery = stopped["recovery"].as_str().unwrap().to_owned();
    assert!(recovery.starts_with(&format!("cd {} && ", sandbox.root.display())));
    assert!(recovery.ends_with(" --retry-stopped"), "{recovery}");
    set_mode(&sandbox, "phase-2", "complete");
    // It names the running binary by its absolute path: it runs whatever PATH is.
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let continued = std::process::Command::new("/bin/sh")
        .args(["-c", &recovery])
        .env("PATH", path)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(continued.status.code(), Some(0), "{continued:?}");
    assert_eq!(
        sandbox.state(PLAN)["completed_phase_ids"],
        json!(["phase-1", "phase-2"])
    );
}

#[test]
fn a_clarification_stop_carries_the_question_and_the_plan_change_to_accept() {
    let (sandbox, agent) = recorded_sandbox();
    set_mode(&sandbox, "phase-1", "clarify");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--max-phases", "1"])
        .assert_code(3);
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired.iter().map(Firing::event).collect();
    assert_eq!(events, ["phase-stopped", "run-finished"]);
    let stopped = &fired[0].stdin;
    assert_well_formed(&sandbox, &fired[0]);
    assert_eq!(stopped["status"], "needs-clarification");
    assert_eq!(stopped["question"], "which database?");
    assert_eq!(stopped["reason"], Value::Null);
    assert_eq!(stopped["exit_code"], 3);
    assert!(
        stopped["recovery"]
            .as_str()
            .unwrap()
            .ends_with(" --max-phases 1 --quiet --retry-stopped --accept-plan-change"),
        "{stopped:#}"
    );
}

#[test]
fn a_failure_is_phase_stopped_with_its_status_and_a_completed_run_fires_only_run_finished() {
    let (sandbox, agent) = recorded_sandbox();
    set_mode(&sandbox, "phase-1", "fail");
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(4);
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired.iter().map(Firing::event).collect();
    assert_eq!(events, ["phase-stopped", "run-finished"]);
    assert_eq!(fired[0].stdin["status"], "agent-failed");
    assert_eq!(
        fired[0].stdin["message"],
        "agent-failed: agent command exited with code 7"
    );

    set_mode(&sandbox, "phase-1", "complete");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--retry-stopped"])
        .assert_code(0);
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired[2..].iter().map(Firing::event).collect();
    assert_eq!(events, ["phase-complete", "phase-complete", "run-finished"]);
    let finished = &fired[4];
    assert_well_formed(&sandbox, finished);
    assert_eq!(finished.stdin["exit_code"], 0);
    assert_eq!(
        finished.stdin["message"],
        "runner-complete: all phases complete"
    );
    assert_eq!(finished.stdin["recovery"], Value::Null);
}

#[test]
fn a_signal_during_an_attempt_fires_interrupted_and_run_finished_with_the_signal_exit_code() {
    let (sandbox, agent) = recorded_sandbox();
    set_mode(&sandbox, "phase-1", "hang");
    let child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--quiet",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    assert!(wait_until(PATIENCE, || sandbox
        .path("ctl/ready-phase-1")
        .exists()));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(143);
    sandbox.assert_no_survivors();
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired.iter().map(Firing::event).collect();
    assert_eq!(events, ["interrupted", "run-finished"]);
    for firing in &fired {
        assert_well_formed(&sandbox, firing);
        assert_eq!(firing.stdin["exit_code"], 143);
        assert_eq!(firing.stdin["status"], "interrupted");
        assert_eq!(firing.stdin["phase"]["id"], "phase-1");
        assert!(
            firing.stdin["recovery"]
                .as_str()
                .unwrap()
                .ends_with(" --retry-stopped")
        );
    }
}

/// A retry backoff longer than a minute is the only way to a `wait-started` and its
/// `wait-finished`; this test waits it out (about 61 s).
#[test]
fn a_backoff_longer_than_a_minute_fires_wait_started_and_wait_finished() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let hook = recording_hook(&sandbox);
    config(
        &sandbox,
        json!({
            "retry": {"max_attempts": 2, "backoff_seconds": 61},
            "hooks": [{"on": every_event(), "command": hook}]
        }),
    );
    // Fails once, then completes.
    fs::create_dir_all(sandbox.path("ctl")).unwrap();
    let ctl = sandbox.path("ctl").display().to_string();
    let flaky = sandbox.script(
        "flaky",
        &format!(
            "cat > /dev/null\nif [ -f {ctl}/failed ]; then echo '<phase-complete>second time</phase-complete>'; else touch {ctl}/failed; exit 7; fi\n"
        ),
    );
    let run = sandbox.run_plan(PLAN, &flaky, &["--quiet"]);
    run.assert_code(0);
    sandbox.assert_no_survivors();
    let fired = firings(&sandbox);
    let events: Vec<&str> = fired.iter().map(Firing::event).collect();
    assert_eq!(
        events,
        [
            "wait-started",
            "wait-finished",
            "phase-complete",
            "run-finished"
        ]
    );
    for firing in &fired {
        assert_well_formed(&sandbox, firing);
    }
    let started = &fired[0].stdin;
    assert_eq!(started["status"], "agent-failed");
    assert_eq!(started["phase"]["id"], "phase-1");
    assert_eq!(started["schedule"]["attempt"], 2);
    assert!(
        started["message"]
            .as_str()
            .unwrap()
            .starts_with("retrying phase-1 (attempt 2 of 2) after agent-failed in "),
        "{started:#}"
    );
    let finished = &fired[1].stdin;
    assert_eq!(finished["status"], "agent-failed");
    assert_eq!(finished["attempt"], 2);
}

#[test]
fn a_hook_that_hangs_is_stopped_at_its_timeout_and_changes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let pidfile = sandbox.path("grandchild.pid");
    let hang = sandbox.script(
        "hang-hook",
        &format!(
            "trap '' TERM\nsh -c 'trap \"\" TERM; echo $$ > {}; exec sleep 600' &\nexec sleep 600\n",
            pidfile.display()
        ),
    );
    config(
        &sandbox,
        json!({"hooks": [{"on": ["phase-complete", "run-finished"], "command": hang.display().to_string(), "timeout_seconds": 1}]}),
    );
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    sandbox.assert_no_survivors();
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    for (warning, event) in warnings.iter().zip(["phase-complete", "run-finished"]) {
        assert!(
            warning.starts_with(&format!(
                "warning: hook hooks[0] ({event}) failed: timed out after 1 s and was stopped (killed by SIGKILL)"
            )),
            "{warning}"
        );
        assert!(warning.ends_with("hooks.log"), "{warning}");
    }
    let failures = hook_failures(&sandbox);
    assert_eq!(failures.len(), 2);
    assert!(failures.iter().all(|failure| failure["timed_out"] == true));
    assert_eq!(failures[0]["signal"], 9);
    assert_eq!(
        sandbox.state(PLAN)["completed_phase_ids"],
        json!(["phase-1"])
    );
}

#[test]
fn a_failing_hook_or_a_missing_program_is_a_warning_and_nothing_else() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "block");
    let plain = sandbox.run_plan(PLAN, &agent, &[]);
    plain.assert_code(2);
    let plain_state = sandbox.state(PLAN);

    let other = Sandbox::new();
    other.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&other);
    set_mode(&other, "phase-1", "block");
    config(
        &other,
        json!({"hooks": [
            {"on": ["phase-stopped"], "command": "sh -c 'echo failing hook >&2; exit 1'"},
            {"on": ["run-finished"], "command": "./no-such-notifier --now"}
        ]}),
    );
    let run = other.run_plan(PLAN, &agent, &[]);
    run.assert_code(2);
    assert_eq!(run.stdout, plain.stdout);
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    assert!(
        warnings[0].starts_with(
            "warning: hook hooks[0] (phase-stopped) failed: exited with code 1 after "
        ),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(&format!(
            "warning: hook hooks[1] (run-finished) failed: program './no-such-notifier' not found (looked up from {})",
            other.root.display()
        )),
        "{}",
        warnings[1]
    );
    // The same report but for the warnings (the `next:` line names each sandbox's agent).
    let other_root = other.root.display().to_string();
    let plain_root = sandbox.root.display().to_string();
    assert_eq!(
        run.stderr
            .lines()
            .filter(|line| !line.starts_with("warning: "))
            .map(|line| line.replace(&other_root, "<root>"))
            .collect::<Vec<_>>(),
        plain
            .stderr
            .lines()
            .map(|line| line.replace(&plain_root, "<root>"))
            .collect::<Vec<_>>()
    );
    let state = other.state(PLAN);
    for key in ["completed_phase_ids", "stop", "current_phase"] {
        assert_eq!(state[key], plain_state[key], "{key}");
    }
    assert_eq!(
        state["last_run"]["status"],
        plain_state["last_run"]["status"]
    );
    let failures = hook_failures(&other);
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0]["exit_code"], 1);
    assert_eq!(failures[0]["hook_event"], "phase-stopped");
    assert_eq!(failures[1]["exit_code"], Value::Null);
    let log = fs::read_to_string(other.state_dir(PLAN).join("hooks.log")).unwrap();
    assert!(log.contains("failing hook\n"), "{log}");
    assert!(log.contains("--- exited with code 1 after "), "{log}");
}

#[test]
fn run_json_stdout_stays_one_object_while_a_hook_prints_to_stdout() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    config(
        &sandbox,
        json!({"hooks": [{"on": ["phase-complete", "run-finished"], "command": "sh -c 'echo hook-on-stdout; echo hook-on-stderr >&2'"}]}),
    );
    let run = sandbox.run_plan(PLAN, &agent, &["--json", "--quiet"]);
    run.assert_code(0);
    let object: Value = serde_json::from_str(&run.stdout).expect("stdout is one JSON object");
    assert_eq!(object["result"], "complete");
    assert!(!run.raw_stderr.contains("hook-on-"), "{}", run.raw_stderr);
    let log = fs::read_to_string(sandbox.state_dir(PLAN).join("hooks.log")).unwrap();
    assert_eq!(log.matches("hook-on-stdout\n").count(), 2, "{log}");
    assert_eq!(log.matches("hook-on-stderr\n").count(), 2, "{log}");
}

#[test]
fn sigterm_while_a_run_finished_hook_runs_stops_it_and_keeps_the_decided_exit_code() {
    for (mode, decided) in [("complete", 0), ("block", 2)] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = control_agent(&sandbox);
        set_mode(&sandbox, "phase-1", mode);
        let started = sandbox.path("hook-started");
        let hook = sandbox.script(
            "slow-hook",
            &format!(
                "trap '' TERM\ntouch {}\nexec sleep 600\n",
                started.display()
            ),
        );
        config(
            &sandbox,
            json!({"hooks": [{"on": ["run-finished"], "command": hook.display().to_string(), "timeout_seconds": 300}]}),
        );
        let child = sandbox.spawn(&[
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
        ]);
        assert!(
            wait_until(PATIENCE, || started.exists()),
            "the hook never ran"
        );
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        // Far less than the hook's 300 s: the signal stopped it.
        let run = wait_for_exit(child, PATIENCE);
        run.assert_code(decided);
        sandbox.assert_no_survivors();
        assert!(
            run.stderr.lines().any(|line| line.starts_with(
                "warning: hook hooks[0] (run-finished) failed: stopped because the handler was interrupted"
            )),
            "{}",
            run.stderr
        );
        let failures = hook_failures(&sandbox);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        let finished: Vec<Value> = events_of(&sandbox)
            .into_iter()
            .filter(|event| event["event"] == "run-finished")
            .collect();
        assert_eq!(finished[0]["exit_code"], decided);
    }
}

#[test]
fn check_lists_hooks_and_rejects_unknown_events_and_bad_templates_before_any_state() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let agent = agent.to_str().unwrap();
    config(
        &sandbox,
        json!({"hooks": [
            {"on": ["run-finished", "phase-stopped"], "command": "notify-send {status}"},
            {"on": ["phase-complete"], "command": "./missing-hook {phase_id}", "timeout_seconds": 5}
        ]}),
    );
    let check = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent,
        "--hook",
        "wait-started=echo {run_id}",
    ]);
    check.assert_code(0);
    assert_has_lines(
        &check.stdout,
        &[
            "hook hooks[0]: run-finished, phase-stopped: notify-send {status} (timeout 30 s)",
            "hook hooks[1]: phase-complete: ./missing-hook {phase_id} (timeout 5 s)",
            "hook --hook: wait-started: echo {run_id} (timeout 30 s)",
        ],
    );
    assert!(
        check.stdout.lines().any(|line| line == format!(
            "note: hooks[1]: hook program './missing-hook' not found: no file at {}/missing-hook (a relative program path is resolved against the plan workspace); the hook would fail",
            sandbox.root.display()
        )),
        "{}",
        check.stdout
    );
    let json = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", agent, "--json"]);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["hooks"].as_array().unwrap().len(), 2);

    let config_path = sandbox.path(".ai-session-handler/config.json");
    for (hooks, message) in [
        (
            json!([{"on": ["run-done"], "command": "x"}]),
            "hooks[0].on[0]: unknown hook event 'run-done'; known events: run-finished, phase-stopped, phase-complete, wait-started, wait-finished, interrupted",
        ),
        (
            json!([{"on": ["run-finished"], "command": "notify {phase}"}]),
            "hooks[0].command: unsupported command placeholder: {phase}; did you mean {phase_id}? (placeholders: {plan}, {run_id}, {phase_id}, {status}, {event_file}; write {{ and }} for literal braces)",
        ),
        (
            json!([{"on": ["run-finished"], "command": "x", "timeout": 5}]),
            "unknown key 'hooks[0].timeout'; known keys: on, command, timeout_seconds",
        ),
    ] {
        config(&sandbox, json!({"hooks": hooks}));
        let expected = format!("error: {}: {message}", config_path.display());
        for command in ["check", "run"] {
            let run = sandbox.run(&[command, "--plan", PLAN, "--agent-cmd", agent]);
            run.assert_code(5);
            assert_has_line(&run.stderr, &expected);
            assert!(!sandbox.state_dir(PLAN).exists(), "{command} wrote state");
        }
    }
    config(&sandbox, json!({}));
    for (flag, message) in [
        (
            "finished=echo",
            "unknown hook event 'finished'; known events: run-finished, ",
        ),
        (
            "run-finished=echo {status",
            "hook command for run-finished: invalid command template syntax: ",
        ),
        ("run-finished", "expected EVENT=COMMAND (events: "),
    ] {
        for command in ["check", "run"] {
            let run = sandbox.run(&[
                command,
                "--plan",
                PLAN,
                "--agent-cmd",
                agent,
                "--hook",
                flag,
            ]);
            run.assert_code(5);
            assert!(
                run.stderr.contains(message) && run.stderr.contains("--hook"),
                "{flag}: {}",
                run.stderr
            );
            assert!(!sandbox.state_dir(PLAN).exists(), "{command} wrote state");
        }
    }
}

/// The README's "Notifications" examples, run as they are written: the file example appends
/// one line per event, and the `curl` and `notify-send` ones never fail a run (a missing
/// program or an unreachable server is only a warning, and `notify-send` is guarded).
#[test]
fn the_readme_notification_examples_work() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## Notifications\n")
        .nth(1)
        .expect("a Notifications section in README.md");
    let block = section
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a json block in the Notifications section");
    let mut example: Value = serde_json::from_str(block).expect("the example is valid JSON");
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    // The ntfy topic of the example is somebody's: point it at a port nobody listens on.
    let hooks = example["hooks"].as_array_mut().unwrap();
    for hook in hooks.iter_mut() {
        let command = hook["command"].as_str().unwrap().replace(
            "https://ntfy.sh/my-ai-session-handler-topic",
            "http://127.0.0.1:9/unreachable",
        );
        hook["command"] = Value::String(command);
    }
    config(&sandbox, example);
    set_mode(&sandbox, "phase-1", "block");
    let home = sandbox.path("home");
    fs::create_dir_all(&home).unwrap();
    let output = sandbox
        .command()
        .args([
            "run",
            "--plan",
            PLAN,
            "--quiet",
            "--agent-cmd",
            agent.to_str().unwrap(),
        ])
        .env("HOME", &home)
        .output()
        .unwrap();
    let run = Run::from_output(output);
    run.assert_code(2);
    sandbox.assert_no_survivors();
    let log = fs::read_to_string(home.join("ai-session-handler-notifications.log"))
        .expect("the file example appended to ~/ai-session-handler-notifications.log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    let plan = sandbox.path(PLAN).display().to_string();
    for (line, event) in lines.iter().zip(["phase-stopped", "run-finished"]) {
        assert!(
            line.ends_with(&format!(" {event} phase-1 blocked 2 {plan}")),
            "{log}"
        );
    }
}

/// A slow hook runs beside the run, never in its way: while a `phase-complete` hook still
/// runs, the next phase's attempt is stopped and recorded on SIGTERM as at any time; the end
/// then waits for the hook (the report is out meanwhile), and a second SIGTERM stops it with
/// the exit code kept.
#[test]
fn a_slow_hook_never_delays_the_runs_signal_handling() {
    use std::io::Read;
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-2", "hang");
    let started = sandbox.path("hook-started");
    let hook = sandbox.script(
        "slow-hook",
        &format!(
            "trap '' TERM\ntouch {}\nexec sleep 600\n",
            started.display()
        ),
    );
    config(
        &sandbox,
        json!({"hooks": [{"on": ["phase-complete"], "command": hook.display().to_string(), "timeout_seconds": 300}]}),
    );
    let mut child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--quiet",
        "--agent-cmd",
        agent.to_str().unwrap(),
    ]);
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (mut pipe, stderr) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(read) = pipe.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                stderr
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..read]));
            }
        })
    };
    assert!(wait_until(PATIENCE, || started.exists()
        && sandbox.path("ctl/ready-phase-2").exists()));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    // The attempt is stopped and recorded, and the report printed, while the hook goes on.
    let reported = || {
        stderr
            .lock()
            .unwrap()
            .contains("interrupted: handler interrupted while the worker was active (SIGTERM)")
    };
    assert!(
        wait_until(PATIENCE, reported),
        "no report: {}",
        stderr.lock().unwrap()
    );
    assert_eq!(sandbox.state(PLAN)["last_run"]["phase_id"], "phase-2");
    assert_eq!(sandbox.state(PLAN)["last_run"]["status"], "interrupted");
    assert!(
        matches!(child.try_wait(), Ok(None)),
        "the handler waits for its hook"
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let exited = wait_until(PATIENCE, || matches!(child.try_wait(), Ok(Some(_))));
    assert!(exited, "the second signal did not end the wait");
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(143));
    sandbox.assert_no_survivors();
    let stderr = stderr.lock().unwrap();
    assert!(
        stderr.lines().any(|line| line.starts_with(
            "warning: hook hooks[0] (phase-complete) failed: stopped because the handler was interrupted"
        )),
        "{stderr}"
    );
}
