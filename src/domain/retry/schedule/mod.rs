//! The retry schedule a runner persists so that a handler that dies during a backoff or a
//! rate-limit wait loses nothing: its shape, strict reading and invariants
//! (docs/unattended-runs.md, "The persisted schedule"). Where it sits in `state.json` is the
//! state schema's business.

use serde::de::{self, Deserializer, Unexpected};
use serde::{Deserialize, Serialize};

use super::RetryPolicy;
use super::next_step::{
    NextStep, RateLimitedTemplate, RetryLedger, RetryReason, StepKind, ceil_to_second,
};
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::rate_limit::reset_time::ResetHint;
use crate::domain::state::AttemptStatus;
use crate::domain::strict_json::{self, StrictError, positive};
use crate::domain::timestamp::Timestamp;

/// The retry the policy scheduled after a committed attempt (durable in the same write), as
/// the run loop waits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRetry {
    pub schedule: RetrySchedule,
    /// Exactly (the schedule keeps it rounded up to the second).
    pub due: chrono::DateTime<chrono::Utc>,
    /// The phrase of the agent's output the wait is based on, if any.
    pub reset_phrase: Option<String>,
}

impl ScheduledRetry {
    /// `None` for a stop.
    pub fn from_step(
        phase_id: &str,
        after: AttemptStatus,
        step: &NextStep,
        reset: Option<ResetHint>,
    ) -> Option<Self> {
        let NextStep::RetryAfter {
            not_before,
            of,
            template_index,
            reason,
            ledger,
            ..
        } = step
        else {
            return None;
        };
        let schedule = RetrySchedule {
            phase_id: phase_id.to_owned(),
            after,
            attempt: ledger.attempt,
            max_attempts: Some(*of),
            waits_used: ledger.waits_used,
            template_index: *template_index,
            not_before: ceil_to_second(*not_before),
            reason: *reason,
            rate_limited: ledger.rate_limited.clone(),
        };
        let reset_phrase = reset
            .filter(|_| *reason == RetryReason::ResetTime)
            .map(|hint| hint.phrase);
        Some(Self {
            schedule,
            due: *not_before,
            reset_phrase,
        })
    }
}

/// What about a recorded schedule the run's policy no longer allows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleMismatch {
    #[error("attempt {attempt} exceeds retry.max_attempts ({max_attempts})")]
    Attempts { attempt: u32, max_attempts: u32 },
    #[error("{waits_used} waits exceed rate_limit.max_waits ({max_waits})")]
    Waits { waits_used: u32, max_waits: u32 },
    #[error(
        "agent template {index} is not configured ({})",
        crate::units::count(*configured, "template")
    )]
    Template { index: usize, configured: usize },
    #[error("{0} is not in retry.on")]
    NotRetried(AttemptStatus),
}

/// A scheduled next attempt of a phase. Field order is the on-disk key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySchedule {
    pub phase_id: String,
    #[serde(deserialize_with = "retryable")]
    pub after: AttemptStatus,
    #[serde(deserialize_with = "positive")]
    pub attempt: u32,
    /// n in "attempt k of n"; `None` in a schedule written before the key existed (an
    /// optional key, never `null`).
    #[serde(
        default,
        deserialize_with = "some_positive",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_attempts: Option<u32>,
    #[serde(deserialize_with = "count")]
    pub waits_used: u32,
    #[serde(deserialize_with = "count")]
    pub template_index: usize,
    pub not_before: Timestamp,
    pub reason: RetryReason,
    pub rate_limited: Vec<RateLimitedTemplate>,
}

/// `invalid after 'blocked'` for a status no policy retries.
fn retryable<'de, D: Deserializer<'de>>(deserializer: D) -> Result<AttemptStatus, D::Error> {
    let status = AttemptStatus::deserialize(deserializer)?;
    if status.is_retryable() {
        Ok(status)
    } else {
        Err(de::Error::unknown_variant(status.as_str(), &[]))
    }
}

fn some_positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    positive(deserializer).map(Some)
}

/// A non-negative integer that fits in 32 bits (and in `T`).
pub(super) fn count<'de, D: Deserializer<'de>, T: TryFrom<u32>>(
    deserializer: D,
) -> Result<T, D::Error> {
    let value = i64::deserialize(deserializer)?;
    u32::try_from(value)
        .ok()
        .and_then(|value| T::try_from(value).ok())
        .ok_or_else(|| {
            de::Error::invalid_value(
                Unexpected::Signed(value),
                &"a non-negative integer that fits in 32 bits",
            )
        })
}

impl RetrySchedule {
    /// To pass to [`super::next_step::next_step`] after the scheduled attempt ran.
    pub fn ledger(&self) -> RetryLedger {
        RetryLedger {
            attempt: self.attempt,
            waits_used: self.waits_used,
            rate_limited: self.rate_limited.clone(),
        }
    }

    /// Whether *some* run of a config with these policies can resume the schedule: a run's
    /// flags can raise the attempts (`--retries N`) and the waits (`--wait`), but nothing
    /// brings back a removed fallback agent or a status taken out of `retry.on`.
    pub fn fits_some_run(
        &self,
        retry: &RetryPolicy,
        rate_limit: &RateLimitPolicy,
        template_count: usize,
    ) -> Result<(), ScheduleMismatch> {
        let retry = RetryPolicy {
            max_attempts: u32::MAX,
            ..retry.clone()
        };
        let rate_limit = RateLimitPolicy {
            max_waits: u32::MAX,
            ..rate_limit.clone()
        };
        self.fits(&retry, &rate_limit, template_count)
    }

    /// Whether the effective policy still allows this schedule (a rerun may have changed the
    /// config or flags): `Err` says what no longer fits, and the runner then treats the phase
    /// as stopped, as without a policy.
    pub fn fits(
        &self,
        retry: &RetryPolicy,
        rate_limit: &RateLimitPolicy,
        template_count: usize,
    ) -> Result<(), ScheduleMismatch> {
        if self.attempt > retry.max_attempts {
            return Err(ScheduleMismatch::Attempts {
                attempt: self.attempt,
                max_attempts: retry.max_attempts,
            });
        }
        if self.waits_used > rate_limit.max_waits {
            return Err(ScheduleMismatch::Waits {
                waits_used: self.waits_used,
                max_waits: rate_limit.max_waits,
            });
        }
        let highest = self
            .rate_limited
            .iter()
            .map(|entry| entry.template_index)
            .chain([self.template_index])
            .max()
            .unwrap_or(0);
        if highest >= template_count.max(1) {
            return Err(ScheduleMismatch::Template {
                index: highest,
                configured: template_count.max(1),
            });
        }
        if self.reason.kind() == StepKind::Retry && !retry.retries_on(self.after) {
            return Err(ScheduleMismatch::NotRetried(self.after));
        }
        Ok(())
    }

    /// The invariants of a schedule the policy can produce, checked on read and before
    /// writes; `key` is where it sits (`retry_schedule`, or empty for a standalone document).
    pub fn validate(&self, key: &str) -> Result<(), StrictError> {
        let at = |field: &str| {
            if key.is_empty() {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            }
        };
        let fail = |message: String| Err(StrictError(message));
        strict_json::require_nonempty(at("phase_id"), &self.phase_id)?;
        if !self.after.is_retryable() {
            return fail(format!("invalid {} '{}'", at("after"), self.after));
        }
        if self.attempt == 0 {
            return fail(format!(
                "expected {} to be a positive integer",
                at("attempt")
            ));
        }
        if let Some(max_attempts) = self.max_attempts
            && self.attempt > max_attempts
        {
            return fail(format!(
                "{} ({}) exceeds {} ({max_attempts})",
                at("attempt"),
                self.attempt,
                at("max_attempts")
            ));
        }
        for (index, entry) in self.rate_limited.iter().enumerate() {
            if entry.reason.kind() != StepKind::Wait {
                return fail(format!(
                    "invalid {} '{}'",
                    at(&format!("rate_limited[{index}].reason")),
                    entry.reason
                ));
            }
            let repeated = self.rate_limited[..index]
                .iter()
                .any(|earlier| earlier.template_index == entry.template_index);
            if repeated {
                return fail(format!(
                    "{} names template {} twice",
                    at("rate_limited"),
                    entry.template_index
                ));
            }
        }
        let reason = self.reason;
        let broken =
            |field: &str, rule: &str| fail(format!("{} {rule} for reason {reason}", at(field)));
        let kind = reason.kind();
        if kind != StepKind::Retry && self.after != AttemptStatus::RateLimited {
            return broken("after", "must be rate-limited");
        }
        let names_current = || {
            self.rate_limited
                .iter()
                .any(|entry| entry.template_index == self.template_index)
        };
        match kind {
            StepKind::Retry if self.attempt < 2 => broken("attempt", "must be at least 2"),
            StepKind::Switch if self.rate_limited.is_empty() => {
                broken("rate_limited", "must not be empty")
            }
            StepKind::Switch if names_current() => {
                broken("template_index", "names a rate-limited template")
            }
            StepKind::Wait if self.waits_used == 0 => broken("waits_used", "must be at least 1"),
            StepKind::Wait if self.template_index != 0 => broken("template_index", "must be 0"),
            StepKind::Wait if !self.rate_limited.is_empty() => {
                broken("rate_limited", "must be empty")
            }
            StepKind::Retry | StepKind::Switch | StepKind::Wait => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
