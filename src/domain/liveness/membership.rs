//! Which processes belong to the running attempt: who may notify on its socket, and whose
//! counters the activity rule samples.
//!
//! A process belongs when it is the worker's leader, a member of its process group, or a
//! descendant of either — also one that left the group (`setsid`: both real CLIs start their
//! tools in sessions of their own) and, when its parent died, was adopted by the handler (a
//! child subreaper): then it is one of the handler's children that the escaped-descendant
//! sweep would stop (`process_tree::judge_child` says `Stop`). Other children of the handler (the
//! watchdog, children inherited across `exec`) and everything else do not.
//!
//! A sender may exit before its datagram is read (and its pid may then be reused): the
//! caller also remembers the processes it has seen belong ([`Verdict::known`]), with their
//! start times, and a remembered pid counts while no other process holds it.

use crate::domain::identity::ProcStat;
use crate::domain::process_tree::{ChildVerdict, SweepScope, judge_child};

/// How far up the parent links a lookup goes: deeper trees than this are not agents' tools.
pub const MAX_ANCESTRY: usize = 64;

/// The answer for one pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The process (with this start time) belongs to the attempt.
    Member { start_time_ticks: u64 },
    /// It does not (or no such process exists).
    Outsider,
}

impl Verdict {
    /// The start time to remember for a member.
    pub fn known(self) -> Option<u64> {
        match self {
            Self::Member { start_time_ticks } => Some(start_time_ticks),
            Self::Outsider => None,
        }
    }
}

/// Whether `pid` belongs to the attempt whose leader (and pgid) is `scope.leader`. `stat`
/// reads a process (`None` when it is gone); `remembered` is the start time of a pid seen to
/// belong before.
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
