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
mod tests {
    use super::*;
    use crate::domain::plan::parse_plan;
    use crate::domain::state::{AttemptStatus, OutcomeRef, Stop};

    const DIR: &str = "/ws/.ai-session-handler/plans/key";
    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn layout() -> StateLayout {
        StateLayout { dir: DIR.into() }
    }

    fn plan() -> crate::domain::plan::ParsedPlan {
        parse_plan(
            b"# Plan\n\nIntent.\n\n## Phase 1: One\n\n### Workspace\n\n.\n\n## Phase 2: Two\n\n### Workspace\n\n.\n\n### Goal\n\nBody two.\n",
        )
        .unwrap()
    }

    fn request<'a>(
        plan: &'a crate::domain::plan::ParsedPlan,
        layout: &'a StateLayout,
        state: &'a State,
        phase: usize,
    ) -> PreviewRequest<'a> {
        PreviewRequest {
            layout,
            plan_workspace_path: "/ws",
            snapshot: SnapshotRef {
                path: "/ws/plan.md".into(),
                sha256: SHA.into(),
            },
            preamble: &plan.preamble,
            phase: &plan.phases[phase],
            execution_workspace: "/ws",
            state,
            accept: Some(PlanRecord {
                path: "/ws/plan.md".into(),
                sha256: SHA.into(),
                accepted_at: Timestamp::parse("2026-07-05T12:00:00Z").unwrap(),
            }),
            resolve_abandoned: false,
            retry: None,
            verification_failure: None,
        }
    }

    /// The preview with its placeholders filled in is the prompt of the attempt prepared
    /// with those values.
    #[test]
    fn filling_in_the_placeholders_gives_the_real_prompt() {
        let plan = plan();
        let layout = layout();
        let state = State::default();
        let request = request(&plan, &layout, &state, 0);
        let preview = preview_prompt(&request, Uuid::new_v4()).unwrap();
        for placeholder in [
            ATTEMPT_ID,
            TRANSCRIPT_PATH,
            PROMPT_PATH,
            STARTED_AT,
            ACCEPTED_AT,
        ] {
            assert!(preview.contains(placeholder), "{placeholder} in {preview}");
        }

        let started_at = Timestamp::parse("2026-07-05T12:01:02Z").unwrap();
        let accepted_at = Timestamp::parse("2026-07-05T12:01:01Z").unwrap();
        let id = attempt_id(started_at, "phase-1", Uuid::new_v4());
        let attempt = ActiveAttempt::prepared(
            id.clone(),
            PhaseRef {
                id: "phase-1".into(),
                title: "One".into(),
            },
            request.snapshot.clone(),
            "/ws".into(),
            started_at,
            &layout,
        );
        let mut prepared = state.clone();
        let accept = request.accept.clone().map(|record| PlanRecord {
            accepted_at,
            ..record
        });
        prepared
            .apply_preparation(attempt.clone(), accept, None)
            .unwrap();
        let real = render_prompt(&PromptContext {
            plan_workspace_path: "/ws",
            execution_workspace_path: "/ws",
            plan_path: "/ws/plan.md",
            state_path: &layout.state_path(),
            run_id: &id,
            transcript_path: &attempt.transcript_path,
            preamble: &plan.preamble,
            phase: &plan.phases[0],
            state: &prepared,
            retry: None,
            verification_failure: None,
        });
        let filled = preview
            .replace(PROMPT_PATH, &attempt.prompt_path)
            .replace(TRANSCRIPT_PATH, &attempt.transcript_path)
            .replace(OUTCOME_PATH, &attempt.outcome_path)
            .replace(ATTEMPT_ID, &id)
            .replace(STARTED_AT, &started_at.to_string())
            .replace(ACCEPTED_AT, &accepted_at.to_string());
        assert_eq!(filled, real);
    }

    #[test]
    fn an_abandoned_attempt_resolved_by_the_same_write_shows_its_finish_as_the_start() {
        let plan = plan();
        let layout = layout();
        let old = "20260705T110000Z-phase-1-old";
        let mut state = State {
            plan: Some(PlanRecord {
                path: "/ws/plan.md".into(),
                sha256: SHA.into(),
                accepted_at: Timestamp::parse("2026-07-05T10:00:00Z").unwrap(),
            }),
            ..State::default()
        };
        state
            .prepare(ActiveAttempt::prepared(
                old.into(),
                PhaseRef {
                    id: "phase-1".into(),
                    title: "One".into(),
                },
                SnapshotRef {
                    path: "/ws/plan.md".into(),
                    sha256: SHA.into(),
                },
                "/ws".into(),
                Timestamp::parse("2026-07-05T11:00:00Z").unwrap(),
                &layout,
            ))
            .unwrap();
        let mut request = request(&plan, &layout, &state, 0);
        request.accept = None;
        request.resolve_abandoned = true;
        let preview = preview_prompt(&request, Uuid::new_v4()).unwrap();
        assert!(
            preview.contains(&format!("  run_id: {old}\n")),
            "the resolved attempt is the last run: {preview}"
        );
        assert!(
            preview.contains(&format!("  finished_at: {STARTED_AT}\n")),
            "{preview}"
        );
        assert!(
            !preview.contains(ACCEPTED_AT),
            "nothing accepted: {preview}"
        );
    }

    #[test]
    fn a_stopped_phase_is_previewed_as_its_retry_sees_the_state() {
        let plan = plan();
        let layout = layout();
        let failed = "20260705T110000Z-phase-2-f";
        let state = State {
            plan: Some(PlanRecord {
                path: "/ws/plan.md".into(),
                sha256: SHA.into(),
                accepted_at: Timestamp::parse("2026-07-05T10:00:00Z").unwrap(),
            }),
            completed_phase_ids: vec!["phase-1".into()],
            committed_outcomes: vec![OutcomeRef {
                attempt_id: failed.into(),
                phase_id: "phase-2".into(),
                status: AttemptStatus::Blocked,
                path: layout.outcome_path(failed),
                duration_ms: Some(1),
                output_bytes: Some(1),
                watchdog_losses: None,
                usage: None,
            }],
            current_phase: Some(PhaseRef {
                id: "phase-2".into(),
                title: "Two".into(),
            }),
            stop: Some(Stop {
                reason: AttemptStatus::Blocked,
                phase_id: "phase-2".into(),
                message: Some("need a key".into()),
                clarification_request: None,
            }),
            ..State::default()
        };
        let mut request = request(&plan, &layout, &state, 1);
        request.accept = None;
        let preview = preview_prompt(&request, Uuid::new_v4()).unwrap();
        assert!(
            preview.contains("- selected_phase_id: phase-2\n"),
            "{preview}"
        );
        assert!(
            preview.contains("stop: none\n"),
            "the retry's write clears the stop"
        );
        assert!(
            preview.contains(&format!(
                "  - phase-2 | blocked | {DIR}/outcomes/{failed}.json\n"
            )),
            "{preview}"
        );
        assert!(preview.contains("Body two."), "{preview}");
    }

    #[test]
    fn stand_in_times_are_distinct_whole_seconds() {
        for _ in 0..1000 {
            let (started, accepted) = stand_in_times(Uuid::new_v4());
            assert_ne!(started, accepted);
            assert!(Timestamp::parse(&started.to_string()).is_ok());
        }
        let (started, accepted) = stand_in_times(Uuid::from_u64_pair(7, 7));
        assert_ne!(started, accepted);
    }
}
