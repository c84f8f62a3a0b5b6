//! The per-phase table and run totals that `status` shows (docs/cli.md), from `state.json`
//! alone. Entries committed before their figures were recorded, and abandoned attempts, count
//! as attempts but add nothing to the sums (their usage is `unknown`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::state::{ActiveStatus, AttemptStatus, OutcomeRef, State};
use super::token_usage::summary::UsageSummary;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseStanding {
    Done,
    Pending,
    /// Stopped with this status (the phase's `stop.reason`).
    Stopped(AttemptStatus),
    /// The recorded active attempt is this phase's (possibly abandoned: only `run
    /// --retry-stopped` tells a dead worker from a live one).
    Active(ActiveStatus),
}

impl PhaseStanding {
    pub fn of(state: &State, phase_id: &str) -> Self {
        if state.completed_phase_ids.iter().any(|id| id == phase_id) {
            return Self::Done;
        }
        if let Some(attempt) = &state.active_attempt
            && attempt.phase.id == phase_id
        {
            return Self::Active(attempt.status);
        }
        match &state.stop {
            Some(stop) if stop.phase_id == phase_id => Self::Stopped(stop.reason),
            _ => Self::Pending,
        }
    }

    /// `done`, `pending`, `stopped`, `prepared` or `running` (the `status --json` values).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Pending => "pending",
            Self::Stopped(_) => "stopped",
            Self::Active(status) => status.as_str(),
        }
    }
}

/// One committed attempt as the table shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttemptFigures {
    pub attempt_id: String,
    pub status: AttemptStatus,
    pub duration_ms: Option<u64>,
    /// Both streams together.
    pub output_bytes: Option<u64>,
    pub usage: UsageSummary,
    /// It reported `phase-complete` but changed no file and made no commit (as recorded).
    pub completed_without_changes: bool,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseTally {
    pub id: String,
    /// `None` for a phase the plan does not have (or when the plan cannot be read).
    pub title: Option<String>,
    pub standing: PhaseStanding,
    /// Committed attempts, resolved abandoned ones, plus the active one.
    pub attempts: u32,
    pub last: Option<AttemptFigures>,
    pub usage: UsageSummary,
}

/// The totals over every recorded attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunTotals {
    pub phases_done: usize,
    /// `None` when the plan cannot be read.
    pub phases_total: Option<usize>,
    pub attempts: u64,
    /// The sums of the known figures.
    pub duration_ms: u64,
    pub output_bytes: u64,
    /// Attempts missing from those sums.
    pub attempts_without_figures: u64,
    pub usage: UsageSummary,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tally {
    pub phases: Vec<PhaseTally>,
    pub totals: RunTotals,
}

/// Tallies `state` against the plan's phases (`(id, title)` in plan order; `None` when the
/// plan cannot be read).
pub fn tally(state: &State, plan_phases: Option<&[(&str, &str)]>) -> Tally {
    #[derive(Default)]
    struct Acc<'a> {
        attempts: u32,
        last: Option<&'a OutcomeRef>,
        usage: Vec<UsageSummary>,
    }
    let usage_of = |entry: &OutcomeRef| entry.usage.clone().unwrap_or_else(UsageSummary::unknown);
    let mut all_usage = Vec::new();
    let mut per_phase: HashMap<&str, Acc<'_>> = HashMap::new();
    let mut totals = RunTotals {
        phases_done: state.completed_phase_ids.len(),
        phases_total: plan_phases.map(<[_]>::len),
        ..RunTotals::default()
    };
    for entry in &state.committed_outcomes {
        let acc = per_phase.entry(&entry.phase_id).or_default();
        acc.attempts = acc.attempts.saturating_add(1);
        acc.last = Some(entry);
        acc.usage.push(usage_of(entry));
        all_usage.push(usage_of(entry));
        totals.attempts += 1;
        if entry.duration_ms.is_none() || entry.output_bytes.is_none() {
            totals.attempts_without_figures += 1;
        }
        totals.duration_ms = totals
            .duration_ms
            .saturating_add(entry.duration_ms.unwrap_or(0));
        totals.output_bytes = totals
            .output_bytes
            .saturating_add(entry.output_bytes.unwrap_or(0));
    }
    // An abandoned attempt resolved by `--retry-stopped` ran, but left no figures.
    for entry in &state.abandoned_attempts {
        let acc = per_phase.entry(&entry.phase_id).or_default();
        acc.attempts = acc.attempts.saturating_add(1);
        acc.usage.push(UsageSummary::unknown());
        all_usage.push(UsageSummary::unknown());
        totals.attempts += 1;
        totals.attempts_without_figures += 1;
    }
    totals.usage = UsageSummary::sum(&all_usage);
    if let Some(attempt) = &state.active_attempt {
        let acc = per_phase.entry(&attempt.phase.id).or_default();
        acc.attempts = acc.attempts.saturating_add(1);
        totals.attempts += 1;
    }

    let row = |id: &str, title: Option<&str>| {
        let acc = per_phase.get(id);
        PhaseTally {
            id: id.to_owned(),
            title: title.map(str::to_owned),
            standing: PhaseStanding::of(state, id),
            attempts: acc.map_or(0, |acc| acc.attempts),
            last: acc.and_then(|acc| acc.last).map(|entry| AttemptFigures {
                attempt_id: entry.attempt_id.clone(),
                status: entry.status,
                duration_ms: entry.duration_ms,
                output_bytes: entry.output_bytes,
                usage: usage_of(entry),
                completed_without_changes: entry.status == AttemptStatus::PhaseComplete
                    && entry.changed_nothing == Some(true),
            }),
            usage: UsageSummary::sum(acc.map_or(&[][..], |acc| &acc.usage[..])),
        }
    };
    let plan_phases = plan_phases.unwrap_or_default();
    let mut phases: Vec<PhaseTally> = plan_phases
        .iter()
        .map(|(id, title)| row(id, Some(title)))
        .collect();
    // Phases the plan lacks follow, in the order the state first records them (a completed or
    // stopped phase without an attempt of its own, in a hand-made state, too).
    let mut listed: HashSet<&str> = plan_phases.iter().map(|(id, _)| *id).collect();
    let recorded = state
        .committed_outcomes
        .iter()
        .map(|entry| &entry.phase_id)
        .chain(state.abandoned_attempts.iter().map(|entry| &entry.phase_id))
        .chain(state.active_attempt.iter().map(|attempt| &attempt.phase.id))
        .chain(&state.completed_phase_ids)
        .chain(state.stop.iter().map(|stop| &stop.phase_id));
    for id in recorded {
        if listed.insert(id) {
            // The state's own record of the phase's title, when it has one.
            let title = state
                .current_phase
                .as_ref()
                .filter(|phase| phase.id == *id)
                .map(|phase| phase.title.as_str());
            phases.push(row(id, title));
        }
    }
    Tally { phases, totals }
}

#[cfg(test)]
mod tests;
