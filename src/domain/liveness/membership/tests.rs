//! Unit tests of which processes belong to an attempt.

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
        cpu_ticks: 0,
        reaped_children_ticks: 0,
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
