//! SignalIntake: owns the registration of the stopping signals for the whole `run` and turns
//! each delivery into a [`RunInput::Signal`] (docs/architecture.md, "Signals"). The run ends it
//! with a kill (a stop would wait for a signal that may never come); its state's drop gives the
//! signals their default action back.

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
