//! Admission and selection for `run` (docs/session-lifecycle.md, docs/state-and-recovery.md):
//! whether an invocation may start given the state, the plan snapshot and the recovery flags,
//! and which phase it runs first.

use super::retry::schedule::RetrySchedule;
use super::state::{ActiveAttempt, PlanRecord, State, Stop};
use super::timestamp::Timestamp;

/// What admission needs of the invocation's plan snapshot.
#[derive(Clone, Debug)]
pub(crate) struct PlanFacts<'a> {
    /// Canonical absolute plan path.
    pub path: &'a str,
    pub sha256: &'a str,
    /// In plan order.
    pub phase_ids: Vec<&'a str>,
}

/// The plan file's digest is not the accepted one (or, during a run, the snapshot's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanChange {
    pub path: String,
    pub expected: String,
    pub actual: String,
}

/// `--retry-stopped` and `--accept-plan-change`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFlags {
    pub retry_stopped: bool,
    pub accept_plan_change: bool,
}

/// Why an invocation may not start, with what its one-line message must name (the CLI may add
/// detail lines after it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// Without `--retry-stopped`.
    #[error(
        "phase {} has an abandoned {} attempt {}; inspect partial changes and stop any \
         surviving worker before retrying",
        .0.phase.id, .0.status.as_str(), .0.id
    )]
    UnresolvedAttempt(Box<ActiveAttempt>),
    /// Without `--retry-stopped`.
    #[error("phase {} is stopped: {}", .0.phase_id, .0.reason)]
    Stopped(Stop),
    /// The state belongs to a plan at another path.
    #[error(
        "{actual}: plan path mismatch; state belongs to {stored}. A renamed or relocated plan \
         requires an explicit history decision."
    )]
    PlanPathMismatch { stored: String, actual: String },
    /// Without `--accept-plan-change`.
    #[error("plan hash mismatch: {}", .0.path)]
    PlanHashMismatch(PlanChange),
    /// `--accept-plan-change` was given but completed phases are gone from the new plan.
    #[error(
        "{path}: cannot accept plan change; completed phase ids are missing: {}",
        .missing.join(", ")
    )]
    CompletedPhasesMissing { path: String, missing: Vec<String> },
    /// The phase to retry no longer exists in the plan.
    #[error("{}", retried_phase_missing(.phase_id, *.abandoned_attempt))]
    RetriedPhaseMissing {
        phase_id: String,
        abandoned_attempt: bool,
    },
}

fn retried_phase_missing(phase_id: &str, abandoned_attempt: bool) -> String {
    if abandoned_attempt {
        format!("active_attempt.phase.id '{phase_id}' does not exist in plan")
    } else {
        format!("stopped phase {phase_id} does not exist in plan")
    }
}

/// What the first attempt of the invocation is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FirstSelection {
    /// `--retry-stopped` with an unresolved attempt: resolve it as interrupted (after the
    /// caller's liveness check) and rerun its phase.
    RetryAbandoned(Box<ActiveAttempt>),
    /// `--retry-stopped` with a stopped phase.
    RetryStopped { phase_id: String },
    /// A stop whose scheduled retry the run's policy still allows: wait for it, then run the
    /// phase, without `--retry-stopped`.
    ResumeSchedule(Box<RetrySchedule>),
    /// The first phase, in plan order, that is not completed.
    Next { phase_id: String },
    /// Every phase is completed.
    AllComplete,
}

impl FirstSelection {
    /// What the run starts with, for the log: `next phase phase-2`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::RetryAbandoned(attempt) => format!(
                "retry of phase {} after its unresolved attempt {}",
                attempt.phase.id, attempt.id
            ),
            Self::RetryStopped { phase_id } => format!("retry of stopped phase {phase_id}"),
            Self::ResumeSchedule(schedule) => format!(
                "scheduled retry of phase {} (attempt {}), not before {}",
                schedule.phase_id, schedule.attempt, schedule.not_before
            ),
            Self::Next { phase_id } => format!("next phase {phase_id}"),
            Self::AllComplete => "nothing: every phase is complete".to_owned(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The plan record to write: first acceptance or an accepted change.
    pub accept: Option<PlanRecord>,
    pub first: FirstSelection,
}

/// Decides whether an invocation may start. Check order: an unresolved attempt without
/// `--retry-stopped` is refused before the plan is compared; then the stored path must equal
/// the snapshot path (whatever the flags); then the hash; then a stop without
/// `--retry-stopped`. Flags that find nothing to act on are no-ops.
///
/// A stop that carries a retry schedule is resumed without `--retry-stopped` when
/// `schedule_fits` (the caller checked it against the run's retry and rate-limit policy);
/// with `--retry-stopped` the phase runs at once, as for any stop.
pub(crate) fn admit(
    state: &State,
    plan: &PlanFacts<'_>,
    flags: RecoveryFlags,
    schedule_fits: bool,
    now: Timestamp,
) -> Result<Admission, Refusal> {
    if let Some(attempt) = &state.active_attempt
        && !flags.retry_stopped
    {
        return Err(Refusal::UnresolvedAttempt(Box::new(attempt.clone())));
    }
    let accept = plan_to_accept(state, plan, flags, now)?;
    let first = match (&state.active_attempt, &state.stop) {
        (Some(attempt), _) => {
            require_in_plan(plan, &attempt.phase.id, true)?;
            FirstSelection::RetryAbandoned(Box::new(attempt.clone()))
        }
        (None, Some(stop)) if !flags.retry_stopped => match &state.retry_schedule {
            Some(schedule) if schedule_fits && schedule.phase_id == stop.phase_id => {
                require_in_plan(plan, &stop.phase_id, false)?;
                FirstSelection::ResumeSchedule(Box::new(schedule.clone()))
            }
            _ => return Err(Refusal::Stopped(stop.clone())),
        },
        (None, Some(stop)) => {
            require_in_plan(plan, &stop.phase_id, false)?;
            FirstSelection::RetryStopped {
                phase_id: stop.phase_id.clone(),
            }
        }
        (None, None) => match next_pending(state, &plan.phase_ids) {
            Some(phase_id) => FirstSelection::Next {
                phase_id: phase_id.to_owned(),
            },
            None => FirstSelection::AllComplete,
        },
    };
    Ok(Admission { accept, first })
}

/// The admission of the run an operator would start next (`check --prompt` previews it): a
/// plain `run` when that is admitted, else the one with the recovery flags its refusals ask
/// for, returned with them. Refusals no flag lifts stay refusals.
pub(crate) fn way_forward(
    state: &State,
    plan: &PlanFacts<'_>,
    schedule_fits: bool,
    now: Timestamp,
) -> Result<(RecoveryFlags, Admission), Refusal> {
    let mut flags = RecoveryFlags::default();
    loop {
        match admit(state, plan, flags, schedule_fits, now) {
            Ok(admission) => return Ok((flags, admission)),
            Err(Refusal::UnresolvedAttempt(_) | Refusal::Stopped(_)) if !flags.retry_stopped => {
                flags.retry_stopped = true;
            }
            Err(Refusal::PlanHashMismatch(_)) if !flags.accept_plan_change => {
                flags.accept_plan_change = true;
            }
            Err(refusal) => return Err(refusal),
        }
    }
}

/// Compares the snapshot with the accepted plan; returns the record to write when the
/// snapshot becomes (or stays, changed) the accepted one.
fn plan_to_accept(
    state: &State,
    plan: &PlanFacts<'_>,
    flags: RecoveryFlags,
    now: Timestamp,
) -> Result<Option<PlanRecord>, Refusal> {
    let snapshot_record = || PlanRecord {
        path: plan.path.to_owned(),
        sha256: plan.sha256.to_owned(),
        accepted_at: now,
    };
    let Some(stored) = &state.plan else {
        return Ok(Some(snapshot_record()));
    };
    if stored.path != plan.path {
        return Err(Refusal::PlanPathMismatch {
            stored: stored.path.clone(),
            actual: plan.path.to_owned(),
        });
    }
    if stored.sha256 == plan.sha256 {
        return Ok(None);
    }
    if !flags.accept_plan_change {
        return Err(Refusal::PlanHashMismatch(PlanChange {
            path: plan.path.to_owned(),
            expected: stored.sha256.clone(),
            actual: plan.sha256.to_owned(),
        }));
    }
    // Titles and bodies may change; a completed phase that vanished would make the recorded
    // history describe a plan that no longer exists.
    let missing: Vec<String> = state
        .completed_phase_ids
        .iter()
        .filter(|id| !plan.phase_ids.contains(&id.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(Refusal::CompletedPhasesMissing {
            path: plan.path.to_owned(),
            missing,
        });
    }
    Ok(Some(snapshot_record()))
}

fn require_in_plan(
    plan: &PlanFacts<'_>,
    phase_id: &str,
    abandoned_attempt: bool,
) -> Result<(), Refusal> {
    if plan.phase_ids.contains(&phase_id) {
        return Ok(());
    }
    Err(Refusal::RetriedPhaseMissing {
        phase_id: phase_id.to_owned(),
        abandoned_attempt,
    })
}

/// The first phase in plan order that is not completed.
pub(crate) fn next_pending<'a>(state: &State, phase_ids: &[&'a str]) -> Option<&'a str> {
    phase_ids
        .iter()
        .copied()
        .find(|id| !state.completed_phase_ids.iter().any(|done| done == id))
}

#[cfg(test)]
mod tests;
