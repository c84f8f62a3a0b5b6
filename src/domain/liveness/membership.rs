//! Which processes belong to the running attempt: who may notify on its socket, and whose
//! counters the activity rule samples (docs/liveness.md, "Who belongs to the attempt"). A
//! sender may exit before its datagram is read, so the caller remembers the members it has
//! seen, with their start times; a remembered pid counts while no other process holds it.

use crate::domain::identity::ProcStat;
use crate::domain::process_tree::{ChildVerdict, SweepScope, judge_child};

/// Deeper process trees than this are not agents' tools.
pub const MAX_ANCESTRY: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The start time is for the caller to remember.
    Member { start_time_ticks: u64 },
    /// Not the attempt's, or no such process.
    Outsider,
}

/// Whether `pid` is the leader (`scope.leader`, also the pgid), a member of its group, a
/// descendant of either, or an adoptee the escaped-descendant sweep would stop (both real CLIs
/// `setsid` their tools). `stat` reads a process (`None` when it is gone); `remembered` is the
/// start time of a pid seen to belong before.
pub fn belongs(
    pid: u32,
    scope: &SweepScope<'_>,
    remembered: impl Fn(u32) -> Option<u64>,
    stat: impl Fn(u32) -> Option<ProcStat>,
) -> Verdict {
    let Some(process) = stat(pid) else {
        // Gone: it counts if it was seen to belong (its pid cannot have been reused, since no
        // process holds it now).
        return match remembered(pid) {
            Some(start_time_ticks) => Verdict::Member { start_time_ticks },
            None => Verdict::Outsider,
        };
    };
    let member = Verdict::Member {
        start_time_ticks: process.start_time_ticks,
    };
    if remembered(pid) == Some(process.start_time_ticks) {
        return member;
    }
    let mut current = process;
    for _ in 0..MAX_ANCESTRY {
        if current.pid == scope.leader || current.pgrp == scope.leader {
            return member;
        }
        if remembered(current.pid) == Some(current.start_time_ticks) {
            return member;
        }
        if current.ppid == scope.handler {
            // A zombie adoptee sent before it died: judge it as the live process it was.
            let mut alive = current;
            alive.state = 'S';
            return match judge_child(scope, &alive) {
                ChildVerdict::Stop => member,
                ChildVerdict::Reap | ChildVerdict::Leave => Verdict::Outsider,
            };
        }
        if current.ppid <= 1 {
            return Verdict::Outsider;
        }
        match stat(current.ppid) {
            Some(parent) => current = parent,
            None => return Verdict::Outsider,
        }
    }
    Verdict::Outsider
}

#[cfg(test)]
mod tests;
