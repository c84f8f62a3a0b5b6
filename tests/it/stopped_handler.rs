//! A stopped handler is not a hang (docs/reliability.md, "A stopped handler"): a person's
//! Ctrl-Z suspends the whole run until it is continued; any other stop — an agent, a Verify
//! check or a hook running `kill -STOP $PPID` — is ended by the watchdog within a bound, and
//! the run's deadlines are enforced.

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::*;

const PLAN: &str = "plan.md";

/// The state letter of `/proc/<pid>/stat` (`T` when stopped).
fn state_of(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// The state letters of the live members of process group `pgid`.
fn group_states(pgid: u32) -> Vec<char> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let group: u32 = fields.nth(1)?.parse().ok()?;
            (group == pgid && state != 'Z').then_some(state)
        })
        .collect()
}

/// Every member of the worker's group is stopped — or waits in `D` for a child that is (a
/// `vfork` parent whose child was stopped before its `exec`).
fn group_suspended(pgid: u32) -> bool {
    let states = group_states(pgid);
    states.contains(&'T') && states.iter().all(|state| matches!(state, 'T' | 'D'))
}

fn continued_records(sandbox: &Sandbox) -> Vec<Value> {
    event_stream(sandbox, PLAN)
        .into_iter()
        .filter(|event| event["event"] == "handler-continued")
        .collect()
}

#[test]
fn an_agent_that_stops_its_handler_is_still_timed_out() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = agent(&sandbox, "kill -STOP $PPID\nexec sleep 300\n");
    let child = sandbox.spawn_plan(PLAN, &agent, &["--timeout", "2"]);
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(4);
    assert_has_line(
        &run.stderr,
        "timeout: agent command timed out after 2 seconds",
    );
    sandbox.assert_no_survivors();
    let continued = continued_records(&sandbox);
    assert!(!continued.is_empty(), "no handler-continued record");
    assert_eq!(continued[0]["limit_seconds"], 1.0);
}

#[test]
fn a_check_that_stops_its_handler_is_still_timed_out() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        "# Plan\n\nIntent.\n\n## Phase 1: One\n\n### Workspace\n\n.\n\n### Verify\n\n```sh\nkill -STOP $PPID\nexec sleep 300\n```\n",
    );
    let agent = control_agent(&sandbox);
    let child = sandbox.spawn_plan(PLAN, &agent, &["--verify-timeout", "2"]);
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(4);
    sandbox.assert_no_survivors();
    assert!(!continued_records(&sandbox).is_empty());
}

#[test]
fn a_sigtstp_sent_by_a_process_does_not_stop_the_handler() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let ready = sandbox.path("ready");
    let go = sandbox.path("go");
    let agent = agent(
        &sandbox,
        &format!(
            "touch {}\nwhile [ ! -f {} ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
            ready.display(),
            go.display()
        ),
    );
    let child = sandbox.spawn_plan(PLAN, &agent, &[]);
    wait_running(&sandbox, PLAN, "ready");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTSTP).unwrap();
    fs::write(&go, "").unwrap();
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(0);
    assert!(
        continued_records(&sandbox).is_empty(),
        "the handler was stopped"
    );
}

/// Ctrl-Z typed on the run's terminal, in an interactive bash on a pseudo-terminal (util-linux
/// `script`): the handler and the agent stop and stay stopped — the watchdog leaves a person's
/// suspension alone — until `fg`; then the run completes.
#[test]
fn ctrl_z_suspends_the_handler_with_its_worker_until_fg() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let go = sandbox.path("go");
    let agent = agent(
        &sandbox,
        &format!(
            "echo $$ > {pid}.tmp && mv {pid}.tmp {pid}\nwhile [ ! -f {go} ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
            pid = sandbox.path("agent.pid").display(),
            go = go.display()
        ),
    );
    let mut terminal = Command::new("script")
        .args(["-qfc", "bash --norc --noprofile -i", "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .env("TERM", "dumb")
        .env("HISTFILE", "/dev/null")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script");
    let mut keys = terminal.stdin.take().unwrap();
    let mut type_keys = |text: &str| {
        keys.write_all(text.as_bytes()).unwrap();
        keys.flush().unwrap();
    };
    type_keys(&format!(
        "{BIN} run --plan {PLAN} --agent-cmd {}\n",
        agent.display()
    ));
    let agent_pid = sandbox.path("agent.pid");
    assert!(
        wait_until(PATIENCE, || agent_pid.exists()),
        "the agent never ran"
    );
    let agent_pid: u32 = fs::read_to_string(&agent_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let handler: u32 = event_stream(&sandbox, PLAN)
        .iter()
        .find(|event| event["event"] == "run-started")
        .and_then(|event| event["pid"].as_u64())
        .expect("run-started names the handler") as u32;
    type_keys("\x1a");
    // The agent leads the worker's group.
    assert!(
        wait_until(PATIENCE, || state_of(handler) == Some('T')
            && group_suspended(agent_pid)),
        "Ctrl-Z did not suspend the handler ({:?}) and its agent's group ({:?})",
        state_of(handler),
        group_states(agent_pid)
    );
    // Longer than the watchdog lets any other stop last.
    assert!(
        !wait_until(Duration::from_secs(3), || state_of(handler) != Some('T')
            || !group_suspended(agent_pid)),
        "the suspension was ended"
    );
    fs::write(&go, "").unwrap();
    type_keys("fg\n");
    let finished = || {
        event_stream(&sandbox, PLAN)
            .into_iter()
            .find(|event| event["event"] == "run-finished")
    };
    assert!(
        wait_until(PATIENCE, || finished().is_some()),
        "the run did not go on after fg"
    );
    assert_eq!(finished().unwrap()["exit_code"], 0);
    type_keys("exit\n");
    drop(keys);
    assert!(
        wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_)))),
        "the shell did not exit"
    );
    assert!(continued_records(&sandbox).is_empty());
    sandbox.assert_no_survivors();
}
