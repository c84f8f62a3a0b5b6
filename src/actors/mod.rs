//! The ractor supervision tree that executes `run` (see `docs/architecture.md`). Files follow
//! the tree: the run supervisor and its children in `run/`, the attempt supervisor and its
//! children in `attempt/`, the state store (written by both) here.
//!
//! ```text
//! RunSupervisor                 run/: executes the run loop (domain::lifecycle::run)
//! ├── SignalIntake              SIGINT/SIGTERM/SIGHUP/SIGQUIT → RunMsg::SignalReceived
//! ├── WorkspaceLocks            flock'd directory descriptors
//! ├── StateStore                sole writer of state.json and outcomes/*.json
//! └── AttemptSupervisor         attempt/: executes the attempt lifecycle, one per attempt
//!     ├── TranscriptWriter      transcript file + live console (thread)
//!     ├── MarkerParser          per-stream result-block framing
//!     ├── StopScanner           streaming stop regexes over the combined output
//!     ├── DeadlineTimer         wall-clock and idle deadlines
//!     ├── GroupKiller           TERM → grace → KILL by saved pgid; leak sweep
//!     ├── PipeReader(stdout)
//!     ├── PipeReader(stderr)
//!     ├── notification receiver thread   the attempt's NOTIFY_SOCKET (attempt/notifications.rs)
//!     └── Verify check job      one check at a time, after a completion (attempt/verify.rs)
//! ```
//!
//! Each actor owns exactly one resource and is the only code that touches it. Message enums
//! live in their own files (`run/messages.rs`, `attempt/messages.rs`), so a child imports its
//! parent's messages, never its parent. Recoverable failures travel in replies (`Result`),
//! never as handler errors, because an `Err` from a ractor handler kills the actor.

pub(crate) mod attempt;
pub(crate) mod observer;
pub(crate) mod run;
pub(crate) mod state_store;

use ractor::{ActorRef, Message};

/// Sends a fire-and-forget message, ignoring a recipient that already stopped: during
/// shutdown late notifications are expected and harmless.
pub(crate) fn notify<M: Message>(actor: &ActorRef<M>, message: M) {
    if actor.cast(message).is_err() {
        tracing::trace!(actor = %actor.get_id(), "notification dropped: recipient stopped");
    }
}

/// Calls an actor and unwraps the reply; `None` when the actor is gone.
pub(crate) async fn call<M: Message, R: Send + 'static>(
    actor: &ActorRef<M>,
    message: impl FnOnce(ractor::RpcReplyPort<R>) -> M,
) -> Option<R> {
    match actor.call(message, None).await {
        Ok(ractor::rpc::CallResult::Success(reply)) => Some(reply),
        _ => None,
    }
}

/// Runs blocking work (file writes and reads, `/proc` scans) without stalling the runtime: the
/// calling thread stops being a runtime worker while `work` runs (tokio's `block_in_place`
/// hands its queue of tasks to another thread, which keeps running them, timeouts and signals
/// included). The actors run on the handler's multi-threaded runtime only. A caller never puts
/// it in a `select!` or `join!` whose other branches must progress meanwhile: they are polled
/// only once the work is done.
pub(crate) async fn off_runtime<T>(work: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(work)
}
