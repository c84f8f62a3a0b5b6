//! Unit and property tests of `domain::retry::next_step`.

use super::*;
use crate::domain::retry::{default_retry_on, retryable_statuses};
use chrono::TimeZone;
use proptest::prelude::*;
use strum::IntoEnumIterator;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

fn secs(seconds: i64) -> DateTime<Utc> {
    now() + TimeDelta::seconds(seconds)
}

fn finished(status: AttemptStatus) -> FinishedAttempt {
    FinishedAttempt {
        status,
        template_index: 0,
        reset_at: None,
    }
}

fn limited(template_index: usize, reset_at: Option<DateTime<Utc>>) -> FinishedAttempt {
    FinishedAttempt {
        status: AttemptStatus::RateLimited,
        template_index,
        reset_at,
    }
}

fn retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        ..RetryPolicy::default()
    }
}

fn waits(max_waits: u32, fallbacks: usize) -> RateLimitPolicy {
    RateLimitPolicy {
        max_waits,
        fallback_agent_cmds: vec!["fallback {prompt_file}".into(); fallbacks],
        ..RateLimitPolicy::default()
    }
}

/// Unpacks a `RetryAfter` as (delay from `now()` in ms, attempt, template, reason, ledger).
fn retried(step: NextStep) -> (i64, u32, usize, RetryReason, RetryLedger) {
    match step {
        NextStep::RetryAfter {
            not_before,
            template_index,
            reason,
            ledger,
            ..
        } => (
            (not_before - now()).num_milliseconds(),
            ledger.attempt,
            template_index,
            reason,
            ledger,
        ),
        NextStep::Stop(reason) => panic!("expected a retry, got Stop({reason:?})"),
    }
}

fn step(
    attempt: &FinishedAttempt,
    ledger: &RetryLedger,
    retry: &RetryPolicy,
    rate_limit: &RateLimitPolicy,
) -> NextStep {
    next_step(
        attempt,
        ledger,
        retry,
        rate_limit,
        rate_limit.template_count(),
        now(),
    )
}

#[test]
fn no_policy_stops_on_every_status_as_before() {
    let (retry, rate_limit) = (RetryPolicy::default(), RateLimitPolicy::default());
    for status in AttemptStatus::iter() {
        let expected = if !status.is_retryable() {
            StopReason::NeverRetried
        } else if status == AttemptStatus::StopRegex {
            StopReason::NotInRetryOn
        } else {
            StopReason::AttemptsExhausted
        };
        assert_eq!(
            step(
                &finished(status),
                &RetryLedger::first(),
                &retry,
                &rate_limit
            ),
            NextStep::Stop(expected),
            "{status}"
        );
    }
}

#[test]
fn never_retried_statuses_stop_whatever_the_policy() {
    let retry = RetryPolicy {
        max_attempts: 10,
        on: retryable_statuses().collect(),
        ..RetryPolicy::default()
    };
    let rate_limit = waits(5, 2);
    for status in [
        AttemptStatus::Blocked,
        AttemptStatus::NeedsClarification,
        AttemptStatus::Interrupted,
        AttemptStatus::LaunchFailed,
        AttemptStatus::ExecutionIoFailed,
        AttemptStatus::PhaseComplete,
    ] {
        assert_eq!(
            step(
                &finished(status),
                &RetryLedger::first(),
                &retry,
                &rate_limit
            ),
            NextStep::Stop(StopReason::NeverRetried),
            "{status}"
        );
    }
}

#[test]
fn retries_back_off_exponentially_until_attempts_run_out() {
    let policy = retry(3);
    let rate_limit = RateLimitPolicy::default();
    let missing = finished(AttemptStatus::MissingMarker);
    let (delay, attempt, template, reason, ledger) =
        retried(step(&missing, &RetryLedger::first(), &policy, &rate_limit));
    assert_eq!(
        (delay, attempt, template, reason),
        (30_000, 2, 0, RetryReason::Backoff)
    );
    let (delay, attempt, _, _, ledger) = retried(step(&missing, &ledger, &policy, &rate_limit));
    assert_eq!((delay, attempt), (60_000, 3));
    assert_eq!(
        step(&missing, &ledger, &policy, &rate_limit),
        NextStep::Stop(StopReason::AttemptsExhausted)
    );
    match step(&missing, &RetryLedger::first(), &policy, &rate_limit) {
        NextStep::RetryAfter { ledger, of, .. } => assert_eq!((ledger.attempt, of), (2, 3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn backoff_is_capped() {
    let policy = RetryPolicy {
        max_attempts: 10,
        backoff_seconds: 30.0,
        max_backoff_seconds: 100.0,
        ..RetryPolicy::default()
    };
    let ledger = RetryLedger {
        attempt: 3,
        ..RetryLedger::first()
    };
    let (delay, attempt, _, reason, _) = retried(step(
        &finished(AttemptStatus::Timeout),
        &ledger,
        &policy,
        &RateLimitPolicy::default(),
    ));
    assert_eq!((delay, attempt), (100_000, 4), "30 × 2² = 120, capped");
    assert_eq!(reason, RetryReason::BackoffCapped);
}

#[test]
fn statuses_missing_from_on_stop() {
    let policy = RetryPolicy {
        max_attempts: 5,
        on: vec![AttemptStatus::Timeout],
        ..RetryPolicy::default()
    };
    assert_eq!(
        step(
            &finished(AttemptStatus::AgentFailed),
            &RetryLedger::first(),
            &policy,
            &RateLimitPolicy::default()
        ),
        NextStep::Stop(StopReason::NotInRetryOn)
    );
    assert_eq!(default_retry_on().len(), 7);
}

#[test]
fn rate_limit_waits_until_the_reset_time_without_using_an_attempt() {
    let rate_limit = waits(2, 0);
    let (delay, attempt, template, reason, ledger) = retried(step(
        &limited(0, Some(secs(120))),
        &RetryLedger::first(),
        &RetryPolicy::default(),
        &rate_limit,
    ));
    assert_eq!(
        (delay, attempt, template, reason),
        (120_000, 1, 0, RetryReason::ResetTime)
    );
    assert_eq!(ledger.waits_used, 1);
    assert!(ledger.rate_limited.is_empty(), "a wait starts a new cycle");
    let (_, _, _, _, ledger) = retried(step(
        &limited(0, None),
        &ledger,
        &RetryPolicy::default(),
        &rate_limit,
    ));
    assert_eq!(ledger.waits_used, 2);
    assert_eq!(
        step(
            &limited(0, None),
            &ledger,
            &RetryPolicy::default(),
            &rate_limit
        ),
        NextStep::Stop(StopReason::WaitsExhausted)
    );
}

#[test]
fn wait_reasons_say_why_the_time_was_chosen() {
    let rate_limit = RateLimitPolicy {
        max_waits: 1,
        default_wait_seconds: 300.0,
        max_wait_seconds: 3600.0,
        ..RateLimitPolicy::default()
    };
    let wait = |reset_at| {
        let (delay, _, _, reason, _) = retried(step(
            &limited(0, reset_at),
            &RetryLedger::first(),
            &RetryPolicy::default(),
            &rate_limit,
        ));
        (delay, reason)
    };
    assert_eq!(wait(Some(secs(600))), (600_000, RetryReason::ResetTime));
    assert_eq!(wait(Some(now())), (0, RetryReason::ResetTime));
    assert_eq!(wait(None), (300_000, RetryReason::DefaultWaitNoReset));
    assert_eq!(
        wait(Some(secs(-5))),
        (300_000, RetryReason::DefaultWaitPastReset)
    );
    assert_eq!(wait(Some(secs(7200))), (3_600_000, RetryReason::MaxWaitCap));
    let short_cap = RateLimitPolicy {
        max_wait_seconds: 60.0,
        ..rate_limit
    };
    let (delay, _, _, reason, _) = retried(step(
        &limited(0, None),
        &RetryLedger::first(),
        &RetryPolicy::default(),
        &short_cap,
    ));
    assert_eq!(
        (delay, reason),
        (60_000, RetryReason::MaxWaitCap),
        "the default wait is capped too"
    );
}

#[test]
fn sub_second_reset_times_round_up() {
    let (delay, _, _, _, _) = retried(step(
        &limited(0, Some(now() + TimeDelta::milliseconds(1812))),
        &RetryLedger::first(),
        &RetryPolicy::default(),
        &waits(1, 0),
    ));
    assert_eq!(delay, 2000);
}

#[test]
fn fallback_templates_are_tried_before_waiting_then_the_primary_again() {
    let rate_limit = waits(1, 2);
    let policy = RetryPolicy::default();
    let (delay, attempt, template, reason, ledger) = retried(step(
        &limited(0, Some(secs(3000))),
        &RetryLedger::first(),
        &policy,
        &rate_limit,
    ));
    assert_eq!(
        (delay, attempt, template, reason),
        (0, 1, 1, RetryReason::FallbackTemplate)
    );
    assert_eq!(ledger.waits_used, 0, "a switch is no wait");
    let (delay, _, template, _, ledger) = retried(step(
        &limited(1, Some(secs(1000))),
        &ledger,
        &policy,
        &rate_limit,
    ));
    assert_eq!((delay, template), (0, 2));
    let (delay, attempt, template, reason, ledger) =
        retried(step(&limited(2, None), &ledger, &policy, &rate_limit));
    assert_eq!(
        (delay, attempt, template, reason),
        (300_000, 1, 0, RetryReason::DefaultWaitNoReset),
        "the earliest of 3000 s, 1000 s and the default 300 s, then the primary"
    );
    assert_eq!(ledger.waits_used, 1);
    assert!(ledger.rate_limited.is_empty());
}

#[test]
fn the_earliest_reset_among_the_limited_templates_is_waited_for() {
    let rate_limit = waits(1, 1);
    let policy = RetryPolicy::default();
    let (_, _, _, _, ledger) = retried(step(
        &limited(0, Some(secs(500))),
        &RetryLedger::first(),
        &policy,
        &rate_limit,
    ));
    let (delay, _, template, reason, _) = retried(step(
        &limited(1, Some(secs(4000))),
        &ledger,
        &policy,
        &rate_limit,
    ));
    assert_eq!(
        (delay, template, reason),
        (500_000, 0, RetryReason::ResetTime)
    );
}

#[test]
fn fallback_templates_switch_without_waits_and_then_stop() {
    let rate_limit = waits(0, 1);
    let policy = RetryPolicy::default();
    let (_, _, template, _, ledger) = retried(step(
        &limited(0, None),
        &RetryLedger::first(),
        &policy,
        &rate_limit,
    ));
    assert_eq!(template, 1);
    assert_eq!(
        step(&limited(1, None), &ledger, &policy, &rate_limit),
        NextStep::Stop(StopReason::AttemptsExhausted),
        "rate-limited is in the default retry.on, but one attempt allows no retry"
    );
    let no_rate_limit_retries = RetryPolicy {
        max_attempts: 3,
        on: vec![AttemptStatus::Timeout],
        ..RetryPolicy::default()
    };
    assert_eq!(
        step(
            &limited(1, None),
            &ledger,
            &no_rate_limit_retries,
            &rate_limit
        ),
        NextStep::Stop(StopReason::NotInRetryOn)
    );
}

#[test]
fn exhausted_waits_fall_back_to_a_counted_retry_with_the_primary() {
    let rate_limit = waits(1, 1);
    let policy = retry(2);
    let ledger = RetryLedger {
        attempt: 1,
        waits_used: 1,
        rate_limited: vec![RateLimitedTemplate {
            template_index: 0,
            until: ceil_to_second(secs(100)),
            reason: RetryReason::ResetTime,
        }],
    };
    let (delay, attempt, template, reason, next) =
        retried(step(&limited(1, None), &ledger, &policy, &rate_limit));
    assert_eq!(
        (delay, attempt, template, reason),
        (30_000, 2, 0, RetryReason::Backoff)
    );
    assert!(next.rate_limited.is_empty());
    assert_eq!(next.waits_used, 1);
    // The retried attempt is limited again: the fallback first, then nothing is left.
    let (_, attempt, template, reason, next) =
        retried(step(&limited(0, None), &next, &policy, &rate_limit));
    assert_eq!(
        (attempt, template, reason),
        (2, 1, RetryReason::FallbackTemplate)
    );
    assert_eq!(
        step(&limited(1, None), &next, &policy, &rate_limit),
        NextStep::Stop(StopReason::WaitsExhausted)
    );
}

#[test]
fn rate_limits_without_waits_are_retried_with_backoff_when_on_says_so() {
    let policy = retry(2);
    let (delay, attempt, template, reason, _) = retried(step(
        &limited(0, Some(secs(5))),
        &RetryLedger::first(),
        &policy,
        &RateLimitPolicy::default(),
    ));
    assert_eq!(
        (delay, attempt, template, reason),
        (30_000, 2, 0, RetryReason::Backoff)
    );
}

#[test]
fn a_fallback_that_fails_otherwise_is_retried_and_the_primary_stays_limited() {
    let rate_limit = waits(1, 1);
    let policy = retry(2);
    let (_, _, template, _, ledger) = retried(step(
        &limited(0, Some(secs(900))),
        &RetryLedger::first(),
        &policy,
        &rate_limit,
    ));
    assert_eq!(template, 1);
    let (delay, attempt, template, _, ledger) = retried(step(
        &FinishedAttempt {
            status: AttemptStatus::MissingMarker,
            template_index: 1,
            reset_at: None,
        },
        &ledger,
        &policy,
        &rate_limit,
    ));
    assert_eq!((delay, attempt, template), (30_000, 2, 1));
    assert_eq!(ledger.rate_limited.len(), 1);
    let (delay, _, template, reason, _) = retried(step(
        &limited(1, Some(secs(2000))),
        &ledger,
        &policy,
        &rate_limit,
    ));
    assert_eq!(
        (delay, template, reason),
        (900_000, 0, RetryReason::ResetTime)
    );
}

#[test]
fn a_template_that_ran_without_a_rate_limit_leaves_the_cycle() {
    let rate_limit = waits(1, 1);
    let policy = retry(3);
    let ledger = RetryLedger {
        attempt: 1,
        waits_used: 0,
        rate_limited: vec![RateLimitedTemplate {
            template_index: 1,
            until: ceil_to_second(secs(100)),
            reason: RetryReason::ResetTime,
        }],
    };
    let (_, _, template, _, ledger) = retried(step(
        &FinishedAttempt {
            status: AttemptStatus::Timeout,
            template_index: 1,
            reset_at: None,
        },
        &ledger,
        &policy,
        &rate_limit,
    ));
    assert_eq!(template, 1);
    assert!(ledger.rate_limited.is_empty());
}

#[test]
fn out_of_range_templates_are_clamped() {
    let rate_limit = waits(1, 0);
    for (index, count) in [(5, 1), (0, 0), (9, 0)] {
        let step = next_step(
            &limited(index, None),
            &RetryLedger::first(),
            &RetryPolicy::default(),
            &rate_limit,
            count,
            now(),
        );
        let (_, _, template, _, _) = retried(step);
        assert_eq!(template, 0);
    }
}

#[test]
fn huge_config_values_stay_representable() {
    let policy = RetryPolicy {
        max_attempts: 3,
        backoff_seconds: 1e300,
        max_backoff_seconds: 1e300,
        ..RetryPolicy::default()
    };
    let (delay, ..) = retried(step(
        &finished(AttemptStatus::AgentFailed),
        &RetryLedger::first(),
        &policy,
        &RateLimitPolicy::default(),
    ));
    assert_eq!(delay, MAX_DELAY.num_milliseconds());
}

#[test]
fn reasons_round_trip_and_have_kinds() {
    for reason in RetryReason::iter() {
        assert_eq!(
            serde_json::from_value::<RetryReason>(serde_json::json!(reason.as_str())).ok(),
            Some(reason)
        );
        assert_eq!(
            serde_json::to_value(reason).unwrap(),
            serde_json::json!(reason.as_str())
        );
        assert!(!reason.describe().is_empty());
    }
    assert_eq!(RetryReason::Backoff.kind(), StepKind::Retry);
    assert_eq!(RetryReason::FallbackTemplate.kind(), StepKind::Switch);
    assert_eq!(RetryReason::MaxWaitCap.kind(), StepKind::Wait);
}

#[test]
fn ceil_to_second_never_rounds_down() {
    assert_eq!(ceil_to_second(now()).as_datetime(), now());
    assert_eq!(
        ceil_to_second(now() + TimeDelta::milliseconds(1)).as_datetime(),
        secs(1)
    );
}

fn arb_status() -> impl Strategy<Value = AttemptStatus> {
    prop_oneof![
        3 => Just(AttemptStatus::RateLimited),
        6 => prop::sample::select(AttemptStatus::iter().collect::<Vec<_>>()),
    ]
}

fn arb_policies() -> impl Strategy<Value = (RetryPolicy, RateLimitPolicy)> {
    (
        1u32..5,
        prop::sample::subsequence(retryable_statuses().collect::<Vec<_>>(), 0..=8),
        0.0f64..100.0,
        0.0f64..1000.0,
        0u32..4,
        1.0f64..1000.0,
        1.0f64..10_000.0,
        0usize..3,
    )
        .prop_map(
            |(max_attempts, on, backoff, extra, max_waits, default_wait, max_wait, fallbacks)| {
                (
                    RetryPolicy {
                        max_attempts,
                        on,
                        backoff_seconds: backoff,
                        max_backoff_seconds: backoff + extra,
                    },
                    RateLimitPolicy {
                        max_waits,
                        default_wait_seconds: default_wait,
                        max_wait_seconds: max_wait,
                        ..waits(0, fallbacks)
                    },
                )
            },
        )
}

proptest! {
    #[test]
    fn random_histories_keep_every_bound(
        (retry, rate_limit) in arb_policies(),
        history in prop::collection::vec(
            (arb_status(), prop::option::of(-200_000i64..4_000_000), 0i64..20_000),
            1..60,
        ),
    ) {
        let count = rate_limit.template_count();
        let mut ledger = RetryLedger::first();
        let mut template = 0;
        let mut now = now();
        let mut last_backoff = 0i64;
        let mut attempts_run = 0usize;
        // Cycles start at the beginning, after a wait and after a counted retry; each runs
        // every template at most once rate-limited; other failures each use an attempt.
        let max_attempts = retry.max_attempts as usize;
        let bound = (max_attempts + rate_limit.max_waits as usize) * count + max_attempts;
        for (status, reset_in, elapsed) in history {
            attempts_run += 1;
            let attempt = FinishedAttempt {
                status,
                template_index: template,
                reset_at: reset_in.map(|seconds| now + TimeDelta::seconds(seconds)),
            };
            let step = next_step(&attempt, &ledger, &retry, &rate_limit, count, now);
            let NextStep::RetryAfter { not_before, of, template_index, reason, ledger: next } = step else {
                break;
            };
            let k = next.attempt;
            prop_assert!(status.is_retryable(), "{} retried", status);
            prop_assert!(not_before >= now);
            prop_assert!(k >= 1 && k <= retry.max_attempts && of == retry.max_attempts);
            prop_assert!(next.waits_used <= rate_limit.max_waits);
            prop_assert!(template_index < count);
            prop_assert!(next.rate_limited.iter().all(|entry| entry.template_index < count));
            match reason.kind() {
                StepKind::Retry => {
                    prop_assert!(retry.on.contains(&status));
                    prop_assert_eq!(k, ledger.attempt + 1);
                    let delay = (not_before - now).num_milliseconds();
                    prop_assert!(delay >= last_backoff, "backoff shrank");
                    prop_assert!(delay as f64 <= retry.max_backoff_seconds * 1000.0 + 1.0);
                    last_backoff = delay;
                }
                StepKind::Switch => {
                    prop_assert_eq!(status, AttemptStatus::RateLimited);
                    prop_assert_eq!(not_before, now);
                    prop_assert_ne!(template_index, template);
                    prop_assert_eq!(next.waits_used, ledger.waits_used);
                }
                StepKind::Wait => {
                    prop_assert_eq!(status, AttemptStatus::RateLimited);
                    prop_assert_eq!(template_index, 0);
                    prop_assert_eq!(next.waits_used, ledger.waits_used + 1);
                    let cap = (rate_limit.max_wait_seconds * 1000.0).ceil() as i64 + 1000;
                    prop_assert!((not_before - now).num_milliseconds() <= cap);
                }
            }
            prop_assert!(attempts_run <= bound, "{} attempts exceed the bound {}", attempts_run, bound);
            ledger = next;
            template = template_index;
            now = not_before + TimeDelta::seconds(elapsed);
        }
    }

    #[test]
    fn never_retried_statuses_never_retry(
        (retry, rate_limit) in arb_policies(),
        status in prop::sample::select(AttemptStatus::iter().collect::<Vec<_>>()),
        template_index in 0usize..5,
    ) {
        prop_assume!(!status.is_retryable());
        let attempt = FinishedAttempt { status, template_index, reset_at: None };
        let step = next_step(&attempt, &RetryLedger::first(), &retry, &rate_limit, 3, now());
        prop_assert_eq!(step, NextStep::Stop(StopReason::NeverRetried));
    }
}
