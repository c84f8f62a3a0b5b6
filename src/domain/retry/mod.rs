//! Opt-in retries of a failed phase: the `retry` config object and the exponential backoff
//! (docs/unattended-runs.md, "`retry`"). What follows an attempt is decided in [`next_step`];
//! the schedule persisted to resume that decision after a crash is [`schedule`].

pub(crate) mod next_step;
pub(crate) mod schedule;

use serde::Deserialize;
use strum::IntoEnumIterator;

use super::config::rules::{ConfigError, Expected, Reason, integer_at_least, seconds_or_zero};
use super::seconds::format_seconds;
use super::state::AttemptStatus;
use super::strict_json::present;
use crate::units::count;

pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 1;
pub(crate) const DEFAULT_BACKOFF_SECONDS: f64 = 30.0;
pub(crate) const DEFAULT_MAX_BACKOFF_SECONDS: f64 = 600.0;

/// `retry` as written in the config file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryConfig {
    #[serde(default, deserialize_with = "integer_at_least::<_, 1>")]
    max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    on: Option<Vec<String>>,
    #[serde(default, deserialize_with = "seconds_or_zero")]
    backoff_seconds: Option<f64>,
    #[serde(default, deserialize_with = "seconds_or_zero")]
    max_backoff_seconds: Option<f64>,
}

/// The statuses `retry.on` may name, in their order.
pub(crate) fn retryable_statuses() -> impl Iterator<Item = AttemptStatus> {
    AttemptStatus::iter().filter(|status| status.is_retryable())
}

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Counted attempts of one phase per invocation, the first included (≥ 1): waits for a
    /// rate limit and switches to a fallback template do not count.
    pub max_attempts: u32,
    /// Each once, all retryable.
    pub on: Vec<AttemptStatus>,
    /// The wait before retry 1, doubled for each later retry.
    pub backoff_seconds: f64,
    pub max_backoff_seconds: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            on: default_retry_on(),
            backoff_seconds: DEFAULT_BACKOFF_SECONDS,
            max_backoff_seconds: DEFAULT_MAX_BACKOFF_SECONDS,
        }
    }
}

impl RetryPolicy {
    /// `--retries N`: `max_attempts` = N + 1.
    pub fn with_retries(self, retries: u32) -> Self {
        Self {
            max_attempts: retries.saturating_add(1),
            ..self
        }
    }

    /// Whether a `status` attempt may be followed by a retry (attempts permitting).
    pub fn retries_on(&self, status: AttemptStatus) -> bool {
        status.is_retryable() && self.on.contains(&status)
    }

    /// The wait before retry number `retry` (1 for the first), and whether the cap applied.
    /// Non-decreasing in `retry`; never negative, NaN or above the cap.
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

    /// For `check`: `up to 3 attempts on agent-failed, …; backoff 30 s doubling to 600 s`, or
    /// `off (1 attempt)`.
    pub fn describe(&self) -> String {
        if self.max_attempts <= 1 || self.on.is_empty() {
            return format!("off ({})", count(self.max_attempts as usize, "attempt"));
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

    pub(crate) fn from_config(config: RetryConfig) -> Result<Self, ConfigError> {
        let on = match config.on {
            None => default_retry_on(),
            Some(names) => retry_on(&names)?,
        };
        // A default never conflicts with a value the user wrote: setting only a long backoff
        // raises the default cap, setting only a low cap lowers the default backoff.
        let (backoff_seconds, max_backoff_seconds) =
            match (config.backoff_seconds, config.max_backoff_seconds) {
                (None, None) => (DEFAULT_BACKOFF_SECONDS, DEFAULT_MAX_BACKOFF_SECONDS),
                (Some(backoff), None) => (backoff, DEFAULT_MAX_BACKOFF_SECONDS.max(backoff)),
                (None, Some(cap)) => (DEFAULT_BACKOFF_SECONDS.min(cap), cap),
                (Some(backoff), Some(cap)) if cap < backoff => {
                    return Err(ConfigError::wrong(
                        "retry.max_backoff_seconds",
                        Expected::AtLeastSecondsOf {
                            key: "retry.backoff_seconds",
                            seconds: backoff,
                        },
                    ));
                }
                (Some(backoff), Some(cap)) => (backoff, cap),
            };
        Ok(Self {
            max_attempts: config.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            on,
            backoff_seconds,
            max_backoff_seconds,
        })
    }
}

fn retry_on(names: &[String]) -> Result<Vec<AttemptStatus>, ConfigError> {
    let retryable = || retryable_statuses().map(AttemptStatus::as_str).collect();
    let mut on = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let key = format!("retry.on[{index}]");
        let Ok(status) = name.parse::<AttemptStatus>() else {
            return Err(ConfigError::UnknownStatus {
                key,
                name: name.clone(),
                retryable: retryable(),
            });
        };
        let invalid = |reason| Err(ConfigError::Invalid { key, reason });
        if !status.is_retryable() {
            return invalid(Reason::NeverRetried {
                status: status.as_str(),
                retryable: retryable(),
            });
        }
        if on.contains(&status) {
            return invalid(Reason::ListedTwice {
                status: status.as_str(),
            });
        }
        on.push(status);
    }
    Ok(on)
}

/// What `retry.on` is when the key is absent.
pub(crate) fn default_retry_on() -> Vec<AttemptStatus> {
    AttemptStatus::iter()
        .filter(|status| status.is_retried_by_default())
        .collect()
}

fn finite_or_zero(seconds: f64) -> f64 {
    if seconds.is_finite() && seconds > 0.0 {
        seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests;
