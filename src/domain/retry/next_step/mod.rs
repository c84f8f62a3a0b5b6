//! What the runner does after an attempt of a phase ends: retry it after a backoff, run it
//! again with the next agent template, wait for a rate limit to reset, or stop. The rules, and
//! how attempts and waits count, are docs/unattended-runs.md, "The policy"; [`next_step`]
//! applies them purely (the caller passes `now`).

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, IntoStaticStr};

use super::RetryPolicy;
use super::schedule::count;
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::state::AttemptStatus;
use crate::domain::timestamp::Timestamp;

/// The longest single delay. Config values are finite but unbounded; beyond a year a delay is
/// a typo, and the date must stay one a timestamp can hold.
pub(crate) const MAX_DELAY: TimeDelta = TimeDelta::days(366);

/// How an attempt ended, as far as the policy cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FinishedAttempt {
    pub status: AttemptStatus,
    /// 0 is the primary template, `i + 1` is `rate_limit.fallback_agent_cmds[i]`.
    pub template_index: usize,
    /// The reset time found in its output; only read for `rate-limited`.
    pub reset_at: Option<DateTime<Utc>>,
}

/// One phase's retry history in this invocation, folded into what the rules need. Start with
/// [`RetryLedger::first`]; after each attempt use the ledger of the [`NextStep::RetryAfter`]
/// (or of a resumed [`super::schedule::RetrySchedule`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryLedger {
    /// The counted attempt number of the attempt that ran.
    pub attempt: u32,
    pub waits_used: u32,
    /// The wait cycle, in the order the templates were limited.
    pub rate_limited: Vec<RateLimitedTemplate>,
}

impl RetryLedger {
    pub fn first() -> Self {
        Self {
            attempt: 1,
            waits_used: 0,
            rate_limited: Vec::new(),
        }
    }
}

/// A template in the wait cycle and when it should be usable again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitedTemplate {
    #[serde(deserialize_with = "count")]
    pub template_index: usize,
    /// Rounded up to the second, so a wait on it never ends early.
    pub until: Timestamp,
    /// Always a [`StepKind::Wait`] reason.
    #[serde(deserialize_with = "wait_reason")]
    pub reason: RetryReason,
}

/// `invalid reason 'backoff'` for a reason that is no wait's.
fn wait_reason<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RetryReason, D::Error> {
    let reason = RetryReason::deserialize(deserializer)?;
    match reason.kind() {
        StepKind::Wait => Ok(reason),
        StepKind::Retry | StepKind::Switch => Err(de::Error::unknown_variant(reason.as_str(), &[])),
    }
}

/// Why the next attempt starts when it does.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Display, IntoStaticStr, EnumIter,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum RetryReason {
    Backoff,
    BackoffCapped,
    FallbackTemplate,
    ResetTime,
    DefaultWaitNoReset,
    DefaultWaitPastReset,
    MaxWaitCap,
}

/// The kinds of step: a counted retry, the same attempt with another template at once, or the
/// same attempt after waiting for a rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    Retry,
    Switch,
    Wait,
}

impl RetryReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Backoff => "exponential backoff",
            Self::BackoffCapped => "exponential backoff, capped at max_backoff_seconds",
            Self::FallbackTemplate => "the agent template is rate-limited; trying the next one",
            Self::ResetTime => "reset time from the agent's output",
            Self::DefaultWaitNoReset => "default wait: no reset time found",
            Self::DefaultWaitPastReset => "default wait: reset time is in the past",
            Self::MaxWaitCap => "capped at max_wait_seconds",
        }
    }

    pub fn kind(self) -> StepKind {
        match self {
            Self::Backoff | Self::BackoffCapped => StepKind::Retry,
            Self::FallbackTemplate => StepKind::Switch,
            Self::ResetTime
            | Self::DefaultWaitNoReset
            | Self::DefaultWaitPastReset
            | Self::MaxWaitCap => StepKind::Wait,
        }
    }
}

/// Why the policy stops the phase (the run then stops exactly as it does without a policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    NeverRetried,
    NotInRetryOn,
    AttemptsExhausted,
    /// Rate-limited with waits on, every template limited, `max_waits` used, and no retry
    /// left for it.
    WaitsExhausted,
}

impl StopReason {
    pub fn describe(self) -> &'static str {
        match self {
            Self::NeverRetried => "never retried",
            Self::NotInRetryOn => "not in retry.on",
            Self::AttemptsExhausted => "no attempts left",
            Self::WaitsExhausted => "no waits left",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextStep {
    RetryAfter {
        /// Never before `now`; `now` itself for a switch or a zero backoff.
        not_before: DateTime<Utc>,
        /// n in "attempt k of n" for the next attempt (k is `ledger.attempt`).
        of: u32,
        template_index: usize,
        reason: RetryReason,
        /// The ledger of the next attempt: pass it to the next call, persist it in the
        /// schedule.
        ledger: RetryLedger,
    },
    Stop(StopReason),
}

/// `template_count` is 1 + fallbacks (0 is read as 1); a `template_index` out of range is
/// read as the last one.
pub(crate) fn next_step(
    finished: &FinishedAttempt,
    ledger: &RetryLedger,
    retry: &RetryPolicy,
    rate_limit: &RateLimitPolicy,
    template_count: usize,
    now: DateTime<Utc>,
) -> NextStep {
    let count = template_count.max(1);
    let current = finished.template_index.min(count - 1);
    if !finished.status.is_retryable() {
        return NextStep::Stop(StopReason::NeverRetried);
    }
    // The current template either just got limited again (re-added below with its new time)
    // or just ran without a rate limit, so it is usable and leaves the cycle.
    let mut cycle: Vec<RateLimitedTemplate> = Vec::with_capacity(ledger.rate_limited.len() + 1);
    for entry in &ledger.rate_limited {
        let known = cycle
            .iter()
            .any(|kept| kept.template_index == entry.template_index);
        if entry.template_index < count && entry.template_index != current && !known {
            cycle.push(entry.clone());
        }
    }
    if finished.status != AttemptStatus::RateLimited {
        return counted_retry(finished.status, ledger, retry, current, cycle, now)
            .unwrap_or_else(NextStep::Stop);
    }

    let (until, reason) = usable_again(finished.reset_at, rate_limit, now);
    cycle.push(RateLimitedTemplate {
        template_index: current,
        until: ceil_to_second(until),
        reason,
    });
    let untried = (1..count)
        .map(|offset| (current + offset) % count)
        .find(|index| !cycle.iter().any(|entry| entry.template_index == *index));
    if let Some(next) = untried {
        return NextStep::RetryAfter {
            not_before: now,
            of: retry.max_attempts,
            template_index: next,
            reason: RetryReason::FallbackTemplate,
            ledger: RetryLedger {
                attempt: ledger.attempt,
                waits_used: ledger.waits_used,
                rate_limited: cycle,
            },
        };
    }
    if ledger.waits_used < rate_limit.max_waits {
        let earliest = cycle.iter().min_by_key(|entry| entry.until);
        if let Some(earliest) = earliest {
            return NextStep::RetryAfter {
                not_before: earliest.until.as_datetime().max(now),
                of: retry.max_attempts,
                template_index: 0,
                reason: earliest.reason,
                ledger: RetryLedger {
                    attempt: ledger.attempt,
                    waits_used: ledger.waits_used + 1,
                    rate_limited: Vec::new(),
                },
            };
        }
    }
    // Every template is limited and no wait is left: a counted retry, if the policy has one
    // for rate limits, starts over with the primary template.
    counted_retry(finished.status, ledger, retry, 0, Vec::new(), now).unwrap_or_else(|reason| {
        if rate_limit.waits_enabled() {
            NextStep::Stop(StopReason::WaitsExhausted)
        } else {
            NextStep::Stop(reason)
        }
    })
}

/// Rule 3: a counted retry after the backoff, or why there is none.
fn counted_retry(
    status: AttemptStatus,
    ledger: &RetryLedger,
    retry: &RetryPolicy,
    template_index: usize,
    cycle: Vec<RateLimitedTemplate>,
    now: DateTime<Utc>,
) -> Result<NextStep, StopReason> {
    if !retry.retries_on(status) {
        return Err(StopReason::NotInRetryOn);
    }
    if ledger.attempt >= retry.max_attempts {
        return Err(StopReason::AttemptsExhausted);
    }
    // The retry number is the counted attempt just made: attempt 1 failed → retry 1.
    let (seconds, capped) = retry.backoff_seconds_for(ledger.attempt);
    Ok(NextStep::RetryAfter {
        not_before: later(now, seconds),
        of: retry.max_attempts,
        template_index,
        reason: if capped {
            RetryReason::BackoffCapped
        } else {
            RetryReason::Backoff
        },
        ledger: RetryLedger {
            attempt: ledger.attempt + 1,
            waits_used: ledger.waits_used,
            rate_limited: cycle,
        },
    })
}

/// When a template rate-limited `now` should be usable again, and why then.
fn usable_again(
    reset_at: Option<DateTime<Utc>>,
    rate_limit: &RateLimitPolicy,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, RetryReason) {
    let default_wait = later(now, rate_limit.default_wait_seconds);
    let (until, reason) = match reset_at {
        Some(at) if at >= now => (at, RetryReason::ResetTime),
        Some(_) => (default_wait, RetryReason::DefaultWaitPastReset),
        None => (default_wait, RetryReason::DefaultWaitNoReset),
    };
    let cap = later(now, rate_limit.max_wait_seconds);
    if until > cap {
        (cap, RetryReason::MaxWaitCap)
    } else {
        (until, reason)
    }
}

/// `now` plus `seconds` (to the millisecond), within [`MAX_DELAY`]; a negative value is no
/// delay, and so is NaN (the cast saturates it to 0).
fn later(now: DateTime<Utc>, seconds: f64) -> DateTime<Utc> {
    let seconds = seconds.clamp(0.0, MAX_DELAY.num_seconds() as f64);
    let delay = TimeDelta::milliseconds((seconds * 1000.0).round() as i64);
    now.checked_add_signed(delay)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Rounds up to the second timestamps are stored with, so a time read back is never earlier
/// than the one decided.
pub(crate) fn ceil_to_second(at: DateTime<Utc>) -> Timestamp {
    let floor = at.trunc_subsecs(0);
    let ceil = if floor < at {
        floor
            .checked_add_signed(TimeDelta::seconds(1))
            .unwrap_or(floor)
    } else {
        floor
    };
    Timestamp::from_datetime(ceil)
}

#[cfg(test)]
mod tests;
