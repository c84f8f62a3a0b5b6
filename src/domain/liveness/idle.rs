//! The idle rule (`--idle-timeout`): an attempt is stopped after that long without a sign of
//! life (output, an accepted notification, activity); `EXTEND_TIMEOUT_USEC` moves the deadline
//! later, never the wall-clock `--timeout` (docs/liveness.md, "The idle rule"). Times are
//! offsets from the launch, passed in by the caller.

use std::time::Duration;

use super::status::{LatestStatus, format_age};
use crate::domain::seconds::{format_seconds, format_tenths};

/// An extension longer than this is cut to it: a report of "silent for a year" must not
/// disable the idle timeout for good.
pub const MAX_EXTENSION: Duration = Duration::from_secs(24 * 60 * 60);

/// An extension is news when it moves the deadline this much beyond the last one published:
/// an agent re-announcing the same wait every few milliseconds moves it a little each time.
pub const EXTENSION_REPORT_STEP: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleDeadline {
    limit: Duration,
    last_life: Duration,
    /// The latest extension's end, if it is later than `last_life + limit` was then.
    extended_until: Option<Duration>,
    /// The deadline of the last `Extension::Moved`.
    reported_extension: Option<Duration>,
}

/// What an `EXTEND_TIMEOUT_USEC` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extension {
    /// The deadline moved later: publish the `idle-deadline-extended` event.
    Moved { deadline: Duration },
    /// It moved later, but by less than [`EXTENSION_REPORT_STEP`]: no event.
    Nudged { deadline: Duration },
    /// The deadline was already as late or later.
    Unchanged,
}

impl IdleDeadline {
    /// For an attempt launched at time 0: the launch counts as the first sign of life.
    pub fn new(limit: Duration) -> Self {
        Self {
            limit,
            last_life: Duration::ZERO,
            extended_until: None,
            reported_extension: None,
        }
    }

    /// Times before the last sign of life change nothing.
    pub fn sign_of_life(&mut self, at: Duration) {
        self.last_life = self.last_life.max(at);
    }

    /// `EXTEND_TIMEOUT_USEC=by` at `at`: the deadline becomes the later of its current value
    /// and `at + by`, as systemd does. The datagram carrying it is a sign of life of its own;
    /// record that with [`Self::sign_of_life`] first.
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

    /// The latest extension's end, if any was announced.
    pub fn extended_until(&self) -> Option<Duration> {
        self.extended_until
    }

    /// The later of last sign of life + limit and the extension: idle from then on.
    pub fn deadline(&self) -> Duration {
        let by_life = self.last_life.saturating_add(self.limit);
        self.extended_until
            .map_or(by_life, |until| until.max(by_life))
    }

    /// Whether the deadline in force is an extension's rather than the plain limit's.
    fn extended(&self) -> bool {
        self.extended_until
            .is_some_and(|until| until > self.last_life.saturating_add(self.limit))
    }

    /// The outcome summary when the attempt is stopped at `at` for being idle: how long it
    /// was silent by the rule, and the last status with its age.
    pub fn stop_message(&self, at: Duration, status: &LatestStatus) -> String {
        let silence = if self.extended() {
            let silent = self.deadline().saturating_sub(self.last_life);
            format!(
                "{} s (idle timeout {} s, extended by the agent)",
                format_tenths(silent.as_secs_f64()),
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

#[cfg(test)]
mod tests;
