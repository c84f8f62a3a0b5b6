//! Whether a `run` is in progress on a plan workspace, for `status` and `check`: its handler
//! holds the plan-workspace lock for the whole invocation, so an active attempt is then the
//! running one, not an abandoned one.

use std::path::Path;

use crate::domain::identity::{Liveness, liveness};
use crate::domain::state::ActiveAttempt;
use crate::domain::watchdog::ATTEMPT_ENV;
use crate::platform::locate::PlanLocation;
use crate::platform::locks::lock_holder;
use crate::platform::proc;

/// A handler holds the plan-workspace lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunInProgress {
    /// The handler's pid, when it is visible from here.
    pub handler_pid: Option<u32>,
}

/// The run holding `location`'s plan workspace, if any. The lock is looked up, never taken;
/// when the lock table cannot be read the answer is "none", as before this probe existed.
pub(crate) fn run_in_progress(location: &PlanLocation) -> Option<RunInProgress> {
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
    pub(crate) fn describe(&self) -> String {
        match self.handler_pid {
            Some(pid) => format!("handler pid {pid} holds the plan workspace lock"),
            None => "a handler holds the plan workspace lock".to_owned(),
        }
    }
}

/// The live processes that carry `attempt_id` in their environment (every worker does, and
/// its descendants inherit it, also those that left the worker's group): what may still run
/// of that attempt. `None` when `/proc` cannot be scanned. Read-only. A process that cleared
/// its environment cannot be found this way.
pub(crate) fn attempt_processes(attempt_id: &str) -> Option<Vec<u32>> {
    let wanted = [format!("{ATTEMPT_ENV}={attempt_id}")];
    let mut pids: Vec<u32> = proc::processes_with_env(&wanted)
        .ok()?
        .iter()
        .map(|process| process.pid)
        .collect();
    pids.sort_unstable();
    Some(pids)
}

/// Whether the worker recorded for `attempt` is still the same live process (same pid,
/// group, boot and start time, not a zombie); `None` without a recorded identity or when
/// `/proc` cannot tell. Read-only: the process is never signalled.
pub(crate) fn recorded_worker_alive(attempt: &ActiveAttempt) -> Option<bool> {
    let identity = attempt.process.as_ref()?;
    let boot_id = proc::boot_id().ok()?;
    let observed = proc::stat(identity.pid).ok()?;
    Some(liveness(identity, &boot_id, observed.as_ref()) == Liveness::Alive)
}
