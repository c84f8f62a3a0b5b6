//! Unit and property tests of `domain::selection`.

use super::*;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::state::{ActiveStatus, AttemptStatus, PhaseRef, SnapshotRef};
use proptest::prelude::*;

const PATH: &str = "/ws/docs/plan.md";
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const NEW_SHA: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
const PHASES: [&str; 3] = ["phase-1", "phase-2", "phase-3"];

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn now() -> Timestamp {
    at("2026-07-05T13:00:00Z")
}

fn facts<'a>(sha256: &'a str, phase_ids: &[&'a str]) -> PlanFacts<'a> {
    PlanFacts {
        path: PATH,
        sha256,
        phase_ids: phase_ids.to_vec(),
    }
}

fn accepted(completed: &[&str]) -> State {
    State {
        plan: Some(PlanRecord {
            path: PATH.into(),
            sha256: SHA.into(),
            accepted_at: at("2026-07-05T12:01:02Z"),
        }),
        completed_phase_ids: completed.iter().map(|id| id.to_string()).collect(),
        ..State::default()
    }
}

fn stopped(phase_id: &str) -> State {
    State {
        current_phase: Some(PhaseRef {
            id: phase_id.into(),
            title: "Third".into(),
        }),
        stop: Some(Stop {
            reason: AttemptStatus::Blocked,
            phase_id: phase_id.into(),
            message: Some("needs a key".into()),
            clarification_request: None,
        }),
        ..accepted(&["phase-1", "phase-2"])
    }
}

fn abandoned(phase_id: &str) -> State {
    let id = format!("20260705T120102Z-{phase_id}-a1");
    let dir = "/ws/.ai-session-handler/plans/key";
    State {
        current_phase: Some(PhaseRef {
            id: phase_id.into(),
            title: "Second".into(),
        }),
        active_attempt: Some(ActiveAttempt {
            id: id.clone(),
            status: ActiveStatus::Running,
            phase: PhaseRef {
                id: phase_id.into(),
                title: "Second".into(),
            },
            snapshot: SnapshotRef {
                path: PATH.into(),
                sha256: SHA.into(),
            },
            execution_workspace: "/ws/app".into(),
            started_at: at("2026-07-05T12:01:02Z"),
            prompt_path: format!("{dir}/prompts/{id}.txt"),
            transcript_path: format!("{dir}/transcripts/{id}.txt"),
            outcome_path: format!("{dir}/outcomes/{id}.json"),
            process: None,
        }),
        ..accepted(&["phase-1"])
    }
}

const PLAIN: RecoveryFlags = RecoveryFlags {
    retry_stopped: false,
    accept_plan_change: false,
};
const RETRY: RecoveryFlags = RecoveryFlags {
    retry_stopped: true,
    accept_plan_change: false,
};
const ACCEPT: RecoveryFlags = RecoveryFlags {
    retry_stopped: false,
    accept_plan_change: true,
};
const BOTH: RecoveryFlags = RecoveryFlags {
    retry_stopped: true,
    accept_plan_change: true,
};

fn next(phase_id: &str) -> FirstSelection {
    FirstSelection::Next {
        phase_id: phase_id.into(),
    }
}

#[test]
fn first_run_accepts_the_snapshot_and_selects_the_first_phase() {
    let admission = admit(&State::default(), &facts(SHA, &PHASES), PLAIN, false, now()).unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: Some(PlanRecord {
                path: PATH.into(),
                sha256: SHA.into(),
                accepted_at: now(),
            }),
            first: next("phase-1"),
        }
    );
}

#[test]
fn unchanged_plan_selects_the_first_pending_phase() {
    let admission = admit(
        &accepted(&["phase-1"]),
        &facts(SHA, &PHASES),
        PLAIN,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: None,
            first: next("phase-2")
        }
    );
    // Plan order decides, not completion order.
    let admission = admit(
        &accepted(&["phase-2"]),
        &facts(SHA, &PHASES),
        PLAIN,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(admission.first, next("phase-1"));
}

#[test]
fn nothing_pending_is_all_complete() {
    let admission = admit(
        &accepted(&PHASES),
        &facts(SHA, &PHASES),
        PLAIN,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: None,
            first: FirstSelection::AllComplete
        }
    );
    let empty = admit(&State::default(), &facts(SHA, &[]), PLAIN, false, now()).unwrap();
    assert_eq!(empty.first, FirstSelection::AllComplete);
}

#[test]
fn changed_bytes_are_refused_without_accept() {
    // Also with --retry-stopped alone.
    let expected = Refusal::PlanHashMismatch(PlanChange {
        path: PATH.into(),
        expected: SHA.into(),
        actual: NEW_SHA.into(),
    });
    for state in [accepted(&[]), stopped("phase-3")] {
        for flags in [PLAIN, RETRY] {
            assert_eq!(
                admit(&state, &facts(NEW_SHA, &PHASES), flags, false, now()),
                Err(expected.clone())
            );
        }
    }
    assert_eq!(expected.to_string(), format!("plan hash mismatch: {PATH}"));
}

#[test]
fn a_moved_plan_is_never_accepted_implicitly() {
    // Even with matching bytes and --accept-plan-change.
    let moved = PlanFacts {
        path: "/ws/other/plan.md",
        sha256: SHA,
        phase_ids: PHASES.to_vec(),
    };
    let expected = Refusal::PlanPathMismatch {
        stored: PATH.into(),
        actual: "/ws/other/plan.md".into(),
    };
    for flags in [PLAIN, RETRY, ACCEPT, BOTH] {
        assert_eq!(
            admit(&accepted(&[]), &moved, flags, false, now()),
            Err(expected.clone())
        );
        assert_eq!(
            admit(&stopped("phase-3"), &moved, flags, false, now()),
            Err(expected.clone())
        );
    }
    assert_eq!(
        expected.to_string(),
        format!(
            "/ws/other/plan.md: plan path mismatch; state belongs to {PATH}. A renamed or \
                 relocated plan requires an explicit history decision."
        )
    );
}

#[test]
fn accepting_a_change_keeps_completed_phases_and_renews_the_record() {
    let admission = admit(
        &accepted(&["phase-1"]),
        &facts(NEW_SHA, &PHASES),
        ACCEPT,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: Some(PlanRecord {
                path: PATH.into(),
                sha256: NEW_SHA.into(),
                accepted_at: now(),
            }),
            first: next("phase-2"),
        }
    );
    // Accepting unchanged bytes accepts nothing.
    let admission = admit(
        &accepted(&["phase-1"]),
        &facts(SHA, &PHASES),
        ACCEPT,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(admission.accept, None);
}

#[test]
fn accepting_a_change_that_drops_completed_phases_is_refused() {
    // The missing ids are named in completion order.
    let state = accepted(&["phase-3", "phase-1", "phase-2"]);
    let refusal = admit(&state, &facts(NEW_SHA, &["phase-2"]), BOTH, false, now()).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::CompletedPhasesMissing {
            path: PATH.into(),
            missing: vec!["phase-3".into(), "phase-1".into()],
        }
    );
    assert_eq!(
        refusal.to_string(),
        format!(
            "{PATH}: cannot accept plan change; completed phase ids are missing: phase-3, phase-1"
        )
    );
}

#[test]
fn a_stopped_phase_needs_retry() {
    let state = stopped("phase-3");
    for flags in [PLAIN, ACCEPT] {
        let refusal = admit(&state, &facts(SHA, &PHASES), flags, false, now()).unwrap_err();
        assert_eq!(refusal, Refusal::Stopped(state.stop.clone().unwrap()));
        assert_eq!(refusal.to_string(), "phase phase-3 is stopped: blocked");
    }
    let admission = admit(&state, &facts(SHA, &PHASES), RETRY, false, now()).unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: None,
            first: FirstSelection::RetryStopped {
                phase_id: "phase-3".into()
            },
        }
    );
}

#[test]
fn clarification_flow_retries_against_the_accepted_change() {
    let state = stopped("phase-3");
    let admission = admit(&state, &facts(NEW_SHA, &PHASES), BOTH, false, now()).unwrap();
    assert_eq!(
        admission.accept.map(|plan| plan.sha256),
        Some(NEW_SHA.to_owned())
    );
    assert_eq!(
        admission.first,
        FirstSelection::RetryStopped {
            phase_id: "phase-3".into()
        }
    );
}

#[test]
fn an_unresolved_attempt_is_refused_before_the_plan_is_compared() {
    // The abandoned attempt is reported first.
    let state = abandoned("phase-2");
    let attempt = Box::new(state.active_attempt.clone().unwrap());
    let moved = PlanFacts {
        path: "/elsewhere.md",
        sha256: NEW_SHA,
        phase_ids: vec![],
    };
    for plan in [facts(SHA, &PHASES), facts(NEW_SHA, &PHASES), moved] {
        for flags in [PLAIN, ACCEPT] {
            assert_eq!(
                admit(&state, &plan, flags, false, now()),
                Err(Refusal::UnresolvedAttempt(attempt.clone()))
            );
        }
    }
    assert_eq!(
        Refusal::UnresolvedAttempt(attempt.clone()).to_string(),
        "phase phase-2 has an abandoned running attempt 20260705T120102Z-phase-2-a1; inspect \
             partial changes and stop any surviving worker before retrying"
    );
    let admission = admit(&state, &facts(SHA, &PHASES), RETRY, false, now()).unwrap();
    assert_eq!(
        admission,
        Admission {
            accept: None,
            first: FirstSelection::RetryAbandoned(attempt)
        }
    );
}

#[test]
fn a_retried_phase_must_still_exist() {
    let refusal = admit(
        &abandoned("phase-2"),
        &facts(NEW_SHA, &["phase-1"]),
        BOTH,
        false,
        now(),
    );
    let refusal = refusal.unwrap_err();
    assert_eq!(
        refusal,
        Refusal::RetriedPhaseMissing {
            phase_id: "phase-2".into(),
            abandoned_attempt: true
        }
    );
    assert_eq!(
        refusal.to_string(),
        "active_attempt.phase.id 'phase-2' does not exist in plan"
    );

    let plan = facts(NEW_SHA, &["phase-1", "phase-2"]);
    let refusal = admit(&stopped("phase-3"), &plan, BOTH, false, now()).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::RetriedPhaseMissing {
            phase_id: "phase-3".into(),
            abandoned_attempt: false
        }
    );
    assert_eq!(
        refusal.to_string(),
        "stopped phase phase-3 does not exist in plan"
    );
}

#[test]
fn retry_with_nothing_to_retry_proceeds_normally() {
    let admission = admit(
        &accepted(&["phase-1"]),
        &facts(SHA, &PHASES),
        RETRY,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(admission.first, next("phase-2"));
    let admission = admit(
        &accepted(&PHASES),
        &facts(SHA, &PHASES),
        RETRY,
        false,
        now(),
    )
    .unwrap();
    assert_eq!(admission.first, FirstSelection::AllComplete);
}

#[test]
fn next_pending_skips_completed_phases() {
    assert_eq!(next_pending(&accepted(&[]), &PHASES), Some("phase-1"));
    assert_eq!(
        next_pending(&accepted(&["phase-1", "phase-3"]), &PHASES),
        Some("phase-2")
    );
    assert_eq!(next_pending(&accepted(&PHASES), &PHASES), None);
}

fn any_state() -> impl Strategy<Value = State> {
    let completed = prop::sample::subsequence(PHASES.to_vec(), 0..=3);
    (0..4_u8, completed, any::<bool>()).prop_map(|(kind, completed, unaccepted)| {
        let mut state = match kind {
            0 => stopped("phase-3"),
            1 => abandoned("phase-2"),
            _ => accepted(&[]),
        };
        state.completed_phase_ids = completed.iter().map(|id| id.to_string()).collect();
        if unaccepted {
            state.plan = None;
        }
        state
    })
}

proptest! {
    #[test]
    fn admission_respects_the_operator_flags(
        state in any_state(),
        sha in prop::sample::select(vec![SHA, NEW_SHA]),
        path in prop::sample::select(vec![PATH, "/ws/moved.md"]),
        phase_ids in prop::sample::subsequence(PHASES.to_vec(), 0..=3),
        retry_stopped in any::<bool>(),
        accept_plan_change in any::<bool>(),
    ) {
        let plan = PlanFacts { path, sha256: sha, phase_ids: phase_ids.clone() };
        let flags = RecoveryFlags { retry_stopped, accept_plan_change };
        if let Ok(admission) = admit(&state, &plan, flags, false, now()) {
            let stored = state.plan.as_ref();
            // The stored path is never replaced; changed bytes only with the flag.
            prop_assert!(stored.is_none_or(|stored| stored.path == path));
            prop_assert!(accept_plan_change || stored.is_none_or(|stored| stored.sha256 == sha));
            prop_assert!(retry_stopped || (state.stop.is_none() && state.active_attempt.is_none()));
            match (&admission.accept, stored) {
                (Some(record), _) => {
                    prop_assert_eq!(record.path.as_str(), path);
                    prop_assert_eq!(record.sha256.as_str(), sha);
                    prop_assert_eq!(record.accepted_at, now());
                }
                (None, Some(stored)) => prop_assert_eq!(stored.sha256.as_str(), sha),
                (None, None) => prop_assert!(false, "an unaccepted plan must be accepted"),
            }
            if let FirstSelection::Next { phase_id } = &admission.first {
                prop_assert!(phase_ids.contains(&phase_id.as_str()));
                prop_assert!(!state.completed_phase_ids.contains(phase_id));
            }
        }
    }
}

fn with_schedule(phase_id: &str) -> State {
    let mut state = stopped(phase_id);
    if let Some(stop) = state.stop.as_mut() {
        stop.reason = AttemptStatus::MissingMarker;
    }
    state.retry_schedule = Some(RetrySchedule {
        phase_id: phase_id.into(),
        after: AttemptStatus::MissingMarker,
        attempt: 2,
        max_attempts: Some(3),
        waits_used: 0,
        template_index: 0,
        not_before: at("2026-07-05T12:10:00Z"),
        reason: crate::domain::retry::next_step::RetryReason::Backoff,
        rate_limited: Vec::new(),
    });
    state
}

#[test]
fn a_scheduled_retry_that_fits_the_policy_is_resumed_without_retry_stopped() {
    let state = with_schedule("phase-3");
    let admission = admit(&state, &facts(SHA, &PHASES), PLAIN, true, now()).unwrap();
    assert_eq!(
        admission.first,
        FirstSelection::ResumeSchedule(Box::new(state.retry_schedule.clone().unwrap()))
    );
}

#[test]
fn a_scheduled_retry_that_does_not_fit_leaves_a_plain_stop() {
    let state = with_schedule("phase-3");
    let refusal = admit(&state, &facts(SHA, &PHASES), PLAIN, false, now()).unwrap_err();
    assert!(matches!(refusal, Refusal::Stopped(_)), "{refusal:?}");
    // --retry-stopped runs the phase at once, whatever the schedule says.
    let admission = admit(&state, &facts(SHA, &PHASES), RETRY, true, now()).unwrap();
    assert_eq!(
        admission.first,
        FirstSelection::RetryStopped {
            phase_id: "phase-3".into()
        }
    );
}

#[test]
fn a_resumed_phase_must_still_exist() {
    let state = with_schedule("phase-3");
    let refusal = admit(
        &state,
        &facts(SHA, &["phase-1", "phase-2"]),
        PLAIN,
        true,
        now(),
    );
    assert!(
        matches!(
            refusal,
            Err(Refusal::PlanHashMismatch(_)) | Err(Refusal::RetriedPhaseMissing { .. })
        ),
        "{refusal:?}"
    );
}

// ---- the way forward (check --prompt) ----

#[test]
fn the_way_forward_is_a_plain_run_when_one_is_admitted() {
    let (flags, admission) =
        way_forward(&accepted(&["phase-1"]), &facts(SHA, &PHASES), false, now()).unwrap();
    assert_eq!(flags, RecoveryFlags::default());
    assert_eq!(
        admission.first,
        FirstSelection::Next {
            phase_id: "phase-2".into()
        }
    );
}

#[test]
fn the_way_forward_adds_the_flags_the_refusals_ask_for() {
    let (flags, admission) =
        way_forward(&stopped("phase-3"), &facts(NEW_SHA, &PHASES), false, now()).unwrap();
    assert_eq!(
        flags,
        RecoveryFlags {
            retry_stopped: true,
            accept_plan_change: true,
        }
    );
    assert_eq!(
        admission.first,
        FirstSelection::RetryStopped {
            phase_id: "phase-3".into()
        }
    );
    assert_eq!(
        admission.accept.map(|record| record.sha256),
        Some(NEW_SHA.into())
    );

    let (flags, admission) =
        way_forward(&abandoned("phase-2"), &facts(SHA, &PHASES), false, now()).unwrap();
    assert!(flags.retry_stopped && !flags.accept_plan_change);
    assert!(matches!(admission.first, FirstSelection::RetryAbandoned(_)));
}

#[test]
fn the_way_forward_keeps_refusals_no_flag_lifts() {
    let moved = PlanFacts {
        path: "/ws/docs/moved.md",
        ..facts(SHA, &PHASES)
    };
    assert!(matches!(
        way_forward(&accepted(&[]), &moved, false, now()),
        Err(Refusal::PlanPathMismatch { .. })
    ));
    assert!(matches!(
        way_forward(
            &accepted(&["phase-1"]),
            &facts(NEW_SHA, &["phase-2"]),
            false,
            now()
        ),
        Err(Refusal::CompletedPhasesMissing { .. })
    ));
}
