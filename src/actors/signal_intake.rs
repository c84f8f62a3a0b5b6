//! SignalIntake: owns the registration of the stopping signals — SIGINT, SIGTERM, SIGHUP and
//! SIGQUIT — for the whole `run` invocation and turns each delivery into a
//! [`RunMsg::SignalReceived`] for the run supervisor. SIGHUP (the terminal went away) and
//! SIGQUIT (Ctrl-\\) are treated like SIGTERM: uncaught, they would kill the handler without
//! any cleanup, and the worker, in its own session, would never get the hangup.
//!
//! Registering handlers (rather than ignoring the signals) matters twice over: the handler is
//! never killed mid-write by a Ctrl-C, and a child exec'd by us starts with default
//! dispositions, because handlers — unlike `SIG_IGN` — do not survive `exec`.

use futures_util::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook_tokio::{Handle, Signals};
use tokio::task::JoinHandle;

use super::notify;
use super::run_supervisor::RunMsg;

/// The signals that stop a run: each stops the worker's group, records `interrupted` and
/// makes the handler exit 128 + its number.
pub const STOPPING_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

pub struct SignalIntake;

pub struct SignalIntakeState {
    handle: Handle,
    forwarder: JoinHandle<()>,
}

impl Actor for SignalIntake {
    type Msg = ();
    type State = SignalIntakeState;
    type Arguments = ActorRef<RunMsg>;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        run: ActorRef<RunMsg>,
    ) -> Result<SignalIntakeState, ActorProcessingErr> {
        let signals = Signals::new(STOPPING_SIGNALS)?;
        let handle = signals.handle();
        let forwarder = tokio::spawn(async move {
            let mut signals = signals;
            while let Some(signal) = signals.next().await {
                tracing::info!(signal, "signal received");
                notify(&run, RunMsg::SignalReceived(signal));
            }
        });
        tracing::debug!("signal intake registered for SIGINT, SIGTERM, SIGHUP and SIGQUIT");
        Ok(SignalIntakeState { handle, forwarder })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<()>,
        state: &mut SignalIntakeState,
    ) -> Result<(), ActorProcessingErr> {
        state.handle.close();
        state.forwarder.abort();
        Ok(())
    }
}
