//! StateStore: the only writer of `state.json` and `outcomes/*.json`.
//!
//! It holds the last *durable* state in memory. Each request applies one pure transition from
//! [`crate::domain::state`] to a copy, validates it, and replaces the file atomically; only
//! when the write succeeded does the copy become the current state. A failed write therefore
//! leaves both the file and the store's view at the last durable record — which is exactly what
//! SPEC §7 requires the runner to keep.

use std::path::Path;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::domain::identity::ProcessIdentity;
use crate::domain::outcome::OutcomeRecord;
use crate::domain::state::{ActiveAttempt, PlanRecord, State, StateLayout};
use crate::domain::timestamp::Timestamp;
use crate::platform::durable::{self, ReplaceError};

/// Why a commit did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitError {
    /// The outcome record could not be written; nothing changed.
    OutcomeWrite(String),
    /// The outcome record is on disk but `state.json` does not reference it.
    StateWrite(String),
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
    /// The state as loaded at start (the caller loads it once through [`load_state`]).
    Current { reply: RpcReplyPort<State> },
    /// Record a plan acceptance on its own (used when no attempt follows).
    AcceptPlan {
        record: PlanRecord,
        reply: RpcReplyPort<Result<(), String>>,
    },
    /// Record a prepared attempt; replies with the state now durable.
    Prepare {
        preparation: Box<Preparation>,
        reply: RpcReplyPort<Result<State, String>>,
    },
    /// Record that the prepared attempt is running, with its identity when known.
    MarkRunning {
        attempt_id: String,
        identity: Option<ProcessIdentity>,
        reply: RpcReplyPort<Result<(), String>>,
    },
    /// Write the outcome record, then commit it into the state.
    Commit {
        outcome: Box<OutcomeRecord>,
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
        remove_stale_temp_files(&args.layout);
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
                let result = state.replace("state-accept", |next| {
                    next.plan = Some(record);
                    Ok(())
                });
                let _ = reply.send(result.map(|_| ()));
            }
            StoreMsg::Prepare { preparation, reply } => {
                let Preparation {
                    attempt,
                    accept,
                    resolve_abandoned_at,
                } = *preparation;
                let result = state.ensure_dirs().and_then(|()| {
                    state.replace("state-prepare", |next| {
                        if let Some(finished_at) = resolve_abandoned_at {
                            next.resolve_abandoned(finished_at)
                                .map_err(|e| e.to_string())?;
                        }
                        if let Some(record) = accept {
                            next.plan = Some(record);
                        }
                        next.prepare(attempt).map_err(|e| e.to_string())
                    })
                });
                let _ = reply.send(result);
            }
            StoreMsg::MarkRunning {
                attempt_id,
                identity,
                reply,
            } => {
                let result = state.replace("state-running", |next| {
                    next.mark_running(&attempt_id, identity)
                        .map_err(|e| e.to_string())
                });
                let _ = reply.send(result.map(|_| ()));
            }
            StoreMsg::Commit { outcome, reply } => {
                let _ = reply.send(state.commit(&outcome));
            }
        }
        Ok(())
    }
}

impl StoreState {
    /// Applies `transition` to a copy of the durable state, validates it and replaces the
    /// file. The in-memory state advances only when the write succeeded.
    fn replace(
        &mut self,
        failpoint_label: &str,
        transition: impl FnOnce(&mut State) -> Result<(), String>,
    ) -> Result<State, String> {
        let mut next = self.durable.clone();
        transition(&mut next)?;
        next.validate(&self.layout)
            .map_err(|error| format!("refusing to write invalid state: {error}"))?;
        let path = self.layout.state_path();
        match durable::replace_atomically(
            Path::new(&path),
            next.to_json().as_bytes(),
            failpoint_label,
        ) {
            Ok(()) => {
                tracing::info!(write = failpoint_label, path, "state committed");
                self.durable = next;
                Ok(self.durable.clone())
            }
            Err(ReplaceError::NotReplaced(error)) => {
                tracing::info!(write = failpoint_label, path, %error, "state write failed; last durable record kept");
                Err(format!("{path}: {error}"))
            }
            Err(error @ ReplaceError::NotDurable(_)) => {
                // Readers already see the new document, so it is the current state from now
                // on; the caller still reports the failure, because it may not survive a
                // power loss.
                tracing::info!(write = failpoint_label, path, %error, "state replaced but not durable");
                self.durable = next;
                Err(format!("{path}: {error}"))
            }
        }
    }

    fn commit(&mut self, outcome: &OutcomeRecord) -> Result<State, CommitError> {
        outcome
            .validate()
            .map_err(|error| CommitError::OutcomeWrite(format!("invalid outcome: {error}")))?;
        let path = self.layout.outcome_path(&outcome.attempt_id);
        durable::write_new_durably(Path::new(&path), outcome.to_json().as_bytes(), "outcome")
            .map_err(|error| CommitError::OutcomeWrite(error.to_string()))?;
        tracing::info!(path, status = %outcome.status, "outcome written");
        self.replace("state-commit", |next| {
            next.commit(outcome, &path).map_err(|e| e.to_string())
        })
        .map_err(CommitError::StateWrite)
    }

    /// Creates the keyed directory and its artifact directories before the first attempt.
    fn ensure_dirs(&self) -> Result<(), String> {
        for dir in [
            self.layout.dir.clone(),
            self.layout.prompts_dir(),
            self.layout.transcripts_dir(),
            self.layout.outcomes_dir(),
        ] {
            durable::create_dir_all_durably(Path::new(&dir)).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Removes temp files a handler killed mid-write left next to `state.json`. They were never
/// renamed into place, so they hold nothing authoritative; the caller holds the plan-workspace
/// lock, so no other handler is writing one right now.
fn remove_stale_temp_files(layout: &StateLayout) {
    let Ok(entries) = std::fs::read_dir(&layout.dir) else {
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

/// Reads `state.json` (a missing file is the empty state). Used once at start, before the
/// store takes ownership, and by the read-only `status` and `check` commands.
pub fn load_state(layout: &StateLayout) -> Result<State, String> {
    let path = layout.state_path();
    match std::fs::read(&path) {
        Ok(bytes) => State::from_json(&bytes, layout).map_err(|error| format!("{path}: {error}")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(error) => Err(format!(
            "{path}: cannot read state: {}",
            crate::platform::locate::os_message(&error)
        )),
    }
}
