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

/// `bin/notify MESSAGE…`: sends each message as one datagram to `$NOTIFY_SOCKET` (an abstract
/// `@name` or a path), then stays 0.2 s so that the runner can still tell who sent it.
fn notify_script(sandbox: &Sandbox) -> PathBuf {
    let path = sandbox.write(
        "bin/notify",
        "#!/usr/bin/env python3\n\
         import os, socket, sys, time\n\
         address = os.environ.get('NOTIFY_SOCKET', '')\n\
         if not address:\n    sys.exit(3)\n\
         if address.startswith('@'):\n    address = '\\0' + address[1:]\n\
         sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         for message in sys.argv[1:]:\n    sock.sendto(message.encode(), address)\n\
         time.sleep(0.2)\n",
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

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
    let name = address.strip_prefix('@').expect("an abstract address");
    let outsider = UnixDatagram::unbound().expect("socket");
    let target: std::os::unix::net::SocketAddr = {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name).expect("address")
    };
    // This test process is another session: its pings must not keep the agent alive.
    let mut child = child;
    while child.try_wait().expect("wait").is_none() {
        let _ = outsider.send_to_addr(b"WATCHDOG=1\nSTATUS=outsider", &target);
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
         address = \"\\0\" + address[1:]\n\
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
        let name = address
            .strip_prefix("@ai-session-handler/")
            .expect("the runner's abstract address");
        let target: std::os::unix::net::SocketAddr = {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(format!("ai-session-handler/{name}"))
                .expect("address")
        };
        assert!(
            probe.send_to_addr(b"WATCHDOG=1", &target).is_err(),
            "{address} still exists"
        );
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
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "budget-exceeded");
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
    sandbox.write("plan.md", plan_with_phases(2));
    let launches = sandbox.path("launches");
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho launched >> '{}'\n\"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={{\"input_tokens\": 100, \"output_tokens\": 50, \"final\": true}}'\n{COMPLETE}",
            launches.display()
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-tokens", "120"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(&launches)
            .expect("launches")
            .lines()
            .count(),
        1,
        "the second phase was launched"
    );
    assert!(run.stderr.contains("budget reached"), "{}", run.stderr);
}
