//! What a newcomer and a calling agent trip over (docs/cli.md, docs/worker-protocol.md):
//! `check` and `run` follow a provider wrapper to its launcher, the worker's `AISH_*`
//! environment, the `--quiet` status line cleared on Ctrl-C, `watch` after and across runs,
//! and the log records of a race.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::*;
use crate::wrappers::CLAUDE_HIGH;

const PLAN: &str = "plan.md";

// ---- a wrapper's launcher, looked for before anything is written ----

/// A sandbox whose `wrappers/` holds `ai-session-handler-claude-high` (a link to the built
/// wrapper) and whose `launchers/` is empty; the PATH to use is returned with it.
fn wrapper_sandbox() -> (Sandbox, String) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    fs::create_dir_all(sandbox.path("wrappers")).unwrap();
    fs::create_dir_all(sandbox.path("launchers")).unwrap();
    std::os::unix::fs::symlink(
        CLAUDE_HIGH,
        sandbox.path("wrappers/ai-session-handler-claude-high"),
    )
    .unwrap();
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        sandbox.path("wrappers").display(),
        sandbox.path("launchers").display()
    );
    (sandbox, path)
}

fn run_with_path(sandbox: &Sandbox, path: &str, args: &[&str]) -> Run {
    Run::from_output(
        sandbox
            .command()
            .env("PATH", path)
            .args(args)
            .output()
            .expect("run handler"),
    )
}

#[test]
fn a_wrapper_whose_launcher_is_missing_is_refused_before_anything_is_written() {
    let (sandbox, path) = wrapper_sandbox();
    let tree = tree_snapshot(&sandbox.root);
    let searched = path.replace(':', ", ");
    let expected = format!(
        "error: --agent-cmd: agent program 'ai-session-handler-claude-high' starts its launcher from PATH: launcher 'claude-lean' not found in PATH (searched {searched}); install it (docs/providers.md, \"Installing the CLIs and the launchers\") or add its directory to PATH"
    );
    for command in ["check", "run"] {
        let refused = run_with_path(
            &sandbox,
            &path,
            &[
                command,
                "--plan",
                PLAN,
                "--agent-cmd",
                "ai-session-handler-claude-high",
            ],
        );
        refused.assert_code(5);
        assert_has_line(&refused.stderr, &expected);
        assert_eq!(
            tree_snapshot(&sandbox.root),
            tree,
            "{command} changed something"
        );
    }
    assert!(!sandbox.path(".ai-session-handler").exists());

    // A launcher without execute permission is refused too, and never run.
    let ran = sandbox.path("launcher-ran");
    let launcher = sandbox.write(
        "launchers/claude-lean",
        format!("#!/bin/sh\ntouch '{}'\n", ran.display()),
    );
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o644)).unwrap();
    let refused = run_with_path(
        &sandbox,
        &path,
        &[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            "ai-session-handler-claude-high",
        ],
    );
    refused.assert_code(5);
    assert_has_line(
        &refused.stderr,
        &format!(
            "error: --agent-cmd: agent program 'ai-session-handler-claude-high' starts its launcher from PATH: launcher 'claude-lean' at {} is not executable; make it executable (chmod +x) or name another program",
            launcher.display()
        ),
    );

    // Found and executable: `check` is satisfied without starting it.
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755)).unwrap();
    run_with_path(
        &sandbox,
        &path,
        &[
            "check",
            "--plan",
            PLAN,
            "--agent-cmd",
            "ai-session-handler-claude-high",
        ],
    )
    .assert_code(0);
    assert!(!ran.exists(), "check ran the launcher");
}

#[test]
fn a_wrapper_reached_through_a_renamed_link_is_followed_and_a_fallback_too() {
    let (sandbox, path) = wrapper_sandbox();
    std::os::unix::fs::symlink(CLAUDE_HIGH, sandbox.path("wrappers/my-agent")).unwrap();
    let config = sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"agent_cmd": "my-agent", "rate_limit": {"fallback_agent_cmds": ["ai-session-handler-claude-high --model x"]}}"#,
    );
    let refused = run_with_path(&sandbox, &path, &["check", "--plan", PLAN]);
    refused.assert_code(5);
    let config = config.display();
    for origin in [
        format!("{config}: agent_cmd: agent program 'my-agent'"),
        format!(
            "{config}: rate_limit.fallback_agent_cmds[0]: agent program 'ai-session-handler-claude-high'"
        ),
    ] {
        assert!(
            refused.stderr.lines().any(|line| line.contains(&origin)
                && line.contains("launcher 'claude-lean' not found in PATH")),
            "no refusal for {origin} in:\n{}",
            refused.stderr
        );
    }
}

// ---- the worker's environment: the same AISH_* facts a hook gets ----

/// The `AISH_*` lines of an `env | sort` dump.
fn aish_lines(path: &std::path::Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .lines()
        .filter(|line| {
            line.starts_with("AISH_") || line.starts_with("AI_SESSION_HANDLER_ATTEMPT_ID=")
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_worker_gets_the_run_facts_in_aish_variables_named_as_a_hook_gets_them() {
    let sandbox = Sandbox::new();
    sandbox.write(
        PLAN,
        plan_with_phases(1).replace("### Workspace\n\n.\n", "### Workspace\n\nsub\n"),
    );
    sandbox.write("sub/AGENTS.md", "# sub\n");
    let agent_env = sandbox.path("agent-env");
    let agent = agent(
        &sandbox,
        &format!(
            "env | sort > '{}'\necho '<phase-complete>ok</phase-complete>'\n",
            agent_env.display()
        ),
    );
    let hook = format!(
        "phase-complete=sh -c 'env | sort > {}'",
        sandbox.path("hook-env").display()
    );
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--hook", &hook])
        .assert_code(0);

    let prepared = event_stream(&sandbox, PLAN)
        .into_iter()
        .find(|event| event["event"] == "attempt-prepared")
        .expect("an attempt-prepared record");
    let run_id = prepared["run_id"].as_str().unwrap();
    let attempt_id = prepared["attempt_id"].as_str().unwrap();
    let root = sandbox.root.display();
    let expected = [
        format!("AISH_ATTEMPT_ID={attempt_id}"),
        "AISH_PHASE_ID=phase-1".to_owned(),
        "AISH_PHASE_TITLE=Step 1".to_owned(),
        format!("AISH_PLAN={root}/{PLAN}"),
        format!("AISH_PLAN_WORKSPACE={root}"),
        format!("AISH_RUN_ID={run_id}"),
        format!("AISH_STATE_FILE={}", sandbox.state_path(PLAN).display()),
        format!("AISH_WORKSPACE={root}/sub"),
        format!("AI_SESSION_HANDLER_ATTEMPT_ID={attempt_id}"),
    ];
    assert_eq!(aish_lines(&agent_env), expected);
    assert_ne!(
        run_id, attempt_id,
        "the invocation and the attempt have ids of their own"
    );

    // The hook, fired for the same attempt, is told the same facts under the same names.
    assert!(wait_until(PATIENCE, || sandbox.path("hook-env").exists()));
    let hook_lines = aish_lines(&sandbox.path("hook-env"));
    for line in &expected[..8] {
        assert!(
            hook_lines.contains(line),
            "the hook lacks {line}: {hook_lines:#?}"
        );
    }
}

// ---- the `--quiet` status line, really cleared on Ctrl-C ----

/// What a terminal of `width` columns shows after `bytes`: the rows, trailing blanks cut. A
/// character written past the last column wraps first (the pending wrap of xterm and the
/// Linux console); `\r`, `\n`, erase in line (`K`), cursor up/down/left/right and column
/// (`A`, `B`, `C`, `D`, `G`) are followed; other sequences (colours, modes) draw nothing.
fn screen_rows(bytes: &[u8], width: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => row += 1,
            '\x08' => col = col.min(width - 1).saturating_sub(1),
            '\x1b' => {
                if chars.peek() != Some(&'[') {
                    chars.next();
                    continue;
                }
                chars.next();
                let mut params = String::new();
                let mut end = ' ';
                for next in chars.by_ref() {
                    if next.is_ascii_alphabetic() || next == '@' || next == '~' {
                        end = next;
                        break;
                    }
                    params.push(next);
                }
                let n = params.trim_start_matches('?').parse::<usize>().ok();
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let line = &mut rows[row];
                match end {
                    'K' => match n.unwrap_or(0) {
                        0 => line.truncate(col.min(width - 1)),
                        1 => line.iter_mut().take(col + 1).for_each(|cell| *cell = ' '),
                        _ => line.clear(),
                    },
                    'A' => row = row.saturating_sub(n.unwrap_or(1).max(1)),
                    'B' => row += n.unwrap_or(1).max(1),
                    'C' => col = (col + n.unwrap_or(1).max(1)).min(width - 1),
                    'D' => col = col.min(width - 1).saturating_sub(n.unwrap_or(1).max(1)),
                    'G' => col = n.unwrap_or(1).max(1) - 1,
                    _ => {}
                }
            }
            c if c.is_control() => {}
            c => {
                if col >= width {
                    row += 1;
                    col = 0;
                }
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let line = &mut rows[row];
                while line.len() < col {
                    line.push(' ');
                }
                if line.len() == col {
                    line.push(c);
                } else {
                    line[col] = c;
                }
                col += 1;
            }
        }
    }
    rows.into_iter()
        .map(|row| row.into_iter().collect::<String>().trim_end().to_owned())
        .collect()
}

#[test]
fn the_screen_model_wraps_late_and_erases_one_row() {
    assert_eq!(screen_rows(b"abcd\r\x1b[2K", 4), [""]);
    assert_eq!(screen_rows(b"abcd^C\r\x1b[2K", 4), ["abcd", ""]);
    assert_eq!(screen_rows(b"ab^C\r\x1b[2Kdone\r\n", 5), ["done"]);
}

/// Ctrl-C typed at a terminal of `columns` while `--quiet` shows a long status line: what is
/// on screen once the handler has exited.
fn screen_after_ctrl_c(columns: usize) -> (Vec<String>, String) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let long = format!("LONG-OUTPUT {}", "x".repeat(400));
    let agent = agent(
        &sandbox,
        &format!("echo '{long}'\ntouch STARTED\nexec sleep 600\n"),
    );
    let screen = sandbox.path("screen.out");
    let command = format!(
        "stty cols {columns} rows 40; exec {BIN} run --plan {PLAN} --agent-cmd {} --quiet",
        agent.display()
    );
    let mut terminal = std::process::Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .env("TERM", "xterm")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run script");
    let drawn = || String::from_utf8_lossy(&fs::read(&screen).unwrap_or_default()).into_owned();
    let shown = wait_until(PATIENCE, || {
        sandbox.path("STARTED").exists()
            && drawn().contains("phase-1 (1/1) ")
            && drawn().contains("xxxxxxxxxx…")
    });
    // Ctrl-C: the terminal echoes `^C` where the cursor is and interrupts the handler.
    let mut keyboard = terminal.stdin.take().unwrap();
    std::io::Write::write_all(&mut keyboard, b"\x03").unwrap();
    let exited = wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = terminal.kill();
    }
    drop(keyboard);
    let _ = terminal.wait();
    let bytes = fs::read(&screen).unwrap();
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    assert!(shown && exited, "shown {shown}, exited {exited}:\n{raw:?}");
    sandbox.assert_no_survivors();
    (screen_rows(&bytes, columns), raw)
}

#[test]
fn ctrl_c_clears_the_quiet_status_line_at_80_and_150_columns() {
    for columns in [80, 150] {
        let (rows, raw) = screen_after_ctrl_c(columns);
        assert!(
            rows.iter().any(|row| row.contains("interrupted")),
            "{columns} columns: no interrupted report:\n{rows:#?}\n{raw:?}"
        );
        let left = rows.iter().find(|row| row.contains("phase-1 (1/1) "));
        assert_eq!(
            left, None,
            "{columns} columns: the status line stayed:\n{rows:#?}"
        );
        for row in &rows {
            assert!(row.chars().count() <= columns, "{row:?}");
        }
    }
}

// ---- `watch`: a stop's question or reason, after a run, and across runs ----

/// `watch --plan plan.md <extra>` with its stdout in `name`.
fn spawn_watch(sandbox: &Sandbox, name: &str, extra: &[&str]) -> (std::process::Child, PathBuf) {
    let screen = sandbox.path(name);
    let child = sandbox
        .command()
        .args(["watch", "--plan", PLAN])
        .args(extra)
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, screen)
}

fn shown(screen: &std::path::Path) -> String {
    fs::read_to_string(screen).unwrap_or_default()
}

#[test]
fn watch_started_after_a_run_says_how_it_ended_with_the_blockers_reason() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "block");
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(2);

    let (mut watch, screen) = spawn_watch(&sandbox, "watch.out", &[]);
    assert!(
        wait_until(PATIENCE, || shown(&screen).contains("waiting for a run")),
        "{}",
        shown(&screen)
    );
    let _ = watch.kill();
    let _ = watch.wait();
    let text = shown(&screen);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    let ended =
        regex::Regex::new(r"^the last run \(handler pid \d+, started \S+\) ended at \S+: exit 2$")
            .unwrap();
    assert!(ended.is_match(lines[0]), "{text}");
    assert!(lines[1].starts_with("phase-1 blocked in "), "{text}");
    assert_eq!(lines[2], "reason: need an API key");
    assert_eq!(lines[3], "waiting for a run of this plan to start");
}

#[test]
fn watch_follow_keeps_watching_across_runs_and_shows_the_question() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = control_agent(&sandbox);
    set_mode(&sandbox, "phase-1", "clarify");
    let (watch, screen) = spawn_watch(&sandbox, "watch.out", &["--follow"]);
    assert!(wait_until(PATIENCE, || shown(&screen).contains("waiting for a run")));
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(3);
    assert!(
        wait_until(PATIENCE, || shown(&screen).contains("run finished: exit 3")),
        "{}",
        shown(&screen)
    );
    set_mode(&sandbox, "phase-1", "complete");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--retry-stopped"])
        .assert_code(0);
    assert!(
        wait_until(PATIENCE, || shown(&screen).contains("run finished: exit 0")),
        "{}",
        shown(&screen)
    );
    // Still watching, for the next run, until interrupted.
    assert!(wait_until(PATIENCE, || shown(&screen).ends_with(
        "run finished: exit 0\nwaiting for a run of this plan to start\n"
    )));
    send_signal(&watch, nix::sys::signal::Signal::SIGINT);
    let ended = wait_for_exit(watch, PATIENCE);
    assert_eq!(ended.code, 130, "{}", ended.raw_stderr);
    let text = shown(&screen);
    assert_has_lines(
        &text,
        &["question: which database?", "run finished: exit 3"],
    );
    assert_eq!(text.matches("run started: ").count(), 2, "{text}");
}

// ---- logs for a race ----

fn log_records(path: &std::path::Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

#[test]
fn the_log_starts_with_who_and_what_was_admitted_and_holds_the_watchdogs_stop() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = agent(
        &sandbox,
        &format!("touch '{}'\nexec sleep 600\n", at(&sandbox, "READY")),
    );
    let log = sandbox.path("handler.log");
    let mut handler = sandbox
        .command()
        .args([
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--quiet",
        ])
        .args(["--log-level", "info", "--log-format", "json", "--log-file"])
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_running(&sandbox, PLAN, "READY");
    // A second handler racing for the plan: its log says it was refused, and why.
    let second_log = sandbox.path("second.log");
    let second = sandbox
        .command()
        .args([
            "run",
            "--plan",
            PLAN,
            "--agent-cmd",
            agent.to_str().unwrap(),
            "--quiet",
        ])
        .args(["--log-level", "info", "--log-format", "json", "--log-file"])
        .arg(&second_log)
        .output()
        .unwrap();
    assert_ne!(second.status.code(), Some(0));
    let refused = log_records(&second_log);
    assert_eq!(refused[0]["fields"]["message"], "ai-session-handler run");
    let decision = refused
        .iter()
        .find(|record| record["fields"]["message"] == "admission: refused")
        .unwrap_or_else(|| panic!("no refusal in {refused:#?}"));
    assert_eq!(
        decision["fields"]["refusal"],
        "the plan workspace lock was not taken"
    );
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    let stopped = || {
        event_stream(&sandbox, PLAN)
            .into_iter()
            .find(|event| event["event"] == "watchdog-stopped")
    };
    assert!(
        wait_until(PATIENCE, || stopped().is_some()),
        "no watchdog-stopped record"
    );
    sandbox.assert_no_survivors();
    let prepared = event_stream(&sandbox, PLAN)
        .into_iter()
        .find(|event| event["event"] == "attempt-prepared")
        .unwrap();
    let (run_id, attempt_id) = (&prepared["run_id"], &prepared["attempt_id"]);
    // events.jsonl: the watchdog's record names the invocation, not null.
    let event = stopped().unwrap();
    assert_eq!(&event["run_id"], run_id);
    assert_eq!(&event["attempt_id"], attempt_id);

    let records = log_records(&log);
    // The first record says which binary, which process and which command line.
    let first = &records[0];
    assert_eq!(first["fields"]["message"], "ai-session-handler run");
    assert_eq!(first["fields"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(first["fields"]["pid"], handler.id());
    assert!(
        first["fields"]["args"]
            .as_array()
            .is_some_and(|args| args.iter().any(|arg| arg == "--log-file")),
        "{first}"
    );
    assert_eq!(&first["span"]["run_id"], run_id);
    // The admission decision.
    let admitted = records
        .iter()
        .find(|record| record["fields"]["message"] == "admission: admitted")
        .expect("an admission record");
    assert_eq!(admitted["fields"]["first"], "next phase phase-1");
    assert_eq!(&admitted["span"]["run_id"], run_id);
    // The watchdog's stop, in the same log, in the run's and the attempt's spans.
    let watchdog = records
        .iter()
        .find(|record| record["target"] == "ai_session_handler::watchdog")
        .unwrap_or_else(|| panic!("no watchdog record in {records:#?}"));
    assert_eq!(watchdog["level"], "WARN");
    assert_eq!(&watchdog["spans"][0]["run_id"], run_id);
    assert_eq!(&watchdog["span"]["attempt_id"], attempt_id);
    assert_eq!(watchdog["fields"]["handler_pid"], handler.id());
    assert!(
        watchdog["fields"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("ended without stopping its workers")),
        "{watchdog}"
    );
}

#[test]
fn the_log_options_help_tells_the_invocation_from_the_attempt() {
    let help = Sandbox::new().run(&["run", "--help"]);
    help.assert_code(0);
    let text = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "Records carry run_id, the invocation (as in events.jsonl), and attempt_id, the attempt (the {run_id} of agent_cmd and the prompt)",
        "under the target ai_session_handler::agent",
    ] {
        assert!(text.contains(said), "{said:?} not in:\n{}", help.stdout);
    }
}
