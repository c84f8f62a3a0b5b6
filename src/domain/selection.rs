//! Admission and selection rules for `run` (SPEC §7 step 1, §12; reference §13): whether an
//! invocation may start given the stored state, the plan snapshot and the recovery flags, and
//! which phase it runs first.

use super::state::{ActiveAttempt, PlanRecord, State, Stop};
use super::timestamp::Timestamp;

/// The facts about the invocation's plan snapshot that admission needs.
#[derive(Clone, Debug)]
pub struct PlanFacts<'a> {
    /// Canonical absolute plan path.
    pub path: &'a str,
    /// SHA-256 of the snapshot bytes.
    pub sha256: &'a str,
    /// Phase ids in plan order.
    pub phase_ids: Vec<&'a str>,
}

/// The operator's explicit recovery decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFlags {
    pub retry_stopped: bool,
    pub accept_plan_change: bool,
}

/// Why an invocation may not start. Each variant carries what the message must name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An attempt is unresolved and `--retry-stopped` was not given.
    UnresolvedAttempt(Box<ActiveAttempt>),
    /// A phase is stopped and `--retry-stopped` was not given.
    Stopped(Stop),
    /// The state belongs to a plan at another path.
    PlanPathMismatch { stored: String, actual: String },
    /// The plan bytes changed since acceptance and `--accept-plan-change` was not given.
    PlanHashMismatch { path: String, expected: String, actual: String },
    /// `--accept-plan-change` was given but completed phases are gone from the new plan.
    CompletedPhasesMissing { path: String, missing: Vec<String> },
    /// The phase to retry no longer exists in the plan.
    RetriedPhaseMissing { phase_id: String, abandoned_attempt: bool },
}

/// What the first attempt of the invocation is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FirstSelection {
    /// `--retry-stopped` with an unresolved attempt: resolve it as interrupted (after the
    /// caller's liveness check) and rerun its phase.
    RetryAbandoned(Box<ActiveAttempt>),
    /// `--retry-stopped` with a stopped phase: rerun it.
    RetryStopped { phase_id: String },
    /// The first phase, in plan order, that is not completed.
    Next { phase_id: String },
    /// Every phase is completed.
    AllComplete,
}

/// A successful admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// `Some` when the plan record must be (re)written: first acceptance or an accepted change.
    pub accept: Option<PlanRecord>,
    pub first: FirstSelection,
}

/// Decides whether an invocation may start. Check order (reference §13): an unresolved
/// attempt without `--retry-stopped` is refused before the plan is compared; then the stored
/// path must equal the snapshot path (never accepted implicitly); then the hash; then a stop
/// without `--retry-stopped`.
pub fn admit(
    state: &State,
    plan: &PlanFacts<'_>,
    flags: RecoveryFlags,
    now: Timestamp,
) -> Result<Admission, Refusal> {
    let _ = (state, plan, flags, now);
    todo!()
}

/// The first phase in plan order that is not completed.
pub fn next_pending<'a>(state: &State, phase_ids: &[&'a str]) -> Option<&'a str> {
    phase_ids
        .iter()
        .copied()
        .find(|id| !state.completed_phase_ids.iter().any(|done| done == id))
}
