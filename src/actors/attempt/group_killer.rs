//! GroupKiller: owns the worker's process group, addressed by the pgid saved at launch — never
//! by a pid, and never our own group.
//!
//! - `Terminate`: SIGTERM to the group, poll until it is empty or the grace period (0.5 s)
//!   ends, then SIGKILL, re-sent in bounded rounds while any member is alive (a process forked
//!   mid-walk can miss one `killpg`); the steps and their timing are the domain's
//!   [`Escalation`], shared with the watchdog.
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
//! what the last pass killed and is still alive (not a zombie) after a short wait (0.5 s) is
//! reported as surviving. The report names as killed only what is gone.
//!
//! The killer polls with self-scheduled messages instead of sleeping inside a handler, so
//! `KillNow` is handled promptly, and every `/proc` scan runs off the runtime. "Empty"
//! means no *live* member: zombies waiting for a parent to reap them run nothing and hold no
//! pipe.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;
use tracing::Instrument;

use super::messages::AttemptMsg;
use crate::actors::{notify, off_runtime};
use crate::domain::escalation::{CHECK_INTERVAL, Escalation, KillStep, StopSignal};
use crate::domain::lifecycle::GroupReport;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::process_tree::{SweepNext, SweepRounds};
use crate::platform::proc::{self, ChildSnapshot};
use crate::platform::process_group;
use crate::platform::{descendant_sweep, watchdog};

/// How often the adopted-descendant sweep passes again.
const SWEEP_INTERVAL: Duration = Duration::from_millis(5);
/// How long escaped descendants are swept before the survivors are reported.
const ADOPTEE_SWEEP_LIMIT: Duration = Duration::from_secs(5);
/// How long a sweep that gives up waits for its last SIGKILLs to take effect before it names
/// what still lives as surviving.
const SURVIVOR_WAIT: Duration = Duration::from_millis(500);

pub(crate) enum KillerMsg {
    Terminate,
    KillNow,
    SweepAfterExit,
    Poll,
}

pub(crate) struct GroupKiller;

pub(crate) struct KillerArgs {
    pub(crate) pgid: u32,
    /// The leader's start time (`/proc/<pid>/stat` field 22). An adopted child that started
    /// before it cannot descend from the worker — the handler inherited it across `exec` — so
    /// it is never signalled. `None` when the identity could not be read: then no adopted
    /// process is signalled at all, since none can be told apart.
    pub(crate) worker_started_ticks: Option<u64>,
    /// The handler's children before its first worker started: inherited, never signalled.
    pub(crate) inherited: Arc<ChildSnapshot>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// The attempt's span: every record of the killer (each SIGTERM and SIGKILL) carries
    /// the run and attempt ids.
    pub(crate) span: tracing::Span,
}

enum Phase {
    Idle,
    /// Stopping the group: SIGTERM, grace, SIGKILL rounds ([`Escalation`]).
    Escalating(Escalation),
    /// The group is empty; adopted descendants are killed and reaped until none is left.
    Adoptees {
        give_up_at: Instant,
        rounds: SweepRounds,
    },
    Reported,
}

pub(crate) struct KillerState {
    pgid: u32,
    worker_started_ticks: Option<u64>,
    inherited: Arc<ChildSnapshot>,
    supervisor: ActorRef<AttemptMsg>,
    phase: Phase,
    report: GroupReport,
    term_sent: bool,
    kill_sent: bool,
    span: tracing::Span,
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
            span: args.span,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<KillerMsg>,
        message: KillerMsg,
        state: &mut KillerState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        state.on_message(message, &myself).instrument(span).await;
        Ok(())
    }
}

fn schedule_poll(myself: &ActorRef<KillerMsg>, after: Duration) {
    myself.send_after(after, || KillerMsg::Poll);
}

impl KillerState {
    async fn on_message(&mut self, message: KillerMsg, myself: &ActorRef<KillerMsg>) {
        match (message, &mut self.phase) {
            (KillerMsg::Terminate, Phase::Idle) => {
                self.phase = Phase::Escalating(Escalation::terminate());
                self.escalate(myself).await;
            }
            (KillerMsg::SweepAfterExit, Phase::Idle) => {
                // The leader is reaped by now, so the cheap probe answers the common case;
                // /proc is scanned only to name what is left.
                if !self.group_alive().await {
                    self.finish(myself).await;
                } else {
                    let leaked = self.live_members().await;
                    tracing::info!(
                        pgid = self.pgid,
                        leaked = ?leaked,
                        "descendants outlived the worker"
                    );
                    self.report.leaked = leaked;
                    self.phase = Phase::Escalating(Escalation::kill());
                    self.escalate(myself).await;
                }
            }
            (KillerMsg::KillNow, Phase::Escalating(escalation)) if !escalation.killing() => {
                tracing::info!(pgid = self.pgid, "second signal: skipping the grace period");
                escalation.skip_grace();
                self.escalate(myself).await;
            }
            (KillerMsg::KillNow, Phase::Idle) => {
                self.phase = Phase::Escalating(Escalation::kill());
                self.escalate(myself).await;
            }
            (KillerMsg::Poll, Phase::Escalating(_)) => self.escalate(myself).await,
            (KillerMsg::Poll, Phase::Adoptees { .. }) => self.sweep_adoptees(myself).await,
            // Requests that arrive in a phase where they change nothing (a second Terminate,
            // a stale Poll) are no-ops by design.
            _ => {}
        }
    }

    /// Probes the group and carries out the escalation's next step.
    async fn escalate(&mut self, myself: &ActorRef<KillerMsg>) {
        let alive = self.group_alive().await;
        let Phase::Escalating(escalation) = &mut self.phase else {
            return;
        };
        match escalation.step(std::time::Instant::now(), alive) {
            KillStep::Send(signal) => {
                self.signal(signal);
                schedule_poll(myself, CHECK_INTERVAL);
            }
            KillStep::CheckAfter(after) => schedule_poll(myself, after),
            KillStep::Emptied => self.finish(myself).await,
            KillStep::GaveUp => {
                self.report.survivors = self.live_members().await;
                tracing::error!(pgid = self.pgid, survivors = ?self.report.survivors, "process group survived SIGKILL");
                self.finish(myself).await;
            }
        }
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
            rounds: SweepRounds::default(),
        };
        self.sweep_adoptees(myself).await;
    }

    /// One pass over adopted descendants; reports when [`SweepRounds`] says the sweep is done,
    /// or when the bound is hit.
    async fn sweep_adoptees(&mut self, myself: &ActorRef<KillerMsg>) {
        let Phase::Adoptees {
            give_up_at,
            mut rounds,
        } = self.phase
        else {
            return;
        };
        let leader = self.pgid;
        let worker_started_ticks = self.worker_started_ticks;
        let inherited = self.inherited.clone();
        let thorough = rounds.thorough();
        // An attempt without escapees — nearly every one — is told so by a look that does not
        // block; anything else is a pass off the runtime.
        let nothing_to_sweep = !thorough
            && descendant_sweep::nothing_adopted(leader, worker_started_ticks, &inherited)
                == Some(true);
        let pass = if nothing_to_sweep {
            descendant_sweep::SweepPass::default()
        } else {
            off_runtime(move || {
                descendant_sweep::sweep_pass(leader, worker_started_ticks, &inherited, thorough)
            })
            .await
        };
        let known: HashSet<u32> = self.report.escaped.iter().copied().collect();
        let new: Vec<u32> = pass
            .stopped
            .iter()
            .map(|killed| killed.pid)
            .filter(|pid| !known.contains(pid))
            .collect();
        if !new.is_empty() {
            tracing::info!(count = new.len(), pids = ?new, "descendants escaped the process group; killing them");
        }
        self.report.escaped.extend(new);
        if rounds.after_pass(pass.stopped.len(), pass.reaped) == SweepNext::Done {
            return self.report();
        }
        if Instant::now() >= give_up_at {
            // The last pass SIGKILLed what it found; only what still lives (not a zombie, not
            // a reused pid) after a short wait survived it.
            let killed = pass.stopped;
            let survivors = if killed.is_empty() {
                Vec::new()
            } else {
                off_runtime(move || descendant_sweep::still_alive(&killed, SURVIVOR_WAIT)).await
            };
            if !survivors.is_empty() {
                tracing::error!(survivors = ?survivors, "escaped descendants were still alive when the sweep gave up");
                self.report.survivors.extend(survivors);
            }
            return self.report();
        }
        self.phase = Phase::Adoptees { give_up_at, rounds };
        schedule_poll(myself, SWEEP_INTERVAL);
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
            AttemptEvent::GroupEmptied(std::mem::take(&mut self.report)).into(),
        );
    }
}
