//! The rules for each process the escaped-descendant sweep meets: which of the handler's
//! children (adoptees: descendants that left the worker's group and were re-parented to the
//! subreaper handler) it stops, and how it freezes their lineages level by level before it
//! kills them (docs/architecture.md, "Process groups", says why).

use super::identity::ProcStat;

/// What the sweep does with one of the handler's children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildVerdict {
    /// A zombie: reap it by pid.
    Reap,
    /// An adoptee: stop it and its lineage.
    Stop,
    /// The leader (tokio's), the handler itself, or a child the handler had before the worker.
    Leave,
}

/// The facts the rules need besides the process itself.
pub struct SweepScope<'a> {
    pub handler: u32,
    /// The worker's leader (also its pgid).
    pub leader: u32,
    /// The leader's start time; `None` when unknown — then no adoptee can be told apart from
    /// an inherited child, and nothing is stopped.
    pub worker_started_ticks: Option<u64>,
    /// Whether a child is one the handler inherited across `exec`.
    pub inherited: &'a dyn Fn(&ProcStat) -> bool,
    /// Whether a process is one of the handler's helpers (a hook or a verification check,
    /// or a member of its group): never the worker's, and its own runner reaps it.
    pub helper: &'a dyn Fn(&ProcStat) -> bool,
}

pub(crate) fn judge_child(scope: &SweepScope<'_>, child: &ProcStat) -> ChildVerdict {
    // A helper's zombie is its runner's to reap: reaping it here would steal its exit status.
    if child.pid == scope.leader || child.pid == scope.handler || (scope.helper)(child) {
        return ChildVerdict::Leave;
    }
    if child.is_defunct() {
        return ChildVerdict::Reap;
    }
    // Start times have clock-tick resolution (10 ms), so only a strictly earlier start proves
    // a child is not the worker's; the inherited snapshot covers the rest.
    let predates = scope
        .worker_started_ticks
        .is_none_or(|started| child.start_time_ticks < started);
    if predates || (scope.inherited)(child) {
        ChildVerdict::Leave
    } else {
        ChildVerdict::Stop
    }
}

/// A process the sweep SIGKILLed, as the sweep saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Killed {
    pub pid: u32,
    pub start_time_ticks: u64,
}

/// The pids of `killed` that still live: what a sweep that gives up reports as surviving
/// SIGKILL. A zombie is dead (it runs nothing and holds no pipe), and a process with another
/// start time is a new one that reused the pid.
pub(crate) fn survivors(killed: &[Killed], stat_of: impl Fn(u32) -> Option<ProcStat>) -> Vec<u32> {
    killed
        .iter()
        .filter(|killed| {
            stat_of(killed.pid).is_some_and(|now| {
                now.start_time_ticks == killed.start_time_ticks && !now.is_defunct()
            })
        })
        .map(|killed| killed.pid)
        .collect()
}

/// Whether a child of a stopped adoptee (or of a process below one) is stopped too: any live
/// process but the handler and the leader, which are never below an adoptee anyway.
pub(crate) fn stops_descendant(scope: &SweepScope<'_>, process: &ProcStat) -> bool {
    !process.is_defunct()
        && process.pid != scope.handler
        && process.pid != scope.leader
        && !(scope.helper)(process)
}

/// When the sweep passes again. The first pass is quick (the handler's children only); once a
/// pass finds an escapee — alive, or a zombie that had left the group — every later pass is
/// thorough, and the sweep ends only after two thorough passes in a row found nothing: a
/// lineage caught mid-fork can show up one pass late. The caller bounds the sweep in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SweepRounds {
    thorough: bool,
    quiet_passes: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SweepNext {
    Done,
    Again { thorough: bool },
}

impl SweepRounds {
    /// Whether the next pass is thorough.
    pub(crate) fn thorough(&self) -> bool {
        self.thorough
    }

    /// Records a pass that stopped `stopped` live escapees and reaped `reaped` zombies that had
    /// left the group.
    pub(crate) fn after_pass(&mut self, stopped: usize, reaped: usize) -> SweepNext {
        if stopped > 0 || reaped > 0 {
            self.thorough = true;
            self.quiet_passes = 0;
        } else if !self.thorough || self.quiet_passes >= 1 {
            return SweepNext::Done;
        } else {
            self.quiet_passes += 1;
        }
        SweepNext::Again {
            thorough: self.thorough,
        }
    }
}

#[cfg(test)]
mod tests;
