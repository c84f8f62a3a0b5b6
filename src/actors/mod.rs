//! The ractor supervision tree that executes `run` (see `docs/architecture.md`).
//!
//! ```text
//! RunSupervisor                 one per invocation; owns the phase loop
//! ├── SignalIntake              SIGINT/SIGTERM/SIGHUP/SIGQUIT → RunMsg::SignalReceived
//! ├── WorkspaceLocks            flock'd directory descriptors
//! ├── StateStore                sole writer of state.json and outcomes/*.json
//! └── AttemptSupervisor         one per attempt
//!     ├── TranscriptWriter      transcript file + live console (thread)
//!     ├── MarkerParser          per-stream result-block framing
//!     ├── StopScanner           streaming stop regexes over the combined output
//!     ├── DeadlineTimer         wall-clock and idle deadlines
//!     ├── GroupKiller           TERM → grace → KILL by saved pgid; leak sweep
//!     ├── PipeReader(stdout)
//!     └── PipeReader(stderr)
//! ```
//!
//! Each actor owns exactly one resource and is the only code that touches it. Recoverable
//! failures travel in replies (`Result`), never as handler errors, because an `Err` from a
//! ractor handler kills the actor.

pub mod attempt_supervisor;
pub mod deadline_timer;
pub mod group_killer;
pub mod marker_parser;
pub mod observer;
pub mod pipe_reader;
pub mod run_supervisor;
pub mod signal_intake;
pub mod state_store;
pub mod stop_scanner;
pub mod transcript_writer;
pub mod workspace_locks;

use ractor::{ActorRef, Message};

/// Sends a fire-and-forget message, ignoring a recipient that already stopped: during
/// shutdown late notifications are expected and harmless.
pub fn notify<M: Message>(actor: &ActorRef<M>, message: M) {
    if actor.cast(message).is_err() {
        tracing::trace!(actor = %actor.get_id(), "notification dropped: recipient stopped");
    }
}

/// Calls an actor and unwraps the reply; `None` when the actor is gone.
pub async fn call<M: Message, R: Send + 'static>(
    actor: &ActorRef<M>,
    message: impl FnOnce(ractor::RpcReplyPort<R>) -> M,
) -> Option<R> {
    match actor.call(message, None).await {
        Ok(ractor::rpc::CallResult::Success(reply)) => Some(reply),
        _ => None,
    }
}

/// Runs blocking work (file writes and reads, `/proc` scans) on tokio's blocking pool, so no
/// runtime worker thread ever waits on the disk or the kernel. A panic in the work is
/// re-raised in the caller, where ractor turns it into an actor failure.
pub async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}
