//! The run supervisor's slow steps, each a task that reports back by message, so a signal is
//! acted on at once whatever the disk is doing: admission, the plan's re-hash, a workspace's
//! reservation, a plan acceptance on its own, and the finish.

use crate::domain::budget::Spent;
use crate::domain::token_usage::summary::Completeness;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef};
use tokio::sync::oneshot;

use super::messages::{Reservation, RunMsg, RunResult};
use super::signal_intake::IntakeMsg;
use super::workspace_locks::{LockId, LockMsg};
use crate::actors::observer::Emitter;
use crate::actors::state_store::{StateStore, StoreArgs, StoreMsg};
use crate::actors::{call, notify, off_runtime};
use crate::domain::events::RunEvent;
use crate::domain::lifecycle::run::{Admitted, PlanCheck, RefusedRun, RunInput};
use crate::domain::selection::PlanChange;
use crate::domain::selection::{Refusal, admit as admission, next_pending, way_forward};
use crate::domain::state::{AttemptStatus, PlanRecord, State, StateWriteError};
use crate::domain::timestamp::Timestamp;
use crate::invocation::{
    InputError, PlanSnapshot, RunSettings, abandoned_retry_allowed, current_plan_hash,
    execution_workspace_of, read_state, verification_failure_of,
};
use crate::platform::locate::PlanLocation;
use crate::platform::locks::LockScope;

/// How long the signal intake may take to end when the run ends (it only closes its
/// registration; its state is dropped, with the same effect, if it does not answer).
const INTAKE_STOP_LIMIT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub(super) struct RunContext {
    pub(super) run: ActorRef<RunMsg>,
    pub(super) location: Arc<PlanLocation>,
    pub(super) snapshot: Arc<PlanSnapshot>,
    pub(super) settings: Arc<RunSettings>,
    pub(super) locks: ActorRef<LockMsg>,
    pub(super) events: Emitter,
}

impl RunContext {
    fn tell(&self, input: RunInput<InputError>) {
        notify(&self.run, RunMsg::from(input));
    }

    async fn lock(&self, dir: String, scope: LockScope) -> Result<LockId, RunInput<InputError>> {
        match call(&self.locks, |reply| LockMsg::Acquire { dir, scope, reply }).await {
            Some(Ok(lock)) => Ok(lock),
            Some(Err(error)) => Err(RunInput::InputFailed(InputError::Lock(error))),
            None => Err(RunInput::ActorFailed {
                message: "lock owner stopped".into(),
                attempt_may_be_unresolved: false,
            }),
        }
    }
}

/// Locks the plan workspace, reads the state and decides admission; once admitted, starts
/// the state store (linked to `supervisor`) before the run loop hears of it.
pub(super) async fn admit(context: RunContext, supervisor: ActorCell) {
    let input = match admission_steps(&context, supervisor).await {
        Ok(input) | Err(input) => input,
    };
    context.tell(input);
}

async fn admission_steps(
    context: &RunContext,
    supervisor: ActorCell,
) -> Result<RunInput<InputError>, RunInput<InputError>> {
    let location = &context.location;
    if let Err(input) = context
        .lock(location.workspace.clone(), LockScope::PlanWorkspace)
        .await
    {
        // The `lock not taken` record before this one says why.
        tracing::info!(
            decision = "refused",
            refusal = "the plan workspace lock was not taken",
            "admission: refused"
        );
        return Err(input);
    }
    let layout = location.layout.clone();
    let loaded = off_runtime(move || read_state(&layout))
        .await
        .map_err(RunInput::InputFailed)?;
    let snapshot = &context.snapshot;
    context.events.emit(
        None,
        RunEvent::RunStarted {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            args: std::env::args().collect(),
            plan: location.plan_path.clone(),
            phases: snapshot.plan.phases.len(),
            completed: loaded.completed_phase_ids.len(),
            hooks_off: context.settings.hooks_off.clone(),
        },
    );
    let now = Timestamp::from_datetime(chrono::Utc::now());
    let settings = &context.settings;
    let schedule_fits = loaded.retry_schedule.as_ref().is_some_and(|schedule| {
        let fits = schedule.fits(
            &settings.retry,
            &settings.rate_limit,
            settings.templates.len(),
        );
        if let Err(why) = &fits {
            tracing::info!(%why, "the recorded retry schedule does not fit this run's policy");
        }
        fits.is_ok()
    });
    let admitted = match admission(
        &loaded,
        &snapshot.facts(),
        settings.flags,
        schedule_fits,
        now,
    ) {
        Ok(admitted) => {
            tracing::info!(
                decision = "admitted",
                first = %admitted.first.describe(),
                accepts_plan = admitted.accept.is_some(),
                "admission: admitted"
            );
            admitted
        }
        Err(refusal) => {
            tracing::info!(decision = "refused", %refusal, "admission: refused");
            return Err(refused(context, refusal, &loaded, schedule_fits, now).await);
        }
    };
    if let crate::domain::selection::FirstSelection::RetryAbandoned(attempt) = &admitted.first {
        let (location, snapshot, attempt) = (location.clone(), snapshot.clone(), attempt.clone());
        off_runtime(move || abandoned_retry_allowed(&location, &snapshot, &attempt))
            .await
            .map_err(RunInput::InputFailed)?;
    }
    let completed_phase_ids = loaded.completed_phase_ids.clone();
    let last_run = loaded.last_run.clone();
    let spent_before = Spent::of_state(&loaded);
    let reported_usage = loaded
        .committed_outcomes
        .iter()
        .rev()
        .find(|entry| {
            entry
                .usage
                .as_ref()
                .is_some_and(|usage| usage.completeness != Completeness::Unknown)
        })
        .map(|entry| entry.attempt_id.clone());
    // A retry of a phase whose completion failed a check is told which (one small read, only
    // after such a stop).
    let verification_failure = match last_run.clone() {
        Some(run) if run.status == AttemptStatus::VerificationFailed => {
            off_runtime(move || verification_failure_of(&run)).await
        }
        _ => None,
    };
    let store = Actor::spawn_linked(
        None,
        StateStore,
        StoreArgs {
            layout: location.layout.clone(),
            loaded,
            span: tracing::Span::current(),
        },
        supervisor,
    )
    .await
    .map_err(|error| RunInput::ActorFailed {
        message: format!("state store did not start: {error}"),
        attempt_may_be_unresolved: false,
    })?;
    notify(&context.run, RunMsg::StoreStarted(store.0));
    Ok(RunInput::Admitted(Box::new(Admitted {
        admission: admitted,
        completed_phase_ids,
        last_run,
        verification_failure,
        spent_before,
        reported_usage,
    })))
}

/// The refusal with what its report shows: the stopped phase's execution workspace (as
/// recorded, else as the plan declares it) and the last run.
async fn refused(
    context: &RunContext,
    refusal: Refusal,
    state: &State,
    schedule_fits: bool,
    now: Timestamp,
) -> RunInput<InputError> {
    let execution_workspace = match &refusal {
        Refusal::Stopped(stop) => Some(match &state.last_run {
            Some(last_run) if last_run.phase_id == stop.phase_id => {
                Ok(last_run.execution_workspace.clone())
            }
            _ => match context.snapshot.plan.phase(&stop.phase_id).cloned() {
                Some(phase) => {
                    let location = context.location.clone();
                    off_runtime(move || execution_workspace_of(&location, &phase)).await
                }
                None => Err(InputError::PhaseNotInPlan(stop.phase_id.clone())),
            },
        }),
        _ => None,
    };
    RunInput::Refused(Box::new(RefusedRun {
        refusal,
        plan_workspace: context.location.workspace.clone(),
        execution_workspace,
        last_run: state.last_run.clone().map(Box::new),
        lifted_by: way_forward(state, &context.snapshot.facts(), schedule_fits, now)
            .ok()
            .map(|(flags, _)| flags),
    }))
}

/// Re-hashes the plan file: a change since the snapshot stops the invocation.
pub(super) async fn check_plan(context: RunContext) {
    let hashed = off_runtime(|| current_plan_hash(&context.location)).await;
    let input = match hashed {
        Ok(actual) if actual == context.snapshot.sha256 => {
            RunInput::PlanChecked(PlanCheck::Unchanged)
        }
        Ok(actual) => {
            let expected = context.snapshot.sha256.clone();
            tracing::info!(%expected, %actual, "plan changed during the run");
            RunInput::PlanChecked(PlanCheck::Changed(PlanChange {
                path: context.snapshot.path.clone(),
                expected,
                actual,
            }))
        }
        Err(error) => RunInput::InputFailed(error),
    };
    context.tell(input);
}

/// Resolves the phase's execution workspace and locks it for the attempt.
pub(super) async fn reserve(context: RunContext, phase_id: String) {
    let reserved = async {
        let Some(phase) = context.snapshot.plan.phase(&phase_id) else {
            return Err(RunInput::InputFailed(InputError::PhaseMissing(phase_id)));
        };
        let workspace = off_runtime(|| execution_workspace_of(&context.location, phase))
            .await
            .map_err(RunInput::InputFailed)?;
        let lock = context
            .lock(workspace.clone(), LockScope::ExecutionWorkspace)
            .await?;
        Ok(Reservation { workspace, lock })
    };
    match reserved.await {
        Ok(reservation) => {
            notify(&context.run, RunMsg::Reserved(reservation));
            context.tell(RunInput::WorkspaceReserved);
        }
        Err(input) => context.tell(input),
    }
}

/// Records the plan acceptance on its own, when every phase was already complete.
pub(super) async fn record_acceptance(
    context: RunContext,
    store: ActorRef<StoreMsg>,
    record: PlanRecord,
) {
    let accepted = call(&store, |reply| StoreMsg::AcceptPlan { record, reply })
        .await
        .unwrap_or(Err(StateWriteError::Stopped));
    context.tell(RunInput::AcceptanceRecorded(accepted));
}

/// Releases everything held — the store, the locks, the signal intake — then hands the
/// result to the command and stops the supervisor.
pub(super) async fn finish(
    context: RunContext,
    store: Option<ActorRef<StoreMsg>>,
    intake: Option<ActorRef<IntakeMsg>>,
    done: oneshot::Sender<RunResult>,
    end: super::messages::RunEnd,
    supervisor: ActorCell,
) {
    let mut next_phase = None;
    if let Some(store) = store {
        next_phase = call(&store, |reply| StoreMsg::Current { reply })
            .await
            .and_then(|state| {
                let ids: Vec<&str> = context
                    .snapshot
                    .plan
                    .phases
                    .iter()
                    .map(|phase| phase.id.as_str())
                    .collect();
                next_pending(&state, &ids).map(str::to_owned)
            });
        // Drain, not stop: a queued write must not be dropped.
        let _ = store.drain_and_wait(None).await;
    }
    let _ = context.locks.drain_and_wait(None).await;
    // Everything is recorded: a signal from now on need not be caught. Once the intake is
    // gone it has its default action, so a final report blocked on a stalled console can be
    // interrupted like any program's output.
    if let Some(intake) = intake {
        let _ = intake.kill_and_wait(Some(INTAKE_STOP_LIMIT)).await;
    }
    let _ = done.send(RunResult { end, next_phase });
    supervisor.stop(None);
}
