//! RunSupervisor: one per `run`. It feeds the run loop ([`crate::domain::lifecycle::run`]) and
//! carries out its effects — one [`AttemptSupervisor`] at a time — and hands a typed
//! [`RunResult`] back to the command. Its handlers never wait: every slow step is a task
//! ([`tasks`]) that reports back, so a signal is acted on at once.

mod messages;
mod signal_intake;
mod tasks;
mod workspace_locks;

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;

use self::signal_intake::{IntakeMsg, SignalIntake};
use self::tasks::RunContext;
use self::workspace_locks::{LockMsg, WorkspaceLocks};
use super::attempt::{AttemptMsg, AttemptSpec, AttemptSupervisor};
use super::observer::{Emitter, RunObserver};
use super::state_store::StoreMsg;
use super::{notify, off_runtime};
use crate::domain::events::RunEvent;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::lifecycle::run::{LaunchOrder, RunEffect, RunInput, RunLoop, RunRules};
use crate::domain::retry::schedule::ScheduledRetry;
use crate::invocation::{InputError, PlanSnapshot, RunSettings};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::proc::ChildSnapshot;
use crate::platform::process_group;

pub(crate) use self::messages::{Reservation, RunEnd, RunMsg, RunResult};
pub(crate) use self::signal_intake::STOPPING_SIGNALS;

pub(crate) struct RunArgs {
    pub(crate) run_id: String,
    /// Every actor of the run is started in it, so each of their records carries the run id.
    pub(crate) span: tracing::Span,
    pub(crate) location: Arc<PlanLocation>,
    pub(crate) snapshot: Arc<PlanSnapshot>,
    pub(crate) settings: Arc<RunSettings>,
    pub(crate) observer: Arc<dyn RunObserver>,
    /// Shared by every attempt and the progress lines, so both reach the terminal in order;
    /// `None` with `--quiet`.
    pub(crate) console: Option<Arc<Console>>,
    /// Receives the result once everything is committed and released.
    pub(crate) done: oneshot::Sender<RunResult>,
}

pub(crate) struct RunSupervisor;

pub(crate) struct RunState {
    context: RunContext,
    machine: RunLoop,
    span: tracing::Span,
    /// Stopped when the run ends, which gives the stopping signals their default action back.
    intake: Option<ActorRef<IntakeMsg>>,
    store: Option<ActorRef<StoreMsg>>,
    /// The execution workspace reserved for the next attempt, then held by it.
    reservation: Option<Reservation>,
    attempt: Option<ActorRef<AttemptMsg>>,
    /// The handler's children before any worker: inherited across `exec`, never stopped.
    inherited_children: Arc<ChildSnapshot>,
    console: Option<Arc<Console>>,
    done: Option<oneshot::Sender<RunResult>>,
    tasks: Vec<JoinHandle<()>>,
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
        let span = args.span;
        // Descendants that leave a worker's process group become our children when their
        // parent dies, so the group killer can still find and stop them.
        if let Err(error) = process_group::become_child_subreaper() {
            tracing::warn!(parent: &span, %error, "cannot become a child subreaper; escaped descendants will not be stopped");
        }
        let (intake, locks) = async {
            let intake_args = (myself.clone(), span.clone());
            let (intake, _) =
                Actor::spawn_linked(None, SignalIntake, intake_args, myself.get_cell()).await?;
            let (locks, _) =
                Actor::spawn_linked(None, WorkspaceLocks, span.clone(), myself.get_cell()).await?;
            Ok::<_, ractor::SpawnErr>((intake, locks))
        }
        .instrument(span.clone())
        .await?;
        let inherited_children = Arc::new(off_runtime(ChildSnapshot::take).await);
        let run_id = args.run_id;
        let machine = RunLoop::new(RunRules {
            phase_ids: args
                .snapshot
                .plan
                .phases
                .iter()
                .map(|phase| phase.id.clone())
                .collect(),
            max_phases: args.settings.max_phases,
            max_attempts: args.settings.retry.max_attempts,
            budget: args.settings.budget,
        });
        let context = RunContext {
            run: myself.clone(),
            location: args.location,
            snapshot: args.snapshot,
            settings: args.settings,
            locks,
            events: Emitter::new(args.observer, &run_id),
        };
        let mut state = RunState {
            context,
            machine,
            span,
            intake: Some(intake),
            store: None,
            reservation: None,
            attempt: None,
            inherited_children,
            console: args.console,
            done: Some(args.done),
            tasks: Vec::new(),
        };
        let (context, cell) = (state.context.clone(), myself.get_cell());
        state.spawn(tasks::admit(context, cell));
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<RunMsg>,
        message: RunMsg,
        state: &mut RunState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        async {
            match message {
                RunMsg::Input(input) => state.feed(*input, &myself).await,
                RunMsg::StoreStarted(store) => state.store = Some(store),
                RunMsg::Reserved(reservation) => state.reservation = Some(reservation),
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
            tracing::error!(parent: &state.span, actor = %who.get_id(), %error, "run actor failed");
            let attempt_may_be_unresolved = state
                .attempt
                .as_ref()
                .is_some_and(|attempt| attempt.get_id() == who.get_id());
            let input = RunInput::ActorFailed {
                message: error.to_string(),
                attempt_may_be_unresolved,
            };
            state.feed(input, &myself).await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<RunMsg>,
        state: &mut RunState,
    ) -> Result<(), ActorProcessingErr> {
        for task in state.tasks.drain(..) {
            task.abort();
        }
        Ok(())
    }
}

impl RunState {
    async fn feed(&mut self, input: RunInput<InputError>, myself: &ActorRef<RunMsg>) {
        if let RunInput::Signal(signal) = &input {
            tracing::info!(signal, stage = self.machine.stage().name(), "signal caught");
            // First, so the console stops drawing before the stop's report (docs/cli.md).
            self.context.events.emit(
                None,
                RunEvent::SignalReceived {
                    signal: crate::domain::decision::signal_name(*signal),
                },
            );
        }
        let before = self.machine.stage().name();
        let effects = self.machine.handle(input);
        let after = self.machine.stage().name();
        if before != after {
            tracing::info!(from = before, to = after, "run stage");
        }
        for effect in effects {
            self.execute(effect, myself).await;
        }
    }

    async fn execute(&mut self, effect: RunEffect<InputError>, myself: &ActorRef<RunMsg>) {
        match effect {
            RunEffect::CheckPlan => {
                let context = self.context.clone();
                self.spawn(tasks::check_plan(context));
            }
            RunEffect::ReserveWorkspace { phase_id } => {
                let context = self.context.clone();
                self.spawn(tasks::reserve(context, phase_id));
            }
            RunEffect::Launch(order) => self.launch(*order, myself).await,
            RunEffect::ForwardInterrupt(signal) => {
                tracing::info!(
                    signal,
                    "signal forwarded to the attempt (deferred until it owns the worker's process group)"
                );
                if let Some(attempt) = &self.attempt {
                    notify(attempt, AttemptEvent::Interrupt { signal }.into());
                }
            }
            RunEffect::ReleaseWorkspace => {
                if let Some(attempt) = self.attempt.take() {
                    attempt.stop(None);
                }
                self.release_reservation();
            }
            RunEffect::AwaitRetry { retry, resumed } => self.await_retry(*retry, resumed, myself),
            RunEffect::WarnBudgetUnenforceable(message) => {
                // The `warning:` line comes from the event; a log record would repeat it on stderr.
                tracing::info!(%message, "budget cap not enforceable");
                self.context
                    .events
                    .emit(None, RunEvent::BudgetUnenforceable { message });
            }
            RunEffect::EndWait { phase_id, attempt } => {
                self.context
                    .events
                    .emit(None, RunEvent::RetryDue { phase_id, attempt });
            }
            RunEffect::RecordAcceptance(record) => match self.store.clone() {
                Some(store) => {
                    let context = self.context.clone();
                    self.spawn(tasks::record_acceptance(context, store, *record));
                }
                None => tracing::error!("no state store to record the plan acceptance"),
            },
            RunEffect::Finish(end) => self.finish(*end, myself),
        }
    }

    /// Runs `work` in the run's span; aborted if the run stops first.
    fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        let span = self.span.clone();
        self.tasks.push(tokio::spawn(work.instrument(span)));
    }

    fn release_reservation(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            notify(
                &self.context.locks,
                LockMsg::Release {
                    id: reservation.lock,
                },
            );
        }
    }

    async fn launch(&mut self, order: LaunchOrder, myself: &ActorRef<RunMsg>) {
        let context = &self.context;
        let (Some(store), Some(reservation), Some(phase)) = (
            self.store.clone(),
            self.reservation.clone(),
            context.snapshot.plan.phase(&order.phase_id).cloned(),
        ) else {
            let message = format!(
                "attempt of {} ordered without a state store or a reserved workspace",
                order.phase_id
            );
            return notify(myself, RunMsg::actor_failed(message));
        };
        let span = tracing::info_span!(
            parent: &self.span,
            "attempt",
            phase_id = %phase.id,
            attempt_id = tracing::field::Empty
        );
        let phase_index = context
            .snapshot
            .plan
            .phases
            .iter()
            .position(|candidate| candidate.id == phase.id)
            .map_or(0, |index| index + 1);
        let spec = AttemptSpec {
            run: myself.get_derived(),
            store,
            location: context.location.clone(),
            snapshot: context.snapshot.clone(),
            settings: context.settings.clone(),
            phase,
            execution_workspace: reservation.workspace,
            order,
            inherited_children: self.inherited_children.clone(),
            phase_index,
            events: context.events.clone(),
            console: self.console.clone(),
            span,
        };
        match Actor::spawn_linked(None, AttemptSupervisor, spec, myself.get_cell()).await {
            Ok((actor, _)) => self.attempt = Some(actor),
            Err(error) => {
                let message = format!("attempt did not start: {error}");
                notify(myself, RunMsg::actor_failed(message));
            }
        }
    }

    /// Waits for a scheduled attempt: says so, then wakes at its not-before time.
    fn await_retry(&mut self, retry: ScheduledRetry, resumed: bool, myself: &ActorRef<RunMsg>) {
        let ScheduledRetry {
            schedule,
            due,
            reset_phrase,
        } = retry;
        let delay = (due - chrono::Utc::now()).to_std().unwrap_or_default();
        let settings = &self.context.settings;
        let template = settings.templates
            [schedule.template_index.min(settings.templates.len() - 1)]
        .raw()
        .to_owned();
        tracing::info!(
            phase_id = %schedule.phase_id,
            attempt = schedule.attempt,
            reason = %schedule.reason,
            not_before = %schedule.not_before,
            "waiting for the scheduled attempt"
        );
        self.context.events.emit(
            None,
            RunEvent::RetryScheduled {
                schedule,
                delay_seconds: delay.as_secs_f64(),
                of: settings.retry.max_attempts,
                template,
                reset_phrase,
                resumed,
            },
        );
        myself.send_after(delay, || RunMsg::from(RunInput::RetryDue));
    }

    /// Hands everything held to the finish task, which releases it and reports the result.
    fn finish(&mut self, end: RunEnd, myself: &ActorRef<RunMsg>) {
        let exit = end.exit_code();
        tracing::info!(code = exit.code(), "run finished");
        self.context.events.emit(
            None,
            RunEvent::RunFinished {
                exit_code: exit.code(),
            },
        );
        let Some(done) = self.done.take() else {
            return;
        };
        self.release_reservation();
        let finish = tasks::finish(
            self.context.clone(),
            self.store.take(),
            self.intake.take(),
            done,
            end,
            myself.get_cell(),
        );
        // Not one of the run's tasks: stopping the supervisor must not abort it.
        tokio::spawn(finish.instrument(self.span.clone()));
    }
}
