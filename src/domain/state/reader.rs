//! Reading `state.json`: the strict key sets and the object-by-object reader, and writing it
//! back in the same key order.

use std::sync::Arc;

use super::{
    AbandonedRef, ActiveAttempt, ActiveStatus, AttemptStatus, LastRun, OutcomeRef, PhaseRef,
    PlanRecord, SnapshotRef, State, StateError, StateLayout, Stop,
};
use crate::domain::identity::ProcessIdentity;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::strict_json::{self, Object, StrictError};
use crate::domain::token_usage::summary::UsageSummary;

// Key sets, in on-disk order (the serde derives above write the same order; a test checks).
pub(super) const STATE_KEYS: [&str; 7] = [
    "plan",
    "completed_phase_ids",
    "committed_outcomes",
    "current_phase",
    "active_attempt",
    "stop",
    "last_run",
];
/// Keys a later version added: absent in older documents, still strict when present.
pub(super) const OPTIONAL_STATE_KEYS: [&str; 2] = ["retry_schedule", "abandoned_attempts"];
pub(super) const ABANDONED_KEYS: [&str; 4] =
    ["attempt_id", "phase_id", "started_at", "resolved_at"];
pub(super) const PLAN_KEYS: [&str; 3] = ["path", "sha256", "accepted_at"];
pub(super) const PHASE_KEYS: [&str; 2] = ["id", "title"];
pub(super) const SNAPSHOT_KEYS: [&str; 2] = ["path", "sha256"];
pub(super) const OUTCOME_REF_KEYS: [&str; 4] = ["attempt_id", "phase_id", "status", "path"];
/// Keys of a `committed_outcomes` entry added later, after the original ones.
pub(super) const OPTIONAL_OUTCOME_REF_KEYS: [&str; 4] =
    ["duration_ms", "output_bytes", "watchdog_losses", "usage"];
pub(super) const ACTIVE_ATTEMPT_KEYS: [&str; 10] = [
    "id",
    "status",
    "phase",
    "snapshot",
    "execution_workspace",
    "started_at",
    "prompt_path",
    "transcript_path",
    "outcome_path",
    "process",
];
pub(super) const PROCESS_KEYS: [&str; 4] =
    ["pid", "process_group_id", "boot_id", "start_time_ticks"];
pub(super) const STOP_KEYS: [&str; 4] = ["reason", "phase_id", "message", "clarification_request"];
pub(super) const LAST_RUN_KEYS: [&str; 11] = [
    "run_id",
    "phase_id",
    "status",
    "started_at",
    "finished_at",
    "exit_code",
    "execution_workspace",
    "prompt_path",
    "transcript_path",
    "outcome_path",
    "summary",
];

impl State {
    /// Reads and strictly validates a `state.json` document. Agent texts a document written
    /// before issue 23 holds whole are cut to excerpts ([`State::bound_texts`]): what is read
    /// is what the next write would write.
    pub fn from_json(bytes: &[u8], layout: &StateLayout) -> Result<State, StateError> {
        let document = strict_json::parse_document(bytes)?;
        let mut state = State::from_object(&strict_json::root_object(&document)?)?;
        state.validate(layout)?;
        state.bound_texts();
        Ok(state)
    }
}

impl State {
    fn from_object(object: &Object<'_>) -> Result<State, StrictError> {
        object.expect_keys_and_optional(&STATE_KEYS, &OPTIONAL_STATE_KEYS)?;
        Ok(State {
            plan: object
                .optional_object("plan")?
                .map(|plan| PlanRecord::from_object(&plan))
                .transpose()?,
            completed_phase_ids: object
                .string_list("completed_phase_ids")?
                .into_iter()
                .map(str::to_owned)
                .collect(),
            committed_outcomes: object
                .object_list("committed_outcomes")?
                .iter()
                .map(|entry| OutcomeRef::from_object(entry).map(Arc::new))
                .collect::<Result<_, _>>()?,
            current_phase: object
                .optional_object("current_phase")?
                .map(|phase| PhaseRef::from_object(&phase))
                .transpose()?,
            active_attempt: object
                .optional_object("active_attempt")?
                .map(|attempt| ActiveAttempt::from_object(&attempt))
                .transpose()?,
            stop: object
                .optional_object("stop")?
                .map(|stop| Stop::from_object(&stop))
                .transpose()?,
            last_run: object
                .optional_object("last_run")?
                .map(|last_run| LastRun::from_object(&last_run))
                .transpose()?,
            retry_schedule: if object.has("retry_schedule") {
                object
                    .optional_object("retry_schedule")?
                    .map(|schedule| RetrySchedule::from_object(&schedule))
                    .transpose()?
            } else {
                None
            },
            abandoned_attempts: if object.has("abandoned_attempts") {
                object
                    .object_list("abandoned_attempts")?
                    .iter()
                    .map(AbandonedRef::from_object)
                    .collect::<Result<_, _>>()?
            } else {
                Vec::new()
            },
        })
    }
}

impl AbandonedRef {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&ABANDONED_KEYS)?;
        Ok(Self {
            attempt_id: object.string("attempt_id")?.to_owned(),
            phase_id: object.string("phase_id")?.to_owned(),
            started_at: object.timestamp("started_at")?,
            resolved_at: object.timestamp("resolved_at")?,
        })
    }
}

impl PlanRecord {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&PLAN_KEYS)?;
        Ok(Self {
            path: object.string("path")?.to_owned(),
            sha256: object.string("sha256")?.to_owned(),
            accepted_at: object.timestamp("accepted_at")?,
        })
    }
}

impl PhaseRef {
    pub(crate) fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&PHASE_KEYS)?;
        Ok(Self {
            id: object.string("id")?.to_owned(),
            title: object.string("title")?.to_owned(),
        })
    }

    /// Both fields non-empty; `key` is where this phase sits (`current_phase`).
    pub(crate) fn validate(&self, key: &str) -> Result<(), StrictError> {
        strict_json::require_nonempty(format_args!("{key}.id"), &self.id)?;
        strict_json::require_nonempty(format_args!("{key}.title"), &self.title)
    }
}

impl SnapshotRef {
    pub(crate) fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&SNAPSHOT_KEYS)?;
        Ok(Self {
            path: object.string("path")?.to_owned(),
            sha256: object.string("sha256")?.to_owned(),
        })
    }
}

impl OutcomeRef {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys_and_optional(&OUTCOME_REF_KEYS, &OPTIONAL_OUTCOME_REF_KEYS)?;
        // Absent in older entries; when present, a count (the runner never writes null).
        let count = |key: &str| -> Result<Option<u64>, StrictError> {
            if object.has(key) {
                object.integer(key).map(Some)
            } else {
                Ok(None)
            }
        };
        Ok(Self {
            attempt_id: object.string("attempt_id")?.to_owned(),
            phase_id: object.string("phase_id")?.to_owned(),
            status: object.enumerated("status", AttemptStatus::parse)?,
            path: object.string("path")?.to_owned(),
            duration_ms: count("duration_ms")?,
            output_bytes: count("output_bytes")?,
            watchdog_losses: count("watchdog_losses")?,
            usage: if object.has("usage") {
                Some(UsageSummary::from_json(
                    object.value("usage")?,
                    &object.qualified("usage"),
                )?)
            } else {
                None
            },
        })
    }
}

impl ActiveAttempt {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&ACTIVE_ATTEMPT_KEYS)?;
        Ok(Self {
            id: object.string("id")?.to_owned(),
            status: object.enumerated("status", ActiveStatus::parse)?,
            phase: PhaseRef::from_object(&object.object("phase")?)?,
            snapshot: SnapshotRef::from_object(&object.object("snapshot")?)?,
            execution_workspace: object.string("execution_workspace")?.to_owned(),
            started_at: object.timestamp("started_at")?,
            prompt_path: object.string("prompt_path")?.to_owned(),
            transcript_path: object.string("transcript_path")?.to_owned(),
            outcome_path: object.string("outcome_path")?.to_owned(),
            process: object
                .optional_object("process")?
                .map(|process| process_from_object(&process))
                .transpose()?,
        })
    }
}

fn process_from_object(object: &Object<'_>) -> Result<ProcessIdentity, StrictError> {
    object.expect_keys(&PROCESS_KEYS)?;
    Ok(ProcessIdentity {
        pid: object.positive_integer("pid")?,
        process_group_id: object.positive_integer("process_group_id")?,
        boot_id: object.string("boot_id")?.to_owned(),
        start_time_ticks: object.positive_integer("start_time_ticks")?,
    })
}

impl Stop {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&STOP_KEYS)?;
        Ok(Self {
            // A phase that completed is not stopped: `phase-complete` is no stop reason.
            reason: object.enumerated("reason", |text| {
                AttemptStatus::parse(text).filter(|status| *status != AttemptStatus::PhaseComplete)
            })?,
            phase_id: object.string("phase_id")?.to_owned(),
            message: object.optional_string("message")?.map(str::to_owned),
            clarification_request: object
                .optional_string("clarification_request")?
                .map(str::to_owned),
        })
    }
}

impl LastRun {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&LAST_RUN_KEYS)?;
        Ok(Self {
            run_id: object.string("run_id")?.to_owned(),
            phase_id: object.string("phase_id")?.to_owned(),
            status: object.enumerated("status", AttemptStatus::parse)?,
            started_at: object.timestamp("started_at")?,
            finished_at: object.timestamp("finished_at")?,
            exit_code: object.integer("exit_code")?,
            execution_workspace: object.string("execution_workspace")?.to_owned(),
            prompt_path: object.string("prompt_path")?.to_owned(),
            transcript_path: object.string("transcript_path")?.to_owned(),
            outcome_path: object.optional_string("outcome_path")?.map(str::to_owned),
            summary: object.string("summary")?.to_owned(),
        })
    }
}
