//! Outcome records (`outcomes/<attempt-id>.json`): the durable, append-only account of one
//! attempt's terminal result. Written and fsynced before `state.json` references it; only a
//! referenced record is authoritative.
//!
//! Strict like `state.json` (docs/state-and-recovery.md): every key required, no other key allowed, every
//! text field non-empty, paths absolute, and the file named after the attempt id.

use serde::Serialize;

use super::state::{AttemptStatus, PhaseRef, SnapshotRef};
use super::strict_json::{self, Object, StrictError};
use super::timestamp::Timestamp;
use super::token_usage::summary::UsageSummary;
use super::verification::{FailedCheck, Verification, VerificationRecord};

/// Artifact paths of the attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Artifacts {
    pub(crate) prompt_path: String,
    pub(crate) transcript_path: String,
}

/// One attempt's terminal outcome. Field order is the on-disk key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
    pub(crate) exit_code: Option<i32>,
    /// The signal that terminated the child; `None` when it exited or never ran.
    pub(crate) signal: Option<i32>,
    // Keys added later (docs/state-and-recovery.md, "Schema evolution"): absent from older
    // records, always written now.
    /// Wall-clock milliseconds from preparation to the decided outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) duration_ms: Option<u64>,
    /// Bytes the agent wrote on each stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output_bytes: Option<OutputBytes>,
    /// This attempt's number among all attempts of its phase recorded in the state (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) phase_attempt: Option<u32>,
    /// The agent command template that ran (the primary one or a rate-limit fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_cmd: Option<String>,
    /// What the phase's checks came to (issue 20): their records, or `"skipped"` under
    /// `--no-verify`; absent when the phase has no checks or none were due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verification: Option<VerificationRecord>,
    /// The check that failed a `verification-failed` attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verification_failure: Option<FailedCheck>,
    /// How often the run's watchdog was lost (killed, stopped) during the attempt; written
    /// only when it was (docs/architecture.md, "The watchdog").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) watchdog_losses: Option<u32>,
    /// What the attempt's usage reports came to (issue 19): always written now; `unknown`
    /// (every number `null`) when the agent reported none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageSummary>,
    /// With a budget cap set and no usage reported: that the cap could not be enforced for
    /// this agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) budget_note: Option<String>,
    /// What the attempt changed in its git work tree, or why that is not known; absent when
    /// recording changes is turned off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) changes: Option<super::changes::Changes>,
}

/// Output sizes of one attempt, per stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OutputBytes {
    pub stdout: u64,
    pub stderr: u64,
}

impl OutputBytes {
    pub fn total(&self) -> u64 {
        self.stdout.saturating_add(self.stderr)
    }
}

/// An outcome document that breaks the schema; the message names the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeError(pub String);

impl std::fmt::Display for OutcomeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutcomeError {}

impl From<StrictError> for OutcomeError {
    fn from(error: StrictError) -> Self {
        Self(error.0)
    }
}

// Key sets, in on-disk order (the serde derives above write the same order; a test checks).
const OUTCOME_KEYS: [&str; 11] = [
    "attempt_id",
    "plan",
    "phase",
    "status",
    "summary",
    "started_at",
    "finished_at",
    "execution_workspace",
    "artifacts",
    "exit_code",
    "signal",
];
/// Keys added later, in on-disk order after the original ones; optional on read.
const OPTIONAL_OUTCOME_KEYS: [&str; 10] = [
    "duration_ms",
    "output_bytes",
    "phase_attempt",
    "agent_cmd",
    "verification",
    "verification_failure",
    "watchdog_losses",
    "usage",
    "budget_note",
    "changes",
];
const ARTIFACTS_KEYS: [&str; 2] = ["prompt_path", "transcript_path"];
const OUTPUT_BYTES_KEYS: [&str; 2] = ["stdout", "stderr"];

impl OutcomeRecord {
    /// Serializes with 2-space indentation and a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("outcome serializes");
        text.push('\n');
        text
    }

    /// The file name this record is stored under: `<attempt_id>.json`.
    pub fn file_name(&self) -> String {
        format!("{}.json", self.attempt_id)
    }

    /// Reads and strictly validates an outcome document stored as `file_name` (a bare name or
    /// a path; only the last component is compared with the attempt id).
    pub fn from_json(bytes: &[u8], file_name: &str) -> Result<OutcomeRecord, OutcomeError> {
        let document = strict_json::parse_document(bytes)?;
        let record = OutcomeRecord::from_object(&strict_json::root_object(&document)?)?;
        record.validate()?;
        let stored_as = file_name.rsplit('/').next().unwrap_or(file_name);
        if stored_as != record.file_name() {
            return Err(OutcomeError(
                "outcome filename does not match attempt_id".into(),
            ));
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
            return Err(OutcomeError(
                "exit_code and signal cannot both be set".into(),
            ));
        }
        if self.signal.is_some_and(|signal| signal <= 0) {
            return Err(OutcomeError("expected signal to be positive".into()));
        }
        if self.phase_attempt == Some(0) {
            return Err(OutcomeError(
                "expected phase_attempt to be a positive integer".into(),
            ));
        }
        if self.watchdog_losses == Some(0) {
            return Err(OutcomeError(
                "expected watchdog_losses to be a positive integer".into(),
            ));
        }
        if let Some(agent_cmd) = &self.agent_cmd {
            strict_json::require_nonempty("agent_cmd", agent_cmd)?;
        }
        if let Some(note) = &self.budget_note {
            strict_json::require_nonempty("budget_note", note)?;
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
            record.validate().map_err(OutcomeError)?;
            Verification::from_record(record, self.verification_failure.as_ref())
                .map_err(OutcomeError)?;
        } else if self.verification_failure.is_some() {
            return Err(OutcomeError(
                "verification_failure requires verification".into(),
            ));
        }
        let failed = self.status == AttemptStatus::VerificationFailed;
        match (failed, &self.verification_failure) {
            (true, None) => Err(OutcomeError(
                "status verification-failed requires verification_failure".into(),
            )),
            (false, Some(_)) => Err(OutcomeError(format!(
                "verification_failure cannot go with status {}",
                self.status
            ))),
            _ => Ok(()),
        }
    }

    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys_and_optional(&OUTCOME_KEYS, &OPTIONAL_OUTCOME_KEYS)?;
        Ok(Self {
            attempt_id: object.string("attempt_id")?.to_owned(),
            plan: SnapshotRef::from_object(&object.object("plan")?)?,
            phase: PhaseRef::from_object(&object.object("phase")?)?,
            status: object.enumerated("status", AttemptStatus::parse)?,
            summary: object.string("summary")?.to_owned(),
            started_at: object.timestamp("started_at")?,
            finished_at: object.timestamp("finished_at")?,
            execution_workspace: object.string("execution_workspace")?.to_owned(),
            artifacts: Artifacts::from_object(&object.object("artifacts")?)?,
            exit_code: object.optional_integer("exit_code")?,
            signal: object.optional_integer("signal")?,
            duration_ms: optional(object, "duration_ms", |object| {
                object.optional_integer("duration_ms")
            })?
            .flatten(),
            output_bytes: optional(object, "output_bytes", |object| {
                object
                    .optional_object("output_bytes")?
                    .map(|bytes| OutputBytes::from_object(&bytes))
                    .transpose()
            })?
            .flatten(),
            phase_attempt: optional(object, "phase_attempt", |object| {
                object.optional_integer("phase_attempt")
            })?
            .flatten(),
            agent_cmd: optional(object, "agent_cmd", |object| {
                Ok(object.optional_string("agent_cmd")?.map(str::to_owned))
            })?
            .flatten(),
            verification: optional(object, "verification", |object| {
                VerificationRecord::from_object(object, "verification")
            })?,
            verification_failure: optional(object, "verification_failure", |object| {
                FailedCheck::from_object(&object.object("verification_failure")?)
            })?,
            watchdog_losses: optional(object, "watchdog_losses", |object| {
                object.integer("watchdog_losses")
            })?,
            usage: optional(object, "usage", |object| {
                UsageSummary::from_json(object.value("usage")?, &object.qualified("usage"))
            })?,
            budget_note: optional(object, "budget_note", |object| {
                Ok(object.string("budget_note")?.to_owned())
            })?,
            changes: optional(object, "changes", |object| {
                serde_json::from_value(object.value("changes")?.clone())
                    .map_err(|error| StrictError(format!("changes: {error}")))
            })?,
        })
    }
}

/// Reads an optional key: `None` when absent, else what `read` makes of it.
fn optional<'a, T>(
    object: &Object<'a>,
    key: &str,
    read: impl FnOnce(&Object<'a>) -> Result<T, StrictError>,
) -> Result<Option<T>, StrictError> {
    if object.has(key) {
        read(object).map(Some)
    } else {
        Ok(None)
    }
}

impl OutputBytes {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&OUTPUT_BYTES_KEYS)?;
        Ok(Self {
            stdout: object.integer("stdout")?,
            stderr: object.integer("stderr")?,
        })
    }
}

impl Artifacts {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&ARTIFACTS_KEYS)?;
        Ok(Self {
            prompt_path: object.string("prompt_path")?.to_owned(),
            transcript_path: object.string("transcript_path")?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
