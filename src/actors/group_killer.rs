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
//! started after the worker is SIGKILLed (it is our child, so its pid cannot have been reused;
//! a child that predates the worker was inherited across `exec` and is left alone) and every
//! adopted zombie is reaped by pid — never with `waitpid(-1)`, which would steal tokio's
//! children.
//!
//! The killer polls with self-scheduled messages instead of sleeping inside a handler, so
//! `KillNow` is handled promptly. "Empty" means no *live* member: zombies waiting for a parent
//! to reap them run nothing and hold no pipe.

use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::attempt_supervisor::AttemptMsg;
use super::notify;
use crate::platform::proc::{self, ChildSnapshot};

/// How long a group gets between SIGTERM and SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// How often membership is polled while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// How long SIGKILL is re-sent before the killer reports survivors and gives up.
const KILL_ROUNDS_LIMIT: Duration = Duration::from_secs(2);

pub enum KillerMsg {
    Terminate,
    KillNow,
    SweepAfterExit,
    Poll,
}

/// What the killer found and did, reported once the group is empty (or given up on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KillReport {
    /// Pids still alive in the group when the leader had exited on its own.
    pub leaked: Vec<u32>,
    /// Descendants that had left the group and were found, adopted, after it emptied.
    pub escaped: Vec<u32>,
    /// Pids that survived every SIGKILL round (should never happen outside D-state sleeps).
    pub survivors: Vec<u32>,
    pub term_sent: bool,
    pub kill_sent: bool,
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
    },
    Reported,
}

pub struct KillerState {
    pgid: u32,
    worker_started_ticks: Option<u64>,
    inherited: Arc<ChildSnapshot>,
    supervisor: ActorRef<AttemptMsg>,
    phase: Phase,
    report: KillReport,
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
            report: KillReport::default(),
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
                if !state.group_alive() {
                    state.finish(&myself);
                } else {
                    state.signal(Signal::SIGTERM);
                    state.phase = Phase::Grace {
                        kill_at: Instant::now() + TERMINATE_GRACE,
                    };
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::SweepAfterExit, Phase::Idle) => {
                // The leader is reaped by now, so the cheap probe answers the common case;
                // /proc is scanned only to name what is left.
                if !state.group_alive() {
                    state.finish(&myself);
                } else {
                    let leaked: Vec<u32> = proc::live_group_members(state.pgid)
                        .map(|members| members.iter().map(|m| m.pid).collect())
                        .unwrap_or_default();
                    tracing::info!(
                        pgid = state.pgid,
                        ?leaked,
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
                if state.group_alive() {
                    state.start_killing(&myself);
                } else {
                    state.finish(&myself);
                }
            }
            (KillerMsg::Poll, Phase::Grace { kill_at }) => {
                let kill_at = *kill_at;
                if !state.group_alive() {
                    state.finish(&myself);
                } else if Instant::now() >= kill_at {
                    state.start_killing(&myself);
                } else {
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::Poll, Phase::Killing { give_up_at }) => {
                let give_up_at = *give_up_at;
                if !state.group_alive() {
                    state.finish(&myself);
                } else if Instant::now() >= give_up_at {
                    state.report.survivors = proc::live_group_members(state.pgid)
                        .map(|members| members.iter().map(|m| m.pid).collect())
                        .unwrap_or_default();
                    tracing::error!(pgid = state.pgid, survivors = ?state.report.survivors, "process group survived SIGKILL");
                    state.finish(&myself);
                } else {
                    state.signal(Signal::SIGKILL);
                    schedule_poll(&myself);
                }
            }
            (KillerMsg::Poll, Phase::Adoptees { give_up_at }) => {
                let give_up_at = *give_up_at;
                state.sweep_adoptees(&myself, give_up_at);
            }
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
        self.signal(Signal::SIGKILL);
        self.phase = Phase::Killing {
            give_up_at: Instant::now() + KILL_ROUNDS_LIMIT,
        };
        schedule_poll(myself);
    }

    /// Signals the whole group. Refuses our own group, whatever the saved pgid says.
    fn signal(&mut self, signal: Signal) {
        let own_group = getpgrp().as_raw() as u32;
        if self.pgid <= 1 || self.pgid == own_group {
            tracing::error!(
                pgid = self.pgid,
                "refusing to signal the handler's own process group"
            );
            return;
        }
        match killpg(Pid::from_raw(self.pgid as i32), signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => tracing::warn!(pgid = self.pgid, %error, ?signal, "killpg failed"),
        }
        match signal {
            Signal::SIGTERM if !self.report.term_sent => {
                self.report.term_sent = true;
                tracing::info!(pgid = self.pgid, "SIGTERM sent to process group");
            }
            Signal::SIGKILL if !self.report.kill_sent => {
                self.report.kill_sent = true;
                tracing::info!(pgid = self.pgid, "SIGKILL sent to process group");
            }
            _ => {}
        }
    }

    /// True while any non-zombie process is in the group.
    fn group_alive(&self) -> bool {
        // Probe with signal 0 first: ESRCH answers "empty" without scanning /proc.
        match killpg(Pid::from_raw(self.pgid as i32), None) {
            Err(Errno::ESRCH) => false,
            _ => proc::live_group_members(self.pgid).is_ok_and(|members| !members.is_empty()),
        }
    }

    /// The group is empty: go on to the adopted descendants.
    fn finish(&mut self, myself: &ActorRef<KillerMsg>) {
        tracing::info!(pgid = self.pgid, "process group empty");
        let give_up_at = Instant::now() + KILL_ROUNDS_LIMIT;
        self.phase = Phase::Adoptees { give_up_at };
        self.sweep_adoptees(myself, give_up_at);
    }

    /// Reaps adopted zombies and kills adopted live processes; reports when none is alive.
    fn sweep_adoptees(&mut self, myself: &ActorRef<KillerMsg>, give_up_at: Instant) {
        let mut alive = Vec::new();
        for pid in proc::own_children().unwrap_or_default() {
            // The leader is tokio's child; tokio reaps it.
            if pid == self.pgid {
                continue;
            }
            match proc::stat(pid) {
                Ok(Some(stat)) if stat.is_defunct() => {
                    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
                }
                // Start times have clock-tick resolution (10 ms), so only a strictly earlier
                // start proves a child is not the worker's; the snapshot covers the rest.
                Ok(Some(stat))
                    if self.inherited.contains(&stat)
                        || self
                            .worker_started_ticks
                            .is_none_or(|started| stat.start_time_ticks < started) =>
                {
                    // Not the worker's: inherited by the handler, or not identifiable.
                    tracing::debug!(pid, "adopted child predates the worker; left alone");
                }
                Ok(Some(_)) => {
                    if !self.report.escaped.contains(&pid) {
                        tracing::info!(pid, "descendant escaped the process group; killing it");
                        self.report.escaped.push(pid);
                    }
                    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
                    alive.push(pid);
                }
                _ => {}
            }
        }
        if alive.is_empty() {
            self.report();
        } else if Instant::now() >= give_up_at {
            tracing::error!(survivors = ?alive, "escaped descendants survived SIGKILL");
            self.report.survivors.extend(alive);
            self.report();
        } else {
            schedule_poll(myself);
        }
    }

    fn report(&mut self) {
        self.phase = Phase::Reported;
        notify(
            &self.supervisor,
            AttemptMsg::GroupEmptied(std::mem::take(&mut self.report)),
        );
    }
}
