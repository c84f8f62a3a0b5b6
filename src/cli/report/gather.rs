//! Reads what the report is made of — the plan, the state, each committed outcome and the event
//! history — without taking a lock or writing anything, so it works while a run is going on.

use std::collections::HashMap;

use super::super::status;
use crate::domain::plan_report::assemble::{self, Sources};
use crate::domain::plan_report::{PlanReport, Totals};
use crate::domain::state::State;
use crate::domain::timestamp::Timestamp;
use crate::invocation::history::read_history;
use crate::invocation::probe::run_in_progress;
use crate::invocation::{
    InputError, PlanSnapshot, read_config, read_outcome, read_plan_snapshot, read_state,
};
use crate::platform::locate::PlanLocation;

/// The report of `location`'s plan, limited to `run_id` when given.
pub(super) fn gather(
    location: &PlanLocation,
    run_id: Option<&str>,
) -> Result<PlanReport, InputError> {
    let state = read_state(&location.layout)?;
    let snapshot = read_plan_snapshot(location).ok();
    let outcomes: HashMap<String, _> = state
        .committed_outcomes
        .iter()
        .filter_map(|entry| {
            read_outcome(&entry.path)
                .ok()
                .map(|outcome| (entry.attempt_id.clone(), outcome))
        })
        .collect();
    let history = read_history(&location.layout);
    let running = run_in_progress(location);
    // The step `status` gives, as the command a person runs; none while a run goes on.
    let next = running.is_none().then(|| {
        let plan = read_plan_snapshot(location);
        let config = read_config(location).ok();
        status::build_report(location, &state, plan.as_ref(), config.as_ref(), running).next
    });
    let phases = assemble::phases(&Sources {
        phases: phase_list(snapshot.as_ref(), &state),
        state: &state,
        outcomes: &outcomes,
        history: &history,
        run_id,
    });
    Ok(PlanReport {
        schema_version: 1,
        plan: location.plan_path.clone(),
        plan_workspace: location.workspace.clone(),
        state_path: location.layout.state_path(),
        generated_at: Timestamp::from_datetime(chrono::Utc::now()).to_string(),
        run_id: run_id.map(str::to_owned),
        run_in_progress: running.is_some(),
        totals: Totals::of(&phases),
        next: next.flatten().map(|step| step.command_line()),
        phases,
    })
}

/// The plan's phases; when the plan cannot be read any more, the phases the state names.
fn phase_list(snapshot: Option<&PlanSnapshot>, state: &State) -> Vec<(String, String)> {
    if let Some(snapshot) = snapshot {
        return snapshot
            .plan
            .phases
            .iter()
            .map(|phase| (phase.id.clone(), phase.title.clone()))
            .collect();
    }
    let mut ids: Vec<String> = Vec::new();
    let named = state
        .committed_outcomes
        .iter()
        .map(|entry| entry.phase_id.clone())
        .chain(
            state
                .active_attempt
                .iter()
                .map(|active| active.phase.id.clone()),
        )
        .chain(state.stop.iter().map(|stop| stop.phase_id.clone()));
    for id in named {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids.into_iter()
        .map(|id| (id, "(the plan cannot be read)".to_owned()))
        .collect()
}
