//! Small edges of what the run writes and shows: a failed check's output with no newline in
//! its last bytes, a torn last line in `events.jsonl`, a hand-made agent status, a linked
//! `hooks.log` (docs/cli.md, docs/plan-format.md "Verify").

use std::fs;
use std::path::Path;
use std::process::Stdio;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::common::*;

const PLAN: &str = "plan.md";

#[test]
fn a_failing_check_without_a_newline_in_its_last_bytes_shows_them() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        "# Plan\n\nIntent.\n\n## Phase 1: One\n\n### Workspace\n\n.\n\n### Verify\n\n```sh\necho start\nhead -c 20000 /dev/zero | tr '\\0' x\nprintf END\nexit 1\n```\n",
    );
    let prompt = sandbox.path("prompt.txt");
    // Saves its prompt: the next one carries the failed check's tail.
    let agent = sandbox.script(
        "agent",
        &format!(
            "cat > {}\necho '<phase-complete>done</phase-complete>'\n",
            prompt.display()
        ),
    );
    let run = sandbox.run_plan(PLAN, &agent, &[]);
    run.assert_code(4);
    assert_has_line(&run.stderr, "verify check 1 output (last 1 line):");
    let shown = run
        .stderr
        .lines()
        .find(|line| line.starts_with('…'))
        .unwrap_or_else(|| panic!("no tail line in:\n{}", run.stderr));
    assert!(shown.ends_with("xxxEND"), "{shown}");
    assert_eq!(shown.chars().count(), 1 + 1024);
    let again = sandbox.run_plan(PLAN, &agent, &["--retry-stopped"]);
    again.assert_code(4);
    let text = fs::read_to_string(&prompt).unwrap();
    assert!(!text.contains("output_tail: none"), "{text}");
    assert!(text.contains("xxxEND"), "{text}");
}

/// `watch` waits for a run, with a torn record (a writer killed mid-line) at the end of the
/// stream: the next run's records start on a line of their own, so it sees them.
#[test]
fn a_torn_last_line_does_not_swallow_the_next_runs_start() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    fs::create_dir_all(sandbox.state_dir(PLAN)).unwrap();
    let stream = sandbox.state_dir(PLAN).join("events.jsonl");
    fs::write(
        &stream,
        "{\"at\":\"2026-12-01T12:00:00.000Z\",\"run_id\":\"old\",\"attempt_id\":null,\"event\":\"outp",
    )
    .unwrap();
    let screen = sandbox.path("watch.out");
    let watch = sandbox
        .command()
        .args(["watch", "--plan", PLAN])
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(PATIENCE, || fs::read_to_string(&screen)
        .is_ok_and(
            |shown| shown.contains("waiting for a run of this plan to start")
        )));
    let agent = control_agent(&sandbox);
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    watched.assert_code(0);
    let shown = fs::read_to_string(&screen).unwrap();
    assert!(shown.contains("\nrun started: "), "{shown}");
    let text = fs::read_to_string(&stream).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().ends_with("\"event\":\"outp"));
    for line in lines {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|error| panic!("{error}: {line}"));
    }
}

/// A status in a hand-made `events.jsonl` is shown as the protocol lets an agent set one:
/// one printable line of at most 200 characters.
#[test]
fn status_cuts_a_hand_made_agent_status_as_the_protocol_does() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "hang");
    let child = sandbox.spawn_plan(PLAN, &agent, &[]);
    wait_running(&sandbox, PLAN, "ctl/ready-phase-1");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = wait_for_exit(child, PATIENCE);
    sandbox.assert_no_survivors();
    let attempt = sandbox.state(PLAN)["active_attempt"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let record = json!({
        "at": "2026-12-01T12:00:00.000Z", "run_id": "r", "attempt_id": attempt,
        "event": "activity", "text": format!("{}\u{1b}[2J", "w".repeat(1 << 20)),
        "since": "2026-12-01T12:00:00.000Z"
    });
    let stream = sandbox.state_dir(PLAN).join("events.jsonl");
    let mut text = fs::read_to_string(&stream).unwrap();
    text.push_str(&format!("{record}\n"));
    fs::write(&stream, text).unwrap();
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    let line = status
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("activity: "))
        .unwrap_or_else(|| panic!("no activity line in:\n{}", status.stdout));
    let shown = line.trim_start().trim_start_matches("activity: ");
    let text = shown.split(" (since ").next().unwrap();
    assert_eq!(text.chars().count(), 200, "{line}");
    assert!(text.ends_with("w…"), "{line}");
}

#[test]
fn a_linked_hooks_log_is_refused_with_a_warning_naming_it() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let dir = sandbox.state_dir(PLAN);
    fs::create_dir_all(&dir).unwrap();
    let outside = sandbox.path("outside.log");
    std::os::unix::fs::symlink(&outside, dir.join("hooks.log")).unwrap();
    let hook = sandbox.script("loud-hook", "echo from the hook\n");
    sandbox.write(
        ".ai-session-handler/config.json",
        json!({"hooks": [{"on": ["run-finished"], "command": hook.display().to_string()}]})
            .to_string(),
    );
    let agent = control_agent(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(0);
    let log = dir.join("hooks.log");
    assert_has_line(
        &run.stderr,
        &format!(
            "warning: {} is a symbolic link, never written through: the hooks' output is not kept (remove it, or replace it with a file)",
            log.display()
        ),
    );
    assert!(!Path::new(&outside).exists(), "written through the link");
    assert!(!run.stderr.contains("WARN"), "{}", run.stderr);
}
