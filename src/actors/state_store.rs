//! StateStore: the only writer of `state.json` and `outcomes/*.json`.
//!
//! It holds the last *durable* state in memory. Each request applies one pure transition from
//! [`crate::domain::state`] to a copy, validates it, and replaces the file atomically; only
//! when the write succeeded does the copy become the current state. A failed write therefore
//! leaves both the file and the store's view at the last durable record, which is what
//! docs/state-and-recovery.md promises. The writes themselves (fsync, rename) run on tokio's
//! blocking pool, never on a runtime worker thread.

use std::io;
use std::path::Path;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::off_runtime;
use crate::domain::identity::ProcessIdentity;
use crate::domain::outcome::{OutcomeError, OutcomeRecord};
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::state::{ActiveAttempt, PlanRecord, State, StateError, StateLayout};
use crate::domain::timestamp::Timestamp;
use crate::platform::durable::{self, ReplaceError};

/// Why a state write did not happen (or did not become durable).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The transition does not apply to the current state (a caller bug, reported).
    #[error("{0}")]
    Transition(StateError),
    /// The result would break the schema or an invariant.
    #[error("refusing to write invalid state: {0}")]
    Invalid(StateError),
    /// The keyed state directories could not be created.
    #[error("{0}")]
    Directories(io::Error),
    /// `state.json` still holds the previous document.
    #[error("{path}: {source}")]
    NotReplaced { path: String, source: io::Error },
    /// Readers see the new document, but it may not survive a power loss.
    #[error("{path}: replaced, but not durably: {source}")]
    NotDurable { path: String, source: io::Error },
    /// The store actor is gone (only during teardown).
    #[error("state store stopped")]
    Stopped,
}

/// Why a commit did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The outcome record is invalid; nothing was written.
    #[error("invalid outcome: {0}")]
    InvalidOutcome(OutcomeError),
    /// The outcome record could not be written; nothing changed.
    #[error("{0}")]
    OutcomeWrite(io::Error),
    /// The outcome record is on disk but `state.json` does not reference it.
    #[error("{0}")]
    StateWrite(StoreError),
}

/// A prepared attempt plus what must be written in the same replacement.
pub struct Preparation {
    pub attempt: ActiveAttempt,
    /// A plan record to accept (first run, or an accepted change).
    pub accept: Option<PlanRecord>,
    /// Resolve the abandoned attempt as interrupted, finished at this time.
    pub resolve_abandoned_at: Option<Timestamp>,
}

pub enum StoreMsg {
    /// The last durable state.
    Current { reply: RpcReplyPort<State> },
    /// Record a plan acceptance on its own (used when no attempt follows).
    AcceptPlan {
        record: PlanRecord,
        reply: RpcReplyPort<Result<(), StoreError>>,
    },
    /// Record a prepared attempt; replies with the state now durable.
    Prepare {
        preparation: Box<Preparation>,
        reply: RpcReplyPort<Result<State, StoreError>>,
    },
    /// Record that the prepared attempt is running, with its identity when known.
    MarkRunning {
        attempt_id: String,
        identity: Option<ProcessIdentity>,
        reply: RpcReplyPort<Result<(), StoreError>>,
    },
    /// Write the outcome record, then commit it into the state, with the retry the policy
    /// scheduled after it (in the same replacement, so a crash never separates them).
    Commit {
        outcome: Box<OutcomeRecord>,
        schedule: Option<RetrySchedule>,
        reply: RpcReplyPort<Result<State, CommitError>>,
    },
}

pub struct StateStore;

pub struct StoreArgs {
    pub layout: StateLayout,
    pub loaded: State,
}

pub struct StoreState {
    layout: StateLayout,
    durable: State,
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
        off_runtime(move || remove_stale_temp_files(&dir)).await;
        Ok(StoreState {
            layout: args.layout,
            durable: args.loaded,
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
                let _ = reply.send(state.durable.clone());
            }
            StoreMsg::AcceptPlan { record, reply } => {
                let result = state
                    .replace("state-accept", |next| {
                        next.plan = Some(record);
                        Ok(())
                    })
                    .await;
                let _ = reply.send(result.map(drop));
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
                    .replace("state-running", |next| {
                        next.mark_running(&attempt_id, identity)
                    })
                    .await;
                let _ = reply.send(result.map(drop));
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

impl StoreState {
    async fn prepare(&mut self, preparation: Preparation) -> Result<State, StoreError> {
        let Preparation {
            attempt,
            accept,
            resolve_abandoned_at,
        } = preparation;
        let layout = self.layout.clone();
        off_runtime(move || ensure_dirs(&layout))
            .await
            .map_err(StoreError::Directories)?;
        self.replace("state-prepare", |next| {
            next.apply_preparation(attempt, accept, resolve_abandoned_at)
        })
        .await
    }

    /// Applies `transition` to a copy of the durable state, validates it and replaces the
    /// file. The in-memory state advances only when readers can see the new document.
    async fn replace(
        &mut self,
        failpoint_label: &'static str,
        transition: impl FnOnce(&mut State) -> Result<(), StateError>,
    ) -> Result<State, StoreError> {
        let mut next = self.durable.clone();
        transition(&mut next).map_err(StoreError::Transition)?;
        next.validate(&self.layout).map_err(StoreError::Invalid)?;
        let path = self.layout.state_path();
        // Never a document the reader would refuse (issue 23).
        let bytes = next
            .to_checked_json()
            .map_err(StoreError::Invalid)?
            .into_bytes();
        let target = path.clone();
        let written = off_runtime(move || {
            durable::replace_atomically(Path::new(&target), &bytes, failpoint_label)
        })
        .await;
        match written {
            Ok(()) => {
                tracing::info!(write = failpoint_label, path, "state committed");
                self.durable = next;
                Ok(self.durable.clone())
            }
            Err(ReplaceError::NotReplaced(source)) => {
                tracing::info!(write = failpoint_label, path, error = %source, "state write failed; last durable record kept");
                Err(StoreError::NotReplaced { path, source })
            }
            Err(ReplaceError::NotDurable(source)) => {
                // Readers already see the new document, so it is the current state from now
                // on; the caller still reports the failure, because it may not survive a
                // power loss.
                tracing::info!(write = failpoint_label, path, error = %source, "state replaced but not durable");
                self.durable = next;
                Err(StoreError::NotDurable { path, source })
            }
        }
    }

    async fn commit(
        &mut self,
        outcome: OutcomeRecord,
        schedule: Option<RetrySchedule>,
    ) -> Result<State, CommitError> {
        outcome.validate().map_err(CommitError::InvalidOutcome)?;
        let path = self.layout.outcome_path(&outcome.attempt_id);
        let bytes = outcome.to_json().into_bytes();
        let target = path.clone();
        off_runtime(move || durable::write_new_durably(Path::new(&target), &bytes, "outcome"))
            .await
            .map_err(CommitError::OutcomeWrite)?;
        tracing::info!(path, status = %outcome.status, "outcome written");
        self.replace("state-commit", |next| {
            next.commit(&outcome, &path)?;
            match schedule {
                Some(schedule) => next.schedule_retry(schedule),
                None => Ok(()),
            }
        })
        .await
        .map_err(CommitError::StateWrite)
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

/// Removes temp files a handler killed mid-write left next to `state.json`. They were never
/// renamed into place, so they hold nothing authoritative; the caller holds the plan-workspace
/// lock, so no other handler is writing one right now.
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
