//! The retry schedule a runner persists (issue 11) so that a handler that dies during a backoff
//! or a rate-limit wait loses nothing: a later `run` under the same policy resumes it, honouring
//! its not-before time. This file owns the record's shape, its strict reading (the state
//! reader's words: `missing required key attempt (at retry_schedule.attempt)`, `unexpected key
//! retry_schedule.extra`) and its invariants; where it sits in `state.json` is the state
//! schema's business.
//!
//! ```json
//! {
//!   "phase_id": "phase-2",
//!   "after": "rate-limited",
//!   "attempt": 1,
//!   "waits_used": 0,
//!   "template_index": 1,
//!   "not_before": "2026-11-30T12:00:00Z",
//!   "reason": "fallback-template",
//!   "rate_limited": [
//!     {"template_index": 0, "until": "2026-11-30T15:00:00Z", "reason": "reset-time"}
//!   ]
//! }
//! ```
//!
//! - `after`: the status of the attempt that led to the schedule (retryable, never
//!   `phase-complete`, `blocked`, …).
//! - `attempt`: the counted attempt number the scheduled attempt has (k in "attempt k of n");
//!   `waits_used`: the waits taken including a scheduled one; `rate_limited`: the wait cycle.
//!   Together they are the [`RetryLedger`] of the scheduled attempt ([`RetrySchedule::ledger`]).
//! - `not_before` is rounded up to the second, so a resumed wait never ends early.

use serde::Serialize;

use super::next_step::{
    NextStep, RateLimitedTemplate, RetryLedger, RetryReason, StepKind, ceil_to_second,
};
use super::{RetryPolicy, is_retryable};
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::state::AttemptStatus;
use crate::domain::strict_json::{self, Object, StrictError};
use crate::domain::timestamp::Timestamp;

/// A scheduled next attempt of a phase. Field order is the on-disk key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetrySchedule {
    pub phase_id: String,
    pub after: AttemptStatus,
    pub attempt: u32,
    pub waits_used: u32,
    pub template_index: usize,
    pub not_before: Timestamp,
    pub reason: RetryReason,
    pub rate_limited: Vec<RateLimitedTemplate>,
}

/// The schedule's keys, in on-disk order.
pub const SCHEDULE_KEYS: [&str; 8] = [
    "phase_id",
    "after",
    "attempt",
    "waits_used",
    "template_index",
    "not_before",
    "reason",
    "rate_limited",
];

/// The keys of one `rate_limited` entry, in on-disk order.
pub const RATE_LIMITED_KEYS: [&str; 3] = ["template_index", "until", "reason"];

impl RetrySchedule {
    /// The schedule for `step` after a `phase_id` attempt that ended `after`; `None` for a
    /// stop.
    pub fn from_step(phase_id: &str, after: AttemptStatus, step: &NextStep) -> Option<Self> {
        match step {
            NextStep::Stop(_) => None,
            NextStep::RetryAfter {
                not_before,
                template_index,
                reason,
                ledger,
                ..
            } => Some(Self {
                phase_id: phase_id.to_owned(),
                after,
                attempt: ledger.attempt,
                waits_used: ledger.waits_used,
                template_index: *template_index,
                not_before: ceil_to_second(*not_before),
                reason: *reason,
                rate_limited: ledger.rate_limited.clone(),
            }),
        }
    }

    /// The ledger of the scheduled attempt, to pass to [`super::next_step::next_step`] after
    /// it ran.
    pub fn ledger(&self) -> RetryLedger {
        RetryLedger {
            attempt: self.attempt,
            waits_used: self.waits_used,
            rate_limited: self.rate_limited.clone(),
        }
    }

    /// Whether the effective policy still allows this schedule (a rerun may have changed the
    /// config or flags): `Err` says what no longer fits, and the runner then treats the phase
    /// as stopped, as without a policy.
    pub fn fits(
        &self,
        retry: &RetryPolicy,
        rate_limit: &RateLimitPolicy,
        template_count: usize,
    ) -> Result<(), String> {
        if self.attempt > retry.max_attempts {
            return Err(format!(
                "attempt {} exceeds retry.max_attempts ({})",
                self.attempt, retry.max_attempts
            ));
        }
        if self.waits_used > rate_limit.max_waits {
            return Err(format!(
                "{} waits exceed rate_limit.max_waits ({})",
                self.waits_used, rate_limit.max_waits
            ));
        }
        let highest = self
            .rate_limited
            .iter()
            .map(|entry| entry.template_index)
            .chain([self.template_index])
            .max()
            .unwrap_or(0);
        if highest >= template_count.max(1) {
            return Err(format!(
                "agent template {highest} is not configured ({} template{})",
                template_count.max(1),
                if template_count.max(1) == 1 { "" } else { "s" }
            ));
        }
        if self.reason.kind() == StepKind::Retry && !retry.retries_on(self.after) {
            return Err(format!("{} is not in retry.on", self.after));
        }
        Ok(())
    }

    /// The schedule as a standalone JSON document: 2-space indentation, trailing newline.
    pub fn to_json(&self) -> String {
        // A `Value` renders infallibly; `{:#}` is serde_json's pretty form.
        let value = serde_json::to_value(self).unwrap_or_default();
        format!("{value:#}\n")
    }

    /// Reads and validates a standalone schedule document (what [`Self::to_json`] writes).
    pub fn from_json(bytes: &[u8]) -> Result<Self, StrictError> {
        let document = strict_json::parse_document(bytes)?;
        let schedule = Self::from_object(&strict_json::root_object(&document)?)?;
        schedule.validate("")?;
        Ok(schedule)
    }

    /// Reads a schedule object strictly (every key required, no other allowed); the state
    /// reader calls it on `retry_schedule`, then [`Self::validate`].
    pub fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&SCHEDULE_KEYS)?;
        Ok(Self {
            phase_id: object.string("phase_id")?.to_owned(),
            after: object.enumerated("after", |text| {
                AttemptStatus::parse(text).filter(|status| is_retryable(*status))
            })?,
            attempt: object.positive_integer("attempt")?,
            waits_used: count(object, "waits_used")?,
            template_index: count(object, "template_index")?,
            not_before: object.timestamp("not_before")?,
            reason: object.enumerated("reason", RetryReason::parse)?,
            rate_limited: object
                .object_list("rate_limited")?
                .iter()
                .map(entry_from_object)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The invariants of a schedule the policy can produce; `key` is where it sits
    /// (`retry_schedule`, or empty for a standalone document). Run on read and before writes.
    pub fn validate(&self, key: &str) -> Result<(), StrictError> {
        let at = |field: &str| {
            if key.is_empty() {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            }
        };
        let fail = |message: String| Err(StrictError(message));
        strict_json::require_nonempty(&at("phase_id"), &self.phase_id)?;
        if !is_retryable(self.after) {
            return fail(format!("invalid {} '{}'", at("after"), self.after));
        }
        if self.attempt == 0 {
            return fail(format!(
                "expected {} to be a positive integer",
                at("attempt")
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
        let rate_limited_after = || {
            if self.after == AttemptStatus::RateLimited {
                Ok(())
            } else {
                fail(format!(
                    "{} must be rate-limited for reason {reason}",
                    at("after")
                ))
            }
        };
        match reason.kind() {
            StepKind::Retry if self.attempt < 2 => fail(format!(
                "{} must be at least 2 for reason {reason}",
                at("attempt")
            )),
            StepKind::Retry => Ok(()),
            StepKind::Switch => {
                rate_limited_after()?;
                if self.rate_limited.is_empty() {
                    return fail(format!(
                        "{} must not be empty for reason {reason}",
                        at("rate_limited")
                    ));
                }
                if self
                    .rate_limited
                    .iter()
                    .any(|entry| entry.template_index == self.template_index)
                {
                    return fail(format!(
                        "{} names a rate-limited template for reason {reason}",
                        at("template_index")
                    ));
                }
                Ok(())
            }
            StepKind::Wait => {
                rate_limited_after()?;
                if self.waits_used == 0 {
                    return fail(format!(
                        "{} must be at least 1 for reason {reason}",
                        at("waits_used")
                    ));
                }
                if self.template_index != 0 {
                    return fail(format!(
                        "{} must be 0 for reason {reason}",
                        at("template_index")
                    ));
                }
                if !self.rate_limited.is_empty() {
                    return fail(format!(
                        "{} must be empty for reason {reason}",
                        at("rate_limited")
                    ));
                }
                Ok(())
            }
        }
    }
}

fn entry_from_object(object: &Object<'_>) -> Result<RateLimitedTemplate, StrictError> {
    object.expect_keys(&RATE_LIMITED_KEYS)?;
    Ok(RateLimitedTemplate {
        template_index: count(object, "template_index")?,
        until: object.timestamp("until")?,
        reason: object.enumerated("reason", |text| {
            RetryReason::parse(text).filter(|reason| reason.kind() == StepKind::Wait)
        })?,
    })
}

/// A non-negative integer that fits in `T`.
fn count<T: TryFrom<i64>>(object: &Object<'_>, key: &str) -> Result<T, StrictError> {
    let value: i64 = object.integer(key)?;
    u32::try_from(value)
        .ok()
        .and_then(|value| T::try_from(i64::from(value)).ok())
        .ok_or_else(|| {
            StrictError(format!(
                "expected {} to be a non-negative integer that fits in 32 bits",
                object.qualified(key)
            ))
        })
}

#[cfg(test)]
mod tests {
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

    fn read(value: &Value) -> Result<RetrySchedule, String> {
        RetrySchedule::from_json(value.to_string().as_bytes()).map_err(|error| error.0)
    }

    /// Reads the schedule nested under `retry_schedule`, as the state reader will.
    fn read_nested(value: &Value) -> Result<RetrySchedule, String> {
        let document = json!({ "retry_schedule": value });
        let root = strict_json::root_object(&document).unwrap();
        let object = root.object("retry_schedule").map_err(|error| error.0)?;
        let schedule = RetrySchedule::from_object(&object).map_err(|error| error.0)?;
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
        let text = switch().to_json();
        assert_eq!(
            text,
            r#"{
  "phase_id": "phase-2",
  "after": "rate-limited",
  "attempt": 1,
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
        assert_eq!(RetrySchedule::from_json(text.as_bytes()), Ok(switch()));
        let value = serde_json::to_value(switch()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, SCHEDULE_KEYS);
        let entry_keys: Vec<&str> = value["rate_limited"][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(entry_keys, RATE_LIMITED_KEYS);
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
    fn invariants_are_checked() {
        let cases: Vec<(Value, &str)> = vec![
            (
                edited(|v| v["phase_id"] = json!("")),
                "expected retry_schedule.phase_id to be nonempty",
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
        let schedule =
            RetrySchedule::from_step("phase-2", AttemptStatus::RateLimited, &step).unwrap();
        assert_eq!(schedule.reason, RetryReason::FallbackTemplate);
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
            RetrySchedule::from_json(schedule.to_json().as_bytes()),
            Ok(schedule.clone())
        );
        assert_eq!(schedule.fits(&retry, &rate_limit, 2), Ok(()));
        assert_eq!(
            schedule.fits(&retry, &rate_limit, 1),
            Err("agent template 1 is not configured (1 template)".to_owned())
        );
        assert_eq!(
            schedule.fits(&retry, &RateLimitPolicy::default(), 2),
            Ok(()),
            "a switch uses no wait"
        );
        assert_eq!(
            RetrySchedule::from_step(
                "phase-2",
                AttemptStatus::Blocked,
                &NextStep::Stop(crate::domain::retry::next_step::StopReason::NeverRetried)
            ),
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
            schedule.fits(&retry, &RateLimitPolicy::default(), 2),
            Err("attempt 3 exceeds retry.max_attempts (2)".to_owned())
        );
        let retry = RetryPolicy {
            max_attempts: 3,
            on: vec![],
            ..RetryPolicy::default()
        };
        assert_eq!(
            schedule.fits(&retry, &RateLimitPolicy::default(), 2),
            Err("timeout is not in retry.on".to_owned())
        );
        schedule.waits_used = 2;
        assert_eq!(
            schedule.fits(
                &RetryPolicy {
                    max_attempts: 3,
                    ..RetryPolicy::default()
                },
                &RateLimitPolicy::default(),
                2
            ),
            Err("2 waits exceed rate_limit.max_waits (0)".to_owned())
        );
    }

    proptest! {
        #[test]
        fn from_json_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = RetrySchedule::from_json(&bytes);
        }

        #[test]
        fn every_policy_step_writes_a_valid_schedule(
            status in prop::sample::select(crate::domain::retry::RETRYABLE.to_vec()),
            template_index in 0usize..3,
            reset_ms in prop::option::of(-100_000i64..100_000_000),
            attempt in 1u32..4,
            waits_used in 0u32..3,
        ) {
            let retry = RetryPolicy { max_attempts: 4, on: crate::domain::retry::RETRYABLE.to_vec(), ..RetryPolicy::default() };
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
            if let Some(schedule) = RetrySchedule::from_step("phase-1", status, &step) {
                prop_assert_eq!(schedule.validate("retry_schedule"), Ok(()));
                prop_assert_eq!(schedule.fits(&retry, &rate_limit, 3), Ok(()));
                prop_assert!(schedule.not_before.as_datetime() >= now());
                prop_assert_eq!(RetrySchedule::from_json(schedule.to_json().as_bytes()), Ok(schedule));
            }
        }
    }
}
