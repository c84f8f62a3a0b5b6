//! The `state.json` schema: one plan's durable progress, its strict reader and writer, and the
//! pure transitions of the attempt lifecycle (docs/state-and-recovery.md,
//! docs/session-lifecycle.md).
//!
//! The runner is the only writer. Every key is required and no other key is allowed; a
//! violation is reported naming the dotted key (`missing required key active_attempt`,
//! `unexpected key plan.version`). Semantic invariants (an active attempt and a stop never
//! coexist, artifact paths are the keyed directory's paths for the attempt id, …) are checked
//! on read and before every write.

mod error;
mod excerpt;
mod layout;
mod schema;
mod transitions;
mod validation;
mod write_error;

#[cfg(test)]
mod tests;

pub use crate::domain::attempt_status::AttemptStatus;
pub use error::{Invariant, Refusal, StateError, Transition};
pub use excerpt::{MAX_STATE_BYTES, STATE_TEXT_LIMIT, excerpt};
pub use layout::StateLayout;
pub use schema::{
    AbandonedRef, ActiveAttempt, ActiveStatus, LastRun, OutcomeRef, PhaseRef, PlanRecord,
    SnapshotRef, State, Stop,
};
pub use transitions::ABANDONED_SUMMARY;
pub use write_error::{CommitError, StateWriteError};
