//! GroupKiller: owns the worker's process group (the pgid saved at launch) and its stop job:
//! the first request starts it off the runtime, `KillNow` skips what is left of the grace, and
//! the job reports `GroupEmptied` (docs/architecture.md, "Process groups").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::Instrument;

use super::messages::AttemptMsg;
use crate::actors::{notify, off_runtime};
use crate::domain::lifecycle::GroupReport;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::platform::proc::ChildSnapshot;
use crate::platform::process_group::{self, Stop};
use crate::platform::{descendant_sweep, watchdog};

pub(crate) enum KillerMsg {
    Terminate,
    KillNow,
    SweepAfterExit,
}

pub(crate) struct GroupKiller;

pub(crate) struct KillerArgs {
    pub(crate) pgid: u32,
    /// The leader's start time: an adopted child that started before it is no descendant of
    /// the worker. `None` when unknown: then no adopted process is signalled at all.
    pub(crate) worker_started_ticks: Option<u64>,
    /// The handler's children before its first worker started: inherited, never signalled.
    pub(crate) inherited: Arc<ChildSnapshot>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    pub(crate) span: tracing::Span,
}

pub(crate) struct KillerState {
    args: KillerArgs,
    started: bool,
    /// Read by the job at every look: a second signal came.
    kill_now: Arc<AtomicBool>,
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
            args,
            started: false,
            kill_now: Arc::new(AtomicBool::new(false)),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<KillerMsg>,
        message: KillerMsg,
        state: &mut KillerState,
    ) -> Result<(), ActorProcessingErr> {
        match (message, state.started) {
            (KillerMsg::Terminate, false) => state.start(Stop::Terminate),
            (KillerMsg::SweepAfterExit, false) => state.start(Stop::AfterExit),
            (KillerMsg::KillNow, false) => {
                // SIGKILL at once: the job finds the request at its first look.
                state.kill_now.store(true, Ordering::SeqCst);
                state.start(Stop::Terminate);
            }
            (KillerMsg::KillNow, true) => state.kill_now.store(true, Ordering::SeqCst),
            // The group's end is under way: a second Terminate or SweepAfterExit changes
            // nothing.
            (KillerMsg::Terminate | KillerMsg::SweepAfterExit, true) => {}
        }
        Ok(())
    }
}

impl KillerState {
    fn start(&mut self, stop: Stop) {
        self.started = true;
        let pgid = self.args.pgid;
        let worker_started_ticks = self.args.worker_started_ticks;
        let inherited = self.args.inherited.clone();
        let kill_now = self.kill_now.clone();
        let supervisor = self.args.supervisor.clone();
        let job = move || {
            let kill_now = || kill_now.load(Ordering::SeqCst);
            let stopped = process_group::stop_group(
                pgid,
                "the worker",
                stop,
                &kill_now,
                &mut std::thread::sleep,
            );
            tracing::info!(pgid, "process group empty");
            let swept = descendant_sweep::sweep_until_done(pgid, worker_started_ticks, &inherited);
            // The group is stopped: the watchdog need not stop it if the handler dies now.
            watchdog::release(pgid);
            let mut survivors = stopped.survivors;
            survivors.extend(swept.survivors);
            GroupReport {
                leaked: stopped.leaked,
                escaped: swept.escaped,
                survivors,
            }
        };
        tokio::spawn(
            async move {
                let report = off_runtime(job).await;
                notify(&supervisor, AttemptEvent::GroupEmptied(report).into());
            }
            .instrument(self.args.span.clone()),
        );
    }
}
