//! Reads what the report is made of — the plan, the state, each committed outcome and the event
//! history — without taking a lock or writing anything, so it works while a run is going on.

use std::collections::HashMap;

use crate::domain::plan_report::assemble::{self, Sources};
use crate::domain::plan_report::{PlanReport, Totals};
use crate::domain::recovery::{NextAction, NextStep, flags_after_stop};
use crate::domain::state::State;
use crate::domain::template::shell_join;
use crate::domain::timestamp::Timestamp;
use crate::invocation::history::read_history;
use crate::invocation::probe::run_in_progress;
use crate::invocation::{InputError, PlanSnapshot, read_outcome, read_plan_snapshot, read_state};
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
        run_in_progress: run_in_progress(location).is_some(),
        totals: Totals::of(&phases),
        next: next_command(location, &state, &phases),
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

/// The command that continues the plan, when one does.
fn next_command(
    location: &PlanLocation,
    state: &State,
    phases: &[crate::domain::plan_report::PhaseReport],
) -> Option<String> {
    let invocation = crate::domain::recovery::Invocation {
        plan: location.plan_path.clone(),
        ..Default::default()
    };
    if state.active_attempt.is_some() {
        return None;
    }
    if let Some(stop) = &state.stop {
        if stop.reason.is_answerable() {
            return Some(shell_join(&[
                crate::domain::recovery::PROGRAM.to_owned(),
                "answer".to_owned(),
                "--plan".to_owned(),
                location.plan_path.clone(),
                "TEXT".to_owned(),
                "--run".to_owned(),
            ]));
        }
        return Some(shell_join(
            &NextStep::run(
                &invocation,
                flags_after_stop(false),
                NextAction::FixAndRetry,
                None,
            )
            .argv,
        ));
    }
    let pending = phases
        .iter()
        .any(|phase| phase.standing != crate::domain::plan_report::Standing::Done);
    pending.then(|| {
        shell_join(&NextStep::run(&invocation, Default::default(), NextAction::Continue, None).argv)
    })
}
