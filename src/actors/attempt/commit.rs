//! The end of an attempt, run as tasks beside the attempt supervisor once its lifecycle has
//! decided: the outcome record, the retry policy's decision (with the provider's reset time
//! read from the transcript's end), the commit through the state store, and the report to
//! the run — or, when nothing may be written, the report of an unresolved or unprepared
//! attempt with what the state still shows of it.

use std::io;
use std::path::Path;
use std::sync::Arc;

use ractor::{ActorRef, DerivedActorRef};

use crate::actors::observer::Emitter;
use crate::actors::state_store::StoreMsg;
use crate::actors::{call, off_runtime};
use crate::domain::decision::Decision;
use crate::domain::events::RunEvent;
use crate::domain::lifecycle::run::{AttemptEnd, AttemptReport, RecordFailure};
use crate::domain::outcome::{OutcomeRecord, OutputBytes};
use crate::domain::rate_limit::reset_time::find_reset;
use crate::domain::retry::next_step::{FinishedAttempt, NextStep, RetryLedger, next_step};
use crate::domain::retry::schedule::ScheduledRetry;
use crate::domain::state::{ActiveAttempt, AttemptStatus, CommitError, StateWriteError};
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::transcript::TRAILER_SEPARATOR;
use crate::invocation::RunSettings;
use crate::platform::file_tail;
use crate::platform::transcript_file::TranscriptFile;

/// Where an attempt's end is reported, and what it needs to ask the store.
#[derive(Clone)]
pub(crate) struct Reporting {
    pub(crate) store: ActorRef<StoreMsg>,
    pub(crate) run: DerivedActorRef<Box<AttemptReport>>,
    pub(crate) phase_id: String,
}

impl Reporting {
    fn send(&self, attempt_id: String, end: AttemptEnd) {
        let report = Box::new(AttemptReport {
            phase_id: self.phase_id.clone(),
            attempt_id,
            end,
        });
        // The run supervisor stops this attempt (and with it any remaining child) once it
        // has the report; a run already gone has nothing left to learn.
        if self.run.send_message(report).is_err() {
            tracing::trace!("attempt report dropped: the run supervisor stopped");
        }
    }

    /// The durable active attempt, if it is the one with `attempt_id` (a failed write may
    /// have become visible, or left the last record in place).
    async fn still_active(&self, attempt_id: &str) -> Option<Box<ActiveAttempt>> {
        call(&self.store, |reply| StoreMsg::Current { reply })
            .await
            .and_then(|state| state.active_attempt.clone())
            .filter(|active| active.id == attempt_id)
            .map(Box::new)
    }

    /// Reports an attempt whose prepared record was not written.
    pub(crate) async fn not_prepared(self, attempt_id: String, error: StateWriteError) {
        let still_active = self.still_active(&attempt_id).await;
        self.send(
            attempt_id,
            AttemptEnd::NotPrepared {
                error,
                still_active,
            },
        );
    }

    /// Reports a decided attempt that could not be committed.
    pub(crate) async fn unresolved(
        self,
        attempt: ActiveAttempt,
        decision: Decision,
        failure: RecordFailure,
    ) {
        tracing::info!(%failure, "outcome not committed; attempt stays unresolved");
        let still_active = self.still_active(&attempt.id).await;
        self.send(
            attempt.id.clone(),
            AttemptEnd::Unresolved {
                decision,
                failure,
                attempt: Box::new(attempt),
                still_active,
            },
        );
    }
}

/// A decided outcome to write and commit.
pub(crate) struct CommitJob {
    pub(crate) reporting: Reporting,
    pub(crate) events: Emitter,
    pub(crate) attempt: ActiveAttempt,
    pub(crate) outcome: OutcomeRecord,
    pub(crate) decision: Decision,
    /// The transcript of a worker that never ran, and the launch error to note in it.
    pub(crate) launch_note: Option<(TranscriptFile, String)>,
    /// What the retry policy decides from, when the status may be retried.
    pub(crate) retry: Option<RetryInputs>,
    pub(crate) output: OutputBytes,
    /// What the attempt's usage reports came to.
    pub(crate) usage: UsageSummary,
    /// The budget cap could not be enforced for this attempt's agent.
    pub(crate) budget_note: Option<String>,
}

impl CommitJob {
    /// Notes the launch error, asks the retry policy, commits the outcome (with the schedule
    /// in the same write) and reports to the run.
    pub(crate) async fn run(self) {
        if let Some((transcript, text)) = self.launch_note {
            let written = transcript
                .append(Arc::new(text.into_bytes()))
                .await
                .unwrap_or_else(|_| Err(io::Error::other("transcript thread stopped")));
            if let Err(error) = written {
                tracing::warn!(%error, "could not note the launch failure in the transcript");
            }
        }
        let retry = match self.retry {
            Some(inputs) => inputs.decide().await,
            None => None,
        };
        let schedule = retry.as_ref().map(|retry| retry.schedule.clone());
        let duration_ms = self.outcome.duration_ms.unwrap_or_default();
        let verification = self.outcome.verification.clone();
        let failed_check = self.outcome.verification_failure.clone();
        let committed = call(&self.reporting.store, |reply| StoreMsg::Commit {
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
            return self
                .reporting
                .unresolved(self.attempt, self.decision, failure)
                .await;
        }
        let attempt = self.attempt;
        let decision = self.decision;
        tracing::info!(status = %decision.status, "outcome committed");
        self.events.emit(
            Some(&attempt.id),
            RunEvent::OutcomeCommitted {
                phase_id: attempt.phase.id.clone(),
                status: decision.status,
                duration_ms,
                summary: decision.summary.clone(),
                stdout_bytes: self.output.stdout,
                stderr_bytes: self.output.stderr,
                outcome_path: attempt.outcome_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
                verification,
                verification_failure: failed_check.clone(),
                usage: self.usage.clone(),
            },
        );
        self.reporting.send(
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

/// What the retry policy decides from, after a retryable attempt.
pub(crate) struct RetryInputs {
    phase_id: String,
    status: AttemptStatus,
    template_index: usize,
    ledger: RetryLedger,
    settings: Arc<RunSettings>,
    transcript_path: String,
}

/// How much of the transcript's end is searched for a provider's reset time: the message that
/// ended the attempt is near the end, and the search must not cost memory in proportion to
/// the output.
const RESET_SEARCH_BYTES: u64 = 64 * 1024;

impl RetryInputs {
    /// The policy's inputs for an attempt that ended `status`, when that status may be
    /// retried at all.
    pub(crate) fn for_status(
        status: AttemptStatus,
        attempt: &ActiveAttempt,
        template_index: usize,
        ledger: RetryLedger,
        settings: Arc<RunSettings>,
    ) -> Option<Self> {
        status.is_retryable().then(|| Self {
            phase_id: attempt.phase.id.clone(),
            status,
            template_index,
            ledger,
            settings,
            transcript_path: attempt.transcript_path.clone(),
        })
    }

    /// The pure policy decision, after a rate limit with the reset time found at the end of
    /// the output (read off the runtime threads, with the machine's local time zone for clock
    /// times without one).
    async fn decide(self) -> Option<ScheduledRetry> {
        let now = chrono::Utc::now();
        let hint = if self.status == AttemptStatus::RateLimited {
            let path = self.transcript_path.clone();
            off_runtime(move || {
                let (tail, _) = file_tail::read_end(Path::new(&path), RESET_SEARCH_BYTES).ok()?;
                find_reset(&output_text(&tail), now, &chrono::Local)
            })
            .await
        } else {
            None
        };
        let finished = FinishedAttempt {
            status: self.status,
            template_index: self.template_index,
            reset_at: hint.as_ref().map(|hint| hint.at),
        };
        let settings = &self.settings;
        let step = next_step(
            &finished,
            &self.ledger,
            &settings.retry,
            &settings.rate_limit,
            settings.templates.len(),
            now,
        );
        match &step {
            NextStep::RetryAfter {
                not_before,
                attempt,
                of,
                template_index,
                reason,
                ..
            } => tracing::info!(
                status = %self.status,
                next = "retry",
                not_before = %not_before,
                attempt,
                of,
                template_index,
                reason = reason.as_str(),
                "retry policy decided"
            ),
            NextStep::Stop(reason) => tracing::info!(
                status = %self.status,
                next = "stop",
                reason = reason.describe(),
                "retry policy decided"
            ),
        }
        ScheduledRetry::from_step(&self.phase_id, self.status, &step, hint)
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
