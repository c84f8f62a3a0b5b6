//! The escaped-descendant sweep (docs/architecture.md, "Process groups"): the handler's once a
//! group is empty ([`sweep_until_done`]), a wrapper's after its launcher exits
//! ([`sweep_pass`]), and the watchdog's ([`freeze_and_kill`]). Which processes are stopped,
//! and when to pass again, is [`crate::domain::process_tree`]'s.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::helper_registry;
use super::proc::{self, ChildSnapshot};
use super::process_group::{self, SweepSignal};
use crate::domain::identity::ProcStat;
use crate::domain::process_tree::{
    ChildVerdict, Killed, SweepNext, SweepRounds, SweepScope, judge_child, stops_descendant,
    survivors,
};

/// How long escaped descendants are swept before the survivors are named.
pub(crate) const SWEEP_LIMIT: Duration = Duration::from_secs(5);
/// How often a sweep passes again.
pub(crate) const PASS_INTERVAL: Duration = Duration::from_millis(5);
/// How long a sweep that gives up waits for its last SIGKILLs to take effect before it names
/// what still lives as surviving.
pub(crate) const SURVIVOR_WAIT: Duration = Duration::from_millis(500);

/// One pass (blocking): reaps adopted zombies, freezes every adoptee with its lineage, then
/// SIGKILLs all of it. A quick pass (nothing found yet) reads only the children list where
/// adoptees land ([`proc::adopted_children`]), no `/proc` scan. The [`helper_registry`] stays
/// locked for the pass, so no helper can start unregistered meanwhile.
pub(crate) fn sweep_pass(
    leader: u32,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    thorough: bool,
) -> SweepPass {
    let handler = std::process::id();
    in_scope(handler, leader, worker_started_ticks, inherited, |scope| {
        let mut freezer = Freezer::default();
        let children = proc::adopted_children().unwrap_or_default();
        freezer.adopt(scope, children.into_iter().filter_map(proc::stat_of));
        // A reaped zombie is an escapee that existed: under churn the children list can miss
        // its live relatives (it is not reliable while children are added and removed), so
        // look at the process table too.
        if freezer.frozen.is_empty() && freezer.reaped == 0 && !thorough {
            return SweepPass::default();
        }
        // The children list can miss a child being re-parented while it is read; the parent
        // links in the process table catch it.
        let table = proc::process_table().unwrap_or_default();
        freezer.adopt(
            scope,
            table.into_iter().filter(|process| process.ppid == handler),
        );
        SweepPass {
            reaped: freezer.reaped,
            stopped: freezer.kill_all(),
        }
    })
}

/// Runs `use_scope` with the sweep's scope for the worker leading `leader`, the
/// [`helper_registry`] locked meanwhile: a hook or a check beside the attempt is the handler's,
/// not the worker's, and none can start unregistered while the scope is in use.
pub(crate) fn in_scope<T>(
    handler: u32,
    leader: u32,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    use_scope: impl FnOnce(&SweepScope<'_>) -> T,
) -> T {
    let is_inherited = |stat: &ProcStat| inherited.contains(stat);
    let helpers = helper_registry::lock();
    let is_helper = |stat: &ProcStat| helpers.protects(stat);
    use_scope(&SweepScope {
        handler,
        leader,
        worker_started_ticks,
        inherited: &is_inherited,
        helper: &is_helper,
    })
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SweepReport {
    /// Escapees killed and gone.
    pub escaped: Vec<u32>,
    /// Escapees still alive when the sweep gave up.
    pub survivors: Vec<u32>,
}

/// A whole sweep (blocking), once the group of `leader` (started at `started_ticks`) is empty:
/// passes until [`SweepRounds`] says nothing is left, or for at most [`SWEEP_LIMIT`], then
/// names what survived. `leader` 0 sweeps for every helper that started from `started_ticks`
/// on (the hooks of a run, at its end).
pub(crate) fn sweep_until_done(
    leader: u32,
    started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
) -> SweepReport {
    sweep_within(leader, started_ticks, inherited, SWEEP_LIMIT, |_| {})
}

/// [`sweep_until_done`] for at most `limit`, telling `killed` of each escapee when it is
/// killed: it stays a zombie until the next pass reaps it, so its `/proc` entry is still there.
pub(crate) fn sweep_within(
    leader: u32,
    started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    limit: Duration,
    mut killed: impl FnMut(u32),
) -> SweepReport {
    let give_up_at = Instant::now() + limit;
    let mut rounds = SweepRounds::default();
    let mut report = SweepReport::default();
    loop {
        let pass = sweep_pass(leader, started_ticks, inherited, rounds.thorough());
        for process in &pass.stopped {
            if !report.escaped.contains(&process.pid) {
                report.escaped.push(process.pid);
                killed(process.pid);
            }
        }
        if rounds.after_pass(pass.stopped.len(), pass.reaped) == SweepNext::Done {
            break;
        }
        if Instant::now() >= give_up_at {
            report.survivors = still_alive(&pass.stopped, SURVIVOR_WAIT);
            // Only what is gone was killed.
            report.escaped.retain(|pid| !report.survivors.contains(pid));
            if !report.survivors.is_empty() {
                tracing::error!(survivors = ?report.survivors, "escaped descendants were still alive when the sweep gave up");
            }
            break;
        }
        std::thread::sleep(PASS_INTERVAL);
    }
    if !report.escaped.is_empty() {
        tracing::info!(leader, pids = ?report.escaped, "descendants escaped the process group; killed them");
    }
    report
}

/// The watchdog's sweep (blocking): freezes `roots` — processes that are *not* our children,
/// as a scan saw them — with their lineages, then SIGKILLs all of it, every signal through a
/// checked pidfd; returns what it stopped. `keep_off` (the caller itself) is never stopped.
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
    freezer.kill_all()
}

/// Which of `killed` still live after at most `wait` (blocking): a SIGKILL takes effect
/// asynchronously, in an uninterruptible sleep only on waking. Zombies count as dead.
pub(crate) fn still_alive(killed: &[Killed], wait: Duration) -> Vec<u32> {
    let deadline = Instant::now() + wait;
    loop {
        let alive = survivors(killed, proc::stat_of);
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[derive(Default)]
pub(crate) struct SweepPass {
    /// Live escapees stopped and killed.
    pub stopped: Vec<Killed>,
    /// Zombies reaped that had left the worker's group: the sweep goes on even when nothing
    /// was alive.
    pub reaped: usize,
}

/// How long one level of a lineage may take to stop before its children are read anyway.
const STOP_WAIT: Duration = Duration::from_millis(100);

/// The most processes one pass freezes: a bound for a lineage that forks faster than it can
/// be stopped (it is then reported as surviving once the sweep gives up).
const FREEZE_LIMIT: usize = 10_000;

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

#[derive(Default)]
struct Freezer {
    frozen: Vec<Target>,
    seen: HashSet<u32>,
    reaped: usize,
}

impl Freezer {
    /// SIGKILLs everything frozen; returns what it was.
    fn kill_all(self) -> Vec<Killed> {
        for target in &self.frozen {
            target.signal(SweepSignal::KILL);
        }
        let killed = |target: &Target| Killed {
            pid: target.pid,
            start_time_ticks: target.start_time_ticks,
        };
        self.frozen.iter().map(killed).collect()
    }

    /// Judges the handler's `children`, reaps the zombies, and freezes the adoptees with
    /// everything below them.
    fn adopt(&mut self, scope: &SweepScope<'_>, children: impl Iterator<Item = ProcStat>) {
        let mut level = Vec::new();
        for child in children {
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
                target.signal(SweepSignal::STOP);
            }
            // A process caught inside `fork` stops only once the fork is done: its children
            // list is complete when it is seen stopped (or gone — then its children are
            // re-parented to the handler, and the next pass adopts them).
            let deadline = Instant::now() + STOP_WAIT;
            for target in &level {
                while Instant::now() < deadline
                    && proc::stat_of(target.pid)
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
                    if let Some(process) = proc::stat_of(pid)
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
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::process::Command;

    fn killed(child: &std::process::Child) -> Killed {
        let stat = proc::stat_of(child.id()).expect("child stat");
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
            proc::stat_of(dead.id()).is_some_and(|process| process.is_defunct()),
            "the killed child should be an unreaped zombie"
        );
        assert_eq!(alive, [live.id()]);
        let _ = live.kill();
        let _ = live.wait();
        let _ = dead.wait();
        assert!(still_alive(&processes, Duration::ZERO).is_empty());
    }
}
