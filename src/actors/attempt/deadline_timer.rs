//! DeadlineTimer: owns the attempt's clocks — the wall-clock `--timeout` measured from launch,
//! the `--idle-timeout` measured from the last sign of life (output, an accepted notification,
//! visible activity), the activity sampler, and the agent's latest status — and steps the
//! domain's machine for them ([`crate::domain::liveness::clock::AttemptClock`]); every rule is
//! there, this actor only executes its effects.
//!
//! Output notices only move a timestamp (no wake-up is armed for them); the timer wakes itself
//! at the earliest pending time and re-arms if a deadline moved meanwhile. A sample of the
//! processes (`/proc`, `sock_diag`) runs off the runtime, one at a time, the sampler
//! travelling with it and back. The timer reports which deadlines passed; which one stops the
//! attempt is the attempt lifecycle's rule. So sustained output costs one cheap message per
//! (coalesced) notice and can never postpone the wall-clock deadline.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::Instrument;

use super::messages::AttemptMsg;
use crate::actors::observer::Emitter;
use crate::actors::{notify, off_runtime};
use crate::domain::decision::IdleStop;
use crate::domain::events::RunEvent;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::liveness::activity::{ActivitySample, THRESHOLDS};
use crate::domain::liveness::clock::{AttemptClock, ClockEffect, ClockInput};
use crate::domain::notify::StatusChange;
use crate::platform::activity_sampler::ActivitySampler;

/// The clock's inputs ([`ClockInput`]), stamped by whoever saw them happen.
pub(crate) enum TimerMsg {
    /// Some output arrived on either stream.
    Output,
    /// An accepted notification arrived at `at`: what of it concerns the clocks.
    Notified {
        at: Instant,
        status: Option<StatusChange>,
        extend: Option<Duration>,
    },
    /// The wake-up the clock asked for ([`ClockEffect::WakeAt`]).
    Woke,
    /// A sample of the attempt's processes, and the sampler back.
    Sampled(Box<(ActivitySampler, ActivitySample)>),
}

pub(crate) struct DeadlineTimer;

pub(crate) struct TimerArgs {
    /// `--timeout` and `--idle-timeout` in seconds, as the deadlines' events carry them.
    pub(crate) timeout_seconds: Option<f64>,
    pub(crate) idle_timeout_seconds: Option<f64>,
    /// When the worker was launched: the clocks' origin (the sampler's too).
    pub(crate) launched: Instant,
    /// Samples the attempt's processes; `None` when their identity is unknown.
    pub(crate) sampler: Option<ActivitySampler>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// Where statuses and extensions go, as events of `attempt_id`.
    pub(crate) events: Emitter,
    pub(crate) attempt_id: String,
    /// The attempt's span: every record of the timer carries the run and attempt ids.
    pub(crate) span: tracing::Span,
}

pub(crate) struct TimerState {
    clock: AttemptClock,
    timeout_seconds: Option<f64>,
    idle_timeout_seconds: Option<f64>,
    launched: Instant,
    /// Home between samples; away while one is taken.
    sampler: Option<ActivitySampler>,
    supervisor: ActorRef<AttemptMsg>,
    events: Emitter,
    attempt_id: String,
    span: tracing::Span,
}

impl Actor for DeadlineTimer {
    type Msg = TimerMsg;
    type State = TimerState;
    type Arguments = TimerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<TimerMsg>,
        args: TimerArgs,
    ) -> Result<TimerState, ActorProcessingErr> {
        let (clock, effects) = AttemptClock::start(
            args.timeout_seconds.and_then(limit_duration),
            args.idle_timeout_seconds.and_then(limit_duration),
            THRESHOLDS,
        );
        let mut state = TimerState {
            clock,
            timeout_seconds: args.timeout_seconds,
            idle_timeout_seconds: args.idle_timeout_seconds,
            launched: args.launched,
            sampler: args.sampler,
            supervisor: args.supervisor,
            events: args.events,
            attempt_id: args.attempt_id,
            span: args.span,
        };
        state.execute(effects, &myself);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<TimerMsg>,
        message: TimerMsg,
        state: &mut TimerState,
    ) -> Result<(), ActorProcessingErr> {
        let input = match message {
            TimerMsg::Output => ClockInput::Output { at: state.now() },
            TimerMsg::Notified { at, status, extend } => ClockInput::Notified {
                at: at.saturating_duration_since(state.launched),
                status,
                extend,
            },
            TimerMsg::Woke => ClockInput::Woke { at: state.now() },
            TimerMsg::Sampled(sampled) => {
                let (sampler, sample) = *sampled;
                state.sampler = Some(sampler);
                ClockInput::Sampled(sample)
            }
        };
        let effects = state.clock.handle(input);
        if !effects.is_empty() {
            state.execute(effects, &myself);
        }
        Ok(())
    }
}

impl TimerState {
    /// Now, as the clocks count: since the launch.
    fn now(&self) -> Duration {
        self.launched.elapsed()
    }

    fn execute(&mut self, effects: Vec<ClockEffect>, myself: &ActorRef<TimerMsg>) {
        let _entered = self.span.clone().entered();
        for effect in effects {
            match effect {
                ClockEffect::WakeAt(at) => {
                    let wait = at.saturating_sub(self.now());
                    myself.send_after(wait, || TimerMsg::Woke);
                }
                ClockEffect::Sample => self.sample(myself),
                ClockEffect::Publish { text, since } => {
                    tracing::info!(status = text.as_deref().unwrap_or(""), "agent status");
                    let since = since.map(|since| self.wall_time(since));
                    self.emit(RunEvent::Activity { text, since });
                }
                ClockEffect::Extended { at, deadline } => {
                    let seconds = deadline.saturating_sub(at).as_secs_f64();
                    tracing::info!(
                        seconds,
                        "idle deadline extended by the agent (EXTEND_TIMEOUT_USEC)"
                    );
                    let until = self.wall_time(deadline);
                    self.emit(RunEvent::IdleDeadlineExtended { until, seconds });
                }
                ClockEffect::Working(evidence) => {
                    tracing::debug!(evidence = %evidence.describe(), "activity: a sign of life");
                }
                ClockEffect::DeadlinesPassed { timeout, idle } => {
                    // Both may have passed at the same check; the attempt lifecycle decides
                    // which one stops the attempt.
                    if timeout {
                        tracing::info!("wall-clock deadline reached");
                    }
                    if let Some(message) = &idle {
                        tracing::info!(message = %message, "idle deadline reached");
                    }
                    let passed = AttemptEvent::DeadlinesPassed {
                        timeout: self.timeout_seconds.filter(|_| timeout),
                        idle: self
                            .idle_timeout_seconds
                            .zip(idle)
                            .map(|(seconds, summary)| IdleStop { seconds, summary }),
                    };
                    notify(&self.supervisor, passed.into());
                }
            }
        }
    }

    /// Takes one sample off the runtime, in a task; the sampler comes back with it.
    fn sample(&mut self, myself: &ActorRef<TimerMsg>) {
        let Some(mut sampler) = self.sampler.take() else {
            // No sampler (the worker's identity is unknown): the clock waits for a sample that
            // never comes, so it asks for none again, and activity keeps nothing alive.
            return;
        };
        let target = myself.clone();
        tokio::spawn(
            async move {
                let sampled = off_runtime(move || {
                    let sample = sampler.sample();
                    (sampler, sample)
                })
                .await;
                notify(&target, TimerMsg::Sampled(Box::new(sampled)));
            }
            .instrument(self.span.clone()),
        );
    }

    /// The wall-clock time of an offset from the launch, RFC 3339 in UTC with milliseconds.
    fn wall_time(&self, offset: Duration) -> String {
        let now = self.now();
        let at = if offset >= now {
            Utc::now() + chrono::TimeDelta::from_std(offset - now).unwrap_or_default()
        } else {
            Utc::now() - chrono::TimeDelta::from_std(now - offset).unwrap_or_default()
        };
        at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    fn emit(&self, event: RunEvent) {
        self.events.emit(Some(&self.attempt_id), event);
    }
}

/// A validated limit in seconds as a duration. A limit too large for the clock (1e300 is
/// finite and positive, so valid) can never be reached: it means no deadline at all.
pub(crate) fn limit_duration(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}
