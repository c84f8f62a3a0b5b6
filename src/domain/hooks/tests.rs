//! Unit and property tests of `domain::hooks`: the config key, the flag, the template, when
//! a hook fires and what it is told.

use super::firing::{HookFacts, HookTrigger, RunEndFacts, end_events};
use super::*;
use crate::domain::events::RunEvent;
use crate::domain::recovery::{Invocation, after_stop};
use crate::domain::retry::next_step::RetryReason;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::run_env::RunFacts;
use crate::domain::selection::RecoveryFlags;
use crate::domain::state::AttemptStatus;
use crate::domain::timestamp::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use strum::IntoEnumIterator;

/// The hooks of a config whose `hooks` key is `text`.
fn hooks(text: &str) -> Result<Vec<Hook>, String> {
    crate::domain::config::parse_config(format!(r#"{{"hooks": {text}}}"#).as_bytes())
        .map(|config| config.hooks)
        .map_err(|error| error.to_string())
}

fn error(text: &str) -> String {
    match hooks(text) {
        Ok(hooks) => panic!("expected an error for {text}, got {hooks:?}"),
        Err(message) => message,
    }
}

#[test]
fn event_names_round_trip_and_unknown_ones_list_the_known() {
    for event in HookEvent::iter() {
        assert_eq!(HookEvent::parse(event.as_str()), Ok(event));
    }
    assert_eq!(
        HookEvent::parse("phase-done").unwrap_err().to_string(),
        "unknown hook event 'phase-done'; known events: run-finished, phase-stopped, phase-complete, wait-started, wait-finished, interrupted"
    );
}

#[test]
fn a_config_entry_has_events_a_command_and_a_default_timeout() {
    let parsed = hooks(
        r#"[{"on": ["run-finished", "phase-stopped", "run-finished"], "command": "notify {plan} {status}"},
            {"on": ["phase-complete"], "command": "./hook.sh {event_file}", "timeout_seconds": 2.5}]"#,
    )
    .unwrap();
    assert_eq!(parsed.len(), 2);
    assert_eq!(
        parsed[0].on,
        [HookEvent::RunFinished, HookEvent::PhaseStopped],
        "a repeated event is kept once"
    );
    assert_eq!(parsed[0].timeout_seconds, DEFAULT_HOOK_TIMEOUT_SECONDS);
    assert_eq!(parsed[0].origin, "hooks[0]");
    assert_eq!(parsed[1].timeout_seconds, 2.5);
    assert_eq!(parsed[1].origin, "hooks[1]");
    assert!(parsed[1].runs_on(HookEvent::PhaseComplete));
    assert!(!parsed[1].runs_on(HookEvent::RunFinished));
    assert_eq!(
        parsed[0].describe(),
        "run-finished, phase-stopped: notify {plan} {status} (timeout 30 s)"
    );
    assert!(hooks("[]").unwrap().is_empty());
    assert!(hooks("null").unwrap().is_empty());
    assert!(
        crate::domain::config::parse_config(b"{}")
            .unwrap()
            .hooks
            .is_empty()
    );
}

#[test]
fn every_config_mistake_names_the_entry_and_key() {
    assert_eq!(error(r#"{"on": []}"#), "expected hooks to be a list");
    assert_eq!(error(r#"["x"]"#), "expected hooks[0] to be an object");
    assert_eq!(
        error(r#"[{"on": ["run-finished"], "command": "x", "when": 1, "also": 2}]"#),
        "unknown key 'hooks[0].also'; known keys: on, command, timeout_seconds"
    );
    assert_eq!(
        error(r#"[{"command": "x"}]"#),
        "missing required key 'hooks[0].on'"
    );
    assert!(
        error(r#"[{"on": [], "command": "x"}]"#)
            .starts_with("expected hooks[0].on to be a non-empty list of events (run-finished, ")
    );
    assert!(
        error(r#"[{"on": "run-finished", "command": "x"}]"#).starts_with("expected hooks[0].on ")
    );
    assert_eq!(
        error(r#"[{"on": [3], "command": "x"}]"#),
        "expected hooks[0].on[0] to be a string"
    );
    assert!(
        error(r#"[{"on": ["run-finished"], "command": "x"}, {"on": ["run-finished", "done"], "command": "x"}]"#)
            .starts_with("hooks[1].on[1]: unknown hook event 'done'; known events: ")
    );
    assert_eq!(
        error(r#"[{"on": ["run-finished"]}]"#),
        "missing required key 'hooks[0].command'"
    );
    assert_eq!(
        error(r#"[{"on": ["run-finished"], "command": ["notify"]}]"#),
        "expected hooks[0].command to be a string"
    );
    assert_eq!(
        error(r#"[{"on": ["run-finished"], "command": "notify {prompt_file}"}]"#),
        "hooks[0].command: unsupported command placeholder: {prompt_file} (placeholders: {plan}, {run_id}, {phase_id}, {status}, {event_file}; write {{ and }} for literal braces)"
    );
    assert_eq!(
        error(r#"[{"on": ["run-finished"], "command": "  "}]"#),
        "hooks[0].command: hook command produced an empty command"
    );
    assert_eq!(
        error(r#"[{"on": ["run-finished"], "command": "notify 'x"}]"#),
        "hooks[0].command: invalid command template quoting: missing closing quote"
    );
    for bad in ["0", "-1", "\"5\"", "null", "true"] {
        assert_eq!(
            error(&format!(
                r#"[{{"on": ["run-finished"], "command": "x", "timeout_seconds": {bad}}}]"#
            )),
            "expected hooks[0].timeout_seconds to be a finite number greater than 0",
            "{bad}"
        );
    }
}

#[test]
fn the_flag_is_one_event_then_the_whole_command() {
    let hook = parse_hook_flag("phase-stopped=notify-send 'stopped: {phase_id}' a=b").unwrap();
    assert_eq!(hook.on, [HookEvent::PhaseStopped]);
    assert_eq!(hook.command.raw(), "notify-send 'stopped: {phase_id}' a=b");
    assert_eq!(hook.origin, "--hook");
    assert_eq!(hook.timeout_seconds, DEFAULT_HOOK_TIMEOUT_SECONDS);
    assert!(
        parse_hook_flag("notify-send x")
            .unwrap_err()
            .to_string()
            .starts_with("expected EVENT=COMMAND (events: run-finished, ")
    );
    assert!(
        parse_hook_flag("finished=x")
            .unwrap_err()
            .to_string()
            .starts_with("unknown hook event 'finished'")
    );
    assert_eq!(
        parse_hook_flag("run-finished=x {workspace}")
            .unwrap_err()
            .to_string(),
        "hook command for run-finished: unsupported command placeholder: {workspace} (placeholders: {plan}, {run_id}, {phase_id}, {status}, {event_file}; write {{ and }} for literal braces)"
    );
    assert_eq!(
        parse_hook_flag("run-finished=").unwrap_err().to_string(),
        "hook command for run-finished: hook command produced an empty command"
    );
}

#[test]
fn hook_placeholders_render_inside_words_without_splitting() {
    let template = HookTemplate::parse(
        "notify --title '{status} on {phase_id}' {plan} {run_id} {event_file} {{literal}}",
    )
    .unwrap();
    let argv = template.render(&HookValues {
        plan: "/p/my plan.md",
        run_id: "run 1",
        phase_id: "phase-2",
        status: "blocked",
        event_file: "/tmp/event.json",
    });
    assert_eq!(
        argv,
        [
            "notify",
            "--title",
            "blocked on phase-2",
            "/p/my plan.md",
            "run 1",
            "/tmp/event.json",
            "{literal}"
        ]
    );
    assert_eq!(template.literal_program(), Some("notify"));
    for agent_only in [
        "{prompt_file}",
        "{workspace}",
        "{transcript_file}",
        "{state_file}",
    ] {
        assert!(HookTemplate::parse(&format!("x {agent_only}")).is_err());
    }
}

fn schedule(phase: &str, after: AttemptStatus, reason: RetryReason) -> RetrySchedule {
    RetrySchedule {
        phase_id: phase.to_owned(),
        after,
        attempt: 2,
        max_attempts: Some(3),
        waits_used: 0,
        template_index: 0,
        not_before: Timestamp::parse("2026-12-01T12:00:00Z").unwrap(),
        reason,
        rate_limited: Vec::new(),
    }
}

fn scheduled(schedule: RetrySchedule, delay_seconds: f64) -> RunEvent {
    RunEvent::RetryScheduled {
        schedule,
        delay_seconds,
        of: 3,
        template: "agent".to_owned(),
        reset_phrase: None,
        resumed: false,
    }
}

fn committed(phase: &str, status: AttemptStatus) -> RunEvent {
    RunEvent::OutcomeCommitted {
        phase_id: phase.to_owned(),
        status,
        duration_ms: 5,
        summary: "did it".to_owned(),
        stdout_bytes: 1,
        stderr_bytes: 0,
        outcome_path: "/o".to_owned(),
        transcript_path: "/t".to_owned(),
        verification: None,
        verification_failure: None,
        usage: crate::domain::token_usage::summary::UsageSummary::unknown(),
    }
}

#[test]
fn a_committed_completion_fires_phase_complete_and_nothing_else_does() {
    let mut trigger = HookTrigger::default();
    let fired = trigger
        .observe(&committed("phase-1", AttemptStatus::PhaseComplete))
        .unwrap();
    assert_eq!(fired.event, HookEvent::PhaseComplete);
    assert_eq!(fired.phase_id, "phase-1");
    assert_eq!(fired.message, "did it");
    for status in AttemptStatus::iter() {
        if status != AttemptStatus::PhaseComplete {
            assert_eq!(
                trigger.observe(&committed("phase-1", status)),
                None,
                "{status}"
            );
        }
    }
    assert_eq!(
        trigger.observe(&RunEvent::WorkerSpawned { pid: 1, pgid: 1 }),
        None
    );
    assert_eq!(
        trigger.observe(&RunEvent::RunFinished { exit_code: 0 }),
        None
    );
}

#[test]
fn only_waits_longer_than_a_minute_fire_and_their_retry_ends_them() {
    let mut trigger = HookTrigger::default();
    let short = schedule("phase-2", AttemptStatus::Timeout, RetryReason::Backoff);
    assert_eq!(trigger.observe(&scheduled(short, LONG_WAIT_SECONDS)), None);
    assert_eq!(
        trigger.observe(&RunEvent::RetryDue {
            phase_id: "phase-2".into(),
            attempt: 2
        }),
        None,
        "a short wait's end is no wait-finished"
    );
    let switch = schedule(
        "phase-2",
        AttemptStatus::RateLimited,
        RetryReason::FallbackTemplate,
    );
    assert_eq!(trigger.observe(&scheduled(switch, 600.0)), None);
    let long = schedule(
        "phase-2",
        AttemptStatus::RateLimited,
        RetryReason::ResetTime,
    );
    let started = trigger.observe(&scheduled(long, 60.5)).unwrap();
    assert_eq!(started.event, HookEvent::WaitStarted);
    assert_eq!(started.status, AttemptStatus::RateLimited);
    assert_eq!(
        started.message,
        "phase-2 (attempt 2 of 3) waits 61 s after rate-limited (reset time from the agent's output)"
    );
    let finished = trigger
        .observe(&RunEvent::RetryDue {
            phase_id: "phase-2".into(),
            attempt: 2,
        })
        .unwrap();
    assert_eq!(finished.event, HookEvent::WaitFinished);
    assert_eq!(finished.status, AttemptStatus::RateLimited);
    assert_eq!(
        trigger.observe(&RunEvent::RetryDue {
            phase_id: "phase-2".into(),
            attempt: 2
        }),
        None,
        "one wait finishes once"
    );
    let backoff = schedule(
        "phase-3",
        AttemptStatus::Timeout,
        RetryReason::BackoffCapped,
    );
    assert_eq!(
        trigger.observe(&scheduled(backoff, 120.0)).unwrap().event,
        HookEvent::WaitStarted
    );
}

#[test]
fn every_stop_but_completion_and_interruption_is_phase_stopped_unless_a_retry_follows() {
    for status in AttemptStatus::iter() {
        let facts = RunEndFacts {
            status: Some(status),
            ..RunEndFacts::default()
        };
        let expected = match status {
            AttemptStatus::PhaseComplete => vec![HookEvent::RunFinished],
            AttemptStatus::Interrupted => vec![HookEvent::Interrupted, HookEvent::RunFinished],
            _ => vec![HookEvent::PhaseStopped, HookEvent::RunFinished],
        };
        assert_eq!(end_events(&facts), expected, "{status}");
        let retrying = RunEndFacts {
            retry_scheduled: true,
            signal: Some(15),
            ..facts
        };
        assert!(
            !end_events(&retrying).contains(&HookEvent::PhaseStopped),
            "{status}: a scheduled retry needs nobody"
        );
    }
    assert_eq!(
        end_events(&RunEndFacts::default()),
        [HookEvent::RunFinished]
    );
    assert_eq!(
        end_events(&RunEndFacts {
            unresolved: true,
            status: Some(AttemptStatus::PhaseComplete),
            ..RunEndFacts::default()
        }),
        [HookEvent::PhaseStopped, HookEvent::RunFinished],
        "an unrecorded completion needs a person"
    );
    assert_eq!(
        end_events(&RunEndFacts {
            status: Some(AttemptStatus::Blocked),
            signal: Some(2),
            ..RunEndFacts::default()
        }),
        [
            HookEvent::PhaseStopped,
            HookEvent::Interrupted,
            HookEvent::RunFinished
        ],
        "a signal after a blocked decision: the stop stands, and the run was interrupted"
    );
}

#[test]
fn the_payload_is_the_record_with_the_hooks_own_keys_and_the_environment_matches() {
    let record = json!({
        "at": "2026-12-01T12:00:00.000Z",
        "run_id": "r",
        "attempt_id": "a",
        "event": "outcome-committed",
        "phase_id": "phase-2",
        "status": "blocked",
        "summary": "need a key",
    });
    let mut facts = HookFacts::new(HookEvent::PhaseStopped, record);
    facts.phase = Some(("phase-2".into(), "Second".into()));
    facts.status = Some("blocked".into());
    facts.exit_code = Some(2);
    facts.message = Some("phase-blocked: need a key".into());
    facts.reason = Some("need a key".into());
    let invocation = Invocation {
        plan: "p.md".into(),
        program: "/bin/ash".into(),
        cwd: "/p".into(),
        ..Invocation::default()
    };
    facts.next = Some(after_stop(
        &invocation,
        AttemptStatus::Blocked,
        RecoveryFlags::default(),
    ));
    let payload = facts.payload("/p/p.md", "/p/state.json");
    assert_eq!(
        payload,
        json!({
            "at": "2026-12-01T12:00:00.000Z",
            "run_id": "r",
            "attempt_id": "a",
            "event": "phase-stopped",
            "phase_id": "phase-2",
            "status": "blocked",
            "summary": "need a key",
            "plan_path": "/p/p.md",
            "state_path": "/p/state.json",
            "phase": {"id": "phase-2", "title": "Second"},
            "exit_code": 2,
            "message": "phase-blocked: need a key",
            "question": null,
            "reason": "need a key",
            "recovery": "cd /p && /bin/ash run --plan p.md --retry-stopped",
            "next": {
                "argv": ["/bin/ash", "run", "--plan", "p.md", "--retry-stopped"],
                "flags": ["--retry-stopped"],
                "why": "resolve the blocker",
                "action": "fix-and-retry",
                "answer": ["/bin/ash", "answer", "--plan", "p.md"],
                "cwd": "/p",
            },
        })
    );
    let run = RunFacts {
        plan: "/p/p.md",
        plan_workspace: "/p",
        state_file: "/p/state.json",
        run_id: "r",
        attempt_id: "a",
        execution_workspace: "/p/ws",
        ..RunFacts::default()
    };
    assert_eq!(
        facts.environment(run),
        [
            ("AISH_EVENT", "phase-stopped"),
            ("AISH_STATUS", "blocked"),
            ("AISH_EXIT_CODE", "2"),
            ("AISH_NEXT_ACTION", "fix-and-retry"),
            (
                "AISH_NEXT_COMMAND",
                "cd /p && /bin/ash run --plan p.md --retry-stopped",
            ),
            ("AISH_NEXT_WHY", "resolve the blocker"),
            ("AISH_NEXT_UNTIL", ""),
            ("AISH_NEXT_ANSWER", "/bin/ash answer --plan p.md"),
            ("AISH_PLAN", "/p/p.md"),
            ("AISH_PLAN_WORKSPACE", "/p"),
            ("AISH_STATE_FILE", "/p/state.json"),
            ("AISH_RUN_ID", "r"),
            ("AISH_ATTEMPT_ID", "a"),
            ("AISH_PHASE_ID", "phase-2"),
            ("AISH_PHASE_TITLE", "Second"),
            ("AISH_WORKSPACE", "/p/ws"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
    );
    let bare = HookFacts::new(HookEvent::WaitStarted, Value::Null);
    let environment = bare.environment(RunFacts::default());
    let value = |name: &str| {
        environment
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    assert_eq!(value("AISH_PHASE_ID"), Some(""), "no phase: empty");
    assert_eq!(value("AISH_EXIT_CODE"), Some(""), "no exit code: empty");
    assert_eq!(bare.payload("/p", "/s")["phase"], Value::Null);
}

proptest! {
    #[test]
    fn the_flag_parser_never_panics(text in ".{0,60}") {
        let _ = parse_hook_flag(&text);
    }

    #[test]
    fn a_flag_with_a_known_event_keeps_the_command_as_written(
        event in prop::sample::select(HookEvent::iter().collect::<Vec<_>>()),
        command in "[a-z][a-z0-9 ./=-]{0,30}",
    ) {
        let hook = parse_hook_flag(&format!("{event}={command}")).unwrap();
        prop_assert_eq!(hook.on, vec![event]);
        prop_assert_eq!(hook.command.raw(), command.as_str());
    }
}

#[test]
fn a_handler_started_by_a_hook_runs_none_of_its_hooks_and_says_why() {
    assert_eq!(hooks_off(false, 2), None);
    assert_eq!(hooks_off(true, 0), None, "nothing to say without hooks");
    assert_eq!(
        hooks_off(true, 2).as_deref(),
        Some(
            "2 hook(s) not run: this handler was started by a hook (AISH_EVENT is set), and a hook's handler runs no hooks of its own"
        )
    );
}
