//! Unit and property tests of `domain::retry::schedule`.

use super::*;
use crate::domain::retry::next_step::{FinishedAttempt, next_step};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn switch() -> RetrySchedule {
    RetrySchedule {
        phase_id: "phase-2".into(),
        after: AttemptStatus::RateLimited,
        attempt: 1,
        max_attempts: Some(3),
        waits_used: 0,
        template_index: 1,
        not_before: at("2026-11-30T12:00:00Z"),
        reason: RetryReason::FallbackTemplate,
        rate_limited: vec![RateLimitedTemplate {
            template_index: 0,
            until: at("2026-11-30T15:00:00Z"),
            reason: RetryReason::ResetTime,
        }],
    }
}

/// Reads and validates a standalone schedule document.
fn from_json(bytes: &[u8]) -> Result<RetrySchedule, StrictError> {
    let schedule: RetrySchedule = strict_json::from_slice(bytes)?;
    schedule.validate("")?;
    Ok(schedule)
}

/// The schedule as a standalone document: 2-space indentation, trailing newline.
fn to_json(schedule: &RetrySchedule) -> String {
    serde_json::to_string_pretty(schedule).unwrap() + "\n"
}

fn read(value: &Value) -> Result<RetrySchedule, String> {
    from_json(value.to_string().as_bytes()).map_err(|error| error.0)
}

/// Reads the schedule nested under `retry_schedule`, as the state reader will.
fn read_nested(value: &Value) -> Result<RetrySchedule, String> {
    #[derive(Deserialize)]
    struct State {
        retry_schedule: RetrySchedule,
    }
    let document = json!({ "retry_schedule": value });
    let state: State = strict_json::from_value(&document).map_err(|error| error.to_string())?;
    let schedule = state.retry_schedule;
    schedule
        .validate("retry_schedule")
        .map_err(|error| error.0)?;
    Ok(schedule)
}

fn edited(edit: impl FnOnce(&mut Value)) -> Value {
    let mut value = serde_json::to_value(switch()).unwrap();
    edit(&mut value);
    value
}

#[test]
fn writes_schema_order_and_round_trips() {
    let text = to_json(&switch());
    assert_eq!(
        text,
        r#"{
  "phase_id": "phase-2",
  "after": "rate-limited",
  "attempt": 1,
  "max_attempts": 3,
  "waits_used": 0,
  "template_index": 1,
  "not_before": "2026-11-30T12:00:00Z",
  "reason": "fallback-template",
  "rate_limited": [
    {
      "template_index": 0,
      "until": "2026-11-30T15:00:00Z",
      "reason": "reset-time"
    }
  ]
}
"#
    );
    assert_eq!(from_json(text.as_bytes()), Ok(switch()));
    let value = serde_json::to_value(switch()).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected = [
        "phase_id",
        "after",
        "attempt",
        "max_attempts",
        "waits_used",
        "template_index",
        "not_before",
        "reason",
        "rate_limited",
    ];
    assert_eq!(keys, expected);
    let entry_keys: Vec<&str> = value["rate_limited"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(entry_keys, ["template_index", "until", "reason"]);
}

#[test]
fn key_set_errors_name_the_dotted_key() {
    let cases: Vec<(Value, &str)> = vec![
        (
            edited(|v| {
                v["extra"] = json!(1);
            }),
            "unexpected key retry_schedule.extra",
        ),
        (
            edited(|v| {
                v.as_object_mut().unwrap().remove("attempt");
            }),
            "missing required key attempt (at retry_schedule.attempt)",
        ),
        (
            edited(|v| {
                v["rate_limited"][0]["note"] = json!("x");
            }),
            "unexpected key retry_schedule.rate_limited[0].note",
        ),
        (
            edited(|v| {
                v["rate_limited"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("until");
            }),
            "missing required key until (at retry_schedule.rate_limited[0].until)",
        ),
        (
            edited(|v| v["attempt"] = json!(0)),
            "expected attempt to be a positive integer (at retry_schedule.attempt)",
        ),
        (
            edited(|v| v["max_attempts"] = json!(0)),
            "expected max_attempts to be a positive integer (at retry_schedule.max_attempts)",
        ),
        (
            edited(|v| v["max_attempts"] = json!(null)),
            "expected max_attempts to be a positive integer (at retry_schedule.max_attempts)",
        ),
        (
            edited(|v| v["waits_used"] = json!(-1)),
            "expected retry_schedule.waits_used to be a non-negative integer that fits in 32 bits",
        ),
        (
            edited(|v| v["template_index"] = json!("1")),
            "expected template_index to be an integer (at retry_schedule.template_index)",
        ),
        (
            edited(|v| v["not_before"] = json!("2026-11-30T12:00:00")),
            "expected retry_schedule.not_before to include a UTC offset",
        ),
        (
            edited(|v| v["after"] = json!("blocked")),
            "invalid after 'blocked' (at retry_schedule.after)",
        ),
        (
            edited(|v| v["reason"] = json!("because")),
            "invalid reason 'because' (at retry_schedule.reason)",
        ),
        (
            edited(|v| v["rate_limited"][0]["reason"] = json!("backoff")),
            "invalid reason 'backoff' (at retry_schedule.rate_limited[0].reason)",
        ),
        (
            edited(|v| v["rate_limited"] = json!({})),
            "expected rate_limited to be a list (at retry_schedule.rate_limited)",
        ),
        (json!([]), "expected retry_schedule to be an object"),
    ];
    for (value, message) in cases {
        assert_eq!(read_nested(&value), Err(message.to_owned()), "{value}");
    }
    assert_eq!(
        read(&edited(|v| {
            v.as_object_mut().unwrap().remove("phase_id");
        })),
        Err("missing required key phase_id".to_owned())
    );
}

#[test]
fn a_schedule_written_before_max_attempts_existed_is_read_and_rewritten_without_it() {
    let old = edited(|v| {
        v.as_object_mut().unwrap().remove("max_attempts");
    });
    let schedule = read_nested(&old).unwrap();
    assert_eq!(schedule.max_attempts, None);
    assert_eq!(
        schedule,
        RetrySchedule {
            max_attempts: None,
            ..switch()
        }
    );
    assert!(!to_json(&schedule).contains("max_attempts"));
}

#[test]
fn invariants_are_checked() {
    let cases: Vec<(Value, &str)> = vec![
        (
            edited(|v| v["phase_id"] = json!("")),
            "expected retry_schedule.phase_id to be nonempty",
        ),
        (
            edited(|v| {
                v["attempt"] = json!(3);
                v["max_attempts"] = json!(2);
            }),
            "retry_schedule.attempt (3) exceeds retry_schedule.max_attempts (2)",
        ),
        (
            edited(|v| v["template_index"] = json!(0)),
            "retry_schedule.template_index names a rate-limited template for reason fallback-template",
        ),
        (
            edited(|v| v["rate_limited"] = json!([])),
            "retry_schedule.rate_limited must not be empty for reason fallback-template",
        ),
        (
            edited(|v| v["after"] = json!("timeout")),
            "retry_schedule.after must be rate-limited for reason fallback-template",
        ),
        (
            edited(|v| {
                let entry = v["rate_limited"][0].clone();
                v["rate_limited"].as_array_mut().unwrap().push(entry);
            }),
            "retry_schedule.rate_limited names template 0 twice",
        ),
        (
            edited(|v| v["reason"] = json!("backoff")),
            "retry_schedule.attempt must be at least 2 for reason backoff",
        ),
        (
            edited(|v| v["reason"] = json!("reset-time")),
            "retry_schedule.waits_used must be at least 1 for reason reset-time",
        ),
        (
            edited(|v| {
                v["reason"] = json!("max-wait-cap");
                v["waits_used"] = json!(1);
            }),
            "retry_schedule.template_index must be 0 for reason max-wait-cap",
        ),
        (
            edited(|v| {
                v["reason"] = json!("default-wait-no-reset");
                v["waits_used"] = json!(1);
                v["template_index"] = json!(0);
            }),
            "retry_schedule.rate_limited must be empty for reason default-wait-no-reset",
        ),
    ];
    for (value, message) in cases {
        assert_eq!(read_nested(&value), Err(message.to_owned()), "{value}");
    }
}

#[test]
fn schedules_from_steps_resume_the_same_ledger() {
    let retry = RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    };
    let rate_limit = RateLimitPolicy {
        max_waits: 2,
        fallback_agent_cmds: vec!["other {prompt_file}".into()],
        ..RateLimitPolicy::default()
    };
    let limited = FinishedAttempt {
        status: AttemptStatus::RateLimited,
        template_index: 0,
        reset_at: Some(now() + TimeDelta::milliseconds(90_500)),
    };
    let step = next_step(
        &limited,
        &RetryLedger::first(),
        &retry,
        &rate_limit,
        2,
        now(),
    );
    let schedule = ScheduledRetry::from_step("phase-2", AttemptStatus::RateLimited, &step, None)
        .unwrap()
        .schedule;
    assert_eq!(schedule.reason, RetryReason::FallbackTemplate);
    assert_eq!(schedule.max_attempts, Some(3), "the policy's n is kept");
    assert_eq!(
        schedule.rate_limited[0].until,
        at("2026-11-30T12:01:31Z"),
        "rounded up"
    );
    let NextStep::RetryAfter { ledger, .. } = &step else {
        panic!("{step:?}")
    };
    assert_eq!(&schedule.ledger(), ledger);
    assert_eq!(
        from_json(to_json(&schedule).as_bytes()),
        Ok(schedule.clone())
    );
    assert_eq!(schedule.fits(&retry, &rate_limit, 2), Ok(()));
    assert_eq!(
        schedule
            .fits(&retry, &rate_limit, 1)
            .map_err(|error| error.to_string()),
        Err("agent template 1 is not configured (1 template)".to_owned())
    );
    assert_eq!(
        schedule.fits(&retry, &RateLimitPolicy::default(), 2),
        Ok(()),
        "a switch uses no wait"
    );
    assert_eq!(
        ScheduledRetry::from_step(
            "phase-2",
            AttemptStatus::Blocked,
            &NextStep::Stop(crate::domain::retry::next_step::StopReason::NeverRetried),
            None
        )
        .map(|retry| retry.schedule),
        None
    );
}

#[test]
fn fits_reports_a_tighter_policy() {
    let mut schedule = switch();
    schedule.attempt = 3;
    schedule.reason = RetryReason::Backoff;
    schedule.after = AttemptStatus::Timeout;
    let retry = RetryPolicy {
        max_attempts: 2,
        ..RetryPolicy::default()
    };
    assert_eq!(
        schedule
            .fits(&retry, &RateLimitPolicy::default(), 2)
            .map_err(|error| error.to_string()),
        Err("attempt 3 exceeds retry.max_attempts (2)".to_owned())
    );
    let retry = RetryPolicy {
        max_attempts: 3,
        on: vec![],
        ..RetryPolicy::default()
    };
    assert_eq!(
        schedule
            .fits(&retry, &RateLimitPolicy::default(), 2)
            .map_err(|error| error.to_string()),
        Err("timeout is not in retry.on".to_owned())
    );
    schedule.waits_used = 2;
    assert_eq!(
        schedule
            .fits(
                &RetryPolicy {
                    max_attempts: 3,
                    ..RetryPolicy::default()
                },
                &RateLimitPolicy::default(),
                2
            )
            .map_err(|error| error.to_string()),
        Err("2 waits exceed rate_limit.max_waits (0)".to_owned())
    );
}

#[test]
fn only_what_no_flag_can_raise_keeps_every_run_from_resuming_a_schedule() {
    let mut schedule = switch();
    schedule.attempt = 3;
    schedule.waits_used = 2;
    schedule.reason = RetryReason::Backoff;
    schedule.after = AttemptStatus::Timeout;
    let tight = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    // Too few attempts and waits: `--retries` and `--wait` fix those.
    assert_eq!(
        schedule.fits_some_run(&tight, &RateLimitPolicy::default(), 2),
        Ok(())
    );
    // A removed fallback agent, or a status no longer retried: nothing does.
    assert_eq!(
        schedule
            .fits_some_run(&tight, &RateLimitPolicy::default(), 1)
            .map_err(|error| error.to_string()),
        Err("agent template 1 is not configured (1 template)".to_owned())
    );
    let not_on = RetryPolicy {
        on: vec![],
        ..tight
    };
    assert_eq!(
        schedule
            .fits_some_run(&not_on, &RateLimitPolicy::default(), 2)
            .map_err(|error| error.to_string()),
        Err("timeout is not in retry.on".to_owned())
    );
}

proptest! {
    #[test]
    fn from_json_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = from_json(&bytes);
    }

    #[test]
    fn every_policy_step_writes_a_valid_schedule(
        status in prop::sample::select(crate::domain::retry::retryable_statuses().collect::<Vec<_>>()),
        template_index in 0usize..3,
        reset_ms in prop::option::of(-100_000i64..100_000_000),
        attempt in 1u32..4,
        waits_used in 0u32..3,
    ) {
        let retry = RetryPolicy { max_attempts: 4, on: crate::domain::retry::retryable_statuses().collect::<Vec<_>>(), ..RetryPolicy::default() };
        let rate_limit = RateLimitPolicy {
            max_waits: 3,
            fallback_agent_cmds: vec!["a".into(), "b".into()],
            ..RateLimitPolicy::default()
        };
        let finished = FinishedAttempt {
            status,
            template_index,
            reset_at: reset_ms.map(|ms| now() + TimeDelta::milliseconds(ms)),
        };
        let ledger = RetryLedger { attempt, waits_used, rate_limited: Vec::new() };
        let step = next_step(&finished, &ledger, &retry, &rate_limit, 3, now());
        if let Some(ScheduledRetry { schedule, .. }) = ScheduledRetry::from_step("phase-1", status, &step, None) {
            prop_assert_eq!(schedule.validate("retry_schedule"), Ok(()));
            prop_assert_eq!(schedule.fits(&retry, &rate_limit, 3), Ok(()));
            prop_assert!(schedule.not_before.as_datetime() >= now());
            prop_assert_eq!(from_json(to_json(&schedule).as_bytes()), Ok(schedule));
        }
    }
}
