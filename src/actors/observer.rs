//! The run's outward interface besides its result: every lifecycle event goes to a
//! [`RunObserver`] as it happens. Implementations (progress lines, the event stream) live in the
//! command layer; they must not block, since they are called from the actors' handlers.

use crate::domain::events::RunEvent;

/// Receives every event of a run, in order.
pub trait RunObserver: Send + Sync + 'static {
    fn observe(&self, event: &RunEvent);
}
