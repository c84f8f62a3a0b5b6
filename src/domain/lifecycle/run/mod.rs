//! The phase loop of one `run` as a pure state machine: [`RunLoop::handle`] maps (stage,
//! input) to (stage, effects); the run supervisor carries out the effects. Each rule (which
//! phase next, plan re-hash, waits, signals, how the run ends) is documented at the function
//! that applies it (docs/architecture.md, "Run loop"; every transition in
//! docs/lifecycle-tables.md).

mod end;

use crate::domain::budget::{BudgetCaps, Spent, unenforceable_warning};
use crate::domain::prompt::{EarlierAttempt, RetryNote};
use crate::domain::retry::next_step::RetryLedger;
use crate::domain::retry::schedule::{RetrySchedule, ScheduledRetry};
use crate::domain::selection::{Admission, FirstSelection, PlanChange, RecoveryFlags, Refusal};
use crate::domain::state::{AttemptStatus, LastRun, PlanRecord, StateWriteError};
use crate::domain::token_usage::summary::Completeness;
use crate::domain::verification::FailedCheck;

pub(crate) use end::{AttemptEnd, AttemptReport, RecordFailure, RunEnd, Uncommitted};

#[derive(Debug)]
pub(crate) enum RunInput<I> {
    Admitted(Box<Admitted>),
    /// Nothing was written.
    Refused(Box<RefusedRun<I>>),
    PlanChecked(PlanCheck),
    /// The selected phase's execution workspace is resolved and locked.
    WorkspaceReserved,
    AttemptConcluded(Box<AttemptReport>),
    RetryDue,
    /// The plan acceptance (when no attempt followed) was written, or why not.
    AcceptanceRecorded(Result<(), StateWriteError>),
    Signal(i32),
    /// An input became unusable (a lock held, the state or plan unreadable, a workspace gone).
    InputFailed(I),
    /// A bug; `attempt_may_be_unresolved` when it was the running attempt's supervisor.
    ActorFailed {
        message: String,
        attempt_may_be_unresolved: bool,
    },
}

/// What admission decided, with the state facts the loop keeps.
#[derive(Clone, Debug)]
pub(crate) struct Admitted {
    pub admission: Admission,
    pub completed_phase_ids: Vec<String>,
    /// A resumed schedule's stopped attempt.
    pub last_run: Option<LastRun>,
    /// The check that failed `last_run`, when it is `verification-failed`.
    pub verification_failure: Option<FailedCheck>,
    /// What the plan's recorded attempts spent ([`Spent::recorded`]): the caps count the
    /// whole plan, not one invocation.
    pub spent_before: Spent,
    /// A recorded attempt whose agent reported usage, for the warning about one that did not.
    pub reported_usage: Option<String>,
}

/// A refused run and what its report shows.
#[derive(Debug)]
pub(crate) struct RefusedRun<I> {
    pub refusal: Refusal,
    pub plan_workspace: String,
    /// A stopped phase's execution workspace, or why it is unavailable.
    pub execution_workspace: Option<Result<String, I>>,
    pub last_run: Option<Box<LastRun>>,
    /// The recovery flags with which the run would be admitted
    /// ([`crate::domain::selection::way_forward`]); `None` when no flag lifts the refusal.
    pub lifted_by: Option<RecoveryFlags>,
}

/// What re-hashing the plan file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PlanCheck {
    Unchanged,
    Changed(PlanChange),
}

/// What the run supervisor must do, in the order returned.
#[derive(Debug)]
pub(crate) enum RunEffect<I> {
    /// Answer with [`RunInput::PlanChecked`].
    CheckPlan,
    /// Resolve and lock the phase's execution workspace; answer with
    /// [`RunInput::WorkspaceReserved`] or [`RunInput::InputFailed`].
    ReserveWorkspace { phase_id: String },
    /// Start the attempt in the reserved workspace.
    Launch(Box<LaunchOrder>),
    /// Forward a signal to the running attempt.
    ForwardInterrupt(i32),
    /// Stop the concluded attempt's supervisor and release its workspace lock.
    ReleaseWorkspace,
    /// Say the retry is scheduled, and answer with [`RunInput::RetryDue`] at its `due`;
    /// `resumed` when the schedule was read from the state.
    AwaitRetry {
        retry: Box<ScheduledRetry>,
        resumed: bool,
    },
    /// Say (on stderr and in the event stream) that a budget cap cannot be enforced for an
    /// agent that reports no usage, naming the attempt.
    WarnBudgetUnenforceable(String),
    /// The wait for a scheduled retry is over.
    EndWait { phase_id: String, attempt: u32 },
    /// Record the plan acceptance on its own; answer with [`RunInput::AcceptanceRecorded`].
    RecordAcceptance(Box<PlanRecord>),
    /// Release everything and hand the end to the command.
    Finish(Box<RunEnd<I>>),
}

/// Everything an attempt is started with that the loop decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchOrder {
    pub phase_id: String,
    /// Resolve the abandoned attempt (as `interrupted`) in the prepared write.
    pub resolve_abandoned: bool,
    /// A plan record to accept in the prepared write.
    pub accept: Option<PlanRecord>,
    /// Which of the run's agent templates runs (0 is the primary).
    pub template_index: usize,
    /// Where the attempt stands in its phase's retries in this invocation.
    pub ledger: RetryLedger,
    /// `None` for a phase's first attempt, whose prompt has no retry section.
    pub note: Option<RetryNote>,
    /// The check that failed the phase's previous attempt, for the prompt.
    pub verification_failure: Option<FailedCheck>,
    pub spent_before: Spent,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Stage {
    /// Locking the plan workspace, reading the state, deciding admission.
    #[default]
    Admitting,
    /// The plan file is being re-hashed before acting on `target`.
    #[strum(serialize = "checking plan")]
    CheckingPlan { target: Target },
    /// The phase's execution workspace is being resolved and locked.
    Reserving {
        phase_id: String,
        resolve_abandoned: bool,
    },
    /// An attempt of `phase_id` runs.
    Attempting { phase_id: String },
    /// Waiting for the scheduled retry.
    Waiting,
    /// The plan acceptance is being written (every phase was already complete).
    Accepting,
    /// Nothing is done any more.
    Finished,
}

impl Stage {
    pub(crate) fn name(&self) -> &'static str {
        self.into()
    }
}

/// What a checkpoint decided, to act on once the plan is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Launch {
        phase_id: String,
        resolve_abandoned: bool,
    },
    /// Every phase is complete.
    AllComplete,
    /// `--max-phases` was reached with phases left.
    PhaseLimit { last_completed: String },
}

/// The fixed facts of one invocation the loop decides from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunRules {
    /// In plan order.
    pub phase_ids: Vec<String>,
    pub max_phases: Option<u64>,
    /// The retry policy's `max_attempts` (n in "attempt k of n").
    pub max_attempts: u32,
    pub budget: BudgetCaps,
}

/// The loop's progress through one invocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunLoop {
    rules: RunRules,
    stage: Stage,
    /// Phases complete in the durable state, as far as this invocation knows.
    completed: Vec<String>,
    completed_this_run: u64,
    last_completed: Option<String>,
    launched: bool,
    first_signal: Option<i32>,
    /// Admission's selection, consumed by the first checkpoint.
    first: Option<FirstSelection>,
    /// A plan record to accept with the first durable write.
    accept: Option<PlanRecord>,
    /// The scheduled next attempt of the current phase.
    pending_retry: Option<RetrySchedule>,
    /// The current phase's attempts in this invocation, for a retry's prompt.
    phase_attempts: Vec<EarlierAttempt>,
    /// The check that failed the last attempt, and its phase.
    failed_check: Option<(String, FailedCheck)>,
    /// What the plan has spent: its recorded attempts' usage, then this invocation's.
    spent: Spent,
    unenforceable_said: bool,
    /// An attempt of the plan whose agent reported usage.
    reported_usage: Option<String>,
}

impl RunLoop {
    pub(crate) fn new(rules: RunRules) -> Self {
        Self {
            rules,
            ..Self::default()
        }
    }

    pub(crate) fn stage(&self) -> &Stage {
        &self.stage
    }

    /// Applies one input and returns the effects to carry out, in order.
    pub(crate) fn handle<I>(&mut self, input: RunInput<I>) -> Vec<RunEffect<I>> {
        let mut effects = Vec::new();
        if self.stage != Stage::Finished {
            self.apply(input, &mut effects);
        }
        effects
    }

    fn apply<I>(&mut self, input: RunInput<I>, effects: &mut Vec<RunEffect<I>>) {
        match (input, self.stage.clone()) {
            (RunInput::Admitted(admitted), Stage::Admitting) => self.admitted(*admitted, effects),
            (RunInput::Refused(refused), Stage::Admitting) => {
                self.finish(RunEnd::Refused(refused), effects)
            }
            (RunInput::PlanChecked(check), Stage::CheckingPlan { target }) => {
                match (check, self.first_signal) {
                    (_, Some(signal)) => {
                        self.interrupted(signal, target == Target::AllComplete, effects)
                    }
                    (PlanCheck::Unchanged, None) => self.act(target, effects),
                    (PlanCheck::Changed(change), None) => {
                        self.finish(RunEnd::PlanChanged(change), effects)
                    }
                }
            }
            (
                RunInput::WorkspaceReserved,
                Stage::Reserving {
                    phase_id,
                    resolve_abandoned,
                },
            ) => match self.first_signal {
                Some(signal) => self.interrupted(signal, false, effects),
                None => self.launch(phase_id, resolve_abandoned, effects),
            },
            (RunInput::AttemptConcluded(report), Stage::Attempting { phase_id })
                if report.phase_id == phase_id =>
            {
                effects.push(RunEffect::ReleaseWorkspace);
                self.attempt_concluded(*report, effects);
            }
            (RunInput::RetryDue, Stage::Waiting) => {
                if let Some(schedule) = &self.pending_retry {
                    effects.push(RunEffect::EndWait {
                        phase_id: schedule.phase_id.clone(),
                        attempt: schedule.attempt,
                    });
                }
                self.checkpoint(effects);
            }
            (RunInput::AcceptanceRecorded(result), Stage::Accepting) => {
                match (result, self.first_signal) {
                    (_, Some(signal)) => self.interrupted(signal, true, effects),
                    (Ok(()), None) => self.finish(RunEnd::AllComplete, effects),
                    (Err(error), None) => self.finish(RunEnd::AcceptanceFailed(error), effects),
                }
            }
            (RunInput::Signal(signal), stage) => self.signal(signal, stage, effects),
            (RunInput::InputFailed(error), Stage::Admitting) => {
                self.finish(RunEnd::Input(error), effects)
            }
            // The answer to a plan check or a reservation.
            (
                RunInput::InputFailed(error),
                Stage::CheckingPlan { .. } | Stage::Reserving { .. },
            ) => match self.first_signal {
                Some(signal) => self.interrupted(signal, false, effects),
                None => self.finish(RunEnd::Input(error), effects),
            },
            (
                RunInput::ActorFailed {
                    message,
                    attempt_may_be_unresolved,
                },
                _,
            ) => self.finish(
                RunEnd::Internal {
                    message,
                    attempt_may_be_unresolved,
                },
                effects,
            ),
            // Anything else is stale or out of place (a due retry after the wait ended, a
            // second report): it changes nothing.
            _ => {}
        }
    }

    fn admitted<I>(&mut self, admitted: Admitted, effects: &mut Vec<RunEffect<I>>) {
        let Admitted {
            admission,
            completed_phase_ids,
            last_run,
            verification_failure,
            spent_before,
            reported_usage,
        } = admitted;
        self.spent = spent_before;
        self.reported_usage = reported_usage;
        self.completed = completed_phase_ids;
        self.accept = admission.accept;
        // The phase's next attempt after a `verification-failed` one is told the failed check.
        // The stopped attempt a retry follows is the state's last run; an abandoned attempt's
        // retry follows the abandoned attempt, not the failed check.
        let retried = match &admission.first {
            FirstSelection::RetryStopped { phase_id } => Some(phase_id.clone()),
            FirstSelection::ResumeSchedule(schedule) => Some(schedule.phase_id.clone()),
            _ => None,
        };
        self.failed_check = retried
            .filter(|phase_id| {
                last_run
                    .as_ref()
                    .is_some_and(|run| &run.phase_id == phase_id)
            })
            .zip(verification_failure);
        match admission.first {
            FirstSelection::ResumeSchedule(schedule) => {
                if let Some(signal) = self.first_signal {
                    let phase_id = schedule.phase_id.clone();
                    return self
                        .finish(RunEnd::InterruptedDuringWait { signal, phase_id }, effects);
                }
                // The stopped attempt this schedule follows is the retry's first "earlier
                // attempt".
                self.phase_attempts
                    .extend(last_run.as_ref().map(EarlierAttempt::from));
                let retry = ScheduledRetry {
                    due: schedule.not_before.as_datetime(),
                    schedule: *schedule,
                    reset_phrase: None,
                };
                self.await_retry(retry, true, effects);
            }
            first => {
                self.first = Some(first);
                self.checkpoint(effects);
            }
        }
    }

    /// Between attempts: launch a phase, or end the run. The snapshot serves the first launch;
    /// before every later one, and before reporting completion or the phase limit, the plan
    /// is re-hashed. `--max-phases` stops the run only while phases remain.
    fn checkpoint<I>(&mut self, effects: &mut Vec<RunEffect<I>>) {
        let next = self.next_phase();
        if let Some(signal) = self.first_signal {
            return self.interrupted(signal, next.is_none(), effects);
        }
        let target = match next {
            None => Target::AllComplete,
            Some(_) if self.phase_limit_reached() => Target::PhaseLimit {
                last_completed: self.last_completed.clone().unwrap_or_default(),
            },
            Some((phase_id, resolve_abandoned)) => Target::Launch {
                phase_id,
                resolve_abandoned,
            },
        };
        if self.launched {
            self.stage = Stage::CheckingPlan { target };
            effects.push(RunEffect::CheckPlan);
        } else {
            self.act(target, effects);
        }
    }

    /// The phase to run next and whether it resolves an abandoned attempt: a scheduled
    /// retry's phase, else admission's selection, else the first phase in plan order not
    /// completed; `None` when every phase is complete.
    fn next_phase(&mut self) -> Option<(String, bool)> {
        if let Some(schedule) = &self.pending_retry {
            return Some((schedule.phase_id.clone(), false));
        }
        if let Some(first) = self.first.take() {
            return match first {
                FirstSelection::RetryAbandoned(attempt) => Some((attempt.phase.id.clone(), true)),
                FirstSelection::RetryStopped { phase_id } | FirstSelection::Next { phase_id } => {
                    Some((phase_id, false))
                }
                FirstSelection::ResumeSchedule(schedule) => Some((schedule.phase_id, false)),
                FirstSelection::AllComplete => None,
            };
        }
        self.rules
            .phase_ids
            .iter()
            .find(|id| !self.completed.contains(id))
            .map(|id| (id.clone(), false))
    }

    fn phase_limit_reached(&self) -> bool {
        self.last_completed.is_some()
            && self
                .rules
                .max_phases
                .is_some_and(|limit| self.completed_this_run >= limit)
    }

    fn act<I>(&mut self, target: Target, effects: &mut Vec<RunEffect<I>>) {
        match target {
            Target::Launch {
                phase_id,
                resolve_abandoned,
            } => {
                if self.budget_reached(&phase_id, effects) {
                    return;
                }
                effects.push(RunEffect::ReserveWorkspace {
                    phase_id: phase_id.clone(),
                });
                self.stage = Stage::Reserving {
                    phase_id,
                    resolve_abandoned,
                };
            }
            Target::AllComplete => match self.accept.take() {
                Some(record) => {
                    self.stage = Stage::Accepting;
                    effects.push(RunEffect::RecordAcceptance(Box::new(record)));
                }
                None => self.finish(RunEnd::AllComplete, effects),
            },
            Target::PhaseLimit { last_completed } => {
                self.finish(RunEnd::PhaseLimitReached { last_completed }, effects)
            }
        }
    }

    fn launch<I>(
        &mut self,
        phase_id: String,
        resolve_abandoned: bool,
        effects: &mut Vec<RunEffect<I>>,
    ) {
        let (template_index, ledger, note) = match self.pending_retry.take() {
            Some(schedule) => {
                let note = RetryNote::following(
                    &schedule,
                    self.rules.max_attempts,
                    self.phase_attempts.clone(),
                );
                (schedule.template_index, schedule.ledger(), Some(note))
            }
            None => {
                self.phase_attempts.clear();
                (0, RetryLedger::first(), None)
            }
        };
        let verification_failure = self
            .failed_check
            .take()
            .filter(|(failed_phase, _)| *failed_phase == phase_id)
            .map(|(_, failure)| failure);
        self.launched = true;
        self.stage = Stage::Attempting {
            phase_id: phase_id.clone(),
        };
        effects.push(RunEffect::Launch(Box::new(LaunchOrder {
            phase_id,
            resolve_abandoned,
            accept: self.accept.take(),
            template_index,
            ledger,
            note,
            verification_failure,
            spent_before: self.spent,
        })));
    }

    /// Ends the run when a budget cap is reached before `phase_id` is launched (or waited for),
    /// as a `budget-exceeded` attempt would end it.
    fn budget_reached<I>(&mut self, phase_id: &str, effects: &mut Vec<RunEffect<I>>) -> bool {
        let Some(reached) = self.rules.budget.reached(self.spent) else {
            return false;
        };
        let end = RunEnd::BudgetReached {
            reached,
            phase_id: phase_id.to_owned(),
            retry_scheduled: self.pending_retry.is_some(),
        };
        self.finish(end, effects);
        true
    }

    fn attempt_concluded<I>(&mut self, report: AttemptReport, effects: &mut Vec<RunEffect<I>>) {
        let signal = self.first_signal;
        match report.end {
            AttemptEnd::Committed {
                decision,
                outcome_path,
                transcript_path,
                retry,
                failed_check,
                usage,
                budget_note,
            } => {
                self.failed_check = failed_check
                    .as_deref()
                    .map(|failure| (report.phase_id.clone(), failure.clone()));
                self.spent = self.spent.plus(&usage.counts);
                if budget_note.is_some()
                    && !std::mem::replace(&mut self.unenforceable_said, true)
                    && let Some(warning) = unenforceable_warning(
                        &self.rules.budget,
                        &report.attempt_id,
                        &report.phase_id,
                        self.reported_usage.as_deref(),
                    )
                {
                    effects.push(RunEffect::WarnBudgetUnenforceable(warning));
                }
                if usage.completeness != Completeness::Unknown {
                    self.reported_usage = Some(report.attempt_id.clone());
                }
                self.phase_attempts.push(EarlierAttempt {
                    attempt_id: report.attempt_id,
                    status: decision.status.to_string(),
                    summary: decision.summary.clone(),
                    transcript_path: transcript_path.clone(),
                });
                if decision.status == AttemptStatus::PhaseComplete {
                    if !self.completed.contains(&report.phase_id) {
                        self.completed.push(report.phase_id.clone());
                    }
                    self.completed_this_run += 1;
                    self.last_completed = Some(report.phase_id);
                    // A signal caught meanwhile stops the loop at the checkpoint.
                    return self.checkpoint(effects);
                }
                let retry_scheduled = retry.is_some();
                match retry {
                    // No use waiting for a retry the budget cannot pay for: the run ends now,
                    // with the schedule durable for a later run.
                    Some(retry)
                        if signal.is_none() && self.rules.budget.reached(self.spent).is_some() =>
                    {
                        self.pending_retry = Some(retry.schedule);
                        self.budget_reached(&report.phase_id, effects);
                    }
                    // The schedule is durable: a signal ends the run now, and a later run
                    // resumes it.
                    Some(retry) if signal.is_none() => self.await_retry(retry, false, effects),
                    _ => self.finish(
                        RunEnd::PhaseStopped {
                            decision,
                            outcome_path,
                            transcript_path,
                            signal,
                            retry_scheduled,
                            failed_check,
                        },
                        effects,
                    ),
                }
            }
            AttemptEnd::Uncommitted(end) => {
                self.finish(RunEnd::Uncommitted { end, signal }, effects)
            }
        }
    }

    fn await_retry<I>(
        &mut self,
        retry: ScheduledRetry,
        resumed: bool,
        effects: &mut Vec<RunEffect<I>>,
    ) {
        self.stage = Stage::Waiting;
        self.pending_retry = Some(retry.schedule.clone());
        let retry = Box::new(retry);
        effects.push(RunEffect::AwaitRetry { retry, resumed });
    }

    /// The first signal caught decides the exit code. While an attempt runs, every signal is
    /// forwarded to it; otherwise nothing more is launched and the run ends at the next point
    /// it is told anything. A signal never rewrites a decided outcome
    /// ([`RunEnd::signal_after_decision`]).
    fn signal<I>(&mut self, signal: i32, stage: Stage, effects: &mut Vec<RunEffect<I>>) {
        let first = *self.first_signal.get_or_insert(signal);
        match stage {
            Stage::Attempting { .. } => effects.push(RunEffect::ForwardInterrupt(signal)),
            Stage::Waiting => {
                let phase_id = self
                    .pending_retry
                    .as_ref()
                    .map(|schedule| schedule.phase_id.clone())
                    .unwrap_or_default();
                let end = RunEnd::InterruptedDuringWait {
                    signal: first,
                    phase_id,
                };
                self.finish(end, effects);
            }
            // Held: acted on when the pending step answers (or at the first checkpoint).
            Stage::Admitting
            | Stage::CheckingPlan { .. }
            | Stage::Reserving { .. }
            | Stage::Accepting
            | Stage::Finished => {}
        }
    }

    fn interrupted<I>(
        &mut self,
        signal: i32,
        plan_complete: bool,
        effects: &mut Vec<RunEffect<I>>,
    ) {
        let end = RunEnd::InterruptedBeforeLaunch {
            signal,
            plan_complete,
        };
        self.finish(end, effects);
    }

    fn finish<I>(&mut self, end: RunEnd<I>, effects: &mut Vec<RunEffect<I>>) {
        self.stage = Stage::Finished;
        effects.push(RunEffect::Finish(Box::new(end)));
    }
}

#[cfg(test)]
mod tests;
