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
mod tests {
    use std::collections::HashMap;

    use super::*;

    const HANDLER: u32 = 100;
    const LEADER: u32 = 200;

    fn stat(pid: u32, ppid: u32, pgrp: u32, start: u64) -> ProcStat {
        ProcStat {
            pid,
            state: 'S',
            ppid,
            pgrp,
            start_time_ticks: start,
        }
    }

    /// handler 100 ─┬─ watchdog 150 (own session, started before the worker)
    ///              ├─ worker 200 (leader of group 200) ── 201 ── tool 300 (setsid: group 300)
    ///              ├─ adopted 400 (group 400, its parent died) ── 401
    ///              └─ inherited 500 (a shell job the handler had before the worker)
    /// elsewhere: 600 (another session, child of init) ── 601
    fn table() -> HashMap<u32, ProcStat> {
        [
            stat(HANDLER, 1, HANDLER, 10),
            stat(150, HANDLER, 150, 20),
            stat(LEADER, HANDLER, LEADER, 1000),
            stat(201, LEADER, LEADER, 1001),
            stat(300, 201, 300, 1002),
            stat(400, HANDLER, 400, 1005),
            stat(401, 400, 400, 1006),
            stat(500, HANDLER, 500, 1000),
            stat(600, 1, 600, 900),
            stat(601, 600, 600, 1010),
        ]
        .into_iter()
        .map(|process| (process.pid, process))
        .collect()
    }

    fn verdict(pid: u32, remembered: &[(u32, u64)]) -> Verdict {
        let table = table();
        let inherited = |process: &ProcStat| process.pid == 500;
        let scope = SweepScope {
            handler: HANDLER,
            leader: LEADER,
            worker_started_ticks: Some(1000),
            inherited: &inherited,
            helper: &|_: &ProcStat| false,
        };
        let remembered: HashMap<u32, u64> = remembered.iter().copied().collect();
        belongs(
            pid,
            &scope,
            |pid| remembered.get(&pid).copied(),
            |pid| table.get(&pid).cloned(),
        )
    }

    #[test]
    fn the_group_and_its_descendants_belong() {
        for pid in [LEADER, 201, 300, 400, 401] {
            assert!(matches!(verdict(pid, &[]), Verdict::Member { .. }), "{pid}");
        }
        assert_eq!(
            verdict(300, &[]),
            Verdict::Member {
                start_time_ticks: 1002
            }
        );
    }

    #[test]
    fn the_handler_its_other_children_and_strangers_do_not() {
        for pid in [HANDLER, 150, 500, 600, 601, 1, 9999] {
            assert_eq!(verdict(pid, &[]), Verdict::Outsider, "{pid}");
        }
    }

    #[test]
    fn a_remembered_member_counts_after_it_is_gone_but_not_once_its_pid_is_reused() {
        assert_eq!(
            verdict(9999, &[(9999, 77)]),
            Verdict::Member {
                start_time_ticks: 77
            }
        );
        // 601 holds the pid now with another start time: a stranger.
        assert_eq!(verdict(601, &[(601, 5)]), Verdict::Outsider);
        // A remembered ancestor vouches for its descendants.
        assert!(matches!(
            verdict(601, &[(600, 900)]),
            Verdict::Member { .. }
        ));
    }

    #[test]
    fn a_cycle_in_parent_links_ends() {
        let inherited = |_: &ProcStat| false;
        let scope = SweepScope {
            handler: HANDLER,
            leader: LEADER,
            worker_started_ticks: Some(1000),
            inherited: &inherited,
            helper: &|_: &ProcStat| false,
        };
        let looped = |pid: u32| Some(stat(pid, if pid == 7 { 8 } else { 7 }, pid, 1));
        assert_eq!(belongs(7, &scope, |_| None, looped), Verdict::Outsider);
    }
}
