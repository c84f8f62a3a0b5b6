//! The clocks of one running attempt, as a pure machine the deadline timer steps: when the
//! wall-clock `--timeout` and the idle deadline pass, when to sample the processes' activity,
//! and when to publish the agent's latest status. Times are offsets from the launch, passed in
//! by the caller; the machine answers with what to do ([`ClockEffect`]).
//!
//! - **Wall clock**: fixed at launch + `--timeout`; nothing moves it (an extension is the idle
//!   deadline's only).
//! - **Idle** ([`super::idle::IdleDeadline`]): output, an accepted notification and activity
//!   are signs of life; `EXTEND_TIMEOUT_USEC` moves the deadline later. When it passes, the
//!   stop message names the silence and the last status.
//! - **Activity** ([`super::activity::ActivityRule`]): sampled only while the attempt is
//!   silent, every [`super::activity::sample_interval`] after the last output, notification or
//!   sample; one sample at a time. Only with an idle limit (activity keeps nothing else alive).
//! - **Status** ([`super::status::LatestStatus`]): a change is published at once or when its
//!   rate-limit interval ends.
//!
//! Which deadline stops the attempt when both pass at one check is not decided here: both are
//! reported, and the attempt lifecycle lets the wall clock win.
//!
//! **Output costs nothing but two stores**: it never asks for a wake-up. The clock keeps one
//! wake-up armed at the earliest time something may be due; when it comes and the deadline
//! has moved meanwhile, the clock arms the next one. So sustained output costs one cheap call
//! per (coalesced) notice and a wake-up per sample interval at most.

use std::time::Duration;

use super::SignOfLife;
use super::activity::{ActivityRule, ActivitySample, ActivityVerdict, Evidence, Thresholds};
use super::idle::{Extension, IdleCheck, IdleDeadline};
use super::status::{LatestStatus, Publish};
use crate::domain::notify::StatusChange;

/// What the clock is told.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockInput {
    /// Output on either stream at `at`.
    Output { at: Duration },
    /// An accepted notification at `at`, with what of it concerns the clocks.
    Notified {
        at: Duration,
        status: Option<StatusChange>,
        extend: Option<Duration>,
    },
    /// A sample asked for by [`ClockEffect::Sample`] (its own `at` says when it was taken).
    Sampled(ActivitySample),
    /// A wake-up asked for by [`ClockEffect::WakeAt`] (or a stale one) came at `at`.
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
    /// Publish the latest status: the `activity` event, the status line, the console's dim
    /// line. `None` means it was cleared; `since` is when the text was first set.
    Publish {
        text: Option<String>,
        since: Option<Duration>,
    },
    /// The agent moved the idle deadline to `deadline` (at `at`): the
    /// `idle-deadline-extended` event.
    Extended { at: Duration, deadline: Duration },
    /// The processes were working between two samples: a sign of life (for the log).
    Working(Evidence),
    /// A deadline passed: the wall clock's, the idle one's (with its stop message), or both.
    /// Nothing more follows.
    Passed {
        wall_clock: bool,
        idle: Option<String>,
    },
}

/// The idle deadline and the activity sampling that feeds it.
#[derive(Clone, Debug)]
struct IdleWatch {
    deadline: IdleDeadline,
    activity: ActivityRule,
    interval: Duration,
    /// When the next sample is due: an interval after the last output, notification or sample.
    sample_after: Duration,
    /// A sample is being taken.
    sampling: bool,
}

/// The clocks of one attempt.
#[derive(Clone, Debug)]
pub struct AttemptClock {
    wall_clock: Option<Duration>,
    idle: Option<IdleWatch>,
    status: LatestStatus,
    /// When the rate limit lets the pending status change out.
    status_due: Option<Duration>,
    /// The earliest wake-up asked for and not yet come.
    armed: Option<Duration>,
    fired: bool,
}

impl AttemptClock {
    /// The clocks of an attempt launched at time 0 with these limits (`None`: none), and the
    /// first wake-up to arm.
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
            armed: None,
            fired: false,
        };
        let mut effects = Vec::new();
        clock.arm(&mut effects);
        (clock, effects)
    }

    /// The latest status and when it was set.
    pub fn status(&self) -> &LatestStatus {
        &self.status
    }

    /// Applies one input and returns the effects, in order. After a deadline passed, nothing.
    pub fn handle(&mut self, input: ClockInput) -> Vec<ClockEffect> {
        let mut effects = Vec::new();
        if self.fired {
            return effects;
        }
        match input {
            ClockInput::Output { at } => {
                // The hot path: no wake-up is asked for; the armed one re-arms when it comes.
                if let Some(idle) = &mut self.idle {
                    idle.deadline.sign_of_life(at, SignOfLife::Output);
                    idle.activity.reset();
                    idle.sample_after = idle.sample_after.max(at + idle.interval);
                }
                return effects;
            }
            ClockInput::Notified { at, status, extend } => {
                if let Some(idle) = &mut self.idle {
                    idle.deadline.sign_of_life(at, SignOfLife::Notification);
                    idle.activity.reset();
                    idle.sample_after = idle.sample_after.max(at + idle.interval);
                    if let Some(by) = extend
                        && let Extension::Moved { deadline } = idle.deadline.extend(at, by)
                    {
                        effects.push(ClockEffect::Extended { at, deadline });
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
                    idle.deadline.sign_of_life(at, SignOfLife::Activity);
                    effects.push(ClockEffect::Working(evidence));
                }
            }
            ClockInput::Woke { at } => {
                if self.armed.is_some_and(|armed| armed <= at) {
                    self.armed = None;
                }
                if self.check(at, &mut effects) {
                    return effects;
                }
                if self.status_due.is_some_and(|due| due <= at) {
                    self.status_due = None;
                    let publish = self.status.due(at);
                    self.publish(publish, &mut effects);
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

    /// Whether a deadline passed at `at`; if so, says which and stops the clocks.
    fn check(&mut self, at: Duration, effects: &mut Vec<ClockEffect>) -> bool {
        let wall_clock = self.wall_clock.is_some_and(|deadline| at >= deadline);
        let idle = self
            .idle
            .as_ref()
            .filter(|idle| idle.deadline.check(at) == IdleCheck::Idle)
            .map(|idle| idle.deadline.stop_message(at, &self.status));
        if !wall_clock && idle.is_none() {
            return false;
        }
        self.fired = true;
        effects.push(ClockEffect::Passed { wall_clock, idle });
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
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::liveness::activity::{ProcessCounters, THRESHOLDS};

    fn secs(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    fn woke(clock: &mut AttemptClock, at: f64) -> Vec<ClockEffect> {
        clock.handle(ClockInput::Woke { at: secs(at) })
    }

    /// A sample at `at` whose one process has used `cpu_ms` so far.
    fn sample(at: f64, cpu_ms: u64) -> ActivitySample {
        ActivitySample {
            at: secs(at),
            processes: vec![ProcessCounters {
                pid: 10,
                start_time_ticks: 1,
                thread_cpu_ns: vec![(10, cpu_ms * 1_000_000)],
                ..ProcessCounters::default()
            }],
            sockets: Some(Vec::new()),
            tick: Duration::from_millis(10),
        }
    }

    fn passed(effects: &[ClockEffect]) -> Option<(bool, Option<String>)> {
        effects.iter().find_map(|effect| match effect {
            ClockEffect::Passed { wall_clock, idle } => Some((*wall_clock, idle.clone())),
            _ => None,
        })
    }

    #[test]
    fn without_limits_nothing_is_armed() {
        let (mut clock, effects) = AttemptClock::start(None, None, THRESHOLDS);
        assert!(effects.is_empty());
        assert!(
            clock
                .handle(ClockInput::Output { at: secs(1.0) })
                .is_empty()
        );
        assert!(woke(&mut clock, 100.0).is_empty());
    }

    #[test]
    fn the_wall_clock_passes_whatever_the_agent_says() {
        let (mut clock, effects) = AttemptClock::start(Some(secs(5.0)), None, THRESHOLDS);
        assert_eq!(effects, [ClockEffect::WakeAt(secs(5.0))]);
        clock.handle(ClockInput::Output { at: secs(4.0) });
        clock.handle(ClockInput::Notified {
            at: secs(4.5),
            status: None,
            extend: Some(secs(60.0)),
        });
        assert_eq!(passed(&woke(&mut clock, 4.9)), None);
        assert_eq!(passed(&woke(&mut clock, 5.0)), Some((true, None)));
        // Nothing after the end.
        assert!(woke(&mut clock, 6.0).is_empty());
    }

    #[test]
    fn output_asks_for_nothing_and_the_armed_wake_re_arms() {
        let (mut clock, effects) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
        // The first sample is due a sample interval after the launch.
        assert_eq!(effects, [ClockEffect::WakeAt(secs(0.5))]);
        assert!(
            clock
                .handle(ClockInput::Output { at: secs(0.4) })
                .is_empty()
        );
        // The sample moved to 0.9: the wake at 0.5 samples nothing and arms 0.9.
        assert_eq!(woke(&mut clock, 0.5), [ClockEffect::WakeAt(secs(0.9))]);
    }

    #[test]
    fn a_silent_attempt_is_sampled_and_stopped_with_the_message() {
        let (mut clock, _) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
        let mut at = 0.5;
        let mut stopped = None;
        while stopped.is_none() && at < 10.0 {
            let effects = woke(&mut clock, at);
            if effects.contains(&ClockEffect::Sample) {
                clock.handle(ClockInput::Sampled(sample(at, 0)));
            }
            stopped = passed(&effects);
            at += 0.5;
        }
        assert_eq!(
            stopped,
            Some((
                false,
                Some("no output, notification or activity for 2 s (idle timeout)".to_owned())
            ))
        );
        assert!((at - 2.5).abs() < 1e-9, "stopped at {}", at - 0.5);
    }

    #[test]
    fn work_between_samples_keeps_a_silent_attempt_alive() {
        let (mut clock, _) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
        let mut cpu = 0;
        for step in 1..40 {
            let at = f64::from(step) * 0.5;
            let effects = woke(&mut clock, at);
            assert_eq!(passed(&effects), None, "stopped at {at}");
            if effects.contains(&ClockEffect::Sample) {
                // 400 ms of CPU a second: a busy tool.
                cpu += 200;
                let effects = clock.handle(ClockInput::Sampled(sample(at, cpu)));
                if step > 1 {
                    assert!(
                        effects
                            .iter()
                            .any(|effect| matches!(effect, ClockEffect::Working(_))),
                        "{effects:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn one_sample_at_a_time() {
        let (mut clock, _) = AttemptClock::start(None, Some(secs(4.0)), THRESHOLDS);
        assert_eq!(
            woke(&mut clock, 1.0),
            [ClockEffect::Sample, ClockEffect::WakeAt(secs(4.0))]
        );
        // The sample is late: later wake-ups ask for no second one.
        assert!(!woke(&mut clock, 2.0).contains(&ClockEffect::Sample));
        // Once it is in, the next is an interval after it.
        assert_eq!(
            clock.handle(ClockInput::Sampled(sample(1.0, 0))),
            [ClockEffect::WakeAt(secs(2.0))]
        );
    }

    #[test]
    fn an_extension_moves_only_the_idle_deadline_and_is_published_once() {
        let (mut clock, _) = AttemptClock::start(Some(secs(30.0)), Some(secs(2.0)), THRESHOLDS);
        let effects = clock.handle(ClockInput::Notified {
            at: secs(0.1),
            status: None,
            extend: Some(secs(5.0)),
        });
        assert_eq!(
            effects.first(),
            Some(&ClockEffect::Extended {
                at: secs(0.1),
                deadline: secs(5.1)
            })
        );
        let again = clock.handle(ClockInput::Notified {
            at: secs(0.2),
            status: None,
            extend: Some(secs(5.0)),
        });
        assert!(
            !again
                .iter()
                .any(|effect| matches!(effect, ClockEffect::Extended { .. })),
            "{again:?}"
        );
        for at in [1.0, 2.0, 3.0, 4.0, 5.0] {
            let effects = woke(&mut clock, at);
            if effects.contains(&ClockEffect::Sample) {
                clock.handle(ClockInput::Sampled(sample(at, 0)));
            }
            assert_eq!(passed(&effects), None, "stopped at {at}");
        }
        assert_eq!(
            passed(&woke(&mut clock, 5.2)),
            Some((
                false,
                Some(
                    "no output, notification or activity for 5 s (idle timeout 2 s, extended by the agent)"
                        .to_owned()
                )
            ))
        );
    }

    #[test]
    fn statuses_are_published_rate_limited_and_named_in_the_stop_message() {
        let (mut clock, _) = AttemptClock::start(None, Some(secs(10.0)), THRESHOLDS);
        let set = |text: &str| Some(StatusChange::Set(text.to_owned()));
        let effects = clock.handle(ClockInput::Notified {
            at: secs(1.0),
            status: set("thinking"),
            extend: None,
        });
        assert_eq!(
            effects.first(),
            Some(&ClockEffect::Publish {
                text: Some("thinking".to_owned()),
                since: Some(secs(1.0))
            })
        );
        // A second change within the second waits for it; a wake-up is armed for it.
        woke(&mut clock, 1.0);
        let effects = clock.handle(ClockInput::Notified {
            at: secs(1.2),
            status: set("tool: Bash cargo test"),
            extend: None,
        });
        assert!(effects.is_empty(), "{effects:?}");
        assert_eq!(clock.armed, Some(secs(2.0)));
        let effects = woke(&mut clock, 2.0);
        assert_eq!(
            effects.first(),
            Some(&ClockEffect::Publish {
                text: Some("tool: Bash cargo test".to_owned()),
                since: Some(secs(1.2))
            })
        );
        let mut at = 2.0;
        let stop = loop {
            at += 1.0;
            let effects = woke(&mut clock, at);
            if effects.contains(&ClockEffect::Sample) {
                clock.handle(ClockInput::Sampled(sample(at, 0)));
            }
            if let Some((_, idle)) = passed(&effects) {
                break idle;
            }
        };
        assert_eq!(
            stop.as_deref(),
            Some(
                "no output, notification or activity for 10 s (idle timeout); last status 'tool: Bash cargo test' 11 s ago"
            )
        );
    }

    #[test]
    fn a_status_without_an_idle_limit_is_still_published() {
        let (mut clock, _) = AttemptClock::start(None, None, THRESHOLDS);
        let effects = clock.handle(ClockInput::Notified {
            at: secs(1.0),
            status: Some(StatusChange::Set("generating".to_owned())),
            extend: Some(secs(9.0)),
        });
        assert_eq!(
            effects,
            [ClockEffect::Publish {
                text: Some("generating".to_owned()),
                since: Some(secs(1.0))
            }]
        );
        assert_eq!(clock.status().current(), Some(("generating", secs(1.0))));
    }

    proptest! {
        /// Whatever arrives, the clock always keeps a wake-up armed no later than its next
        /// deadline, so no deadline can be missed; and it passes at most once.
        #[test]
        fn a_deadline_is_never_missed(
            inputs in proptest::collection::vec((0u64..400, 0u8..4, any::<bool>()), 0..80),
            limit in 500u64..5_000,
        ) {
            let (mut clock, effects) = AttemptClock::start(
                Some(Duration::from_millis(20_000)),
                Some(Duration::from_millis(limit)),
                THRESHOLDS,
            );
            let mut wakes: Vec<Duration> = effects.iter().filter_map(|effect| match effect {
                ClockEffect::WakeAt(at) => Some(*at),
                _ => None,
            }).collect();
            let mut at = Duration::ZERO;
            let mut passes = 0;
            let mut sampling = false;
            for (step, kind, busy) in inputs {
                at += Duration::from_millis(step);
                // Every wake-up due by now comes first, in order.
                wakes.sort();
                while let Some(&wake) = wakes.first().filter(|wake| **wake <= at) {
                    wakes.remove(0);
                    let effects = clock.handle(ClockInput::Woke { at: wake });
                    for effect in effects {
                        match effect {
                            ClockEffect::WakeAt(next) => wakes.push(next),
                            ClockEffect::Sample => sampling = true,
                            ClockEffect::Passed { .. } => passes += 1,
                            _ => {}
                        }
                    }
                    wakes.sort();
                }
                let input = match kind {
                    0 => ClockInput::Output { at },
                    1 => ClockInput::Notified { at, status: None, extend: busy.then(|| Duration::from_millis(3_000)) },
                    2 if sampling => {
                        sampling = false;
                        ClockInput::Sampled(sample(at.as_secs_f64(), if busy { at.as_millis() as u64 } else { 0 }))
                    }
                    _ => continue,
                };
                for effect in clock.handle(input) {
                    match effect {
                        ClockEffect::WakeAt(next) => wakes.push(next),
                        ClockEffect::Passed { .. } => passes += 1,
                        _ => {}
                    }
                }
                if !clock.fired {
                    let next = clock.next_wake().expect("a limit is set");
                    prop_assert!(
                        wakes.iter().any(|wake| *wake <= next),
                        "nothing armed by {next:?}: {wakes:?}"
                    );
                }
            }
            prop_assert!(passes <= 1);
        }
    }
}
