use super::*;
use crate::domain::state::{AbandonedRef, ActiveAttempt, PhaseRef, SnapshotRef, Stop};
use crate::domain::timestamp::Timestamp;

fn entry(id: &str, phase: &str, status: AttemptStatus, figures: Option<(u64, u64)>) -> OutcomeRef {
    OutcomeRef {
        attempt_id: id.into(),
        phase_id: phase.into(),
        status,
        path: format!("/k/outcomes/{id}.json"),
        duration_ms: figures.map(|(duration, _)| duration),
        output_bytes: figures.map(|(_, bytes)| bytes),
        watchdog_losses: None,
        usage: None,
        changed_nothing: None,
    }
}

fn phase_ref(id: &str, title: &str) -> PhaseRef {
    PhaseRef {
        id: id.into(),
        title: title.into(),
    }
}

const PLAN: [(&str, &str); 3] = [("phase-1", "One"), ("phase-2", "Two"), ("phase-3", "Three")];

#[test]
fn a_fresh_state_lists_every_phase_as_pending() {
    let tally = tally(&State::default(), Some(&PLAN));
    assert_eq!(tally.phases.len(), 3);
    assert!(
        tally
            .phases
            .iter()
            .all(|row| row.standing == PhaseStanding::Pending
                && row.attempts == 0
                && row.last.is_none())
    );
    assert_eq!(tally.phases[1].title.as_deref(), Some("Two"));
    assert_eq!(
        tally.totals,
        RunTotals {
            phases_total: Some(3),
            ..RunTotals::default()
        }
    );
}

#[test]
fn the_last_committed_attempt_of_a_phase_gives_its_figures_and_totals_sum_all() {
    let state = State {
        completed_phase_ids: vec!["phase-1".into()],
        committed_outcomes: vec![
            entry(
                "a1",
                "phase-1",
                AttemptStatus::AgentFailed,
                Some((1_000, 10)),
            ),
            entry(
                "a2",
                "phase-1",
                AttemptStatus::PhaseComplete,
                Some((2_000, 20)),
            ),
            entry("a3", "phase-2", AttemptStatus::Blocked, Some((500, 5))),
        ],
        current_phase: Some(phase_ref("phase-2", "Two")),
        stop: Some(Stop {
            reason: AttemptStatus::Blocked,
            phase_id: "phase-2".into(),
            message: Some("need a key".into()),
            clarification_request: None,
        }),
        ..State::default()
    };
    let tally = tally(&state, Some(&PLAN));
    let first = &tally.phases[0];
    assert_eq!(first.standing, PhaseStanding::Done);
    assert_eq!(first.attempts, 2);
    assert_eq!(
        first.last,
        Some(AttemptFigures {
            attempt_id: "a2".into(),
            status: AttemptStatus::PhaseComplete,
            duration_ms: Some(2_000),
            output_bytes: Some(20),
            usage: UsageSummary::unknown(),
            completed_without_changes: false,
        })
    );
    assert_eq!(
        tally.phases[1].standing,
        PhaseStanding::Stopped(AttemptStatus::Blocked)
    );
    assert_eq!(tally.phases[1].standing.as_str(), "stopped");
    assert_eq!(tally.phases[2].standing, PhaseStanding::Pending);
    assert_eq!(
        tally.totals,
        RunTotals {
            phases_done: 1,
            phases_total: Some(3),
            attempts: 3,
            duration_ms: 3_500,
            output_bytes: 35,
            attempts_without_figures: 0,
            usage: UsageSummary::unknown(),
        }
    );
}

#[test]
fn entries_without_figures_count_as_attempts_but_not_in_the_sums() {
    let state = State {
        completed_phase_ids: vec!["phase-1".into(), "phase-2".into()],
        committed_outcomes: vec![
            entry("old", "phase-1", AttemptStatus::PhaseComplete, None),
            entry(
                "new",
                "phase-2",
                AttemptStatus::PhaseComplete,
                Some((700, 7)),
            ),
        ],
        ..State::default()
    };
    let tally = tally(&state, Some(&PLAN));
    assert_eq!(tally.phases[0].attempts, 1);
    let old = tally.phases[0].last.as_ref().unwrap();
    assert_eq!((old.duration_ms, old.output_bytes), (None, None));
    assert_eq!(tally.totals.attempts, 2);
    assert_eq!(tally.totals.attempts_without_figures, 1);
    assert_eq!(
        (tally.totals.duration_ms, tally.totals.output_bytes),
        (700, 7)
    );
}

#[test]
fn the_active_attempt_counts_and_shows_as_its_recorded_status() {
    let at = Timestamp::parse("2026-07-05T12:00:00Z").unwrap();
    let state = State {
        committed_outcomes: vec![entry(
            "a1",
            "phase-1",
            AttemptStatus::Timeout,
            Some((9_000, 90)),
        )],
        current_phase: Some(phase_ref("phase-1", "One")),
        active_attempt: Some(ActiveAttempt {
            id: "a2".into(),
            status: ActiveStatus::Running,
            phase: phase_ref("phase-1", "One"),
            snapshot: SnapshotRef {
                path: "/p.md".into(),
                sha256: "ab".repeat(32),
            },
            execution_workspace: "/ws".into(),
            started_at: at,
            prompt_path: "/k/prompts/a2.txt".into(),
            transcript_path: "/k/transcripts/a2.txt".into(),
            outcome_path: "/k/outcomes/a2.json".into(),
            process: None,
        }),
        ..State::default()
    };
    let tally = tally(&state, Some(&PLAN));
    let row = &tally.phases[0];
    assert_eq!(row.standing, PhaseStanding::Active(ActiveStatus::Running));
    assert_eq!(row.standing.as_str(), "running");
    assert_eq!(row.attempts, 2);
    assert_eq!(row.last.as_ref().unwrap().attempt_id, "a1");
    assert_eq!(tally.totals.attempts, 2);
    assert_eq!(tally.totals.duration_ms, 9_000);
}

#[test]
fn an_abandoned_attempt_counts_without_figures() {
    let at = Timestamp::parse("2026-07-05T12:00:00Z").unwrap();
    let state = State {
        completed_phase_ids: vec!["phase-1".into()],
        committed_outcomes: vec![entry(
            "a2",
            "phase-1",
            AttemptStatus::PhaseComplete,
            Some((1_000, 10)),
        )],
        abandoned_attempts: vec![AbandonedRef {
            attempt_id: "a1".into(),
            phase_id: "phase-1".into(),
            started_at: at,
            resolved_at: at,
        }],
        ..State::default()
    };
    let tally = tally(&state, Some(&PLAN));
    assert_eq!(tally.phases[0].attempts, 2);
    assert_eq!(tally.phases[0].last.as_ref().unwrap().attempt_id, "a2");
    assert_eq!(tally.totals.attempts, 2);
    assert_eq!(tally.totals.attempts_without_figures, 1);
    assert_eq!(tally.totals.duration_ms, 1_000);
}

#[test]
fn phases_the_plan_lacks_follow_in_recorded_order_and_an_unreadable_plan_keeps_the_record() {
    let state = State {
        completed_phase_ids: vec!["phase-9".into(), "phase-1".into()],
        committed_outcomes: vec![
            entry("a1", "phase-9", AttemptStatus::PhaseComplete, Some((1, 1))),
            entry("a2", "phase-1", AttemptStatus::PhaseComplete, Some((1, 1))),
        ],
        ..State::default()
    };
    let with_plan = tally(&state, Some(&PLAN));
    let ids: Vec<&str> = with_plan.phases.iter().map(|row| row.id.as_str()).collect();
    assert_eq!(ids, ["phase-1", "phase-2", "phase-3", "phase-9"]);
    assert_eq!(with_plan.phases[3].title, None);
    assert_eq!(with_plan.phases[3].standing, PhaseStanding::Done);

    let without_plan = tally(&state, None);
    let ids: Vec<&str> = without_plan
        .phases
        .iter()
        .map(|row| row.id.as_str())
        .collect();
    assert_eq!(ids, ["phase-9", "phase-1"]);
    assert_eq!(without_plan.totals.phases_total, None);
    assert_eq!(without_plan.totals.phases_done, 2);
}
