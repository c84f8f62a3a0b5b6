//! Opt-in retries of a failed phase (issue 11): the `retry` config object, which statuses may
//! ever be retried, and the exponential backoff. What to do after an attempt — retry, switch
//! the agent template, wait for a rate limit, or stop — is decided in [`next_step`]; the
//! schedule a runner persists to resume that decision after a crash is [`schedule`].
//!
//! `retry` in `config.json` (every key optional):
//!
//! | Key | Type | Default | Meaning |
//! |---|---|---|---|
//! | `max_attempts` | integer ≥ 1 | 1 | attempts of one phase per invocation, the first included; 1 retries nothing |
//! | `on` | list of statuses | [`DEFAULT_RETRY_ON`] | the statuses retried; each must be in [`RETRYABLE`] |
//! | `backoff_seconds` | finite ≥ 0 | min(30, `max_backoff_seconds`) | the wait before the first retry; doubles per retry |
//! | `max_backoff_seconds` | finite ≥ `backoff_seconds` | max(600, `backoff_seconds`) | the cap on that wait |
//!
//! `--retries N` sets `max_attempts` to N + 1 ([`RetryPolicy::with_retries`]).

pub mod next_step;
pub mod schedule;

use serde_json::Value;

use super::config::{ConfigError, Section, format_seconds};
use super::state::AttemptStatus;

/// The statuses a policy may name in `retry.on` (`verification-failed` among them: a retry is
/// told which check failed). The others are never retried: `blocked` and
/// `needs-clarification` wait for a person, `interrupted` is the user stopping the run,
/// `launch-failed` is a command that cannot start (retrying changes nothing),
/// `execution-io-failed` is the handler's own storage failing, `budget-exceeded` would only
/// meet the same spent budget before the retry's launch (the caps count the whole invocation),
/// and `phase-complete` is done.
pub const RETRYABLE: [AttemptStatus; 8] = [
    AttemptStatus::AgentFailed,
    AttemptStatus::MissingMarker,
    AttemptStatus::InvalidMarker,
    AttemptStatus::MultipleMarkers,
    AttemptStatus::Timeout,
    AttemptStatus::StopRegex,
    AttemptStatus::RateLimited,
    AttemptStatus::VerificationFailed,
];

/// What `retry.on` is when the key is absent: every retryable status except `stop-regex`,
/// since a stop regex is the user asking for a stop.
/// `verification-failed` is in it: the retry's prompt shows the failing check, so the agent
/// can fix what it reports (issue 20).
pub const DEFAULT_RETRY_ON: [AttemptStatus; 7] = [
    AttemptStatus::AgentFailed,
    AttemptStatus::MissingMarker,
    AttemptStatus::InvalidMarker,
    AttemptStatus::MultipleMarkers,
    AttemptStatus::Timeout,
    AttemptStatus::RateLimited,
    AttemptStatus::VerificationFailed,
];

pub const DEFAULT_MAX_ATTEMPTS: u32 = 1;
pub const DEFAULT_BACKOFF_SECONDS: f64 = 30.0;
pub const DEFAULT_MAX_BACKOFF_SECONDS: f64 = 600.0;

/// The `retry` keys, in validation order.
const KEYS: [&str; 4] = [
    "max_attempts",
    "on",
    "backoff_seconds",
    "max_backoff_seconds",
];

/// True when `status` may ever be retried (it is in [`RETRYABLE`]).
pub fn is_retryable(status: AttemptStatus) -> bool {
    RETRYABLE.contains(&status)
}

/// The effective `retry` policy.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts of one phase per invocation, the first included (≥ 1). Waits for a rate limit
    /// and switches to a fallback template run the same attempt again and do not count.
    pub max_attempts: u32,
    /// The statuses retried, in the order given, each once; all in [`RETRYABLE`].
    pub on: Vec<AttemptStatus>,
    /// The wait before retry 1, doubled for each later retry (finite, ≥ 0).
    pub backoff_seconds: f64,
    /// The cap on that wait (finite, ≥ `backoff_seconds`).
    pub max_backoff_seconds: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            on: DEFAULT_RETRY_ON.to_vec(),
            backoff_seconds: DEFAULT_BACKOFF_SECONDS,
            max_backoff_seconds: DEFAULT_MAX_BACKOFF_SECONDS,
        }
    }
}

impl RetryPolicy {
    /// `--retries N`: N retries after the first attempt (`max_attempts` = N + 1, saturating).
    pub fn with_retries(self, retries: u32) -> Self {
        Self {
            max_attempts: retries.saturating_add(1),
            ..self
        }
    }

    /// True when a `status` attempt may be followed by a retry (attempts permitting).
    pub fn retries_on(&self, status: AttemptStatus) -> bool {
        is_retryable(status) && self.on.contains(&status)
    }

    /// The wait before retry number `retry` (1 for the first retry):
    /// `backoff_seconds × 2^(retry − 1)`, capped at `max_backoff_seconds`; and whether the cap
    /// applied. Non-decreasing in `retry`; never negative, NaN or above the cap.
    pub fn backoff_seconds_for(&self, retry: u32) -> (f64, bool) {
        let base = finite_or_zero(self.backoff_seconds);
        let cap = finite_or_zero(self.max_backoff_seconds);
        // 2^1023 is the largest finite power of two; by then every positive base is capped.
        let exponent = retry.saturating_sub(1).min(1023) as i32;
        let uncapped = base * 2f64.powi(exponent);
        if uncapped > cap {
            (cap, true)
        } else {
            (uncapped, false)
        }
    }

    /// The policy in words for `check` (which labels it `retry:`): `up to 3 attempts on
    /// agent-failed, …; backoff 30 s doubling to 600 s`, or `off (1 attempt)`.
    pub fn describe(&self) -> String {
        if self.max_attempts <= 1 || self.on.is_empty() {
            return format!(
                "off ({} attempt{})",
                self.max_attempts,
                if self.max_attempts == 1 { "" } else { "s" }
            );
        }
        let on: Vec<&str> = self.on.iter().map(|status| status.as_str()).collect();
        format!(
            "up to {} attempts on {}; backoff {} s doubling to {} s",
            self.max_attempts,
            on.join(", "),
            format_seconds(self.backoff_seconds),
            format_seconds(self.max_backoff_seconds)
        )
    }

    /// Reads the `retry` object (absent or `null`: the defaults).
    pub(crate) fn from_config(value: Option<&Value>) -> Result<Self, ConfigError> {
        let Some(section) = Section::read("retry", value, &KEYS)? else {
            return Ok(Self::default());
        };
        let max_attempts = section
            .integer("max_attempts", 1)?
            .unwrap_or(DEFAULT_MAX_ATTEMPTS);
        let on = match section.strings("on")? {
            None => DEFAULT_RETRY_ON.to_vec(),
            Some(names) => retry_on(&section, &names)?,
        };
        // A default never conflicts with a value the user wrote: setting only a long backoff
        // raises the default cap, setting only a low cap lowers the default backoff.
        let (backoff_seconds, max_backoff_seconds) = match (
            section.seconds("backoff_seconds", true)?,
            section.seconds("max_backoff_seconds", true)?,
        ) {
            (None, None) => (DEFAULT_BACKOFF_SECONDS, DEFAULT_MAX_BACKOFF_SECONDS),
            (Some(backoff), None) => (backoff, DEFAULT_MAX_BACKOFF_SECONDS.max(backoff)),
            (None, Some(cap)) => (DEFAULT_BACKOFF_SECONDS.min(cap), cap),
            (Some(backoff), Some(cap)) if cap < backoff => {
                return Err(ConfigError(format!(
                    "expected retry.max_backoff_seconds to be at least retry.backoff_seconds ({})",
                    format_seconds(backoff)
                )));
            }
            (Some(backoff), Some(cap)) => (backoff, cap),
        };
        Ok(Self {
            max_attempts,
            on,
            backoff_seconds,
            max_backoff_seconds,
        })
    }
}

fn retry_on(section: &Section<'_>, names: &[String]) -> Result<Vec<AttemptStatus>, ConfigError> {
    let retryable = || {
        RETRYABLE
            .iter()
            .map(|status| status.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut on = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let key = format!("{}[{index}]", section.key("on"));
        let status = match AttemptStatus::parse(name) {
            Some(status) if is_retryable(status) => status,
            Some(status) => {
                return Err(ConfigError(format!(
                    "{key}: {status} is never retried; retryable statuses: {}",
                    retryable()
                )));
            }
            None => {
                return Err(ConfigError(format!(
                    "invalid {key} '{}'; retryable statuses: {}",
                    name.escape_debug(),
                    retryable()
                )));
            }
        };
        if on.contains(&status) {
            return Err(ConfigError(format!("{key}: {status} is listed twice")));
        }
        on.push(status);
    }
    Ok(on)
}

fn finite_or_zero(seconds: f64) -> f64 {
    if seconds.is_finite() && seconds > 0.0 {
        seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::parse_config;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<RetryPolicy, String> {
        parse_config(text.as_bytes())
            .map(|config| config.retry)
            .map_err(|error| error.0)
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
        assert_eq!(default.on, DEFAULT_RETRY_ON);
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
            on: AttemptStatus::ALL.to_vec(),
            ..RetryPolicy::default()
        };
        for status in AttemptStatus::ALL {
            assert_eq!(policy.retries_on(status), RETRYABLE.contains(&status));
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
}
