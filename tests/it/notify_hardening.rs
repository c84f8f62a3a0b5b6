//! The notification socket and usage against hostile senders, black-box: another user can
//! neither stall the receiver with a passed socket nor crowd the agent out with a flood (run as
//! `nobody` with `setpriv` when the tests run as root), a tool of the agent cannot lower what a
//! budget counts, costs are counted exactly and printed bounded, and announced silences are
//! rate-limited in the event stream.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

const COMPLETE: &str = "print('<phase-complete>done</phase-complete>', flush=True)\n";

/// A Python agent: `body` runs after stdin is read, with `notify(message)` sending one datagram
/// with `MSG_DONTWAIT` (returning whether it went out) and the socket's address written to
/// `address` for the test.
fn python_agent(sandbox: &Sandbox, body: &str) -> PathBuf {
    let path = sandbox.write(
        "bin/agent",
        format!(
            "#!/usr/bin/env python3\n\
             import os, socket, sys, time\n\
             sys.stdin.read()\n\
             address = os.environ['NOTIFY_SOCKET']\n\
             with open({address:?} + '.tmp', 'w') as f:\n    f.write(address)\n\
             os.rename({address:?} + '.tmp', {address:?})\n\
             target = '\\0' + address[1:] if address.startswith('@') else address\n\
             sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
             def notify(message):\n\
             \x20   try:\n\
             \x20       sock.sendto(message.encode(), socket.MSG_DONTWAIT, target)\n\
             \x20       return True\n\
             \x20   except OSError:\n\
             \x20       return False\n\
             {body}",
            address = sandbox.path("address").display().to_string(),
        ),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// `python3 -c script address` as user `nobody`, or `None` (with a note) where that cannot be
/// done: not root, or no `setpriv`.
fn as_nobody(script: &str, address: &str) -> Option<Command> {
    if !rustix::process::getuid().is_root() {
        eprintln!("not root: the sender of another user is not tested");
        return None;
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !setpriv.is_ok_and(|output| output.status.success()) {
        eprintln!("no setpriv: the sender of another user is not tested");
        return None;
    }
    let drop_to_nobody = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];
    // A Python `nobody` can run (a per-user one under /root is out of its reach).
    let python = ["/usr/bin/python3", "/bin/python3", "python3"]
        .into_iter()
        .find(|python| {
            Command::new("setpriv")
                .args(drop_to_nobody)
                .args([python, "-c", "pass"])
                .current_dir("/")
                .output()
                .is_ok_and(|output| output.status.success())
        });
    let Some(python) = python else {
        eprintln!("no python3 that nobody can run: the sender of another user is not tested");
        return None;
    };
    let mut command = Command::new("setpriv");
    command
        .args(drop_to_nobody)
        .args([python, "-c", script, address])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Some(command)
}

/// The outsider's address handling, shared by both attacks.
const OUTSIDER_PRELUDE: &str = "import errno, os, socket, sys, time\n\
     address = sys.argv[1]\n\
     target = '\\0' + address[1:] if address.startswith('@') else address\n\
     sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n";

/// Waits for the agent to write its address; the handler is `child`.
fn address_of(sandbox: &Sandbox) -> String {
    let file = sandbox.path("address");
    assert!(wait_until(PATIENCE, || file.exists()), "no address written");
    std::fs::read_to_string(file).expect("address")
}

fn outcome(sandbox: &Sandbox) -> Value {
    let outcomes = sandbox.artifacts("plan.md", "outcomes");
    read_json(outcomes.last().expect("an outcome"))
}

/// Another user passes a TCP socket with unsent data, `SO_LINGER` 120 s and a peer that never
/// reads: its close would hold up whoever closes it for two minutes. The socket is in a
/// directory only the handler's user can enter, so the datagram never arrives, and the agent's
/// `WATCHDOG=1` pings keep it alive under `--idle-timeout 2`.
#[test]
fn another_user_can_neither_reach_the_socket_nor_stall_it() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = python_agent(
        &sandbox,
        &format!(
            "end = time.time() + 5\n\
             while time.time() < end:\n\
             \x20   notify('WATCHDOG=1')\n\
             \x20   time.sleep(0.25)\n\
             {COMPLETE}"
        ),
    );
    let child = sandbox
        .quiet_run_command("plan.md", &agent, &["--idle-timeout", "2"])
        .spawn()
        .expect("spawn handler");
    let address = address_of(&sandbox);
    let attack = format!(
        "{OUTSIDER_PRELUDE}\
         listener = socket.socket()\n\
         listener.bind(('127.0.0.1', 0))\n\
         listener.listen(1)\n\
         lingering = socket.create_connection(listener.getsockname())\n\
         peer, _ = listener.accept()\n\
         lingering.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, 'little') + (120).to_bytes(4, 'little'))\n\
         lingering.setblocking(False)\n\
         try:\n\
         \x20   while True:\n\
         \x20       lingering.send(b'x' * 65536)\n\
         except BlockingIOError:\n\
         \x20   pass\n\
         try:\n\
         \x20   sock.sendmsg([b'WATCHDOG=1'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, lingering.fileno().to_bytes(4, 'little'))], 0, target)\n\
         except OSError as error:\n\
         \x20   print('refused', error.errno, flush=True)\n\
         \x20   lingering.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, 'little') + (0).to_bytes(4, 'little'))\n\
         \x20   sys.exit(0)\n\
         print('sent', flush=True)\n\
         lingering.close()\n\
         time.sleep(8)\n"
    );
    let Some(mut attacker) = as_nobody(&attack, &address) else {
        wait_for_exit(child, PATIENCE);
        return;
    };
    let attacked = attacker.output().expect("run the attacker as nobody");
    let said = String::from_utf8_lossy(&attacked.stdout);
    let run = wait_for_exit(child, PATIENCE);
    assert!(
        said.starts_with(&format!("refused {}", nix::libc::EACCES)),
        "another user reached the socket: {said} {}",
        String::from_utf8_lossy(&attacked.stderr)
    );
    run.assert_code(0);
    assert_eq!(outcome(&sandbox)["status"], "phase-complete");
    sandbox.assert_no_survivors();
}

/// Another user floods the socket for the whole attempt: the agent's own `MSG_DONTWAIT` sends
/// (an announced silence longer than the idle limit, then its final usage) still go out.
#[test]
fn another_users_flood_cannot_crowd_out_the_agent() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let sent = sandbox.path("sent");
    let agent = python_agent(
        &sandbox,
        &format!(
            "time.sleep(1)\n\
             extended = notify('EXTEND_TIMEOUT_USEC=6000000')\n\
             time.sleep(3)\n\
             reported = notify('X_AISH_USAGE={{\"output_tokens\": 42, \"final\": true}}')\n\
             open({sent:?}, 'w').write(f'{{extended}} {{reported}}')\n\
             time.sleep(0.3)\n\
             {COMPLETE}",
            sent = sent.display().to_string(),
        ),
    );
    let child = sandbox
        .quiet_run_command("plan.md", &agent, &["--idle-timeout", "2"])
        .spawn()
        .expect("spawn handler");
    let address = address_of(&sandbox);
    let flood = format!(
        "{OUTSIDER_PRELUDE}\
         sock.setblocking(False)\n\
         delivered = refused = 0\n\
         end = time.time() + 6\n\
         while time.time() < end:\n\
         \x20   try:\n\
         \x20       sock.sendto(b'WATCHDOG=1', target)\n\
         \x20       delivered += 1\n\
         \x20   except BlockingIOError:\n\
         \x20       pass\n\
         \x20   except OSError:\n\
         \x20       refused += 1\n\
         \x20       time.sleep(0.001)\n\
         print(delivered, refused, flush=True)\n"
    );
    let Some(mut flooder) = as_nobody(&flood, &address) else {
        wait_for_exit(child, PATIENCE);
        return;
    };
    let flooded = flooder.output().expect("run the flood as nobody");
    let run = wait_for_exit(child, PATIENCE);
    let said = String::from_utf8_lossy(&flooded.stdout);
    assert!(
        said.starts_with("0 "),
        "another user's datagrams were delivered: {said} {}",
        String::from_utf8_lossy(&flooded.stderr)
    );
    run.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(&sent).expect("the agent's sends"),
        "True True"
    );
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "phase-complete", "{outcome:#}");
    assert_eq!(outcome["usage"]["output_tokens"], 42);
    assert_eq!(outcome["usage"]["completeness"], "reported");
}

/// A tool the agent runs (without `NOTIFY_SOCKET`, having found the socket) claims a final
/// total of 0 tokens: the agent's later reports still count, the cap stops the attempt, and
/// the claim is a warning in the transcript.
#[test]
fn a_tool_claiming_a_final_total_of_zero_does_not_reset_the_budget() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let tool = sandbox.write(
        "bin/tool",
        "import socket, sys, time\n\
         address = sys.argv[1]\n\
         target = '\\0' + address[1:] if address.startswith('@') else address\n\
         sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         sock.sendto(b'X_AISH_USAGE={\"input_tokens\": 0, \"final\": true}', target)\n\
         time.sleep(0.3)\n",
    );
    let agent = python_agent(
        &sandbox,
        &format!(
            "import subprocess\n\
             notify('X_AISH_USAGE={{\"input_tokens\": 500}}')\n\
             time.sleep(0.3)\n\
             env = {{key: value for key, value in os.environ.items() if key != 'NOTIFY_SOCKET'}}\n\
             subprocess.run([sys.executable, {tool:?}, address], env=env, check=True)\n\
             for tokens in range(1000, 6000, 1000):\n\
             \x20   notify('X_AISH_USAGE={{\"input_tokens\": %d}}' % tokens)\n\
             \x20   time.sleep(0.5)\n\
             {COMPLETE}",
            tool = tool.display().to_string(),
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-tokens", "1000"]);
    run.assert_code(4);
    let outcome = outcome(&sandbox);
    assert_eq!(outcome["status"], "budget-exceeded", "{outcome:#}");
    assert!(
        outcome["usage"]["input_tokens"].as_u64() >= Some(1000),
        "{outcome:#}"
    );
    let transcripts = sandbox.artifacts("plan.md", "transcripts");
    let transcript = std::fs::read_to_string(&transcripts[0]).expect("transcript");
    assert!(
        transcript.contains("[runner] a final usage report (0 in tokens) is lower than what the attempt had already reported (500 in tokens)"),
        "{transcript}"
    );
    sandbox.assert_no_survivors();
}

/// Phases costing $0.70, $0.10, $0.10 and $0.10 add up to exactly $1: `--max-cost 1` launches
/// no fifth phase.
#[test]
fn costs_adding_up_to_the_cap_reach_it() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(5));
    let launches = sandbox.path("launches");
    let agent = python_agent(
        &sandbox,
        &format!(
            "launches = {launches:?}\n\
             first = not os.path.exists(launches)\n\
             open(launches, 'a').write('launched\\n')\n\
             cost = 0.7 if first else 0.1\n\
             notify('X_AISH_USAGE={{\"cost_usd\": %r, \"final\": true}}' % cost)\n\
             time.sleep(0.3)\n\
             {COMPLETE}",
            launches = launches.display().to_string(),
        ),
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-cost", "1"]);
    run.assert_code(4);
    let launched = std::fs::read_to_string(&launches).expect("launches");
    assert_eq!(launched.lines().count(), 4, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "budget reached: $1 spent of $1 (--max-cost) by this plan's attempts; phase-5 was not launched"
        ),
        "{}",
        run.stderr
    );
}

/// A cost of 1e308 is counted as the largest sum, two of them do not add up to infinity, and
/// -0 is $0: `status` prints bounded amounts and `--json` a number with the completeness.
#[test]
fn huge_and_negative_zero_costs_print_bounded() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    let launches = sandbox.path("launches");
    let agent = python_agent(
        &sandbox,
        &format!(
            "launches = {launches:?}\n\
             count = len(open(launches).read().splitlines()) if os.path.exists(launches) else 0\n\
             open(launches, 'a').write('launched\\n')\n\
             cost = '-0.0' if count == 2 else '1e308'\n\
             notify('X_AISH_USAGE={{\"cost_usd\": %s, \"final\": true}}' % cost)\n\
             time.sleep(0.3)\n\
             {COMPLETE}",
            launches = launches.display().to_string(),
        ),
    );
    sandbox
        .run_plan("plan.md", &agent, &["--quiet"])
        .assert_code(0);
    let status = sandbox.run(&["status", "--plan", "plan.md"]);
    status.assert_code(0);
    assert!(
        status.stdout.contains("$18446744073709.5516"),
        "{}",
        status.stdout
    );
    assert!(!status.stdout.contains("inf"), "{}", status.stdout);
    assert!(!status.stdout.contains("$-0"), "{}", status.stdout);
    assert!(
        !status.stdout.contains(&"0".repeat(20)),
        "{}",
        status.stdout
    );
    let json = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    json.assert_code(0);
    let text = json.stdout.clone();
    let value: Value = serde_json::from_str(&text).expect("status --json");
    let mut costs = Vec::new();
    collect_usages(&value, &mut costs);
    assert!(!costs.is_empty(), "{value:#}");
    for (cost, completeness) in costs {
        if completeness == "reported" {
            assert!(cost.is_number(), "{value:#}");
        }
    }
    assert!(!text.contains(&"0".repeat(20)), "{text}");
}

/// Every object with a `completeness` and a `cost_usd`: (the cost, the completeness).
fn collect_usages(value: &Value, found: &mut Vec<(Value, String)>) {
    match value {
        Value::Object(object) => {
            if let (Some(cost), Some(Value::String(completeness))) =
                (object.get("cost_usd"), object.get("completeness"))
            {
                found.push((cost.clone(), completeness.clone()));
            }
            object
                .values()
                .for_each(|value| collect_usages(value, found));
        }
        Value::Array(items) => items.iter().for_each(|value| collect_usages(value, found)),
        _ => {}
    }
}

/// An agent growing its announced silence by 1.1 s with every datagram, hundreds a second,
/// costs the event stream about one `idle-deadline-extended` line a second.
#[test]
fn announced_silences_are_rate_limited_in_the_event_stream() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = python_agent(
        &sandbox,
        &format!(
            "by = 5.0\n\
             end = time.time() + 2\n\
             while time.time() < end:\n\
             \x20   by += 1.1\n\
             \x20   notify('EXTEND_TIMEOUT_USEC=%d' % int(by * 1e6))\n\
             \x20   time.sleep(0.002)\n\
             {COMPLETE}"
        ),
    );
    sandbox
        .run_plan("plan.md", &agent, &["--quiet", "--idle-timeout", "2"])
        .assert_code(0);
    let extended = event_stream(&sandbox, "plan.md")
        .into_iter()
        .filter(|event| event["event"] == "idle-deadline-extended")
        .count();
    assert!(
        (1..=6).contains(&extended),
        "{extended} idle-deadline-extended events in about 2 s"
    );
}
