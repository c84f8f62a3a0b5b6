//! What hooks and Verify checks start never outlives a SIGKILLed handler, however long ago the
//! hook that started it ended (docs/reliability.md, "The watchdog"); and a handler started by
//! a hook runs no hooks of its own (docs/cli.md, "Notifications").

use std::fs;
use std::path::Path;
use std::process::Child;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::*;

const PLAN: &str = "plan.md";

fn config(sandbox: &Sandbox, config: Value) {
    sandbox.write(
        ".ai-session-handler/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
}

/// A hook that leaves a daemon as ssh-agent does — a new session, its own streams — which
/// writes its pid to `pid_file`, and exits once the daemon is ready.
fn daemon_hook(sandbox: &Sandbox, name: &str, pid_file: &Path) -> String {
    sandbox
        .script(
            name,
            &format!(
                "setsid sh -c 'echo $$ > {0}.tmp && mv {0}.tmp {0}; exec sleep 300' </dev/null >/dev/null 2>&1 &\nwhile [ ! -f {0} ]; do sleep 0.01; done\n",
                pid_file.display()
            ),
        )
        .display()
        .to_string()
}

fn alive(pid_file: &Path) -> bool {
    fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.trim().parse::<i32>().ok())
        .is_some_and(|pid| kill(Pid::from_raw(pid), None).is_ok())
}

fn sigkill(child: &Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("SIGKILL the handler");
}

/// The hook ran to its end and its group was released (its block is written after that).
fn hook_logged(sandbox: &Sandbox) -> bool {
    fs::read_to_string(sandbox.state_dir(PLAN).join("hooks.log"))
        .is_ok_and(|log| log.contains("--- exited with code 0"))
}

#[test]
fn a_daemon_a_hook_left_during_a_wait_dies_with_a_sigkilled_handler() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let daemon = sandbox.path("daemon.pid");
    config(
        &sandbox,
        json!({
            "retry": {"max_attempts": 2, "backoff_seconds": 120},
            "hooks": [{"on": ["wait-started"], "command": daemon_hook(&sandbox, "daemon-hook", &daemon)}]
        }),
    );
    // Fails: the retry waits 120 s, nothing of the run is in a process group meanwhile.
    let agent = agent(&sandbox, "exit 7\n");
    let child = sandbox.spawn_plan(PLAN, &agent, &[]);
    assert!(
        wait_until(PATIENCE, || alive(&daemon) && hook_logged(&sandbox)),
        "the hook never left its daemon"
    );
    sigkill(&child);
    let _ = wait_for_exit(child, PATIENCE);
    sandbox.assert_no_survivors();
}

#[test]
fn a_daemon_a_phase_complete_hook_left_dies_when_the_handler_is_killed_during_run_finished() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let daemon = sandbox.path("daemon.pid");
    let started = sandbox.path("finished-hook-started");
    let blocking = sandbox.script(
        "blocking-hook",
        &format!("touch {}\nexec sleep 300\n", started.display()),
    );
    config(
        &sandbox,
        json!({"hooks": [
            {"on": ["phase-complete"], "command": daemon_hook(&sandbox, "daemon-hook", &daemon)},
            {"on": ["run-finished"], "command": blocking.display().to_string(), "timeout_seconds": 300}
        ]}),
    );
    let agent = control_agent(&sandbox);
    let child = sandbox.spawn_plan(PLAN, &agent, &[]);
    assert!(
        wait_until(PATIENCE, || started.exists()),
        "the run-finished hook never ran"
    );
    sigkill(&child);
    let _ = wait_for_exit(child, PATIENCE);
    sandbox.assert_no_survivors();
}

/// Handlers SIGKILLed at random moments while hooks and Verify checks start daemons: nothing
/// of any run survives. `ASH_HOOK_KILL_ITERATIONS` raises the count (scripts/crash-soak.sh).
#[test]
fn sigkills_at_random_moments_during_hooks_and_checks_leave_no_process() {
    let iterations = env_number("ASH_HOOK_KILL_ITERATIONS").unwrap_or(4);
    let seed = env_number("ASH_HOOK_KILL_SEED").unwrap_or(0x5eed_0004);
    let mut rng = SplitMix64(seed);
    for iteration in 0..iterations {
        let sandbox = Sandbox::new();
        let check = "setsid sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 &\nsleep 0.2\n";
        sandbox.write(
            PLAN,
            format!(
                "# Plan\n\nIntent.\n\n## Phase 1: One\n\n### Workspace\n\n.\n\n### Verify\n\n```sh\n{check}```\n\n## Phase 2: Two\n\n### Workspace\n\n.\n\n### Verify\n\n```sh\n{check}```\n"
            ),
        );
        let daemon = sandbox.path("daemon.pid");
        let hook = daemon_hook(&sandbox, "daemon-hook", &daemon);
        config(
            &sandbox,
            json!({"hooks": [{"on": ["phase-complete", "run-finished"], "command": hook}]}),
        );
        let agent = control_agent(&sandbox);
        let child = sandbox.spawn_plan(PLAN, &agent, &[]);
        // Once the first daemon exists, somewhere in the next ~600 ms of hooks and checks.
        assert!(
            wait_until(PATIENCE, || daemon.exists()),
            "iteration {iteration}: no hook ran"
        );
        let delay = rng.below(600);
        std::thread::sleep(std::time::Duration::from_millis(delay));
        sigkill(&child);
        let _ = wait_for_exit(child, PATIENCE);
        let gone = wait_until(PATIENCE, || sandbox.survivors().is_empty());
        assert!(
            gone,
            "iteration {iteration} (seed {seed}, {delay} ms): processes survived: {:?}",
            sandbox.survivors()
        );
    }
}

/// The outer run's hook starts a handler on a plan of a workspace of its own (the outer one's
/// lock is held until its hooks end) whose config has the same hook.
#[test]
fn a_handler_started_by_a_hook_runs_no_hooks_and_says_so() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    sandbox.write("nested/AGENTS.md", "# nested workspace\n");
    let nested_plan = sandbox.write("nested/plan.md", plan_with_phases(1));
    let agent = control_agent(&sandbox);
    let count = sandbox.path("hook-count");
    // Capped, so that a handler that does recurse still ends.
    let hook = sandbox.script(
        "nesting-hook",
        &format!(
            "n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 ))\necho $n > {count}\n[ $n -le 5 ] || exit 0\n{BIN} run --plan {plan} --agent-cmd {agent} 2> {nested}-$n\n",
            count = count.display(),
            plan = nested_plan.display(),
            agent = agent.display(),
            nested = sandbox.path("nested-stderr").display(),
        ),
    );
    let hooks = json!({"hooks": [{"on": ["run-finished"], "command": hook.display().to_string()}]});
    config(&sandbox, hooks.clone());
    sandbox.write(
        "nested/.ai-session-handler/config.json",
        serde_json::to_string_pretty(&hooks).unwrap(),
    );
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
    assert_eq!(fs::read_to_string(&count).unwrap().trim(), "1");
    let nested = fs::read_to_string(sandbox.path("nested-stderr-1")).unwrap();
    let warning = "warning: 1 hook(s) not run: this handler was started by a hook (AISH_EVENT is set), and a hook's handler runs no hooks of its own";
    assert_has_line(&nested, warning);
    let outer: Vec<Value> = event_stream(&sandbox, PLAN)
        .into_iter()
        .filter(|event| event["event"] == "run-started")
        .collect();
    assert!(outer[0].get("hooks_off").is_none(), "{:#}", outer[0]);
    let inner: Vec<Value> = fs::read_dir(sandbox.path("nested/.ai-session-handler/plans"))
        .unwrap()
        .flat_map(|entry| {
            let text = fs::read_to_string(entry.unwrap().path().join("events.jsonl")).unwrap();
            text.lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .filter(|event| event["event"] == "run-started")
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        inner[0]["hooks_off"],
        warning.trim_start_matches("warning: ")
    );
    sandbox.assert_no_survivors();
}
