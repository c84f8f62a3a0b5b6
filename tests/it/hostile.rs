//! The adversarial cases of issue 23 (docs/reliability.md, "Adversarial cases (issue 23)"): an
//! agent that kills or stops the watchdog, escapees that must not survive a SIGKILLed
//! handler, a watchdog that must neither block on a full stderr nor write after the prompt,
//! and `status` saying what of an attempt still runs. Each test failed before its fix.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::*;

const PLAN: &str = "plan.md";

fn one_phase() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    sandbox
}

fn spawn_run(sandbox: &Sandbox, agent: &Path, extra: &[&str]) -> Child {
    let mut args = vec![
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        agent.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    sandbox.spawn(&args)
}

fn read_state(sandbox: &Sandbox) -> Option<Value> {
    serde_json::from_slice(&sandbox.state_bytes(PLAN)?).ok()
}

/// Shell that finds the handler's watchdog the way a hostile agent would — a child of
/// `$PPID` named `ash-watchdog` (or, before issue 23, with the hidden argument in its
/// command line) — and sends it `signal`, writing its pid to `victim`.
fn attack_watchdog(signal: &str, victim: &str) -> String {
    format!(
        r#"for p in /proc/[0-9]*; do
  parent=$(awk '{{print $4}}' "$p/stat" 2>/dev/null)
  [ "$parent" = "$PPID" ] || continue
  if [ "$(cat "$p/comm" 2>/dev/null)" = ash-watchdog ] || tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q __ai-session-handler-watchdog; then
    echo "${{p#/proc/}}" > '{victim}'
    kill -{signal} "${{p#/proc/}}"
  fi
done
"#
    )
}

/// Shell that waits (30 s at most) until `$PPID` has a watchdog other than the one in
/// `victim`.
fn await_new_watchdog(victim: &str) -> String {
    format!(
        r#"give_up=$(( $(date +%s) + 30 ))
while [ "$(date +%s)" -lt "$give_up" ]; do
  for p in /proc/[0-9]*; do
    [ "${{p#/proc/}}" = "$(cat '{victim}')" ] && continue
    [ "$(awk '{{print $4}}' "$p/stat" 2>/dev/null)" = "$PPID" ] || continue
    [ "$(cat "$p/comm" 2>/dev/null)" = ash-watchdog ] && break 2
  done
  sleep 0.05
done
"#
    )
}

/// Runs the handler with its output in files (a watchdog left stopped could hold a pipe open
/// for ever), waiting for its exit with a deadline.
fn run_to_files(sandbox: &Sandbox, mut command: Command) -> Run {
    let (out, err) = (sandbox.path("run.out"), sandbox.path("run.err"));
    let mut child = command
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn handler");
    let exited = wait_until(PATIENCE, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the handler did not exit");
    }
    let status = child.wait().unwrap();
    let stderr = fs::read_to_string(&err).unwrap();
    Run {
        code: status.code().unwrap_or(-1),
        stdout: fs::read_to_string(&out).unwrap(),
        stderr: without_progress(&stderr),
        raw_stderr: stderr,
    }
}

fn run_command(sandbox: &Sandbox, agent: &Path) -> Command {
    let mut command = sandbox.command();
    command
        .args(["run", "--plan", PLAN, "--quiet", "--agent-cmd"])
        .arg(agent);
    command
}

fn pid_in(sandbox: &Sandbox, name: &str) -> u32 {
    fs::read_to_string(sandbox.path(name))
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid")
}

fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

fn events(sandbox: &Sandbox) -> Vec<Value> {
    fs::read_to_string(sandbox.state_dir(PLAN).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn transcript(sandbox: &Sandbox) -> String {
    let files = sandbox.artifacts(PLAN, "transcripts");
    assert_eq!(files.len(), 1, "{files:?}");
    String::from_utf8_lossy(&fs::read(&files[0]).expect("transcript")).into_owned()
}

// ---------------------------------------------------------------------------------------
// Item 3: an agent kills (or stops) the watchdog
// ---------------------------------------------------------------------------------------

/// The agent SIGKILLs the watchdog: the handler notices at once, starts a new one that knows
/// the worker's group, and says so in the transcript, the event stream, the outcome and
/// `status`.
#[test]
fn a_killed_watchdog_is_replaced_and_the_loss_is_recorded() {
    let sandbox = one_phase();
    let victim = at(&sandbox, "victim");
    let agent = agent(
        &sandbox,
        &format!(
            "{}{}echo '<phase-complete>done</phase-complete>'\n",
            attack_watchdog("KILL", &victim),
            await_new_watchdog(&victim)
        ),
    );
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(0);
    let lost = pid_in(&sandbox, "victim");

    let trailer = transcript(&sandbox);
    let line = trailer
        .lines()
        .find(|line| line.starts_with("watchdog_lost: "))
        .unwrap_or_else(|| panic!("no watchdog_lost line in the trailer:\n{trailer}"));
    assert!(
        line.starts_with(&format!(
            "watchdog_lost: the watchdog (pid {lost}) was killed by SIGKILL; a new watchdog (pid "
        )),
        "{line}"
    );
    let event = events(&sandbox)
        .into_iter()
        .find(|event| event["event"] == "watchdog-lost")
        .expect("a watchdog-lost event");
    assert_eq!(event["pid"], lost);
    assert_eq!(event["cause"], "killed");
    assert_eq!(event["code"], 9);
    assert!(event["replaced_by"].as_u64().is_some(), "{event}");
    assert!(event["attempt_id"].is_string(), "{event}");

    let state = sandbox.state(PLAN);
    assert_eq!(state["committed_outcomes"][0]["watchdog_losses"], 1);
    let outcome = read_json(&sandbox.artifacts(PLAN, "outcomes")[0]);
    assert_eq!(outcome["watchdog_losses"], 1);
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        "last run watchdog: lost 1 time(s) during the attempt (its transcript trailer says how, and whether a new one took over)",
    );
    sandbox.assert_no_survivors();
}

/// After the agent killed the watchdog, a SIGKILL of the handler still leaves nothing
/// running: the replacement stops the worker and its grandchild.
#[test]
fn after_the_watchdog_was_killed_a_sigkilled_handler_still_leaves_nothing() {
    let sandbox = one_phase();
    let victim = at(&sandbox, "victim");
    let agent = agent(
        &sandbox,
        &format!(
            "{}{}(trap '' TERM; exec sleep 600) >/dev/null 2>&1 &\ntrap '' TERM\ntouch '{}'\nwhile :; do sleep 1; done\n",
            attack_watchdog("KILL", &victim),
            await_new_watchdog(&victim),
            at(&sandbox, "READY")
        ),
    );
    let mut handler = spawn_run(&sandbox, &agent, &["--quiet"]);
    wait_running(&sandbox, PLAN, "READY");
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    sandbox.assert_no_survivors();
    // `--retry-stopped` is not refused by a live worker: nothing is left.
    let done = agent_completing(&sandbox);
    let retry = sandbox.run_plan(PLAN, &done, &["--quiet", "--retry-stopped"]);
    retry.assert_code(0);
}

fn agent_completing(sandbox: &Sandbox) -> PathBuf {
    sandbox.script(
        "done-agent",
        "cat >/dev/null\necho '<phase-complete>done</phase-complete>'\n",
    )
}

/// A watchdog stopped with SIGSTOP protects nothing: the handler kills it and starts a new
/// one, the same as for a killed one.
#[test]
fn a_stopped_watchdog_is_killed_and_replaced() {
    let sandbox = one_phase();
    let victim = at(&sandbox, "victim");
    let agent = agent(
        &sandbox,
        &format!(
            "{}{}echo '<phase-complete>done</phase-complete>'\n",
            attack_watchdog("STOP", &victim),
            await_new_watchdog(&victim)
        ),
    );
    let run = run_to_files(&sandbox, run_command(&sandbox, &agent));
    run.assert_code(0);
    let lost = pid_in(&sandbox, "victim");
    assert!(!alive(lost), "the stopped watchdog {lost} was left behind");
    let trailer = transcript(&sandbox);
    assert!(
        trailer.contains(&format!(
            "watchdog_lost: the watchdog (pid {lost}) was stopped by SIGSTOP (the handler killed it); a new watchdog (pid "
        )),
        "{trailer}"
    );
    sandbox.assert_no_survivors();
}

/// When no new watchdog can be started, the attempt is stopped (nothing would stop its
/// worker if the handler died now): `execution-io-failed`, saying why.
#[cfg(feature = "failpoints")]
#[test]
fn an_attempt_whose_watchdog_cannot_be_replaced_is_stopped() {
    let sandbox = one_phase();
    let victim = at(&sandbox, "victim");
    let agent = agent(
        &sandbox,
        &format!(
            "{}touch '{}'\nwhile :; do sleep 1; done\n",
            attack_watchdog("KILL", &victim),
            at(&sandbox, "READY")
        ),
    );
    let mut command = run_command(&sandbox, &agent);
    command.env("FAILPOINTS", "watchdog-replace=return");
    let run = run_to_files(&sandbox, command);
    run.assert_code(4);
    let lost = pid_in(&sandbox, "victim");
    let summary = format!(
        "attempt execution IO failed: no watchdog protects the worker any more: the watchdog (pid {lost}) was killed by SIGKILL; no new watchdog could be started: injected failure at failpoint watchdog-replace"
    );
    assert!(
        run.stderr
            .lines()
            .any(|line| line == format!("execution-io-failed: {summary}")),
        "{}",
        run.stderr
    );
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "execution-io-failed");
    assert_eq!(state["stop"]["message"], summary.as_str());
    let event = events(&sandbox)
        .into_iter()
        .find(|event| event["event"] == "watchdog-lost")
        .expect("a watchdog-lost event");
    assert!(event["replaced_by"].is_null());
    assert_eq!(
        event["error"],
        "injected failure at failpoint watchdog-replace"
    );
    assert!(transcript(&sandbox).contains("watchdog_lost: "));
    sandbox.assert_no_survivors();
}

// ---------------------------------------------------------------------------------------
// Item 4: no escapee survives a SIGKILLed handler
// ---------------------------------------------------------------------------------------

/// Escapees of every kind the handler's own sweep kills on Ctrl-C: a `setsid` child of the
/// live agent, a double-forked daemon (re-parented to the handler), and one that also
/// cleared its environment (no token to find it by). After `kill -9` of the handler the
/// watchdog stops them all.
#[test]
fn no_escapee_survives_a_sigkilled_handler() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        &format!(
            "setsid sleep 301 &\n( setsid sleep 302 & )\nenv -i setsid sh -c 'echo $$ > {pidfile}; exec sleep 303' &\nwhile [ ! -s '{pidfile}' ]; do sleep 0.01; done\ntouch '{ready}'\nwhile :; do sleep 1; done\n",
            pidfile = at(&sandbox, "cleared.pid"),
            ready = at(&sandbox, "READY")
        ),
    );
    let mut handler = spawn_run(&sandbox, &agent, &["--quiet"]);
    wait_running(&sandbox, PLAN, "READY");
    let cleared = pid_in(&sandbox, "cleared.pid");
    assert!(alive(cleared));
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    sandbox.assert_no_survivors();
    assert!(
        wait_until(PATIENCE, || !alive(cleared)),
        "the escapee without the token ({cleared}) survived"
    );
    let event = events(&sandbox)
        .into_iter()
        .find(|event| event["event"] == "watchdog-stopped")
        .expect("a watchdog-stopped record");
    assert_eq!(event["handler_pid"], handler.id());
    assert!(
        event["escaped"]
            .as_array()
            .is_some_and(|pids| pids.len() >= 3),
        "{event}"
    );
}

/// A handler killed after the worker started but before it told the watchdog the worker's
/// group still leaves nothing: the watchdog was told the attempt before the spawn and finds
/// the worker by the token it carries.
#[test]
fn a_handler_killed_right_after_the_spawn_leaves_no_worker() {
    let sandbox = one_phase();
    // It does not wait for its prompt: the handler writes that only after the registration.
    let agent = sandbox.script(
        "agent",
        &format!(
            "echo $$ > '{pidfile}.new'\nmv '{pidfile}.new' '{pidfile}'\nwhile :; do sleep 1; done\n",
            pidfile = at(&sandbox, "worker.pid")
        ),
    );
    let mut command = run_command(&sandbox, &agent);
    // The handler stops for a minute between the spawn and the registration of the group.
    command.env("FAILPOINTS", "worker-spawned=sleep(60000)");
    let mut handler = command.spawn().expect("start the handler");
    assert!(
        wait_until(PATIENCE, || sandbox.path("worker.pid").exists()),
        "the worker never started"
    );
    let worker = pid_in(&sandbox, "worker.pid");
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    assert!(
        wait_until(PATIENCE, || !alive(worker)),
        "the worker ({worker}) survived its handler"
    );
    sandbox.assert_no_survivors();
}

/// The watchdog's last word never keeps it alive: with the handler's stderr a full pipe that
/// nobody reads, it still stops the worker and exits.
#[test]
fn the_watchdog_exits_although_its_stderr_is_a_full_pipe() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        &format!(
            "head -c 400000 /dev/zero | tr '\\0' x >&2\ntouch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    // Not --quiet: the agent's stderr is echoed to the handler's, a pipe the test never
    // reads, which fills up.
    let mut handler = spawn_run(&sandbox, &agent, &[]);
    wait_running(&sandbox, PLAN, "READY");
    handler.kill().expect("SIGKILL the handler");
    let _ = handler.wait();
    sandbox.assert_no_survivors();
    drop(handler);
}

/// On a terminal the watchdog writes nothing: it would land after the shell's prompt, the
/// handler being dead. What it did is in the event stream (and `status`).
#[test]
fn the_watchdog_writes_nothing_on_a_terminal() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        &format!(
            "touch '{}'\nwhile :; do sleep 1; done\n",
            at(&sandbox, "READY")
        ),
    );
    let screen = sandbox.path("screen.out");
    // The terminal stays open until the test removes `HOLD`, so whatever the watchdog wrote
    // after the handler's death (the "prompt") is on the screen by then.
    sandbox.write("HOLD", "");
    let command = format!(
        "{BIN} run --plan {PLAN} --agent-cmd {} --quiet; echo PROMPT; while [ -e HOLD ]; do sleep 0.05; done",
        agent.display()
    );
    let mut terminal = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script");
    wait_running(&sandbox, PLAN, "READY");
    let handler = read_state(&sandbox).expect("state")["active_attempt"]["process"]["pid"]
        .as_u64()
        .and_then(|worker| parent_of(worker as u32))
        .expect("the worker's parent is the handler");
    kill(Pid::from_raw(handler as i32), Signal::SIGKILL).expect("SIGKILL the handler");
    // Nothing of the run is left (the watchdog included) once only the holding shell runs.
    assert!(
        wait_until(PATIENCE, || sandbox
            .survivors()
            .iter()
            .all(|pid| !is_watchdog(*pid) && parent_of(*pid) != Some(handler))),
        "the run's processes did not end"
    );
    assert!(
        wait_until(PATIENCE, || {
            fs::read(&screen).is_ok_and(|text| String::from_utf8_lossy(&text).contains("PROMPT"))
        }),
        "the shell never went on"
    );
    fs::remove_file(sandbox.path("HOLD")).unwrap();
    assert!(
        wait_until(PATIENCE, || matches!(terminal.try_wait(), Ok(Some(_)))),
        "script did not end"
    );
    sandbox.assert_no_survivors();
    let text = String::from_utf8_lossy(&fs::read(&screen).unwrap()).into_owned();
    assert!(text.contains("PROMPT"), "{text:?}");
    assert!(
        !text.contains("watchdog"),
        "the watchdog wrote to the terminal:\n{text:?}"
    );
    assert!(
        events(&sandbox)
            .iter()
            .any(|event| event["event"] == "watchdog-stopped"),
        "no watchdog-stopped record"
    );
}

/// When the handler and its watchdog die together (`kill -9` of both), `status` says which
/// processes of the abandoned attempt still run — the recorded worker and an escapee that
/// left its group — so they can be stopped before a retry.
#[test]
fn status_names_what_of_an_abandoned_attempt_still_runs() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        &format!(
            "setsid sh -c 'echo $$ > {pidfile}; exec sleep 301' &\nwhile [ ! -s '{pidfile}' ]; do sleep 0.01; done\ntouch '{ready}'\nexec sleep 600\n",
            pidfile = at(&sandbox, "escapee.pid"),
            ready = at(&sandbox, "READY")
        ),
    );
    let mut handler = spawn_run(&sandbox, &agent, &["--quiet"]);
    wait_running(&sandbox, PLAN, "READY");
    kill_watchdog(&sandbox);
    handler.kill().expect("SIGKILL the handler");
    handler.wait().expect("reap the handler");
    let state = sandbox.state(PLAN);
    let worker = state["active_attempt"]["process"]["pid"].as_u64().unwrap() as u32;
    let escapee = pid_in(&sandbox, "escapee.pid");
    let mut pids = [worker, escapee];
    pids.sort_unstable();

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!(
            "attempt processes still running: 2 (pids {}, {}) carry its attempt id; stop them before retrying",
            pids[0], pids[1]
        ),
    );
    let json = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    let report: Value = serde_json::from_str(&json.stdout).expect("status --json");
    assert_eq!(
        report["active_attempt"]["live_processes"],
        serde_json::json!(pids)
    );
    for pid in pids {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    sandbox.assert_no_survivors();
    let status = sandbox.run(&["status", "--plan", PLAN]);
    assert!(
        !status.stdout.contains("still running: "),
        "{}",
        status.stdout
    );
}

// ---------------------------------------------------------------------------------------
// Item 7: the agent inherits no descriptor of the handler's caller
// ---------------------------------------------------------------------------------------

/// A caller that leaves descriptors open without close-on-exec (fds 5 and 7 here, as a job
/// server or a harness would) does not pass them to the agent: it gets stdin, stdout and
/// stderr, and the script its shell reads.
#[test]
fn the_agent_inherits_no_descriptor_of_the_callers() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let sandbox = one_phase();
    let listing = at(&sandbox, "fds.txt");
    let agent = agent(
        &sandbox,
        &format!("ls -l /proc/$$/fd > '{listing}'\necho '<phase-complete>done</phase-complete>'\n"),
    );
    let leaked_a = fs::File::create(sandbox.path("leaked-a")).unwrap();
    let leaked_b = fs::File::create(sandbox.path("leaked-b")).unwrap();
    let (a, b) = (leaked_a.as_raw_fd(), leaked_b.as_raw_fd());
    let mut command = sandbox.command();
    command
        .args(["run", "--plan", PLAN, "--quiet", "--agent-cmd"])
        .arg(&agent);
    // SAFETY: dup2 is async-signal-safe; it leaves the copies without close-on-exec.
    unsafe {
        command.pre_exec(move || {
            for (from, to) in [(a, 5), (b, 7)] {
                if nix::libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let run = Run::from_output(command.output().expect("run"));
    run.assert_code(0);
    let fds = fs::read_to_string(&listing).expect("the agent listed its descriptors");
    assert!(
        !fds.contains("leaked-a") && !fds.contains("leaked-b"),
        "the agent inherited the caller's descriptors:\n{fds}"
    );
    let numbers: Vec<u32> = fds
        .lines()
        .filter_map(|line| line.split(" -> ").next()?.rsplit(' ').next()?.parse().ok())
        .collect();
    for number in [5, 7] {
        assert!(
            !numbers.contains(&number),
            "fd {number} reached the agent:\n{fds}"
        );
    }
    drop((leaked_a, leaked_b));
}

// ---------------------------------------------------------------------------------------
// Item 1: an agent cannot make the plan's state unreadable
// ---------------------------------------------------------------------------------------

/// A 12 MiB `<phase-blocked>` body of control bytes (JSON escapes each as six) used to make a
/// 151 MB `state.json` the reader refused: `status`, `check` and every `run` then exited 5.
/// Now the state holds an excerpt, the outcome the whole text, and everything goes on.
#[test]
fn a_huge_result_body_cannot_make_the_state_unreadable() {
    let sandbox = one_phase();
    let body_bytes = 12 << 20;
    let agent = agent(
        &sandbox,
        &format!(
            "if [ -e '{done}' ]; then echo '<phase-complete>done</phase-complete>'; exit 0; fi\ntouch '{done}'\nprintf '<phase-blocked>'\nhead -c {body_bytes} /dev/zero | tr '\\0' '\\001'\nprintf '</phase-blocked>\\n'\n",
            done = at(&sandbox, "ONCE")
        ),
    );
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(2);
    let size = fs::metadata(sandbox.state_path(PLAN)).unwrap().len();
    assert!(size < 1 << 20, "state.json is {size} bytes");
    let state = sandbox.state(PLAN);
    let message = state["stop"]["message"].as_str().unwrap();
    let outcome_path = state["last_run"]["outcome_path"].as_str().unwrap();
    assert!(
        message.ends_with(&format!(
            "[… cut at 16384 of {body_bytes} bytes; the full text is in {outcome_path}]"
        )),
        "{}",
        &message[message.len() - 300..]
    );
    assert_eq!(state["last_run"]["summary"], message);
    let outcome = read_json(Path::new(outcome_path));
    assert_eq!(outcome["summary"].as_str().unwrap().len(), body_bytes);

    sandbox.run(&["status", "--plan", PLAN]).assert_code(0);
    let agent_arg = agent.to_str().unwrap();
    sandbox
        .run(&["check", "--plan", PLAN, "--agent-cmd", agent_arg])
        .assert_code(0);
    let retry = sandbox.run_plan(PLAN, &agent, &["--quiet", "--retry-stopped"]);
    retry.assert_code(0);
    assert_eq!(retry.stdout, "runner-complete: all phases complete\n");
}

/// A state an earlier version wrote with such a body (over the old 64 MiB read limit) is
/// readable, and the next write cuts it down.
#[test]
fn a_state_poisoned_by_an_earlier_version_is_readable_and_healed() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        &format!(
            "if [ -e '{done}' ]; then echo '<phase-complete>done</phase-complete>'; exit 0; fi\ntouch '{done}'\necho '<phase-blocked>short</phase-blocked>'\n",
            done = at(&sandbox, "ONCE")
        ),
    );
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(2);
    let mut state = sandbox.state(PLAN);
    let huge = "\u{1}".repeat(5_800_000);
    state["stop"]["message"] = huge.clone().into();
    state["last_run"]["summary"] = huge.into();
    let text = serde_json::to_string_pretty(&state).unwrap();
    assert!(text.len() > 64 << 20, "{} bytes", text.len());
    fs::write(sandbox.state_path(PLAN), text).unwrap();

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    let retry = sandbox.run_plan(PLAN, &agent, &["--quiet", "--retry-stopped"]);
    retry.assert_code(0);
    let size = fs::metadata(sandbox.state_path(PLAN)).unwrap().len();
    assert!(size < 1 << 20, "state.json is still {size} bytes");
}

// ---------------------------------------------------------------------------------------
// Item 6: no write follows a symbolic link out of the plan workspace
// ---------------------------------------------------------------------------------------

/// Each generated directory and file shipped as a link (as a cloned repository could) is
/// refused before anything is written: exit 5, one line naming it, nothing where it points.
#[test]
fn a_generated_directory_or_file_that_is_a_link_is_refused() {
    let probe = one_phase();
    let key_dir = probe.state_dir(PLAN);
    let key = key_dir.file_name().unwrap().to_str().unwrap().to_owned();
    let keyed = format!(".ai-session-handler/plans/{key}");
    let cases: Vec<(String, bool)> = [
        (".ai-session-handler".to_owned(), true),
        (".ai-session-handler/plans".to_owned(), true),
        (keyed.clone(), true),
    ]
    .into_iter()
    .chain(["prompts", "transcripts", "outcomes"].map(|dir| (format!("{keyed}/{dir}"), true)))
    .chain(
        ["events.jsonl", "events.jsonl.1", "state.json"]
            .map(|file| (format!("{keyed}/{file}"), false)),
    )
    .collect();
    for (relative, directory) in cases {
        let relative = relative.as_str();
        let sandbox = one_phase();
        let agent = agent_completing(&sandbox);
        let outside = tempfile::tempdir().unwrap();
        let target = if directory {
            outside.path().to_path_buf()
        } else {
            let file = outside.path().join("elsewhere");
            fs::write(&file, "").unwrap();
            file
        };
        let link = sandbox.path(relative);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
        run.assert_code(5);
        assert_eq!(
            run.stderr,
            format!(
                "error: {}: is a symbolic link; ai-session-handler writes its generated files only into real directories under the plan workspace (remove it, or replace it with a {})\n",
                link.display(),
                if directory {
                    "directory"
                } else {
                    "regular file"
                }
            ),
            "{relative}"
        );
        let written: Vec<_> = fs::read_dir(outside.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        let expected: Vec<std::ffi::OsString> = if directory {
            vec![]
        } else {
            vec!["elsewhere".into()]
        };
        assert_eq!(written, expected, "{relative}: written through the link");
        if !directory {
            assert_eq!(fs::read_to_string(&target).unwrap(), "", "{relative}");
        }
        assert!(sandbox.artifacts(PLAN, "prompts").is_empty(), "{relative}");
    }
}

/// A generated directory an agent replaces with a link mid-run is not written through: the
/// outcome cannot be written (the attempt stays unresolved, exit 4), and nothing lands where
/// the link points.
#[test]
fn a_generated_directory_replaced_by_a_link_mid_run_is_not_written_through() {
    let sandbox = one_phase();
    let outside = tempfile::tempdir().unwrap();
    let outcomes = sandbox.state_dir(PLAN).join("outcomes");
    let agent = agent(
        &sandbox,
        &format!(
            "rmdir '{outcomes}' && ln -s '{outside}' '{outcomes}'\necho '<phase-complete>done</phase-complete>'\n",
            outcomes = outcomes.display(),
            outside = outside.path().display()
        ),
    );
    let run = sandbox.run_plan(PLAN, &agent, &["--quiet"]);
    run.assert_code(4);
    assert!(
        run.stderr.contains("a symbolic link is on the way"),
        "{}",
        run.stderr
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    assert_eq!(sandbox.state(PLAN)["active_attempt"]["status"], "running");
}

// ---------------------------------------------------------------------------------------
// Item 8: smaller things a user trips over
// ---------------------------------------------------------------------------------------

/// `--retries` beyond what can be counted names the range instead of "a non-negative
/// integer" (which 4294967296 is).
#[test]
fn too_many_retries_names_the_maximum() {
    let sandbox = one_phase();
    let agent = agent_completing(&sandbox);
    let run = sandbox.run_plan(PLAN, &agent, &["--retries", "4294967296"]);
    run.assert_code(5);
    assert_eq!(
        run.stderr,
        "error: invalid value '4294967296' for '--retries <N>': expected a whole number from 0 to 4294967294, got '4294967296'; see --help\n"
    );
    assert!(sandbox.state_bytes(PLAN).is_none());
}

/// A config saved with a UTF-8 byte order mark is read like a plan with one.
#[test]
fn a_config_with_a_byte_order_mark_is_read() {
    let sandbox = one_phase();
    let agent = agent_completing(&sandbox);
    sandbox.write(
        ".ai-session-handler/config.json",
        format!(
            "\u{feff}{{\"agent_cmd\": {}}}\n",
            serde_json::to_string(agent.to_str().unwrap()).unwrap()
        ),
    );
    let run = sandbox.run(&["run", "--plan", PLAN, "--quiet"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
}

// ---------------------------------------------------------------------------------------
// Item 5: `watch` is hardened like `run` and `status`
// ---------------------------------------------------------------------------------------

fn stream_path(sandbox: &Sandbox) -> PathBuf {
    sandbox.state_dir(PLAN).join("events.jsonl")
}

/// An agent that waits for `GO` (after touching `STARTED`), then completes.
fn go_agent(sandbox: &Sandbox) -> PathBuf {
    agent(
        sandbox,
        "touch STARTED\nwhile [ ! -f GO ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
    )
}

fn spawn_quiet_run(sandbox: &Sandbox, agent: &Path) -> Child {
    spawn_run(sandbox, agent, &["--quiet"])
}

/// `watch` with its stdout in `watch.out` (read while it runs).
fn spawn_watch(sandbox: &Sandbox) -> (Child, PathBuf) {
    let screen = sandbox.path("watch.out");
    let child = sandbox
        .command()
        .args(["watch", "--plan", PLAN])
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, screen)
}

fn screen_has(screen: &Path, text: &str) -> bool {
    fs::read_to_string(screen).is_ok_and(|shown| shown.contains(text))
}

/// A FIFO, a sparse giant or a link as `events.jsonl` is refused at once (it used to block in
/// `open` for ever, or read gigabytes into memory).
#[test]
fn watch_refuses_a_fifo_a_giant_or_a_linked_stream_at_once() {
    let sandbox = one_phase();
    let dir = sandbox.state_dir(PLAN);
    fs::create_dir_all(&dir).unwrap();
    let path = stream_path(&sandbox);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let run = wait_for_exit(sandbox.spawn(&["watch", "--plan", PLAN]), PATIENCE);
    run.assert_code(5);
    assert_eq!(
        run.stderr,
        format!(
            "error: {}: cannot read the event stream: not a regular file (a FIFO)\n",
            path.display()
        )
    );
    fs::remove_file(&path).unwrap();
    fs::File::create(&path).unwrap().set_len(2 << 30).unwrap();
    let run = wait_for_exit(sandbox.spawn(&["watch", "--plan", PLAN]), PATIENCE);
    run.assert_code(5);
    assert!(
        run.stderr.contains(
            "cannot read the event stream: 2147483648 bytes is over the 67108864-byte limit"
        ),
        "{}",
        run.stderr
    );
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let run = wait_for_exit(sandbox.spawn(&["watch", "--plan", PLAN]), PATIENCE);
    run.assert_code(5);
    assert!(run.stderr.contains("is a symbolic link"), "{}", run.stderr);
}

/// 50 MB without a newline before a run: `watch` keeps at most a bounded line in memory and
/// still follows the run that starts after it (it used to buffer the whole line, and glue the
/// run's first record onto it).
#[test]
fn watch_follows_a_run_after_a_huge_partial_line_with_bounded_memory() {
    let sandbox = one_phase();
    fs::create_dir_all(sandbox.state_dir(PLAN)).unwrap();
    fs::write(stream_path(&sandbox), "x".repeat(50 << 20)).unwrap();
    let (watch, screen) = spawn_watch(&sandbox);
    assert!(wait_until(PATIENCE, || screen_has(
        &screen,
        "waiting for a run of this plan to start"
    )));
    let peak_kib = || -> u64 {
        fs::read_to_string(format!("/proc/{}/status", watch.id()))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find(|line| line.starts_with("VmHWM:"))
                    .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    };
    let peak = peak_kib();
    assert!(peak < 40 << 10, "watch peaked at {peak} KiB");
    let agent = go_agent(&sandbox);
    let run = spawn_quiet_run(&sandbox, &agent);
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    watched.assert_code(0);
    let shown = fs::read_to_string(&screen).unwrap();
    assert!(shown.contains("\nrun started: "), "{shown}");
    assert!(shown.ends_with("run finished: exit 0\n"), "{shown}");
}

/// A run whose handler is dead but whose pid now belongs to another process (pid reuse,
/// simulated): `watch` does not replay it as in progress, and follows the real next run.
#[test]
fn watch_is_not_fooled_by_a_reused_pid() {
    let sandbox = one_phase();
    fs::create_dir_all(sandbox.state_dir(PLAN)).unwrap();
    let mut impostor = Command::new("sleep").arg("600").spawn().unwrap();
    let dead_run = serde_json::json!({
        "at": "2026-12-01T12:00:00.000Z", "run_id": "dead-run", "attempt_id": null,
        "event": "run-started", "pid": impostor.id(), "version": "0.0.0", "args": [],
        "plan": "/old/plan.md", "phases": 1, "completed": 0
    });
    fs::write(stream_path(&sandbox), format!("{dead_run}\n")).unwrap();
    let (watch, screen) = spawn_watch(&sandbox);
    assert!(wait_until(PATIENCE, || screen_has(
        &screen,
        "waiting for a run of this plan to start"
    )));
    let agent = go_agent(&sandbox);
    let run = spawn_quiet_run(&sandbox, &agent);
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    let _ = impostor.kill();
    let _ = impostor.wait();
    watched.assert_code(0);
    let shown = fs::read_to_string(&screen).unwrap();
    assert!(!shown.contains("/old/plan.md"), "{shown}");
    assert!(shown.ends_with("run finished: exit 0\n"), "{shown}");
}

/// The run-started record of a run in progress is in `events.jsonl.1` (the stream rotated at
/// 8 MiB): `watch` started then still finds and follows it.
#[test]
fn watch_started_after_a_rotation_finds_the_run_in_progress() {
    let sandbox = one_phase();
    let agent = go_agent(&sandbox);
    fs::create_dir_all(sandbox.state_dir(PLAN)).unwrap();
    // Fill the stream so that the run's first record still fits and its second rotates it.
    let plan_path = fs::canonicalize(sandbox.path(PLAN)).unwrap();
    let longest_start = serde_json::json!({
        "at": "2026-12-01T12:00:00.000Z", "run_id": uuid::Uuid::nil().to_string(),
        "attempt_id": null, "event": "run-started", "pid": 4_194_304u32,
        "version": env!("CARGO_PKG_VERSION"),
        "args": [BIN, "run", "--plan", PLAN, "--agent-cmd", agent.to_str().unwrap(), "--quiet"],
        "plan": plan_path, "phases": 1, "completed": 0
    })
    .to_string()
    .len() as u64
        + 1;
    let filler_line = "{\"run_id\":\"old\",\"event\":\"filler\"}\n";
    let room = (8u64 << 20) - longest_start;
    // Whole filler lines, then one line of at least one `x` that makes up the rest exactly
    // (whatever the remainder, which depends on the length of the binary's path).
    let mut filler = filler_line.repeat(((room - 2) / filler_line.len() as u64) as usize);
    filler.push_str(&"x".repeat((room as usize) - filler.len() - 1));
    filler.push('\n');
    fs::write(stream_path(&sandbox), filler).unwrap();
    let run = spawn_quiet_run(&sandbox, &agent);
    assert!(wait_until(PATIENCE, || sandbox.path("STARTED").exists()));
    let rotated = sandbox.state_dir(PLAN).join("events.jsonl.1");
    assert!(
        wait_until(PATIENCE, || fs::read_to_string(&rotated)
            .is_ok_and(|text| text.contains("\"run-started\""))),
        "the run's start did not end up in the rotated file"
    );
    let (watch, screen) = spawn_watch(&sandbox);
    assert!(
        wait_until(PATIENCE, || screen_has(&screen, "run started: ")),
        "watch did not find the run in progress: {:?}",
        fs::read_to_string(&screen)
    );
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    watched.assert_code(0);
    let shown = fs::read_to_string(&screen).unwrap();
    assert!(shown.ends_with("run finished: exit 0\n"), "{shown}");
}

/// The stream is deleted or truncated in place (a copy-truncate) while `watch` follows: it
/// reads on, labels the later phases right and sees the run finish with exit 0 (it used to
/// say "gone without finishing", exit 4).
#[test]
fn watch_survives_a_deleted_or_truncated_stream() {
    for damage in ["delete", "truncate"] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(2));
        let agent = agent(
            &sandbox,
            "phase=$(ls STARTED-* 2>/dev/null | wc -l)\ntouch STARTED-$phase\nwhile [ ! -f GO-$phase ]; do sleep 0.05; done\necho '<phase-complete>done</phase-complete>'\n",
        );
        let (watch, screen) = spawn_watch(&sandbox);
        let run = spawn_quiet_run(&sandbox, &agent);
        assert!(wait_until(PATIENCE, || sandbox.path("STARTED-0").exists()
            && screen_has(&screen, "phase-1 (1/2) Step 1 · attempt 1")));
        let path = stream_path(&sandbox);
        match damage {
            "delete" => fs::remove_file(&path).unwrap(),
            _ => fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap(),
        }
        sandbox.write("GO-0", "");
        assert!(wait_until(PATIENCE, || sandbox.path("STARTED-1").exists()));
        sandbox.write("GO-1", "");
        wait_for_exit(run, PATIENCE).assert_code(0);
        let watched = wait_for_exit(watch, PATIENCE);
        let shown = fs::read_to_string(&screen).unwrap();
        watched.assert_code(0);
        assert!(
            shown.contains("phase-2 (2/2) Step 2 · attempt 1"),
            "{damage}: {shown}"
        );
        assert!(
            shown.ends_with("run finished: exit 0\n"),
            "{damage}: {shown}"
        );
    }
}

/// `watch … | head -1`: the reader goes away; `watch` ends without a panic or a backtrace.
#[test]
fn watch_ends_quietly_when_its_reader_goes_away() {
    use std::io::{BufRead, BufReader};
    let sandbox = one_phase();
    let mut watch = sandbox.spawn(&["watch", "--plan", PLAN]);
    let mut first = String::new();
    BufReader::new(watch.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "waiting for a run of this plan to start\n");
    // The reader is gone (dropped above); the next line has nowhere to go.
    let agent = go_agent(&sandbox);
    let run = spawn_quiet_run(&sandbox, &agent);
    sandbox.write("GO", "");
    wait_for_exit(run, PATIENCE).assert_code(0);
    let watched = wait_for_exit(watch, PATIENCE);
    assert!(
        !watched.raw_stderr.contains("panicked"),
        "{}",
        watched.raw_stderr
    );
    assert_eq!(watched.code, 141, "{}", watched.raw_stderr);
}

/// Escape sequences in the plan's path (and any text of the stream) reach the terminal
/// escaped, not as control characters.
#[test]
fn watch_escapes_control_characters_from_the_stream() {
    let sandbox = Sandbox::new();
    let plan = "pl\u{1b}]0;owned\u{7}an.md";
    sandbox.write(plan, plan_with_phases(1));
    let agent = agent_completing(&sandbox);
    let screen = sandbox.path("watch.out");
    let watch = sandbox
        .command()
        .args(["watch", "--plan", plan])
        .stdout(fs::File::create(&screen).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(PATIENCE, || screen_has(
        &screen,
        "waiting for a run"
    )));
    let run = sandbox.run_plan(plan, &agent, &["--quiet"]);
    run.assert_code(0);
    wait_for_exit(watch, PATIENCE).assert_code(0);
    let shown = fs::read_to_string(&screen).unwrap();
    let started = shown
        .lines()
        .find(|line| line.starts_with("run started: "))
        .unwrap_or_else(|| panic!("{shown:?}"));
    assert!(
        !started.contains('\u{1b}') && !started.contains('\u{7}'),
        "{started:?}"
    );
    assert!(started.contains("owned"), "{started:?}");
}

/// The last line of an attempt's output is its result block: neither the event stream's
/// progress nor `watch` shows it as the agent's last line (issue 22, item 5).
#[test]
fn a_result_block_is_never_shown_as_the_last_line() {
    let sandbox = one_phase();
    let agent = agent(
        &sandbox,
        "echo 'working on it'\necho '<phase-complete>ok</phase-complete>'\n",
    );
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(0);
    let last_lines: Vec<Value> = events(&sandbox)
        .into_iter()
        .filter(|event| event["event"] == "output-progress")
        .map(|event| event["last_line"].clone())
        .collect();
    assert!(!last_lines.is_empty());
    for line in &last_lines {
        assert_eq!(line, "working on it", "{last_lines:?}");
    }
}
