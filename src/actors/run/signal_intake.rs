//! SignalIntake: owns the registration of the stopping signals — SIGINT, SIGTERM, SIGHUP and
//! SIGQUIT — for the whole `run` invocation and turns each delivery into a
//! [`RunMsg::SignalReceived`] for the run supervisor. SIGHUP (the terminal went away) and
//! SIGQUIT (Ctrl-\\) are treated like SIGTERM: uncaught, they would kill the handler without
//! any cleanup, and the worker, in its own session, would never get the hangup.
//!
//! Registering handlers (rather than ignoring the signals) matters twice over: the handler is
//! never killed mid-write by a Ctrl-C, and a child exec'd by us starts with default
//! dispositions, because handlers — unlike `SIG_IGN` — do not survive `exec`.
//!
//! When the intake stops (the run supervisor stops it once everything is recorded, before the
//! final report; or its state is dropped with the supervisor or the runtime), the stopping
//! signals get their default action back: `signal-hook` would leave a handler that does
//! nothing, so a final report blocked on a stdout or stderr nobody reads could not be
//! interrupted. The intake is started once per process (one `run` per invocation), so the
//! registration is never needed again.

use futures_util::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook_tokio::{Handle, Signals};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::messages::RunMsg;
use crate::actors::notify;
use crate::platform::signal_disposition;

/// The signals that stop a run: each stops the worker's group, records `interrupted` and
/// makes the handler exit 128 + its number.
pub(crate) const STOPPING_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

pub(crate) struct SignalIntake;

pub(crate) struct SignalIntakeState {
    handle: Handle,
    forwarder: JoinHandle<()>,
    span: tracing::Span,
}

impl Drop for SignalIntakeState {
    /// Runs however the intake ends: stopped, killed with its supervisor, or dropped with the
    /// runtime.
    fn drop(&mut self) {
        self.handle.close();
        self.forwarder.abort();
        signal_disposition::restore_default(&STOPPING_SIGNALS);
        tracing::debug!(parent: &self.span, "signal intake stopped; the stopping signals have their default action");
    }
}

impl Actor for SignalIntake {
    type Msg = ();
    type State = SignalIntakeState;
    /// Where signals go, and the run's span (every record carries the run id).
    type Arguments = (ActorRef<RunMsg>, tracing::Span);

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        (run, span): (ActorRef<RunMsg>, tracing::Span),
    ) -> Result<SignalIntakeState, ActorProcessingErr> {
        let signals = Signals::new(STOPPING_SIGNALS)?;
        let handle = signals.handle();
        let forwarder = tokio::spawn(
            async move {
                let mut signals = signals;
                while let Some(signal) = signals.next().await {
                    tracing::info!(signal, "signal received");
                    notify(&run, RunMsg::SignalReceived(signal));
                }
            }
            .instrument(span.clone()),
        );
        tracing::debug!(parent: &span, "signal intake registered for SIGINT, SIGTERM, SIGHUP and SIGQUIT");
        Ok(SignalIntakeState {
            handle,
            forwarder,
            span,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<()>,
        _state: &mut SignalIntakeState,
    ) -> Result<(), ActorProcessingErr> {
        // The state's `Drop` closes the registration and restores the default actions.
        Ok(())
    }
}
