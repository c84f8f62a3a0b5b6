//! WorkspaceLocks: owns every directory lock of the invocation — the plan workspace for the
//! whole run, each execution workspace for its attempt. One directory reached by two paths is
//! locked once and reference-counted.

use std::path::PathBuf;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::Instrument;

use crate::actors::off_runtime;
use crate::platform::locks::{DirLock, LockError, LockScope, dir_identity, try_lock_dir};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LockId(u64);

pub(crate) enum LockMsg {
    /// Take the lock on `dir` now or fail; one this invocation holds on the same directory is
    /// reused.
    Acquire {
        dir: String,
        scope: LockScope,
        reply: RpcReplyPort<Result<LockId, LockError>>,
    },
    /// Give back one reference; the lock is released with the last one.
    Release { id: LockId },
}

pub(crate) struct WorkspaceLocks;

struct Held {
    id: LockId,
    lock: DirLock,
    references: usize,
}

pub(crate) struct LocksState {
    held: Vec<Held>,
    next_id: u64,
    span: tracing::Span,
}

impl Actor for WorkspaceLocks {
    type Msg = LockMsg;
    type State = LocksState;
    type Arguments = tracing::Span;

    async fn pre_start(
        &self,
        _myself: ActorRef<LockMsg>,
        span: tracing::Span,
    ) -> Result<LocksState, ActorProcessingErr> {
        Ok(LocksState {
            held: Vec::new(),
            next_id: 0,
            span,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<LockMsg>,
        message: LockMsg,
        state: &mut LocksState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        match message {
            LockMsg::Acquire { dir, scope, reply } => {
                let acquired = state.acquire(dir, scope).instrument(span).await;
                let _ = reply.send(acquired);
            }
            LockMsg::Release { id } => span.in_scope(|| state.release(id)),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<LockMsg>,
        state: &mut LocksState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        for held in state.held.drain(..) {
            tracing::info!(parent: &span, dir = %held.lock.dir.display(), "lock released");
        }
        Ok(())
    }
}

impl LocksState {
    /// One more reference to the held lock on the directory with `identity`, if any.
    fn reuse(&mut self, identity: (u64, u64)) -> Option<LockId> {
        let held = self
            .held
            .iter_mut()
            .find(|held| held.lock.identity == identity)?;
        held.references += 1;
        Some(held.id)
    }

    async fn acquire(&mut self, dir: String, scope: LockScope) -> Result<LockId, LockError> {
        let path = PathBuf::from(&dir);
        let identity = off_runtime(|| dir_identity(&path))
            .await
            .map_err(|error| LockError::Io {
                scope,
                dir: path.clone(),
                error,
            });
        if let Ok(identity) = identity
            && let Some(id) = self.reuse(identity)
        {
            tracing::debug!(dir, scope = scope.name(), "lock already held; reused");
            return Ok(id);
        }
        let locked = match identity {
            Ok(_) => off_runtime(|| try_lock_dir(&path, scope)).await,
            Err(error) => Err(error),
        };
        let lock = locked.inspect_err(|error| {
            tracing::info!(dir, scope = scope.name(), %error, "lock not taken");
        })?;
        self.next_id += 1;
        let id = LockId(self.next_id);
        tracing::info!(dir, scope = scope.name(), "lock taken");
        self.held.push(Held {
            id,
            lock,
            references: 1,
        });
        Ok(id)
    }

    fn release(&mut self, id: LockId) {
        if let Some(index) = self.held.iter().position(|held| held.id == id) {
            self.held[index].references -= 1;
            if self.held[index].references == 0 {
                let held = self.held.remove(index);
                tracing::info!(dir = %held.lock.dir.display(), "lock released");
            }
        }
    }
}
