//! How an attempt ends for the run loop ([`AttemptReport`]) and how the run ends ([`RunEnd`]),
//! with the one exhaustive mapping to an exit code. `I` is the input error of the layer that
//! checks a run's inputs, which the domain only carries.

use super::RefusedRun;
use crate::domain::budget::CapReached;
use crate::domain::decision::Decision;
use crate::domain::exit_code::ExitCode;
use crate::domain::failure::ExecutionFailure;
use crate::domain::retry::schedule::ScheduledRetry;
use crate::domain::selection::PlanChange;
use crate::domain::state::{ActiveAttempt, AttemptStatus, CommitError, StateWriteError};
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::verification::FailedCheck;

/// What an attempt supervisor tells the run loop when it is done.
#[derive(Debug)]
pub struct AttemptReport {
    pub phase_id: String,
    pub attempt_id: String,
    pub end: AttemptEnd,
}

#[derive(Debug)]
pub enum AttemptEnd {
    /// The outcome is durably committed.
    Committed {
        decision: Decision,
        outcome_path: String,
        transcript_path: String,
        /// The next attempt of the phase, scheduled in the same write.
        retry: Option<ScheduledRetry>,
        failed_check: Option<Box<FailedCheck>>,
        usage: Box<UsageSummary>,
        /// A cap is set and the attempt reported no usage.
        budget_note: Option<String>,
    },
    /// The outcome was not committed.
    Uncommitted(Uncommitted),
}

/// An attempt whose outcome was not committed.
#[derive(Debug)]
pub enum Uncommitted {
    /// The prepared record could not be written: nothing was launched, nothing changed —
    /// unless the failed write became visible anyway (`still_active`).
    NotPrepared {
        error: StateWriteError,
        still_active: Option<Box<ActiveAttempt>>,
    },
    /// A durable write after preparation failed; the last durable record (prepared or
    /// running) stays and the attempt is unresolved. `still_active` is that record when the
    /// state still shows it (`None`: the commit became visible, only its durability failed).
    Unresolved {
        decision: Decision,
        failure: RecordFailure,
        attempt: Box<ActiveAttempt>,
        still_active: Option<Box<ActiveAttempt>>,
    },
}

impl Uncommitted {
    /// The attempt that is the invocation's last, when there is one: the unresolved attempt,
    /// or the prepared record that became visible although its write failed.
    pub(crate) fn attempt(&self) -> Option<&ActiveAttempt> {
        match self {
            Self::NotPrepared { still_active, .. } => still_active.as_deref(),
            Self::Unresolved { attempt, .. } => Some(attempt),
        }
    }
}

/// The durable write that left an attempt unresolved.
#[derive(Debug, thiserror::Error)]
pub enum RecordFailure {
    /// The `running` record; `decided` when this failure is also what stopped the attempt
    /// (its words are then already the decision's summary).
    #[error("{failure}")]
    RunningRecord {
        failure: ExecutionFailure,
        decided: bool,
    },
    #[error("could not write attempt outcome: {0}")]
    OutcomeWrite(CommitError),
    #[error("could not record attempt outcome: {0}")]
    OutcomeRecord(StateWriteError),
}

/// How a `run` ended, for the command to report. A `signal` is the first stopping signal the
/// run caught: it decides the exit code.
#[derive(Debug)]
pub(crate) enum RunEnd<I> {
    /// Every phase is complete.
    AllComplete,
    /// `--max-phases` was reached with phases left; `last_completed` completed last.
    PhaseLimitReached { last_completed: String },
    /// A committed attempt stopped the run (blocked, needs clarification, or a failure).
    PhaseStopped {
        decision: Decision,
        outcome_path: String,
        transcript_path: String,
        signal: Option<i32>,
        retry_scheduled: bool,
        failed_check: Option<Box<FailedCheck>>,
    },
    /// As [`AttemptEnd::Uncommitted`].
    Uncommitted {
        end: Uncommitted,
        signal: Option<i32>,
    },
    /// A signal arrived while no attempt was running; `plan_complete` when nothing was left
    /// to launch.
    InterruptedBeforeLaunch { signal: i32, plan_complete: bool },
    /// A signal arrived while the run waited for a scheduled retry of `phase_id`; the
    /// schedule stays in state for a later run.
    InterruptedDuringWait { signal: i32, phase_id: String },
    /// A budget cap was reached before `phase_id` could be launched. `retry_scheduled` when
    /// that launch was a scheduled retry (the schedule stays in state).
    BudgetReached {
        reached: CapReached,
        phase_id: String,
        retry_scheduled: bool,
    },
    /// Admission refused the run.
    Refused(Box<RefusedRun<I>>),
    /// The plan file changed during the run.
    PlanChanged(PlanChange),
    /// An input became unusable (lock held, state or plan unreadable, workspace gone).
    Input(I),
    /// The accepted plan could not be recorded when no attempt followed.
    AcceptanceFailed(StateWriteError),
    /// A bug: an actor failed.
    Internal {
        message: String,
        attempt_may_be_unresolved: bool,
    },
}

impl<I> RunEnd<I> {
    /// The exit code of the invocation (docs/cli.md): a caught signal decides it wherever the
    /// run carries one.
    pub(crate) fn exit_code(&self) -> ExitCode {
        let or_signal =
            |signal: Option<i32>, otherwise: ExitCode| signal.map_or(otherwise, ExitCode::Signal);
        match self {
            Self::AllComplete | Self::PhaseLimitReached { .. } => ExitCode::Success,
            Self::PhaseStopped {
                decision, signal, ..
            } => or_signal(*signal, decision.status.exit_code()),
            Self::Uncommitted { signal, .. } => {
                or_signal(*signal, AttemptStatus::ExecutionIoFailed.exit_code())
            }
            Self::InterruptedBeforeLaunch { signal, .. }
            | Self::InterruptedDuringWait { signal, .. } => ExitCode::Signal(*signal),
            Self::BudgetReached { .. } => AttemptStatus::BudgetExceeded.exit_code(),
            Self::Refused(_) | Self::PlanChanged(_) | Self::Input(_) => ExitCode::InvalidInput,
            Self::AcceptanceFailed(_) | Self::Internal { .. } => ExitCode::AgentFailed,
        }
    }

    /// The signal that ends the run although the committed attempt was not interrupted: it
    /// arrived after the attempt's outcome was decided (an interrupt before that decides the
    /// outcome as `interrupted`). The outcome stands as decided.
    pub(crate) fn signal_after_decision(&self) -> Option<i32> {
        match self {
            Self::PhaseStopped {
                decision, signal, ..
            } => signal.filter(|_| decision.status != AttemptStatus::Interrupted),
            _ => None,
        }
    }
}
