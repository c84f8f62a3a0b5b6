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
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::notify::StatusChange;

    fn secs(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    #[test]
    fn the_launch_is_the_first_sign_of_life() {
        let idle = IdleDeadline::new(secs(2.0));
        assert_eq!(
            idle.check(secs(1.9)),
            IdleCheck::Alive {
                deadline: secs(2.0)
            }
        );
        assert_eq!(idle.check(secs(2.0)), IdleCheck::Idle);
        assert_eq!(idle.last_sign_of_life(), (Duration::ZERO, None));
    }

    #[test]
    fn every_sign_of_life_moves_the_deadline() {
        let mut idle = IdleDeadline::new(secs(2.0));
        for (at, kind) in [
            (1.0, SignOfLife::Output),
            (2.5, SignOfLife::Notification),
            (4.0, SignOfLife::Activity),
        ] {
            idle.sign_of_life(secs(at), kind);
            assert_eq!(idle.deadline(), secs(at + 2.0));
        }
        assert_eq!(
            idle.last_sign_of_life(),
            (secs(4.0), Some(SignOfLife::Activity))
        );
        // A late report of an earlier sign changes nothing.
        idle.sign_of_life(secs(3.0), SignOfLife::Output);
        assert_eq!(idle.deadline(), secs(6.0));
    }

    #[test]
    fn an_extension_is_the_later_of_the_current_deadline_and_now_plus_n() {
        let mut idle = IdleDeadline::new(secs(2.0));
        idle.sign_of_life(secs(1.0), SignOfLife::Notification);
        assert_eq!(
            idle.extend(secs(1.0), secs(5.0)),
            Extension::Moved {
                deadline: secs(6.0)
            }
        );
        assert_eq!(
            idle.check(secs(5.9)),
            IdleCheck::Alive {
                deadline: secs(6.0)
            }
        );
        assert_eq!(idle.check(secs(6.0)), IdleCheck::Idle);
        // Shorter than what is in force: no change.
        assert_eq!(idle.extend(secs(2.0), secs(1.0)), Extension::Unchanged);
        assert_eq!(idle.deadline(), secs(6.0));
        // Output during the extension does not cut it short…
        idle.sign_of_life(secs(2.0), SignOfLife::Output);
        assert_eq!(idle.deadline(), secs(6.0));
        // …and life after it ends is measured by the limit again.
        idle.sign_of_life(secs(5.5), SignOfLife::Output);
        assert_eq!(idle.deadline(), secs(7.5));
    }

    #[test]
    fn the_agents_5_s_extension_then_4_s_sleep_survives_and_8_s_does_not() {
        // Issue 18's cases: EXTEND_TIMEOUT_USEC=5000000 at 0.1 s under --idle-timeout 2.
        let mut idle = IdleDeadline::new(secs(2.0));
        idle.sign_of_life(secs(0.1), SignOfLife::Notification);
        idle.extend(secs(0.1), secs(5.0));
        assert!(matches!(idle.check(secs(4.1)), IdleCheck::Alive { .. }));
        assert_eq!(idle.check(secs(5.1)), IdleCheck::Idle);
    }

    #[test]
    fn re_announcing_a_wait_is_published_once_a_second_of_movement() {
        let mut idle = IdleDeadline::new(secs(2.0));
        assert_eq!(
            idle.extend(secs(1.0), secs(10.0)),
            Extension::Moved {
                deadline: secs(11.0)
            }
        );
        assert_eq!(
            idle.extend(secs(1.5), secs(10.0)),
            Extension::Nudged {
                deadline: secs(11.5)
            }
        );
        assert_eq!(idle.deadline(), secs(11.5));
        assert_eq!(
            idle.extend(secs(2.0), secs(10.0)),
            Extension::Moved {
                deadline: secs(12.0)
            }
        );
    }

    #[test]
    fn extensions_are_bounded() {
        let mut idle = IdleDeadline::new(secs(2.0));
        idle.extend(secs(1.0), Duration::MAX);
        assert_eq!(idle.deadline(), secs(1.0) + MAX_EXTENSION);
    }

    #[test]
    fn the_stop_message_names_the_silence_and_the_last_status() {
        let mut status = LatestStatus::default();
        let mut idle = IdleDeadline::new(secs(10.0));
        assert_eq!(
            idle.stop_message(secs(10.0), &status),
            "no output, notification or activity for 10 s (idle timeout)"
        );
        status.update(
            secs(3.0),
            StatusChange::Set("tool: Bash cargo test".to_owned()),
        );
        idle.sign_of_life(secs(5.0), SignOfLife::Activity);
        assert_eq!(
            idle.stop_message(secs(15.0), &status),
            "no output, notification or activity for 10 s (idle timeout); last status \
             'tool: Bash cargo test' 12 s ago"
        );
        let mut idle = IdleDeadline::new(secs(2.0));
        idle.sign_of_life(secs(0.1), SignOfLife::Notification);
        idle.extend(secs(0.1), secs(5.0));
        assert_eq!(
            idle.stop_message(secs(5.1), &LatestStatus::default()),
            "no output, notification or activity for 5 s (idle timeout 2 s, extended by the agent)"
        );
        let idle = IdleDeadline::new(secs(0.5));
        assert_eq!(
            idle.stop_message(secs(0.5), &LatestStatus::default()),
            "no output, notification or activity for 0.5 s (idle timeout)"
        );
    }

    proptest! {
        #[test]
        fn the_deadline_never_moves_earlier(
            events in proptest::collection::vec((0u64..100_000, proptest::option::of(0u64..50_000), any::<bool>()), 0..40),
            limit in 1u64..20_000,
        ) {
            let mut idle = IdleDeadline::new(Duration::from_millis(limit));
            let mut at = 0;
            let mut before = idle.deadline();
            for (step, extension, life) in events {
                at += step;
                let now = Duration::from_millis(at);
                if life {
                    idle.sign_of_life(now, SignOfLife::Notification);
                }
                if let Some(extension) = extension {
                    idle.extend(now, Duration::from_millis(extension));
                }
                let after = idle.deadline();
                prop_assert!(after >= before);
                let (last, _) = idle.last_sign_of_life();
                prop_assert!(after >= last + Duration::from_millis(limit));
                before = after;
            }
        }
    }
}
