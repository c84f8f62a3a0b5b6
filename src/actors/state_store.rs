//! StateStore: the only writer of `state.json` and `outcomes/*.json`. It holds the last
//! *durable* state: each request applies one pure transition to a copy, validates it and
//! replaces the file off the runtime; only a write that succeeded makes the copy current
//! (docs/architecture.md, "Durability").

use std::io;
use std::path::Path;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::Instrument;

use super::off_runtime;
use crate::domain::identity::ProcessIdentity;
use crate::domain::outcome::OutcomeRecord;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::state::{
    ActiveAttempt, CommitError, PlanRecord, State, StateError, StateLayout, StateWriteError,
};
use crate::domain::timestamp::Timestamp;
use crate::platform::durable::{self, ReplaceError};

/// A prepared attempt plus what must be written in the same replacement.
pub(crate) struct Preparation {
    pub(crate) attempt: ActiveAttempt,
    /// A plan record to accept (first run, or an accepted change).
    pub(crate) accept: Option<PlanRecord>,
    /// Resolve the abandoned attempt as interrupted, finished at this time.
    pub(crate) resolve_abandoned_at: Option<Timestamp>,
}

pub(crate) enum StoreMsg {
    /// The last durable state (shared, not copied: a snapshot the store never changes).
    Current { reply: RpcReplyPort<Arc<State>> },
    /// A plan acceptance on its own (when no attempt follows).
    AcceptPlan {
        record: PlanRecord,
        reply: RpcReplyPort<Result<(), StateWriteError>>,
    },
    /// Replies with the state now durable.
    Prepare {
        preparation: Box<Preparation>,
        reply: RpcReplyPort<Result<Arc<State>, StateWriteError>>,
    },
    MarkRunning {
        attempt_id: String,
        identity: Option<ProcessIdentity>,
        reply: RpcReplyPort<Result<(), StateWriteError>>,
    },
    /// The outcome record, then its commit into the state with the retry the policy scheduled
    /// after it (in the same replacement, so a crash never separates them).
    Commit {
        outcome: Box<OutcomeRecord>,
        schedule: Option<RetrySchedule>,
        reply: RpcReplyPort<Result<(), CommitError>>,
    },
}

pub(crate) struct StateStore;

pub(crate) struct StoreArgs {
    pub(crate) layout: StateLayout,
    pub(crate) loaded: State,
    /// For what the store does before its first message (ractor runs each handler in the span
    /// of the message's sender).
    pub(crate) span: tracing::Span,
}

pub(crate) struct StoreState {
    layout: StateLayout,
    /// Shared with what replies hand out: a write builds the next state beside it and
    /// replaces it, so a reply is a reference count, not a copy of every committed outcome.
    durable: Arc<State>,
    /// The keyed directories exist (created before this run's first prepared attempt).
    directories_ready: bool,
}

impl Actor for StateStore {
    type Msg = StoreMsg;
    type State = StoreState;
    type Arguments = StoreArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<StoreMsg>,
        args: StoreArgs,
    ) -> Result<StoreState, ActorProcessingErr> {
        let dir = args.layout.dir.clone();
        off_runtime(move || remove_stale_temp_files(&dir))
            .instrument(args.span.clone())
            .await;
        Ok(StoreState {
            layout: args.layout,
            durable: Arc::new(args.loaded),
            directories_ready: false,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<StoreMsg>,
        message: StoreMsg,
        state: &mut StoreState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StoreMsg::Current { reply } => {
                let _ = reply.send(Arc::clone(&state.durable));
            }
            StoreMsg::AcceptPlan { record, reply } => {
                let result = state
                    .replace_after(Before::Nothing, "state-accept", |next| {
                        next.plan = Some(record);
                        Ok(())
                    })
                    .await;
                let _ = reply.send(result.map_err(Into::into));
            }
            StoreMsg::Prepare { preparation, reply } => {
                let _ = reply.send(state.prepare(*preparation).await);
            }
            StoreMsg::MarkRunning {
                attempt_id,
                identity,
                reply,
            } => {
                let result = state
                    .replace_after(Before::Nothing, "state-running", |next| {
                        next.mark_running(&attempt_id, identity)
                    })
                    .await;
                let _ = reply.send(result.map_err(Into::into));
            }
            StoreMsg::Commit {
                outcome,
                schedule,
                reply,
            } => {
                let _ = reply.send(state.commit(*outcome, schedule).await);
            }
        }
        Ok(())
    }
}

/// Blocking work a state replacement depends on, done in the same trip off the runtime.
enum Before {
    Nothing,
    /// The keyed directories, before the run's first prepared attempt.
    Directories(StateLayout),
    /// The outcome record the new state references, written (and fsynced) first.
    Outcome {
        path: String,
        bytes: Vec<u8>,
    },
}

enum WriteFailure {
    /// The work before it failed; nothing was replaced.
    Before(io::Error),
    State(StateWriteError),
}

impl From<WriteFailure> for StateWriteError {
    /// Outside a commit, only the keyed directories come before a state write.
    fn from(failure: WriteFailure) -> Self {
        match failure {
            WriteFailure::Before(error) => Self::Directories(error),
            WriteFailure::State(error) => error,
        }
    }
}

impl StoreState {
    async fn prepare(&mut self, preparation: Preparation) -> Result<Arc<State>, StateWriteError> {
        let Preparation {
            attempt,
            accept,
            resolve_abandoned_at,
        } = preparation;
        let before = if self.directories_ready {
            Before::Nothing
        } else {
            Before::Directories(self.layout.clone())
        };
        self.replace_after(before, "state-prepare", |next| {
            next.apply_preparation(attempt, accept, resolve_abandoned_at)
        })
        .await?;
        // The prompt is rendered from it.
        Ok(Arc::clone(&self.durable))
    }

    /// Does `before`, then replaces the state with the result of `transition`, in one trip off
    /// the runtime. A transition that does not apply is reported after `before` is done, as if
    /// the two were separate writes. The in-memory state advances only when readers can see
    /// the new document.
    async fn replace_after(
        &mut self,
        before: Before,
        failpoint_label: &'static str,
        transition: impl FnOnce(&mut State) -> Result<(), StateError>,
    ) -> Result<(), WriteFailure> {
        let mut next = State::clone(&self.durable);
        let document = transition(&mut next)
            .map_err(StateWriteError::Transition)
            .and_then(|()| {
                next.validate(&self.layout)
                    .map_err(StateWriteError::Invalid)
            })
            // Never a document the reader would refuse.
            .and_then(|()| next.to_checked_json().map_err(StateWriteError::Invalid));
        let path = self.layout.state_path();
        let target = path.clone();
        let outcome_written = match &before {
            Before::Outcome { path, .. } => Some(path.clone()),
            _ => None,
        };
        let directories = matches!(before, Before::Directories(_));
        let written = off_runtime(move || {
            match before {
                Before::Nothing => {}
                Before::Directories(layout) => ensure_dirs(&layout)?,
                Before::Outcome { path, bytes } => {
                    durable::write_new_durably(Path::new(&path), &bytes, "outcome")?
                }
            }
            Ok(document.map(|document| {
                durable::replace_atomically(
                    Path::new(&target),
                    document.as_bytes(),
                    failpoint_label,
                )
            }))
        })
        .await
        .map_err(WriteFailure::Before)?;
        self.directories_ready |= directories;
        if let Some(path) = outcome_written {
            tracing::info!(path, "outcome written");
        }
        match written.map_err(WriteFailure::State)? {
            Ok(()) => {
                tracing::info!(write = failpoint_label, path, "state committed");
                self.durable = Arc::new(next);
                Ok(())
            }
            Err(ReplaceError::NotReplaced(source)) => {
                tracing::info!(write = failpoint_label, path, error = %source, "state write failed; last durable record kept");
                Err(WriteFailure::State(StateWriteError::NotReplaced {
                    path,
                    source,
                }))
            }
            Err(ReplaceError::NotDurable(source)) => {
                // Readers already see the new document, so it is the current state from now
                // on; the caller still reports the failure, because it may not survive a
                // power loss.
                tracing::info!(write = failpoint_label, path, error = %source, "state replaced but not durable");
                self.durable = Arc::new(next);
                Err(WriteFailure::State(StateWriteError::NotDurable {
                    path,
                    source,
                }))
            }
        }
    }

    async fn commit(
        &mut self,
        outcome: OutcomeRecord,
        schedule: Option<RetrySchedule>,
    ) -> Result<(), CommitError> {
        outcome.validate().map_err(CommitError::InvalidOutcome)?;
        let path = self.layout.outcome_path(&outcome.attempt_id);
        let before = Before::Outcome {
            path: path.clone(),
            bytes: outcome.to_json().into_bytes(),
        };
        let committed = self
            .replace_after(before, "state-commit", |next| {
                next.commit(&outcome, &path)?;
                match schedule {
                    Some(schedule) => next.schedule_retry(schedule),
                    None => Ok(()),
                }
            })
            .await;
        match committed {
            Ok(()) => Ok(()),
            Err(WriteFailure::Before(error)) => Err(CommitError::OutcomeWrite(error)),
            Err(WriteFailure::State(error)) => Err(CommitError::StateWrite(error)),
        }
    }
}

/// Creates the keyed directory and its artifact directories before the first attempt.
fn ensure_dirs(layout: &StateLayout) -> io::Result<()> {
    for dir in [
        layout.dir.clone(),
        layout.prompts_dir(),
        layout.transcripts_dir(),
        layout.outcomes_dir(),
    ] {
        durable::create_dir_all_durably(Path::new(&dir))?;
    }
    Ok(())
}

/// Removes temp files a handler killed mid-write left next to `state.json` (never renamed
/// into place; the plan-workspace lock is ours, so no other handler is writing one).
fn remove_stale_temp_files(dir: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".state.json.") && name.ends_with(".tmp") {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(file = %name, "stale state temp file removed"),
                Err(error) => {
                    tracing::warn!(file = %name, %error, "stale state temp file not removed")
                }
            }
        }
    }
}
