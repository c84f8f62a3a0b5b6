//! DeadlineTimer: owns the attempt's two clocks — the wall-clock `--timeout` measured from
//! launch, and the `--idle-timeout` measured from the last output on either stream.
//!
//! Output notifications only move a timestamp; the timer wakes itself at the earliest pending
//! deadline and re-arms if output moved the idle deadline meanwhile. It reports which
//! deadlines have passed; which one stops the attempt is the attempt lifecycle's rule. Sustained output
//! therefore costs one cheap message per notification and can never postpone the wall-clock
//! deadline.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::messages::AttemptMsg;
use crate::actors::notify;

pub(crate) enum TimerMsg {
    /// Some output arrived on either stream.
    OutputObserved,
    /// Self-scheduled wake-up.
    Check,
}

pub(crate) struct DeadlineTimer;

pub(crate) struct TimerArgs {
    pub(crate) timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// The attempt's span: every record of the timer carries the run and attempt ids.
    pub(crate) span: tracing::Span,
}

pub(crate) struct TimerState {
    args: TimerArgs,
    started: Instant,
    last_output: Instant,
    fired: bool,
}

impl TimerState {
    fn wall_deadline(&self) -> Option<Instant> {
        self.args
            .timeout
            .and_then(|timeout| self.started.checked_add(timeout))
    }

    fn idle_deadline(&self) -> Option<Instant> {
        self.args
            .idle_timeout
            .and_then(|idle| self.last_output.checked_add(idle))
    }

    fn arm(&self, myself: &ActorRef<TimerMsg>) {
        let next = match (self.wall_deadline(), self.idle_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = next {
            myself.send_after(at.saturating_duration_since(Instant::now()), || {
                TimerMsg::Check
            });
        }
    }
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
        let now = Instant::now();
        let state = TimerState {
            args,
            started: now,
            last_output: now,
            fired: false,
        };
        state.arm(&myself);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<TimerMsg>,
        message: TimerMsg,
        state: &mut TimerState,
    ) -> Result<(), ActorProcessingErr> {
        if state.fired {
            return Ok(());
        }
        let span = state.args.span.clone();
        let _entered = span.enter();
        match message {
            TimerMsg::OutputObserved => state.last_output = Instant::now(),
            TimerMsg::Check => {
                let now = Instant::now();
                let wall_clock = state.wall_deadline().is_some_and(|at| now >= at);
                let idle = state.idle_deadline().is_some_and(|at| now >= at);
                if wall_clock || idle {
                    // Both may have passed at the same check; the attempt lifecycle decides
                    // which one stops the attempt.
                    state.fired = true;
                    if wall_clock {
                        tracing::info!("wall-clock deadline reached");
                    }
                    if idle {
                        tracing::info!("idle deadline reached");
                    }
                    notify(
                        &state.args.supervisor,
                        AttemptMsg::DeadlinesPassed { wall_clock, idle },
                    );
                } else {
                    state.arm(&myself);
                }
            }
        }
        Ok(())
    }
}
