//! Why a state document is refused, a transition does not apply to it (a caller bug, reported
//! rather than a panic), or a durable write did not happen. Document messages name the key,
//! never the file path.

use std::io;

use super::{AttemptStatus, MAX_STATE_BYTES};
use crate::domain::outcome::OutcomeError;
use crate::domain::strict_json::StrictError;

/// A state document that breaks the schema or an invariant, or a transition it refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not strict JSON, or a key missing, unexpected or of the wrong type.
    #[error(transparent)]
    Schema(#[from] StrictError),
    /// Keys that are each well-formed but do not agree.
    #[error(transparent)]
    Invariant(#[from] Invariant),
    /// A transition that does not apply to the state as it is.
    #[error("cannot {transition}: {refusal}")]
    Refused {
        transition: Transition,
        refusal: Refusal,
    },
    #[error(
        "state.json would be {bytes} bytes, over the {MAX_STATE_BYTES}-byte limit of what is written"
    )]
    TooLarge { bytes: usize },
}

/// The semantic invariants of a state document, each named by the keys it ties together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invariant {
    #[error("completed_phase_ids contains duplicates")]
    DuplicateCompletedPhase,
    #[error("completed_phase_ids cannot contain an empty id")]
    EmptyCompletedPhase,
    #[error("active_attempt and stop cannot both be set")]
    ActiveAndStopped,
    #[error("current_phase requires active_attempt or stop")]
    PhaseWithoutAttemptOrStop,
    #[error(
        "retry_schedule requires a stop of its phase with its status (stop.phase_id, stop.reason)"
    )]
    ScheduleWithoutItsStop,
    #[error("active_attempt requires plan")]
    AttemptWithoutPlan,
    #[error("current_phase must match active_attempt.phase")]
    AttemptPhaseNotCurrent,
    #[error("active_attempt phase is already completed")]
    AttemptPhaseCompleted,
    #[error("active_attempt.snapshot.path must match plan.path")]
    SnapshotPathNotPlan,
    #[error("active_attempt.snapshot.sha256 must match plan.sha256")]
    SnapshotDigestNotPlan,
    #[error("prepared active_attempt.process must be null")]
    PreparedWithProcess,
    /// `key` is `pid`, `process_group_id` or `start_time_ticks`.
    #[error("expected active_attempt.process.{key} to be a positive integer")]
    ProcessFieldZero { key: &'static str },
    /// A completed phase is never "stopped" (the reader already refuses the status there).
    #[error("invalid reason 'phase-complete' (at stop.reason)")]
    StoppedAsComplete,
    #[error("current_phase must match stop.phase_id")]
    StopPhaseNotCurrent,
    #[error("stopped phase is already completed")]
    StoppedPhaseCompleted,
    #[error("needs-clarification stop requires clarification_request")]
    ClarificationMissing,
    #[error("stop.clarification_request requires needs-clarification reason")]
    ClarificationWithoutReason,
    #[error("committed_outcomes contains duplicate attempt ids")]
    DuplicateCommittedOutcome,
    /// `key` is an `abandoned_attempts[i].attempt_id` also listed before it, or committed.
    #[error("{key} is listed twice (an attempt is abandoned or committed, once)")]
    AttemptListedTwice { key: String },
    /// Artifact paths are derived from the attempt id, never chosen freely.
    #[error("expected {key} to be {expected}")]
    ArtifactPath { key: String, expected: String },
    #[error("only an interrupted recovery may omit last_run.outcome_path")]
    OutcomePathOmitted,
    #[error("last_run.exit_code does not match status '{status}'")]
    ExitCodeNotStatus { status: AttemptStatus },
    #[error("completed last_run.phase_id is not in completed_phase_ids")]
    CompletedRunNotCompleted,
    #[error("last_run outcome must be the latest committed_outcomes entry")]
    LastRunNotLatestOutcome,
}

/// The transition that was refused, worded to follow `cannot`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Transition {
    #[error("prepare attempt {attempt_id}")]
    Prepare { attempt_id: String },
    #[error("mark attempt {attempt_id} running")]
    MarkRunning { attempt_id: String },
    #[error("commit attempt {attempt_id}")]
    Commit { attempt_id: String },
    #[error("schedule a retry of {phase_id}")]
    ScheduleRetry { phase_id: String },
    #[error("resolve an abandoned attempt")]
    ResolveAbandoned,
}

/// Why a [`Transition`] does not apply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Another attempt must be committed or resolved first.
    #[error("attempt {active} is still active")]
    StillActive { active: String },
    #[error("a new attempt must be prepared with no process")]
    PreparedWithProcess,
    #[error("it is already running")]
    AlreadyRunning,
    #[error("there is no active attempt")]
    NoActiveAttempt,
    #[error("the active attempt is {active}")]
    OtherAttemptActive { active: String },
    #[error("the outcome is for phase {outcome_phase}, the attempt for phase {attempt_phase}")]
    OtherPhase {
        outcome_phase: String,
        attempt_phase: String,
    },
    #[error("outcome path {path} is not the planned {planned}")]
    OtherOutcomePath { path: String, planned: String },
    #[error("the phase is not stopped")]
    PhaseNotStopped,
}

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
