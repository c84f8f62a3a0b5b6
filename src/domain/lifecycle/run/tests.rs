//! Tests of the run loop: the stage × input table (published in docs/lifecycle-tables.md),
//! the rules one by one, and properties of whole runs against a random world that answers
//! every effect (plan checks, reservations, attempts, waits) in any way it can.

use proptest::prelude::*;

use super::*;
use crate::domain::budget::BudgetConfig;
use crate::domain::decision::Decision;
use crate::domain::exit_code::ExitCode;
use crate::domain::retry::next_step::RetryReason;
use crate::domain::retry::schedule::ScheduledRetry;
use crate::domain::state::{ActiveAttempt, ActiveStatus, PhaseRef, SnapshotRef};
use crate::domain::timestamp::Timestamp;
use crate::domain::token_usage::TokenCounts;
use crate::domain::token_usage::summary::{Completeness, UsageSummary};
use crate::domain::verification::FailedCheck;

/// The input error the tests carry through the loop.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BadInput;

type Effects = Vec<RunEffect<BadInput>>;

fn rules(max_phases: Option<u64>) -> RunRules {
    RunRules {
        phase_ids: vec!["phase-1".into(), "phase-2".into()],
        max_phases,
        max_attempts: 3,
        budget: caps(),
    }
}

/// `--max-tokens 1000`.
fn caps() -> BudgetCaps {
    BudgetCaps::effective(Some(1000), None, &BudgetConfig::default())
}

/// A reported usage of `tokens` input tokens.
fn spent(tokens: u64) -> UsageSummary {
    UsageSummary {
        counts: TokenCounts {
            input_tokens: Some(tokens),
            ..TokenCounts::default()
        },
        models: Default::default(),
        completeness: Completeness::Reported,
    }
}

fn at() -> Timestamp {
    Timestamp::parse("2026-12-01T12:00:00Z").unwrap()
}

fn record() -> PlanRecord {
    PlanRecord {
        path: "/w/plan.md".into(),
        sha256: "ab".into(),
        accepted_at: at(),
    }
}

fn admitted(first: FirstSelection, accept: bool) -> RunInput<BadInput> {
    RunInput::Admitted(Box::new(Admitted {
        admission: Admission {
            accept: accept.then(record),
            first,
        },
        completed_phase_ids: Vec::new(),
        last_run: None,
        verification_failure: None,
        spent_before: Spent::default(),
        reported_usage: None,
    }))
}

fn next(phase_id: &str) -> RunInput<BadInput> {
    admitted(
        FirstSelection::Next {
            phase_id: phase_id.into(),
        },
        false,
    )
}

fn schedule(phase_id: &str, attempt: u32) -> RetrySchedule {
    RetrySchedule {
        phase_id: phase_id.into(),
        after: AttemptStatus::MissingMarker,
        attempt,
        max_attempts: Some(3),
        waits_used: 0,
        template_index: 0,
        not_before: at(),
        reason: RetryReason::Backoff,
        rate_limited: Vec::new(),
    }
}

fn decision(status: AttemptStatus) -> Decision {
    Decision {
        status,
        summary: format!("{status}"),
    }
}

fn attempt(phase_id: &str) -> ActiveAttempt {
    ActiveAttempt {
        id: format!("a-{phase_id}"),
        status: ActiveStatus::Running,
        phase: PhaseRef {
            id: phase_id.into(),
            title: "T".into(),
        },
        snapshot: SnapshotRef {
            path: "/w/plan.md".into(),
            sha256: "ab".into(),
        },
        execution_workspace: "/w".into(),
        started_at: at(),
        prompt_path: "/w/p".into(),
        transcript_path: "/w/t".into(),
        outcome_path: "/w/o".into(),
        process: None,
    }
}

/// How the world can answer a launched attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Complete,
    Blocked,
    Failed,
    Retried,
    NotPrepared,
    Unresolved,
    /// A completion a check failed, with a retry scheduled.
    CheckFailed,
    /// A retry was scheduled, but the attempt spent the whole budget (1000 tokens).
    RetriedOverBudget,
    /// Complete, with no usage reported: the budget cannot be enforced for its agent.
    CompleteUnreported,
}

/// The check that failed an attempt.
fn failed_check(index: usize) -> FailedCheck {
    FailedCheck {
        index,
        command_first_line: "cargo test".into(),
        exit_code: Some(101),
        signal: None,
        timed_out: false,
        output_tail: "test failed".into(),
    }
}

fn concluded(phase_id: &str, ending: Ending) -> RunInput<BadInput> {
    let spending = |status, retry, usage, budget_note| AttemptEnd::Committed {
        decision: decision(status),
        outcome_path: "/w/o".into(),
        transcript_path: "/w/t".into(),
        retry,
        failed_check: None,
        usage: Box::new(usage),
        budget_note,
    };
    let committed = |status, retry| spending(status, retry, spent(10), None);
    let retry = || ScheduledRetry {
        schedule: schedule(phase_id, 2),
        due: at().as_datetime(),
        reset_phrase: None,
    };
    let end = match ending {
        Ending::Complete => committed(AttemptStatus::PhaseComplete, None),
        Ending::Blocked => committed(AttemptStatus::Blocked, None),
        Ending::Failed => committed(AttemptStatus::AgentFailed, None),
        Ending::Retried => committed(AttemptStatus::MissingMarker, Some(retry())),
        Ending::NotPrepared => AttemptEnd::Uncommitted(Uncommitted::NotPrepared {
            error: StateWriteError::Stopped,
            still_active: None,
        }),
        Ending::Unresolved => AttemptEnd::Uncommitted(Uncommitted::Unresolved {
            decision: decision(AttemptStatus::Timeout),
            failure: RecordFailure::OutcomeRecord(StateWriteError::Stopped),
            attempt: Box::new(attempt(phase_id)),
            still_active: None,
        }),
        Ending::CheckFailed => AttemptEnd::Committed {
            decision: decision(AttemptStatus::VerificationFailed),
            outcome_path: "/w/o".into(),
            transcript_path: "/w/t".into(),
            retry: Some(ScheduledRetry {
                schedule: RetrySchedule {
                    after: AttemptStatus::VerificationFailed,
                    ..schedule(phase_id, 2)
                },
                due: at().as_datetime(),
                reset_phrase: None,
            }),
            usage: Box::new(spent(10)),
            budget_note: None,
            failed_check: Some(Box::new(failed_check(1))),
        },
        Ending::RetriedOverBudget => spending(
            AttemptStatus::MissingMarker,
            Some(retry()),
            spent(1000),
            None,
        ),
        Ending::CompleteUnreported => spending(
            AttemptStatus::PhaseComplete,
            None,
            UsageSummary::unknown(),
            Some("--max-tokens cannot be enforced".into()),
        ),
    };
    RunInput::AttemptConcluded(Box::new(AttemptReport {
        phase_id: phase_id.into(),
        attempt_id: format!("a-{phase_id}"),
        end,
    }))
}

fn run(
    rules: RunRules,
    inputs: impl IntoIterator<Item = RunInput<BadInput>>,
) -> (RunLoop, Effects) {
    let mut machine = RunLoop::new(rules);
    let mut effects = Vec::new();
    for input in inputs {
        effects.extend(machine.handle(input));
    }
    (machine, effects)
}

fn effect_name(effect: &RunEffect<BadInput>) -> String {
    match effect {
        RunEffect::CheckPlan => "check plan".into(),
        RunEffect::ReserveWorkspace { phase_id } => format!("reserve {phase_id}"),
        RunEffect::Launch(order) => format!("launch {}", order.phase_id),
        RunEffect::ForwardInterrupt(_) => "forward interrupt".into(),
        RunEffect::ReleaseWorkspace => "release workspace".into(),
        RunEffect::AwaitRetry { .. } => "await retry".into(),
        RunEffect::WarnBudgetUnenforceable(_) => "warn: budget unenforceable".into(),
        RunEffect::EndWait { .. } => "end wait".into(),
        RunEffect::RecordAcceptance(_) => "record acceptance".into(),
        RunEffect::Finish(end) => format!("finish: {} ({})", end_name(end), end.exit_code().code()),
    }
}

fn end_name(end: &RunEnd<BadInput>) -> &'static str {
    match end {
        RunEnd::AllComplete => "all complete",
        RunEnd::PhaseLimitReached { .. } => "phase limit",
        RunEnd::PhaseStopped { .. } => "phase stopped",
        RunEnd::Uncommitted {
            end: Uncommitted::NotPrepared { .. },
            ..
        } => "not prepared",
        RunEnd::Uncommitted {
            end: Uncommitted::Unresolved { .. },
            ..
        } => "unresolved",
        RunEnd::InterruptedBeforeLaunch { .. } => "interrupted",
        RunEnd::InterruptedDuringWait { .. } => "interrupted during wait",
        RunEnd::BudgetReached { .. } => "budget reached",
        RunEnd::Refused(_) => "refused",
        RunEnd::PlanChanged(_) => "plan changed",
        RunEnd::Input(_) => "input failed",
        RunEnd::AcceptanceFailed(_) => "acceptance failed",
        RunEnd::Internal { .. } => "internal",
    }
}

fn finish(effects: &Effects) -> Option<&RunEnd<BadInput>> {
    effects.iter().find_map(|effect| match effect {
        RunEffect::Finish(end) => Some(end.as_ref()),
        _ => None,
    })
}

fn launches(effects: &Effects) -> Vec<&str> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            RunEffect::Launch(order) => Some(order.phase_id.as_str()),
            _ => None,
        })
        .collect()
}

/// One instance of every stage, reached through the inputs that lead there.
fn stages() -> Vec<(&'static str, Vec<RunInput<BadInput>>)> {
    vec![
        ("Admitting", vec![]),
        (
            "CheckingPlan",
            vec![
                next("phase-1"),
                RunInput::WorkspaceReserved,
                concluded("phase-1", Ending::Complete),
            ],
        ),
        ("Reserving", vec![next("phase-1")]),
        (
            "Attempting",
            vec![next("phase-1"), RunInput::WorkspaceReserved],
        ),
        (
            "Waiting",
            vec![
                next("phase-1"),
                RunInput::WorkspaceReserved,
                concluded("phase-1", Ending::Retried),
            ],
        ),
        (
            "Accepting",
            vec![admitted(FirstSelection::AllComplete, true)],
        ),
        (
            "Finished",
            vec![admitted(FirstSelection::AllComplete, false)],
        ),
    ]
}

/// One instance of every input.
fn inputs() -> Vec<(&'static str, RunInput<BadInput>)> {
    vec![
        ("Admitted(next phase-1)", next("phase-1")),
        (
            "Refused",
            RunInput::Refused(Box::new(RefusedRun {
                refusal: Refusal::PlanPathMismatch {
                    stored: "/a".into(),
                    actual: "/b".into(),
                },
                plan_workspace: "/w".into(),
                execution_workspace: None,
                last_run: None,
                lifted_by: None,
            })),
        ),
        (
            "PlanChecked(unchanged)",
            RunInput::PlanChecked(PlanCheck::Unchanged),
        ),
        (
            "PlanChecked(changed)",
            RunInput::PlanChecked(PlanCheck::Changed(PlanChange {
                path: "/w/plan.md".into(),
                expected: "ab".into(),
                actual: "cd".into(),
            })),
        ),
        ("WorkspaceReserved", RunInput::WorkspaceReserved),
        (
            "AttemptConcluded(complete)",
            concluded("phase-1", Ending::Complete),
        ),
        (
            "AttemptConcluded(blocked)",
            concluded("phase-1", Ending::Blocked),
        ),
        (
            "AttemptConcluded(retry scheduled)",
            concluded("phase-1", Ending::Retried),
        ),
        (
            "AttemptConcluded(not prepared)",
            concluded("phase-1", Ending::NotPrepared),
        ),
        (
            "AttemptConcluded(unresolved)",
            concluded("phase-1", Ending::Unresolved),
        ),
        (
            "AttemptConcluded(verification failed, retry scheduled)",
            concluded("phase-1", Ending::CheckFailed),
        ),
        (
            "AttemptConcluded(retry scheduled, budget spent)",
            concluded("phase-1", Ending::RetriedOverBudget),
        ),
        (
            "AttemptConcluded(complete, no usage reported)",
            concluded("phase-1", Ending::CompleteUnreported),
        ),
        ("RetryDue", RunInput::RetryDue),
        (
            "AcceptanceRecorded(ok)",
            RunInput::AcceptanceRecorded(Ok(())),
        ),
        (
            "AcceptanceRecorded(failed)",
            RunInput::AcceptanceRecorded(Err(StateWriteError::Stopped)),
        ),
        ("Signal", RunInput::Signal(15)),
        ("InputFailed", RunInput::InputFailed(BadInput)),
        (
            "ActorFailed",
            RunInput::ActorFailed {
                message: "boom".into(),
                attempt_may_be_unresolved: false,
            },
        ),
    ]
}

/// The stage × input table, as published in docs/lifecycle-tables.md: for each stage, every
/// input that changes the loop or has an effect.
fn run_table() -> String {
    let mut table = String::from("| Stage | Input | Next stage | Effects |\n|---|---|---|---|\n");
    for stage in 0..stages().len() {
        for index in 0..inputs().len() {
            // Inputs carry errors and are not `Clone`: build each pair afresh.
            let (stage_name, leading) = stages().swap_remove(stage);
            let (input_name, input) = inputs().swap_remove(index);
            let (machine, _) = run(rules(None), leading);
            let mut after = machine.clone();
            let effects = after.handle(input);
            if after == machine && effects.is_empty() {
                continue;
            }
            let names: Vec<String> = effects.iter().map(effect_name).collect();
            table.push_str(&format!(
                "| {stage_name} | {input_name} | {} | {} |\n",
                after.stage().name(),
                if names.is_empty() {
                    "–".to_owned()
                } else {
                    names.join(", ")
                },
            ));
        }
    }
    table
}

#[test]
fn the_published_table_is_the_machine() {
    crate::domain::lifecycle::published_tables::check("run loop", &run_table());
}

#[test]
fn every_stage_instance_is_the_stage_it_claims() {
    let names: Vec<&str> = stages()
        .into_iter()
        .map(|(_, leading)| run(rules(None), leading).0.stage().name())
        .collect();
    assert_eq!(
        names,
        [
            "admitting",
            "checking plan",
            "reserving",
            "attempting",
            "waiting",
            "accepting",
            "finished"
        ]
    );
}

#[test]
fn the_first_launch_needs_no_plan_check_and_later_ones_do() {
    let (_, effects) = run(rules(None), [next("phase-1"), RunInput::WorkspaceReserved]);
    let names: Vec<String> = effects.iter().map(effect_name).collect();
    assert_eq!(names, ["reserve phase-1", "launch phase-1"]);
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            concluded("phase-1", Ending::Complete),
            RunInput::PlanChecked(PlanCheck::Unchanged),
            RunInput::WorkspaceReserved,
        ],
    );
    let names: Vec<String> = effects.iter().map(effect_name).collect();
    assert_eq!(
        names,
        [
            "reserve phase-1",
            "launch phase-1",
            "release workspace",
            "check plan",
            "reserve phase-2",
            "launch phase-2"
        ]
    );
}

#[test]
fn completion_is_reported_after_a_plan_check() {
    // phase-1 is complete in the state this run was admitted with.
    let mut machine = RunLoop::new(rules(None));
    machine.handle::<BadInput>(RunInput::Admitted(Box::new(Admitted {
        admission: Admission {
            accept: None,
            first: FirstSelection::Next {
                phase_id: "phase-2".into(),
            },
        },
        completed_phase_ids: vec!["phase-1".into()],
        last_run: None,
        verification_failure: None,
        spent_before: Spent::default(),
        reported_usage: None,
    })));
    machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    let effects = machine.handle(concluded("phase-2", Ending::Complete));
    assert_eq!(
        effects.iter().map(effect_name).collect::<Vec<_>>(),
        ["release workspace", "check plan"]
    );
    assert_eq!(
        machine.stage(),
        &Stage::CheckingPlan {
            target: Target::AllComplete
        }
    );
    let effects = machine.handle(RunInput::<BadInput>::PlanChecked(PlanCheck::Unchanged));
    assert!(matches!(finish(&effects), Some(RunEnd::AllComplete)));
}

#[test]
fn phases_run_in_plan_order_after_the_first_selection() {
    let (machine, effects) = run(
        rules(None),
        [
            admitted(
                FirstSelection::RetryStopped {
                    phase_id: "phase-2".into(),
                },
                false,
            ),
            RunInput::WorkspaceReserved,
            concluded("phase-2", Ending::Complete),
        ],
    );
    assert_eq!(launches(&effects), ["phase-2"]);
    assert_eq!(
        machine.stage(),
        &Stage::CheckingPlan {
            target: Target::Launch {
                phase_id: "phase-1".into(),
                resolve_abandoned: false
            }
        }
    );
}

#[test]
fn the_phase_limit_stops_only_while_phases_remain() {
    let (_, effects) = run(
        rules(Some(1)),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            concluded("phase-1", Ending::Complete),
            RunInput::PlanChecked(PlanCheck::Unchanged),
        ],
    );
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::PhaseLimitReached { last_completed }) if last_completed == "phase-1"
    ));
    let (_, effects) = run(
        rules(Some(1)),
        [
            next("phase-2"),
            admitted(FirstSelection::AllComplete, false),
        ],
    );
    assert!(finish(&effects).is_none(), "a second admission is ignored");
}

#[test]
fn a_stopped_phase_ends_the_run_with_its_exit_code() {
    for (ending, code) in [
        (Ending::Blocked, 2),
        (Ending::Failed, 4),
        (Ending::NotPrepared, 4),
        (Ending::Unresolved, 4),
    ] {
        let (_, effects) = run(
            rules(None),
            [
                next("phase-1"),
                RunInput::WorkspaceReserved,
                concluded("phase-1", ending),
            ],
        );
        assert_eq!(
            finish(&effects).map(|end| end.exit_code().code()),
            Some(code),
            "{ending:?}"
        );
    }
}

#[test]
fn a_signal_during_an_attempt_is_forwarded_and_decides_the_exit_code() {
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            RunInput::Signal(2),
            RunInput::Signal(15),
            concluded("phase-1", Ending::Blocked),
        ],
    );
    let names: Vec<String> = effects.iter().map(effect_name).collect();
    assert_eq!(
        names[2..],
        [
            "forward interrupt",
            "forward interrupt",
            "release workspace",
            "finish: phase stopped (130)"
        ]
    );
    let end = finish(&effects).unwrap();
    assert_eq!(end.signal_after_decision(), Some(2));
}

#[test]
fn an_interrupted_outcome_is_not_a_signal_after_the_decision() {
    let mut machine = RunLoop::new(rules(None));
    machine.handle::<BadInput>(next("phase-1"));
    machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    machine.handle::<BadInput>(RunInput::Signal(15));
    let effects = machine.handle::<BadInput>(RunInput::AttemptConcluded(Box::new(AttemptReport {
        phase_id: "phase-1".into(),
        attempt_id: "a".into(),
        end: AttemptEnd::Committed {
            decision: decision(AttemptStatus::Interrupted),
            outcome_path: "/o".into(),
            transcript_path: "/t".into(),
            retry: None,
            failed_check: None,
            usage: Box::new(UsageSummary::unknown()),
            budget_note: None,
        },
    })));
    let end = finish(&effects).unwrap();
    assert_eq!(end.exit_code(), ExitCode::Signal(15));
    assert_eq!(end.signal_after_decision(), None);
}

#[test]
fn a_signal_between_steps_launches_nothing_more() {
    // Caught while the workspace is being reserved: nothing is launched.
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::Signal(15),
            RunInput::WorkspaceReserved,
        ],
    );
    assert!(launches(&effects).is_empty());
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::InterruptedBeforeLaunch {
            signal: 15,
            plan_complete: false
        })
    ));
    // Caught during admission: the first checkpoint stops.
    let (_, effects) = run(rules(None), [RunInput::Signal(2), next("phase-1")]);
    assert!(launches(&effects).is_empty());
    assert_eq!(
        finish(&effects).map(|end| end.exit_code().code()),
        Some(130)
    );
    // A refused run stays refused: nothing was admitted.
    let (_, effects) = run(
        rules(None),
        [
            RunInput::Signal(2),
            RunInput::Refused(Box::new(RefusedRun {
                refusal: Refusal::PlanPathMismatch {
                    stored: "/a".into(),
                    actual: "/b".into(),
                },
                plan_workspace: "/w".into(),
                execution_workspace: None,
                last_run: None,
                lifted_by: None,
            })),
        ],
    );
    assert_eq!(finish(&effects).map(|end| end.exit_code().code()), Some(5));
    // Caught after the last commit, during the plan check: the plan is complete.
    let (_, effects) = run(
        rules(None),
        [
            next("phase-2"),
            RunInput::WorkspaceReserved,
            RunInput::Signal(2),
            concluded("phase-2", Ending::Complete),
        ],
    );
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::InterruptedBeforeLaunch {
            signal: 2,
            plan_complete: false
        })
    ));
}

#[test]
fn a_plan_change_at_a_checkpoint_launches_nothing() {
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            concluded("phase-1", Ending::Complete),
            RunInput::PlanChecked(PlanCheck::Changed(PlanChange {
                path: "/w/plan.md".into(),
                expected: "ab".into(),
                actual: "cd".into(),
            })),
        ],
    );
    assert_eq!(launches(&effects), ["phase-1"]);
    assert!(matches!(finish(&effects), Some(RunEnd::PlanChanged(_))));
    assert_eq!(finish(&effects).unwrap().exit_code().code(), 5);
}

#[test]
fn a_scheduled_retry_is_awaited_then_launched_with_its_turn() {
    let mut machine = RunLoop::new(rules(None));
    machine.handle::<BadInput>(next("phase-1"));
    machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    let effects = machine.handle::<BadInput>(concluded("phase-1", Ending::Retried));
    assert_eq!(
        effects.iter().map(effect_name).collect::<Vec<_>>(),
        ["release workspace", "await retry"]
    );
    let effects = machine.handle::<BadInput>(RunInput::RetryDue);
    assert_eq!(
        effects.iter().map(effect_name).collect::<Vec<_>>(),
        ["end wait", "check plan"]
    );
    machine.handle::<BadInput>(RunInput::PlanChecked(PlanCheck::Unchanged));
    let effects = machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    let [RunEffect::Launch(order)] = effects.as_slice() else {
        panic!("not launched: {effects:?}");
    };
    assert_eq!(order.phase_id, "phase-1");
    assert_eq!(order.ledger.attempt, 2);
    let note = order.note.as_ref().expect("a retry note");
    assert_eq!(note.attempt, 2);
    assert_eq!(note.of, 3);
    assert_eq!(note.earlier.len(), 1);
    assert_eq!(note.earlier[0].status, "missing-marker");
}

#[test]
fn a_signal_during_a_retry_wait_ends_the_run_at_once() {
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            concluded("phase-1", Ending::Retried),
            RunInput::Signal(2),
        ],
    );
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::InterruptedDuringWait { signal: 2, phase_id }) if phase_id == "phase-1"
    ));
    // A signal during the attempt wins over the retry it scheduled.
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            RunInput::Signal(15),
            concluded("phase-1", Ending::Retried),
        ],
    );
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::PhaseStopped {
            retry_scheduled: true,
            signal: Some(15),
            ..
        })
    ));
}

#[test]
fn a_resumed_schedule_is_awaited_first_with_the_stopped_attempt_as_its_history() {
    let mut machine = RunLoop::new(rules(None));
    let effects = machine.handle::<BadInput>(RunInput::Admitted(Box::new(Admitted {
        admission: Admission {
            accept: Some(record()),
            first: FirstSelection::ResumeSchedule(Box::new(schedule("phase-2", 2))),
        },
        completed_phase_ids: vec!["phase-1".into()],
        last_run: Some(LastRun {
            run_id: "earlier".into(),
            phase_id: "phase-2".into(),
            status: AttemptStatus::MissingMarker,
            started_at: at(),
            finished_at: at(),
            exit_code: 4,
            execution_workspace: "/w".into(),
            prompt_path: "/w/p".into(),
            transcript_path: "/w/t".into(),
            outcome_path: Some("/w/o".into()),
            summary: "no marker".into(),
        }),
        verification_failure: None,
        spent_before: Spent::default(),
        reported_usage: None,
    })));
    let [RunEffect::AwaitRetry { resumed, .. }] = effects.as_slice() else {
        panic!("no wait: {effects:?}");
    };
    assert!(resumed);
    machine.handle::<BadInput>(RunInput::RetryDue);
    let effects = machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    let [RunEffect::Launch(order)] = effects.as_slice() else {
        panic!("not launched: {effects:?}");
    };
    assert_eq!(
        order.accept,
        Some(record()),
        "the acceptance goes with the first write"
    );
    let note = order.note.as_ref().unwrap();
    assert_eq!(note.earlier[0].attempt_id, "earlier");
}

#[test]
fn an_acceptance_with_nothing_to_run_is_recorded_on_its_own() {
    let (_, effects) = run(
        rules(None),
        [
            admitted(FirstSelection::AllComplete, true),
            RunInput::AcceptanceRecorded(Ok(())),
        ],
    );
    let names: Vec<String> = effects.iter().map(effect_name).collect();
    assert_eq!(names, ["record acceptance", "finish: all complete (0)"]);
    let (_, effects) = run(
        rules(None),
        [
            admitted(FirstSelection::AllComplete, true),
            RunInput::AcceptanceRecorded(Err(StateWriteError::Stopped)),
        ],
    );
    assert_eq!(finish(&effects).map(|end| end.exit_code().code()), Some(4));
    let (_, effects) = run(
        rules(None),
        [
            admitted(FirstSelection::AllComplete, true),
            RunInput::Signal(15),
            RunInput::AcceptanceRecorded(Ok(())),
        ],
    );
    assert!(matches!(
        finish(&effects),
        Some(RunEnd::InterruptedBeforeLaunch {
            signal: 15,
            plan_complete: true
        })
    ));
}

#[test]
fn a_retried_abandoned_attempt_is_resolved_in_its_prepared_write() {
    let (_, effects) = run(
        rules(None),
        [
            admitted(
                FirstSelection::RetryAbandoned(Box::new(attempt("phase-2"))),
                true,
            ),
            RunInput::WorkspaceReserved,
        ],
    );
    let launch = effects.iter().find_map(|effect| match effect {
        RunEffect::Launch(order) => Some(order),
        _ => None,
    });
    let order = launch.expect("launched");
    assert_eq!(order.phase_id, "phase-2");
    assert!(order.resolve_abandoned);
    assert_eq!(order.accept, Some(record()));
}

#[test]
fn nothing_happens_once_finished() {
    let mut machine = RunLoop::new(rules(None));
    machine.handle::<BadInput>(RunInput::InputFailed(BadInput));
    for (_, input) in inputs() {
        assert!(machine.handle(input).is_empty());
    }
}

/// What the random world does next.
#[derive(Clone, Debug)]
enum Step {
    /// Answer the oldest open request, choosing among its answers with the number.
    Answer(u8),
    Signal(i32),
    ActorFailed,
    /// An input nobody asked for (stale or duplicate).
    Stray(u8),
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => any::<u8>().prop_map(Step::Answer),
        2 => prop::sample::select(vec![1, 2, 3, 15]).prop_map(Step::Signal),
        1 => Just(Step::ActorFailed),
        2 => any::<u8>().prop_map(Step::Stray),
    ]
}

fn any_first() -> impl Strategy<Value = (FirstSelection, bool)> {
    (
        prop_oneof![
            Just(FirstSelection::Next {
                phase_id: "phase-1".into()
            }),
            Just(FirstSelection::RetryStopped {
                phase_id: "phase-2".into()
            }),
            Just(FirstSelection::RetryAbandoned(Box::new(attempt("phase-1")))),
            Just(FirstSelection::ResumeSchedule(Box::new(schedule(
                "phase-1", 2
            )))),
            Just(FirstSelection::AllComplete),
        ],
        any::<bool>(),
    )
}

/// An open request of the loop, and the input answering it with `choice`.
fn answer(request: &RunEffect<BadInput>, choice: u8) -> Option<RunInput<BadInput>> {
    Some(match request {
        RunEffect::CheckPlan => match choice % 6 {
            0 => RunInput::PlanChecked(PlanCheck::Changed(PlanChange {
                path: "/p".into(),
                expected: "a".into(),
                actual: "b".into(),
            })),
            1 => RunInput::InputFailed(BadInput),
            _ => RunInput::PlanChecked(PlanCheck::Unchanged),
        },
        RunEffect::ReserveWorkspace { .. } => match choice % 8 {
            0 => RunInput::InputFailed(BadInput),
            _ => RunInput::WorkspaceReserved,
        },
        RunEffect::Launch(order) => {
            let ending = [
                Ending::Complete,
                Ending::Complete,
                Ending::Complete,
                Ending::Retried,
                Ending::Retried,
                Ending::Blocked,
                Ending::Failed,
                Ending::NotPrepared,
                Ending::Unresolved,
                Ending::CheckFailed,
                Ending::RetriedOverBudget,
                Ending::CompleteUnreported,
            ][usize::from(choice) % 12];
            concluded(&order.phase_id, ending)
        }
        RunEffect::AwaitRetry { .. } => RunInput::RetryDue,
        RunEffect::RecordAcceptance(_) => match choice % 4 {
            0 => RunInput::AcceptanceRecorded(Err(StateWriteError::Stopped)),
            _ => RunInput::AcceptanceRecorded(Ok(())),
        },
        RunEffect::ForwardInterrupt(_)
        | RunEffect::WarnBudgetUnenforceable(_)
        | RunEffect::ReleaseWorkspace
        | RunEffect::EndWait { .. }
        | RunEffect::Finish(_) => return None,
    })
}

/// The launch order among `effects`.
fn launch_order(effects: &Effects) -> &LaunchOrder {
    effects
        .iter()
        .find_map(|effect| match effect {
            RunEffect::Launch(order) => Some(order.as_ref()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no launch in {effects:?}"))
}

#[test]
fn a_retry_after_a_failed_check_is_told_which_and_the_attempt_after_it_is_not() {
    let (mut machine, _) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            concluded("phase-1", Ending::CheckFailed),
            RunInput::RetryDue,
            RunInput::PlanChecked(PlanCheck::Unchanged),
        ],
    );
    let effects = machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    let order = launch_order(&effects);
    assert_eq!(order.verification_failure, Some(failed_check(1)));
    assert!(order.note.is_some(), "a retry");
    // That retry failed otherwise: its own retry is not told about the old check.
    for input in [
        concluded("phase-1", Ending::Retried),
        RunInput::RetryDue,
        RunInput::PlanChecked(PlanCheck::Unchanged),
    ] {
        machine.handle::<BadInput>(input);
    }
    let effects = machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    assert_eq!(launch_order(&effects).verification_failure, None);
}

#[test]
fn a_stopped_phase_retried_later_is_told_its_failed_check() {
    let last_run = |phase_id: &str| LastRun {
        run_id: "earlier".into(),
        phase_id: phase_id.into(),
        status: AttemptStatus::VerificationFailed,
        started_at: at(),
        finished_at: at(),
        exit_code: 4,
        execution_workspace: "/w".into(),
        prompt_path: "/w/p".into(),
        transcript_path: "/w/t".into(),
        outcome_path: Some("/w/o".into()),
        summary: "done".into(),
    };
    let told = |first: FirstSelection, last: &str| {
        let (_, effects) = run(
            rules(None),
            [
                RunInput::Admitted(Box::new(Admitted {
                    admission: Admission {
                        accept: None,
                        first,
                    },
                    completed_phase_ids: Vec::new(),
                    last_run: Some(last_run(last)),
                    verification_failure: Some(failed_check(2)),
                    spent_before: Spent::default(),
                    reported_usage: None,
                })),
                RunInput::RetryDue,
                RunInput::WorkspaceReserved,
            ],
        );
        launch_order(&effects).verification_failure.clone()
    };
    let retry_stopped = || FirstSelection::RetryStopped {
        phase_id: "phase-1".into(),
    };
    assert_eq!(told(retry_stopped(), "phase-1"), Some(failed_check(2)));
    assert_eq!(
        told(
            FirstSelection::ResumeSchedule(Box::new(schedule("phase-1", 2))),
            "phase-1"
        ),
        Some(failed_check(2))
    );
    // Another phase's failure, or an abandoned attempt in between, is not this attempt's.
    assert_eq!(told(retry_stopped(), "phase-2"), None);
    assert_eq!(
        told(
            FirstSelection::RetryAbandoned(Box::new(attempt("phase-1"))),
            "phase-1"
        ),
        None
    );
}

#[test]
fn a_failed_check_stops_the_run_with_exit_4_and_names_the_check() {
    let (_, effects) = run(
        rules(None),
        [
            next("phase-1"),
            RunInput::WorkspaceReserved,
            RunInput::AttemptConcluded(Box::new(AttemptReport {
                phase_id: "phase-1".into(),
                attempt_id: "a".into(),
                end: AttemptEnd::Committed {
                    decision: decision(AttemptStatus::VerificationFailed),
                    outcome_path: "/o".into(),
                    transcript_path: "/t".into(),
                    retry: None,
                    failed_check: Some(Box::new(failed_check(1))),
                    usage: Box::new(UsageSummary::unknown()),
                    budget_note: None,
                },
            })),
        ],
    );
    let end = finish(&effects).unwrap();
    assert_eq!(end.exit_code(), ExitCode::AgentFailed);
    assert!(matches!(
        end,
        RunEnd::PhaseStopped { failed_check: Some(check), .. } if check.index == 1
    ));
}

fn stray(choice: u8) -> RunInput<BadInput> {
    match choice % 5 {
        0 => RunInput::RetryDue,
        1 => RunInput::WorkspaceReserved,
        2 => RunInput::PlanChecked(PlanCheck::Unchanged),
        3 => concluded("phase-1", Ending::Complete),
        _ => RunInput::AcceptanceRecorded(Ok(())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Against any world: at most one finish, nothing after it; no launch after a signal or a
    /// changed plan; a signal (after admission, unless an actor failed) ends the run with 128
    /// + the first signal; every concluded attempt releases its workspace; a phase runs again
    /// only after its attempt scheduled a retry, so retries never exceed what was scheduled;
    /// and a world that answers everything always gets a finish.
    #[test]
    fn whole_runs_keep_every_rule(
        (first, accept) in any_first(),
        max_phases in prop::option::of(1u64..3),
        steps in prop::collection::vec(any_step(), 0..60),
    ) {
        let mut machine = RunLoop::new(rules(max_phases));
        let mut open: Vec<RunEffect<BadInput>> = Vec::new();
        let mut all: Vec<String> = Vec::new();
        let mut first_signal = None;
        let mut plan_changed = false;
        let mut finished: Option<(String, i32)> = None;
        let mut actor_failed = false;
        let mut retries_scheduled = 0usize;
        let mut launched: Vec<String> = Vec::new();
        let mut last_retry_for: Option<String> = None;
        let mut last_failed_check_for: Option<String> = None;
        let admission = admitted(first, accept);
        let mut queue: Vec<RunInput<BadInput>> = vec![admission];
        let mut steps = steps.into_iter();
        loop {
            let input = if let Some(input) = queue.pop() {
                input
            } else if let Some(step) = steps.next() {
                match step {
                    Step::Answer(choice) => {
                        let Some(position) = open.iter().position(|request| answer(request, choice).is_some()) else { continue };
                        let request = open.remove(position);
                        answer(&request, choice).unwrap()
                    }
                    Step::Signal(signal) => RunInput::Signal(signal),
                    Step::ActorFailed => RunInput::ActorFailed { message: "x".into(), attempt_may_be_unresolved: false },
                    Step::Stray(choice) => stray(choice),
                }
            } else if let Some(position) = open.iter().position(|request| answer(request, 7).is_some()) {
                // The world answers whatever is still open, so the run can end.
                let request = open.remove(position);
                answer(&request, 7).unwrap()
            } else {
                break;
            };
            match &input {
                RunInput::Signal(signal) if machine.stage() != &Stage::Finished => {
                    first_signal.get_or_insert(*signal);
                }
                RunInput::PlanChecked(PlanCheck::Changed(_)) if matches!(machine.stage(), Stage::CheckingPlan { .. }) => plan_changed = true,
                RunInput::ActorFailed { .. } if machine.stage() != &Stage::Finished => actor_failed = true,
                _ => {}
            }
            let concluded_in_attempt = match (&input, machine.stage()) {
                (RunInput::AttemptConcluded(report), Stage::Attempting { phase_id }) => report.phase_id == *phase_id,
                _ => false,
            };
            if concluded_in_attempt && let RunInput::AttemptConcluded(report) = &input {
                last_failed_check_for = match &report.end {
                    AttemptEnd::Committed { failed_check: Some(_), .. } => Some(report.phase_id.clone()),
                    _ => None,
                };
                last_retry_for = match &report.end {
                    AttemptEnd::Committed { retry: Some(_), .. } => {
                        retries_scheduled += 1;
                        Some(report.phase_id.clone())
                    }
                    _ => None,
                };
            }
            let admitted_before = machine.stage() != &Stage::Admitting;
            let effects = machine.handle(input);
            prop_assert!(finished.is_none() || effects.is_empty(), "effects after the finish: {effects:?}");
            if concluded_in_attempt {
                prop_assert!(matches!(effects.first(), Some(RunEffect::ReleaseWorkspace)), "{effects:?}");
            }
            for effect in effects {
                all.push(effect_name(&effect));
                match &effect {
                    RunEffect::Launch(order) => {
                        prop_assert!(first_signal.is_none() || !admitted_before, "launched after a signal: {all:?}");
                        prop_assert!(caps().reached(order.spent_before).is_none(), "launched with the budget spent: {all:?}");
                        prop_assert!(!plan_changed, "launched after a plan change: {all:?}");
                        // A failed check is told to exactly the phase's next attempt.
                        prop_assert_eq!(
                            order.verification_failure.is_some(),
                            last_failed_check_for.as_deref() == Some(order.phase_id.as_str()),
                            "a failed check told to the wrong attempt: {:?}", all
                        );
                        if launched.contains(&order.phase_id) && order.note.is_some() {
                            prop_assert_eq!(last_retry_for.as_deref(), Some(order.phase_id.as_str()), "a retry nobody scheduled: {:?}", all);
                        }
                        launched.push(order.phase_id.clone());
                    }
                    RunEffect::Finish(end) => {
                        let code = end.exit_code().code();
                        let refused_before_admission = !admitted_before
                            && matches!(end.as_ref(), RunEnd::Refused(_) | RunEnd::Input(_));
                        if let (Some(signal), false, false) = (first_signal, actor_failed, refused_before_admission) {
                            prop_assert_eq!(code, 128 + signal, "a signal decides the exit code: {:?}", all);
                        }
                        if plan_changed && first_signal.is_none() && !actor_failed {
                            prop_assert_eq!(code, 5);
                        }
                        finished = Some((end_name(end).to_owned(), code));
                    }
                    _ => {}
                }
                if answer(&effect, 0).is_some() {
                    open.push(effect);
                }
            }
            if finished.is_some() {
                break;
            }
        }
        prop_assert!(finished.is_some(), "the run never finished: {all:?}");
        let relaunches = launched.len()
            - launched.iter().collect::<std::collections::BTreeSet<_>>().len();
        prop_assert!(relaunches <= retries_scheduled, "retries beyond the schedule: {all:?}");
    }
}

/// The caps count the whole plan: what the recorded attempts spent is where a later
/// invocation starts, so one that has reached a cap launches nothing, and one below it hands
/// the total on to the attempt's own check.
#[test]
fn the_budget_starts_from_what_the_plan_has_spent() {
    let admitted_with = |tokens: u64| {
        RunInput::<BadInput>::Admitted(Box::new(Admitted {
            admission: Admission {
                accept: None,
                first: FirstSelection::Next {
                    phase_id: "phase-1".into(),
                },
            },
            completed_phase_ids: Vec::new(),
            last_run: None,
            verification_failure: None,
            spent_before: Spent {
                tokens,
                cost_micros: 0,
            },
            reported_usage: Some("a-1".into()),
        }))
    };
    let mut machine = RunLoop::new(rules(None));
    let effects = machine.handle(admitted_with(1000));
    assert!(
        matches!(
            effects.as_slice(),
            [RunEffect::Finish(end)] if matches!(**end, RunEnd::BudgetReached { .. })
        ),
        "{effects:?}"
    );
    let mut machine = RunLoop::new(rules(None));
    machine.handle(admitted_with(400));
    let effects = machine.handle::<BadInput>(RunInput::WorkspaceReserved);
    assert_eq!(launch_order(&effects).spent_before.tokens, 400);
}
