//! Why a durable write of a plan's state did not happen, or did not become durable: the
//! vocabulary the state store answers with and the run reports. Pure data; the store (the
//! only writer) produces it.

use std::io;

use super::StateError;
use crate::domain::outcome::OutcomeError;

/// Why a state write did not happen (or did not become durable).
#[derive(Debug, thiserror::Error)]
pub enum StateWriteError {
    /// The transition does not apply to the current state (a caller bug, reported).
    #[error("{0}")]
    Transition(StateError),
    /// The result would break the schema or an invariant.
    #[error("refusing to write invalid state: {0}")]
    Invalid(StateError),
    /// The keyed state directories could not be created.
    #[error("{0}")]
    Directories(io::Error),
    /// `state.json` still holds the previous document.
    #[error("{path}: {source}")]
    NotReplaced { path: String, source: io::Error },
    /// Readers see the new document, but it may not survive a power loss.
    #[error("{path}: replaced, but not durably: {source}")]
    NotDurable { path: String, source: io::Error },
    /// The store is gone (only during teardown).
    #[error("state store stopped")]
    Stopped,
}

/// Why a commit (outcome file, then state replacement) did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The outcome record is invalid; nothing was written.
    #[error("invalid outcome: {0}")]
    InvalidOutcome(OutcomeError),
    /// The outcome record could not be written; nothing changed.
    #[error("{0}")]
    OutcomeWrite(io::Error),
    /// The outcome record is on disk but `state.json` does not reference it.
    #[error("{0}")]
    StateWrite(StateWriteError),
}
