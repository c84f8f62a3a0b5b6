//! RunSupervisor: one per `run` invocation. It owns the phase loop — admission, selection,
//! the checkpoints between phases, one [`AttemptSupervisor`] at a time — and the invocation's
//! exit code.
//!
//! Its children own the invocation-wide resources: [`SignalIntake`] (started first, so every
//! later step runs with SIGINT/SIGTERM caught), [`WorkspaceLocks`] and [`StateStore`]. A signal
//! is remembered (the first one decides 130 or 143) and forwarded to the running attempt; with
//! no attempt running it simply stops the loop before the next launch.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::attempt_supervisor::{
    AttemptMsg, AttemptOutcome, AttemptReport, AttemptSpec, AttemptSupervisor,
};
use super::notify;
use super::signal_intake::SignalIntake;
use super::state_store::{StateStore, StoreArgs, StoreMsg, load_state};
use super::workspace_locks::{LockId, LockMsg, WorkspaceLocks};
use crate::domain::selection::{FirstSelection, Refusal, admit, next_pending};
use crate::domain::state::{AttemptStatus, PlanRecord, State};
use crate::domain::timestamp::Timestamp;
use crate::invocation::{
    PlanSnapshot, RunSettings, abandoned_retry_allowed, current_plan_hash, execution_workspace_of,
};
use crate::platform::locate::PlanLocation;
use crate::platform::locks::LockScope;
use crate::platform::proc::ChildSnapshot;
use crate::report::{self, Output, RefusalContext};

/// Exit code of a run whose input or state made it refuse (SPEC §2).
pub const EXIT_INVALID: i32 = 5;
/// Exit code of an agent or execution failure.
pub const EXIT_FAILED: i32 = 4;

pub enum RunMsg {
    /// Take the plan lock, load state, decide admission.
    Begin,
    /// Select and launch the next phase, or finish.
    NextPhase,
    SignalReceived(i32),
    AttemptConcluded(Box<AttemptReport>),
}

pub struct RunArgs {
    pub location: Arc<PlanLocation>,
    pub snapshot: Arc<PlanSnapshot>,
    pub settings: Arc<RunSettings>,
    /// Receives the invocation's exit code once everything is printed and released.
    pub done: oneshot::Sender<i32>,
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
    done: Option<oneshot::Sender<i32>>,
    span: tracing::Span,
    locks: ActorRef<LockMsg>,
    store: Option<ActorRef<StoreMsg>>,
    /// The first selection decided by admission, consumed by the first `NextPhase`.
    first: Option<FirstSelection>,
    /// A plan record to accept with the first durable write.
    accept: Option<PlanRecord>,
    launched: bool,
    completed_this_run: u64,
    last_completed: Option<String>,
    pending_signal: Option<i32>,
    attempt: Option<RunningAttempt>,
    /// The handler's children before any worker: inherited across `exec`, never stopped.
    inherited_children: Arc<ChildSnapshot>,
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
        let span = tracing::info_span!("run", plan = %args.location.plan_path, workspace = %args.location.workspace);
        // Descendants that leave a worker's process group become our children when their
        // parent dies, so the group killer can still find and stop them.
        if let Err(error) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::warn!(%error, "cannot become a child subreaper; escaped descendants will not be stopped");
        }
        Actor::spawn_linked(None, SignalIntake, myself.clone(), myself.get_cell()).await?;
        let (locks, _) = Actor::spawn_linked(None, WorkspaceLocks, (), myself.get_cell()).await?;
        notify(&myself, RunMsg::Begin);
        Ok(RunState {
            location: args.location,
            snapshot: args.snapshot,
            settings: args.settings,
            done: Some(args.done),
            span,
            locks,
            store: None,
            first: None,
            accept: None,
            launched: false,
            completed_this_run: 0,
            last_completed: None,
            pending_signal: None,
            attempt: None,
            inherited_children: Arc::new(ChildSnapshot::take()),
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
                RunMsg::NextPhase => state.next_phase(&myself).await,
                RunMsg::SignalReceived(signal) => state.on_signal(signal),
                RunMsg::AttemptConcluded(report) => {
                    state.on_attempt_concluded(*report, &myself).await
                }
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
            tracing::error!(actor = ?who.get_id(), %error, "run actor failed");
            if state.done.is_some() {
                let mut output = Output::error(format!("internal error: {error}"));
                if let Some(attempt) = &state.attempt
                    && attempt.actor.get_id() == who.get_id()
                {
                    output.err_line("the active attempt may be unresolved; check `status`");
                }
                state.finish(&myself, EXIT_FAILED, output).await;
            }
        }
        Ok(())
    }
}

impl RunState {
    async fn begin(&mut self, myself: &ActorRef<RunMsg>) {
        if let Err(message) = self
            .acquire_lock(self.location.workspace.clone(), LockScope::PlanWorkspace)
            .await
        {
            return self
                .finish(myself, EXIT_INVALID, Output::error(message))
                .await;
        }
        let loaded = match load_state(&self.location.layout) {
            Ok(state) => state,
            Err(message) => {
                return self
                    .finish(myself, EXIT_INVALID, Output::error(message))
                    .await;
            }
        };
        let now = Timestamp::from_datetime(chrono::Utc::now());
        let admission = admit(&loaded, &self.snapshot.facts(), self.settings.flags, now);
        let admission = match admission {
            Ok(admission) => admission,
            Err(refusal) => {
                tracing::info!(?refusal, "run refused");
                let output = self.refusal_output(&refusal, &loaded);
                return self.finish(myself, EXIT_INVALID, output).await;
            }
        };
        if let FirstSelection::RetryAbandoned(attempt) = &admission.first
            && let Err(message) = abandoned_retry_allowed(&self.location, &self.snapshot, attempt)
        {
            return self
                .finish(myself, EXIT_INVALID, Output::error(message))
                .await;
        }
        match Actor::spawn_linked(
            None,
            StateStore,
            StoreArgs {
                layout: self.location.layout.clone(),
                loaded,
            },
            myself.get_cell(),
        )
        .await
        {
            Ok((store, _)) => self.store = Some(store),
            Err(error) => {
                let output = Output::error(format!(
                    "internal error: state store did not start: {error}"
                ));
                return self.finish(myself, EXIT_FAILED, output).await;
            }
        }
        tracing::info!(first = ?admission.first, accept = admission.accept.is_some(), "run admitted");
        self.accept = admission.accept;
        self.first = Some(admission.first);
        notify(myself, RunMsg::NextPhase);
    }

    async fn next_phase(&mut self, myself: &ActorRef<RunMsg>) {
        if let Some(signal) = self.pending_signal {
            let output = Output::error(format!(
                "interrupted by {} before launching the next phase; no worker was started",
                crate::domain::decision::signal_name(signal)
            ));
            return self.finish(myself, 128 + signal, output).await;
        }
        if let (Some(limit), Some(last)) = (self.settings.max_phases, self.last_completed.clone())
            && self.completed_this_run >= limit
        {
            // The limit only stops a run that has phases left; one that just finished the plan
            // reports (and re-checks) completion like any other. Reporting the limit's last
            // completed phase re-checks the plan too (SPEC §12: before reporting completion).
            if self.select().await.is_none() {
                return self.complete(myself).await;
            }
            if let Err(output) = self.check_plan_unchanged() {
                return self.finish(myself, EXIT_INVALID, output).await;
            }
            let line = format!("phase-complete: {last}");
            return self.finish(myself, 0, Output::stdout(line)).await;
        }
        if self.launched
            && let Err(output) = self.check_plan_unchanged()
        {
            return self.finish(myself, EXIT_INVALID, output).await;
        }
        let (phase_id, resolve_abandoned) = match self.select().await {
            Some(selection) => selection,
            None => return self.complete(myself).await,
        };
        let Some(phase) = self.snapshot.plan.phase(&phase_id).cloned() else {
            let output = Output::error(format!("phase {phase_id} does not exist in plan"));
            return self.finish(myself, EXIT_INVALID, output).await;
        };
        let execution_workspace = match execution_workspace_of(&self.location, &phase) {
            Ok(path) => path,
            Err(message) => {
                return self
                    .finish(myself, EXIT_INVALID, Output::error(message))
                    .await;
            }
        };
        let lock = match self
            .acquire_lock(execution_workspace.clone(), LockScope::ExecutionWorkspace)
            .await
        {
            Ok(lock) => lock,
            Err(message) => {
                return self
                    .finish(myself, EXIT_INVALID, Output::error(message))
                    .await;
            }
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
            span,
        };
        match Actor::spawn_linked(None, AttemptSupervisor, spec, myself.get_cell()).await {
            Ok((actor, _)) => {
                self.launched = true;
                self.attempt = Some(RunningAttempt { actor, lock });
            }
            Err(error) => {
                notify(&self.locks, LockMsg::Release { id: lock });
                let output =
                    Output::error(format!("internal error: attempt did not start: {error}"));
                self.finish(myself, EXIT_FAILED, output).await;
            }
        }
    }

    /// The phase to run next and whether it resolves an abandoned attempt; `None` when every
    /// phase is complete.
    async fn select(&mut self) -> Option<(String, bool)> {
        if let Some(first) = self.first.take() {
            return match first {
                FirstSelection::RetryAbandoned(attempt) => Some((attempt.phase.id.clone(), true)),
                FirstSelection::RetryStopped { phase_id } | FirstSelection::Next { phase_id } => {
                    Some((phase_id, false))
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
            .map(|p| p.id.as_str())
            .collect();
        next_pending(&state, &ids).map(|id| (id.to_owned(), false))
    }

    /// Re-hashes the plan file: a change since the snapshot stops the invocation.
    fn check_plan_unchanged(&self) -> Result<(), Output> {
        let actual = current_plan_hash(&self.location).map_err(Output::error)?;
        if actual != self.snapshot.sha256 {
            tracing::info!(expected = %self.snapshot.sha256, %actual, "plan changed during the run");
            let mut output =
                report::plan_hash_mismatch(&self.snapshot.path, &self.snapshot.sha256, &actual);
            output.err_line(
                "recorded outcomes are kept; review the edit, then rerun with --accept-plan-change",
            );
            return Err(output);
        }
        Ok(())
    }

    async fn complete(&mut self, myself: &ActorRef<RunMsg>) {
        if self.launched
            && let Err(output) = self.check_plan_unchanged()
        {
            return self.finish(myself, EXIT_INVALID, output).await;
        }
        if let (Some(record), Some(store)) = (self.accept.take(), self.store.clone()) {
            let result = store
                .call(|reply| StoreMsg::AcceptPlan { record, reply }, None)
                .await;
            if !matches!(result, Ok(ractor::rpc::CallResult::Success(Ok(())))) {
                let detail = match result {
                    Ok(ractor::rpc::CallResult::Success(Err(message))) => message,
                    _ => "state store stopped".to_owned(),
                };
                let output = Output::error(format!("could not record plan acceptance: {detail}"));
                return self.finish(myself, EXIT_FAILED, output).await;
            }
        }
        let output = Output::stdout("runner-complete: all phases complete");
        self.finish(myself, 0, output).await;
    }

    fn on_signal(&mut self, signal: i32) {
        if self.pending_signal.is_none() {
            self.pending_signal = Some(signal);
        }
        match &self.attempt {
            Some(attempt) => {
                tracing::info!(
                    signal,
                    "signal forwarded to the attempt (deferred until it owns the worker's process group)"
                );
                notify(&attempt.actor, AttemptMsg::Interrupt(signal));
            }
            None => tracing::info!(
                signal,
                "signal held: no attempt running; the loop stops before the next launch"
            ),
        }
    }

    async fn on_attempt_concluded(&mut self, report: AttemptReport, myself: &ActorRef<RunMsg>) {
        if let Some(attempt) = self.attempt.take() {
            attempt.actor.stop(None);
            notify(&self.locks, LockMsg::Release { id: attempt.lock });
        }
        let signal_exit = self.pending_signal.map(|signal| 128 + signal);
        match report.outcome {
            AttemptOutcome::Committed {
                decision,
                outcome_path,
                transcript_path,
                ..
            } => match decision.status {
                AttemptStatus::PhaseComplete => {
                    self.completed_this_run += 1;
                    self.last_completed = Some(report.phase_id);
                    // A pending signal is handled by `next_phase`: no further launch.
                    notify(myself, RunMsg::NextPhase);
                }
                AttemptStatus::Blocked | AttemptStatus::NeedsClarification => {
                    let code = signal_exit.unwrap_or(decision.status.handler_exit_code());
                    let line = report::result_line(decision.status, &decision.summary);
                    self.finish(myself, code, Output::stdout(line)).await;
                }
                status => {
                    let code = signal_exit.unwrap_or(EXIT_FAILED);
                    let output = report::failure(
                        status,
                        &decision.summary,
                        Some(&outcome_path),
                        &transcript_path,
                    );
                    self.finish(myself, code, output).await;
                }
            },
            AttemptOutcome::NotPrepared { message } => {
                let first_line = format!("{}: {message}", AttemptStatus::ExecutionIoFailed);
                let output = match self.still_active(&report.attempt_id).await {
                    // The prepared record became visible even though the write failed.
                    Some(active) => report::unresolved(first_line, &active),
                    None => Output {
                        stdout: Vec::new(),
                        stderr: vec![first_line],
                    },
                };
                self.finish(myself, signal_exit.unwrap_or(EXIT_FAILED), output)
                    .await;
            }
            AttemptOutcome::Unresolved {
                decision,
                failure,
                attempt,
            } => {
                let first_line = if decision.status.handler_exit_code() == EXIT_FAILED {
                    // The failure may be what decided the status (a failed running write stops
                    // the attempt with it as the cause): say it once.
                    if decision.summary.ends_with(&failure) {
                        format!("{}: {}", decision.status, decision.summary)
                    } else {
                        format!("{}: {}; {failure}", decision.status, decision.summary)
                    }
                } else {
                    format!("{}: {failure}", AttemptStatus::ExecutionIoFailed)
                };
                let output = match self.still_active(&report.attempt_id).await {
                    Some(active) => report::unresolved(first_line, &active),
                    // The commit is visible (only its durability failed): report the outcome
                    // where it is.
                    None => report::details(
                        first_line,
                        Some(&attempt.outcome_path),
                        &attempt.transcript_path,
                    ),
                };
                self.finish(myself, signal_exit.unwrap_or(EXIT_FAILED), output)
                    .await;
            }
        }
    }

    /// The durable active attempt, if it is the one with `attempt_id`.
    async fn still_active(&self, attempt_id: &str) -> Option<crate::domain::state::ActiveAttempt> {
        self.durable_state()
            .await
            .and_then(|state| state.active_attempt)
            .filter(|active| active.id == attempt_id)
    }

    async fn acquire_lock(&self, dir: String, scope: LockScope) -> Result<LockId, String> {
        match self
            .locks
            .call(|reply| LockMsg::Acquire { dir, scope, reply }, None)
            .await
        {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            _ => Err("internal error: lock owner stopped".to_owned()),
        }
    }

    async fn durable_state(&self) -> Option<State> {
        let store = self.store.as_ref()?;
        match store.call(|reply| StoreMsg::Current { reply }, None).await {
            Ok(ractor::rpc::CallResult::Success(state)) => Some(state),
            _ => None,
        }
    }

    fn refusal_output(&self, refusal: &Refusal, state: &State) -> Output {
        let execution_workspace = match refusal {
            Refusal::Stopped(stop) => match &state.last_run {
                Some(last_run) if last_run.phase_id == stop.phase_id => {
                    Ok(last_run.execution_workspace.clone())
                }
                _ => match self.snapshot.plan.phase(&stop.phase_id) {
                    Some(phase) => execution_workspace_of(&self.location, phase),
                    None => Err(format!("phase {} is not in the plan", stop.phase_id)),
                },
            },
            _ => Err(String::new()),
        };
        report::refusal(
            refusal,
            &RefusalContext {
                plan_workspace: &self.location.workspace,
                execution_workspace,
                last_run: state.last_run.as_ref(),
            },
        )
    }

    /// Prints the final report, releases everything and hands the exit code to `main`.
    async fn finish(&mut self, myself: &ActorRef<RunMsg>, code: i32, output: Output) {
        output.print();
        tracing::info!(code, "run finished");
        if let Some(store) = self.store.take() {
            // Drain, not stop: a queued write must not be dropped.
            let _ = store.drain_and_wait(None).await;
        }
        let _ = self.locks.drain_and_wait(None).await;
        if let Some(done) = self.done.take() {
            let _ = done.send(code);
        }
        myself.stop(None);
    }
}
