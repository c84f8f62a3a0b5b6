//! The ractor supervision tree that executes `run` (see `docs/architecture.md`).
//!
//! ```text
//! RunSupervisor                 one per invocation; owns the phase loop
//! ├── SignalIntake              SIGINT/SIGTERM → RunMsg::SignalReceived
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
pub(crate) fn notify<M: Message>(actor: &ActorRef<M>, message: M) {
    if actor.cast(message).is_err() {
        tracing::trace!(actor = ?actor.get_id(), "notification dropped: recipient stopped");
    }
}
