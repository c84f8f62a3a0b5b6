//! Which processes the escaped-descendant sweep stops, decided from a snapshot of the process
//! table (docs/architecture.md, "Process groups").
//!
//! The handler is a child subreaper, so a descendant that left the worker's group becomes the
//! handler's child once its parent dies. An *adoptee* is such a child: not the worker's leader
//! (tokio reaps it), not a child the handler inherited across `exec`, and started no earlier
//! than the worker. A self-respawning daemon keeps a lineage of descendants below its adoptee
//! — each generation starting the next — so stopping adoptees alone, one generation per pass,
//! can lose the race for ever. The sweep therefore takes each adoptee's whole live subtree,
//! deepest first: stopped (SIGSTOP) before anything is killed, a lineage cannot fork its way
//! out between two signals.

use super::identity::ProcStat;

/// A process the sweep stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepTarget {
    pub pid: u32,
    /// Its start time, so a signal reaches this process and never a later one with its pid.
    pub start_time_ticks: u64,
    /// An adoptee (the handler's own child, safe to signal by pid) rather than a descendant
    /// of one.
    pub adoptee: bool,
}

/// What one pass of the sweep does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepPlan {
    /// The handler's defunct children to reap (never the leader: tokio reaps it).
    pub reap: Vec<u32>,
    /// Every adoptee and every live process below one, deepest first.
    pub targets: Vec<SweepTarget>,
}

/// The facts the rules need besides the process table.
pub struct SweepScope<'a> {
    /// The handler's own pid.
    pub handler: u32,
    /// The worker's leader (also its pgid).
    pub leader: u32,
    /// The leader's start time; `None` when unknown — then no adoptee can be told apart from
    /// an inherited child, and nothing is stopped.
    pub worker_started_ticks: Option<u64>,
    /// Whether a child is one the handler inherited across `exec`.
    pub inherited: &'a dyn Fn(&ProcStat) -> bool,
}

/// Plans one pass: `children` are the handler's children, `table` every process seen (may be
/// empty for a quick pass that looks at children only).
pub fn plan_sweep(scope: &SweepScope<'_>, children: &[ProcStat], table: &[ProcStat]) -> SweepPlan {
    let mut plan = SweepPlan::default();
    let mut adoptees = Vec::new();
    for child in children {
        if child.pid == scope.leader || child.pid == scope.handler {
            continue;
        }
        if child.is_defunct() {
            plan.reap.push(child.pid);
            continue;
        }
        // Start times have clock-tick resolution (10 ms), so only a strictly earlier start
        // proves a child is not the worker's; the inherited snapshot covers the rest.
        let predates = scope
            .worker_started_ticks
            .is_none_or(|started| child.start_time_ticks < started);
        if predates || (scope.inherited)(child) {
            continue;
        }
        adoptees.push(child.pid);
        plan.targets.push(SweepTarget {
            pid: child.pid,
            start_time_ticks: child.start_time_ticks,
            adoptee: true,
        });
    }
    // Breadth-first below the adoptees; each level is a generation deeper.
    let mut level = adoptees;
    let mut seen: Vec<u32> = plan.targets.iter().map(|target| target.pid).collect();
    let mut below = Vec::new();
    while !level.is_empty() {
        let next: Vec<&ProcStat> = table
            .iter()
            .filter(|process| {
                level.contains(&process.ppid)
                    && !process.is_defunct()
                    && process.pid != scope.handler
                    && process.pid != scope.leader
                    && !seen.contains(&process.pid)
            })
            .collect();
        level = next.iter().map(|process| process.pid).collect();
        seen.extend(&level);
        below.push(next);
    }
    let deeper = below
        .into_iter()
        .rev()
        .flatten()
        .map(|process| SweepTarget {
            pid: process.pid,
            start_time_ticks: process.start_time_ticks,
            adoptee: false,
        });
    let adoptee_targets = std::mem::take(&mut plan.targets);
    plan.targets = deeper.chain(adoptee_targets).collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, ppid: u32, start: u64) -> ProcStat {
        ProcStat {
            pid,
            state: 'S',
            ppid,
            pgrp: pid,
            start_time_ticks: start,
        }
    }

    fn scope(inherited: &dyn Fn(&ProcStat) -> bool) -> SweepScope<'_> {
        SweepScope {
            handler: 100,
            leader: 200,
            worker_started_ticks: Some(50),
            inherited,
        }
    }

    #[test]
    fn adoptees_and_their_lineage_deepest_first() {
        let never = |_: &ProcStat| false;
        let children = [
            process(200, 100, 50), // the leader
            process(300, 100, 60), // an adoptee
            process(301, 100, 10), // predates the worker
            ProcStat {
                state: 'Z',
                ..process(302, 100, 70)
            }, // defunct
        ];
        let table = [
            process(400, 300, 61), // child of the adoptee
            process(500, 400, 62), // grandchild
            ProcStat {
                state: 'Z',
                ..process(501, 400, 63)
            },
            process(600, 301, 64), // below an inherited child: left alone
            process(700, 1, 65),   // unrelated
        ];
        let plan = plan_sweep(&scope(&never), &children, &table);
        assert_eq!(plan.reap, [302]);
        let order: Vec<(u32, bool)> = plan
            .targets
            .iter()
            .map(|target| (target.pid, target.adoptee))
            .collect();
        assert_eq!(order, [(500, false), (400, false), (300, true)]);
    }

    #[test]
    fn inherited_children_and_an_unknown_worker_start_stop_nothing() {
        let inherited = |stat: &ProcStat| stat.pid == 300;
        let children = [process(300, 100, 60)];
        let table = [process(400, 300, 61)];
        assert!(
            plan_sweep(&scope(&inherited), &children, &table)
                .targets
                .is_empty()
        );
        let never = |_: &ProcStat| false;
        let unknown = SweepScope {
            worker_started_ticks: None,
            ..scope(&never)
        };
        assert!(plan_sweep(&unknown, &children, &table).targets.is_empty());
    }
}
