//! SignalIntake: owns the registration of the stopping signals — SIGINT, SIGTERM, SIGHUP and
//! SIGQUIT — for the whole `run` invocation and turns each delivery into a
//! [`RunInput::Signal`] for the run supervisor's run loop. SIGHUP (the terminal went away) and
//! SIGQUIT (Ctrl-\\) are treated like SIGTERM: uncaught, they would kill the handler without
//! any cleanup, and the worker, in its own session, would never get the hangup.
//!
//! Registering handlers (rather than ignoring the signals) matters twice over: the handler is
//! never killed mid-write by a Ctrl-C, and a child exec'd by us starts with default
//! dispositions, because handlers — unlike `SIG_IGN` — do not survive `exec`.
//!
//! Each `Next` message waits for the next delivery and forwards it, then asks for the next
//! one. The run supervisor ends the intake with a kill once everything is recorded, before the
//! final report (a stop would wait for a signal that may never come); however the intake
//! ends — killed, or dropped with the supervisor or the runtime — its state gives the stopping
//! signals their default action back: `signal-hook` would leave a handler that does nothing,
//! so a final report blocked on a stdout or stderr nobody reads could not be interrupted. The
//! intake is started once per process (one `run` per invocation), so the registration is
//! never needed again.

use futures_util::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook_tokio::{Handle, Signals};

use super::messages::RunMsg;
use crate::actors::notify;
use crate::domain::lifecycle::run::RunInput;
use crate::platform::signal_disposition;

/// The signals that stop a run: each stops the worker's group, records `interrupted` and
/// makes the handler exit 128 + its number.
pub(crate) const STOPPING_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

pub(crate) enum IntakeMsg {
    /// Wait for the next stopping signal and forward it to the run supervisor.
    Next,
}

pub(crate) struct SignalIntake;

pub(crate) struct SignalIntakeState {
    signals: Signals,
    handle: Handle,
    run: ActorRef<RunMsg>,
    span: tracing::Span,
}

impl Drop for SignalIntakeState {
    /// Runs however the intake ends: killed, failed, or dropped with the runtime.
    fn drop(&mut self) {
        self.handle.close();
        signal_disposition::restore_default(&STOPPING_SIGNALS);
        tracing::debug!(parent: &self.span, "signal intake stopped; the stopping signals have their default action");
    }
}

impl Actor for SignalIntake {
    type Msg = IntakeMsg;
    type State = SignalIntakeState;
    /// Where signals go, and the run's span (every record carries the run id).
    type Arguments = (ActorRef<RunMsg>, tracing::Span);

    async fn pre_start(
        &self,
        myself: ActorRef<IntakeMsg>,
        (run, span): (ActorRef<RunMsg>, tracing::Span),
    ) -> Result<SignalIntakeState, ActorProcessingErr> {
        let signals = Signals::new(STOPPING_SIGNALS)?;
        tracing::debug!(parent: &span, "signal intake registered for SIGINT, SIGTERM, SIGHUP and SIGQUIT");
        myself.send_message(IntakeMsg::Next)?;
        Ok(SignalIntakeState {
            handle: signals.handle(),
            signals,
            run,
            span,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<IntakeMsg>,
        message: IntakeMsg,
        state: &mut SignalIntakeState,
    ) -> Result<(), ActorProcessingErr> {
        let IntakeMsg::Next = message;
        if let Some(signal) = state.signals.next().await {
            tracing::info!(parent: &state.span, signal, "signal received");
            notify(&state.run, RunInput::Signal(signal).into());
            myself.send_message(IntakeMsg::Next)?;
        }
        Ok(())
    }
}
