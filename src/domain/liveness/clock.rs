//! The clocks of one running attempt as a pure machine the deadline timer steps: when the
//! wall-clock `--timeout` and the idle deadline pass, when to sample the processes' activity
//! (only while the attempt is silent), and when to publish the agent's status. Times are
//! offsets from the launch, passed in by the caller.

use std::time::Duration;

use super::activity::{ActivityRule, ActivitySample, ActivityVerdict, Evidence, Thresholds};
use super::idle::{Extension, IdleDeadline};
use super::status::{LatestStatus, Publish};
use crate::domain::notify::StatusChange;

#[derive(Clone, Debug, PartialEq)]
pub enum ClockInput {
    /// Output on either stream.
    Output { at: Duration },
    /// An accepted notification, with what of it concerns the clocks.
    Notified {
        at: Duration,
        status: Option<StatusChange>,
        extend: Option<Duration>,
    },
    /// A sample asked for by [`ClockEffect::Sample`] (its own `at` says when it was taken).
    Sampled(ActivitySample),
    /// A wake-up asked for by [`ClockEffect::WakeAt`] (or a stale one) came.
    Woke { at: Duration },
}

/// What the clock's owner must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockEffect {
    /// Send a wake-up for this time.
    WakeAt(Duration),
    /// Sample the attempt's processes (off the runtime) and answer with
    /// [`ClockInput::Sampled`].
    Sample,
    /// Publish the latest status (`None`: cleared) everywhere it shows; `since` is when the
    /// text was first set.
    Publish {
        text: Option<String>,
        since: Option<Duration>,
    },
    /// The `idle-deadline-extended` event.
    Extended { at: Duration, deadline: Duration },
    /// The processes were working between two samples (for the log).
    Working(Evidence),
    /// The `--timeout`, the idle deadline (with its stop message), or both passed. Nothing
    /// more follows; the attempt lifecycle lets the wall clock win.
    DeadlinesPassed { timeout: bool, idle: Option<String> },
}

/// The idle deadline and the activity sampling that feeds it (activity keeps nothing else
/// alive, so there is no sampling without an idle limit).
#[derive(Clone, Debug)]
struct IdleWatch {
    deadline: IdleDeadline,
    activity: ActivityRule,
    interval: Duration,
    /// An interval after the last output, notification or sample.
    sample_after: Duration,
    /// A sample is being taken (one at a time).
    sampling: bool,
}

impl IdleWatch {
    /// A sign of life that is not activity: the next sample starts a new window.
    fn output_or_notification(&mut self, at: Duration) {
        self.deadline.sign_of_life(at);
        self.activity.reset();
        self.sample_after = self.sample_after.max(at + self.interval);
    }
}

/// At most one `idle-deadline-extended` event per this interval: an agent moving its deadline
/// a little further with every datagram costs the event stream a line a second. The latest
/// extension within the interval is written when it ends.
pub const EXTENSION_EVENT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct AttemptClock {
    wall_clock: Option<Duration>,
    idle: Option<IdleWatch>,
    status: LatestStatus,
    /// When the rate limit lets the pending status change out.
    status_due: Option<Duration>,
    /// When the last `Extended` was published.
    extension_published: Option<Duration>,
    /// When the rate limit lets the pending extension out.
    extension_due: Option<Duration>,
    /// The earliest wake-up asked for and not yet come.
    armed: Option<Duration>,
    fired: bool,
}

impl AttemptClock {
    /// The clocks of an attempt launched at time 0, and the first wake-up to arm.
    pub fn start(
        wall_clock: Option<Duration>,
        idle_limit: Option<Duration>,
        thresholds: Thresholds,
    ) -> (Self, Vec<ClockEffect>) {
        let idle = idle_limit.map(|limit| {
            let interval = super::activity::sample_interval(limit);
            IdleWatch {
                deadline: IdleDeadline::new(limit),
                activity: ActivityRule::new(thresholds, interval),
                interval,
                sample_after: interval,
                sampling: false,
            }
        });
        let mut clock = Self {
            wall_clock,
            idle,
            status: LatestStatus::default(),
            status_due: None,
            extension_published: None,
            extension_due: None,
            armed: None,
            fired: false,
        };
        let mut effects = Vec::new();
        clock.arm(&mut effects);
        (clock, effects)
    }

    /// Applies one input and returns the effects, in order. After a deadline passed, nothing.
    pub fn handle(&mut self, input: ClockInput) -> Vec<ClockEffect> {
        let mut effects = Vec::new();
        if self.fired {
            return effects;
        }
        match input {
            ClockInput::Output { at } => {
                // The hot path costs two stores and asks for no wake-up: the one armed at the
                // earliest time something may be due re-arms when it comes.
                if let Some(idle) = &mut self.idle {
                    idle.output_or_notification(at);
                }
                return effects;
            }
            ClockInput::Notified { at, status, extend } => {
                if let Some(idle) = &mut self.idle {
                    idle.output_or_notification(at);
                    if let Some(by) = extend
                        && let Extension::Moved { deadline } = idle.deadline.extend(at, by)
                    {
                        match self.extension_published {
                            Some(last) if at < last + EXTENSION_EVENT_INTERVAL => {
                                self.extension_due = Some(last + EXTENSION_EVENT_INTERVAL);
                            }
                            _ => {
                                self.extension_published = Some(at);
                                effects.push(ClockEffect::Extended { at, deadline });
                            }
                        }
                    }
                }
                if let Some(change) = status {
                    let publish = self.status.update(at, change);
                    self.publish(publish, &mut effects);
                }
            }
            ClockInput::Sampled(sample) => {
                let Some(idle) = &mut self.idle else {
                    return effects;
                };
                idle.sampling = false;
                let at = sample.at;
                idle.sample_after = idle.sample_after.max(at + idle.interval);
                if let ActivityVerdict::Working(evidence) = idle.activity.observe(sample) {
                    idle.deadline.sign_of_life(at);
                    effects.push(ClockEffect::Working(evidence));
                }
            }
            ClockInput::Woke { at } => {
                self.armed = self.armed.filter(|armed| *armed > at);
                if self.check(at, &mut effects) {
                    return effects;
                }
                if self.status_due.take_if(|due| *due <= at).is_some() {
                    let publish = self.status.due(at);
                    self.publish(publish, &mut effects);
                }
                if self.extension_due.take_if(|due| *due <= at).is_some()
                    && let Some(deadline) = self
                        .idle
                        .as_ref()
                        .and_then(|idle| idle.deadline.extended_until())
                {
                    self.extension_published = Some(at);
                    effects.push(ClockEffect::Extended { at, deadline });
                }
                if let Some(idle) = &mut self.idle
                    && !idle.sampling
                    && at >= idle.sample_after
                {
                    idle.sampling = true;
                    effects.push(ClockEffect::Sample);
                }
            }
        }
        self.arm(&mut effects);
        effects
    }

    /// Whether a deadline passed; if so, says which and stops the clocks.
    fn check(&mut self, at: Duration, effects: &mut Vec<ClockEffect>) -> bool {
        let timeout = self.wall_clock.is_some_and(|deadline| at >= deadline);
        let idle = self
            .idle
            .as_ref()
            .filter(|idle| at >= idle.deadline.deadline())
            .map(|idle| idle.deadline.stop_message(at, &self.status));
        if !timeout && idle.is_none() {
            return false;
        }
        self.fired = true;
        effects.push(ClockEffect::DeadlinesPassed { timeout, idle });
        true
    }

    fn publish(&mut self, publish: Publish, effects: &mut Vec<ClockEffect>) {
        match publish {
            Publish::Now(text) => {
                let since = self.status.current().map(|(_, since)| since);
                effects.push(ClockEffect::Publish { text, since });
            }
            Publish::At(due) => {
                self.status_due = Some(self.status_due.map_or(due, |pending| pending.min(due)));
            }
            Publish::Nothing => {}
        }
    }

    /// The earliest time something may be due.
    fn next_wake(&self) -> Option<Duration> {
        let idle = self.idle.as_ref();
        [
            self.wall_clock,
            idle.map(|idle| idle.deadline.deadline()),
            idle.filter(|idle| !idle.sampling)
                .map(|idle| idle.sample_after),
            self.status_due,
            self.extension_due,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Asks for a wake-up when the next thing is due before the one armed (or none is).
    fn arm(&mut self, effects: &mut Vec<ClockEffect>) {
        if let Some(next) = self.next_wake()
            && self.armed.is_none_or(|armed| next < armed)
        {
            self.armed = Some(next);
            effects.push(ClockEffect::WakeAt(next));
        }
    }
}

#[cfg(test)]
mod tests;
