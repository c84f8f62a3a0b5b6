//! Unit tests of the `check --prompt` preview (src/domain/prompt/preview.rs): the same prompt as
//! the real attempt, abandoned and stopped attempts, and the stand-in times.

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
            changed_nothing: None,
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
