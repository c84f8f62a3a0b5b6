//! Unattended runs (docs/unattended-runs.md): retries, rate-limit waits and fallback agents,
//! driven by a scripted fake provider. Waits are kept to a few seconds.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::*;

const PLAN: &str = "plan.md";

/// A fake provider: `agent NAME` runs, for the selected phase, the next behaviour listed in
/// `ctl/<phase>.<NAME>` (one per line, the last one repeats) and appends
/// `<phase> <NAME> <behaviour> <start time in ns>` to `ctl/launches`.
///
/// Behaviours: `complete`, `missing` (no result block), `blocked`, `exit75` (a provider's
/// 429 on stderr, then exit 75), `limit` (`rate limit reached; try again in 2s` on stdout,
/// then hang until stopped by the rate-limit pattern).
fn provider(sandbox: &Sandbox) -> PathBuf {
    let ctl = sandbox.path("ctl");
    fs::create_dir_all(&ctl).unwrap();
    let ctl = ctl.display();
    sandbox.script(
        "agent",
        &format!(
            r#"name=$1
prompt=$(cat)
phase=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_id: //p')
count_file="{ctl}/count-$phase.$name"
count=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
echo $count > "$count_file"
behaviour=complete
if [ -f "{ctl}/$phase.$name" ]; then
  behaviour=$(sed -n "${{count}}p" "{ctl}/$phase.$name")
  [ -n "$behaviour" ] || behaviour=$(tail -n 1 "{ctl}/$phase.$name")
fi
echo "$phase $name $behaviour $(date +%s%N)" >> "{ctl}/launches"
printf '%s\n' "$prompt" > "{ctl}/prompt-$phase-$count.$name"
case "$behaviour" in
  complete) echo "<phase-complete>done $phase by $name</phase-complete>" ;;
  missing) echo "worked on $phase, forgot the result" ;;
  blocked) echo '<phase-blocked>need an API key</phase-blocked>' ;;
  exit75) echo 'API Error: 429 {{"type":"rate_limit_error"}} Please try again in 1s.' >&2; exit 75 ;;
  limit) echo "rate limit reached; try again in 2s"; exec sleep 600 ;;
esac
"#
        ),
    )
}

/// Sets the behaviours of `name` for `phase`, one per attempt.
fn behave(sandbox: &Sandbox, phase: &str, name: &str, behaviours: &[&str]) {
    sandbox.write(
        &format!("ctl/{phase}.{name}"),
        format!("{}\n", behaviours.join("\n")),
    );
}

/// `(phase, agent name, behaviour, start time in ns)` of every launch, in order.
fn launches(sandbox: &Sandbox) -> Vec<(String, String, String, u128)> {
    fs::read_to_string(sandbox.path("ctl/launches"))
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            (
                fields[0].to_owned(),
                fields[1].to_owned(),
                fields[2].to_owned(),
                fields[3].parse().expect("start time"),
            )
        })
        .collect()
}

fn config(sandbox: &Sandbox, config: Value) {
    sandbox.write(
        ".ai-session-handler/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
}

fn agent_cmd(agent: &Path, name: &str) -> String {
    format!("{} {name}", agent.display())
}

fn run(sandbox: &Sandbox, agent: &Path, extra: &[&str]) -> Run {
    let primary = agent_cmd(agent, "primary");
    let mut args = vec!["run", "--plan", PLAN, "--quiet", "--agent-cmd", &primary];
    args.extend_from_slice(extra);
    let run = sandbox.run(&args);
    sandbox.assert_no_survivors();
    run
}

/// The committed outcome records, in commit order.
fn outcomes(sandbox: &Sandbox) -> Vec<Value> {
    sandbox.state(PLAN)["committed_outcomes"]
        .as_array()
        .expect("committed outcomes")
        .iter()
        .map(|entry| read_json(Path::new(entry["path"].as_str().unwrap())))
        .collect()
}

fn statuses(sandbox: &Sandbox) -> Vec<String> {
    outcomes(sandbox)
        .iter()
        .map(|outcome| outcome["status"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_agent_exiting_75_is_rate_limited_and_waited_out_with_wait() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["exit75", "complete"]);
    config(&sandbox, json!({"rate_limit": {"default_wait_seconds": 1}}));
    let run = run(&sandbox, &agent, &["--wait"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(statuses(&sandbox), ["rate-limited", "phase-complete"]);
    let first = &outcomes(&sandbox)[0];
    assert_eq!(
        first["summary"],
        "agent command exited with code 75 (temporary failure: rate limited)"
    );
    // "Please try again in 1s" is the reset time the wait is based on.
    let waiting = run
        .stderr
        .lines()
        .find(|line| line.starts_with("rate-limited: phase-1 (attempt 1 of 1): waiting until "))
        .unwrap_or_else(|| panic!("no waiting line:\n{}", run.stderr));
    assert!(
        waiting.ends_with("(reset time from the agent's output: try again in 1s); Ctrl-C stops"),
        "{waiting}"
    );
    let state = sandbox.state(PLAN);
    assert!(state.get("retry_schedule").is_none(), "{state:#}");
}

#[test]
fn without_a_policy_a_rate_limit_stops_the_run_as_any_failure() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["exit75", "complete"]);
    let run = run(&sandbox, &agent, &[]);
    run.assert_code(4);
    assert!(
        run.stderr
            .starts_with("rate-limited: agent command exited with code 75"),
        "{}",
        run.stderr
    );
    assert_eq!(launches(&sandbox).len(), 1);
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "rate-limited");
    assert!(state.get("retry_schedule").is_none(), "{state:#}");
}

#[test]
fn a_rate_limit_pattern_stops_the_group_and_the_next_attempt_waits_for_the_reset_time() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["limit", "complete"]);
    config(
        &sandbox,
        json!({"rate_limit": {"patterns": ["rate limit reached"], "max_waits": 1}}),
    );
    let run = run(&sandbox, &agent, &[]);
    run.assert_code(0);
    assert_eq!(statuses(&sandbox), ["rate-limited", "phase-complete"]);
    assert_eq!(
        outcomes(&sandbox)[0]["summary"],
        "agent output matched rate-limit pattern 'rate limit reached'"
    );
    let starts: Vec<u128> = launches(&sandbox).iter().map(|launch| launch.3).collect();
    // "try again in 2s" was printed right after the first start: the second attempt cannot
    // start before those two seconds are over.
    assert!(
        starts[1] >= starts[0] + 2_000_000_000,
        "second attempt {} ns after the first",
        starts[1] - starts[0]
    );
}

#[test]
fn three_missing_markers_exhaust_a_three_attempt_policy_with_the_usual_stop() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["missing"]);
    config(&sandbox, json!({"retry": {"backoff_seconds": 0}}));
    let run = run(&sandbox, &agent, &["--retries", "2"]);
    run.assert_code(4);
    assert_eq!(statuses(&sandbox), ["missing-marker"; 3]);
    for attempt in [2, 3] {
        assert_has_line(
            &run.stderr,
            &format!("retrying phase-1 (attempt {attempt} of 3) after missing-marker in 0 s"),
        );
    }
    let report = run
        .stderr
        .lines()
        .find(|line| line.starts_with("missing-marker: "))
        .expect("the usual failure report");
    assert_eq!(
        report,
        "missing-marker: agent output did not contain a terminal marker"
    );
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "missing-marker");
    assert!(state.get("retry_schedule").is_none(), "{state:#}");
    // The usual way on: --retry-stopped.
    behave(&sandbox, "phase-1", "primary", &["complete"]);
    run_and_complete(&sandbox, &agent, &["--retry-stopped"]);
}

fn run_and_complete(sandbox: &Sandbox, agent: &Path, extra: &[&str]) {
    let run = run(sandbox, agent, extra);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
}

#[test]
fn a_retry_prompt_says_which_attempt_it_is_and_lists_the_earlier_ones() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["missing", "complete"]);
    config(&sandbox, json!({"retry": {"backoff_seconds": 0}}));
    run_and_complete(&sandbox, &agent, &["--retries", "1"]);
    let first = fs::read_to_string(sandbox.path("ctl/prompt-phase-1-1.primary")).unwrap();
    let second = fs::read_to_string(sandbox.path("ctl/prompt-phase-1-2.primary")).unwrap();
    assert!(!first.contains("RETRY"), "{first}");
    let earlier = &outcomes(&sandbox)[0];
    for line in [
        "- Phase phase-1 was attempted before in this run; this is attempt 2 of 2.".to_owned(),
        "retry_reason: exponential backoff".to_owned(),
        format!(
            "  - attempt_id: {}",
            earlier["attempt_id"].as_str().unwrap()
        ),
        "    status: missing-marker".to_owned(),
        "    summary: agent output did not contain a terminal marker".to_owned(),
        format!(
            "    transcript_path: {}",
            earlier["artifacts"]["transcript_path"].as_str().unwrap()
        ),
    ] {
        assert_has_line(&second, &line);
    }
}

#[test]
fn a_rate_limited_primary_hands_over_to_the_fallback_then_comes_back_after_the_wait() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["exit75", "complete"]);
    behave(&sandbox, "phase-1", "fallback", &["exit75"]);
    let fallback = agent_cmd(&agent, "fallback");
    config(
        &sandbox,
        json!({"rate_limit": {
            "max_waits": 1,
            "default_wait_seconds": 1,
            "fallback_agent_cmds": [fallback]
        }}),
    );
    let run = run(&sandbox, &agent, &[]);
    run.assert_code(0);
    let order: Vec<(String, String)> = launches(&sandbox)
        .into_iter()
        .map(|launch| (launch.1, launch.2))
        .collect();
    assert_eq!(
        order,
        [
            ("primary".to_owned(), "exit75".to_owned()),
            ("fallback".to_owned(), "exit75".to_owned()),
            ("primary".to_owned(), "complete".to_owned()),
        ]
    );
    let ran: Vec<String> = outcomes(&sandbox)
        .iter()
        .map(|outcome| outcome["agent_cmd"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ran,
        [
            agent_cmd(&agent, "primary"),
            fallback.clone(),
            agent_cmd(&agent, "primary")
        ]
    );
    assert_has_line(
        &run.stderr,
        &format!(
            "rate-limited: phase-1 (attempt 1 of 1): trying fallback agent command 1 now: {fallback}"
        ),
    );
}

#[test]
fn backoff_doubles_up_to_its_cap() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(
        &sandbox,
        "phase-1",
        "primary",
        &["missing", "missing", "complete"],
    );
    config(
        &sandbox,
        json!({"retry": {"backoff_seconds": 1, "max_backoff_seconds": 1}}),
    );
    let run = run(&sandbox, &agent, &["--retries", "2"]);
    run.assert_code(0);
    assert_has_line(
        &run.stderr,
        "retrying phase-1 (attempt 2 of 3) after missing-marker in 1 s",
    );
    assert_has_line(
        &run.stderr,
        "retrying phase-1 (attempt 3 of 3) after missing-marker in 1 s (backoff capped at max_backoff_seconds)",
    );
}

#[test]
fn blocked_is_never_retried() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(&sandbox);
    behave(&sandbox, "phase-1", "primary", &["blocked", "complete"]);
    config(&sandbox, json!({"retry": {"backoff_seconds": 0}}));
    let run = run(&sandbox, &agent, &["--retries", "3", "--wait"]);
    run.assert_code(2);
    assert_eq!(run.stdout, "phase-blocked: need an API key\n");
    assert_eq!(launches(&sandbox).len(), 1);
}

/// Starts a run whose first attempt fails and is retried after a 30 s backoff, and waits
/// until the handler says it is waiting (its stderr goes to `stderr.txt`).
fn start_waiting_run(sandbox: &Sandbox) -> (Child, PathBuf) {
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = provider(sandbox);
    behave(sandbox, "phase-1", "primary", &["missing"]);
    config(
        sandbox,
        json!({"retry": {"backoff_seconds": 30, "max_backoff_seconds": 30}}),
    );
    let stderr = fs::File::create(sandbox.path("stderr.txt")).unwrap();
    let child = sandbox
        .command()
        .args([
            "run",
            "--plan",
            PLAN,
            "--quiet",
            "--retries",
            "1",
            "--agent-cmd",
        ])
        .arg(agent_cmd(&agent, "primary"))
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn handler");
    let waiting = wait_until(PATIENCE, || {
        fs::read_to_string(sandbox.path("stderr.txt")).is_ok_and(|text| {
            text.contains("retrying phase-1 (attempt 2 of 2) after missing-marker in 30 s\n")
        })
    });
    assert!(waiting, "the handler never said it waits");
    (child, agent)
}

#[test]
fn a_signal_during_a_wait_ends_the_run_at_once_and_keeps_the_schedule() {
    let sandbox = Sandbox::new();
    let (mut child, _) = start_waiting_run(&sandbox);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let stderr = fs::read_to_string(sandbox.path("stderr.txt")).unwrap();
    assert_has_line(
        &stderr,
        "error: interrupted by SIGINT while waiting to run phase-1 again; the retry stays scheduled in the state, and a later run with the same retry policy resumes it",
    );
    let state = sandbox.state(PLAN);
    assert_eq!(state["stop"]["reason"], "missing-marker");
    assert_eq!(state["retry_schedule"]["phase_id"], "phase-1");
    assert_eq!(state["retry_schedule"]["attempt"], 2);
    assert_eq!(state["retry_schedule"]["reason"], "backoff");
    assert_eq!(launches(&sandbox).len(), 1);
}

#[test]
fn a_killed_handler_loses_no_wait_and_a_rerun_under_the_same_policy_resumes_it() {
    let sandbox = Sandbox::new();
    let (mut child, agent) = start_waiting_run(&sandbox);
    child.kill().unwrap();
    child.wait().unwrap();
    let state = sandbox.state(PLAN);
    let not_before = state["retry_schedule"]["not_before"]
        .as_str()
        .unwrap()
        .to_owned();

    // Without the policy the stop stays a stop.
    let plain = run(&sandbox, &agent, &[]);
    plain.assert_code(5);
    assert!(
        plain
            .stderr
            .starts_with("error: phase phase-1 is stopped: missing-marker"),
        "{}",
        plain.stderr
    );

    // Under the same policy the wait resumes (shortened here by editing the schedule, as a
    // clock would after 30 s), without --retry-stopped.
    let soon = chrono::Utc::now() + chrono::Duration::seconds(1);
    let mut edited = state.clone();
    edited["retry_schedule"]["not_before"] = soon.format("%Y-%m-%dT%H:%M:%SZ").to_string().into();
    fs::write(
        sandbox.state_path(PLAN),
        serde_json::to_string_pretty(&edited).unwrap(),
    )
    .unwrap();
    assert_ne!(not_before, edited["retry_schedule"]["not_before"]);
    behave(&sandbox, "phase-1", "primary", &["complete"]);
    let resumed = run(&sandbox, &agent, &["--retries", "1"]);
    resumed.assert_code(0);
    assert!(
        resumed.stderr.lines().any(|line| line.starts_with(
            "resuming the schedule: retrying phase-1 (attempt 2 of 2) after missing-marker in "
        )),
        "{}",
        resumed.stderr
    );
    assert_eq!(statuses(&sandbox), ["missing-marker", "phase-complete"]);
    let second = launches(&sandbox)[1].3;
    let due = chrono::DateTime::parse_from_rfc3339(
        edited["retry_schedule"]["not_before"].as_str().unwrap(),
    )
    .unwrap()
    .timestamp_nanos_opt()
    .unwrap() as u128;
    assert!(
        second >= due,
        "the resumed attempt started before its not-before time"
    );
}

/// The issue's acceptance scenario: five phases against a provider that rate-limits phase 2
/// twice and fails phase 4 once complete on their own, every attempt on record.
#[test]
fn an_unattended_five_phase_run_gets_past_two_rate_limits_and_one_failure() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(5));
    let agent = provider(&sandbox);
    behave(
        &sandbox,
        "phase-2",
        "primary",
        &["exit75", "exit75", "complete"],
    );
    behave(&sandbox, "phase-4", "primary", &["missing", "complete"]);
    config(
        &sandbox,
        json!({
            "retry": {"max_attempts": 2, "backoff_seconds": 0},
            "rate_limit": {"max_waits": 2, "default_wait_seconds": 1}
        }),
    );
    let run = run(&sandbox, &agent, &[]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(
        statuses(&sandbox),
        [
            "phase-complete",
            "rate-limited",
            "rate-limited",
            "phase-complete",
            "phase-complete",
            "missing-marker",
            "phase-complete",
            "phase-complete"
        ]
    );
    for (outcome, attempt) in outcomes(&sandbox).iter().zip([1, 1, 2, 3, 1, 1, 2, 1]) {
        assert_eq!(outcome["phase_attempt"], attempt, "{outcome:#}");
        assert!(Path::new(outcome["artifacts"]["transcript_path"].as_str().unwrap()).is_file());
    }
    let state = sandbox.state(PLAN);
    assert_eq!(
        state["completed_phase_ids"],
        json!(["phase-1", "phase-2", "phase-3", "phase-4", "phase-5"])
    );
}

#[test]
fn status_and_check_show_a_scheduled_retry_and_the_effective_policy() {
    let sandbox = Sandbox::new();
    let (mut child, agent) = start_waiting_run(&sandbox);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let state = sandbox.state(PLAN);
    let not_before = state["retry_schedule"]["not_before"]
        .as_str()
        .unwrap()
        .to_owned();
    // The schedule records the n it was made under: `run --retries 1` is 2 attempts, whatever
    // the config says.
    assert_eq!(state["retry_schedule"]["max_attempts"], 2);

    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!(
            "retry scheduled: phase-1 attempt 2 of 2 not before {not_before} (exponential backoff); a run with the same retry policy resumes it"
        ),
    );
    let json: Value =
        serde_json::from_str(&sandbox.run(&["status", "--plan", PLAN, "--json"]).stdout).unwrap();
    assert_eq!(
        json["retry_schedule"],
        json!({
            "phase_id": "phase-1",
            "after": "missing-marker",
            "attempt": 2,
            "of": 2,
            "not_before": not_before,
            "reason": "backoff",
            "reason_text": "exponential backoff",
            "template_index": 0,
            "does_not_fit": null
        })
    );

    // The config alone allows one attempt (the run had --retries 1): check says the schedule
    // does not fit, and run needs --retry-stopped.
    let primary = agent_cmd(&agent, "primary");
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &primary]);
    check.assert_code(0);
    for line in [
        "retry: off (1 attempt)",
        "rate_limit: 0 patterns and exit 75; waits off; 0 fallback agent commands",
        "note: phase phase-1 is stopped: missing-marker; its scheduled retry does not fit the retry policy (attempt 2 exceeds retry.max_attempts (1)); run requires --retry-stopped",
    ] {
        assert_has_line(&check.stdout, line);
    }
    // `check --retries 1` judges as `run --retries 1` runs: the schedule fits, run resumes it.
    let check = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        &primary,
        "--retries",
        "1",
    ]);
    check.assert_code(0);
    for line in [
        "retry: up to 2 attempts on agent-failed, missing-marker, invalid-marker, multiple-markers, timeout, rate-limited, verification-failed; backoff 30 s doubling to 30 s",
        "rate_limit: 0 patterns and exit 75; waits off; 0 fallback agent commands",
        &format!(
            "note: phase phase-1 is stopped: missing-marker; a retry is scheduled (attempt 2, not before {not_before}, exponential backoff) and run resumes it"
        ),
    ] {
        assert_has_line(&check.stdout, line);
    }
    let json: Value = serde_json::from_str(
        &sandbox
            .run(&[
                "check",
                "--plan",
                PLAN,
                "--agent-cmd",
                &primary,
                "--retries",
                "1",
                "--wait",
                "--json",
            ])
            .stdout,
    )
    .unwrap();
    // The values, without the text's labels.
    assert_eq!(
        json["retry"],
        "up to 2 attempts on agent-failed, missing-marker, invalid-marker, multiple-markers, timeout, rate-limited, verification-failed; backoff 30 s doubling to 30 s"
    );
    assert_eq!(
        json["rate_limit"],
        "0 patterns and exit 75; up to 3 waits of 300 s by default, at most 21600 s each; 0 fallback agent commands"
    );
    assert_eq!(json["fallback_agent_cmds"], json!([]));
    assert!(
        json["notes"][0]
            .as_str()
            .is_some_and(|note| note.ends_with("and run resumes it")),
        "{json:#}"
    );
    // A bad --retries is a usage error, as for run.
    sandbox
        .run(&["check", "--plan", PLAN, "--retries", "-1"])
        .assert_code(5);
    config(
        &sandbox,
        json!({"retry": {"max_attempts": 2, "backoff_seconds": 30, "max_backoff_seconds": 30}}),
    );
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", &primary]);
    assert_has_line(
        &check.stdout,
        "retry: up to 2 attempts on agent-failed, missing-marker, invalid-marker, multiple-markers, timeout, rate-limited, verification-failed; backoff 30 s doubling to 30 s",
    );
    assert_has_line(
        &check.stdout,
        &format!(
            "note: phase phase-1 is stopped: missing-marker; a retry is scheduled (attempt 2, not before {not_before}, exponential backoff) and run resumes it"
        ),
    );

    // A schedule written before `max_attempts` was recorded stays readable; status then takes
    // n from the config (max_attempts 3 here, to tell it apart).
    config(
        &sandbox,
        json!({"retry": {"max_attempts": 3, "backoff_seconds": 30, "max_backoff_seconds": 30}}),
    );
    let mut old = sandbox.state(PLAN);
    old["retry_schedule"]
        .as_object_mut()
        .unwrap()
        .remove("max_attempts");
    fs::write(
        sandbox.state_path(PLAN),
        serde_json::to_string_pretty(&old).unwrap(),
    )
    .unwrap();
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        &format!(
            "retry scheduled: phase-1 attempt 2 of 3 not before {not_before} (exponential backoff); a run with the same retry policy resumes it"
        ),
    );
}

/// A scheduled retry that runs a fallback agent the config no longer has: `status` must not
/// promise that a run resumes it; it says what `check` says (issue 23).
#[test]
fn status_says_a_schedule_for_a_removed_fallback_agent_does_not_fit() {
    let sandbox = Sandbox::new();
    let (mut child, agent) = start_waiting_run(&sandbox);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(143));
    // As if the scheduled attempt were the fallback agent's, with the fallback configured.
    let mut state = sandbox.state(PLAN);
    state["retry_schedule"]["template_index"] = 1.into();
    fs::write(
        sandbox.state_path(PLAN),
        serde_json::to_string_pretty(&state).unwrap(),
    )
    .unwrap();
    let fallback = agent_cmd(&agent, "fallback");
    config(
        &sandbox,
        json!({"retry": {"backoff_seconds": 30, "max_backoff_seconds": 30},
               "rate_limit": {"fallback_agent_cmds": [fallback]}}),
    );
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    assert!(
        status
            .stdout
            .lines()
            .any(|line| line.starts_with("retry scheduled: ")
                && line.ends_with("; a run with the same retry policy resumes it")),
        "{}",
        status.stdout
    );
    // The fallback is removed from the config.
    config(
        &sandbox,
        json!({"retry": {"backoff_seconds": 30, "max_backoff_seconds": 30}}),
    );
    let status = sandbox.run(&["status", "--plan", PLAN]);
    status.assert_code(0);
    let line = status
        .stdout
        .lines()
        .find(|line| line.starts_with("retry scheduled: "))
        .expect("the schedule is shown");
    assert!(
        line.ends_with(
            "; it does not fit the config's retry policy (agent template 1 is not configured (1 template)); run requires --retry-stopped"
        ),
        "{line}"
    );
    let json: Value =
        serde_json::from_str(&sandbox.run(&["status", "--plan", PLAN, "--json"]).stdout).unwrap();
    assert_eq!(
        json["retry_schedule"]["does_not_fit"],
        "agent template 1 is not configured (1 template)"
    );
    let primary = agent_cmd(&agent, "primary");
    let check = sandbox.run(&[
        "check",
        "--plan",
        PLAN,
        "--agent-cmd",
        &primary,
        "--retries",
        "1",
    ]);
    assert!(
        check.stdout.contains("its scheduled retry does not fit the retry policy (agent template 1 is not configured (1 template)); run requires --retry-stopped"),
        "{}",
        check.stdout
    );
}
