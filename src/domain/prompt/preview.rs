//! `check --prompt`: the prompt an attempt would get, rendered by the same code from the same
//! prepared state, without anything being written. The values that exist only once the attempt
//! starts (its id, the paths and times derived from it, a plan acceptance's time) are rendered
//! as stand-ins drawn from a random UUID, which cannot occur anywhere else in the prompt, and
//! then replaced by their placeholders (`<attempt-id>`, …).

use uuid::Uuid;

use super::{PromptContext, RetryNote, render_prompt};
use crate::domain::attempt_id::attempt_id;
use crate::domain::plan::Phase;
use crate::domain::state::{
    ActiveAttempt, PhaseRef, PlanRecord, SnapshotRef, State, StateError, StateLayout,
};
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::FailedCheck;

pub(crate) const ATTEMPT_ID: &str = "<attempt-id>";
pub(crate) const PROMPT_PATH: &str = "<prompt-path>";
pub(crate) const TRANSCRIPT_PATH: &str = "<transcript-path>";
pub(crate) const OUTCOME_PATH: &str = "<outcome-path>";
/// Also an abandoned attempt's finish time, which the same write records.
pub(crate) const STARTED_AT: &str = "<started-at>";
/// A plan acceptance made by the same write.
pub(crate) const ACCEPTED_AT: &str = "<accepted-at>";

/// The attempt to preview and the state it would be prepared from.
#[derive(Clone, Debug)]
pub(crate) struct PreviewRequest<'a> {
    pub layout: &'a StateLayout,
    pub plan_workspace_path: &'a str,
    pub snapshot: SnapshotRef,
    pub preamble: &'a str,
    pub phase: &'a Phase,
    pub execution_workspace: &'a str,
    /// The durable state as it is now.
    pub state: &'a State,
    /// The plan record the prepared write would accept (its time is replaced).
    pub accept: Option<PlanRecord>,
    /// Whether the prepared write resolves an abandoned attempt first.
    pub resolve_abandoned: bool,
    pub retry: Option<&'a RetryNote>,
    pub verification_failure: Option<&'a FailedCheck>,
}

/// The prompt `request`'s attempt would receive, with the launch-time values written as
/// placeholders. `nonce` must be random (a UUID v4): the stand-ins are derived from it.
pub(crate) fn preview_prompt(
    request: &PreviewRequest<'_>,
    nonce: Uuid,
) -> Result<String, StateError> {
    let (started_at, accepted_at) = stand_in_times(nonce);
    let id = attempt_id(started_at, &request.phase.id, nonce);
    let attempt = ActiveAttempt::prepared(
        id.clone(),
        PhaseRef {
            id: request.phase.id.clone(),
            title: request.phase.title.clone(),
        },
        request.snapshot.clone(),
        request.execution_workspace.to_owned(),
        started_at,
        request.layout,
    );
    let accept = request.accept.clone().map(|record| PlanRecord {
        accepted_at,
        ..record
    });
    let mut prepared = request.state.clone();
    prepared.apply_preparation(
        attempt.clone(),
        accept,
        request.resolve_abandoned.then_some(started_at),
    )?;
    let state_path = request.layout.state_path();
    let prompt = render_prompt(&PromptContext {
        plan_workspace_path: request.plan_workspace_path,
        execution_workspace_path: &attempt.execution_workspace,
        plan_path: &request.snapshot.path,
        state_path: &state_path,
        run_id: &attempt.id,
        transcript_path: &attempt.transcript_path,
        preamble: request.preamble,
        phase: request.phase,
        state: &prepared,
        retry: request.retry,
        verification_failure: request.verification_failure,
    });
    // The paths first: each contains the id.
    let stand_ins = [
        (attempt.prompt_path.as_str(), PROMPT_PATH),
        (&attempt.transcript_path, TRANSCRIPT_PATH),
        (&attempt.outcome_path, OUTCOME_PATH),
        (&id, ATTEMPT_ID),
        (&started_at.to_string(), STARTED_AT),
        (&accepted_at.to_string(), ACCEPTED_AT),
    ];
    Ok(stand_ins.iter().fold(prompt, |text, (value, placeholder)| {
        text.replace(value, placeholder)
    }))
}

/// Two distinct whole-second times between 1970 and 9999, drawn from the nonce's bits, as
/// the stand-ins for the start and acceptance times.
fn stand_in_times(nonce: Uuid) -> (Timestamp, Timestamp) {
    // 9999-12-31T23:59:59Z is 253_402_300_799 seconds after the epoch.
    const SPAN: u64 = 253_402_300_799;
    let (high, low) = nonce.as_u64_pair();
    let at = |seconds: u64| {
        let seconds = i64::try_from(seconds % SPAN).unwrap_or_default();
        Timestamp::from_datetime(chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default())
    };
    let started = at(high);
    let mut accepted = at(low);
    if accepted == started {
        accepted = at(low.wrapping_add(1));
    }
    (started, accepted)
}

#[cfg(test)]
mod tests;
