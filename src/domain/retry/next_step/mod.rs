//! What the runner does after an attempt of a phase ends (issue 11): retry it after a backoff,
//! run it again with the next agent template, wait for a rate limit to reset, or stop.
//!
//! [`next_step`] is pure: the caller passes the attempt's status and reset hint, the phase's
//! [`RetryLedger`] (its history in this invocation, folded into what the rules need), both
//! policies, the number of agent templates and `now`. A [`NextStep::RetryAfter`] carries the
//! ledger for the next attempt, so the caller threads it through and persists it with
//! [`super::schedule::RetrySchedule`].
//!
//! The rules, in the order they apply:
//!
//! 1. `blocked`, `needs-clarification`, `interrupted`, `launch-failed`, `execution-io-failed`
//!    and `phase-complete` always stop ([`AttemptStatus::is_retryable`] says which).
//! 2. `rate-limited`: the template that ran joins the **wait cycle** (the templates
//!    rate-limited since the phase's first attempt in this invocation or the last wait), with
//!    the time it should be usable again — the reset hint if it is not in the past, else
//!    `default_wait_seconds` from now, either capped at `max_wait_seconds` from now.
//!    - If a template is not in the cycle, the attempt runs again at once with the next such
//!      template (after the current one, wrapping): [`RetryReason::FallbackTemplate`]. This
//!      needs fallback templates, not waits: configuring them opts in.
//!    - Else, if waits are on and `waits_used < max_waits`, the runner waits until the
//!      earliest of the cycle's times (never before `now`) and runs the attempt again with the
//!      primary template; the cycle starts over. The reason says why that time was chosen.
//!    - Else the attempt is retried like any other failure (rule 3) if `retry.on` has
//!      `rate-limited`, with the primary template and a new cycle; otherwise the run stops.
//! 3. Any other retryable status: retried if `retry.on` has it and fewer than `max_attempts`
//!    counted attempts were made, after `backoff_seconds × 2^(retry − 1)` capped at
//!    `max_backoff_seconds`, with the same template (a fallback in use stays in use: the
//!    primary it replaced may still be limited).
//!
//! Counting: `max_attempts` bounds the **counted** attempts — the first and each retry of
//! rule 3. Running the same attempt again after a template switch or a wait does not count
//! against it (so `--wait` works with the default `max_attempts` of 1): waits are bounded by
//! `max_waits`, switches by the number of templates per cycle, and a cycle only starts over
//! after a wait or a counted retry, so every phase ends after finitely many attempts.
//! A zero-length wait (the earliest template's time already passed) still counts as a wait.

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::RetryPolicy;
use super::schedule::count;
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::state::AttemptStatus;
use crate::domain::timestamp::Timestamp;

/// The longest single delay the policy schedules. Config values are finite but unbounded;
/// beyond a year a delay is a typo, and the date must stay one a timestamp can hold.
pub(crate) const MAX_DELAY: TimeDelta = TimeDelta::days(366);

/// How an attempt ended, as far as the policy cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FinishedAttempt {
    pub status: AttemptStatus,
    /// Which agent template ran: 0 is the primary (`agent_cmd`/`--agent-cmd`), `i + 1` is
    /// `rate_limit.fallback_agent_cmds[i]`.
    pub template_index: usize,
    /// The reset time found in its output ([`crate::domain::rate_limit::reset_time`]); only
    /// read for `rate-limited`.
    pub reset_at: Option<DateTime<Utc>>,
}

/// One phase's retry history in this invocation, folded into what the rules need. Start with
/// [`RetryLedger::first`]; after each attempt use the ledger of the [`NextStep::RetryAfter`]
/// (or of a resumed [`super::schedule::RetrySchedule`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryLedger {
    /// The counted attempt number of the attempt that ran (1 for the first; see the module
    /// doc for what counts).
    pub attempt: u32,
    /// Waits for a rate-limit reset taken so far.
    pub waits_used: u32,
    /// The wait cycle: templates rate-limited since the first attempt, the last wait or the
    /// last counted retry after a rate limit, in the order they were limited.
    pub rate_limited: Vec<RateLimitedTemplate>,
}

impl RetryLedger {
    /// The ledger of a phase's first attempt in an invocation.
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
    /// Why that time: one of the wait reasons ([`RetryReason::kind`] is [`StepKind::Wait`]).
    #[serde(deserialize_with = "wait_reason")]
    pub reason: RetryReason,
}

/// A reason that is one of the waits' (`invalid reason 'backoff'` otherwise).
fn wait_reason<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RetryReason, D::Error> {
    let reason = RetryReason::deserialize(deserializer)?;
    match reason.kind() {
        StepKind::Wait => Ok(reason),
        StepKind::Retry | StepKind::Switch => Err(de::Error::unknown_variant(reason.as_str(), &[])),
    }
}

/// Why the next attempt starts when it does. Serialized in kebab case (`reset-time`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum RetryReason {
    /// A counted retry after the exponential backoff.
    Backoff,
    /// A counted retry after the backoff, capped at `max_backoff_seconds`.
    BackoffCapped,
    /// The same attempt again at once, with the next template not rate-limited in this cycle.
    FallbackTemplate,
    /// A wait until the reset time found in the agent's output.
    ResetTime,
    /// A wait of `default_wait_seconds`: no reset time was found.
    DefaultWaitNoReset,
    /// A wait of `default_wait_seconds`: the reset time found was in the past.
    DefaultWaitPastReset,
    /// A wait cut to `max_wait_seconds`.
    MaxWaitCap,
}

/// The three kinds of step a [`RetryReason`] belongs to, for the line the runner prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A counted retry (`retrying phase-2 (attempt 2 of 3) after missing-marker in 30 s`).
    Retry,
    /// The same attempt with another template, at once.
    Switch,
    /// The same attempt after waiting for a rate limit (`rate-limited: … waiting until …`).
    Wait,
}

impl RetryReason {
    /// The serialized name (`reset-time`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The words for the user (`waiting until 15:00:00 UTC (reset time from the agent's
    /// output)`).
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
    /// The status is never retried (rule 1).
    NeverRetried,
    /// `retry.on` does not name the status.
    NotInRetryOn,
    /// `max_attempts` counted attempts were made.
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

/// The decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextStep {
    /// Run the phase again, not before `not_before`.
    RetryAfter {
        /// Never before `now`; `now` itself for a switch or a zero backoff.
        not_before: DateTime<Utc>,
        /// The counted attempt number of the next attempt (k in "attempt k of n").
        attempt: u32,
        /// `max_attempts` (n).
        of: u32,
        /// The template the next attempt uses.
        template_index: usize,
        reason: RetryReason,
        /// The ledger of the next attempt: pass it to the next call, persist it in the
        /// schedule.
        ledger: RetryLedger,
    },
    Stop(StopReason),
}

/// Applies the rules of the module doc. `template_count` is the number of agent templates
/// (1 + fallbacks; 0 is read as 1); a `template_index` out of range is read as the last one.
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
            attempt: ledger.attempt,
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
                attempt: ledger.attempt,
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
    let attempt = ledger.attempt + 1;
    Ok(NextStep::RetryAfter {
        not_before: later(now, seconds),
        attempt,
        of: retry.max_attempts,
        template_index,
        reason: if capped {
            RetryReason::BackoffCapped
        } else {
            RetryReason::Backoff
        },
        ledger: RetryLedger {
            attempt,
            waits_used: ledger.waits_used,
            rate_limited: cycle,
        },
    })
}

/// When a template rate-limited `now` should be usable again, and why that time.
fn usable_again(
    reset_at: Option<DateTime<Utc>>,
    rate_limit: &RateLimitPolicy,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, RetryReason) {
    let (until, reason) = match reset_at {
        Some(at) if at >= now => (at, RetryReason::ResetTime),
        Some(_) => (
            later(now, rate_limit.default_wait_seconds),
            RetryReason::DefaultWaitPastReset,
        ),
        None => (
            later(now, rate_limit.default_wait_seconds),
            RetryReason::DefaultWaitNoReset,
        ),
    };
    let cap = later(now, rate_limit.max_wait_seconds);
    if until > cap {
        (cap, RetryReason::MaxWaitCap)
    } else {
        (until, reason)
    }
}

/// `now` plus `seconds` (to the millisecond), within [`MAX_DELAY`]; a non-finite or negative
/// value is no delay.
fn later(now: DateTime<Utc>, seconds: f64) -> DateTime<Utc> {
    let max = MAX_DELAY.num_seconds() as f64;
    let seconds = if seconds.is_finite() {
        seconds.clamp(0.0, max)
    } else if seconds > 0.0 {
        max
    } else {
        0.0
    };
    let delay = TimeDelta::milliseconds((seconds * 1000.0).round() as i64);
    now.checked_add_signed(delay)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Rounds up to the whole second, the precision timestamps are stored with, so that a time
/// read back is never earlier than the one decided.
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
