//! The pure transitions of the attempt lifecycle on the durable state: prepare, mark running,
//! commit, resolve an abandoned attempt. Each either applies completely or reports why not.

use super::excerpt::{excerpt, is_bounded};
use super::{
    AbandonedRef, ActiveAttempt, ActiveStatus, AttemptStatus, LastRun, OutcomeRef, PhaseRef,
    PlanRecord, SnapshotRef, State, StateError, StateLayout, Stop,
};
use super::{Refusal, Transition};
use crate::domain::changes::Changes;
use crate::domain::identity::ProcessIdentity;
use crate::domain::outcome::OutcomeRecord;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::timestamp::Timestamp;

/// The summary recorded for an abandoned attempt resolved by `--retry-stopped`.
pub const ABANDONED_SUMMARY: &str =
    "previous handler ended without recording a terminal outcome; result is unknown";

impl ActiveAttempt {
    /// A new attempt's prepared record: no process yet, and the artifact paths `layout`
    /// derives from its id.
    pub fn prepared(
        id: String,
        phase: PhaseRef,
        snapshot: SnapshotRef,
        execution_workspace: String,
        started_at: Timestamp,
        layout: &StateLayout,
    ) -> Self {
        Self {
            prompt_path: layout.prompt_path(&id),
            transcript_path: layout.transcript_path(&id),
            outcome_path: layout.outcome_path(&id),
            id,
            status: ActiveStatus::Prepared,
            phase,
            snapshot,
            execution_workspace,
            started_at,
            process: None,
        }
    }
}

impl State {
    /// The prepared write, as one transition (docs/state-and-recovery.md): resolve the
    /// abandoned attempt (finished at `resolve_abandoned_at`), record the plan acceptance,
    /// then prepare `attempt`. `check --prompt` applies it to a copy.
    pub fn apply_preparation(
        &mut self,
        attempt: ActiveAttempt,
        accept: Option<PlanRecord>,
        resolve_abandoned_at: Option<Timestamp>,
    ) -> Result<(), StateError> {
        if let Some(finished_at) = resolve_abandoned_at {
            self.resolve_abandoned(finished_at)?;
        }
        if let Some(record) = accept {
            self.plan = Some(record);
        }
        self.prepare(attempt)
    }

    /// Records a prepared attempt as active and its phase as current, clearing `stop`.
    pub fn prepare(&mut self, attempt: ActiveAttempt) -> Result<(), StateError> {
        let preparing = || Transition::Prepare {
            attempt_id: attempt.id.clone(),
        };
        if let Some(active) = &self.active_attempt {
            let active = active.id.clone();
            return Err(preparing().refused(Refusal::StillActive { active }));
        }
        if attempt.status != ActiveStatus::Prepared || attempt.process.is_some() {
            return Err(preparing().refused(Refusal::PreparedWithProcess));
        }
        self.current_phase = Some(attempt.phase.clone());
        self.stop = None;
        // A scheduled retry is carried out by this very attempt (or replaced by the
        // operator's `--retry-stopped`).
        self.retry_schedule = None;
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
        let running = || Transition::MarkRunning {
            attempt_id: attempt_id.to_owned(),
        };
        let attempt = self.active_attempt_mut(attempt_id, running)?;
        if attempt.status != ActiveStatus::Prepared {
            return Err(running().refused(Refusal::AlreadyRunning));
        }
        attempt.status = ActiveStatus::Running;
        attempt.process = identity;
        Ok(())
    }

    /// Commits the terminal outcome of the active attempt whose record was written to
    /// `outcome_path`: the outcome is referenced and becomes `last_run`, and its phase is
    /// completed or stopped.
    pub fn commit(
        &mut self,
        outcome: &OutcomeRecord,
        outcome_path: &str,
    ) -> Result<(), StateError> {
        let committing = || Transition::Commit {
            attempt_id: outcome.attempt_id.clone(),
        };
        let attempt = self.active_attempt_mut(&outcome.attempt_id, committing)?;
        if outcome.phase.id != attempt.phase.id {
            return Err(committing().refused(Refusal::OtherPhase {
                outcome_phase: outcome.phase.id.clone(),
                attempt_phase: attempt.phase.id.clone(),
            }));
        }
        if outcome_path != attempt.outcome_path {
            return Err(committing().refused(Refusal::OtherOutcomePath {
                path: outcome_path.to_owned(),
                planned: attempt.outcome_path.clone(),
            }));
        }
        let phase = attempt.phase.clone();
        self.active_attempt = None;
        // The outcome keeps the whole text; the state a bounded excerpt of it.
        let summary = excerpt(&outcome.summary, Some(outcome_path));

        if outcome.status == AttemptStatus::PhaseComplete {
            self.completed_phase_ids.push(phase.id.clone());
            self.current_phase = None;
            self.stop = None;
        } else {
            let clarifying = outcome.status == AttemptStatus::NeedsClarification;
            // A failed check is why a completion stopped; the agent's summary stays in the
            // outcome and `last_run`.
            let message = match &outcome.verification_failure {
                Some(failure) => failure.describe(),
                None => summary.clone(),
            };
            self.stop = Some(Stop {
                reason: outcome.status,
                phase_id: phase.id.clone(),
                message: (!clarifying).then_some(message),
                clarification_request: clarifying.then(|| summary.clone()),
            });
            self.current_phase = Some(phase.clone());
        }
        self.committed_outcomes.push(OutcomeRef {
            attempt_id: outcome.attempt_id.clone(),
            phase_id: phase.id.clone(),
            status: outcome.status,
            path: outcome_path.to_owned(),
            duration_ms: outcome.duration_ms,
            output_bytes: outcome.output_bytes.map(|bytes| bytes.total()),
            watchdog_losses: outcome.watchdog_losses.map(u64::from),
            usage: outcome.usage.clone(),
            changed_nothing: outcome.changes.as_ref().and_then(Changes::changed_nothing),
        });
        self.last_run = Some(LastRun {
            run_id: outcome.attempt_id.clone(),
            phase_id: phase.id,
            status: outcome.status,
            started_at: outcome.started_at,
            finished_at: outcome.finished_at,
            exit_code: outcome.status.exit_code().code(),
            execution_workspace: outcome.execution_workspace.clone(),
            prompt_path: outcome.artifacts.prompt_path.clone(),
            transcript_path: outcome.artifacts.transcript_path.clone(),
            outcome_path: Some(outcome_path.to_owned()),
            summary,
        });
        Ok(())
    }

    /// Cuts agent texts an older state may hold whole down to the excerpts a commit writes,
    /// so that the next write is bounded whatever transition it makes.
    pub fn bound_texts(&mut self) {
        let full_text_at = self
            .last_run
            .as_ref()
            .and_then(|last_run| last_run.outcome_path.clone());
        let bound = |text: &mut String| {
            if !is_bounded(text) {
                *text = excerpt(text, full_text_at.as_deref());
            }
        };
        if let Some(stop) = self.stop.as_mut() {
            stop.message.as_mut().map(bound);
            stop.clarification_request.as_mut().map(bound);
        }
        if let Some(last_run) = self.last_run.as_mut() {
            bound(&mut last_run.summary);
        }
    }

    /// Records the retry a policy scheduled after the attempt that just stopped its phase.
    pub fn schedule_retry(&mut self, schedule: RetrySchedule) -> Result<(), StateError> {
        match &self.stop {
            Some(stop) if stop.phase_id == schedule.phase_id => {
                self.retry_schedule = Some(schedule);
                Ok(())
            }
            _ => Err(Transition::ScheduleRetry {
                phase_id: schedule.phase_id,
            }
            .refused(Refusal::PhaseNotStopped)),
        }
    }

    /// Resolves an abandoned active attempt as `interrupted`: it becomes `last_run` (no
    /// outcome path) and is listed in `abandoned_attempts`. `current_phase` is kept, so the
    /// state is only valid again once the caller prepares the retry in the same write.
    pub fn resolve_abandoned(&mut self, finished_at: Timestamp) -> Result<(), StateError> {
        let Some(attempt) = self.active_attempt.take() else {
            return Err(Transition::ResolveAbandoned.refused(Refusal::NoActiveAttempt));
        };
        let status = AttemptStatus::Interrupted;
        self.abandoned_attempts.push(AbandonedRef {
            attempt_id: attempt.id.clone(),
            phase_id: attempt.phase.id.clone(),
            started_at: attempt.started_at,
            resolved_at: finished_at,
        });
        self.last_run = Some(LastRun {
            run_id: attempt.id,
            phase_id: attempt.phase.id,
            status,
            started_at: attempt.started_at,
            finished_at,
            exit_code: status.exit_code().code(),
            execution_workspace: attempt.execution_workspace,
            prompt_path: attempt.prompt_path,
            transcript_path: attempt.transcript_path,
            outcome_path: None,
            summary: ABANDONED_SUMMARY.to_owned(),
        });
        Ok(())
    }

    /// The active attempt, which must be `attempt_id`; `transition` names what is refused
    /// otherwise.
    fn active_attempt_mut(
        &mut self,
        attempt_id: &str,
        transition: impl FnOnce() -> Transition,
    ) -> Result<&mut ActiveAttempt, StateError> {
        let Some(attempt) = self.active_attempt.as_mut() else {
            return Err(transition().refused(Refusal::NoActiveAttempt));
        };
        if attempt.id != attempt_id {
            let active = attempt.id.clone();
            return Err(transition().refused(Refusal::OtherAttemptActive { active }));
        }
        Ok(attempt)
    }
}

impl Transition {
    fn refused(self, refusal: Refusal) -> StateError {
        StateError::Refused {
            transition: self,
            refusal,
        }
    }
}
