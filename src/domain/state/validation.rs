//! The semantic invariants of a state document, checked on read and before every write.

use std::collections::HashSet;

use super::{
    ActiveAttempt, ActiveStatus, AttemptStatus, Invariant, LastRun, State, StateError, StateLayout,
    Stop,
};
use crate::domain::identity::ProcessIdentity;
use crate::domain::strict_json;

impl State {
    /// Checks the semantic invariants; run on read and before every write. Artifact paths
    /// must be exactly the ones `layout` derives from the attempt id: anything else is a hand
    /// edit.
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
            return Err(Invariant::ActiveAndStopped.into());
        }
        if let Some(attempt) = &self.active_attempt {
            self.validate_active_attempt(attempt, layout)?;
        }
        if let Some(stop) = &self.stop {
            self.validate_stop(stop)?;
        }
        if self.current_phase.is_some() && self.active_attempt.is_none() && self.stop.is_none() {
            return Err(Invariant::PhaseWithoutAttemptOrStop.into());
        }
        self.validate_committed_outcomes(layout)?;
        self.validate_abandoned_attempts()?;
        if let Some(last_run) = &self.last_run {
            self.validate_last_run(last_run, layout)?;
        }
        if let Some(schedule) = &self.retry_schedule {
            schedule.validate("retry_schedule")?;
            // A schedule continues a stopped phase: the attempt it follows was committed and
            // stopped the phase with the status it names.
            let continues_stop = self.stop.as_ref().is_some_and(|stop| {
                stop.phase_id == schedule.phase_id && stop.reason == schedule.after
            });
            if !continues_stop {
                return Err(Invariant::ScheduleWithoutItsStop.into());
            }
        }
        Ok(())
    }

    fn validate_completed_phase_ids(&self) -> Result<(), StateError> {
        let mut seen = HashSet::new();
        if !self.completed_phase_ids.iter().all(|id| seen.insert(id)) {
            return Err(Invariant::DuplicateCompletedPhase.into());
        }
        if self.completed_phase_ids.iter().any(String::is_empty) {
            return Err(Invariant::EmptyCompletedPhase.into());
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
            return Err(Invariant::AttemptWithoutPlan.into());
        };
        strict_json::require_attempt_id("active_attempt.id", &attempt.id)?;
        attempt.phase.validate("active_attempt.phase")?;
        if self.current_phase.as_ref() != Some(&attempt.phase) {
            return Err(Invariant::AttemptPhaseNotCurrent.into());
        }
        if self.is_completed(&attempt.phase.id) {
            return Err(Invariant::AttemptPhaseCompleted.into());
        }
        if attempt.snapshot.path != plan.path {
            return Err(Invariant::SnapshotPathNotPlan.into());
        }
        // plan.sha256 is already known to be a digest, so equality also proves the format.
        if attempt.snapshot.sha256 != plan.sha256 {
            return Err(Invariant::SnapshotDigestNotPlan.into());
        }
        strict_json::require_absolute_path(
            "active_attempt.execution_workspace",
            &attempt.execution_workspace,
        )?;
        let paths = [
            (&attempt.prompt_path, layout.prompt_path(&attempt.id)),
            (
                &attempt.transcript_path,
                layout.transcript_path(&attempt.id),
            ),
            (&attempt.outcome_path, layout.outcome_path(&attempt.id)),
        ];
        require_artifact_paths("active_attempt", paths)?;
        match (&attempt.process, attempt.status) {
            (Some(_), ActiveStatus::Prepared) => Err(Invariant::PreparedWithProcess.into()),
            (Some(process), ActiveStatus::Running) => validate_process(process),
            (None, _) => Ok(()),
        }
    }

    fn validate_stop(&self, stop: &Stop) -> Result<(), StateError> {
        // A completed phase is never "stopped".
        if stop.reason == AttemptStatus::PhaseComplete {
            return Err(Invariant::StoppedAsComplete.into());
        }
        strict_json::require_nonempty("stop.phase_id", &stop.phase_id)?;
        if self.current_phase.as_ref().map(|phase| &phase.id) != Some(&stop.phase_id) {
            return Err(Invariant::StopPhaseNotCurrent.into());
        }
        if self.is_completed(&stop.phase_id) {
            return Err(Invariant::StoppedPhaseCompleted.into());
        }
        let has_clarification = stop
            .clarification_request
            .as_ref()
            .is_some_and(|text| !text.is_empty());
        if stop.reason == AttemptStatus::NeedsClarification {
            if !has_clarification {
                return Err(Invariant::ClarificationMissing.into());
            }
        } else if stop.clarification_request.is_some() {
            return Err(Invariant::ClarificationWithoutReason.into());
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
            return Err(Invariant::DuplicateCommittedOutcome.into());
        }
        for (index, entry) in self.committed_outcomes.iter().enumerate() {
            strict_json::require_attempt_id(
                format_args!("committed_outcomes[{index}].attempt_id"),
                &entry.attempt_id,
            )?;
            strict_json::require_nonempty(
                format_args!("committed_outcomes[{index}].phase_id"),
                &entry.phase_id,
            )?;
            if !layout.is_outcome_path(&entry.path, &entry.attempt_id) {
                return Err(Invariant::ArtifactPath {
                    key: format!("committed_outcomes[{index}].path"),
                    expected: layout.outcome_path(&entry.attempt_id),
                }
                .into());
            }
            if let Some(usage) = &entry.usage {
                usage.validate(format_args!("committed_outcomes[{index}].usage"))?;
            }
        }
        Ok(())
    }

    fn validate_abandoned_attempts(&self) -> Result<(), StateError> {
        let mut seen = HashSet::new();
        for (index, entry) in self.abandoned_attempts.iter().enumerate() {
            strict_json::require_attempt_id(
                format_args!("abandoned_attempts[{index}].attempt_id"),
                &entry.attempt_id,
            )?;
            strict_json::require_nonempty(
                format_args!("abandoned_attempts[{index}].phase_id"),
                &entry.phase_id,
            )?;
            let committed = self
                .committed_outcomes
                .iter()
                .any(|outcome| outcome.attempt_id == entry.attempt_id);
            if !seen.insert(&entry.attempt_id) || committed {
                let key = format!("abandoned_attempts[{index}].attempt_id");
                return Err(Invariant::AttemptListedTwice { key }.into());
            }
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
        let id = &last_run.run_id;
        let paths = [
            (&last_run.prompt_path, layout.prompt_path(id)),
            (&last_run.transcript_path, layout.transcript_path(id)),
        ];
        let outcome = last_run.outcome_path.as_ref();
        let outcome = outcome.map(|path| (path, layout.outcome_path(id)));
        require_artifact_paths("last_run", paths.into_iter().chain(outcome))?;
        if last_run.outcome_path.is_none() && last_run.status != AttemptStatus::Interrupted {
            return Err(Invariant::OutcomePathOmitted.into());
        }
        if last_run.exit_code != last_run.status.exit_code().code() {
            return Err(Invariant::ExitCodeNotStatus {
                status: last_run.status,
            }
            .into());
        }
        if last_run.status == AttemptStatus::PhaseComplete && !self.is_completed(&last_run.phase_id)
        {
            return Err(Invariant::CompletedRunNotCompleted.into());
        }
        if let Some(outcome_path) = &last_run.outcome_path {
            let matches_latest = self.committed_outcomes.last().is_some_and(|entry| {
                entry.attempt_id == last_run.run_id
                    && entry.phase_id == last_run.phase_id
                    && entry.status == last_run.status
                    && &entry.path == outcome_path
            });
            if !matches_latest {
                return Err(Invariant::LastRunNotLatestOutcome.into());
            }
        }
        Ok(())
    }
}

/// Each `(path, expected)` of `<record>.prompt_path`, `.transcript_path` and `.outcome_path`,
/// in that order: artifact paths are derived from the attempt id, never chosen freely.
fn require_artifact_paths<'a>(
    record: &str,
    paths: impl IntoIterator<Item = (&'a String, String)>,
) -> Result<(), StateError> {
    let keys = ["prompt_path", "transcript_path", "outcome_path"];
    for ((actual, expected), key) in paths.into_iter().zip(keys) {
        if *actual != expected {
            let key = format!("{record}.{key}");
            return Err(Invariant::ArtifactPath { key, expected }.into());
        }
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
        return Err(Invariant::ProcessFieldZero { key }.into());
    }
    strict_json::require_nonempty("active_attempt.process.boot_id", &process.boot_id)?;
    Ok(())
}
