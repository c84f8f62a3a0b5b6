//! `check --prompt`: the prompt an attempt would get, rendered by the same code and from the
//! same prepared state as the real one, without anything being written.
//!
//! A few values exist only once the attempt starts: its id (the `run_id`) and what derives
//! from it — the prompt, transcript and outcome paths and the start time — and the time a plan
//! acceptance in the same write records. The preview renders the prompt with stand-ins for
//! them and then writes each stand-in as its placeholder (`<attempt-id>`, `<prompt-path>`,
//! `<transcript-path>`, `<outcome-path>`, `<started-at>`, `<accepted-at>`). The stand-ins are
//! drawn from a caller-supplied random UUID (the attempt id's own UUID part, and two
//! timestamps derived from it), so they cannot occur anywhere else in the prompt — in the plan
//! text, a summary — and every other byte is exactly what the attempt will receive.

use uuid::Uuid;

use super::{PromptContext, RetryNote, render_prompt};
use crate::domain::attempt_id::attempt_id;
use crate::domain::plan::Phase;
use crate::domain::state::{
    ActiveAttempt, PhaseRef, PlanRecord, SnapshotRef, State, StateError, StateLayout,
};
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::FailedCheck;

/// The placeholder for the attempt id (`run_id`, `active_attempt.id`).
pub(crate) const ATTEMPT_ID: &str = "<attempt-id>";
/// The placeholder for `prompts/<attempt-id>.txt`.
pub(crate) const PROMPT_PATH: &str = "<prompt-path>";
/// The placeholder for `transcripts/<attempt-id>.txt`.
pub(crate) const TRANSCRIPT_PATH: &str = "<transcript-path>";
/// The placeholder for `outcomes/<attempt-id>.json`.
pub(crate) const OUTCOME_PATH: &str = "<outcome-path>";
/// The placeholder for the attempt's start time (also an abandoned attempt's finish time,
/// which the same write records).
pub(crate) const STARTED_AT: &str = "<started-at>";
/// The placeholder for the time of a plan acceptance made by the same write.
pub(crate) const ACCEPTED_AT: &str = "<accepted-at>";

/// The attempt to preview and the state it would be prepared from.
#[derive(Clone, Debug)]
pub(crate) struct PreviewRequest<'a> {
    pub layout: &'a StateLayout,
    pub plan_workspace_path: &'a str,
    /// The plan snapshot the attempt runs against (canonical path, hash).
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
    /// The failed check of the phase's previous attempt, when it failed verification.
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
