//! Tests of the retry policy's config section and its wording.

use super::*;
use crate::domain::config::parse_config;
use proptest::prelude::*;
use strum::IntoEnumIterator;

fn parse(text: &str) -> Result<RetryPolicy, String> {
    parse_config(text.as_bytes())
        .map(|config| config.retry)
        .map_err(|error| error.to_string())
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(policy) => panic!("expected an error for {text}, got {policy:?}"),
        Err(message) => message,
    }
}

#[test]
fn absent_or_null_is_the_default_which_retries_nothing() {
    assert_eq!(parse("{}").unwrap(), RetryPolicy::default());
    assert_eq!(parse(r#"{"retry": null}"#).unwrap(), RetryPolicy::default());
    assert_eq!(parse(r#"{"retry": {}}"#).unwrap(), RetryPolicy::default());
    let default = RetryPolicy::default();
    assert_eq!(default.max_attempts, 1);
    assert_eq!(default.on, default_retry_on());
    assert_eq!(
        (default.backoff_seconds, default.max_backoff_seconds),
        (30.0, 600.0)
    );
    assert_eq!(default.describe(), "off (1 attempt)");
}

#[test]
fn every_key_set() {
    let policy = parse(
        r#"{"retry": {"max_attempts": 3, "on": ["missing-marker", "stop-regex"],
                      "backoff_seconds": 0.5, "max_backoff_seconds": 4}}"#,
    )
    .unwrap();
    assert_eq!(
        policy,
        RetryPolicy {
            max_attempts: 3,
            on: vec![AttemptStatus::MissingMarker, AttemptStatus::StopRegex],
            backoff_seconds: 0.5,
            max_backoff_seconds: 4.0,
        }
    );
    assert_eq!(
        policy.describe(),
        "up to 3 attempts on missing-marker, stop-regex; backoff 0.5 s doubling to 4 s"
    );
}

#[test]
fn unknown_and_mistyped_keys_are_named_with_their_dotted_path() {
    assert_eq!(
        error(r#"{"retry": {"max_attempt": 3}}"#),
        "unknown key 'retry.max_attempt'; known keys: max_attempts, on, backoff_seconds, \
         max_backoff_seconds"
    );
    assert_eq!(
        error(r#"{"retry": {"zz": 1, "b": 2, "on": 3}}"#),
        "unknown key 'retry.b'; known keys: max_attempts, on, backoff_seconds, \
         max_backoff_seconds",
        "the alphabetically first, before any type error"
    );
    for bad in ["3", "true", "[]", "\"on\""] {
        assert_eq!(
            error(&format!(r#"{{"retry": {bad}}}"#)),
            "expected retry to be an object or null"
        );
    }
    for bad in ["null", "true", "2.0", "\"3\"", "[]", "1e3"] {
        assert_eq!(
            error(&format!(r#"{{"retry": {{"max_attempts": {bad}}}}}"#)),
            "expected retry.max_attempts to be an integer",
            "{bad}"
        );
    }
    for low in ["0", "-1", "-9223372036854775808"] {
        assert_eq!(
            error(&format!(r#"{{"retry": {{"max_attempts": {low}}}}}"#)),
            "expected retry.max_attempts to be at least 1"
        );
    }
    for high in ["4294967296", "18446744073709551615"] {
        assert_eq!(
            error(&format!(r#"{{"retry": {{"max_attempts": {high}}}}}"#)),
            "expected retry.max_attempts to be at most 4294967295"
        );
    }
    assert_eq!(
        parse(r#"{"retry": {"max_attempts": 4294967295}}"#)
            .unwrap()
            .max_attempts,
        u32::MAX
    );
    for key in ["backoff_seconds", "max_backoff_seconds"] {
        for bad in ["null", "\"30\"", "[]", "true"] {
            assert_eq!(
                error(&format!(r#"{{"retry": {{"{key}": {bad}}}}}"#)),
                format!("expected retry.{key} to be a number")
            );
        }
        assert_eq!(
            error(&format!(r#"{{"retry": {{"{key}": -1}}}}"#)),
            format!("expected retry.{key} to be a finite number of at least 0")
        );
    }
}

#[test]
fn on_names_retryable_statuses_once() {
    assert_eq!(
        parse(r#"{"retry": {"on": []}}"#).unwrap().on,
        Vec::<AttemptStatus>::new()
    );
    assert_eq!(
        parse(r#"{"retry": {"on": ["rate-limited", "timeout"]}}"#)
            .unwrap()
            .on,
        vec![AttemptStatus::RateLimited, AttemptStatus::Timeout]
    );
    assert_eq!(
        parse(r#"{"retry": {"on": ["verification-failed"]}}"#)
            .unwrap()
            .on,
        vec![AttemptStatus::VerificationFailed]
    );
    assert_eq!(
        error(r#"{"retry": {"on": "timeout"}}"#),
        "expected retry.on to be a list"
    );
    assert_eq!(
        error(r#"{"retry": {"on": ["timeout", 1]}}"#),
        "expected retry.on[1] to be a string"
    );
    assert_eq!(
        error(r#"{"retry": {"on": ["timeout", "time-out"]}}"#),
        "invalid retry.on[1] 'time-out'; retryable statuses: agent-failed, missing-marker, \
         invalid-marker, multiple-markers, timeout, stop-regex, rate-limited, verification-failed"
    );
    assert_eq!(
        error(r#"{"retry": {"on": ["timeout", "timeout"]}}"#),
        "retry.on[1]: timeout is listed twice"
    );
    for never in [
        "blocked",
        "needs-clarification",
        "interrupted",
        "launch-failed",
        "execution-io-failed",
        "phase-complete",
    ] {
        assert_eq!(
            error(&format!(r#"{{"retry": {{"on": ["{never}"]}}}}"#)),
            format!(
                "retry.on[0]: {never} is never retried; retryable statuses: agent-failed, \
                 missing-marker, invalid-marker, multiple-markers, timeout, stop-regex, \
                 rate-limited, verification-failed"
            )
        );
    }
}

#[test]
fn backoff_defaults_never_conflict_with_written_values() {
    let policy = parse(r#"{"retry": {"backoff_seconds": 900}}"#).unwrap();
    assert_eq!(policy.max_backoff_seconds, 900.0);
    let policy = parse(r#"{"retry": {"backoff_seconds": 0}}"#).unwrap();
    assert_eq!(
        (policy.backoff_seconds, policy.max_backoff_seconds),
        (0.0, 600.0)
    );
    assert_eq!(
        error(r#"{"retry": {"backoff_seconds": 60, "max_backoff_seconds": 59.5}}"#),
        "expected retry.max_backoff_seconds to be at least retry.backoff_seconds (60)"
    );
    let policy = parse(r#"{"retry": {"max_backoff_seconds": 10}}"#).unwrap();
    assert_eq!(
        (policy.backoff_seconds, policy.max_backoff_seconds),
        (10.0, 10.0)
    );
}

#[test]
fn retries_flag_sets_max_attempts() {
    assert_eq!(RetryPolicy::default().with_retries(0).max_attempts, 1);
    assert_eq!(RetryPolicy::default().with_retries(2).max_attempts, 3);
    assert_eq!(
        RetryPolicy::default().with_retries(u32::MAX).max_attempts,
        u32::MAX
    );
}

#[test]
fn never_retried_statuses_are_never_retried_whatever_on_says() {
    let policy = RetryPolicy {
        on: AttemptStatus::iter().collect::<Vec<_>>(),
        ..RetryPolicy::default()
    };
    for status in AttemptStatus::iter() {
        assert_eq!(policy.retries_on(status), status.is_retryable());
    }
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let policy = RetryPolicy {
        backoff_seconds: 30.0,
        max_backoff_seconds: 200.0,
        ..RetryPolicy::default()
    };
    let delays: Vec<(f64, bool)> = (1..=5).map(|r| policy.backoff_seconds_for(r)).collect();
    assert_eq!(
        delays,
        [
            (30.0, false),
            (60.0, false),
            (120.0, false),
            (200.0, true),
            (200.0, true)
        ]
    );
    assert_eq!(policy.backoff_seconds_for(u32::MAX), (200.0, true));
    assert_eq!(policy.backoff_seconds_for(0), (30.0, false));
}

proptest! {
    #[test]
    fn backoff_is_monotone_capped_and_finite(
        base in prop_oneof![Just(0.0), 0.0f64..1e6, Just(f64::NAN), Just(f64::INFINITY)],
        extra in prop_oneof![Just(0.0), 0.0f64..1e9],
        retry in 1u32..2000,
    ) {
        let policy = RetryPolicy {
            backoff_seconds: base,
            max_backoff_seconds: base + extra,
            ..RetryPolicy::default()
        };
        let (now, _) = policy.backoff_seconds_for(retry);
        let (next, _) = policy.backoff_seconds_for(retry + 1);
        prop_assert!(now.is_finite() && now >= 0.0);
        prop_assert!(next >= now);
        prop_assert!(now <= finite_or_zero(policy.max_backoff_seconds));
    }
}
