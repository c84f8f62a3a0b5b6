//! The per-phase table and run totals that `status` shows (docs/cli.md): for each phase its
//! standing, how many attempts it took, the duration and output size of its latest committed
//! attempt, and the tokens and cost of that attempt and of all its attempts; for the whole
//! plan, phases done, attempts, time, output, tokens and cost.
//!
//! Everything is tallied from `state.json` alone — the `duration_ms` and `output_bytes` that
//! each `committed_outcomes` entry carries since they were added — so `status` never opens
//! one outcome file per attempt (target ≤ 20 ms at 1,000 committed outcomes, docs/benchmarks.md). Entries
//! committed before those keys existed count as attempts but add nothing to the sums; the
//! totals say how many such entries there were. Usage is summed the same way
//! ([`UsageSummary::sum`]): an entry without `usage` (committed before it was recorded) and an
//! abandoned attempt are `unknown`, which makes a sum a lower bound (`≥`) or unknown (`?`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::state::{ActiveStatus, AttemptStatus, OutcomeRef, State};
use super::token_usage::summary::UsageSummary;

/// Where a phase stands.
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
    /// The standing of `phase_id` in `state`.
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
    /// `None` for an entry committed before durations were recorded.
    pub duration_ms: Option<u64>,
    /// Both streams together; `None` for an entry committed before sizes were recorded.
    pub output_bytes: Option<u64>,
    /// Its usage; `unknown` for an entry committed before usage was recorded.
    pub usage: UsageSummary,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseTally {
    pub id: String,
    /// `None` for a phase the state records but the plan no longer has (or when the plan
    /// cannot be read).
    pub title: Option<String>,
    pub standing: PhaseStanding,
    /// Committed attempts of the phase, its resolved abandoned ones, plus the active one.
    pub attempts: u32,
    /// The phase's latest committed attempt.
    pub last: Option<AttemptFigures>,
    /// The usage of all its committed and abandoned attempts.
    pub usage: UsageSummary,
}

/// The totals over every recorded attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunTotals {
    pub phases_done: usize,
    /// Phases in the plan; `None` when the plan cannot be read.
    pub phases_total: Option<usize>,
    /// Committed attempts, resolved abandoned ones, plus the active one.
    pub attempts: u64,
    /// Sum of the known durations of committed attempts.
    pub duration_ms: u64,
    /// Sum of the known output sizes of committed attempts.
    pub output_bytes: u64,
    /// Attempts without figures (missing from the sums): committed before durations and sizes
    /// were recorded, or abandoned and resolved by `--retry-stopped`.
    pub attempts_without_figures: u64,
    /// The usage of every committed and abandoned attempt.
    pub usage: UsageSummary,
}

impl Default for RunTotals {
    fn default() -> Self {
        Self {
            phases_done: 0,
            phases_total: None,
            attempts: 0,
            duration_ms: 0,
            output_bytes: 0,
            attempts_without_figures: 0,
            usage: UsageSummary::unknown(),
        }
    }
}

/// The table and its totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tally {
    pub phases: Vec<PhaseTally>,
    pub totals: RunTotals,
}

/// Tallies `state` against the plan's phases (`(id, title)` in plan order; `None` when the
/// plan cannot be read). Phases the state records but the plan lacks follow the plan's, in
/// the order they were first recorded.
pub fn tally(state: &State, plan_phases: Option<&[(&str, &str)]>) -> Tally {
    let phases_total = plan_phases.map(<[_]>::len);
    #[derive(Default)]
    struct Acc<'a> {
        attempts: u32,
        last: Option<&'a OutcomeRef>,
        usage: Vec<UsageSummary>,
    }
    let usage_of = |entry: &OutcomeRef| entry.usage.clone().unwrap_or_else(UsageSummary::unknown);
    let mut all_usage = Vec::new();
    let mut per_phase: HashMap<&str, Acc<'_>> = HashMap::new();
    // Phase ids in first-recorded order, for the rows the plan does not give.
    let mut recorded: Vec<&str> = Vec::new();
    let mut totals = RunTotals {
        phases_total,
        ..RunTotals::default()
    };
    for entry in &state.committed_outcomes {
        let acc = per_phase.entry(&entry.phase_id).or_insert_with(|| {
            recorded.push(&entry.phase_id);
            Acc::default()
        });
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
        let acc = per_phase.entry(&entry.phase_id).or_insert_with(|| {
            recorded.push(&entry.phase_id);
            Acc::default()
        });
        acc.attempts = acc.attempts.saturating_add(1);
        acc.usage.push(UsageSummary::unknown());
        all_usage.push(UsageSummary::unknown());
        totals.attempts += 1;
        totals.attempts_without_figures += 1;
    }
    totals.usage = UsageSummary::sum(&all_usage);
    if let Some(attempt) = &state.active_attempt {
        let acc = per_phase.entry(&attempt.phase.id).or_insert_with(|| {
            recorded.push(&attempt.phase.id);
            Acc::default()
        });
        acc.attempts = acc.attempts.saturating_add(1);
        totals.attempts += 1;
    }
    // Completed or stopped phases without a committed outcome of their own (a hand-made
    // state) still get a row.
    for id in state
        .completed_phase_ids
        .iter()
        .chain(state.stop.as_ref().map(|stop| &stop.phase_id))
    {
        per_phase.entry(id).or_insert_with(|| {
            recorded.push(id);
            Acc::default()
        });
    }

    let row = |id: &str, title: Option<&str>, acc: Option<&Acc<'_>>| PhaseTally {
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
        }),
        usage: UsageSummary::sum(acc.map_or(&[][..], |acc| &acc.usage[..])),
    };
    let plan_phases = plan_phases.unwrap_or_default();
    let mut phases: Vec<PhaseTally> = plan_phases
        .iter()
        .map(|(id, title)| row(id, Some(title), per_phase.get(id)))
        .collect();
    let in_plan: HashSet<&str> = plan_phases.iter().map(|(id, _)| *id).collect();
    for id in recorded {
        if !in_plan.contains(id) {
            // The state's own record of the phase's title, when it has one.
            let title = [state.current_phase.as_ref()]
                .into_iter()
                .flatten()
                .find(|phase| phase.id == id)
                .map(|phase| phase.title.as_str());
            phases.push(row(id, title, per_phase.get(id)));
        }
    }
    totals.phases_done = state.completed_phase_ids.len();
    Tally { phases, totals }
}

#[cfg(test)]
mod tests;
