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
//!    and `phase-complete` always stop ([`super::RETRYABLE`] lists the others).
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
use serde::Serialize;

use super::{RetryPolicy, is_retryable};
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::state::AttemptStatus;
use crate::domain::timestamp::Timestamp;

/// The longest single delay the policy schedules. Config values are finite but unbounded;
/// beyond a year a delay is a typo, and the date must stay one a timestamp can hold.
pub const MAX_DELAY: TimeDelta = TimeDelta::days(366);

/// How an attempt ended, as far as the policy cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedAttempt {
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RateLimitedTemplate {
    pub template_index: usize,
    /// Rounded up to the second, so a wait on it never ends early.
    pub until: Timestamp,
    /// Why that time: one of the wait reasons ([`RetryReason::kind`] is [`StepKind::Wait`]).
    pub reason: RetryReason,
}

/// Why the next attempt starts when it does. Serialized in kebab case (`reset-time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
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
    pub const ALL: [RetryReason; 7] = [
        Self::Backoff,
        Self::BackoffCapped,
        Self::FallbackTemplate,
        Self::ResetTime,
        Self::DefaultWaitNoReset,
        Self::DefaultWaitPastReset,
        Self::MaxWaitCap,
    ];

    /// The serialized name (`reset-time`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Backoff => "backoff",
            Self::BackoffCapped => "backoff-capped",
            Self::FallbackTemplate => "fallback-template",
            Self::ResetTime => "reset-time",
            Self::DefaultWaitNoReset => "default-wait-no-reset",
            Self::DefaultWaitPastReset => "default-wait-past-reset",
            Self::MaxWaitCap => "max-wait-cap",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
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

impl std::fmt::Display for RetryReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
pub fn next_step(
    finished: &FinishedAttempt,
    ledger: &RetryLedger,
    retry: &RetryPolicy,
    rate_limit: &RateLimitPolicy,
    template_count: usize,
    now: DateTime<Utc>,
) -> NextStep {
    let count = template_count.max(1);
    let current = finished.template_index.min(count - 1);
    if !is_retryable(finished.status) {
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
pub fn ceil_to_second(at: DateTime<Utc>) -> Timestamp {
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
mod tests {
    use super::*;
    use crate::domain::retry::{DEFAULT_RETRY_ON, RETRYABLE};
    use chrono::TimeZone;
    use proptest::prelude::*;

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
                attempt,
                template_index,
                reason,
                ledger,
                ..
            } => (
                (not_before - now()).num_milliseconds(),
                attempt,
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
        for status in AttemptStatus::ALL {
            let expected = if !RETRYABLE.contains(&status) {
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
            on: RETRYABLE.to_vec(),
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
            NextStep::RetryAfter { attempt, of, .. } => assert_eq!((attempt, of), (2, 3)),
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
        assert_eq!(DEFAULT_RETRY_ON.len(), 6);
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
        for reason in RetryReason::ALL {
            assert_eq!(RetryReason::parse(reason.as_str()), Some(reason));
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
            6 => prop::sample::select(AttemptStatus::ALL.to_vec()),
        ]
    }

    fn arb_policies() -> impl Strategy<Value = (RetryPolicy, RateLimitPolicy)> {
        (
            1u32..5,
            prop::sample::subsequence(RETRYABLE.to_vec(), 0..=RETRYABLE.len()),
            0.0f64..100.0,
            0.0f64..1000.0,
            0u32..4,
            1.0f64..1000.0,
            1.0f64..10_000.0,
            0usize..3,
        )
            .prop_map(
                |(
                    max_attempts,
                    on,
                    backoff,
                    extra,
                    max_waits,
                    default_wait,
                    max_wait,
                    fallbacks,
                )| {
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
                let NextStep::RetryAfter { not_before, attempt: k, of, template_index, reason, ledger: next } = step else {
                    break;
                };
                prop_assert!(is_retryable(status), "{} retried", status);
                prop_assert!(not_before >= now);
                prop_assert!(k >= 1 && k <= retry.max_attempts && of == retry.max_attempts);
                prop_assert_eq!(k, next.attempt);
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
            status in prop::sample::select(AttemptStatus::ALL.to_vec()),
            template_index in 0usize..5,
        ) {
            prop_assume!(!is_retryable(status));
            let attempt = FinishedAttempt { status, template_index, reset_at: None };
            let step = next_step(&attempt, &RetryLedger::first(), &retry, &rate_limit, 3, now());
            prop_assert_eq!(step, NextStep::Stop(StopReason::NeverRetried));
        }
    }
}
