//! Tests of the escaped-descendant sweep rules: which children are the worker's, how lineages
//! are frozen, and when the sweep passes again.

use super::*;

fn process(pid: u32, ppid: u32, start: u64) -> ProcStat {
    ProcStat {
        pid,
        state: 'S',
        ppid,
        pgrp: pid,
        start_time_ticks: start,
        cpu_ticks: 0,
        reaped_children_ticks: 0,
    }
}

fn scope(inherited: &dyn Fn(&ProcStat) -> bool) -> SweepScope<'_> {
    SweepScope {
        handler: 100,
        leader: 200,
        worker_started_ticks: Some(50),
        inherited,
        helper: &|_| false,
    }
}

#[test]
fn children_are_adoptees_zombies_or_left_alone() {
    let inherited = |stat: &ProcStat| stat.pid == 303;
    let scope = scope(&inherited);
    let zombie = ProcStat {
        state: 'Z',
        ..process(302, 100, 70)
    };
    let verdicts: Vec<ChildVerdict> = [
        process(200, 100, 50), // the leader
        process(300, 100, 50), // started in the leader's tick
        process(301, 100, 10), // predates the worker
        zombie,
        process(303, 100, 60), // inherited
    ]
    .iter()
    .map(|child| judge_child(&scope, child))
    .collect();
    assert_eq!(
        verdicts,
        [
            ChildVerdict::Leave,
            ChildVerdict::Stop,
            ChildVerdict::Leave,
            ChildVerdict::Reap,
            ChildVerdict::Leave
        ]
    );
}

#[test]
fn a_helper_and_its_group_are_left_alone_even_as_zombies() {
    let never = |_: &ProcStat| false;
    let helper = |stat: &ProcStat| stat.pgrp == 500;
    let scope = SweepScope {
        helper: &helper,
        ..scope(&never)
    };
    let hook = process(500, 100, 70);
    let hook_zombie = ProcStat { state: 'Z', ..hook };
    let orphaned_member = ProcStat {
        pgrp: 500,
        ..process(501, 100, 71)
    };
    for child in [hook, hook_zombie, orphaned_member.clone()] {
        assert_eq!(
            judge_child(&scope, &child),
            ChildVerdict::Leave,
            "{child:?}"
        );
    }
    assert!(!stops_descendant(&scope, &orphaned_member));
    assert_eq!(
        judge_child(&scope, &process(502, 100, 71)),
        ChildVerdict::Stop,
        "anything else that started after the worker is still stopped"
    );
}

#[test]
fn an_unknown_worker_start_stops_nothing() {
    let never = |_: &ProcStat| false;
    let unknown = SweepScope {
        worker_started_ticks: None,
        ..scope(&never)
    };
    assert_eq!(
        judge_child(&unknown, &process(300, 100, 60)),
        ChildVerdict::Leave
    );
}

#[test]
fn live_descendants_are_stopped_zombies_are_not() {
    let never = |_: &ProcStat| false;
    let scope = scope(&never);
    assert!(stops_descendant(&scope, &process(400, 300, 61)));
    let zombie = ProcStat {
        state: 'Z',
        ..process(401, 300, 61)
    };
    assert!(!stops_descendant(&scope, &zombie));
    assert!(!stops_descendant(&scope, &process(200, 300, 61)));
}

#[test]
fn only_live_killed_processes_with_their_own_start_time_survive() {
    let killed = [
        Killed {
            pid: 300,
            start_time_ticks: 60,
        },
        Killed {
            pid: 301,
            start_time_ticks: 61,
        },
        Killed {
            pid: 302,
            start_time_ticks: 62,
        },
        Killed {
            pid: 303,
            start_time_ticks: 63,
        },
        Killed {
            pid: 304,
            start_time_ticks: 64,
        },
    ];
    let now = |pid: u32| match pid {
        // Still running (stuck in an uninterruptible sleep, say).
        300 => Some(ProcStat {
            state: 'D',
            ..process(300, 100, 60)
        }),
        // Dead, waiting to be reaped.
        301 => Some(ProcStat {
            state: 'Z',
            ..process(301, 100, 61)
        }),
        // Gone.
        302 => None,
        // The pid was reused by a later process.
        303 => Some(process(303, 1, 900)),
        // Still stopped by the sweep's SIGSTOP, the SIGKILL not acted on yet.
        304 => Some(ProcStat {
            state: 'T',
            ..process(304, 100, 64)
        }),
        _ => None,
    };
    assert_eq!(survivors(&killed, now), [300, 304]);
    assert!(survivors(&[], now).is_empty());
}

#[test]
fn a_sweep_that_finds_nothing_ends_after_one_quick_pass() {
    let mut rounds = SweepRounds::default();
    assert!(!rounds.thorough());
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Done);
}

#[test]
fn an_escapee_makes_every_later_pass_thorough_until_two_come_back_empty() {
    let mut rounds = SweepRounds::default();
    assert_eq!(rounds.after_pass(3, 0), SweepNext::Again { thorough: true });
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Again { thorough: true });
    // Something found again: the count of quiet passes starts over.
    assert_eq!(rounds.after_pass(1, 0), SweepNext::Again { thorough: true });
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Again { thorough: true });
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Done);
}

#[test]
fn a_reaped_escapee_counts_as_a_find() {
    let mut rounds = SweepRounds::default();
    assert_eq!(rounds.after_pass(0, 2), SweepNext::Again { thorough: true });
    assert!(rounds.thorough());
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Again { thorough: true });
    assert_eq!(rounds.after_pass(0, 0), SweepNext::Done);
}
