//! The handler's helper children — hook commands and verification checks, processes it starts
//! besides the workers — registered so that no escaped-descendant sweep touches them.
//!
//! The sweep ([`super::descendant_sweep`]) treats every child of the handler that started after
//! the worker as one of the worker's escaped descendants: it stops it, or reaps it if it is a
//! zombie. A helper that runs at the same time (a slow `phase-complete` hook while the next
//! phase's worker ends) is such a child without being the worker's: stopping it would cut the
//! notification short, and reaping it would steal the exit status its runner waits for. So a
//! helper is spawned under the registry's lock and stays registered, with its process group,
//! until its runner has reaped it and stopped its group; a sweep pass holds the same lock while
//! it judges the handler's children, and leaves every registered helper and member of a
//! registered helper's group alone.
//!
//! The watchdogs the handler starts (`super::watchdog`) are spared the same way, by pid and
//! start time (a reused pid is not one): a replacement starts after the worker, so the sweep
//! would take it for an escapee, and a dead one is for the watchdog monitor to reap. The
//! activity sampler asks the registry too, so neither counts as the worker's.
//!
//! The registry's lock is taken last: no other lock is taken while it is held.

use std::io;
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};

use crate::domain::identity::ProcStat;

/// The processes every sweep spares.
struct Spared {
    /// Pids of the live helpers; each leads its own process group (pgid = pid).
    helpers: Vec<u32>,
    /// Every watchdog this handler started, with its start time when it could be read.
    watchdogs: Vec<(u32, Option<u64>)>,
}

static SPARED: Mutex<Spared> = Mutex::new(Spared {
    helpers: Vec::new(),
    watchdogs: Vec::new(),
});

/// The registry, locked: while it is held no helper starts, so a sweep's view of the
/// handler's children cannot include an unregistered one.
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
    /// Whether the sweep must leave `process` alone: a registered helper, a member of a
    /// registered helper's group (its own cleanup stops those), or one of the handler's
    /// watchdogs.
    pub(crate) fn protects(&self, process: &ProcStat) -> bool {
        let spared = &self.0;
        spared.helpers.contains(&process.pid)
            || spared.helpers.contains(&process.pgrp)
            || spared.watchdogs.iter().any(|(pid, started)| {
                *pid == process.pid && started.is_none_or(|ticks| ticks == process.start_time_ticks)
            })
    }

    /// [`spare_watchdog`] for a caller that holds the lock already (from before the fork).
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

/// Spares watchdog `pid`, started at `started_ticks`, from every sweep for the rest of the
/// handler's life (a watchdog's pid is never forgotten: the start time tells a reuse apart).
pub(crate) fn spare_watchdog(pid: u32, started_ticks: Option<u64>) {
    lock().spare_watchdog(pid, started_ticks);
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
        spare_watchdog(pid, Some(7));
        assert!(!lock().protects(&stat(pid, pid)), "started at 1, not 7");
        let mut watchdog = stat(pid, pid);
        watchdog.start_time_ticks = 7;
        assert!(lock().protects(&watchdog));
        spare_watchdog(pid + 1, None);
        assert!(
            lock().protects(&stat(pid + 1, 1)),
            "an unknown start time spares the pid"
        );
    }
}
