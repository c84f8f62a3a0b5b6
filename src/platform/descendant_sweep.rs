//! The escaped-descendant sweep, one blocking pass at a time: what the handler's group killer
//! runs after a worker's group is empty, and what a wrapper run by hand runs after its
//! launcher exits. Both are child subreapers, so a descendant that left the group becomes
//! their child when its parent dies. Which processes are stopped is decided by
//! [`crate::domain::process_tree`]; when to pass again by its [`SweepRounds`].
//!
//! [`SweepRounds`]: crate::domain::process_tree::SweepRounds

use std::collections::HashSet;
use std::time::Duration;

use super::helper_registry;
use super::proc::{self, ChildSnapshot};
use super::process_group::{self, SweepSignal};
use crate::domain::identity::ProcStat;
use crate::domain::process_tree::{
    ChildVerdict, Killed, SweepScope, judge_child, stops_descendant, survivors,
};

/// One pass of the escaped-descendant sweep (blocking `/proc` work): reaps adopted zombies,
/// freezes every adoptee and its whole lineage — SIGSTOP level by level, reading the children
/// of processes already stopped, so a lineage cannot fork its way out — then SIGKILLs all of
/// it, and returns the pids it stopped. A quick pass (nothing found yet) reads only the
/// children list where adoptees land ([`proc::adopted_children`]), so an attempt without
/// escapees costs one small read, no `/proc` scan.
///
/// The handler's helpers (hooks, verification checks, its watchdogs: [`helper_registry`]) are
/// left alone;
/// the registry stays locked for the pass, so none can start unregistered meanwhile.
pub(crate) fn sweep_pass(
    leader: u32,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    thorough: bool,
) -> SweepPass {
    let handler = proc::own_pid();
    let is_inherited = |stat: &ProcStat| inherited.contains(stat);
    let helpers = helper_registry::lock();
    let is_helper = |stat: &ProcStat| helpers.protects(stat);
    let scope = SweepScope {
        handler,
        leader,
        worker_started_ticks,
        inherited: &is_inherited,
        helper: &is_helper,
    };
    let mut freezer = Freezer::default();
    let children = proc::adopted_children().unwrap_or_default();
    freezer.adopt(&scope, children.into_iter().filter_map(stat_of));
    // A reaped zombie is an escapee that existed: under churn the children list can miss its
    // live relatives (it is not reliable while children are added and removed), so look at
    // the process table too.
    if freezer.frozen.is_empty() && freezer.reaped == 0 && !thorough {
        return SweepPass::default();
    }
    // The children list can miss a child being re-parented while it is read; the parent
    // links in the process table catch it.
    let table = proc::process_table().unwrap_or_default();
    let missed = table.into_iter().filter(|process| process.ppid == handler);
    freezer.adopt(&scope, missed);
    for target in &freezer.frozen {
        target.signal(SweepSignal::Kill);
    }
    SweepPass {
        stopped: freezer
            .frozen
            .iter()
            .map(|target| Killed {
                pid: target.pid,
                start_time_ticks: target.start_time_ticks,
            })
            .collect(),
        reaped: freezer.reaped,
    }
}

/// The most adopted children [`nothing_adopted`] looks at: beyond that the look is a `/proc`
/// walk of its own, for the blocking pass.
const QUICK_LOOK_CHILDREN: usize = 4;

/// Whether a quick [`sweep_pass`] would find nothing, answered without blocking: the children
/// list where adoptees land holds only processes the sweep leaves (the handler's watchdogs,
/// children it inherited, processes older than the worker). One children list, a `stat` per
/// child (four at most), all procfs, and no lock waited for, so it runs on the caller's
/// thread and spares the common attempt — no escapee — its trip off the runtime. `None` when it cannot tell at once (the helper registry
/// is held by a helper being started, or there are many children): the caller runs the pass.
pub(crate) fn nothing_adopted(
    leader: u32,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
) -> Option<bool> {
    let children = proc::adopted_children().ok()?;
    if children.len() > QUICK_LOOK_CHILDREN {
        return None;
    }
    let helpers = helper_registry::try_lock()?;
    let is_inherited = |stat: &ProcStat| inherited.contains(stat);
    let is_helper = |stat: &ProcStat| helpers.protects(stat);
    let scope = SweepScope {
        handler: proc::own_pid(),
        leader,
        worker_started_ticks,
        inherited: &is_inherited,
        helper: &is_helper,
    };
    Some(
        children
            .into_iter()
            .filter_map(stat_of)
            .all(|child| judge_child(&scope, &child) == ChildVerdict::Leave),
    )
}

/// How often a blocking sweep passes again.
const PASS_INTERVAL: Duration = Duration::from_millis(5);
/// How long a blocking sweep that gives up waits for its last SIGKILLs to take effect.
const SURVIVOR_WAIT: Duration = Duration::from_millis(500);

/// What a whole sweep stopped.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SweepReport {
    /// Escapees killed and gone.
    pub escaped: Vec<u32>,
    /// Escapees still alive when the sweep gave up.
    pub survivors: Vec<u32>,
}

/// A whole sweep on the calling thread (blocking): passes until
/// [`SweepRounds`](crate::domain::process_tree::SweepRounds) says nothing is left, or for at
/// most `limit`, then names what survived. The group killer drives the same passes from its
/// actor; this is for code that already runs on a thread of its own (a helper's runner).
pub(crate) fn sweep_until_done(
    leader: u32,
    started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    limit: Duration,
) -> SweepReport {
    let give_up_at = std::time::Instant::now() + limit;
    let mut rounds = crate::domain::process_tree::SweepRounds::default();
    let mut report = SweepReport::default();
    loop {
        let pass = sweep_pass(leader, started_ticks, inherited, rounds.thorough());
        for killed in &pass.stopped {
            if !report.escaped.contains(&killed.pid) {
                report.escaped.push(killed.pid);
            }
        }
        if rounds.after_pass(pass.stopped.len(), pass.reaped)
            == crate::domain::process_tree::SweepNext::Done
        {
            return report;
        }
        if std::time::Instant::now() >= give_up_at {
            report.survivors = still_alive(&pass.stopped, SURVIVOR_WAIT);
            report.escaped.retain(|pid| !report.survivors.contains(pid));
            return report;
        }
        std::thread::sleep(PASS_INTERVAL);
    }
}

/// Freezes `roots` — processes that are *not* our children, as a scan saw them — with their
/// whole lineages, then SIGKILLs all of it, every signal through a pidfd checked against the
/// start time seen (so a reused pid is never hit); returns what it stopped. `keep_off` (the
/// caller itself) is never stopped. This is the watchdog's sweep, once the handler is gone and
/// its orphans belong to init (blocking).
pub(crate) fn freeze_and_kill(roots: &[Killed], keep_off: u32) -> Vec<Killed> {
    let never = |_: &ProcStat| false;
    let scope = SweepScope {
        handler: keep_off,
        leader: 0,
        worker_started_ticks: None,
        inherited: &never,
        helper: &never,
    };
    let mut freezer = Freezer::default();
    let level = roots
        .iter()
        .filter(|root| root.pid != keep_off && root.pid > 1 && freezer.seen.insert(root.pid))
        .map(|root| Target {
            pid: root.pid,
            start_time_ticks: root.start_time_ticks,
            adoptee: false,
        })
        .collect();
    freezer.freeze(&scope, level);
    for target in &freezer.frozen {
        target.signal(SweepSignal::Kill);
    }
    freezer
        .frozen
        .iter()
        .map(|target| Killed {
            pid: target.pid,
            start_time_ticks: target.start_time_ticks,
        })
        .collect()
}

/// Which of `killed` (SIGKILLed by the last pass of a sweep that gives up) still live,
/// waiting at most `wait` for them to die (blocking): a SIGKILL takes effect asynchronously,
/// and a process in an uninterruptible sleep acts on it only when it wakes. Zombies count as
/// dead ([`survivors`]).
pub(crate) fn still_alive(killed: &[Killed], wait: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let alive = survivors(killed, stat_of);
        if alive.is_empty() || std::time::Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// What one sweep pass did.
#[derive(Default)]
pub(crate) struct SweepPass {
    /// Live escapees stopped and killed.
    pub stopped: Vec<Killed>,
    /// Zombies reaped that had left the worker's group: the sweep goes on even when nothing
    /// was alive.
    pub reaped: usize,
}

fn stat_of(pid: u32) -> Option<ProcStat> {
    proc::stat(pid).ok().flatten()
}

/// How long one level of a lineage may take to stop before its children are read anyway.
const STOP_WAIT: Duration = Duration::from_millis(100);

/// The most processes one pass freezes: a bound for a lineage that forks faster than it can
/// be stopped (it is then reported as surviving once the sweep gives up).
const FREEZE_LIMIT: usize = 10_000;

/// A process the sweep stops.
struct Target {
    pid: u32,
    start_time_ticks: u64,
    /// The handler's own child (safe to signal by pid) rather than a descendant of one.
    adoptee: bool,
}

impl Target {
    fn signal(&self, signal: SweepSignal) {
        if self.adoptee {
            process_group::signal_child(self.pid, signal);
        } else {
            process_group::signal_descendant(self.pid, self.start_time_ticks, signal);
        }
    }
}

/// Stops lineages level by level.
#[derive(Default)]
struct Freezer {
    frozen: Vec<Target>,
    seen: HashSet<u32>,
    reaped: usize,
}

impl Freezer {
    /// Judges the handler's `children`, reaps the zombies, and freezes the adoptees with
    /// everything below them.
    fn adopt(&mut self, scope: &SweepScope<'_>, children: impl Iterator<Item = ProcStat>) {
        let mut level = Vec::new();
        for child in children {
            // The handler's watchdogs are its children too, spared by the helper registry
            // (`judge_child` leaves them).
            if !self.seen.insert(child.pid) {
                continue;
            }
            match judge_child(scope, &child) {
                ChildVerdict::Reap => {
                    process_group::reap_child(child.pid);
                    // A member of the worker's group (a leaked process the group sweep
                    // killed) is no escapee.
                    if child.pgrp != scope.leader {
                        self.reaped += 1;
                    }
                }
                ChildVerdict::Stop => level.push(Target {
                    pid: child.pid,
                    start_time_ticks: child.start_time_ticks,
                    adoptee: true,
                }),
                ChildVerdict::Leave => {}
            }
        }
        self.freeze(scope, level);
    }

    /// Stops `level` and everything below it, level by level.
    fn freeze(&mut self, scope: &SweepScope<'_>, mut level: Vec<Target>) {
        // Each level is stopped before its children are read: a stopped process cannot fork,
        // so only a fork that completed between the read and the stop can get one level
        // further, and the next level catches it.
        while !level.is_empty() && self.frozen.len() < FREEZE_LIMIT {
            for target in &level {
                target.signal(SweepSignal::Stop);
            }
            // A process caught inside `fork` stops only once the fork is done: its children
            // list is complete when it is seen stopped (or gone — then its children are
            // re-parented to the handler, and the next pass adopts them).
            let deadline = std::time::Instant::now() + STOP_WAIT;
            for target in &level {
                while std::time::Instant::now() < deadline
                    && stat_of(target.pid)
                        .is_some_and(|process| !process.is_stopped() && !process.is_defunct())
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            let mut next = Vec::new();
            for target in &level {
                for pid in proc::children_of(target.pid) {
                    if !self.seen.insert(pid) {
                        continue;
                    }
                    if let Some(process) = stat_of(pid)
                        && stops_descendant(scope, &process)
                    {
                        next.push(Target {
                            pid,
                            start_time_ticks: process.start_time_ticks,
                            adoptee: false,
                        });
                    }
                }
            }
            self.frozen.append(&mut level);
            level = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::process_group;
    use crate::platform::test_isolation::isolated;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::process::Command;
    use std::time::Instant;

    /// The quick look says "nothing" only while no adoptee is there: an orphan re-parented to
    /// the handler (a child subreaper) is a reason for the pass, what the handler had before
    /// the worker started is not.
    #[test]
    fn the_quick_look_finds_nothing_until_an_orphan_is_adopted() {
        isolated(
            "platform::descendant_sweep::tests::the_quick_look_finds_nothing_until_an_orphan_is_adopted",
            || {
                process_group::become_child_subreaper().unwrap();
                let inherited = ChildSnapshot::take();
                // No worker started yet: nothing the handler has is an adoptee.
                assert_eq!(nothing_adopted(1, None, &inherited), Some(true));
                let dir = tempfile::tempdir().unwrap();
                let pidfile = dir.path().join("orphan.pid");
                let status = Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "sh -c 'echo $$ > {}; exec sleep 600' </dev/null >/dev/null 2>&1 &",
                        pidfile.display()
                    ))
                    .status()
                    .expect("run the shell that leaves an orphan");
                assert!(status.success());
                let deadline = Instant::now() + Duration::from_secs(30);
                let orphan = loop {
                    let pid = std::fs::read_to_string(&pidfile)
                        .ok()
                        .and_then(|text| text.trim().parse::<u32>().ok());
                    if let Some(pid) = pid
                        && proc::adopted_children().unwrap().contains(&pid)
                    {
                        break pid;
                    }
                    assert!(Instant::now() < deadline, "the orphan was never adopted");
                    std::thread::sleep(Duration::from_millis(10));
                };
                // A worker that started at tick 0: the orphan started after it.
                assert_eq!(nothing_adopted(1, Some(0), &inherited), Some(false));
                kill(Pid::from_raw(orphan as i32), Signal::SIGKILL).expect("kill the orphan");
                let _ = nix::sys::wait::waitpid(Pid::from_raw(orphan as i32), None);
                assert_eq!(nothing_adopted(1, Some(0), &inherited), Some(true));
            },
        );
    }

    fn killed(child: &std::process::Child) -> Killed {
        let stat = stat_of(child.id()).expect("child stat");
        Killed {
            pid: stat.pid,
            start_time_ticks: stat.start_time_ticks,
        }
    }

    #[test]
    fn a_killed_process_that_is_a_zombie_is_no_survivor_but_a_live_one_is() {
        let mut dead = Command::new("sleep").arg("30").spawn().expect("spawn");
        let mut live = Command::new("sleep").arg("30").spawn().expect("spawn");
        let processes = [killed(&dead), killed(&live)];
        kill(Pid::from_raw(dead.id() as i32), Signal::SIGKILL).expect("kill");
        // Not reaped yet: the killed child stays a zombie while `still_alive` looks.
        let alive = still_alive(&processes, Duration::from_secs(1));
        assert!(
            stat_of(dead.id()).is_some_and(|process| process.is_defunct()),
            "the killed child should be an unreaped zombie"
        );
        assert_eq!(alive, [live.id()]);
        let _ = live.kill();
        let _ = live.wait();
        let _ = dead.wait();
        assert!(still_alive(&processes, Duration::ZERO).is_empty());
    }
}
