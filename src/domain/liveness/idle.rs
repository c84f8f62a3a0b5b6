//! The idle rule (`--idle-timeout`, `idle_timeout_seconds`): an attempt is stopped after that
//! long without any sign of life ([`super::SignOfLife`]).
//!
//! Times are offsets from the launch (callers pass them in; nothing here reads a clock).
//!
//! - The **deadline** is the later of *last sign of life + limit* and the latest extension.
//! - `EXTEND_TIMEOUT_USEC=n` at time t makes the deadline the later of its current value and
//!   t + n, as systemd does: an extension never brings the deadline closer, and a later sign
//!   of life does not cancel it. Only the idle deadline moves; the wall-clock `--timeout` is
//!   not this rule's and is never extended.
//! - The `idle-deadline-extended` event is worth publishing when the deadline moved at least
//!   [`EXTENSION_REPORT_STEP`] beyond the last one published: an agent re-announcing the same
//!   wait every few milliseconds moves it a little each time, which is not news.
//! - The **stop message** names how long the attempt was silent by the rule (the limit, or
//!   the extension that ran out) and the last status with its age:
//!   `no output, notification or activity for 10 s (idle timeout); last status 'tool: Bash
//!   cargo test' 12 s ago`.

use std::time::Duration;

use super::SignOfLife;
use super::status::{LatestStatus, format_age};
use crate::domain::seconds::format_seconds;

/// An extension longer than this is cut to it: a report of "silent for a year" must not
/// disable the idle timeout for good. (The wall-clock timeout still applies regardless.)
pub const MAX_EXTENSION: Duration = Duration::from_secs(24 * 60 * 60);

/// An extension is published when it moves the deadline this much beyond the last published.
pub const EXTENSION_REPORT_STEP: Duration = Duration::from_secs(1);

/// The idle deadline of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleDeadline {
    limit: Duration,
    last_life: Duration,
    last_kind: Option<SignOfLife>,
    /// The latest extension's end, if it is later than `last_life + limit` was then.
    extended_until: Option<Duration>,
    /// The deadline of the last `Extension::Moved`.
    reported_extension: Option<Duration>,
}

/// What an `EXTEND_TIMEOUT_USEC` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extension {
    /// The deadline moved later, to this time: publish the `idle-deadline-extended` event.
    Moved { deadline: Duration },
    /// It moved later, but by less than [`EXTENSION_REPORT_STEP`] beyond the last one
    /// published: no event.
    Nudged { deadline: Duration },
    /// The deadline was already as late or later.
    Unchanged,
}

/// Whether the attempt is idle at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleCheck {
    /// Not idle; check again at `deadline`.
    Alive { deadline: Duration },
    /// Past the deadline: stop the attempt.
    Idle,
}

impl IdleDeadline {
    /// The rule for an attempt launched at time 0: the launch counts as the first sign of life.
    pub fn new(limit: Duration) -> Self {
        Self {
            limit,
            last_life: Duration::ZERO,
            last_kind: None,
            extended_until: None,
            reported_extension: None,
        }
    }

    /// The idle limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// A sign of life at `at` (times before the last one are ignored: they change nothing).
    pub fn sign_of_life(&mut self, at: Duration, kind: SignOfLife) {
        if at >= self.last_life {
            self.last_life = at;
            self.last_kind = Some(kind);
        }
    }

    /// When the last sign of life came, and what it was (`None` for the launch).
    pub fn last_sign_of_life(&self) -> (Duration, Option<SignOfLife>) {
        (self.last_life, self.last_kind)
    }

    /// `EXTEND_TIMEOUT_USEC=by` at `at`. The datagram carrying it is a sign of life of its
    /// own; record that with [`Self::sign_of_life`] first.
    pub fn extend(&mut self, at: Duration, by: Duration) -> Extension {
        let proposed = at.saturating_add(by.min(MAX_EXTENSION));
        if proposed <= self.deadline() {
            return Extension::Unchanged;
        }
        self.extended_until = Some(proposed);
        let news = self
            .reported_extension
            .is_none_or(|reported| proposed >= reported.saturating_add(EXTENSION_REPORT_STEP));
        if news {
            self.reported_extension = Some(proposed);
            Extension::Moved { deadline: proposed }
        } else {
            Extension::Nudged { deadline: proposed }
        }
    }

    /// The later of last sign of life + limit and the extension.
    pub fn deadline(&self) -> Duration {
        let by_life = self.last_life.saturating_add(self.limit);
        self.extended_until
            .map_or(by_life, |until| until.max(by_life))
    }

    /// Whether the attempt is idle at `at`.
    pub fn check(&self, at: Duration) -> IdleCheck {
        let deadline = self.deadline();
        if at >= deadline {
            IdleCheck::Idle
        } else {
            IdleCheck::Alive { deadline }
        }
    }

    /// Whether the deadline in force is an extension's rather than the plain limit's.
    fn extended(&self) -> bool {
        self.extended_until
            .is_some_and(|until| until > self.last_life.saturating_add(self.limit))
    }

    /// The outcome summary when the attempt is stopped at `at` for being idle.
    pub fn stop_message(&self, at: Duration, status: &LatestStatus) -> String {
        let silence = if self.extended() {
            let silent = self.deadline().saturating_sub(self.last_life);
            format!(
                "{} s (idle timeout {} s, extended by the agent)",
                format_seconds(round_tenths(silent)),
                format_seconds(self.limit.as_secs_f64())
            )
        } else {
            format!(
                "{} s (idle timeout)",
                format_seconds(self.limit.as_secs_f64())
            )
        };
        let mut message = format!("no output, notification or activity for {silence}");
        if let Some((text, since)) = status.current() {
            message.push_str(&format!(
                "; last status '{text}' {} ago",
                format_age(at.saturating_sub(since))
            ));
        }
        message
    }
}

fn round_tenths(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests;
