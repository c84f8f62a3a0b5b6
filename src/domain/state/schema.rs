//! The `state.json` document as types: statuses, records and the whole `State`. Field order
//! is the on-disk key order.

use std::sync::Arc;

use serde::Serialize;

use crate::domain::exit_code::ExitCode;
use crate::domain::identity::ProcessIdentity;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::timestamp::Timestamp;
use crate::domain::token_usage::summary::UsageSummary;

/// Terminal status of an attempt, as written to outcomes, `committed_outcomes`, `last_run` and
/// (except `phase-complete`) `stop.reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptStatus {
    PhaseComplete,
    Blocked,
    NeedsClarification,
    AgentFailed,
    LaunchFailed,
    MissingMarker,
    InvalidMarker,
    MultipleMarkers,
    Timeout,
    StopRegex,
    Interrupted,
    ExecutionIoFailed,
    /// The provider refused for now: a rate-limit pattern matched or the agent exited 75.
    RateLimited,
    /// The agent reported `phase-complete`, but a check of the phase's `Verify` section
    /// failed (issue 20).
    VerificationFailed,
    /// A budget cap (`--max-tokens`, `--max-cost`, config `budget`) was crossed while the
    /// attempt ran: it was stopped like a stop-regex match (issue 19).
    BudgetExceeded,
}

impl AttemptStatus {
    pub const ALL: [AttemptStatus; 15] = [
        Self::PhaseComplete,
        Self::Blocked,
        Self::NeedsClarification,
        Self::AgentFailed,
        Self::LaunchFailed,
        Self::MissingMarker,
        Self::InvalidMarker,
        Self::MultipleMarkers,
        Self::Timeout,
        Self::StopRegex,
        Self::Interrupted,
        Self::ExecutionIoFailed,
        Self::RateLimited,
        Self::VerificationFailed,
        Self::BudgetExceeded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PhaseComplete => "phase-complete",
            Self::Blocked => "blocked",
            Self::NeedsClarification => "needs-clarification",
            Self::AgentFailed => "agent-failed",
            Self::LaunchFailed => "launch-failed",
            Self::MissingMarker => "missing-marker",
            Self::InvalidMarker => "invalid-marker",
            Self::MultipleMarkers => "multiple-markers",
            Self::Timeout => "timeout",
            Self::StopRegex => "stop-regex",
            Self::Interrupted => "interrupted",
            Self::ExecutionIoFailed => "execution-io-failed",
            Self::RateLimited => "rate-limited",
            Self::VerificationFailed => "verification-failed",
            Self::BudgetExceeded => "budget-exceeded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// The handler exit code this status leads to (`last_run.exit_code`).
    pub fn handler_exit_code(self) -> i32 {
        ExitCode::for_status(self).code()
    }

    /// TEMPORARY until the status properties land in one impl.
    pub fn waits_for_person(self) -> bool {
        matches!(self, Self::Blocked | Self::NeedsClarification)
    }
}

impl std::fmt::Display for AttemptStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status of the attempt recorded in `active_attempt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActiveStatus {
    /// Recorded before launch; no process identity yet.
    Prepared,
    /// The child was launched; its identity is recorded when `/proc` could be read.
    Running,
}

impl ActiveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepared => "prepared",
            Self::Running => "running",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Prepared, Self::Running]
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// `plan`: the accepted plan snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanRecord {
    /// Canonical absolute plan path.
    pub path: String,
    /// Lowercase hex SHA-256 of the accepted bytes.
    pub sha256: String,
    pub accepted_at: Timestamp,
}

/// `{id, title}` of a phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseRef {
    pub id: String,
    pub title: String,
}

/// `{path, sha256}` of the plan snapshot an attempt ran against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SnapshotRef {
    pub path: String,
    pub sha256: String,
}

/// One entry of `committed_outcomes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutcomeRef {
    pub attempt_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub path: String,
    // Keys added later (docs/state-and-recovery.md, "Schema evolution"): copied from the
    // outcome record at commit so that `status` can tally durations and sizes from
    // `state.json` alone, without opening an outcome file per attempt. Absent from entries
    // committed before they existed, and from records that lack them.
    /// The outcome's `duration_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The outcome's `output_bytes`, both streams together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// The outcome's `watchdog_losses`, when the attempt lost its watchdog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchdog_losses: Option<u64>,
    /// The outcome's `usage` (issue 19), so `status` sums tokens and cost without opening
    /// outcome files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageSummary>,
}

/// `active_attempt`: a prepared or running attempt whose outcome is not committed yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActiveAttempt {
    pub id: String,
    pub status: ActiveStatus,
    pub phase: PhaseRef,
    pub snapshot: SnapshotRef,
    pub execution_workspace: String,
    pub started_at: Timestamp,
    pub prompt_path: String,
    pub transcript_path: String,
    /// The planned outcome path; the file may not exist, and is authoritative only once it is
    /// referenced from `committed_outcomes`.
    pub outcome_path: String,
    pub process: Option<ProcessIdentity>,
}

/// `stop`: why the current phase stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stop {
    pub reason: AttemptStatus,
    pub phase_id: String,
    pub message: Option<String>,
    pub clarification_request: Option<String>,
}

/// `last_run`: the most recent resolved attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastRun {
    pub run_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// The handler exit code implied by `status` (0, 2, 3 or 4).
    pub exit_code: i32,
    pub execution_workspace: String,
    pub prompt_path: String,
    pub transcript_path: String,
    /// `None` only for an abandoned attempt resolved as `interrupted` by `--retry-stopped`.
    pub outcome_path: Option<String>,
    pub summary: String,
}

/// One entry of `abandoned_attempts`: an attempt whose handler ended without recording its
/// outcome, resolved as `interrupted` (result unknown) by `--retry-stopped`. It has no outcome
/// file, so it is not a committed outcome; it is kept so that the phase's attempts are counted
/// right (`status`, the banner's attempt number) after the retry replaced `last_run`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AbandonedRef {
    pub attempt_id: String,
    pub phase_id: String,
    pub started_at: Timestamp,
    pub resolved_at: Timestamp,
}

/// The whole `state.json` document. Field order is the on-disk key order (written by
/// `document.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub plan: Option<PlanRecord>,
    pub completed_phase_ids: Vec<String>,
    /// Shared: a committed entry never changes, and every state write starts from a copy of
    /// the last state, so a copy shares the entries instead of duplicating every one.
    pub committed_outcomes: Vec<Arc<OutcomeRef>>,
    pub current_phase: Option<PhaseRef>,
    pub active_attempt: Option<ActiveAttempt>,
    pub stop: Option<Stop>,
    pub last_run: Option<LastRun>,
    /// The next attempt of the stopped phase that a retry policy scheduled (optional key,
    /// added with unattended runs; written only when set, so runs without a policy write the
    /// same document as before).
    pub retry_schedule: Option<RetrySchedule>,
    /// Abandoned attempts resolved by `--retry-stopped`, in order (optional key, written only
    /// once there is one).
    pub abandoned_attempts: Vec<AbandonedRef>,
}

impl State {
    /// How many attempts of `phase_id` are recorded as finished: its committed outcomes and
    /// its resolved abandoned attempts (the active attempt is not counted).
    pub fn finished_attempts_of(&self, phase_id: &str) -> usize {
        let committed = self
            .committed_outcomes
            .iter()
            .filter(|entry| entry.phase_id == phase_id)
            .count();
        let abandoned = self
            .abandoned_attempts
            .iter()
            .filter(|entry| entry.phase_id == phase_id)
            .count();
        committed + abandoned
    }
}
