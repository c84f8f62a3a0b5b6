//! The step that continues a plan as its durable state tells it, for the commands that read
//! that state (`status`, `answer`, `report`): the stopped invocation again — its own arguments
//! from its `run-started` event while events.jsonl still has them — with the plan as an
//! absolute path, run by this binary from this directory.

use clap::Parser as _;

use super::args::{Cli, Command, RunArgs, running_program};
use crate::domain::budget::{BudgetCaps, BudgetConfig, CapReached};
use crate::domain::recovery::with_cap_raised;
use crate::domain::recovery::{Invocation, NextStep, Standing, from_standing};
use crate::domain::state::State;
use crate::invocation::history::{stopped_run_args, watchdog_stop};
use crate::invocation::probe::RunInProgress;
use crate::platform::locate::PlanLocation;

/// The invocation that ran `attempt_id` (its own arguments when events.jsonl still has them,
/// else none), with the plan as `location`'s absolute path; and whether its arguments were
/// found.
pub(super) fn stopped_invocation(
    location: &PlanLocation,
    attempt_id: Option<&str>,
) -> (Invocation, bool) {
    let stopped = stopped_run(location, attempt_id).map(|run| run.invocation());
    let found = stopped.is_some();
    let mut invocation = stopped.unwrap_or_else(|| Invocation {
        program: running_program(),
        cwd: std::env::current_dir()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default(),
        ..Invocation::default()
    });
    invocation.plan = location.plan_path.clone();
    (invocation, found)
}

/// The arguments of the `run` that ran `attempt_id`, while events.jsonl still has them.
fn stopped_run(location: &PlanLocation, attempt_id: Option<&str>) -> Option<RunArgs> {
    attempt_id
        .and_then(|attempt_id| stopped_run_args(&location.layout, attempt_id))
        .and_then(|args| match Cli::try_parse_from(args) {
            Ok(Cli {
                command: Some(Command::Run(run)),
                ..
            }) => Some(run),
            _ => None,
        })
}

/// The budget caps as the plan's latest run had them: its own `--max-tokens`/`--max-cost`
/// (while events.jsonl has its arguments) over the config's `budget`.
pub(super) fn latest_caps(
    location: &PlanLocation,
    state: &State,
    config: Option<&BudgetConfig>,
) -> BudgetCaps {
    let run = stopped_run(location, latest_attempt(state));
    BudgetCaps::effective(
        run.as_ref().and_then(|run| run.max_tokens),
        run.as_ref().and_then(|run| run.max_cost),
        &config.copied().unwrap_or_default(),
    )
}

/// The active attempt, else the last run.
fn latest_attempt(state: &State) -> Option<&str> {
    state
        .active_attempt
        .as_ref()
        .map(|attempt| attempt.id.as_str())
        .or(state.last_run.as_ref().map(|last| last.run_id.as_str()))
}

/// What the plan's state says about how it continues.
pub(super) struct Facts<'a> {
    pub state: &'a State,
    pub running: Option<RunInProgress>,
    /// A scheduled retry that a plain run resumes (it fits the config's policy): when it is due.
    pub retry_due: Option<String>,
    pub plan_changed: bool,
    pub pending: bool,
    /// The cap the plan's recorded attempts have reached, if one has.
    pub budget_reached: Option<CapReached>,
}

/// The step that continues the plan, if one does.
pub(super) fn from_state(location: &PlanLocation, facts: &Facts<'_>) -> Option<NextStep> {
    let state = facts.state;
    let (invocation, _) = stopped_invocation(location, latest_attempt(state));
    let abandoned = match (&state.active_attempt, facts.running) {
        (Some(attempt), None) => Some((
            attempt.id.clone(),
            watchdog_stop(&location.layout, &attempt.id).is_some_and(|stop| stop.left_nothing()),
        )),
        _ => None,
    };
    let standing = Standing {
        run_in_progress: facts.running.map(|running| running.handler_pid),
        abandoned,
        stop: state.stop.as_ref().map(|stop| stop.reason),
        retry_due: facts.retry_due.clone(),
        plan_changed: facts.plan_changed,
        pending: facts.pending,
    };
    // A stopped run's own arguments hold its recovery flags: the step names its own.
    let invocation = Invocation {
        flags: Default::default(),
        ..invocation
    };
    let step = from_standing(&invocation, &standing)?;
    // Only a larger cap continues a plan whose recorded attempts reached one.
    Some(match &facts.budget_reached {
        Some(reached) => with_cap_raised(step, &invocation, standing.stop, reached),
        None => step,
    })
}
