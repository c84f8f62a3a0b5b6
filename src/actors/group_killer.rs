//! GroupKiller: owns the worker's process group, addressed by the pgid saved at launch — never
//! by a pid, and never our own group.
//!
//! - `Terminate`: SIGTERM to the group, poll until it is empty or the grace period (0.5 s)
//!   ends, then SIGKILL, re-sent in bounded rounds while any member is alive (a process forked
//!   mid-walk can miss one `killpg`).
//! - `KillNow`: a second signal skips what is left of the grace period.
//! - `SweepAfterExit`: after the leader exited on its own, whatever is left of the group is a
//!   leaked descendant: record its pids and SIGKILL the group.
//!
//! Once the group is empty, the killer sweeps *adopted* descendants: the handler registers as
//! a child subreaper, so a descendant that left the group (`setsid`, a daemon's double fork)
//! becomes the handler's own child when its parent dies. Any such child still alive that
//! started after the worker is stopped (it is our child, so its pid cannot have been reused;
//! a child that predates the worker was inherited across `exec` and is left alone) and every
//! adopted zombie is reaped by pid. The rules are [`crate::domain::process_tree`].
//!
//! A self-respawning daemon keeps starting its next generation, so one pass per generation
//! can lose the race for ever. Once a pass finds an adoptee the sweep turns *thorough*: every
//! pass freezes each adoptee's whole lineage — SIGSTOP level by level, reading the children of
//! processes already stopped (a stopped process cannot fork) — then SIGKILLs it (descendants
//! through pidfds), also looks for children the `children` list missed in a `/proc` scan, and
//! the sweep ends only after two passes in a row found nothing — or, bounded, after 5 s, when
//! what is still alive is reported as surviving. The report names as killed only what is
//! gone.
//!
//! The killer polls with self-scheduled messages instead of sleeping inside a handler, so
//! `KillNow` is handled promptly, and every `/proc` scan runs on the blocking pool. "Empty"
//! means no *live* member: zombies waiting for a parent to reap them run nothing and hold no
//! pipe.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::attempt_supervisor::AttemptMsg;
use super::{notify, off_runtime};
use crate::domain::identity::ProcStat;
use crate::domain::lifecycle::GroupReport;
use crate::domain::process_tree::{ChildVerdict, SweepScope, judge_child, stops_descendant};
use crate::platform::proc::{self, ChildSnapshot};
use crate::platform::process_group::{self, StopSignal, SweepSignal};
use crate::platform::watchdog;

/// How long a group gets between SIGTERM and SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// How often membership is polled while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// How long SIGKILL is re-sent before the killer reports survivors and gives up.
const KILL_ROUNDS_LIMIT: Duration = Duration::from_secs(2);
/// How long escaped descendants are swept before the survivors are reported.
const ADOPTEE_SWEEP_LIMIT: Duration = Duration::from_secs(5);

pub enum KillerMsg {
    Terminate,
    KillNow,
    SweepAfterExit,
    Poll,
}

pub struct GroupKiller;

pub struct KillerArgs {
    pub pgid: u32,
    /// The leader's start time (`/proc/<pid>/stat` field 22). An adopted child that started
    /// before it cannot descend from the worker — the handler inherited it across `exec` — so
    /// it is never signalled. `None` when the identity could not be read: then no adopted
    /// process is signalled at all, since none can be told apart.
    pub worker_started_ticks: Option<u64>,
    /// The handler's children before its first worker started: inherited, never signalled.
    pub inherited: Arc<ChildSnapshot>,
    pub supervisor: ActorRef<AttemptMsg>,
}

enum Phase {
    Idle,
    /// SIGTERM sent; SIGKILL follows at `kill_at`.
    Grace {
        kill_at: Instant,
    },
    /// SIGKILL sent; re-sent until empty or `give_up_at`.
    Killing {
        give_up_at: Instant,
    },
    /// The group is empty; adopted descendants are killed and reaped until none is left.
    Adoptees {
        give_up_at: Instant,
        /// A pass found an adoptee: every pass now takes whole lineages from a `/proc` scan.
        thorough: bool,
        /// Passes in a row that found nothing (once thorough).
        quiet_passes: u8,
    },
    Reported,
}

pub struct KillerState {
    pgid: u32,
    worker_started_ticks: Option<u64>,
    inherited: Arc<ChildSnapshot>,
    supervisor: ActorRef<AttemptMsg>,
    phase: Phase,
    report: GroupReport,
    term_sent: bool,
    kill_sent: bool,
}

impl Actor for GroupKiller {
    type Msg = KillerMsg;
    type State = KillerState;
    type Arguments = KillerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<KillerMsg>,
        args: KillerArgs,
    ) -> Result<KillerState, ActorProcessingErr> {
        Ok(KillerState {
            pgid: args.pgid,
            worker_started_ticks: args.worker_started_ticks,
            inherited: args.inherited,
            supervisor: args.supervisor,
            phase: Phase::Idle,
            report: GroupReport::default(),
            term_sent: false,
            kill_sent: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<KillerMsg>,
        message: KillerMsg,
        state: &mut KillerState,
    ) -> Result<(), ActorProcessingErr> {
        match (message, &state.phase) {
            (KillerMsg::Terminate, Phase::Idle) => {
                if !state.group_alive().await {
                    state.finish(&myself).await;
                } else {
                    state.signal(StopSignal::Terminate);
                    state.phase = Phase::Grace {
                        kill_at: Instant::now() + TERMINATE_GRACE,
                    };
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::SweepAfterExit, Phase::Idle) => {
                // The leader is reaped by now, so the cheap probe answers the common case;
                // /proc is scanned only to name what is left.
                if !state.group_alive().await {
                    state.finish(&myself).await;
                } else {
                    let leaked = state.live_members().await;
                    tracing::info!(
                        pgid = state.pgid,
                        leaked = ?leaked,
                        "descendants outlived the worker"
                    );
                    state.report.leaked = leaked;
                    state.start_killing(&myself);
                }
            }
            (KillerMsg::KillNow, Phase::Grace { .. }) => {
                tracing::info!(
                    pgid = state.pgid,
                    "second signal: skipping the grace period"
                );
                state.start_killing(&myself);
            }
            (KillerMsg::KillNow, Phase::Idle) => {
                if state.group_alive().await {
                    state.start_killing(&myself);
                } else {
                    state.finish(&myself).await;
                }
            }
            (KillerMsg::Poll, Phase::Grace { kill_at }) => {
                let kill_at = *kill_at;
                if !state.group_alive().await {
                    state.finish(&myself).await;
                } else if Instant::now() >= kill_at {
                    state.start_killing(&myself);
                } else {
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::Poll, Phase::Killing { give_up_at }) => {
                let give_up_at = *give_up_at;
                if !state.group_alive().await {
                    state.finish(&myself).await;
                } else if Instant::now() >= give_up_at {
                    state.report.survivors = state.live_members().await;
                    tracing::error!(pgid = state.pgid, survivors = ?state.report.survivors, "process group survived SIGKILL");
                    state.finish(&myself).await;
                } else {
                    state.signal(StopSignal::Kill);
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::Poll, Phase::Adoptees { .. }) => state.sweep_adoptees(&myself).await,
            // Requests that arrive in a phase where they change nothing (a second Terminate,
            // KillNow while already killing, a stale Poll) are no-ops by design.
            _ => {}
        }
        Ok(())
    }
}

fn schedule_poll(myself: &ActorRef<KillerMsg>) {
    myself.send_after(POLL_INTERVAL, || KillerMsg::Poll);
}

impl KillerState {
    fn start_killing(&mut self, myself: &ActorRef<KillerMsg>) {
        self.signal(StopSignal::Kill);
        self.phase = Phase::Killing {
            give_up_at: Instant::now() + KILL_ROUNDS_LIMIT,
        };
        schedule_poll(myself);
    }

    fn signal(&mut self, signal: StopSignal) {
        if let Err(error) = process_group::signal_group(self.pgid, signal) {
            tracing::error!(pgid = self.pgid, %error, "process group not signalled");
            return;
        }
        let first = match signal {
            StopSignal::Terminate => !std::mem::replace(&mut self.term_sent, true),
            StopSignal::Kill => !std::mem::replace(&mut self.kill_sent, true),
        };
        if first {
            tracing::info!(
                pgid = self.pgid,
                signal = signal.name(),
                "signal sent to process group"
            );
        }
    }

    /// True while any non-zombie process is in the group.
    async fn group_alive(&self) -> bool {
        // The cheap probe answers "empty" without scanning /proc.
        if !process_group::group_exists(self.pgid) {
            return false;
        }
        !self.live_members().await.is_empty()
    }

    /// Pids of the group's live members (a `/proc` scan, off the runtime threads).
    async fn live_members(&self) -> Vec<u32> {
        let pgid = self.pgid;
        off_runtime(move || {
            proc::live_group_members(pgid)
                .map(|members| members.iter().map(|member| member.pid).collect())
                .unwrap_or_default()
        })
        .await
    }

    /// The group is empty: go on to the adopted descendants.
    async fn finish(&mut self, myself: &ActorRef<KillerMsg>) {
        tracing::info!(pgid = self.pgid, "process group empty");
        self.phase = Phase::Adoptees {
            give_up_at: Instant::now() + ADOPTEE_SWEEP_LIMIT,
            thorough: false,
            quiet_passes: 0,
        };
        self.sweep_adoptees(myself).await;
    }

    /// One pass over adopted descendants; reports once two thorough passes in a row found
    /// nothing alive (one quick pass when there was never anything), or when the bound is hit.
    async fn sweep_adoptees(&mut self, myself: &ActorRef<KillerMsg>) {
        let Phase::Adoptees {
            give_up_at,
            thorough,
            quiet_passes,
        } = self.phase
        else {
            return;
        };
        let leader = self.pgid;
        let worker_started_ticks = self.worker_started_ticks;
        let inherited = self.inherited.clone();
        let pass =
            off_runtime(move || sweep_pass(leader, worker_started_ticks, &inherited, thorough))
                .await;
        let stopped = pass.stopped;
        if stopped.is_empty() && pass.reaped > 0 {
            // Escapees existed: keep looking (thoroughly) until passes come back empty.
            if Instant::now() >= give_up_at {
                return self.report();
            }
            self.phase = Phase::Adoptees {
                give_up_at,
                thorough: true,
                quiet_passes: 0,
            };
            return schedule_poll(myself);
        }
        if stopped.is_empty() {
            if !thorough || quiet_passes >= 1 {
                return self.report();
            }
            self.phase = Phase::Adoptees {
                give_up_at,
                thorough,
                quiet_passes: quiet_passes + 1,
            };
            return schedule_poll(myself);
        }
        let known: HashSet<u32> = self.report.escaped.iter().copied().collect();
        let new: Vec<u32> = stopped
            .iter()
            .copied()
            .filter(|pid| !known.contains(pid))
            .collect();
        if !new.is_empty() {
            tracing::info!(count = new.len(), pids = ?new, "descendants escaped the process group; killing them");
        }
        self.report.escaped.extend(new);
        if Instant::now() >= give_up_at {
            tracing::error!(survivors = ?stopped, "escaped descendants were still alive when the sweep gave up");
            self.report.survivors.extend(stopped);
            return self.report();
        }
        self.phase = Phase::Adoptees {
            give_up_at,
            thorough: true,
            quiet_passes: 0,
        };
        schedule_poll(myself);
    }

    fn report(&mut self) {
        // Only what is gone was killed: a pid still alive at the end is a survivor.
        let survivors: HashSet<u32> = self.report.survivors.iter().copied().collect();
        self.report.escaped.retain(|pid| !survivors.contains(pid));
        // The group is stopped: the watchdog need not stop it if the handler dies now.
        watchdog::release(self.pgid);
        self.phase = Phase::Reported;
        notify(
            &self.supervisor,
            AttemptMsg::GroupEmptied(std::mem::take(&mut self.report)),
        );
    }
}

/// One pass of the escaped-descendant sweep (blocking `/proc` work): reaps adopted zombies,
/// freezes every adoptee and its whole lineage — SIGSTOP level by level, reading the children
/// of processes already stopped, so a lineage cannot fork its way out — then SIGKILLs all of
/// it, and returns the pids it stopped. A quick pass (nothing found yet) reads only the
/// handler's children list, so an attempt without escapees costs no `/proc` scan.
fn sweep_pass(
    leader: u32,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
    thorough: bool,
) -> SweepPass {
    let handler = proc::own_pid();
    let is_inherited = |stat: &ProcStat| inherited.contains(stat);
    let scope = SweepScope {
        handler,
        leader,
        worker_started_ticks,
        inherited: &is_inherited,
    };
    let mut freezer = Freezer::default();
    let children = proc::own_children().unwrap_or_default();
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
        stopped: freezer.frozen.iter().map(|target| target.pid).collect(),
        reaped: freezer.reaped,
    }
}

/// What one sweep pass did.
#[derive(Default)]
struct SweepPass {
    /// Live escapees stopped and killed.
    stopped: Vec<u32>,
    /// Zombies reaped that had left the worker's group: the sweep goes on even when nothing
    /// was alive.
    reaped: usize,
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
