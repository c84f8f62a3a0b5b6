//! The `state.json` document as types. Field order is the on-disk key order; every key is
//! required unless marked optional, and a required key that may be `null` says so
//! (`domain::strict_json`).

use serde::{Deserialize, Serialize};

use super::excerpt::MAX_STATE_BYTES;
use super::{StateError, StateLayout};
use crate::domain::attempt_status::AttemptStatus;
use crate::domain::identity::ProcessIdentity;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::strict_json::{self, StrictError, present};
use crate::domain::timestamp::Timestamp;
use crate::domain::token_usage::summary::UsageSummary;

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::Display, strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ActiveStatus {
    /// Recorded before launch; no process identity yet.
    Prepared,
    /// The child was launched; its identity is recorded when `/proc` could be read.
    Running,
}

impl ActiveStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// `plan`: the accepted plan snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRecord {
    /// Canonical absolute plan path.
    pub path: String,
    /// Lowercase hex SHA-256 of the accepted bytes.
    pub sha256: String,
    pub accepted_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseRef {
    pub id: String,
    pub title: String,
}

impl PhaseRef {
    /// Both fields non-empty; `key` is where this phase sits (`current_phase`).
    pub(crate) fn validate(&self, key: &str) -> Result<(), StrictError> {
        strict_json::require_nonempty(format_args!("{key}.id"), &self.id)?;
        strict_json::require_nonempty(format_args!("{key}.title"), &self.title)
    }
}

/// The plan snapshot an attempt ran against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRef {
    pub path: String,
    pub sha256: String,
}

/// One entry of `committed_outcomes`. The optional keys (added later: docs/state-and-recovery.md,
/// "Schema evolution") are copied from the outcome record at commit, so that `status` tallies
/// from `state.json` alone; absent from older entries and from records that lack them.
#[serde_with::apply(
    Option => #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeRef {
    pub attempt_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub path: String,
    pub duration_ms: Option<u64>,
    /// Both streams together.
    pub output_bytes: Option<u64>,
    pub watchdog_losses: Option<u64>,
    pub usage: Option<UsageSummary>,
    /// The attempt changed no file and made no commit (`false`: it did); only when its
    /// changes were recorded.
    pub changed_nothing: Option<bool>,
}

/// `active_attempt`: a prepared or running attempt whose outcome is not committed yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveAttempt {
    pub id: String,
    pub status: ActiveStatus,
    pub phase: PhaseRef,
    pub snapshot: SnapshotRef,
    pub execution_workspace: String,
    pub started_at: Timestamp,
    pub prompt_path: String,
    pub transcript_path: String,
    /// The file may not exist; it is authoritative only once `committed_outcomes` references
    /// it.
    pub outcome_path: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub process: Option<ProcessIdentity>,
}

/// `stop`: why the current phase stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stop {
    /// Never `phase-complete`: a completed phase is not stopped (checked with the invariants).
    pub reason: AttemptStatus,
    pub phase_id: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub message: Option<String>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub clarification_request: Option<String>,
}

/// `last_run`: the most recent resolved attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastRun {
    pub run_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// Implied by `status`.
    pub exit_code: i32,
    pub execution_workspace: String,
    pub prompt_path: String,
    pub transcript_path: String,
    /// `None` only for an abandoned attempt resolved as `interrupted` by `--retry-stopped`.
    #[serde(deserialize_with = "Option::deserialize")]
    pub outcome_path: Option<String>,
    pub summary: String,
}

/// One entry of `abandoned_attempts`: an attempt whose handler ended without recording its
/// outcome, resolved as `interrupted` by `--retry-stopped`. Kept so that the phase's attempts
/// are counted right after the retry replaced `last_run`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbandonedRef {
    pub attempt_id: String,
    pub phase_id: String,
    pub started_at: Timestamp,
    pub resolved_at: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    #[serde(deserialize_with = "Option::deserialize")]
    pub plan: Option<PlanRecord>,
    pub completed_phase_ids: Vec<String>,
    pub committed_outcomes: Vec<OutcomeRef>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub current_phase: Option<PhaseRef>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub active_attempt: Option<ActiveAttempt>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub stop: Option<Stop>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub last_run: Option<LastRun>,
    /// The next attempt of the stopped phase that a retry policy scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_schedule: Option<RetrySchedule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub abandoned_attempts: Vec<AbandonedRef>,
}

impl State {
    /// Reads and strictly validates a `state.json` document, its agent texts cut to excerpts
    /// ([`State::bound_texts`]): what is read is what the next write would write.
    pub fn from_json(bytes: &[u8], layout: &StateLayout) -> Result<State, StateError> {
        let mut state: State = strict_json::from_slice(bytes).map_err(StrictError::from)?;
        state.validate(layout)?;
        state.bound_texts();
        Ok(state)
    }

    /// Serializes with 2-space indentation and a trailing newline, keys in schema order.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("state serializes");
        text.push('\n');
        text
    }

    /// [`State::to_json`], refused over [`MAX_STATE_BYTES`].
    pub fn to_checked_json(&self) -> Result<String, StateError> {
        let text = self.to_json();
        if text.len() as u64 > MAX_STATE_BYTES {
            return Err(StateError::TooLarge { bytes: text.len() });
        }
        Ok(text)
    }

    /// The committed outcomes and resolved abandoned attempts of `phase_id`.
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
