//! RunSupervisor: one per `run` invocation. It executes the phase loop whose rules live in
//! [`crate::domain::lifecycle::run`] — admission, the checkpoint between phases, one
//! [`AttemptSupervisor`] at a time — and hands a typed [`RunResult`] back to the command,
//! which words and prints it once every lock is released.
//!
//! Its children own the invocation-wide resources: [`SignalIntake`] (started first, so every
//! later step runs with the stopping signals caught), [`WorkspaceLocks`] and [`StateStore`]. File
//! reads (state, plan re-hash, workspaces, `/proc`) run on the blocking pool.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::attempt_supervisor::{
    AttemptMsg, AttemptOutcome, AttemptReport, AttemptSpec, AttemptSupervisor, AttemptTurn,
    RecordFailure,
};
use super::observer::{Emitter, RunObserver};
use super::signal_intake::SignalIntake;
use super::state_store::{StateStore, StoreArgs, StoreError, StoreMsg};
use super::workspace_locks::{LockId, LockMsg, WorkspaceLocks};
use super::{call, notify, off_runtime};
use crate::domain::decision::Decision;
use crate::domain::events::RunEvent;
use crate::domain::exit_code::ExitCode;
use crate::domain::lifecycle::run::{AfterAttempt, AttemptEnd, Checkpoint, RunLoop, SignalAction};
use crate::domain::prompt::{EarlierAttempt, RetryNote};
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::selection::{
    FirstSelection, RecoveryFlags, Refusal, admit, next_pending, way_forward,
};
use crate::domain::state::{ActiveAttempt, AttemptStatus, LastRun, PlanRecord, State};
use crate::domain::timestamp::Timestamp;
use crate::invocation::{
    InputError, PlanSnapshot, RunSettings, abandoned_retry_allowed, current_plan_hash,
    execution_workspace_of, read_state,
};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::locks::LockScope;
use crate::platform::proc::ChildSnapshot;
use crate::platform::process_group;

/// How long the signal intake may take to stop when the run ends (it only closes its
/// registration; its state is dropped, with the same effect, if it does not answer).
const INTAKE_STOP_LIMIT: Duration = Duration::from_secs(2);

/// How a `run` ended, for the command to report.
#[derive(Debug)]
pub enum RunEnd {
    /// Every phase is complete.
    AllComplete,
    /// `--max-phases` was reached with phases left; `last_completed` completed last.
    PhaseLimitReached { last_completed: String },
    /// A committed attempt stopped the run (blocked, needs clarification, or a failure).
    PhaseStopped {
        decision: Decision,
        outcome_path: String,
        transcript_path: String,
        /// A signal that arrived after the outcome was decided: the outcome stands as
        /// committed, and the run exits 128 + it instead of going on.
        signal_after_decision: Option<i32>,
        /// The same write scheduled the phase's next attempt (it stays in the state).
        retry_scheduled: bool,
    },
    /// The prepared record was not written; `still_active` when it became visible anyway.
    NotPrepared {
        error: StoreError,
        still_active: Option<Box<ActiveAttempt>>,
    },
    /// The outcome was decided but could not be committed; `still_active` is the durable
    /// active attempt when the failed write left it in place.
    Unresolved {
        decision: Decision,
        failure: RecordFailure,
        attempt: Box<ActiveAttempt>,
        still_active: Option<Box<ActiveAttempt>>,
    },
    /// A signal arrived while no attempt was running; `plan_complete` when nothing was left
    /// to launch.
    InterruptedBeforeLaunch { signal: i32, plan_complete: bool },
    /// A signal arrived while the run waited for a scheduled retry of `phase_id`; the
    /// schedule stays in state for a later run.
    InterruptedDuringWait { signal: i32, phase_id: String },
    /// Admission refused the run.
    Refused {
        refusal: Refusal,
        plan_workspace: String,
        /// A stopped phase's execution workspace, or why it is unavailable.
        execution_workspace: Option<Result<String, InputError>>,
        last_run: Option<Box<LastRun>>,
        /// The recovery flags with which the run would be admitted
        /// ([`crate::domain::selection::way_forward`]); `None` when no flag lifts the refusal.
        lifted_by: Option<RecoveryFlags>,
    },
    /// The plan file changed during the run.
    PlanChanged {
        path: String,
        expected: String,
        actual: String,
    },
    /// An input became unusable (lock held, state or plan unreadable, workspace gone).
    Input(InputError),
    /// The accepted plan could not be recorded when no attempt followed.
    AcceptanceFailed(StoreError),
    /// A bug: an actor failed.
    Internal {
        message: String,
        attempt_may_be_unresolved: bool,
    },
}

/// The end of a run and its exit code.
#[derive(Debug)]
pub struct RunResult {
    pub end: RunEnd,
    pub exit: ExitCode,
    /// The first phase, in plan order, not completed in the final durable state (the
    /// stopped one, if a phase stopped); `None` when all are complete or the state was never
    /// taken over.
    pub next_phase: Option<String>,
}

pub enum RunMsg {
    /// Take the plan lock, load state, decide admission.
    Begin,
    /// Decide what comes next: launch a phase, or finish.
    Checkpoint,
    SignalReceived(i32),
    AttemptConcluded(Box<AttemptReport>),
    /// The scheduled retry is due (its not-before time passed).
    RetryDue,
}

pub struct RunArgs {
    pub location: Arc<PlanLocation>,
    pub snapshot: Arc<PlanSnapshot>,
    pub settings: Arc<RunSettings>,
    /// Told every lifecycle event as it happens.
    pub observer: Arc<dyn RunObserver>,
    /// The live console shared by every attempt (agent output) and the progress lines, so
    /// both reach the terminal in order; `None` with `--quiet`.
    pub console: Option<Arc<Console>>,
    /// Receives the result once everything is committed and released.
    pub done: oneshot::Sender<RunResult>,
}

/// The next attempt of a phase the retry policy scheduled.
struct PendingRetry {
    schedule: RetrySchedule,
}

pub struct RunSupervisor;

struct RunningAttempt {
    actor: ActorRef<AttemptMsg>,
    lock: LockId,
}

pub struct RunState {
    location: Arc<PlanLocation>,
    snapshot: Arc<PlanSnapshot>,
    settings: Arc<RunSettings>,
    done: Option<oneshot::Sender<RunResult>>,
    span: tracing::Span,
    /// Stopped when the run ends, which gives the stopping signals their default action back.
    intake: Option<ActorRef<()>>,
    locks: ActorRef<LockMsg>,
    store: Option<ActorRef<StoreMsg>>,
    run_loop: RunLoop,
    /// The first selection decided by admission, consumed by the first checkpoint.
    first: Option<FirstSelection>,
    /// A plan record to accept with the first durable write.
    accept: Option<PlanRecord>,
    attempt: Option<RunningAttempt>,
    /// The handler's children before any worker: inherited across `exec`, never stopped.
    inherited_children: Arc<ChildSnapshot>,
    events: Emitter,
    console: Option<Arc<Console>>,
    /// The scheduled next attempt of the current phase, while waiting for it.
    pending_retry: Option<PendingRetry>,
    /// The current phase's attempts in this invocation, for a retry's prompt.
    phase_attempts: Vec<EarlierAttempt>,
}

impl Actor for RunSupervisor {
    type Msg = RunMsg;
    type State = RunState;
    type Arguments = RunArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RunMsg>,
        args: RunArgs,
    ) -> Result<RunState, ActorProcessingErr> {
        let span = tracing::info_span!(
            "run",
            run_id = tracing::field::Empty,
            plan = %args.location.plan_path,
            workspace = %args.location.workspace
        );
        // Descendants that leave a worker's process group become our children when their
        // parent dies, so the group killer can still find and stop them.
        if let Err(error) = process_group::become_child_subreaper() {
            tracing::warn!(%error, "cannot become a child subreaper; escaped descendants will not be stopped");
        }
        let (intake, _) =
            Actor::spawn_linked(None, SignalIntake, myself.clone(), myself.get_cell()).await?;
        let (locks, _) = Actor::spawn_linked(None, WorkspaceLocks, (), myself.get_cell()).await?;
        let inherited_children = Arc::new(off_runtime(ChildSnapshot::take).await);
        let run_id = uuid::Uuid::new_v4().to_string();
        span.record("run_id", run_id.as_str());
        let events = Emitter::new(args.observer, &run_id);
        notify(&myself, RunMsg::Begin);
        Ok(RunState {
            run_loop: RunLoop::new(args.settings.max_phases),
            location: args.location,
            snapshot: args.snapshot,
            settings: args.settings,
            done: Some(args.done),
            span,
            intake: Some(intake),
            locks,
            store: None,
            first: None,
            accept: None,
            attempt: None,
            inherited_children,
            events,
            console: args.console,
            pending_retry: None,
            phase_attempts: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RunMsg>,
        message: RunMsg,
        state: &mut RunState,
    ) -> Result<(), ActorProcessingErr> {
        if state.done.is_none() {
            return Ok(());
        }
        let span = state.span.clone();
        async {
            match message {
                RunMsg::Begin => state.begin(&myself).await,
                RunMsg::Checkpoint => state.checkpoint(&myself).await,
                RunMsg::SignalReceived(signal) => state.on_signal(signal, &myself).await,
                RunMsg::AttemptConcluded(report) => {
                    state.on_attempt_concluded(*report, &myself).await
                }
                RunMsg::RetryDue => state.on_retry_due(&myself),
            }
        }
        .instrument(span)
        .await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RunMsg>,
        event: SupervisionEvent,
        state: &mut RunState,
    ) -> Result<(), ActorProcessingErr> {
        // Attempt supervisors stop on purpose after reporting; only failures are news.
        if let SupervisionEvent::ActorFailed(who, error) = event {
            tracing::error!(actor = %who.get_id(), %error, "run actor failed");
            if state.done.is_some() {
                let attempt_may_be_unresolved = state
                    .attempt
                    .as_ref()
                    .is_some_and(|attempt| attempt.actor.get_id() == who.get_id());
                let end = RunEnd::Internal {
                    message: error.to_string(),
                    attempt_may_be_unresolved,
                };
                state.finish(&myself, end, ExitCode::AgentFailed).await;
            }
        }
        Ok(())
    }
}

impl RunState {
    async fn begin(&mut self, myself: &ActorRef<RunMsg>) {
        if let Err(end) = self
            .acquire_lock(self.location.workspace.clone(), LockScope::PlanWorkspace)
            .await
        {
            return self.end(myself, end).await;
        }
        let layout = self.location.layout.clone();
        let loaded = match off_runtime(move || read_state(&layout)).await {
            Ok(state) => state,
            Err(error) => return self.refuse(myself, error).await,
        };
        self.events.emit(
            None,
            RunEvent::RunStarted {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                args: std::env::args().collect(),
                plan: self.location.plan_path.clone(),
                phases: self.snapshot.plan.phases.len(),
                completed: loaded.completed_phase_ids.len(),
            },
        );
        let now = Timestamp::from_datetime(chrono::Utc::now());
        let schedule_fits = loaded.retry_schedule.as_ref().is_some_and(|schedule| {
            let settings = &self.settings;
            let fits = schedule.fits(
                &settings.retry,
                &settings.rate_limit,
                settings.templates.len(),
            );
            if let Err(why) = &fits {
                tracing::info!(
                    %why,
                    "the recorded retry schedule does not fit this run's policy"
                );
            }
            fits.is_ok()
        });
        let admission = match admit(
            &loaded,
            &self.snapshot.facts(),
            self.settings.flags,
            schedule_fits,
            now,
        ) {
            Ok(admission) => admission,
            Err(refusal) => {
                tracing::info!(%refusal, "run refused");
                let end = self.refused(refusal, &loaded, schedule_fits, now).await;
                return self.finish(myself, end, ExitCode::InvalidInput).await;
            }
        };
        if let FirstSelection::RetryAbandoned(attempt) = &admission.first {
            let (location, snapshot, attempt) = (
                self.location.clone(),
                self.snapshot.clone(),
                attempt.clone(),
            );
            let allowed =
                off_runtime(move || abandoned_retry_allowed(&location, &snapshot, &attempt)).await;
            if let Err(error) = allowed {
                return self.refuse(myself, error).await;
            }
        }
        let last_run = loaded.last_run.clone();
        let store = Actor::spawn_linked(
            None,
            StateStore,
            StoreArgs {
                layout: self.location.layout.clone(),
                loaded,
            },
            myself.get_cell(),
        )
        .await;
        match store {
            Ok((store, _)) => self.store = Some(store),
            Err(error) => {
                let end = RunEnd::Internal {
                    message: format!("state store did not start: {error}"),
                    attempt_may_be_unresolved: false,
                };
                return self.finish(myself, end, ExitCode::AgentFailed).await;
            }
        }
        let (first, first_phase) = match &admission.first {
            FirstSelection::RetryAbandoned(attempt) => {
                ("retry-abandoned", Some(attempt.phase.id.as_str()))
            }
            FirstSelection::RetryStopped { phase_id } => ("retry-stopped", Some(phase_id.as_str())),
            FirstSelection::ResumeSchedule(schedule) => {
                ("resume-schedule", Some(schedule.phase_id.as_str()))
            }
            FirstSelection::Next { phase_id } => ("next", Some(phase_id.as_str())),
            FirstSelection::AllComplete => ("all-complete", None),
        };
        tracing::info!(
            first,
            phase_id = first_phase,
            accept = admission.accept.is_some(),
            "run admitted"
        );
        self.accept = admission.accept;
        if let FirstSelection::ResumeSchedule(schedule) = admission.first {
            // The stopped attempt this schedule follows is the retry's first "earlier attempt".
            if let Some(last_run) = &last_run {
                self.phase_attempts.push(EarlierAttempt::from(last_run));
            }
            let due = schedule.not_before.as_datetime();
            return self.await_retry(myself, *schedule, due, None, true);
        }
        self.first = Some(admission.first);
        notify(myself, RunMsg::Checkpoint);
    }

    /// Gathers the facts for the loop's next checkpoint and carries out its decision.
    async fn checkpoint(&mut self, myself: &ActorRef<RunMsg>) {
        let (next, resolve_abandoned) = match self.select().await {
            Some((phase_id, resolve)) => (Some(phase_id), resolve),
            None => (None, false),
        };
        let checkpoint = self.run_loop.checkpoint(next.as_deref());
        if self.run_loop.plan_check_required(&checkpoint)
            && let Err(end) = self.check_plan_unchanged().await
        {
            return self.finish(myself, end, ExitCode::InvalidInput).await;
        }
        match checkpoint {
            Checkpoint::Interrupted {
                signal,
                plan_complete,
            } => {
                let end = RunEnd::InterruptedBeforeLaunch {
                    signal,
                    plan_complete,
                };
                self.finish(myself, end, ExitCode::Signal(signal)).await
            }
            Checkpoint::AllComplete => self.complete(myself).await,
            Checkpoint::PhaseLimitReached { last_completed } => {
                let end = RunEnd::PhaseLimitReached { last_completed };
                self.finish(myself, end, ExitCode::Success).await
            }
            Checkpoint::Launch { phase_id } => {
                self.launch(myself, &phase_id, resolve_abandoned).await
            }
        }
    }

    async fn launch(&mut self, myself: &ActorRef<RunMsg>, phase_id: &str, resolve_abandoned: bool) {
        let Some(phase) = self.snapshot.plan.phase(phase_id).cloned() else {
            let error = InputError::PhaseMissing(phase_id.to_owned());
            return self.refuse(myself, error).await;
        };
        let (location, checked) = (self.location.clone(), phase.clone());
        let execution_workspace =
            match off_runtime(move || execution_workspace_of(&location, &checked)).await {
                Ok(path) => path,
                Err(error) => return self.refuse(myself, error).await,
            };
        let lock = match self
            .acquire_lock(execution_workspace.clone(), LockScope::ExecutionWorkspace)
            .await
        {
            Ok(lock) => lock,
            Err(end) => return self.end(myself, end).await,
        };
        let Some(store) = self.store.clone() else {
            return;
        };
        let span = tracing::info_span!(
            parent: &self.span,
            "attempt",
            phase_id = %phase.id,
            attempt_id = tracing::field::Empty
        );
        let (template_index, turn) = match self.pending_retry.take() {
            Some(pending) => {
                let schedule = pending.schedule;
                let note = RetryNote::following(
                    &schedule,
                    self.settings.retry.max_attempts,
                    self.phase_attempts.clone(),
                );
                let turn = AttemptTurn {
                    ledger: schedule.ledger(),
                    note: Some(note),
                };
                (schedule.template_index, turn)
            }
            None => {
                self.phase_attempts.clear();
                (0, AttemptTurn::first())
            }
        };
        let spec = AttemptSpec {
            run: myself.clone(),
            store,
            location: self.location.clone(),
            snapshot: self.snapshot.clone(),
            settings: self.settings.clone(),
            phase,
            execution_workspace,
            accept: self.accept.take(),
            resolve_abandoned,
            inherited_children: self.inherited_children.clone(),
            template_index,
            turn,
            phase_index: self
                .snapshot
                .plan
                .phases
                .iter()
                .position(|candidate| candidate.id == phase_id)
                .map_or(0, |index| index + 1),
            events: self.events.clone(),
            console: self.console.clone(),
            span,
        };
        match Actor::spawn_linked(None, AttemptSupervisor, spec, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.run_loop.attempt_started();
                self.attempt = Some(RunningAttempt { actor, lock });
            }
            Err(error) => {
                notify(&self.locks, LockMsg::Release { id: lock });
                let end = RunEnd::Internal {
                    message: format!("attempt did not start: {error}"),
                    attempt_may_be_unresolved: false,
                };
                self.finish(myself, end, ExitCode::AgentFailed).await;
            }
        }
    }

    /// The phase to run next and whether it resolves an abandoned attempt; `None` when every
    /// phase is complete.
    async fn select(&mut self) -> Option<(String, bool)> {
        if let Some(pending) = &self.pending_retry {
            return Some((pending.schedule.phase_id.clone(), false));
        }
        if let Some(first) = self.first.take() {
            return match first {
                FirstSelection::RetryAbandoned(attempt) => Some((attempt.phase.id.clone(), true)),
                FirstSelection::RetryStopped { phase_id } | FirstSelection::Next { phase_id } => {
                    Some((phase_id, false))
                }
                FirstSelection::ResumeSchedule(schedule) => {
                    Some((schedule.phase_id.clone(), false))
                }
                FirstSelection::AllComplete => None,
            };
        }
        let state = self.durable_state().await?;
        let ids: Vec<&str> = self
            .snapshot
            .plan
            .phases
            .iter()
            .map(|phase| phase.id.as_str())
            .collect();
        next_pending(&state, &ids).map(|id| (id.to_owned(), false))
    }

    /// Re-hashes the plan file: a change since the snapshot stops the invocation.
    async fn check_plan_unchanged(&self) -> Result<(), RunEnd> {
        let location = self.location.clone();
        let actual = off_runtime(move || current_plan_hash(&location))
            .await
            .map_err(RunEnd::Input)?;
        if actual != self.snapshot.sha256 {
            tracing::info!(expected = %self.snapshot.sha256, %actual, "plan changed during the run");
            return Err(RunEnd::PlanChanged {
                path: self.snapshot.path.clone(),
                expected: self.snapshot.sha256.clone(),
                actual,
            });
        }
        Ok(())
    }

    async fn complete(&mut self, myself: &ActorRef<RunMsg>) {
        if let (Some(record), Some(store)) = (self.accept.take(), self.store.clone()) {
            let accepted = call(&store, |reply| StoreMsg::AcceptPlan { record, reply })
                .await
                .unwrap_or(Err(StoreError::Stopped));
            if let Err(error) = accepted {
                let end = RunEnd::AcceptanceFailed(error);
                return self.finish(myself, end, ExitCode::AgentFailed).await;
            }
        }
        self.finish(myself, RunEnd::AllComplete, ExitCode::Success)
            .await;
    }

    async fn on_signal(&mut self, signal: i32, myself: &ActorRef<RunMsg>) {
        // First, so the console stops drawing before the stop's report (docs/cli.md).
        self.events.emit(
            None,
            RunEvent::SignalReceived {
                signal: crate::domain::decision::signal_name(signal),
            },
        );
        match self.run_loop.signal_caught(signal) {
            SignalAction::ForwardToAttempt => {
                tracing::info!(
                    signal,
                    "signal forwarded to the attempt (deferred until it owns the worker's process group)"
                );
                if let Some(attempt) = &self.attempt {
                    notify(&attempt.actor, AttemptMsg::Interrupt(signal));
                }
            }
            SignalAction::StopNow(exit) => {
                tracing::info!(signal, "signal during a retry wait: the run ends now");
                let phase_id = self
                    .pending_retry
                    .take()
                    .map(|pending| pending.schedule.phase_id)
                    .unwrap_or_default();
                let end = RunEnd::InterruptedDuringWait { signal, phase_id };
                self.finish(myself, end, exit).await;
            }
            SignalAction::StopAtCheckpoint => tracing::info!(
                signal,
                "signal held: no attempt running; the loop stops before the next launch"
            ),
        }
    }

    /// Waits for a scheduled attempt: says so, then wakes at its not-before time.
    fn await_retry(
        &mut self,
        myself: &ActorRef<RunMsg>,
        schedule: RetrySchedule,
        due: chrono::DateTime<chrono::Utc>,
        reset_phrase: Option<String>,
        resumed: bool,
    ) {
        self.run_loop.awaiting_retry();
        let delay = (due - chrono::Utc::now()).to_std().unwrap_or_default();
        let template = self.settings.templates[schedule
            .template_index
            .min(self.settings.templates.len() - 1)]
        .raw()
        .to_owned();
        self.events.emit(
            None,
            RunEvent::RetryScheduled {
                schedule: schedule.clone(),
                delay_seconds: delay.as_secs_f64(),
                of: self.settings.retry.max_attempts,
                template,
                reset_phrase,
                resumed,
            },
        );
        tracing::info!(
            phase_id = %schedule.phase_id,
            attempt = schedule.attempt,
            reason = %schedule.reason,
            not_before = %schedule.not_before,
            "waiting for the scheduled attempt"
        );
        self.pending_retry = Some(PendingRetry { schedule });
        myself.send_after(delay, || RunMsg::RetryDue);
    }

    fn on_retry_due(&mut self, myself: &ActorRef<RunMsg>) {
        let Some(pending) = &self.pending_retry else {
            return;
        };
        self.events.emit(
            None,
            RunEvent::RetryDue {
                phase_id: pending.schedule.phase_id.clone(),
                attempt: pending.schedule.attempt,
            },
        );
        self.run_loop.retry_due();
        notify(myself, RunMsg::Checkpoint);
    }

    async fn on_attempt_concluded(&mut self, report: AttemptReport, myself: &ActorRef<RunMsg>) {
        if let Some(attempt) = self.attempt.take() {
            attempt.actor.stop(None);
            notify(&self.locks, LockMsg::Release { id: attempt.lock });
        }
        let (end, after) = match report.outcome {
            AttemptOutcome::Committed {
                decision,
                outcome_path,
                transcript_path,
                retry,
            } => {
                self.phase_attempts.push(earlier_attempt(
                    &report.attempt_id,
                    decision.status,
                    &decision.summary,
                    &transcript_path,
                ));
                let retry_scheduled = retry.is_some();
                let end = AttemptEnd::Committed {
                    status: decision.status,
                    retry_scheduled,
                };
                let after = self.run_loop.attempt_concluded(&report.phase_id, end);
                if let (AfterAttempt::AwaitRetry, Some(retry)) = (after, retry) {
                    return self.await_retry(
                        myself,
                        retry.schedule,
                        retry.due,
                        retry.reset_phrase,
                        false,
                    );
                }
                let signal_after_decision = self.run_loop.signal_after_decision(decision.status);
                let end = RunEnd::PhaseStopped {
                    decision,
                    outcome_path,
                    transcript_path,
                    signal_after_decision,
                    retry_scheduled,
                };
                (end, after)
            }
            AttemptOutcome::NotPrepared { error } => {
                let still_active = self.still_active(&report.attempt_id).await;
                let after = self
                    .run_loop
                    .attempt_concluded(&report.phase_id, AttemptEnd::NotCommitted);
                (
                    RunEnd::NotPrepared {
                        error,
                        still_active,
                    },
                    after,
                )
            }
            AttemptOutcome::Unresolved {
                decision,
                failure,
                attempt,
            } => {
                let still_active = self.still_active(&report.attempt_id).await;
                let after = self
                    .run_loop
                    .attempt_concluded(&report.phase_id, AttemptEnd::NotCommitted);
                let end = RunEnd::Unresolved {
                    decision,
                    failure,
                    attempt,
                    still_active,
                };
                (end, after)
            }
        };
        match after {
            // A signal caught meanwhile stops the loop at the checkpoint.
            AfterAttempt::Continue | AfterAttempt::AwaitRetry => notify(myself, RunMsg::Checkpoint),
            AfterAttempt::Stop(exit) => self.finish(myself, end, exit).await,
        }
    }

    /// The durable active attempt, if it is the one with `attempt_id`.
    async fn still_active(&self, attempt_id: &str) -> Option<Box<ActiveAttempt>> {
        self.durable_state()
            .await
            .and_then(|state| state.active_attempt)
            .filter(|active| active.id == attempt_id)
            .map(Box::new)
    }

    async fn acquire_lock(&self, dir: String, scope: LockScope) -> Result<LockId, RunEnd> {
        match call(&self.locks, |reply| LockMsg::Acquire { dir, scope, reply }).await {
            Some(Ok(lock)) => Ok(lock),
            Some(Err(error)) => Err(RunEnd::Input(InputError::Lock(error))),
            None => Err(RunEnd::Internal {
                message: "lock owner stopped".into(),
                attempt_may_be_unresolved: false,
            }),
        }
    }

    async fn durable_state(&self) -> Option<State> {
        call(self.store.as_ref()?, |reply| StoreMsg::Current { reply }).await
    }

    /// The refusal with what its report shows: the stopped phase's execution workspace (as
    /// recorded, else as the plan declares it) and the last run.
    async fn refused(
        &self,
        refusal: Refusal,
        state: &State,
        schedule_fits: bool,
        now: Timestamp,
    ) -> RunEnd {
        let execution_workspace = match &refusal {
            Refusal::Stopped(stop) => Some(match &state.last_run {
                Some(last_run) if last_run.phase_id == stop.phase_id => {
                    Ok(last_run.execution_workspace.clone())
                }
                _ => match self.snapshot.plan.phase(&stop.phase_id).cloned() {
                    Some(phase) => {
                        let location = self.location.clone();
                        off_runtime(move || execution_workspace_of(&location, &phase)).await
                    }
                    None => Err(InputError::PhaseNotInPlan(stop.phase_id.clone())),
                },
            }),
            _ => None,
        };
        let lifted_by = way_forward(state, &self.snapshot.facts(), schedule_fits, now)
            .ok()
            .map(|(flags, _)| flags);
        RunEnd::Refused {
            refusal,
            plan_workspace: self.location.workspace.clone(),
            execution_workspace,
            last_run: state.last_run.clone().map(Box::new),
            lifted_by,
        }
    }

    async fn refuse(&mut self, myself: &ActorRef<RunMsg>, error: InputError) {
        self.end(myself, RunEnd::Input(error)).await;
    }

    /// Finishes with an end whose exit code does not depend on the loop: invalid input, or
    /// an internal error.
    async fn end(&mut self, myself: &ActorRef<RunMsg>, end: RunEnd) {
        let exit = match &end {
            RunEnd::Input(error) => error.exit_code(),
            _ => ExitCode::AgentFailed,
        };
        self.finish(myself, end, exit).await;
    }

    /// Releases everything, then hands the result to the command.
    async fn finish(&mut self, myself: &ActorRef<RunMsg>, end: RunEnd, exit: ExitCode) {
        tracing::info!(code = exit.code(), "run finished");
        self.events.emit(
            None,
            RunEvent::RunFinished {
                exit_code: exit.code(),
            },
        );
        let next_phase = self.durable_state().await.and_then(|state| {
            let ids: Vec<&str> = self
                .snapshot
                .plan
                .phases
                .iter()
                .map(|phase| phase.id.as_str())
                .collect();
            next_pending(&state, &ids).map(str::to_owned)
        });
        if let Some(store) = self.store.take() {
            // Drain, not stop: a queued write must not be dropped.
            let _ = store.drain_and_wait(None).await;
        }
        let _ = self.locks.drain_and_wait(None).await;
        // Everything is recorded: a signal from now on need not be caught. Once the intake is
        // gone it has its default action, so a final report blocked on a stalled console can
        // be interrupted like any program's output.
        if let Some(intake) = self.intake.take() {
            let _ = intake.stop_and_wait(None, Some(INTAKE_STOP_LIMIT)).await;
        }
        if let Some(done) = self.done.take() {
            let _ = done.send(RunResult {
                end,
                exit,
                next_phase,
            });
        }
        myself.stop(None);
    }
}

/// One attempt of the current phase, as a retry's prompt lists it.
fn earlier_attempt(
    attempt_id: &str,
    status: AttemptStatus,
    summary: &str,
    transcript_path: &str,
) -> EarlierAttempt {
    EarlierAttempt {
        attempt_id: attempt_id.to_owned(),
        status: status.to_string(),
        summary: summary.to_owned(),
        transcript_path: transcript_path.to_owned(),
    }
}
