//! The handler's children that no escaped-descendant sweep may touch though they started after
//! the worker: its helpers (hooks, Verify checks and their groups, until their runner reaped
//! them: a sweep would cut one short or steal its exit status) and its watchdogs. A helper is
//! spawned under the lock a sweep pass holds while it judges the handler's children. The lock
//! is taken last: no other lock is taken while it is held.

use std::io;
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};

use crate::domain::identity::ProcStat;

struct Spared {
    /// Each leads its own process group (pgid = pid).
    helpers: Vec<u32>,
    /// Pid and start time; a watchdog is never forgotten (the start time tells a reuse apart).
    watchdogs: Vec<(u32, Option<u64>)>,
}

static SPARED: Mutex<Spared> = Mutex::new(Spared {
    helpers: Vec::new(),
    watchdogs: Vec::new(),
});

/// The registry, locked: while it is held no helper starts.
pub(crate) struct Registry(MutexGuard<'static, Spared>);

/// Locks the registry (blocking: call it off the runtime threads).
pub(crate) fn lock() -> Registry {
    Registry(
        SPARED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

impl Registry {
    /// Whether a sweep must leave `process` alone: a helper, a member of a helper's group (its
    /// own cleanup stops those), or a watchdog.
    pub(crate) fn protects(&self, process: &ProcStat) -> bool {
        let spared = &self.0;
        spared.helpers.contains(&process.pid)
            || spared.helpers.contains(&process.pgrp)
            || spared.watchdogs.iter().any(|(pid, started)| {
                *pid == process.pid && started.is_none_or(|ticks| ticks == process.start_time_ticks)
            })
    }

    pub(crate) fn spare_watchdog(&mut self, pid: u32, started_ticks: Option<u64>) {
        self.0.watchdogs.push((pid, started_ticks));
    }
}

/// Spawns `command` (which must start its own process group) and registers it in one step.
pub(crate) fn spawn(command: &mut Command) -> io::Result<Child> {
    let mut registry = lock();
    let child = command.spawn()?;
    registry.0.helpers.push(child.id());
    Ok(child)
}

/// Forgets helper `pid`: call once it is reaped and its group is empty.
pub(crate) fn forget(pid: u32) {
    lock().0.helpers.retain(|registered| *registered != pid);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn stat(pid: u32, pgrp: u32) -> ProcStat {
        ProcStat {
            pid,
            ppid: 1,
            pgrp,
            state: 'S',
            start_time_ticks: 1,
            cpu_ticks: 0,
            reaped_children_ticks: 0,
        }
    }

    #[test]
    fn a_registered_helper_and_its_group_are_protected_until_forgotten() {
        let mut child = spawn(Command::new("true").process_group(0)).expect("spawn true");
        let pid = child.id();
        assert!(lock().protects(&stat(pid, pid)));
        assert!(
            lock().protects(&stat(pid + 100_000, pid)),
            "a member of its group"
        );
        assert!(!lock().protects(&stat(pid + 100_000, pid + 100_000)));
        let _ = child.wait();
        forget(pid);
        assert!(!lock().protects(&stat(pid, pid)));
    }

    #[test]
    fn a_spared_watchdog_is_protected_only_with_its_start_time() {
        // Above PID_MAX_LIMIT: no real process of the tests has it.
        let pid = 4_194_400;
        lock().spare_watchdog(pid, Some(7));
        assert!(!lock().protects(&stat(pid, pid)), "started at 1, not 7");
        let mut watchdog = stat(pid, pid);
        watchdog.start_time_ticks = 7;
        assert!(lock().protects(&watchdog));
        lock().spare_watchdog(pid + 1, None);
        assert!(
            lock().protects(&stat(pid + 1, 1)),
            "an unknown start time spares the pid"
        );
    }
}
