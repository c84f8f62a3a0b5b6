//! What the run supervisor is told — by its tasks, the signal intake, its retry timer and the
//! attempt supervisor (through a derived reference, so the attempt needs nothing of this layer
//! but [`AttemptReport`]) — and what it hands the command at the end.

use ractor::ActorRef;

use super::workspace_locks::LockId;
use crate::actors::state_store::StoreMsg;
use crate::domain::lifecycle::run::{AttemptReport, RunInput};
use crate::invocation::InputError;

pub(crate) type RunEnd = crate::domain::lifecycle::run::RunEnd<InputError>;

#[derive(Debug)]
pub(crate) struct RunResult {
    pub(crate) end: RunEnd,
    /// The first phase not completed in the final durable state; `None` when all are
    /// complete or the state was never taken over.
    pub(crate) next_phase: Option<String>,
}

impl RunResult {
    pub(crate) fn exit(&self) -> crate::domain::exit_code::ExitCode {
        self.end.exit_code()
    }
}

pub(crate) enum RunMsg {
    /// Something the run loop must hear, fed to it as it is: a finished step, a caught
    /// signal, the attempt's end, a due retry.
    Input(Box<RunInput<InputError>>),
    /// Admission took the state over: the store runs from now on.
    StoreStarted(ActorRef<StoreMsg>),
    /// The execution workspace of the next attempt is resolved and locked.
    Reserved(Reservation),
}

/// A locked execution workspace, held until the attempt that runs in it concludes.
#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    pub(crate) workspace: String,
    pub(crate) lock: LockId,
}

impl RunMsg {
    /// A step of the run failed for a bug of ours, leaving no attempt unresolved.
    pub(crate) fn actor_failed(message: String) -> Self {
        Self::from(RunInput::ActorFailed {
            message,
            attempt_may_be_unresolved: false,
        })
    }
}

impl From<RunInput<InputError>> for RunMsg {
    fn from(input: RunInput<InputError>) -> Self {
        Self::Input(Box::new(input))
    }
}

impl From<Box<AttemptReport>> for RunMsg {
    fn from(report: Box<AttemptReport>) -> Self {
        Self::from(RunInput::AttemptConcluded(report))
    }
}

/// Lets the attempt supervisor report through a `DerivedActorRef<Box<AttemptReport>>`.
impl TryFrom<RunMsg> for Box<AttemptReport> {
    type Error = RunMsg;

    fn try_from(message: RunMsg) -> Result<Self, RunMsg> {
        match message {
            RunMsg::Input(input) => match *input {
                RunInput::AttemptConcluded(report) => Ok(report),
                other => Err(RunMsg::from(other)),
            },
            other => Err(other),
        }
    }
}
