//! The run's outward interface besides its result: every lifecycle event goes to a
//! [`RunObserver`], stamped by an [`Emitter`]. Implementations live in the command layer; they
//! must not block, since they are called from the actors' handlers.

use std::sync::Arc;

use crate::domain::events::{EventRecord, RunEvent};

/// Receives every event of a run, in order.
pub(crate) trait RunObserver: Send + Sync + 'static {
    fn observe(&self, record: &EventRecord);
}

/// Stamps and hands events to the run's observer; cheap to clone into every actor.
#[derive(Clone)]
pub(crate) struct Emitter {
    observer: Arc<dyn RunObserver>,
    run_id: Arc<str>,
}

impl Emitter {
    pub(crate) fn new(observer: Arc<dyn RunObserver>, run_id: &str) -> Self {
        Self {
            observer,
            run_id: run_id.into(),
        }
    }

    /// The invocation's id, which every record carries as `run_id`.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    pub(crate) fn emit(&self, attempt_id: Option<&str>, event: RunEvent) {
        self.observer.observe(&EventRecord {
            at: chrono::Utc::now(),
            run_id: self.run_id.to_string(),
            attempt_id: attempt_id.map(str::to_owned),
            event,
        });
    }
}
