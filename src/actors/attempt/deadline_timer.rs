//! DeadlineTimer: owns the attempt's clocks (`--timeout`, `--idle-timeout`), the activity
//! sampler and the agent's latest status, and executes the effects of the domain's
//! [`AttemptClock`] (docs/liveness.md). A sample runs off the runtime, the sampler travelling
//! with it and back; output notices arm no wake-up, so output never postpones a deadline.

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
use crate::domain::notify::AGENT_LOG_TARGET;
use crate::platform::activity_sampler::ActivitySampler;

/// Plain signs of life (output, a notification without status or extension) reach the timer
/// at most once per this interval.
pub(crate) const NOTICE_INTERVAL: Duration = Duration::from_millis(20);

/// The clock's inputs ([`ClockInput`]), stamped by whoever saw them happen.
pub(crate) enum TimerMsg {
    Output,
    /// An accepted notification, stamped by its sender ([`ClockInput::Notified`]).
    Notified(ClockInput),
    /// The wake-up the clock asked for ([`ClockEffect::WakeAt`]).
    Woke,
    /// A sample of the attempt's processes, and the sampler back.
    Sampled(Box<(ActivitySampler, ActivitySample)>),
}

pub(crate) struct DeadlineTimer;

pub(crate) struct TimerArgs {
    /// In seconds, as the deadlines' events carry them.
    pub(crate) timeout_seconds: Option<f64>,
    pub(crate) idle_timeout_seconds: Option<f64>,
    /// When the worker was launched: the clocks' origin (the sampler's too).
    pub(crate) launched: Instant,
    /// `None` without an idle limit. Home between samples; away while one is taken.
    pub(crate) sampler: Option<ActivitySampler>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// Where statuses and extensions go, as events of `attempt_id`.
    pub(crate) events: Emitter,
    pub(crate) attempt_id: String,
    pub(crate) span: tracing::Span,
}

pub(crate) struct TimerState {
    clock: AttemptClock,
    args: TimerArgs,
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
        let mut state = TimerState { clock, args };
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
            TimerMsg::Notified(input) => input,
            TimerMsg::Woke => ClockInput::Woke { at: state.now() },
            TimerMsg::Sampled(sampled) => {
                let (sampler, sample) = *sampled;
                state.args.sampler = Some(sampler);
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
        self.args.launched.elapsed()
    }

    fn execute(&mut self, effects: Vec<ClockEffect>, myself: &ActorRef<TimerMsg>) {
        let _entered = self.args.span.clone().entered();
        for effect in effects {
            match effect {
                ClockEffect::WakeAt(at) => {
                    let wait = at.saturating_sub(self.now());
                    myself.send_after(wait, || TimerMsg::Woke);
                }
                ClockEffect::Sample => self.sample(myself),
                ClockEffect::Publish { text, since } => {
                    tracing::info!(
                        target: AGENT_LOG_TARGET,
                        status = text.as_deref().unwrap_or(""),
                        "agent status"
                    );
                    let since = since.map(|since| self.wall_time(since));
                    self.emit(RunEvent::Activity { text, since });
                }
                ClockEffect::Extended { at, deadline } => {
                    let seconds = deadline.saturating_sub(at).as_secs_f64();
                    tracing::info!(
                        target: AGENT_LOG_TARGET,
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
                        timeout: self.args.timeout_seconds.filter(|_| timeout),
                        idle: self
                            .args
                            .idle_timeout_seconds
                            .zip(idle)
                            .map(|(seconds, summary)| IdleStop { seconds, summary }),
                    };
                    notify(&self.args.supervisor, passed.into());
                }
            }
        }
    }

    /// Takes one sample off the runtime, in a task; the sampler comes back with it.
    fn sample(&mut self, myself: &ActorRef<TimerMsg>) {
        let Some(mut sampler) = self.args.sampler.take() else {
            // No sampler: the clock waits for a sample that never comes, so it asks for none
            // again, and activity keeps nothing alive.
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
            .instrument(self.args.span.clone()),
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
        self.args.events.emit(Some(&self.args.attempt_id), event);
    }
}

/// A validated limit in seconds as a duration. A limit too large for the clock (1e300 is
/// finite and positive, so valid) can never be reached: it means no deadline at all.
pub(crate) fn limit_duration(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}
