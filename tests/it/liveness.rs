//! Liveness and usage (issues 18 and 19), black-box: the real handler with fake agents that
//! notify with `systemd-notify` and with raw datagrams from Python — signs of life
//! (notifications, activity) against the idle timeout, statuses, usage reports in the outcome
//! and the state, and the budget caps.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// One phase, `agent` as its worker, `--quiet` and `extra`.
fn run_one(sandbox: &Sandbox, agent: &str, extra: &[&str]) -> Run {
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", agent);
    sandbox.run_plan("plan.md", &agent, &[&["--quiet"], extra].concat())
}

fn outcome(sandbox: &Sandbox) -> Value {
    let outcomes = sandbox.artifacts("plan.md", "outcomes");
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    read_json(&outcomes[0])
}

fn transcript(sandbox: &Sandbox) -> String {
    let transcripts = sandbox.artifacts("plan.md", "transcripts");
    std::fs::read_to_string(&transcripts[0]).expect("transcript")
}

const COMPLETE: &str = "echo '<phase-complete>done</phase-complete>'\n";

// --- the handler's own socket ----------------------------------------------------------------

/// Under systemd the handler has its service's `NOTIFY_SOCKET`; a worker must never get it,
/// nor reach that socket by it (issue 18 item 1).
#[test]
fn the_handlers_own_notify_socket_never_reaches_the_worker() {
    let sandbox = Sandbox::new();
    let service_socket = sandbox.path("systemd-notify.sock");
    let service = UnixDatagram::bind(&service_socket).expect("bind the service's socket");
    service.set_nonblocking(true).expect("non-blocking");
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\n\
             echo \"worker NOTIFY_SOCKET=${{NOTIFY_SOCKET-unset}}\"\n\
             systemd-notify --status=from-the-worker 2>/dev/null\n\
             {COMPLETE}"
        ),
    );
    let run = Run::from_output(
        sandbox
            .quiet_run_command("plan.md", &agent, &[])
            .env("NOTIFY_SOCKET", &service_socket)
            .output()
            .expect("run handler"),
    );
    run.assert_code(0);
    let transcript = transcript(&sandbox);
    assert!(
        !transcript.contains(&format!("NOTIFY_SOCKET={}", service_socket.display())),
        "{transcript}"
    );
    assert!(transcript.contains("worker NOTIFY_SOCKET="), "{transcript}");
    let mut buffer = [0u8; 1024];
    assert!(
        service.recv(&mut buffer).is_err(),
        "the worker notified the handler's service: {:?}",
        String::from_utf8_lossy(&buffer)
    );
}

// --- issue 18: signs of life -----------------------------------------------------------------

#[test]
fn watchdog_pings_keep_a_silent_agent_alive() {
    for ping in [
        "systemd-notify WATCHDOG=1",
        "\"$(dirname \"$0\")/notify\" WATCHDOG=1",
    ] {
        let sandbox = Sandbox::new();
        notify_script(&sandbox);
        let run = run_one(
            &sandbox,
            &format!(
                "cat >/dev/null\nfor i in 1 2 3 4 5 6 7 8; do {ping}; sleep 0.5; done\n{COMPLETE}"
            ),
            &["--idle-timeout", "2"],
        );
        run.assert_code(0);
        assert_eq!(outcome(&sandbox)["status"], "phase-complete", "{ping}");
        sandbox.assert_no_survivors();
    }
}

#[test]
fn an_announced_silence_is_not_idle() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let run = run_one(
        &sandbox,
        &format!(
            "cat >/dev/null\n\"$(dirname \"$0\")/notify\" EXTEND_TIMEOUT_USEC=5000000\nsleep 4\n{COMPLETE}"
        ),
        &["--idle-timeout", "2"],
    );
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
    // The event stream says so, once.
    let events = event_stream(&sandbox, "plan.md");
    let extended = of_kind(&events, "idle-deadline-extended");
    assert_eq!(extended.len(), 1, "{events:#?}");
    let seconds = extended[0]["seconds"].as_f64().expect("seconds");
    assert!((4.5..=5.0).contains(&seconds), "{seconds}");
    chrono::DateTime::parse_from_rfc3339(extended[0]["until"].as_str().expect("until"))
        .expect("RFC 3339");
}

#[test]
fn a_silence_longer_than_announced_is_stopped_when_the_extension_ends() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let slept = sandbox.path("slept");
    let run = run_one(
        &sandbox,
        &format!(
            "cat >/dev/null\n\"$(dirname \"$0\")/notify\" EXTEND_TIMEOUT_USEC=5000000\nsleep 8\ntouch '{}'\n{COMPLETE}",
            slept.display()
        ),
        &["--idle-timeout", "2", "--timeout", "60"],
    );
    run.assert_code(4);
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "timeout");
    assert_eq!(
        outcome["summary"],
        "no output, notification or activity for 5 s (idle timeout 2 s, extended by the agent)"
    );
    assert!(!slept.exists(), "the agent slept its 8 s");
    sandbox.assert_no_survivors();
}

#[test]
fn a_silent_cpu_busy_agent_is_alive() {
    let sandbox = Sandbox::new();
    let run = run_one(
        &sandbox,
        &format!(
            "cat >/dev/null\npython3 -c 'import time\nend = time.time() + 5\nwhile time.time() < end: pass'\n{COMPLETE}"
        ),
        &["--idle-timeout", "2"],
    );
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
}

#[test]
fn a_sleeping_agent_is_stopped_with_the_new_message_and_its_last_status() {
    let sandbox = Sandbox::new();
    let run = run_one(
        &sandbox,
        "cat >/dev/null\nsystemd-notify --status='tool: Bash cargo test'\nexec sleep 30\n",
        &["--idle-timeout", "1"],
    );
    run.assert_code(4);
    let summary = outcome(&sandbox)["summary"]
        .as_str()
        .expect("summary")
        .to_owned();
    assert!(
        summary.starts_with(
            "no output, notification or activity for 1 s (idle timeout); last status 'tool: Bash cargo test' "
        ),
        "{summary}"
    );
}

#[test]
fn notifications_from_outside_the_attempt_are_ignored() {
    let sandbox = Sandbox::new();
    let address_file = sandbox.path("address");
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\nprintf %s \"$NOTIFY_SOCKET\" > '{}'\nexec sleep 30\n",
            address_file.display()
        ),
    );
    let child = sandbox
        .quiet_run_command("plan.md", &agent, &["--idle-timeout", "2"])
        .spawn()
        .expect("spawn handler");
    assert!(wait_until(PATIENCE, || address_file.exists()));
    let address = std::fs::read_to_string(&address_file).expect("address");
    assert!(address.starts_with('/'), "a socket path: {address}");
    let outsider = UnixDatagram::unbound().expect("socket");
    // This test process is another session: its pings must not keep the agent alive.
    let mut child = child;
    while child.try_wait().expect("wait").is_none() {
        let _ = outsider.send_to(b"WATCHDOG=1\nSTATUS=outsider", &address);
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = Run::from_output(child.wait_with_output().expect("output"));
    run.assert_code(4);
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "timeout");
    assert!(
        !outcome["summary"]
            .as_str()
            .unwrap_or("")
            .contains("outsider"),
        "{outcome}"
    );
}

#[test]
fn floods_oversized_datagrams_and_garbage_change_nothing() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let flood = "python3 -c '\n\
         import os, socket\n\
         address = os.environ[\"NOTIFY_SOCKET\"]\n\
         sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         sock.setblocking(False)\n\
         for message in [b\"WATCHDOG=1\"] * 10000 + [b\"STATUS=\" + b\"x\" * 65536, b\"\\xff\\xfe\", b\"no equals sign\"]:\n\
         \x20   try:\n\
         \x20       sock.sendto(message, address)\n\
         \x20   except OSError:\n\
         \x20       pass\n\
         open(\"flooded\", \"w\").close()\n'\n";
    let run = run_one(
        &sandbox,
        &format!("cat >/dev/null\n{flood}{COMPLETE}"),
        &["--idle-timeout", "5"],
    );
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
    assert!(sandbox.path("flooded").exists(), "the flood was not sent");
    // Garbage alone is no sign of life.
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let run = run_one(
        &sandbox,
        "cat >/dev/null\nfor i in 1 2 3 4 5 6 7 8 9 10; do \"$(dirname \"$0\")/notify\" 'not an assignment' || exit 9; sleep 0.3; done\nexec sleep 30\n",
        &["--idle-timeout", "2"],
    );
    run.assert_code(4);
    assert_eq!(outcome(&sandbox)["status"], "timeout");
}

#[test]
fn each_attempt_has_its_own_socket_and_it_is_gone_afterwards() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\nprintf '%s\\n' \"$NOTIFY_SOCKET\" >> '{}'\n{COMPLETE}",
            sandbox.path("addresses").display()
        ),
    );
    sandbox
        .run_plan("plan.md", &agent, &["--quiet"])
        .assert_code(0);
    let addresses = std::fs::read_to_string(sandbox.path("addresses")).expect("addresses");
    let addresses: Vec<&str> = addresses.lines().collect();
    assert_eq!(addresses.len(), 2);
    assert_ne!(addresses[0], addresses[1]);
    let probe = UnixDatagram::unbound().expect("socket");
    for address in addresses {
        let path = std::path::Path::new(address);
        assert!(path.is_absolute(), "the runner's socket path: {address}");
        assert!(
            probe.send_to(b"WATCHDOG=1", path).is_err(),
            "{address} still exists"
        );
        // Its private directory is gone with it.
        assert!(!path.parent().expect("a directory").exists(), "{address}");
    }
}

// --- issue 19: usage -----------------------------------------------------------------------

fn usage_of(sandbox: &Sandbox) -> Value {
    outcome(sandbox)["usage"].clone()
}

#[test]
fn a_final_usage_report_is_recorded_in_the_outcome_and_the_state() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let report = r#"X_AISH_USAGE={"input_tokens": 1234, "cached_input_tokens": 1000, "output_tokens": 567, "cost_usd": 0.25, "model": "m", "final": true}"#;
    run_one(
        &sandbox,
        &format!("cat >/dev/null\n\"$(dirname \"$0\")/notify\" '{report}'\n{COMPLETE}"),
        &[],
    )
    .assert_code(0);
    let usage = usage_of(&sandbox);
    assert_eq!(usage["completeness"], "reported");
    assert_eq!(usage["input_tokens"], 1234);
    assert_eq!(usage["cached_input_tokens"], 1000);
    assert_eq!(usage["output_tokens"], 567);
    assert_eq!(usage["reasoning_tokens"], Value::Null);
    assert_eq!(usage["cost_usd"], 0.25);
    assert_eq!(usage["models"]["m"]["input_tokens"], 1234);
    let state = sandbox.state("plan.md");
    assert_eq!(state["committed_outcomes"][0]["usage"], usage);
}

#[test]
fn a_killed_attempt_with_running_reports_only_is_partial_and_a_silent_one_unknown() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    run_one(
        &sandbox,
        "cat >/dev/null\n\"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={\"input_tokens\": 10}'\nexec sleep 30\n",
        &["--timeout", "2"],
    )
    .assert_code(4);
    let usage = usage_of(&sandbox);
    assert_eq!(usage["completeness"], "partial");
    assert_eq!(usage["input_tokens"], 10);
    let sandbox = Sandbox::new();
    run_one(&sandbox, &format!("cat >/dev/null\n{COMPLETE}"), &[]).assert_code(0);
    let usage = usage_of(&sandbox);
    assert_eq!(usage["completeness"], "unknown");
    for key in [
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cost_usd",
    ] {
        assert_eq!(usage[key], Value::Null, "{key}: unknown is null, never 0");
    }
}

#[test]
fn invalid_usage_reports_are_ignored_with_one_warning() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    run_one(
        &sandbox,
        "cat >/dev/null\nn=\"$(dirname \"$0\")/notify\"\n\
         \"$n\" 'X_AISH_USAGE={broken' 'X_AISH_USAGE={\"input_tokens\": -1}' 'X_AISH_USAGE=[1]'\n\
         \"$n\" 'X_AISH_USAGE={\"input_tokens\": 7, \"final\": true}'\n\
         echo '<phase-complete>done</phase-complete>'\n",
        &[],
    )
    .assert_code(0);
    assert_eq!(usage_of(&sandbox)["input_tokens"], 7);
    let transcript = transcript(&sandbox);
    assert_eq!(
        transcript
            .matches("[runner] ignored an invalid usage report (X_AISH_USAGE)")
            .count(),
        1,
        "{transcript}"
    );
}

#[test]
fn a_budget_crossed_mid_attempt_stops_it_as_budget_exceeded() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    let run = run_one(
        &sandbox,
        "cat >/dev/null\n\"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={\"input_tokens\": 100, \"output_tokens\": 50}'\nexec sleep 30\n",
        &["--max-tokens", "120"],
    );
    run.assert_code(4);
    assert!(
        run.stderr
            .lines()
            .last()
            .is_some_and(|next| next.starts_with("next: raise the cap: give --max-tokens N a value above the 150 tokens (input + output) this plan has spent (the cap was 120, --max-tokens), then ai-session-handler run --plan plan.md ")
                && next.ends_with(" --max-tokens N --quiet --retry-stopped")),
        "{}",
        run.stderr
    );
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "budget-exceeded");
    assert_eq!(outcome["usage"]["completeness"], "partial");
    assert_eq!(
        sandbox.state("plan.md")["stop"]["reason"],
        "budget-exceeded"
    );
    let summary = outcome["summary"].as_str().expect("summary");
    for fragment in ["--max-tokens", "150 tokens", "--retry-stopped"] {
        assert!(summary.contains(fragment), "{fragment:?} in {summary}");
    }
    sandbox.assert_no_survivors();
}

#[test]
fn a_budget_already_spent_launches_nothing_more() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    sandbox.write("plan.md", plan_with_phases(3));
    let launches = sandbox.path("launches");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho launched >> '{}'\n\"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={{\"input_tokens\": 100, \"output_tokens\": 50, \"final\": true}}'\n{COMPLETE}",
            launches.display()
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-tokens", "120"]);
    // The first attempt's report was final: its spending was over, so it was not stopped;
    // the cap stopped the run before the next launch, with the exit code of a budget stop.
    run.assert_code(4);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
    assert_eq!(
        std::fs::read_to_string(&launches)
            .expect("launches")
            .lines()
            .count(),
        1,
        "the second phase was launched"
    );
    assert!(run.stderr.contains("budget reached"), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "budget reached: 150 tokens (input + output) spent of 120 (--max-tokens) by this plan's attempts; phase-2 was not launched"
        ),
        "{}",
        run.stderr
    );
    // Nothing was stopped, but the caps count the whole plan: only a larger cap continues.
    let next = run.stderr.lines().last().unwrap_or_default();
    assert!(
        next.starts_with("next: raise the cap: ")
            && next.contains(" --max-tokens N ")
            && !next.contains("--max-tokens 120")
            && !next.contains("--retry-stopped"),
        "{next}"
    );
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], serde_json::json!(["phase-1"]));
    assert!(state["stop"].is_null(), "{state:#}");
    // A larger cap: phase-2 runs, and the cap stops the run before phase-3 (the plan has
    // spent 300). A `--json` caller is told so as `budget-reached`.
    let run = sandbox.run_plan(
        "plan.md",
        &agent,
        &["--quiet", "--max-tokens", "250", "--json"],
    );
    run.assert_code(4);
    let result = schema_valid(&run);
    assert_eq!(result["result"], "budget-reached", "{result:#}");
    assert_eq!(result["status"], "phase-complete");
    assert_eq!(result["phases_completed"], serde_json::json!(["phase-2"]));
    assert_eq!(result["next_phase"]["id"], "phase-3");
    assert_eq!(result["usage"]["total"]["input_tokens"], 100);
    assert!(
        result["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("budget reached: 300 tokens ")),
        "{result:#}"
    );
}

/// `run --json` output: one object, valid against docs/run-result.schema.json.
#[track_caller]
fn schema_valid(run: &Run) -> Value {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/run-result.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let value: Value = serde_json::from_str(run.stdout.trim_end()).expect("one JSON object");
    let errors: Vec<String> = jsonschema::validator_for(&schema)
        .expect("a valid schema")
        .iter_errors(&value)
        .map(|error| error.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{value:#}\nviolates the schema: {errors:?}"
    );
    value
}

#[test]
fn budget_exceeded_is_never_retried() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"max_attempts": 2, "on": ["timeout", "budget-exceeded"]}}"#,
    );
    let agent = sandbox.script("agent", &format!("cat >/dev/null\n{COMPLETE}"));
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(5);
    assert!(
        run.stderr
            .contains("retry.on[1]: budget-exceeded is never retried"),
        "{}",
        run.stderr
    );
    assert!(!sandbox.state_path("plan.md").exists());
}

// --- issue 18: visible everywhere -------------------------------------------------------------

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["event"] == kind)
        .collect()
}

/// A burst of statuses is published rate-limited (the first at once, the last word of the
/// burst a second later); the latest is in `status` (text and JSON, read from the event
/// stream, never from `state.json`), in `watch` (text and `--json`) and in the JSON log.
#[test]
fn the_latest_status_is_in_the_event_stream_status_watch_and_the_log() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\n\"$(dirname \"$0\")/notify\" STATUS=thinking STATUS=generating 'STATUS=tool: Bash cargo test'\n\
             touch READY\nwhile [ ! -f GO ]; do sleep 0.05; done\n{COMPLETE}"
        ),
    );
    let watch_text = sandbox
        .command()
        .args(["watch", "--plan", "plan.md"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    let watch_json = sandbox
        .command()
        .args(["watch", "--plan", "plan.md", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("watch --json");
    let log = sandbox.path("handler.log");
    let handler = sandbox
        .quiet_run_command(
            "plan.md",
            &agent,
            &[
                "--log-level",
                "info",
                "--log-format",
                "json",
                "--log-file",
                log.to_str().unwrap(),
            ],
        )
        .spawn()
        .expect("run");
    let events_path = sandbox.state_dir("plan.md").join("events.jsonl");
    assert!(
        wait_until(PATIENCE, || std::fs::read_to_string(&events_path)
            .is_ok_and(|text| text.contains("tool: Bash cargo test"))),
        "the last status was never published"
    );
    let status = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    status.assert_code(0);
    let json: Value = serde_json::from_str(&status.stdout).expect("status --json");
    let activity = &json["active_attempt"]["activity"];
    assert_eq!(activity["text"], "tool: Bash cargo test", "{json:#}");
    let since = activity["since"].as_str().expect("since");
    let since = chrono::DateTime::parse_from_rfc3339(since).expect("RFC 3339");
    let text = sandbox.run(&["status", "--plan", "plan.md"]);
    assert_has_line(
        &text.stdout,
        &format!(
            "activity: tool: Bash cargo test (since {})",
            since.with_timezone(&chrono::Utc).format("%H:%M:%S")
        ),
    );
    let state = String::from_utf8(sandbox.state_bytes("plan.md").unwrap()).unwrap();
    assert!(
        !state.contains("cargo test"),
        "a status is never durable: {state}"
    );
    sandbox.write("GO", "");
    let run = Run::from_output(handler.wait_with_output().expect("run output"));
    run.assert_code(0);

    let events = event_stream(&sandbox, "plan.md");
    let published: Vec<&str> = of_kind(&events, "activity")
        .iter()
        .map(|event| event["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        published,
        ["thinking", "tool: Bash cargo test"],
        "{events:#?}"
    );
    let watched = wait_for_exit(watch_text, PATIENCE);
    watched.assert_code(0);
    assert!(
        watched.stdout.contains("phase-1 · tool: Bash cargo test"),
        "{}",
        watched.stdout
    );
    let watched = wait_for_exit(watch_json, PATIENCE);
    watched.assert_code(0);
    let passed: Vec<Value> = watched
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("event lines"))
        .collect();
    assert_eq!(of_kind(&passed, "activity").len(), 2, "{}", watched.stdout);
    let log = std::fs::read_to_string(&log).expect("log");
    let statuses: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON log"))
        .filter(|line| line["fields"]["message"] == "agent status")
        .collect();
    assert_eq!(
        statuses.last().map(|line| line["fields"]["status"].clone()),
        Some(Value::from("tool: Bash cargo test")),
        "{log}"
    );
    assert!(
        statuses
            .iter()
            .all(|line| line["spans"].to_string().contains("attempt")),
        "logged in the attempt's span: {statuses:?}"
    );
    // Everything the agent told, under one target, wherever in the handler it was read.
    assert!(
        statuses
            .iter()
            .all(|line| line["target"] == "ai_session_handler::agent"),
        "{statuses:?}"
    );
}

// --- issue 19: usage everywhere ---------------------------------------------------------------

/// An agent that reports `input = 100 × n`, `output = 10 × n`, `cost = $0.01 × n` for phase n as
/// its final usage — except the first attempt of phase 2, which reports running totals of 50
/// input tokens and fails (the retry policy runs it again at once).
fn usage_agent(sandbox: &Sandbox) -> PathBuf {
    notify_script(sandbox);
    sandbox.script(
        "agent",
        "prompt=$(cat)\n\
         phase=$(printf '%s\\n' \"$prompt\" | sed -n 's/^- selected_phase_id: phase-//p')\n\
         n=\"$(dirname \"$0\")/notify\"\n\
         if [ \"$phase\" = 2 ] && [ ! -f failed-once ]; then\n\
           touch failed-once\n\
           \"$n\" 'X_AISH_USAGE={\"input_tokens\": 50}'\n\
           exit 1\n\
         fi\n\
         \"$n\" \"X_AISH_USAGE={\\\"input_tokens\\\": $((phase * 100)), \\\"output_tokens\\\": $((phase * 10)), \\\"cost_usd\\\": 0.0$phase, \\\"model\\\": \\\"m\\\", \\\"final\\\": true}\"\n\
         echo \"<phase-complete>done $phase</phase-complete>\"\n",
    )
}

/// The usage of a finished three-phase run (one phase retried) at a glance: per phase (its
/// latest attempt and all its attempts) and for the run in `status`, the same in `status
/// --json`, `run --json` (this run's total and each attempt's) and the event stream.
#[test]
fn usage_is_in_status_run_json_and_the_event_stream() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"max_attempts": 2, "backoff_seconds": 0}}"#,
    );
    let agent = usage_agent(&sandbox);
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--json"]);
    run.assert_code(0);
    let result: Value = serde_json::from_str(run.stdout.trim_end()).expect("run --json");
    let total = &result["usage"]["total"];
    // 50 (the failed attempt) + 100 + 200 + 300 input, 60 output, $0.06.
    assert_eq!(total["input_tokens"], 650, "{result:#}");
    assert_eq!(total["output_tokens"], 60);
    assert!((total["cost_usd"].as_f64().unwrap() - 0.06).abs() < 1e-9);
    assert_eq!(
        total["completeness"], "partial",
        "the failed attempt's is partial"
    );
    let attempts = result["usage"]["attempts"].as_array().expect("attempts");
    let per_attempt: Vec<(String, Value, Value)> = attempts
        .iter()
        .map(|attempt| {
            (
                attempt["phase_id"].as_str().unwrap().to_owned(),
                attempt["usage"]["input_tokens"].clone(),
                attempt["usage"]["completeness"].clone(),
            )
        })
        .collect();
    assert_eq!(
        per_attempt,
        [
            (
                "phase-1".to_owned(),
                Value::from(100),
                Value::from("reported")
            ),
            (
                "phase-2".to_owned(),
                Value::from(50),
                Value::from("partial")
            ),
            (
                "phase-2".to_owned(),
                Value::from(200),
                Value::from("reported")
            ),
            (
                "phase-3".to_owned(),
                Value::from(300),
                Value::from("reported")
            ),
        ]
    );
    assert_eq!(attempts[0]["usage"]["models"]["m"]["output_tokens"], 10);

    let text = sandbox.run(&["status", "--plan", "plan.md"]);
    text.assert_code(0);
    let row = |phase: &str| -> Vec<String> {
        let line = text
            .stdout
            .lines()
            .find(|line| line.starts_with(&format!("{phase}  ")))
            .unwrap_or_else(|| panic!("no row for {phase}:\n{}", text.stdout));
        line.split("  ")
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("phase-1")[5..7], ["110", "$0.01"]);
    assert_eq!(
        row("phase-2")[5..7],
        ["220 (all ≥ 270)", "$0.02 (all ≥ $0.02)"]
    );
    assert_eq!(row("phase-3")[5..7], ["330", "$0.03"]);
    let totals = text
        .stdout
        .lines()
        .find(|line| line.starts_with("totals: "))
        .expect("totals");
    assert!(
        totals.ends_with(" output · tokens ≥ 710 · cost ≥ $0.06"),
        "{totals}"
    );
    assert_has_line(&text.stdout, "usage: ≥ 650 in, 60 out tokens, $0.06");
    let status = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    let json: Value = serde_json::from_str(&status.stdout).expect("status --json");
    assert_eq!(json["phases"][1]["usage"]["input_tokens"], 250);
    assert_eq!(
        json["phases"][1]["last_attempt"]["usage"]["input_tokens"],
        200
    );
    assert_eq!(json["totals"]["usage"], *total);

    let committed: Vec<Value> = of_kind(&event_stream(&sandbox, "plan.md"), "outcome-committed")
        .into_iter()
        .map(|event| event["usage"]["input_tokens"].clone())
        .collect();
    assert_eq!(committed, [100, 50, 200, 300].map(Value::from));
}

/// With a cap set, an agent that reports no usage is warned about once (on stderr and in the
/// event stream), and each of its outcomes says the cap could not be enforced.
#[test]
fn a_cap_an_agent_cannot_be_held_to_is_said_once() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = sandbox.script("agent", &format!("cat >/dev/null\n{COMPLETE}"));
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-cost", "5"]);
    run.assert_code(0);
    let warning = "warning: --max-cost cannot be enforced: the agent of attempt ";
    assert_eq!(run.stderr.matches(warning).count(), 1, "{}", run.stderr);
    assert_eq!(
        of_kind(&event_stream(&sandbox, "plan.md"), "budget-unenforceable").len(),
        1
    );
    for path in sandbox.artifacts("plan.md", "outcomes") {
        assert_eq!(
            read_json(&path)["budget_note"],
            "--max-cost cannot be enforced for this agent: it reported no usage (X_AISH_USAGE, docs/worker-protocol.md); what it spent is not counted"
        );
    }
    // Without a cap: neither.
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.script("agent", &format!("cat >/dev/null\n{COMPLETE}"));
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet"]);
    run.assert_code(0);
    assert!(!run.stderr.contains("cannot be enforced"), "{}", run.stderr);
    assert_eq!(outcome(&sandbox).get("budget_note"), None);
}

/// `command` under a pseudo-terminal (`script`), what it draws copied to `screen`.
fn under_terminal(
    sandbox: &Sandbox,
    command: &str,
    screen: &std::path::Path,
) -> std::process::Child {
    std::process::Command::new("script")
        .args(["-qefc", command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(screen).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run script")
}

fn screen_text(screen: &std::path::Path) -> String {
    String::from_utf8_lossy(&std::fs::read(screen).unwrap_or_default()).into_owned()
}

/// On a terminal the latest status is on the `--quiet` status line with its age; without
/// `--quiet` each change is a dim line of its own, and the sign of life of a silent agent shows
/// the status in place of the silence.
#[test]
fn a_terminal_shows_the_status_on_the_status_line_a_dim_line_and_the_sign_of_life() {
    let status_line =
        regex::Regex::new(r"phase-1 \(1/1\) \S+ · \S+ B · tool: Bash cargo test \(\d+s\)").unwrap();
    for quiet in [true, false] {
        let sandbox = Sandbox::new();
        notify_script(&sandbox);
        sandbox.write("plan.md", plan_with_phases(1));
        let agent = sandbox.script(
            "agent",
            &format!(
                "cat >/dev/null\necho started\n\"$(dirname \"$0\")/notify\" 'STATUS=tool: Bash cargo test'\n\
                 while [ ! -f GO ]; do sleep 0.05; done\n{COMPLETE}"
            ),
        );
        let screen = sandbox.path("screen.out");
        let command = format!(
            "{BIN} run --plan plan.md --agent-cmd {}{}",
            agent.display(),
            if quiet { " --quiet" } else { "" }
        );
        let mut terminal = under_terminal(&sandbox, &command, &screen);
        let shown = wait_until(PATIENCE, || status_line.is_match(&screen_text(&screen)));
        sandbox.write("GO", "");
        let ended = wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_))));
        let text = screen_text(&screen);
        assert!(ended, "the run did not end:\n{text:?}");
        assert!(shown, "quiet {quiet}: no status with its age:\n{text:?}");
        let dim = "\x1b[2mphase-1 · tool: Bash cargo test\x1b[0m";
        assert_eq!(text.contains(dim), !quiet, "quiet {quiet}:\n{text:?}");
        sandbox.assert_no_survivors();
    }
}

/// The worker's own last word: a final report sent by the leader right before it exits counts
/// (the leader is known to the attempt even once it is gone, and the socket is read to its end
/// before the outcome is decided). The failpoint holds the receiver for 1 s before its first
/// read, so a worker that is quicker than that has exited and been reaped before its datagram
/// is read: only the drain at the stop reads it, and only the remembered leader passes the
/// membership check (without either the usage is `unknown` and nothing is accepted). A worker
/// slower than that is read by the receiving loop, and the test still holds; the hold stays
/// well inside the attempt's 2 s drain limit, past which the drain is not waited for.
#[test]
fn a_final_report_sent_just_before_the_exit_counts() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = sandbox.write(
        "bin/agent",
        "#!/usr/bin/env python3\n\
         import os, socket, sys\n\
         sys.stdin.read()\n\
         print('<phase-complete>done</phase-complete>', flush=True)\n\
         address = os.environ['NOTIFY_SOCKET']\n\
         sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         sock.sendto(b'X_AISH_USAGE={\"output_tokens\": 42, \"final\": true}', address)\n\
         os._exit(0)\n",
    );
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let output = sandbox
        .quiet_run_command("plan.md", &agent, &[])
        .env("FAILPOINTS", "notify-receive=1*sleep(1000)")
        .output()
        .expect("run handler");
    Run::from_output(output).assert_code(0);
    let usage = usage_of(&sandbox);
    assert_eq!(usage["output_tokens"], 42, "{usage}");
    assert_eq!(usage["completeness"], "reported");
    assert!(
        transcript(&sandbox).contains("\nnotifications: 1 accepted\n"),
        "{}",
        transcript(&sandbox)
    );
}

/// A running attempt's usage is streamed as `usage` events, at most one a second: a report
/// right after a published one is not written (the next one, or the outcome, carries it), and
/// the attempt's final usage is on its `outcome-committed`.
#[test]
fn running_usage_is_streamed_at_most_once_a_second() {
    let sandbox = Sandbox::new();
    notify_script(&sandbox);
    run_one(
        &sandbox,
        &format!(
            "cat >/dev/null\nn=\"$(dirname \"$0\")/notify\"\n\
             \"$n\" 'X_AISH_USAGE={{\"input_tokens\": 10}}'\n\
             sleep 2.5\n\
             \"$n\" 'X_AISH_USAGE={{\"input_tokens\": 30, \"output_tokens\": 5}}' 'X_AISH_USAGE={{\"input_tokens\": 40, \"output_tokens\": 6}}'\n\
             {COMPLETE}"
        ),
        &[],
    )
    .assert_code(0);
    let events = event_stream(&sandbox, "plan.md");
    let streamed: Vec<(u64, &str)> = of_kind(&events, "usage")
        .iter()
        .map(|event| {
            assert_eq!(event["phase_id"], "phase-1", "{event}");
            assert!(event["attempt_id"].is_string(), "{event}");
            (
                event["usage"]["input_tokens"]
                    .as_u64()
                    .expect("input tokens"),
                event["usage"]["completeness"]
                    .as_str()
                    .expect("completeness"),
            )
        })
        .collect();
    assert_eq!(streamed, [(10, "partial"), (30, "partial")]);
    let committed = of_kind(&events, "outcome-committed");
    assert_eq!(committed.len(), 1);
    assert_eq!(committed[0]["usage"]["input_tokens"], 40);
    assert_eq!(committed[0]["usage"]["output_tokens"], 6);
    sandbox.assert_no_survivors();
}
