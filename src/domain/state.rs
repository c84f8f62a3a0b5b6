//! The `state.json` schema: one plan's durable progress, its strict reader and writer, and the
//! pure transitions of the attempt lifecycle (SPEC §6, §7; reference §6).
//!
//! The runner is the only writer. Every key is required and no other key is allowed; a
//! violation is reported naming the dotted key (`missing required key active_attempt`,
//! `unexpected key plan.version`). Semantic invariants (an active attempt and a stop never
//! coexist, artifact paths are the keyed directory's paths for the attempt id, …) are checked
//! on read and before every write.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::identity::ProcessIdentity;
use super::outcome::OutcomeRecord;
use super::strict_json::{self, Object, StrictError};
use super::timestamp::Timestamp;

/// Terminal status of an attempt, as written to outcomes, `committed_outcomes`, `last_run` and
/// (except `phase-complete`) `stop.reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
}

impl AttemptStatus {
    pub const ALL: [AttemptStatus; 13] = [
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
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    /// The handler exit code this status leads to (`last_run.exit_code`).
    pub fn handler_exit_code(self) -> i32 {
        match self {
            Self::PhaseComplete => 0,
            Self::Blocked => 2,
            Self::NeedsClarification => 3,
            _ => 4,
        }
    }
}

impl std::fmt::Display for AttemptStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status of the attempt recorded in `active_attempt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// Canonical absolute plan path.
    pub path: String,
    /// Lowercase hex SHA-256 of the accepted bytes.
    pub sha256: String,
    pub accepted_at: Timestamp,
}

/// `{id, title}` of a phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRef {
    pub id: String,
    pub title: String,
}

/// `{path, sha256}` of the plan snapshot an attempt ran against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    pub path: String,
    pub sha256: String,
}

/// One entry of `committed_outcomes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeRef {
    pub attempt_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub path: String,
}

/// `active_attempt`: a prepared or running attempt whose outcome is not committed yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    pub reason: AttemptStatus,
    pub phase_id: String,
    pub message: Option<String>,
    pub clarification_request: Option<String>,
}

/// `last_run`: the most recent resolved attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// The whole `state.json` document. Field order is the on-disk key order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub plan: Option<PlanRecord>,
    pub completed_phase_ids: Vec<String>,
    pub committed_outcomes: Vec<OutcomeRef>,
    pub current_phase: Option<PhaseRef>,
    pub active_attempt: Option<ActiveAttempt>,
    pub stop: Option<Stop>,
    pub last_run: Option<LastRun>,
}

/// Where one plan's artifacts live: `<plan workspace>/.ai-session-handler/plans/<key>/`.
/// Paths are absolute, `/`-separated UTF-8 strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLayout {
    /// The keyed directory (no trailing slash).
    pub dir: String,
}

impl StateLayout {
    pub fn state_path(&self) -> String {
        format!("{}/state.json", self.dir)
    }
    pub fn prompts_dir(&self) -> String {
        format!("{}/prompts", self.dir)
    }
    pub fn transcripts_dir(&self) -> String {
        format!("{}/transcripts", self.dir)
    }
    pub fn outcomes_dir(&self) -> String {
        format!("{}/outcomes", self.dir)
    }
    pub fn prompt_path(&self, attempt_id: &str) -> String {
        format!("{}/prompts/{attempt_id}.txt", self.dir)
    }
    pub fn transcript_path(&self, attempt_id: &str) -> String {
        format!("{}/transcripts/{attempt_id}.txt", self.dir)
    }
    pub fn outcome_path(&self, attempt_id: &str) -> String {
        format!("{}/outcomes/{attempt_id}.json", self.dir)
    }
}

/// A state document that breaks the schema or an invariant. The message names the key and
/// does not include the file path (the caller prefixes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateError(pub String);

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<StrictError> for StateError {
    fn from(error: StrictError) -> Self {
        Self(error.0)
    }
}

/// The summary recorded for an abandoned attempt resolved by `--retry-stopped`.
pub const ABANDONED_SUMMARY: &str =
    "previous handler ended without recording a terminal outcome; result is unknown";

// Key sets, in on-disk order (the serde derives above write the same order; a test checks).
const STATE_KEYS: [&str; 7] = [
    "plan",
    "completed_phase_ids",
    "committed_outcomes",
    "current_phase",
    "active_attempt",
    "stop",
    "last_run",
];
const PLAN_KEYS: [&str; 3] = ["path", "sha256", "accepted_at"];
const PHASE_KEYS: [&str; 2] = ["id", "title"];
const SNAPSHOT_KEYS: [&str; 2] = ["path", "sha256"];
const OUTCOME_REF_KEYS: [&str; 4] = ["attempt_id", "phase_id", "status", "path"];
const ACTIVE_ATTEMPT_KEYS: [&str; 10] = [
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
const PROCESS_KEYS: [&str; 4] = ["pid", "process_group_id", "boot_id", "start_time_ticks"];
const STOP_KEYS: [&str; 4] = ["reason", "phase_id", "message", "clarification_request"];
const LAST_RUN_KEYS: [&str; 11] = [
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
    /// Reads the state file's contents; `None` (no file yet) is the empty state.
    pub fn read(bytes: Option<&[u8]>, layout: &StateLayout) -> Result<State, StateError> {
        match bytes {
            Some(bytes) => State::from_json(bytes, layout),
            None => Ok(State::default()),
        }
    }

    /// Reads and strictly validates a `state.json` document.
    pub fn from_json(bytes: &[u8], layout: &StateLayout) -> Result<State, StateError> {
        let document = strict_json::parse_document(bytes)?;
        let state = State::from_object(&strict_json::root_object(&document)?)?;
        state.validate(layout)?;
        Ok(state)
    }

    /// Serializes with 2-space indentation and a trailing newline, keys in schema order.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("state serializes");
        text.push('\n');
        text
    }

    /// Checks the semantic invariants (reference §6.4, in its order); run before every write.
    /// Artifact paths must be exactly the ones `layout` derives from the attempt id: the
    /// runner only ever writes those, so anything else is a hand edit. (Timestamps are typed,
    /// so a malformed one is already reported while reading, before any of these checks.)
    pub fn validate(&self, layout: &StateLayout) -> Result<(), StateError> {
        self.validate_completed_phase_ids()?;
        if let Some(phase) = &self.current_phase {
            phase.validate("current_phase")?;
        }
        if let Some(plan) = &self.plan {
            strict_json::require_absolute_path("plan.path", &plan.path)?;
            strict_json::require_sha256_digest("plan.sha256", &plan.sha256)?;
        }
        if self.active_attempt.is_some() && self.stop.is_some() {
            return Err(StateError(
                "active_attempt and stop cannot both be set".into(),
            ));
        }
        if let Some(attempt) = &self.active_attempt {
            self.validate_active_attempt(attempt, layout)?;
        }
        if let Some(stop) = &self.stop {
            self.validate_stop(stop)?;
        }
        if self.current_phase.is_some() && self.active_attempt.is_none() && self.stop.is_none() {
            return Err(StateError(
                "current_phase requires active_attempt or stop".into(),
            ));
        }
        self.validate_committed_outcomes(layout)?;
        if let Some(last_run) = &self.last_run {
            self.validate_last_run(last_run, layout)?;
        }
        Ok(())
    }

    /// Records a prepared attempt: sets `active_attempt` (status prepared, no process),
    /// `current_phase` to its phase and clears `stop`. Refuses to replace an attempt that is
    /// still active: that one must be committed or resolved first.
    pub fn prepare(&mut self, attempt: ActiveAttempt) -> Result<(), StateError> {
        if let Some(active) = &self.active_attempt {
            return Err(StateError(format!(
                "cannot prepare attempt {}: attempt {} is still active",
                attempt.id, active.id
            )));
        }
        if attempt.status != ActiveStatus::Prepared || attempt.process.is_some() {
            return Err(StateError(format!(
                "cannot prepare attempt {}: a new attempt must be prepared with no process",
                attempt.id
            )));
        }
        self.current_phase = Some(attempt.phase.clone());
        self.stop = None;
        self.active_attempt = Some(attempt);
        Ok(())
    }

    /// Marks the prepared attempt `attempt_id` as running with the given identity (`None` when
    /// `/proc` could not be read).
    pub fn mark_running(
        &mut self,
        attempt_id: &str,
        identity: Option<ProcessIdentity>,
    ) -> Result<(), StateError> {
        let attempt =
            self.active_attempt_mut(attempt_id, &format!("mark attempt {attempt_id} running"))?;
        if attempt.status != ActiveStatus::Prepared {
            return Err(StateError(format!(
                "cannot mark attempt {attempt_id} running: it is already running"
            )));
        }
        attempt.status = ActiveStatus::Running;
        attempt.process = identity;
        Ok(())
    }

    /// Commits the terminal outcome of the active attempt whose record was written to
    /// `outcome_path` (SPEC §7 step 4): the attempt stops being active, its outcome is
    /// referenced and becomes `last_run`, and its phase is either completed or stopped.
    pub fn commit(
        &mut self,
        outcome: &OutcomeRecord,
        outcome_path: &str,
    ) -> Result<(), StateError> {
        let attempt = self.active_attempt_mut(
            &outcome.attempt_id,
            &format!("commit attempt {}", outcome.attempt_id),
        )?;
        if outcome.phase.id != attempt.phase.id {
            return Err(StateError(format!(
                "cannot commit attempt {}: the outcome is for phase {}, the attempt for phase {}",
                outcome.attempt_id, outcome.phase.id, attempt.phase.id
            )));
        }
        if outcome_path != attempt.outcome_path {
            return Err(StateError(format!(
                "cannot commit attempt {}: outcome path {outcome_path} is not the planned {}",
                outcome.attempt_id, attempt.outcome_path
            )));
        }
        let phase = attempt.phase.clone();
        self.active_attempt = None;

        if outcome.status == AttemptStatus::PhaseComplete {
            self.completed_phase_ids.push(phase.id.clone());
            self.current_phase = None;
            self.stop = None;
        } else {
            let clarifying = outcome.status == AttemptStatus::NeedsClarification;
            self.stop = Some(Stop {
                reason: outcome.status,
                phase_id: phase.id.clone(),
                message: (!clarifying).then(|| outcome.summary.clone()),
                clarification_request: clarifying.then(|| outcome.summary.clone()),
            });
            self.current_phase = Some(phase.clone());
        }
        self.committed_outcomes.push(OutcomeRef {
            attempt_id: outcome.attempt_id.clone(),
            phase_id: phase.id.clone(),
            status: outcome.status,
            path: outcome_path.to_owned(),
        });
        self.last_run = Some(LastRun {
            run_id: outcome.attempt_id.clone(),
            phase_id: phase.id,
            status: outcome.status,
            started_at: outcome.started_at,
            finished_at: outcome.finished_at,
            exit_code: outcome.status.handler_exit_code(),
            execution_workspace: outcome.execution_workspace.clone(),
            prompt_path: outcome.artifacts.prompt_path.clone(),
            transcript_path: outcome.artifacts.transcript_path.clone(),
            outcome_path: Some(outcome_path.to_owned()),
            summary: outcome.summary.clone(),
        });
        Ok(())
    }

    /// Resolves an abandoned active attempt as `interrupted` with unknown result: it becomes
    /// `last_run` (no outcome path, exit code 4) and is not added to `committed_outcomes`.
    ///
    /// `current_phase` is kept, so the state is only valid again once the caller prepares the
    /// retry of that phase; both changes go into the same atomic write.
    pub fn resolve_abandoned(&mut self, finished_at: Timestamp) -> Result<(), StateError> {
        let Some(attempt) = self.active_attempt.take() else {
            return Err(StateError(
                "cannot resolve an abandoned attempt: there is no active attempt".into(),
            ));
        };
        let status = AttemptStatus::Interrupted;
        self.last_run = Some(LastRun {
            run_id: attempt.id,
            phase_id: attempt.phase.id,
            status,
            started_at: attempt.started_at,
            finished_at,
            exit_code: status.handler_exit_code(),
            execution_workspace: attempt.execution_workspace,
            prompt_path: attempt.prompt_path,
            transcript_path: attempt.transcript_path,
            outcome_path: None,
            summary: ABANDONED_SUMMARY.to_owned(),
        });
        Ok(())
    }

    /// The active attempt, which must be `attempt_id`; `action` completes "cannot …" in the
    /// error (a transition applied to the wrong attempt is a caller bug, reported, not a panic).
    fn active_attempt_mut(
        &mut self,
        attempt_id: &str,
        action: &str,
    ) -> Result<&mut ActiveAttempt, StateError> {
        let Some(attempt) = self.active_attempt.as_mut() else {
            return Err(StateError(format!(
                "cannot {action}: there is no active attempt"
            )));
        };
        if attempt.id != attempt_id {
            return Err(StateError(format!(
                "cannot {action}: the active attempt is {}",
                attempt.id
            )));
        }
        Ok(attempt)
    }

    fn from_object(object: &Object<'_>) -> Result<State, StrictError> {
        object.expect_keys(&STATE_KEYS)?;
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
                .map(OutcomeRef::from_object)
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
        })
    }

    fn validate_completed_phase_ids(&self) -> Result<(), StateError> {
        let mut seen = HashSet::new();
        if !self.completed_phase_ids.iter().all(|id| seen.insert(id)) {
            return Err(StateError("completed_phase_ids contains duplicates".into()));
        }
        if self.completed_phase_ids.iter().any(String::is_empty) {
            return Err(StateError(
                "completed_phase_ids cannot contain an empty id".into(),
            ));
        }
        Ok(())
    }

    fn is_completed(&self, phase_id: &str) -> bool {
        self.completed_phase_ids.iter().any(|id| id == phase_id)
    }

    fn validate_active_attempt(
        &self,
        attempt: &ActiveAttempt,
        layout: &StateLayout,
    ) -> Result<(), StateError> {
        let Some(plan) = &self.plan else {
            return Err(StateError("active_attempt requires plan".into()));
        };
        strict_json::require_attempt_id("active_attempt.id", &attempt.id)?;
        attempt.phase.validate("active_attempt.phase")?;
        if self.current_phase.as_ref() != Some(&attempt.phase) {
            return Err(StateError(
                "current_phase must match active_attempt.phase".into(),
            ));
        }
        if self.is_completed(&attempt.phase.id) {
            return Err(StateError(
                "active_attempt phase is already completed".into(),
            ));
        }
        if attempt.snapshot.path != plan.path {
            return Err(StateError(
                "active_attempt.snapshot.path must match plan.path".into(),
            ));
        }
        // plan.sha256 is already known to be a digest, so equality also proves the format.
        if attempt.snapshot.sha256 != plan.sha256 {
            return Err(StateError(
                "active_attempt.snapshot.sha256 must match plan.sha256".into(),
            ));
        }
        strict_json::require_absolute_path(
            "active_attempt.execution_workspace",
            &attempt.execution_workspace,
        )?;
        require_artifact_path(
            "active_attempt.prompt_path",
            &attempt.prompt_path,
            &layout.prompt_path(&attempt.id),
        )?;
        require_artifact_path(
            "active_attempt.transcript_path",
            &attempt.transcript_path,
            &layout.transcript_path(&attempt.id),
        )?;
        require_artifact_path(
            "active_attempt.outcome_path",
            &attempt.outcome_path,
            &layout.outcome_path(&attempt.id),
        )?;
        match (&attempt.process, attempt.status) {
            (Some(_), ActiveStatus::Prepared) => Err(StateError(
                "prepared active_attempt.process must be null".into(),
            )),
            (Some(process), ActiveStatus::Running) => validate_process(process),
            (None, _) => Ok(()),
        }
    }

    fn validate_stop(&self, stop: &Stop) -> Result<(), StateError> {
        // Unreachable from a parsed file (the reader rejects it as `invalid reason`), but a
        // completed phase is never "stopped", so guard the in-memory value too.
        if stop.reason == AttemptStatus::PhaseComplete {
            return Err(StateError(
                "invalid reason 'phase-complete' (at stop.reason)".into(),
            ));
        }
        strict_json::require_nonempty("stop.phase_id", &stop.phase_id)?;
        if self.current_phase.as_ref().map(|phase| &phase.id) != Some(&stop.phase_id) {
            return Err(StateError("current_phase must match stop.phase_id".into()));
        }
        if self.is_completed(&stop.phase_id) {
            return Err(StateError("stopped phase is already completed".into()));
        }
        let has_clarification = stop
            .clarification_request
            .as_ref()
            .is_some_and(|text| !text.is_empty());
        if stop.reason == AttemptStatus::NeedsClarification {
            if !has_clarification {
                return Err(StateError(
                    "needs-clarification stop requires clarification_request".into(),
                ));
            }
        } else if stop.clarification_request.is_some() {
            return Err(StateError(
                "stop.clarification_request requires needs-clarification reason".into(),
            ));
        }
        Ok(())
    }

    fn validate_committed_outcomes(&self, layout: &StateLayout) -> Result<(), StateError> {
        let mut seen = HashSet::new();
        if !self
            .committed_outcomes
            .iter()
            .all(|entry| seen.insert(&entry.attempt_id))
        {
            return Err(StateError(
                "committed_outcomes contains duplicate attempt ids".into(),
            ));
        }
        for (index, entry) in self.committed_outcomes.iter().enumerate() {
            let key = |field: &str| format!("committed_outcomes[{index}].{field}");
            strict_json::require_attempt_id(&key("attempt_id"), &entry.attempt_id)?;
            strict_json::require_nonempty(&key("phase_id"), &entry.phase_id)?;
            require_artifact_path(
                &key("path"),
                &entry.path,
                &layout.outcome_path(&entry.attempt_id),
            )?;
        }
        Ok(())
    }

    fn validate_last_run(
        &self,
        last_run: &LastRun,
        layout: &StateLayout,
    ) -> Result<(), StateError> {
        strict_json::require_attempt_id("last_run.run_id", &last_run.run_id)?;
        strict_json::require_nonempty("last_run.phase_id", &last_run.phase_id)?;
        strict_json::require_absolute_path(
            "last_run.execution_workspace",
            &last_run.execution_workspace,
        )?;
        require_artifact_path(
            "last_run.prompt_path",
            &last_run.prompt_path,
            &layout.prompt_path(&last_run.run_id),
        )?;
        require_artifact_path(
            "last_run.transcript_path",
            &last_run.transcript_path,
            &layout.transcript_path(&last_run.run_id),
        )?;
        match &last_run.outcome_path {
            Some(path) => require_artifact_path(
                "last_run.outcome_path",
                path,
                &layout.outcome_path(&last_run.run_id),
            )?,
            None if last_run.status == AttemptStatus::Interrupted => {}
            None => {
                return Err(StateError(
                    "only an interrupted recovery may omit last_run.outcome_path".into(),
                ));
            }
        }
        if last_run.exit_code != last_run.status.handler_exit_code() {
            return Err(StateError(format!(
                "last_run.exit_code does not match status '{}'",
                last_run.status
            )));
        }
        if last_run.status == AttemptStatus::PhaseComplete && !self.is_completed(&last_run.phase_id)
        {
            return Err(StateError(
                "completed last_run.phase_id is not in completed_phase_ids".into(),
            ));
        }
        if let Some(outcome_path) = &last_run.outcome_path {
            let matches_latest = self.committed_outcomes.last().is_some_and(|entry| {
                entry.attempt_id == last_run.run_id
                    && entry.phase_id == last_run.phase_id
                    && entry.status == last_run.status
                    && &entry.path == outcome_path
            });
            if !matches_latest {
                return Err(StateError(
                    "last_run outcome must be the latest committed_outcomes entry".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Artifact paths are derived from the attempt id, never chosen freely, so they must be
/// exactly the derived path.
fn require_artifact_path(key: &str, actual: &str, expected: &str) -> Result<(), StateError> {
    if actual != expected {
        return Err(StateError(format!("expected {key} to be {expected}")));
    }
    Ok(())
}

fn validate_process(process: &ProcessIdentity) -> Result<(), StateError> {
    let positive = [
        ("pid", u64::from(process.pid)),
        ("process_group_id", u64::from(process.process_group_id)),
        ("start_time_ticks", process.start_time_ticks),
    ];
    if let Some((key, _)) = positive.iter().find(|(_, value)| *value == 0) {
        return Err(StateError(format!(
            "expected active_attempt.process.{key} to be a positive integer"
        )));
    }
    strict_json::require_nonempty("active_attempt.process.boot_id", &process.boot_id)?;
    Ok(())
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
    pub(super) fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&PHASE_KEYS)?;
        Ok(Self {
            id: object.string("id")?.to_owned(),
            title: object.string("title")?.to_owned(),
        })
    }

    /// Both fields non-empty; `key` is where this phase sits (`current_phase`).
    pub(super) fn validate(&self, key: &str) -> Result<(), StrictError> {
        strict_json::require_nonempty(&format!("{key}.id"), &self.id)?;
        strict_json::require_nonempty(&format!("{key}.title"), &self.title)
    }
}

impl SnapshotRef {
    pub(super) fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&SNAPSHOT_KEYS)?;
        Ok(Self {
            path: object.string("path")?.to_owned(),
            sha256: object.string("sha256")?.to_owned(),
        })
    }
}

impl OutcomeRef {
    fn from_object(object: &Object<'_>) -> Result<Self, StrictError> {
        object.expect_keys(&OUTCOME_REF_KEYS)?;
        Ok(Self {
            attempt_id: object.string("attempt_id")?.to_owned(),
            phase_id: object.string("phase_id")?.to_owned(),
            status: object.enumerated("status", AttemptStatus::parse)?,
            path: object.string("path")?.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::outcome::Artifacts;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    const DIR: &str = "/ws/.ai-session-handler/plans/key";
    const PLAN_PATH: &str = "/ws/docs/plan.md";
    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER_SHA: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    const ID1: &str = "20260705T120102Z-phase-1-a1";
    const ID2: &str = "20260705T120500Z-phase-2-b2";
    const ID3: &str = "20260705T121000Z-phase-2-c3";

    /// One edit of a valid state, for tables of invariant violations.
    type Edit = Box<dyn FnOnce(&mut State)>;

    fn layout() -> StateLayout {
        StateLayout { dir: DIR.into() }
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn phase(n: u32) -> PhaseRef {
        let titles = ["First", "Second", "Third"];
        PhaseRef {
            id: format!("phase-{n}"),
            title: titles[(n - 1) as usize].into(),
        }
    }

    fn fresh_state() -> State {
        State {
            plan: Some(PlanRecord {
                path: PLAN_PATH.into(),
                sha256: SHA.into(),
                accepted_at: at("2026-07-05T12:00:00Z"),
            }),
            ..State::default()
        }
    }

    fn prepared(id: &str, phase: PhaseRef, started_at: &str) -> ActiveAttempt {
        let layout = layout();
        ActiveAttempt {
            id: id.into(),
            status: ActiveStatus::Prepared,
            phase,
            snapshot: SnapshotRef {
                path: PLAN_PATH.into(),
                sha256: SHA.into(),
            },
            execution_workspace: "/ws/app".into(),
            started_at: at(started_at),
            prompt_path: layout.prompt_path(id),
            transcript_path: layout.transcript_path(id),
            outcome_path: layout.outcome_path(id),
            process: None,
        }
    }

    fn identity() -> ProcessIdentity {
        ProcessIdentity {
            pid: 4242,
            process_group_id: 4242,
            boot_id: "boot-a".into(),
            start_time_ticks: 987654,
        }
    }

    fn outcome(
        attempt: &ActiveAttempt,
        status: AttemptStatus,
        summary: &str,
        finished_at: &str,
    ) -> OutcomeRecord {
        OutcomeRecord {
            attempt_id: attempt.id.clone(),
            plan: attempt.snapshot.clone(),
            phase: attempt.phase.clone(),
            status,
            summary: summary.into(),
            started_at: attempt.started_at,
            finished_at: at(finished_at),
            execution_workspace: attempt.execution_workspace.clone(),
            artifacts: Artifacts {
                prompt_path: attempt.prompt_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
            },
            exit_code: Some(0),
            signal: None,
        }
    }

    /// Runs `attempt` to `status` through every transition, validating at each write point.
    fn run_attempt(
        state: &mut State,
        attempt: ActiveAttempt,
        status: AttemptStatus,
        summary: &str,
    ) {
        let two_minutes_later = attempt.started_at.as_datetime() + chrono::Duration::minutes(2);
        let finished_at = Timestamp::from_datetime(two_minutes_later).to_string();
        let record = outcome(&attempt, status, summary, &finished_at);
        let id = attempt.id.clone();
        let path = attempt.outcome_path.clone();
        state.prepare(attempt).unwrap();
        state.validate(&layout()).unwrap();
        state.mark_running(&id, Some(identity())).unwrap();
        state.validate(&layout()).unwrap();
        state.commit(&record, &path).unwrap();
        state.validate(&layout()).unwrap();
    }

    /// Phase 1 completed, phase 2 stopped waiting for clarification (reference §15.3 item 2).
    fn clarification_state() -> State {
        let mut state = fresh_state();
        let first = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        run_attempt(&mut state, first, AttemptStatus::PhaseComplete, "done one");
        let second = prepared(ID2, phase(2), "2026-07-05T12:05:00Z");
        run_attempt(
            &mut state,
            second,
            AttemptStatus::NeedsClarification,
            "Which database?",
        );
        state
    }

    /// Phase 1 completed, phase 2 running with a recorded identity.
    fn running_state() -> State {
        let mut state = fresh_state();
        let first = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        run_attempt(&mut state, first, AttemptStatus::PhaseComplete, "done one");
        state
            .prepare(prepared(ID2, phase(2), "2026-07-05T12:05:00Z"))
            .unwrap();
        state.mark_running(ID2, Some(identity())).unwrap();
        state
    }

    fn read(text: &str) -> Result<State, StateError> {
        State::from_json(text.as_bytes(), &layout())
    }

    /// The message for `state` serialized, edited as JSON by `edit`, and read back.
    fn read_error(state: &State, edit: impl FnOnce(&mut Value)) -> String {
        let mut value = serde_json::to_value(state).unwrap();
        edit(&mut value);
        read(&value.to_string()).unwrap_err().0
    }

    fn at_pointer<'a>(value: &'a mut Value, pointer: &str) -> &'a mut Value {
        value.pointer_mut(pointer).unwrap()
    }

    fn set(pointer: &'static str, new: Value) -> impl FnOnce(&mut Value) {
        move |value| *at_pointer(value, pointer) = new
    }

    fn insert(pointer: &'static str, key: &'static str) -> impl FnOnce(&mut Value) {
        move |value| {
            at_pointer(value, pointer)
                .as_object_mut()
                .unwrap()
                .insert(key.into(), json!(1));
        }
    }

    fn remove(pointer: &'static str, key: &'static str) -> impl FnOnce(&mut Value) {
        move |value| {
            at_pointer(value, pointer)
                .as_object_mut()
                .unwrap()
                .shift_remove(key)
                .unwrap();
        }
    }

    /// The message `validate` gives for `state` after `edit`; reading the serialized edit
    /// must give the same message.
    fn invalid(mut state: State, edit: impl FnOnce(&mut State)) -> String {
        edit(&mut state);
        let message = state.validate(&layout()).unwrap_err().0;
        assert_eq!(read(&state.to_json()).unwrap_err().0, message);
        message
    }

    // ---- reading, writing, round trips (reference §15.3) ----

    #[test]
    fn missing_file_is_the_empty_state() {
        let state = State::read(None, &layout()).unwrap();
        assert_eq!(state, State::default());
        assert_eq!(
            state.to_json(),
            "{\n  \"plan\": null,\n  \"completed_phase_ids\": [],\n  \"committed_outcomes\": [],\n  \
             \"current_phase\": null,\n  \"active_attempt\": null,\n  \"stop\": null,\n  \
             \"last_run\": null\n}\n"
        );
        assert_eq!(
            State::read(Some(state.to_json().as_bytes()), &layout()).unwrap(),
            state
        );
        assert_eq!(
            State::read(Some(b"[]"), &layout()).unwrap_err().0,
            "expected $ to be an object"
        );
    }

    #[test]
    fn stopped_state_writes_schema_order_and_round_trips() {
        let state = clarification_state();
        let expected = format!(
            r#"{{
  "plan": {{
    "path": "{PLAN_PATH}",
    "sha256": "{SHA}",
    "accepted_at": "2026-07-05T12:00:00Z"
  }},
  "completed_phase_ids": [
    "phase-1"
  ],
  "committed_outcomes": [
    {{
      "attempt_id": "{ID1}",
      "phase_id": "phase-1",
      "status": "phase-complete",
      "path": "{DIR}/outcomes/{ID1}.json"
    }},
    {{
      "attempt_id": "{ID2}",
      "phase_id": "phase-2",
      "status": "needs-clarification",
      "path": "{DIR}/outcomes/{ID2}.json"
    }}
  ],
  "current_phase": {{
    "id": "phase-2",
    "title": "Second"
  }},
  "active_attempt": null,
  "stop": {{
    "reason": "needs-clarification",
    "phase_id": "phase-2",
    "message": null,
    "clarification_request": "Which database?"
  }},
  "last_run": {{
    "run_id": "{ID2}",
    "phase_id": "phase-2",
    "status": "needs-clarification",
    "started_at": "2026-07-05T12:05:00Z",
    "finished_at": "2026-07-05T12:07:00Z",
    "exit_code": 3,
    "execution_workspace": "/ws/app",
    "prompt_path": "{DIR}/prompts/{ID2}.txt",
    "transcript_path": "{DIR}/transcripts/{ID2}.txt",
    "outcome_path": "{DIR}/outcomes/{ID2}.json",
    "summary": "Which database?"
  }}
}}
"#
        );
        assert_eq!(state.to_json(), expected);
        assert!(!expected.contains("schema_version"));
        assert_eq!(read(&expected).unwrap(), state);
    }

    #[test]
    fn running_attempt_writes_schema_order_and_round_trips() {
        let state = running_state();
        let text = state.to_json();
        let expected_attempt = format!(
            r#"  "active_attempt": {{
    "id": "{ID2}",
    "status": "running",
    "phase": {{
      "id": "phase-2",
      "title": "Second"
    }},
    "snapshot": {{
      "path": "{PLAN_PATH}",
      "sha256": "{SHA}"
    }},
    "execution_workspace": "/ws/app",
    "started_at": "2026-07-05T12:05:00Z",
    "prompt_path": "{DIR}/prompts/{ID2}.txt",
    "transcript_path": "{DIR}/transcripts/{ID2}.txt",
    "outcome_path": "{DIR}/outcomes/{ID2}.json",
    "process": {{
      "pid": 4242,
      "process_group_id": 4242,
      "boot_id": "boot-a",
      "start_time_ticks": 987654
    }}
  }},
  "stop": null,
"#
        );
        assert!(text.contains(&expected_attempt), "{text}");
        assert_eq!(read(&text).unwrap(), state);
    }

    #[test]
    fn key_constants_match_the_serialized_order() {
        fn keys(value: &Value) -> Vec<&str> {
            value
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect()
        }
        let running = serde_json::to_value(running_state()).unwrap();
        let stopped = serde_json::to_value(clarification_state()).unwrap();
        assert_eq!(keys(&running), STATE_KEYS);
        assert_eq!(keys(&running["plan"]), PLAN_KEYS);
        assert_eq!(keys(&running["current_phase"]), PHASE_KEYS);
        assert_eq!(keys(&running["active_attempt"]), ACTIVE_ATTEMPT_KEYS);
        assert_eq!(keys(&running["active_attempt"]["snapshot"]), SNAPSHOT_KEYS);
        assert_eq!(keys(&running["active_attempt"]["process"]), PROCESS_KEYS);
        assert_eq!(keys(&running["committed_outcomes"][0]), OUTCOME_REF_KEYS);
        assert_eq!(keys(&stopped["stop"]), STOP_KEYS);
        assert_eq!(keys(&stopped["last_run"]), LAST_RUN_KEYS);
    }

    // ---- structural errors (reference §6.3) ----

    #[test]
    fn invalid_json_names_line_and_column() {
        assert_eq!(
            read("{\n  \"plan\": x\n}").unwrap_err().0,
            "invalid JSON at line 2, column 11: expected value"
        );
        assert_eq!(
            read("{").unwrap_err().0,
            "invalid JSON at line 1, column 2: EOF while parsing an object"
        );
        assert_eq!(
            State::from_json(b"\xff", &layout()).unwrap_err().0,
            "invalid JSON at line 1, column 1: expected value"
        );
    }

    #[test]
    fn top_level_must_be_an_object() {
        assert_eq!(read("[]").unwrap_err().0, "expected $ to be an object");
        assert_eq!(read("null").unwrap_err().0, "expected $ to be an object");
    }

    #[test]
    fn unexpected_and_missing_keys_are_named() {
        let state = clarification_state();
        let running = running_state();
        // Reference §15.3 items 5–7 and §15.8 item 4.
        assert_eq!(
            read_error(&state, insert("", "obsolete")),
            "unexpected key obsolete"
        );
        assert_eq!(
            read_error(&state, insert("", "schema_version")),
            "unexpected key schema_version"
        );
        assert_eq!(
            read_error(&state, remove("", "active_attempt")),
            "missing required key active_attempt"
        );
        assert_eq!(
            read_error(&state, insert("/plan", "obsolete")),
            "unexpected key plan.obsolete"
        );
        assert_eq!(
            read_error(&state, insert("/plan", "version")),
            "unexpected key plan.version"
        );
        assert_eq!(
            read_error(&running, insert("/active_attempt/snapshot", "extra")),
            "unexpected key active_attempt.snapshot.extra"
        );
        assert_eq!(
            read_error(&running, insert("/active_attempt/process", "extra")),
            "unexpected key active_attempt.process.extra"
        );
        assert_eq!(
            read_error(&state, insert("/committed_outcomes/0", "extra")),
            "unexpected key committed_outcomes[0].extra"
        );
        assert_eq!(
            read_error(&state, insert("/stop", "note")),
            "unexpected key stop.note"
        );
        assert_eq!(
            read_error(&state, insert("/last_run", "note")),
            "unexpected key last_run.note"
        );
        assert_eq!(
            read_error(&state, insert("/current_phase", "body")),
            "unexpected key current_phase.body"
        );
        // Several unexpected keys: the alphabetically first, and before any missing key.
        assert_eq!(
            read_error(&state, |value| {
                insert("", "zz")(value);
                insert("", "aa")(value);
                remove("", "plan")(value);
            }),
            "unexpected key aa"
        );
        // Missing nested keys are reported bare.
        assert_eq!(
            read_error(&state, remove("/plan", "sha256")),
            "missing required key sha256 (at plan.sha256)"
        );
        assert_eq!(
            read_error(&running, remove("/active_attempt/process", "boot_id")),
            "missing required key boot_id (at active_attempt.process.boot_id)"
        );
        assert_eq!(
            read_error(&state, remove("/last_run", "outcome_path")),
            "missing required key outcome_path (at last_run.outcome_path)"
        );
        assert_eq!(
            read_error(&state, remove("/stop", "clarification_request")),
            "missing required key clarification_request (at stop.clarification_request)"
        );
        assert_eq!(
            read_error(&state, |value| {
                remove("", "completed_phase_ids")(value);
                remove("", "last_run")(value);
            }),
            "missing required key completed_phase_ids"
        );
    }

    #[test]
    fn wrong_types_are_named() {
        let state = clarification_state();
        let running = running_state();
        let cases: Vec<(&State, &'static str, Value, &str)> = vec![
            (&state, "/plan", json!("x"), "expected plan to be an object"),
            (
                &state,
                "/current_phase",
                json!([]),
                "expected current_phase to be an object",
            ),
            (&state, "/stop", json!(1), "expected stop to be an object"),
            (
                &state,
                "/last_run",
                json!(true),
                "expected last_run to be an object",
            ),
            (
                &running,
                "/active_attempt",
                json!("x"),
                "expected active_attempt to be an object",
            ),
            (
                &running,
                "/active_attempt/phase",
                json!(null),
                "expected active_attempt.phase to be an object",
            ),
            (
                &running,
                "/active_attempt/snapshot",
                json!(1),
                "expected active_attempt.snapshot to be an object",
            ),
            (
                &running,
                "/active_attempt/process",
                json!([]),
                "expected active_attempt.process to be an object",
            ),
            (
                &state,
                "/committed_outcomes/1",
                json!("x"),
                "expected committed_outcomes[1] to be an object",
            ),
            (
                &state,
                "/completed_phase_ids",
                json!("phase-1"),
                "expected completed_phase_ids to be a list",
            ),
            (
                &state,
                "/completed_phase_ids/0",
                json!(1),
                "expected completed_phase_ids[0] to be a string",
            ),
            (
                &state,
                "/committed_outcomes",
                json!({}),
                "expected committed_outcomes to be a list",
            ),
            (
                &state,
                "/plan/path",
                json!(null),
                "expected path to be a string (at plan.path)",
            ),
            (
                &state,
                "/plan/sha256",
                json!(1),
                "expected sha256 to be a string (at plan.sha256)",
            ),
            (
                &state,
                "/current_phase/title",
                json!(null),
                "expected title to be a string (at current_phase.title)",
            ),
            (
                &state,
                "/stop/message",
                json!(1),
                "expected message to be a string or null (at stop.message)",
            ),
            (
                &state,
                "/stop/clarification_request",
                json!([]),
                "expected clarification_request to be a string or null (at stop.clarification_request)",
            ),
            (
                &state,
                "/last_run/exit_code",
                json!(true),
                "expected exit_code to be an integer (at last_run.exit_code)",
            ),
            (
                &state,
                "/last_run/exit_code",
                json!(3.0),
                "expected exit_code to be an integer (at last_run.exit_code)",
            ),
            (
                &state,
                "/last_run/exit_code",
                json!("3"),
                "expected exit_code to be an integer (at last_run.exit_code)",
            ),
            (
                &state,
                "/last_run/exit_code",
                json!(1_i64 << 40),
                "expected exit_code to be an integer that fits in 32 bits (at last_run.exit_code)",
            ),
            (
                &state,
                "/last_run/outcome_path",
                json!(1),
                "expected outcome_path to be a string or null (at last_run.outcome_path)",
            ),
            (
                &state,
                "/last_run/summary",
                json!(null),
                "expected summary to be a string (at last_run.summary)",
            ),
            (
                &running,
                "/active_attempt/process/pid",
                json!(0),
                "expected pid to be a positive integer (at active_attempt.process.pid)",
            ),
            (
                &running,
                "/active_attempt/process/pid",
                json!(-1),
                "expected pid to be a positive integer (at active_attempt.process.pid)",
            ),
            (
                &running,
                "/active_attempt/process/pid",
                json!(true),
                "expected pid to be a positive integer (at active_attempt.process.pid)",
            ),
            (
                &running,
                "/active_attempt/process/pid",
                json!(1_u64 << 33),
                "expected pid to be a positive integer that fits in 32 bits (at active_attempt.process.pid)",
            ),
            (
                &running,
                "/active_attempt/process/process_group_id",
                json!(1.5),
                "expected process_group_id to be a positive integer (at active_attempt.process.process_group_id)",
            ),
            (
                &running,
                "/active_attempt/process/start_time_ticks",
                json!("9"),
                "expected start_time_ticks to be a positive integer (at active_attempt.process.start_time_ticks)",
            ),
            (
                &running,
                "/active_attempt/process/boot_id",
                json!(null),
                "expected boot_id to be a string (at active_attempt.process.boot_id)",
            ),
            (
                &running,
                "/active_attempt/outcome_path",
                json!(null),
                "expected outcome_path to be a string (at active_attempt.outcome_path)",
            ),
        ];
        for (state, pointer, new, message) in cases {
            assert_eq!(read_error(state, set(pointer, new)), message, "{pointer}");
        }
    }

    #[test]
    fn invalid_enumeration_values_are_named() {
        let state = clarification_state();
        let running = running_state();
        assert_eq!(
            read_error(&state, set("/committed_outcomes/0/status", json!("x"))),
            "invalid status 'x' (at committed_outcomes[0].status)"
        );
        assert_eq!(
            read_error(&state, set("/last_run/status", json!("done"))),
            "invalid status 'done' (at last_run.status)"
        );
        assert_eq!(
            read_error(&state, set("/stop/reason", json!("x"))),
            "invalid reason 'x' (at stop.reason)"
        );
        assert_eq!(
            read_error(&state, set("/stop/reason", json!("phase-complete"))),
            "invalid reason 'phase-complete' (at stop.reason)"
        );
        assert_eq!(
            read_error(&running, set("/active_attempt/status", json!("finished"))),
            "invalid status 'finished' (at active_attempt.status)"
        );
        assert_eq!(
            read_error(&state, set("/last_run/status", json!("io-error"))),
            "invalid status 'io-error' (at last_run.status)"
        );
        assert_eq!(
            read_error(&state, set("/stop/reason", json!(2))),
            "expected reason to be a string (at stop.reason)"
        );
    }

    #[test]
    fn timestamps_must_carry_an_offset() {
        let state = clarification_state();
        let running = running_state();
        assert_eq!(
            read_error(
                &state,
                set("/plan/accepted_at", json!("2026-07-05T12:00:00"))
            ),
            "expected plan.accepted_at to include a UTC offset"
        );
        assert_eq!(
            read_error(&state, set("/plan/accepted_at", json!("noon"))),
            "expected plan.accepted_at to be an ISO 8601 timestamp"
        );
        assert_eq!(
            read_error(&running, set("/active_attempt/started_at", json!(""))),
            "expected active_attempt.started_at to be an ISO 8601 timestamp"
        );
        assert_eq!(
            read_error(
                &state,
                set("/last_run/finished_at", json!("2026-13-01T00:00:00Z"))
            ),
            "expected last_run.finished_at to be an ISO 8601 timestamp"
        );
        assert_eq!(
            read_error(&state, set("/last_run/started_at", json!(5))),
            "expected started_at to be a string (at last_run.started_at)"
        );
        // Any offset is accepted on read and normalized to UTC on write.
        let mut value = serde_json::to_value(&state).unwrap();
        *at_pointer(&mut value, "/plan/accepted_at") = json!("2026-07-05T14:00:00+02:00");
        assert_eq!(read(&value.to_string()).unwrap(), state);
    }

    // ---- semantic errors, in reference §6.4 order ----

    #[test]
    fn completed_phase_ids_are_unique_and_nonempty() {
        let state = clarification_state();
        assert_eq!(
            invalid(state.clone(), |s| s
                .completed_phase_ids
                .push("phase-1".into())),
            "completed_phase_ids contains duplicates"
        );
        assert_eq!(
            invalid(state, |s| s.completed_phase_ids.push(String::new())),
            "completed_phase_ids cannot contain an empty id"
        );
    }

    #[test]
    fn current_phase_fields_are_nonempty() {
        let state = clarification_state();
        assert_eq!(
            invalid(state.clone(), |s| s
                .current_phase
                .as_mut()
                .unwrap()
                .id
                .clear()),
            "expected current_phase.id to be nonempty"
        );
        assert_eq!(
            invalid(state, |s| s.current_phase.as_mut().unwrap().title.clear()),
            "expected current_phase.title to be nonempty"
        );
    }

    #[test]
    fn plan_record_is_checked() {
        let state = clarification_state();
        fn plan(s: &mut State) -> &mut PlanRecord {
            s.plan.as_mut().unwrap()
        }
        assert_eq!(
            invalid(state.clone(), |s| plan(s).path = "docs/plan.md".into()),
            "expected plan.path to be an absolute path"
        );
        assert_eq!(
            invalid(state.clone(), |s| plan(s).sha256 = SHA.to_uppercase()),
            "expected plan.sha256 to be a lowercase SHA-256 digest"
        );
        assert_eq!(
            invalid(state, |s| plan(s).sha256 = "abc".into()),
            "expected plan.sha256 to be a lowercase SHA-256 digest"
        );
    }

    #[test]
    fn active_attempt_and_stop_are_exclusive() {
        let stop = clarification_state().stop;
        assert_eq!(
            invalid(running_state(), |s| s.stop = stop),
            "active_attempt and stop cannot both be set"
        );
    }

    #[test]
    fn active_attempt_invariants() {
        let running = running_state();
        fn attempt(s: &mut State) -> &mut ActiveAttempt {
            s.active_attempt.as_mut().unwrap()
        }
        let cases: Vec<(Edit, String)> = vec![
            (Box::new(|s| s.plan = None), "active_attempt requires plan".into()),
            (Box::new(move |s| attempt(s).id.clear()), "expected active_attempt.id to be nonempty".into()),
            (
                Box::new(move |s| attempt(s).id = "../escape".into()),
                "expected active_attempt.id to be a safe file name (ASCII letters, digits, '-', '_' \
                 and '.', not starting with '.')"
                    .into(),
            ),
            (Box::new(move |s| attempt(s).phase.id.clear()), "expected active_attempt.phase.id to be nonempty".into()),
            (Box::new(move |s| attempt(s).phase.title.clear()), "expected active_attempt.phase.title to be nonempty".into()),
            (Box::new(|s| s.current_phase = None), "current_phase must match active_attempt.phase".into()),
            (Box::new(|s| s.current_phase = Some(phase(1))), "current_phase must match active_attempt.phase".into()),
            (
                Box::new(|s| s.current_phase.as_mut().unwrap().title = "Renamed".into()),
                "current_phase must match active_attempt.phase".into(),
            ),
            (Box::new(|s| s.completed_phase_ids.push("phase-2".into())), "active_attempt phase is already completed".into()),
            (Box::new(move |s| attempt(s).snapshot.path = "/ws/other.md".into()), "active_attempt.snapshot.path must match plan.path".into()),
            (Box::new(move |s| attempt(s).snapshot.sha256 = OTHER_SHA.into()), "active_attempt.snapshot.sha256 must match plan.sha256".into()),
            (
                Box::new(move |s| attempt(s).execution_workspace = "app".into()),
                "expected active_attempt.execution_workspace to be an absolute path".into(),
            ),
            (
                Box::new(move |s| attempt(s).prompt_path = format!("{DIR}/prompts/other.txt")),
                format!("expected active_attempt.prompt_path to be {DIR}/prompts/{ID2}.txt"),
            ),
            (
                Box::new(move |s| attempt(s).transcript_path = format!("/elsewhere/transcripts/{ID2}.txt")),
                format!("expected active_attempt.transcript_path to be {DIR}/transcripts/{ID2}.txt"),
            ),
            (
                Box::new(move |s| attempt(s).outcome_path = format!("{DIR}/outcomes/{ID2}.txt")),
                format!("expected active_attempt.outcome_path to be {DIR}/outcomes/{ID2}.json"),
            ),
            (Box::new(move |s| attempt(s).status = ActiveStatus::Prepared), "prepared active_attempt.process must be null".into()),
            (
                Box::new(move |s| attempt(s).process.as_mut().unwrap().pid = 0),
                "expected active_attempt.process.pid to be a positive integer".into(),
            ),
            (
                Box::new(move |s| attempt(s).process.as_mut().unwrap().process_group_id = 0),
                "expected active_attempt.process.process_group_id to be a positive integer".into(),
            ),
            (
                Box::new(move |s| attempt(s).process.as_mut().unwrap().start_time_ticks = 0),
                "expected active_attempt.process.start_time_ticks to be a positive integer".into(),
            ),
            (
                Box::new(move |s| attempt(s).process.as_mut().unwrap().boot_id.clear()),
                "expected active_attempt.process.boot_id to be nonempty".into(),
            ),
        ];
        for (edit, message) in cases {
            let mut state = running.clone();
            edit(&mut state);
            assert_eq!(state.validate(&layout()).unwrap_err().0, message);
            // Reading rejects a zero identity field structurally, naming the bare key and
            // then where it is.
            let on_read = if message.contains("positive integer") {
                let path = message
                    .trim_start_matches("expected ")
                    .trim_end_matches(" to be a positive integer")
                    .to_owned();
                format!(
                    "{} (at {path})",
                    message.replace("active_attempt.process.", "")
                )
            } else {
                message
            };
            assert_eq!(read(&state.to_json()).unwrap_err().0, on_read);
        }
        // A running attempt whose identity could not be read is valid.
        let mut state = running.clone();
        attempt(&mut state).process = None;
        state.validate(&layout()).unwrap();
    }

    #[test]
    fn stop_invariants() {
        let state = clarification_state();
        fn stop(s: &mut State) -> &mut Stop {
            s.stop.as_mut().unwrap()
        }
        assert_eq!(
            invalid(state.clone(), move |s| stop(s).phase_id.clear()),
            "expected stop.phase_id to be nonempty"
        );
        assert_eq!(
            invalid(state.clone(), |s| s.current_phase = None),
            "current_phase must match stop.phase_id"
        );
        assert_eq!(
            invalid(state.clone(), |s| s.current_phase = Some(phase(3))),
            "current_phase must match stop.phase_id"
        );
        assert_eq!(
            invalid(state.clone(), |s| s
                .completed_phase_ids
                .push("phase-2".into())),
            "stopped phase is already completed"
        );
        assert_eq!(
            invalid(state.clone(), move |s| stop(s).clarification_request = None),
            "needs-clarification stop requires clarification_request"
        );
        assert_eq!(
            invalid(state.clone(), move |s| stop(s).clarification_request =
                Some(String::new())),
            "needs-clarification stop requires clarification_request"
        );
        assert_eq!(
            invalid(state.clone(), move |s| stop(s).reason =
                AttemptStatus::Blocked),
            "stop.clarification_request requires needs-clarification reason"
        );
        let mut completed = state;
        stop(&mut completed).reason = AttemptStatus::PhaseComplete;
        assert_eq!(
            completed.validate(&layout()).unwrap_err().0,
            "invalid reason 'phase-complete' (at stop.reason)"
        );
    }

    #[test]
    fn current_phase_needs_a_reason() {
        assert_eq!(
            invalid(clarification_state(), |s| s.stop = None),
            "current_phase requires active_attempt or stop"
        );
    }

    #[test]
    fn committed_outcomes_invariants() {
        let state = clarification_state();
        fn entry(s: &mut State) -> &mut OutcomeRef {
            &mut s.committed_outcomes[0]
        }
        assert_eq!(
            invalid(state.clone(), |s| {
                let first = s.committed_outcomes[0].clone();
                s.committed_outcomes.insert(1, first);
            }),
            "committed_outcomes contains duplicate attempt ids"
        );
        assert_eq!(
            invalid(state.clone(), move |s| entry(s).attempt_id.clear()),
            "expected committed_outcomes[0].attempt_id to be nonempty"
        );
        assert!(
            invalid(state.clone(), move |s| entry(s).attempt_id =
                ".hidden".into())
            .starts_with("expected committed_outcomes[0].attempt_id to be a safe file name")
        );
        assert_eq!(
            invalid(state.clone(), move |s| entry(s).phase_id.clear()),
            "expected committed_outcomes[0].phase_id to be nonempty"
        );
        assert_eq!(
            invalid(state, move |s| entry(s).path =
                format!("{DIR}/outcomes/{ID2}.json")),
            format!("expected committed_outcomes[0].path to be {DIR}/outcomes/{ID1}.json")
        );
    }

    #[test]
    fn last_run_invariants() {
        let state = clarification_state();
        fn last(s: &mut State) -> &mut LastRun {
            s.last_run.as_mut().unwrap()
        }
        let cases: Vec<(Edit, String)> = vec![
            (
                Box::new(move |s| last(s).run_id.clear()),
                "expected last_run.run_id to be nonempty".into(),
            ),
            (
                Box::new(move |s| last(s).phase_id.clear()),
                "expected last_run.phase_id to be nonempty".into(),
            ),
            (
                Box::new(move |s| last(s).execution_workspace = "./app".into()),
                "expected last_run.execution_workspace to be an absolute path".into(),
            ),
            (
                Box::new(move |s| last(s).prompt_path = format!("{DIR}/prompts/{ID1}.txt")),
                format!("expected last_run.prompt_path to be {DIR}/prompts/{ID2}.txt"),
            ),
            (
                Box::new(move |s| last(s).transcript_path = format!("{DIR}/prompts/{ID2}.txt")),
                format!("expected last_run.transcript_path to be {DIR}/transcripts/{ID2}.txt"),
            ),
            (
                Box::new(move |s| {
                    last(s).outcome_path = Some(format!("{DIR}/outcomes/{ID1}.json"))
                }),
                format!("expected last_run.outcome_path to be {DIR}/outcomes/{ID2}.json"),
            ),
            (
                Box::new(move |s| last(s).outcome_path = None),
                "only an interrupted recovery may omit last_run.outcome_path".into(),
            ),
            (
                Box::new(move |s| last(s).exit_code = 4),
                "last_run.exit_code does not match status 'needs-clarification'".into(),
            ),
            (
                Box::new(|s| {
                    s.completed_phase_ids.clear();
                    s.last_run.as_mut().unwrap().status = AttemptStatus::PhaseComplete;
                    s.last_run.as_mut().unwrap().exit_code = 0;
                }),
                "completed last_run.phase_id is not in completed_phase_ids".into(),
            ),
            (
                Box::new(|s| {
                    s.committed_outcomes.pop();
                }),
                "last_run outcome must be the latest committed_outcomes entry".into(),
            ),
            (
                Box::new(|s| s.committed_outcomes.clear()),
                "last_run outcome must be the latest committed_outcomes entry".into(),
            ),
            (
                Box::new(|s| s.committed_outcomes[1].status = AttemptStatus::Blocked),
                "last_run outcome must be the latest committed_outcomes entry".into(),
            ),
            (
                Box::new(|s| s.committed_outcomes[1].phase_id = "phase-3".into()),
                "last_run outcome must be the latest committed_outcomes entry".into(),
            ),
        ];
        for (edit, message) in cases {
            assert_eq!(invalid(state.clone(), edit), message);
        }
    }

    #[test]
    fn every_status_has_its_handler_exit_code() {
        let codes: Vec<i32> = AttemptStatus::ALL
            .iter()
            .map(|s| s.handler_exit_code())
            .collect();
        assert_eq!(codes, [0, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]);
        for status in AttemptStatus::ALL {
            assert_eq!(AttemptStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                json!(status.as_str())
            );
        }
        assert_eq!(AttemptStatus::parse("io-error"), None);
        assert_eq!(ActiveStatus::parse("running"), Some(ActiveStatus::Running));
        assert_eq!(
            ActiveStatus::parse("prepared"),
            Some(ActiveStatus::Prepared)
        );
        assert_eq!(ActiveStatus::parse("Running"), None);
    }

    // ---- transitions (reference §6.5) ----

    #[test]
    fn prepare_sets_the_current_phase_and_clears_the_stop() {
        let mut state = clarification_state();
        let retry = prepared(ID3, phase(2), "2026-07-05T12:10:00Z");
        state.prepare(retry.clone()).unwrap();
        assert_eq!(state.active_attempt, Some(retry));
        assert_eq!(state.current_phase, Some(phase(2)));
        assert_eq!(state.stop, None);
        state.validate(&layout()).unwrap();
    }

    #[test]
    fn prepare_refuses_to_replace_an_active_attempt_or_a_launched_one() {
        let mut state = running_state();
        let before = state.clone();
        assert_eq!(
            state
                .prepare(prepared(ID3, phase(2), "2026-07-05T12:10:00Z"))
                .unwrap_err()
                .0,
            format!("cannot prepare attempt {ID3}: attempt {ID2} is still active")
        );
        assert_eq!(state, before);
        let mut state = fresh_state();
        let mut launched = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        launched.process = Some(identity());
        assert_eq!(
            state.prepare(launched.clone()).unwrap_err().0,
            format!("cannot prepare attempt {ID1}: a new attempt must be prepared with no process")
        );
        launched.process = None;
        launched.status = ActiveStatus::Running;
        assert!(state.prepare(launched).is_err());
        assert_eq!(state, fresh_state());
    }

    #[test]
    fn mark_running_records_the_identity() {
        let mut state = fresh_state();
        state
            .prepare(prepared(ID1, phase(1), "2026-07-05T12:01:02Z"))
            .unwrap();
        state.mark_running(ID1, None).unwrap();
        let attempt = state.active_attempt.as_ref().unwrap();
        assert_eq!(
            (attempt.status, attempt.process.clone()),
            (ActiveStatus::Running, None)
        );
        state.validate(&layout()).unwrap();
        assert_eq!(
            state.mark_running(ID1, Some(identity())).unwrap_err().0,
            format!("cannot mark attempt {ID1} running: it is already running")
        );
    }

    #[test]
    fn mark_running_needs_the_matching_active_attempt() {
        let mut state = fresh_state();
        assert_eq!(
            state.mark_running(ID1, None).unwrap_err().0,
            format!("cannot mark attempt {ID1} running: there is no active attempt")
        );
        state
            .prepare(prepared(ID1, phase(1), "2026-07-05T12:01:02Z"))
            .unwrap();
        assert_eq!(
            state.mark_running(ID2, None).unwrap_err().0,
            format!("cannot mark attempt {ID2} running: the active attempt is {ID1}")
        );
    }

    #[test]
    fn completion_adds_the_phase_and_clears_the_current_phase() {
        // Reference §15.3 item 21: the current-phase reference is set, then cleared.
        let mut state = fresh_state();
        let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        let record = outcome(
            &attempt,
            AttemptStatus::PhaseComplete,
            "all good",
            "2026-07-05T12:03:00Z",
        );
        state.prepare(attempt.clone()).unwrap();
        assert_eq!(state.current_phase, Some(phase(1)));
        state.commit(&record, &attempt.outcome_path).unwrap();
        assert_eq!(state.current_phase, None);
        assert_eq!(state.active_attempt, None);
        assert_eq!(state.stop, None);
        assert_eq!(state.completed_phase_ids, ["phase-1"]);
        assert_eq!(
            state.committed_outcomes,
            [OutcomeRef {
                attempt_id: ID1.into(),
                phase_id: "phase-1".into(),
                status: AttemptStatus::PhaseComplete,
                path: attempt.outcome_path.clone(),
            }]
        );
        assert_eq!(
            state.last_run,
            Some(LastRun {
                run_id: ID1.into(),
                phase_id: "phase-1".into(),
                status: AttemptStatus::PhaseComplete,
                started_at: at("2026-07-05T12:01:02Z"),
                finished_at: at("2026-07-05T12:03:00Z"),
                exit_code: 0,
                execution_workspace: "/ws/app".into(),
                prompt_path: attempt.prompt_path,
                transcript_path: attempt.transcript_path,
                outcome_path: Some(attempt.outcome_path),
                summary: "all good".into(),
            })
        );
        state.validate(&layout()).unwrap();
    }

    #[test]
    fn non_completion_stops_the_phase() {
        for status in AttemptStatus::ALL {
            if status == AttemptStatus::PhaseComplete {
                continue;
            }
            let mut state = fresh_state();
            let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
            run_attempt(&mut state, attempt, status, "line one\nline two");
            let clarifying = status == AttemptStatus::NeedsClarification;
            assert_eq!(
                state.stop,
                Some(Stop {
                    reason: status,
                    phase_id: "phase-1".into(),
                    message: (!clarifying).then(|| "line one\nline two".into()),
                    clarification_request: clarifying.then(|| "line one\nline two".into()),
                }),
                "{status}"
            );
            assert_eq!(state.current_phase, Some(phase(1)));
            assert!(state.completed_phase_ids.is_empty());
            assert_eq!(state.committed_outcomes.len(), 1);
            let last_run = state.last_run.as_ref().unwrap();
            assert_eq!(last_run.exit_code, status.handler_exit_code());
            assert_eq!(last_run.status, status);
            assert_eq!(read(&state.to_json()).unwrap(), state);
        }
    }

    #[test]
    fn commit_needs_the_matching_active_attempt() {
        let mut state = fresh_state();
        let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        let record = outcome(
            &attempt,
            AttemptStatus::PhaseComplete,
            "ok",
            "2026-07-05T12:03:00Z",
        );
        assert_eq!(
            state.commit(&record, &attempt.outcome_path).unwrap_err().0,
            format!("cannot commit attempt {ID1}: there is no active attempt")
        );
        state
            .prepare(prepared(ID2, phase(2), "2026-07-05T12:01:02Z"))
            .unwrap();
        assert_eq!(
            state.commit(&record, &attempt.outcome_path).unwrap_err().0,
            format!("cannot commit attempt {ID1}: the active attempt is {ID2}")
        );

        let mut state = fresh_state();
        state.prepare(attempt.clone()).unwrap();
        let before = state.clone();
        let mut other_phase = record.clone();
        other_phase.phase = phase(2);
        assert_eq!(
            state
                .commit(&other_phase, &attempt.outcome_path)
                .unwrap_err()
                .0,
            format!(
                "cannot commit attempt {ID1}: the outcome is for phase phase-2, the attempt for phase phase-1"
            )
        );
        assert_eq!(
            state.commit(&record, "/tmp/x.json").unwrap_err().0,
            format!(
                "cannot commit attempt {ID1}: outcome path /tmp/x.json is not the planned {}",
                attempt.outcome_path
            )
        );
        assert_eq!(state, before);
    }

    #[test]
    fn abandoned_attempt_resolves_as_interrupted_without_a_commit() {
        let mut state = running_state();
        let committed_before = state.committed_outcomes.clone();
        state.resolve_abandoned(at("2026-07-05T13:00:00Z")).unwrap();
        assert_eq!(state.active_attempt, None);
        assert_eq!(state.current_phase, Some(phase(2)));
        assert_eq!(state.committed_outcomes, committed_before);
        assert_eq!(
            state.last_run,
            Some(LastRun {
                run_id: ID2.into(),
                phase_id: "phase-2".into(),
                status: AttemptStatus::Interrupted,
                started_at: at("2026-07-05T12:05:00Z"),
                finished_at: at("2026-07-05T13:00:00Z"),
                exit_code: 4,
                execution_workspace: "/ws/app".into(),
                prompt_path: layout().prompt_path(ID2),
                transcript_path: layout().transcript_path(ID2),
                outcome_path: None,
                summary:
                    "previous handler ended without recording a terminal outcome; result is unknown"
                        .into(),
            })
        );
        // Alone this is not a state to write; with the retry prepared it is.
        assert_eq!(
            state.validate(&layout()).unwrap_err().0,
            "current_phase requires active_attempt or stop"
        );
        state
            .prepare(prepared(ID3, phase(2), "2026-07-05T13:00:00Z"))
            .unwrap();
        state.validate(&layout()).unwrap();
        assert_eq!(read(&state.to_json()).unwrap(), state);

        assert_eq!(
            fresh_state()
                .resolve_abandoned(at("2026-07-05T13:00:00Z"))
                .unwrap_err()
                .0,
            "cannot resolve an abandoned attempt: there is no active attempt"
        );
    }

    #[test]
    fn snapshot_hash_mismatch_is_refused_before_writing() {
        // Reference §15.3 item 4.
        let mut state = fresh_state();
        let mut attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        attempt.snapshot.sha256 = OTHER_SHA.into();
        state.prepare(attempt).unwrap();
        assert_eq!(
            state.validate(&layout()).unwrap_err().0,
            "active_attempt.snapshot.sha256 must match plan.sha256"
        );
    }

    // ---- properties ----

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::from),
            prop::sample::select(STATE_KEYS.to_vec()).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 8, |inner| {
            let key = prop_oneof![
                prop::sample::select(
                    [
                        &STATE_KEYS[..],
                        &ACTIVE_ATTEMPT_KEYS,
                        &LAST_RUN_KEYS,
                        &PROCESS_KEYS
                    ]
                    .concat()
                )
                .prop_map(String::from),
                "[a-z_]{1,6}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key, inner), 0..8)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    /// Replaces the `index`-th node (pre-order, modulo the node count) of `value`.
    fn replace_node(value: &mut Value, index: usize, replacement: Value) {
        fn count(value: &Value) -> usize {
            1 + match value {
                Value::Array(items) => items.iter().map(count).sum(),
                Value::Object(map) => map.values().map(count).sum(),
                _ => 0,
            }
        }
        fn walk(value: &mut Value, index: &mut usize, replacement: &mut Option<Value>) {
            if *index == 0 {
                if let Some(new) = replacement.take() {
                    *value = new;
                }
                return;
            }
            *index -= 1;
            let children: Vec<&mut Value> = match value {
                Value::Array(items) => items.iter_mut().collect(),
                Value::Object(map) => map.values_mut().collect(),
                _ => Vec::new(),
            };
            for child in children {
                walk(child, index, replacement);
            }
        }
        let mut index = index % count(value);
        walk(value, &mut index, &mut Some(replacement));
    }

    #[derive(Clone, Debug)]
    enum Step {
        Start,
        Launch {
            identity_known: bool,
        },
        Finish {
            status: AttemptStatus,
            summary: String,
        },
        Abandon,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Start),
            any::<bool>().prop_map(|identity_known| Step::Launch { identity_known }),
            (
                prop::sample::select(AttemptStatus::ALL.to_vec()),
                "\\PC{1,16}"
            )
                .prop_map(|(status, summary)| Step::Finish { status, summary }),
            Just(Step::Abandon),
        ]
    }

    /// Drives the runner's transitions with arbitrary results; every state it would write.
    fn written_states(steps: &[Step]) -> Vec<State> {
        let phases = [phase(1), phase(2), phase(3)];
        let mut state = fresh_state();
        let mut written = vec![state.clone()];
        for (n, step) in steps.iter().enumerate() {
            let now = Timestamp::from_datetime(
                at("2026-07-05T12:00:00Z").as_datetime() + chrono::Duration::seconds(n as i64),
            );
            let new_attempt = |phase: &PhaseRef| {
                prepared(
                    &format!("{}-{}-{n}", now.compact(), phase.id),
                    phase.clone(),
                    &now.to_string(),
                )
            };
            let changed = match (step, state.active_attempt.clone()) {
                (Step::Start, None) => {
                    let phase = match &state.stop {
                        Some(stop) => phases.iter().find(|p| p.id == stop.phase_id).cloned(),
                        None => phases
                            .iter()
                            .find(|p| !state.completed_phase_ids.contains(&p.id))
                            .cloned(),
                    };
                    phase
                        .map(|phase| state.prepare(new_attempt(&phase)).unwrap())
                        .is_some()
                }
                (Step::Launch { identity_known }, Some(attempt))
                    if attempt.status == ActiveStatus::Prepared =>
                {
                    let identity = identity_known.then(identity);
                    state.mark_running(&attempt.id, identity).unwrap();
                    true
                }
                (Step::Finish { status, summary }, Some(attempt)) => {
                    let mut record = outcome(&attempt, *status, summary, &now.to_string());
                    record.exit_code = None;
                    state.commit(&record, &attempt.outcome_path).unwrap();
                    true
                }
                (Step::Abandon, Some(attempt)) => {
                    state.resolve_abandoned(now).unwrap();
                    state.prepare(new_attempt(&attempt.phase)).unwrap();
                    true
                }
                _ => false,
            };
            if changed {
                written.push(state.clone());
            }
        }
        written
    }

    proptest! {
        #[test]
        fn reading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = State::from_json(&bytes, &layout());
        }

        #[test]
        fn reading_arbitrary_json_never_panics(value in arbitrary_json()) {
            let _ = read(&value.to_string());
        }

        #[test]
        fn reading_a_damaged_state_never_panics(
            index in any::<usize>(),
            replacement in arbitrary_json(),
            running in any::<bool>(),
        ) {
            let state = if running { running_state() } else { clarification_state() };
            let mut value = serde_json::to_value(&state).unwrap();
            replace_node(&mut value, index, replacement);
            if let Ok(read_back) = read(&value.to_string()) {
                // Whatever survives reading is valid and writes back to what was read.
                prop_assert!(read_back.validate(&layout()).is_ok());
                prop_assert_eq!(read(&read_back.to_json()).unwrap(), read_back);
            }
        }

        #[test]
        fn every_written_state_is_valid_and_round_trips(steps in prop::collection::vec(step(), 0..24)) {
            for state in written_states(&steps) {
                prop_assert_eq!(state.validate(&layout()), Ok(()));
                prop_assert_eq!(read(&state.to_json()), Ok(state));
            }
        }
    }
}
