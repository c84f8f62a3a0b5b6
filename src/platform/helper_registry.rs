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

use std::io;
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};

use crate::domain::identity::ProcStat;

/// Pids of the live helpers; each leads its own process group (pgid = pid).
static HELPERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The registry, locked: while it is held no helper starts, so a sweep's view of the
/// handler's children cannot include an unregistered one.
pub struct Registry(MutexGuard<'static, Vec<u32>>);

/// Locks the registry (blocking: call it off the runtime threads).
pub fn lock() -> Registry {
    Registry(
        HELPERS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

impl Registry {
    /// Whether the sweep must leave `process` alone: a registered helper, or a member of a
    /// registered helper's group (its own cleanup stops those).
    pub fn protects(&self, process: &ProcStat) -> bool {
        self.0.contains(&process.pid) || self.0.contains(&process.pgrp)
    }
}

/// Spawns `command` (which must start its own process group) and registers it in one step.
pub fn spawn(command: &mut Command) -> io::Result<Child> {
    let mut registry = lock();
    let child = command.spawn()?;
    registry.0.push(child.id());
    Ok(child)
}

/// Forgets helper `pid`: call once it is reaped and its group is empty.
pub fn forget(pid: u32) {
    lock().0.retain(|registered| *registered != pid);
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
}
