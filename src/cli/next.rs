//! The step that continues a plan as its durable state tells it, for the commands that read
//! that state (`status`, `answer`, `report`): the stopped invocation again — its own arguments
//! from its `run-started` event while events.jsonl still has them — with the plan as an
//! absolute path, run by this binary from this directory.

use clap::Parser as _;

use super::args::{Cli, Command, running_program};
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
    let stopped = attempt_id
        .and_then(|attempt_id| stopped_run_args(&location.layout, attempt_id))
        .and_then(|args| match Cli::try_parse_from(args) {
            Ok(Cli {
                command: Some(Command::Run(run)),
                ..
            }) => Some(run.invocation()),
            _ => None,
        });
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

/// What the plan's state says about how it continues.
pub(super) struct Facts<'a> {
    pub state: &'a State,
    pub running: Option<RunInProgress>,
    /// A scheduled retry that a plain run resumes (it fits the config's policy): when it is due.
    pub retry_due: Option<String>,
    pub plan_changed: bool,
    pub pending: bool,
}

/// The step that continues the plan, if one does.
pub(super) fn from_state(location: &PlanLocation, facts: &Facts<'_>) -> Option<NextStep> {
    let state = facts.state;
    let attempt_id = state
        .active_attempt
        .as_ref()
        .map(|attempt| attempt.id.as_str())
        .or(state.last_run.as_ref().map(|last| last.run_id.as_str()));
    let (invocation, _) = stopped_invocation(location, attempt_id);
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
    from_standing(&invocation, &standing)
}
