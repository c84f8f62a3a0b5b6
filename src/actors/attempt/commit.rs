//! The end of an attempt, run as tasks once its lifecycle has decided: the outcome record, the
//! retry policy's decision, the commit through the state store and the report to the run — or,
//! when nothing may be written, the report of an unresolved or unprepared attempt.

use std::path::Path;

use super::AttemptState;
use super::messages::AttemptSpec;
use crate::actors::state_store::StoreMsg;
use crate::actors::{call, off_runtime};
use crate::domain::decision::Decision;
use crate::domain::events::RunEvent;
use crate::domain::lifecycle::attempt::Conclusion;
use crate::domain::lifecycle::run::{AttemptEnd, AttemptReport, RecordFailure, Uncommitted};
use crate::domain::outcome::{Artifacts, OutcomeRecord};
use crate::domain::rate_limit::reset_time::find_reset;
use crate::domain::retry::next_step::{FinishedAttempt, NextStep, next_step};
use crate::domain::retry::schedule::ScheduledRetry;
use crate::domain::state::{ActiveAttempt, AttemptStatus, CommitError, StateWriteError};
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::transcript::{TRAILER_SEPARATOR, Trailer, render_trailer};
use crate::domain::verification::Verification;
use crate::platform::durable::TranscriptFile;
use crate::platform::regular_file;

/// Reports the attempt's end to the run supervisor, which stops this attempt (and with it any
/// remaining child) once it has the report; a run already gone has nothing left to learn.
fn report(spec: &AttemptSpec, attempt_id: String, end: AttemptEnd) {
    let report = Box::new(AttemptReport {
        phase_id: spec.phase.id.clone(),
        attempt_id,
        end,
    });
    if spec.run.send_message(report).is_err() {
        tracing::trace!("attempt report dropped: the run supervisor stopped");
    }
}

/// The durable active attempt, if it is the one with `attempt_id` (a failed write may have
/// become visible, or left the last record in place).
async fn still_active(spec: &AttemptSpec, attempt_id: &str) -> Option<Box<ActiveAttempt>> {
    call(&spec.store, |reply| StoreMsg::Current { reply })
        .await
        .and_then(|state| state.active_attempt.clone())
        .filter(|active| active.id == attempt_id)
        .map(Box::new)
}

pub(crate) async fn not_prepared(spec: AttemptSpec, attempt_id: String, error: StateWriteError) {
    let still_active = still_active(&spec, &attempt_id).await;
    let end = AttemptEnd::Uncommitted(Uncommitted::NotPrepared {
        error,
        still_active,
    });
    report(&spec, attempt_id, end);
}

pub(crate) async fn unresolved(
    spec: AttemptSpec,
    attempt: ActiveAttempt,
    decision: Decision,
    failure: RecordFailure,
) {
    tracing::info!(%failure, "outcome not committed; attempt stays unresolved");
    let still_active = still_active(&spec, &attempt.id).await;
    let attempt_id = attempt.id.clone();
    let end = AttemptEnd::Uncommitted(Uncommitted::Unresolved {
        decision,
        failure,
        attempt: Box::new(attempt),
        still_active,
    });
    report(&spec, attempt_id, end);
}

impl AttemptState {
    /// Commits the decided outcome in a task (after noting a launch error in the transcript
    /// of a worker that never ran); the task reports to the run.
    pub(super) fn commit(&mut self, conclusion: Conclusion) {
        tracing::info!(status = %conclusion.decision.status, "outcome decided");
        let Some(attempt) = self.attempt.clone() else {
            return;
        };
        let (finished_at, duration_ms) = match self.finished {
            Some(finished) => finished,
            None => self.finish_now(),
        };
        let launch_note = self
            .unlaunched_transcript
            .take()
            .zip(conclusion.launch_error.clone())
            .map(|(transcript, summary)| {
                let trailer = Trailer {
                    finished_at: Some(finished_at),
                    launch_error: Some(summary),
                    watchdog_notes: self.watchdog_notes(),
                    ..Trailer::default()
                };
                (transcript, render_trailer(&trailer, 0, true))
            });
        let (verification, verification_failure) = conclusion
            .verification
            .as_ref()
            .map(Verification::to_record)
            .unzip();
        let spec = &self.spec;
        let outcome = OutcomeRecord {
            attempt_id: attempt.id.clone(),
            plan: attempt.snapshot.clone(),
            phase: attempt.phase.clone(),
            status: conclusion.decision.status,
            summary: conclusion.decision.summary.clone(),
            started_at: attempt.started_at,
            finished_at,
            execution_workspace: attempt.execution_workspace.clone(),
            artifacts: Artifacts {
                prompt_path: attempt.prompt_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
            },
            exit_code: conclusion.exit.code,
            signal: conclusion.exit.signal,
            duration_ms: Some(duration_ms),
            output_bytes: Some(self.findings.output),
            phase_attempt: Some(self.phase_attempt),
            agent_cmd: Some(
                spec.settings.templates[spec.order.template_index]
                    .raw()
                    .to_owned(),
            ),
            verification,
            verification_failure: verification_failure.flatten(),
            watchdog_losses: u32::try_from(self.watchdog_losses.len())
                .ok()
                .filter(|losses| *losses > 0),
            usage: Some(conclusion.usage.clone()),
            budget_note: conclusion.budget_note.clone(),
            changes: self.findings.take_changes(),
        };
        let job = CommitJob {
            spec: spec.clone(),
            attempt,
            outcome,
            decision: conclusion.decision,
            launch_note,
            usage: conclusion.usage,
            budget_note: conclusion.budget_note,
        };
        self.spawn(job.run());
    }
}

/// A decided outcome to write and commit.
struct CommitJob {
    spec: AttemptSpec,
    attempt: ActiveAttempt,
    outcome: OutcomeRecord,
    decision: Decision,
    /// The transcript of a worker that never ran, and the launch error to note in it.
    launch_note: Option<(TranscriptFile, String)>,
    usage: UsageSummary,
    /// The budget cap could not be enforced for this attempt's agent.
    budget_note: Option<String>,
}

impl CommitJob {
    /// Notes the launch error, asks the retry policy, commits the outcome (with the schedule
    /// in the same write) and reports to the run.
    pub(crate) async fn run(self) {
        if let Some((transcript, text)) = &self.launch_note
            && let Err(error) = off_runtime(|| transcript.append(text.as_bytes())).await
        {
            tracing::warn!(%error, "could not note the launch failure in the transcript");
        }
        let retry = if self.decision.status.is_retryable() {
            self.decide_retry().await
        } else {
            None
        };
        let schedule = retry.as_ref().map(|retry| retry.schedule.clone());
        let duration_ms = self.outcome.duration_ms.unwrap_or_default();
        let output = self.outcome.output_bytes.unwrap_or_default();
        let verification = self.outcome.verification.clone();
        let failed_check = self.outcome.verification_failure.clone();
        let committed = call(&self.spec.store, |reply| StoreMsg::Commit {
            outcome: Box::new(self.outcome),
            schedule,
            reply,
        })
        .await;
        let failure = match committed {
            Some(Ok(_)) => None,
            Some(Err(CommitError::StateWrite(error))) => Some(RecordFailure::OutcomeRecord(error)),
            Some(Err(error)) => Some(RecordFailure::OutcomeWrite(error)),
            None => Some(RecordFailure::OutcomeRecord(StateWriteError::Stopped)),
        };
        if let Some(failure) = failure {
            return unresolved(self.spec, self.attempt, self.decision, failure).await;
        }
        let attempt = self.attempt;
        let decision = self.decision;
        tracing::info!(status = %decision.status, "outcome committed");
        self.spec.events.emit(
            Some(&attempt.id),
            RunEvent::OutcomeCommitted {
                phase_id: attempt.phase.id.clone(),
                status: decision.status,
                duration_ms,
                summary: decision.summary.clone(),
                stdout_bytes: output.stdout,
                stderr_bytes: output.stderr,
                outcome_path: attempt.outcome_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
                verification,
                verification_failure: failed_check.clone(),
                usage: self.usage.clone(),
            },
        );
        report(
            &self.spec,
            attempt.id,
            AttemptEnd::Committed {
                decision,
                outcome_path: attempt.outcome_path,
                transcript_path: attempt.transcript_path,
                retry,
                failed_check: failed_check.map(Box::new),
                usage: Box::new(self.usage),
                budget_note: self.budget_note,
            },
        );
    }
}

/// How much of the transcript's end is searched for a provider's reset time: the message that
/// ended the attempt is near the end, and the search must not cost memory in proportion to
/// the output.
const RESET_SEARCH_BYTES: u64 = 64 * 1024;

impl CommitJob {
    /// The pure policy decision, after a rate limit with the reset time found at the end of
    /// the output (read off the runtime threads, with the machine's local time zone for clock
    /// times without one).
    async fn decide_retry(&self) -> Option<ScheduledRetry> {
        let now = chrono::Utc::now();
        let status = self.decision.status;
        let hint = if status == AttemptStatus::RateLimited {
            let path = self.attempt.transcript_path.clone();
            off_runtime(move || {
                let (tail, _) =
                    regular_file::read_end(Path::new(&path), RESET_SEARCH_BYTES).ok()?;
                find_reset(&output_text(&tail), now, &chrono::Local)
            })
            .await
        } else {
            None
        };
        let finished = FinishedAttempt {
            status,
            template_index: self.spec.order.template_index,
            reset_at: hint.as_ref().map(|hint| hint.at),
        };
        let settings = &self.spec.settings;
        let step = next_step(
            &finished,
            &self.spec.order.ledger,
            &settings.retry,
            &settings.rate_limit,
            settings.templates.len(),
            now,
        );
        match &step {
            NextStep::RetryAfter {
                not_before,
                of,
                template_index,
                reason,
                ledger,
            } => tracing::info!(
                status = %status,
                next = "retry",
                not_before = %not_before,
                attempt = ledger.attempt,
                of,
                template_index,
                reason = reason.as_str(),
                "retry policy decided"
            ),
            NextStep::Stop(reason) => tracing::info!(
                status = %status,
                next = "stop",
                reason = reason.describe(),
                "retry policy decided"
            ),
        }
        ScheduledRetry::from_step(&self.attempt.phase.id, status, &step, hint)
    }
}

/// The agent's output in the transcript's last bytes: without the runner's trailer (its
/// `finished_at` is no reset time), decoded lossily.
fn output_text(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    match text.rfind(TRAILER_SEPARATOR) {
        Some(at) => text[..at].to_owned(),
        None => text.into_owned(),
    }
}
