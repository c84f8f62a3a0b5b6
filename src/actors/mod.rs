//! The ractor supervision tree that executes `run` (docs/architecture.md, "The supervision
//! tree" and "Actors"): the run supervisor and its children in `run/`, the attempt supervisor
//! and its children in `attempt/`, the state store (written by both) here. A child imports its
//! parent's messages file, never its parent.
//!
//! Each actor is given the span it belongs to (the run's, or the attempt's) as `span` and logs
//! in it, so every record carries the run and attempt ids: ractor runs a handler in the span of
//! the message's sender. Only the state store keeps that default, so a write is logged in the
//! span of the attempt that asked for it.

pub(crate) mod attempt;
pub(crate) mod observer;
pub(crate) mod run;
pub(crate) mod state_store;

use ractor::{ActorRef, Message};

/// Sends a fire-and-forget message, ignoring a recipient that already stopped (late
/// notifications during shutdown are harmless).
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
/// calling thread stops being a runtime worker while `work` runs (`block_in_place`). Never in
/// a `select!` or `join!` whose other branches must progress meanwhile: they are polled only
/// once the work is done.
pub(crate) async fn off_runtime<T>(work: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(work)
}
