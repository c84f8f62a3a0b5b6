//! Outcome records (`outcomes/<attempt-id>.json`): the durable account of one attempt's
//! terminal result, authoritative once `state.json` references it. Strict like `state.json`:
//! every text non-empty, paths absolute, the file named after the attempt id.

use serde::{Deserialize, Serialize};

use super::state::{AttemptStatus, PhaseRef, SnapshotRef};
use super::strict_json::{self, StrictError, present};
use super::timestamp::Timestamp;
use super::token_usage::summary::UsageSummary;
use super::verification::{FailedCheck, Verification, VerificationError, VerificationRecord};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Artifacts {
    pub(crate) prompt_path: String,
    pub(crate) transcript_path: String,
}

/// One attempt's terminal outcome. Field order is the on-disk key order.
#[serde_with::apply(
    Option => #[serde(default, skip_serializing_if = "Option::is_none")]
)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeRecord {
    pub(crate) attempt_id: String,
    pub(crate) plan: SnapshotRef,
    pub(crate) phase: PhaseRef,
    pub(crate) status: AttemptStatus,
    /// The result body for marker outcomes, otherwise the runner's diagnostic.
    pub(crate) summary: String,
    pub(crate) started_at: Timestamp,
    pub(crate) finished_at: Timestamp,
    pub(crate) execution_workspace: String,
    pub(crate) artifacts: Artifacts,
    /// The child's exit code; `None` when it was killed by a signal or never ran.
    #[serde_with(skip_apply)]
    #[serde(deserialize_with = "Option::deserialize")]
    pub(crate) exit_code: Option<i32>,
    /// The signal that terminated the child; `None` when it exited or never ran.
    #[serde_with(skip_apply)]
    #[serde(deserialize_with = "Option::deserialize")]
    pub(crate) signal: Option<i32>,
    // Keys added later (docs/state-and-recovery.md, "Schema evolution"): absent from older
    // records, always written now. The first four may be `null` when present.
    /// Wall-clock milliseconds from preparation to the decided outcome.
    pub(crate) duration_ms: Option<u64>,
    /// Bytes the agent wrote on each stream.
    pub(crate) output_bytes: Option<OutputBytes>,
    /// This attempt's number among all attempts of its phase recorded in the state (1-based).
    pub(crate) phase_attempt: Option<u32>,
    /// The agent command template that ran (the primary one or a rate-limit fallback).
    pub(crate) agent_cmd: Option<String>,
    /// What the phase's checks came to: their records, or `"skipped"` under `--no-verify`;
    /// absent when the phase has no checks or none were due.
    #[serde(deserialize_with = "present")]
    pub(crate) verification: Option<VerificationRecord>,
    /// The check that failed a `verification-failed` attempt.
    #[serde(deserialize_with = "present")]
    pub(crate) verification_failure: Option<FailedCheck>,
    /// How often the run's watchdog was lost (killed, stopped) during the attempt; written
    /// only when it was (docs/architecture.md, "The watchdog").
    #[serde(deserialize_with = "present")]
    pub(crate) watchdog_losses: Option<u32>,
    /// What the attempt's usage reports came to: always written now; `unknown` (every number
    /// `null`) when the agent reported none.
    #[serde(deserialize_with = "present")]
    pub(crate) usage: Option<UsageSummary>,
    /// With a budget cap set and no usage reported: that the cap could not be enforced for
    /// this agent.
    #[serde(deserialize_with = "present")]
    pub(crate) budget_note: Option<String>,
    /// What the attempt changed in its git work tree, or why that is not known; absent when
    /// recording changes is turned off.
    #[serde(deserialize_with = "present")]
    pub(crate) changes: Option<super::changes::Changes>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputBytes {
    pub stdout: u64,
    pub stderr: u64,
}

impl OutputBytes {
    pub fn total(&self) -> u64 {
        self.stdout.saturating_add(self.stderr)
    }
}

/// The message names the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OutcomeError(pub String);

impl From<StrictError> for OutcomeError {
    fn from(error: StrictError) -> Self {
        Self(error.0)
    }
}

impl From<&str> for OutcomeError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

impl From<VerificationError> for OutcomeError {
    fn from(error: VerificationError) -> Self {
        Self(error.to_string())
    }
}

impl OutcomeRecord {
    /// Serializes with 2-space indentation and a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("outcome serializes");
        text.push('\n');
        text
    }

    pub fn file_name(&self) -> String {
        format!("{}.json", self.attempt_id)
    }

    /// Reads and strictly validates an outcome document stored as `file_name` (a bare name or
    /// a path; only the last component is compared with the attempt id).
    pub fn from_json(bytes: &[u8], file_name: &str) -> Result<OutcomeRecord, OutcomeError> {
        let record: OutcomeRecord = strict_json::from_slice(bytes).map_err(StrictError::from)?;
        record.validate()?;
        let stored_as = file_name.rsplit('/').next().unwrap_or(file_name);
        if stored_as != record.file_name() {
            return Err("outcome filename does not match attempt_id".into());
        }
        Ok(record)
    }

    /// Checks the record's content rules; run before writing, and on read.
    pub fn validate(&self) -> Result<(), OutcomeError> {
        let required = [
            ("attempt_id", &self.attempt_id),
            ("plan.path", &self.plan.path),
            ("plan.sha256", &self.plan.sha256),
            ("phase.id", &self.phase.id),
            ("phase.title", &self.phase.title),
            ("summary", &self.summary),
            ("execution_workspace", &self.execution_workspace),
            ("artifacts.prompt_path", &self.artifacts.prompt_path),
            ("artifacts.transcript_path", &self.artifacts.transcript_path),
        ];
        for (key, value) in required {
            strict_json::require_nonempty(key, value)?;
        }
        strict_json::require_attempt_id("attempt_id", &self.attempt_id)?;
        strict_json::require_sha256_digest("plan.sha256", &self.plan.sha256)?;
        let absolute = [
            ("plan.path", &self.plan.path),
            ("execution_workspace", &self.execution_workspace),
            ("artifacts.prompt_path", &self.artifacts.prompt_path),
            ("artifacts.transcript_path", &self.artifacts.transcript_path),
        ];
        for (key, value) in absolute {
            strict_json::require_absolute_path(key, value)?;
        }
        // A child either exits or is killed; it cannot do both.
        if self.exit_code.is_some() && self.signal.is_some() {
            return Err("exit_code and signal cannot both be set".into());
        }
        if self.signal.is_some_and(|signal| signal <= 0) {
            return Err("expected signal to be positive".into());
        }
        if self.phase_attempt == Some(0) {
            return Err("expected phase_attempt to be a positive integer".into());
        }
        if self.watchdog_losses == Some(0) {
            return Err("expected watchdog_losses to be a positive integer".into());
        }
        if let Some(agent_cmd) = &self.agent_cmd {
            strict_json::require_nonempty("agent_cmd", agent_cmd)?;
        }
        if let Some(note) = &self.budget_note {
            strict_json::require_nonempty("budget_note", note)?;
        }
        if let Some(usage) = &self.usage {
            usage.validate("usage")?;
        }
        self.validate_verification()
    }

    /// The outcome's verification, when it records one (checks recorded under another status
    /// than `phase-complete` and without a failure were stopped: `Verification::read`).
    pub fn verification(&self) -> Option<Verification> {
        let record = self.verification.as_ref()?;
        Verification::read(self.status, record, self.verification_failure.as_ref()).ok()
    }

    /// A failure goes with `verification-failed` and a list whose last check is the failing
    /// one, and `verification-failed` always names its failing check.
    fn validate_verification(&self) -> Result<(), OutcomeError> {
        if let Some(record) = &self.verification {
            record.validate()?;
            Verification::from_record(record, self.verification_failure.as_ref())?;
        } else if self.verification_failure.is_some() {
            return Err("verification_failure requires verification".into());
        }
        let failed = self.status == AttemptStatus::VerificationFailed;
        match (failed, &self.verification_failure) {
            (true, None) => Err("status verification-failed requires verification_failure".into()),
            (false, Some(_)) => Err(OutcomeError(format!(
                "verification_failure cannot go with status {}",
                self.status
            ))),
            (true, Some(_)) | (false, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
