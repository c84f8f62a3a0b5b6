//! Whether a `run` is in progress on a plan workspace, for `status` and `check`: its handler
//! holds the plan-workspace lock for the whole invocation, so an active attempt is then the
//! running one, not an abandoned one.

use std::path::Path;

use crate::platform::locate::PlanLocation;
use crate::platform::locks::lock_holder;

/// A handler holds the plan-workspace lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunInProgress {
    /// The handler's pid, when it is visible from here.
    pub handler_pid: Option<u32>,
}

/// The run holding `location`'s plan workspace, if any. The lock is looked up, never taken;
/// when the lock table cannot be read the answer is "none", as before this probe existed.
pub fn run_in_progress(location: &PlanLocation) -> Option<RunInProgress> {
    match lock_holder(Path::new(&location.workspace)) {
        Ok(holder) => holder.map(|holder| RunInProgress {
            handler_pid: holder.pid,
        }),
        Err(error) => {
            tracing::debug!(%error, "cannot tell whether a run holds the plan workspace");
            None
        }
    }
}

impl RunInProgress {
    /// `handler pid N holds the plan workspace lock`.
    pub fn describe(&self) -> String {
        match self.handler_pid {
            Some(pid) => format!("handler pid {pid} holds the plan workspace lock"),
            None => "a handler holds the plan workspace lock".to_owned(),
        }
    }
}
