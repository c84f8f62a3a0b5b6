//! Tests of the attempt lifecycle: the stage × event table (published in
//! docs/lifecycle-tables.md), the rules one by one, and properties over random event sequences.

use proptest::prelude::*;

use super::*;
use crate::domain::budget::{BudgetConfig, CapKind};
use crate::domain::decision::Decision;
use crate::domain::marker::{ResultBlock, ResultKind};
use crate::domain::stop_regex::{PatternKind, StopMatch};
use crate::domain::token_usage::report::parse_usage_report;
use crate::domain::verification::{CheckRecord, FailedCheck, Interpreter};

impl AttemptLifecycle {
    /// An attempt of a phase without checks, with no budget cap.
    fn new() -> Self {
        Self::configured(VerifyPlan::None, BudgetCaps::default(), Spent::default())
    }

    /// An attempt whose completion is held to `verify`, with no budget cap.
    fn verified_by(verify: VerifyPlan) -> Self {
        Self::configured(verify, BudgetCaps::default(), Spent::default())
    }

    /// An attempt of a phase without checks, of an invocation with these caps, whose
    /// committed attempts spent `spent_before`.
    fn with_budget(budget: BudgetCaps, spent_before: Spent) -> Self {
        Self::configured(VerifyPlan::None, budget, spent_before)
    }

    fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }
}

const COMPLETE: ChildExit = ChildExit {
    code: Some(0),
    signal: None,
};

fn complete_verdict() -> MarkerVerdict {
    MarkerVerdict::Result(ResultBlock {
        kind: ResultKind::Complete,
        text: "done".into(),
    })
}

fn after(events: impl IntoIterator<Item = AttemptEvent>) -> AttemptLifecycle {
    after_in(AttemptLifecycle::new(), events)
}

fn after_in(
    mut lifecycle: AttemptLifecycle,
    events: impl IntoIterator<Item = AttemptEvent>,
) -> AttemptLifecycle {
    for event in events {
        lifecycle.handle(event);
    }
    lifecycle
}

/// `count` Verify checks: `check 1`, `check 2`, …
fn checks(count: usize) -> Vec<VerifyCheck> {
    (1..=count)
        .map(|index| VerifyCheck {
            index,
            interpreter: Interpreter::Sh,
            script: format!("check {index}\n"),
            line: 10 * index,
        })
        .collect()
}

/// An attempt of a phase with `count` checks.
fn with_checks(count: usize) -> AttemptLifecycle {
    AttemptLifecycle::verified_by(VerifyPlan::Run(checks(count)))
}

/// How a check ended: exit `code`, or killed by `signal` when `code` is `None`.
fn check_outcome(code: Option<i32>) -> CheckOutcome {
    CheckOutcome {
        exit_code: code,
        signal: code.is_none().then_some(15),
        timed_out: false,
        duration_ms: 3,
        output_bytes: 4,
        output_tail: "tail".into(),
    }
}

fn check_ended(code: Option<i32>) -> AttemptEvent {
    AttemptEvent::CheckEnded(check_outcome(code))
}

/// A normal exit with both pipes closed and the group swept: the attempt is recording.
fn to_recording() -> [AttemptEvent; 7] {
    [
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
        emptied(),
        AttemptEvent::NotificationsDrained,
    ]
}

fn blocked_verdict() -> MarkerVerdict {
    MarkerVerdict::Result(ResultBlock {
        kind: ResultKind::Blocked,
        text: "need keys".into(),
    })
}

fn ended(stream: OutputStream) -> AttemptEvent {
    AttemptEvent::StreamEnded {
        stream,
        error: None,
    }
}

fn interrupt(signal: i32) -> AttemptEvent {
    AttemptEvent::Interrupt { signal }
}

fn deadline() -> AttemptEvent {
    AttemptEvent::DeadlinesPassed {
        timeout: Some(1.0),
        idle: None,
    }
}

fn idle_stop() -> IdleStop {
    IdleStop {
        seconds: 2.0,
        summary: "no output, notification or activity for 2 s (idle timeout)".into(),
    }
}

fn idle_deadline() -> AttemptEvent {
    AttemptEvent::DeadlinesPassed {
        timeout: None,
        idle: Some(idle_stop()),
    }
}

/// A usage report of `tokens` input tokens.
fn usage(tokens: u64, is_final: bool) -> AttemptEvent {
    let report = parse_usage_report(&format!(
        "{{\"input_tokens\": {tokens}, \"final\": {is_final}}}"
    ))
    .expect("valid report");
    AttemptEvent::UsageReported(report)
}

/// An invocation with `--max-tokens 100` that has spent `spent` tokens before this attempt.
fn cap_100_tokens() -> BudgetCaps {
    BudgetCaps::effective(Some(100), None, &BudgetConfig::default())
}

fn verified_and_budgeted() -> AttemptLifecycle {
    AttemptLifecycle::configured(
        VerifyPlan::Run(checks(2)),
        cap_100_tokens(),
        Spent::default(),
    )
}

fn budgeted(spent: u64) -> AttemptLifecycle {
    AttemptLifecycle::with_budget(
        cap_100_tokens(),
        Spent {
            tokens: spent,
            cost_micros: 0,
        },
    )
}

fn matched(kind: PatternKind, pattern: &str) -> StopMatch {
    StopMatch {
        index: 0,
        pattern: pattern.into(),
        kind,
    }
}

fn pattern(kind: PatternKind, pattern: &str) -> AttemptEvent {
    AttemptEvent::StopRegexMatched(matched(kind, pattern))
}

fn gathered(verdict: MarkerVerdict) -> AttemptEvent {
    AttemptEvent::Gathered(Gathered {
        trailer_error: None,
        final_match: None,
        verdict,
    })
}

/// The conclusion a commit effect among `effects` carries.
fn committed(effects: &[AttemptEffect]) -> &Conclusion {
    effects
        .iter()
        .find_map(|effect| match effect {
            AttemptEffect::Commit(conclusion) => Some(conclusion),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no commit in {effects:?}"))
}

fn emptied() -> AttemptEvent {
    AttemptEvent::GroupEmptied(GroupReport::default())
}

/// One instance of every stage, reached through the events that lead there; the phase has
/// two Verify checks, the invocation `--max-tokens 100` and nothing spent before.
fn stages() -> Vec<(&'static str, AttemptLifecycle)> {
    let at = |events: &[AttemptEvent]| after_in(verified_and_budgeted(), events.iter().cloned());
    vec![
        ("Preparing", verified_and_budgeted()),
        // The running record is still being written here; in the later stages it is durable.
        ("Running", at(&[AttemptEvent::Launched])),
        (
            "Sweeping",
            at(&[
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                AttemptEvent::LeaderExited(COMPLETE),
            ]),
        ),
        (
            "Stopping",
            at(&[
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                deadline(),
            ]),
        ),
        (
            "Draining",
            at(&[
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                deadline(),
                emptied(),
            ]),
        ),
        ("Recording", at(&to_recording())),
        // The first check runs.
        ("Verifying", {
            let mut verifying = at(&to_recording());
            verifying.handle(gathered(complete_verdict()));
            verifying
        }),
        ("Done", {
            let mut done = at(&[AttemptEvent::PreparedRecordFailed]);
            done.handle(AttemptEvent::Launched);
            done
        }),
    ]
}

/// One instance of every event.
fn events() -> Vec<(&'static str, AttemptEvent)> {
    vec![
        ("PreparedRecordFailed", AttemptEvent::PreparedRecordFailed),
        (
            "SetupFailed",
            AttemptEvent::SetupFailed {
                detail: "disk full".into(),
            },
        ),
        (
            "LaunchFailed",
            AttemptEvent::LaunchFailed {
                summary: "could not launch".into(),
            },
        ),
        ("Launched", AttemptEvent::Launched),
        (
            "Unprotected",
            AttemptEvent::Unprotected {
                detail: "no watchdog".into(),
            },
        ),
        ("RunningRecorded", AttemptEvent::RunningRecorded),
        (
            "RunningRecordFailed",
            AttemptEvent::RunningRecordFailed {
                detail: "disk full".into(),
            },
        ),
        ("LeaderExited", AttemptEvent::LeaderExited(COMPLETE)),
        ("StreamEnded(stdout)", ended(OutputStream::Stdout)),
        (
            "StreamEnded(error)",
            AttemptEvent::StreamEnded {
                stream: OutputStream::Stderr,
                error: Some("read failed".into()),
            },
        ),
        (
            "StopRegexMatched(stop regex)",
            pattern(PatternKind::StopRegex, "FATAL"),
        ),
        (
            "StopRegexMatched(rate limit)",
            pattern(PatternKind::RateLimit, "429"),
        ),
        ("DeadlinesPassed(timeout)", deadline()),
        ("DeadlinesPassed(idle)", idle_deadline()),
        (
            "DeadlinesPassed(both)",
            AttemptEvent::DeadlinesPassed {
                timeout: Some(1.0),
                idle: Some(idle_stop()),
            },
        ),
        ("UsageReported(running, cap reached)", usage(150, false)),
        ("UsageReported(final, cap reached)", usage(150, true)),
        (
            "UsageRejected",
            AttemptEvent::UsageRejected(UsageReportError("not JSON".into())),
        ),
        ("NotificationsDrained", AttemptEvent::NotificationsDrained),
        ("Interrupt", interrupt(2)),
        (
            "Failed(output)",
            AttemptEvent::Failed(ExecutionFailure::Output {
                detail: "write failed".into(),
            }),
        ),
        ("GroupEmptied", emptied()),
        (
            "TimerElapsed(leak grace)",
            AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace),
        ),
        (
            "TimerElapsed(drain limit)",
            AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit),
        ),
        ("Gathered", gathered(complete_verdict())),
        (
            "Gathered(trailer failed, final match)",
            AttemptEvent::Gathered(Gathered {
                trailer_error: Some("write failed".into()),
                final_match: Some(matched(PatternKind::StopRegex, "done$")),
                verdict: complete_verdict(),
            }),
        ),
        (
            "Gathered(final rate-limit match)",
            AttemptEvent::Gathered(Gathered {
                trailer_error: None,
                final_match: Some(matched(PatternKind::RateLimit, "429$")),
                verdict: complete_verdict(),
            }),
        ),
        ("Gathered(blocked)", gathered(blocked_verdict())),
        ("CheckEnded(passed)", check_ended(Some(0))),
        ("CheckEnded(failed)", check_ended(Some(1))),
    ]
}

fn effect_name(effect: &AttemptEffect) -> &'static str {
    match effect {
        AttemptEffect::CancelDeadlines => "cancel deadlines",
        AttemptEffect::BoundConsole => "bound console",
        AttemptEffect::TerminateGroup => "terminate group",
        AttemptEffect::KillNow => "kill now",
        AttemptEffect::StartTimer(AttemptTimer::LeakGrace) => "start timer: leak grace",
        AttemptEffect::SweepAfterExit => "sweep after exit",
        AttemptEffect::StartTimer(AttemptTimer::DrainLimit) => "start timer: drain limit",
        AttemptEffect::DrainNotifications => "drain notifications",
        AttemptEffect::CloseReaders => "close readers",
        AttemptEffect::Gather(_) => "gather",
        AttemptEffect::Commit(_) => "commit",
        AttemptEffect::LeaveUnresolved { .. } => "leave unresolved",
        AttemptEffect::ConcludeNotPrepared => "conclude: not prepared",
        AttemptEffect::RunCheck(_) => "run check",
        AttemptEffect::StopCheck => "stop check",
        AttemptEffect::KillCheckNow => "kill check now",
        AttemptEffect::PublishUsage(_) => "publish usage",
    }
}

fn cause_name(cause: Option<&StopCause>) -> String {
    match cause {
        None => "–".into(),
        Some(StopCause::Timeout { .. }) => "timeout".into(),
        Some(StopCause::IdleTimeout { .. }) => "idle timeout".into(),
        Some(StopCause::StopRegex { .. }) => "stop regex".into(),
        Some(StopCause::RateLimited { .. }) => "rate limited".into(),
        Some(StopCause::ExecutionIo(_)) => "execution io".into(),
        Some(StopCause::BudgetExceeded(_)) => "budget exceeded".into(),
        Some(StopCause::Interrupted { during: None, .. }) => "interrupted".into(),
        Some(StopCause::Interrupted {
            during: Some(earlier),
            ..
        }) => format!("interrupted (during {})", cause_name(Some(earlier))),
    }
}

/// The stage × event table, as published in docs/lifecycle-tables.md: for each stage, every
/// event that changes the attempt or has an effect, the stage it leads to, the effects, and
/// the cause afterwards.
fn lifecycle_table() -> String {
    let mut table = String::from(
        "| Stage | Event | Next stage | Effects | Cause after |\n|---|---|---|---|---|\n",
    );
    for (stage_name, stage) in stages() {
        for (event_name, event) in events() {
            let mut lifecycle = stage.clone();
            let effects = lifecycle.handle(event);
            if lifecycle == stage && effects.is_empty() {
                continue;
            }
            let effects: Vec<&str> = effects.iter().map(effect_name).collect();
            table.push_str(&format!(
                "| {stage_name} | {event_name} | {} | {} | {} |\n",
                lifecycle.stage().name(),
                if effects.is_empty() {
                    "–".to_owned()
                } else {
                    effects.join(", ")
                },
                cause_name(lifecycle.cause()),
            ));
        }
    }
    table
}

#[test]
fn the_published_table_is_the_machine() {
    crate::domain::lifecycle::published_tables::check("attempt lifecycle", &lifecycle_table());
}

#[test]
fn every_stage_instance_is_the_stage_it_claims() {
    let names: Vec<&str> = stages()
        .iter()
        .map(|(_, lifecycle)| lifecycle.stage().name())
        .collect();
    assert_eq!(
        names,
        [
            "preparing",
            "running",
            "sweeping",
            "stopping",
            "draining",
            "recording",
            "verifying",
            "done"
        ]
    );
}

#[test]
fn the_first_trigger_while_running_is_the_cause_and_stops_the_group() {
    let mut lifecycle = after([AttemptEvent::Launched, AttemptEvent::RunningRecorded]);
    assert_eq!(
        lifecycle.handle(deadline()),
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    assert!(lifecycle.handle(idle_deadline()).is_empty());
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::Timeout { seconds: 1.0 })
    );
}

#[test]
fn the_wall_clock_deadline_wins_a_tie_with_the_idle_deadline() {
    let mut lifecycle = after([AttemptEvent::Launched, AttemptEvent::RunningRecorded]);
    lifecycle.handle(AttemptEvent::DeadlinesPassed {
        timeout: Some(5.0),
        idle: Some(idle_stop()),
    });
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::Timeout { seconds: 5.0 })
    );
    let mut lifecycle = after([AttemptEvent::Launched, AttemptEvent::RunningRecorded]);
    lifecycle.handle(idle_deadline());
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::IdleTimeout(idle_stop()))
    );
    let mut lifecycle = after([AttemptEvent::Launched]);
    assert!(
        lifecycle
            .handle(AttemptEvent::DeadlinesPassed {
                timeout: None,
                idle: None
            })
            .is_empty()
    );
}

#[test]
fn a_pattern_stops_the_attempt_as_its_kind_says() {
    for (kind, cause) in [
        (
            PatternKind::StopRegex,
            StopCause::StopRegex {
                pattern: "p".into(),
            },
        ),
        (
            PatternKind::RateLimit,
            StopCause::RateLimited {
                pattern: "p".into(),
            },
        ),
    ] {
        let mut lifecycle = after([AttemptEvent::Launched]);
        lifecycle.handle(pattern(kind, "p"));
        assert_eq!(lifecycle.cause(), Some(&cause));
    }
}

#[test]
fn an_interrupt_while_preparing_waits_for_the_launch() {
    let mut lifecycle = AttemptLifecycle::new();
    assert!(lifecycle.handle(interrupt(15)).is_empty());
    assert_eq!(lifecycle.cause(), None);
    assert_eq!(
        lifecycle.handle(AttemptEvent::Launched),
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::Interrupted {
            signal: 15,
            during: None
        })
    );
}

#[test]
fn two_interrupts_while_preparing_skip_the_grace_period_once_launched() {
    let mut lifecycle = after([interrupt(2), interrupt(2)]);
    assert_eq!(
        lifecycle.handle(AttemptEvent::Launched),
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup,
            AttemptEffect::KillNow
        ]
    );
}

#[test]
fn an_interrupt_during_cleanup_decides_and_keeps_the_earlier_cause() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::RunningRecorded,
        deadline(),
    ]);
    assert!(lifecycle.handle(interrupt(2)).is_empty());
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::Interrupted {
            signal: 2,
            during: Some(Box::new(StopCause::Timeout { seconds: 1.0 }))
        })
    );
    assert_eq!(lifecycle.handle(interrupt(2)), [AttemptEffect::KillNow]);
    assert!(
        lifecycle.handle(interrupt(2)).is_empty(),
        "KillNow is sent once"
    );
}

#[test]
fn a_trigger_after_a_normal_exit_decides_without_stopping_anything() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::RunningRecorded,
        AttemptEvent::LeaderExited(COMPLETE),
    ]);
    assert!(
        lifecycle
            .handle(pattern(PatternKind::StopRegex, "x"))
            .is_empty()
    );
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::StopRegex {
            pattern: "x".into()
        })
    );
}

#[test]
fn a_normal_exit_sweeps_once_the_pipes_close() {
    let mut lifecycle = AttemptLifecycle::new();
    lifecycle.handle(AttemptEvent::Launched);
    lifecycle.handle(AttemptEvent::RunningRecorded);
    assert_eq!(
        lifecycle.handle(AttemptEvent::LeaderExited(COMPLETE)),
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::StartTimer(AttemptTimer::LeakGrace)
        ]
    );
    assert!(lifecycle.handle(ended(OutputStream::Stdout)).is_empty());
    assert_eq!(
        lifecycle.handle(ended(OutputStream::Stderr)),
        [AttemptEffect::SweepAfterExit]
    );
    assert_eq!(
        lifecycle.handle(emptied()),
        [
            AttemptEffect::StartTimer(AttemptTimer::DrainLimit),
            AttemptEffect::DrainNotifications
        ]
    );
    assert_eq!(
        lifecycle.handle(AttemptEvent::NotificationsDrained),
        [AttemptEffect::Gather(RecordingInput {
            exit: COMPLETE,
            group: GroupReport::default(),
            pipes_held_open: false,
            notes: Vec::new(),
        })]
    );
    let effects = lifecycle.handle(gathered(complete_verdict()));
    assert_eq!(
        effects,
        [AttemptEffect::Commit(Conclusion {
            decision: Decision {
                status: AttemptStatus::PhaseComplete,
                summary: "done".into()
            },
            exit: COMPLETE,
            launch_error: None,
            verification: None,
            usage: UsageSummary::unknown(),
            budget_note: None,
        })]
    );
    assert!(lifecycle.is_done());
}

#[test]
fn a_held_pipe_is_swept_after_the_leak_grace() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::RunningRecorded,
        AttemptEvent::LeaderExited(COMPLETE),
    ]);
    assert_eq!(
        lifecycle.handle(AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace)),
        [AttemptEffect::SweepAfterExit]
    );
}

#[test]
fn pipes_still_held_after_the_drain_limit_are_closed() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::RunningRecorded,
        deadline(),
        emptied(),
    ]);
    lifecycle.handle(AttemptEvent::LeaderExited(COMPLETE));
    let effects = lifecycle.handle(AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit));
    assert_eq!(
        effects,
        [
            AttemptEffect::CloseReaders,
            AttemptEffect::Gather(RecordingInput {
                exit: COMPLETE,
                group: GroupReport::default(),
                pipes_held_open: true,
                notes: Vec::new(),
            })
        ]
    );
}

#[test]
fn a_leader_that_never_reports_is_recorded_with_an_unknown_status() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        deadline(),
        emptied(),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
    ]);
    assert_eq!(lifecycle.stage().name(), "draining");
    let effects = lifecycle.handle(AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit));
    assert!(matches!(
        effects.as_slice(),
        [AttemptEffect::Gather(RecordingInput {
            exit: ChildExit {
                code: None,
                signal: None
            },
            ..
        })]
    ));
}

#[test]
fn recording_waits_for_the_running_record() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
        emptied(),
        AttemptEvent::NotificationsDrained,
    ]);
    assert_eq!(lifecycle.stage().name(), "draining");
    assert!(matches!(
        lifecycle.handle(AttemptEvent::RunningRecorded).as_slice(),
        [AttemptEffect::Gather(_)]
    ));
}

#[test]
fn a_group_emptied_report_is_only_taken_after_a_stop_was_asked_for() {
    let mut lifecycle = after([AttemptEvent::Launched, AttemptEvent::RunningRecorded]);
    assert!(lifecycle.handle(emptied()).is_empty());
    assert_eq!(lifecycle.stage().name(), "running");
}

#[test]
fn a_failed_running_record_stops_the_worker_and_leaves_the_attempt_unresolved() {
    let mut lifecycle = after([AttemptEvent::Launched]);
    assert_eq!(
        lifecycle.handle(AttemptEvent::RunningRecordFailed {
            detail: "disk full".into()
        }),
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    lifecycle.handle(emptied());
    lifecycle.handle(AttemptEvent::NotificationsDrained);
    lifecycle.handle(AttemptEvent::LeaderExited(COMPLETE));
    lifecycle.handle(ended(OutputStream::Stdout));
    let effects = lifecycle.handle(ended(OutputStream::Stderr));
    assert!(matches!(effects.as_slice(), [AttemptEffect::Gather(_)]));
    let effects = lifecycle.handle(gathered(complete_verdict()));
    let [
        AttemptEffect::LeaveUnresolved {
            conclusion,
            failure,
            decided,
        },
    ] = effects.as_slice()
    else {
        panic!("not left unresolved: {effects:?}");
    };
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        failure,
        &ExecutionFailure::RunningRecord {
            detail: "disk full".into()
        }
    );
    assert_eq!(
        failure.to_string(),
        "could not record running attempt: disk full"
    );
    assert!(*decided, "the failed write is what stopped the attempt");
}

#[test]
fn a_failed_running_record_after_another_cause_did_not_decide() {
    let mut lifecycle = after([AttemptEvent::Launched, deadline()]);
    lifecycle.handle(AttemptEvent::RunningRecordFailed {
        detail: "disk full".into(),
    });
    for event in [
        emptied(),
        AttemptEvent::NotificationsDrained,
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
    ] {
        lifecycle.handle(event);
    }
    let effects = lifecycle.handle(gathered(complete_verdict()));
    assert!(matches!(
        effects.as_slice(),
        [AttemptEffect::LeaveUnresolved {
            decided: false,
            conclusion: Conclusion {
                decision: Decision {
                    status: AttemptStatus::Timeout,
                    ..
                },
                ..
            },
            ..
        }]
    ));
}

#[test]
fn artifacts_and_launch_failures_are_decided_without_a_worker() {
    let mut lifecycle = AttemptLifecycle::new();
    let effects = lifecycle.handle(AttemptEvent::SetupFailed {
        detail: "disk full".into(),
    });
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        conclusion.decision.summary,
        "attempt execution IO failed: disk full"
    );
    assert_eq!(
        conclusion.exit,
        ChildExit {
            code: None,
            signal: None
        }
    );
    assert_eq!(conclusion.launch_error, None);
    assert!(lifecycle.is_done());

    let mut lifecycle = AttemptLifecycle::new();
    let effects = lifecycle.handle(AttemptEvent::LaunchFailed {
        summary: "could not launch agent command: x: not found".into(),
    });
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::LaunchFailed);
    assert_eq!(
        conclusion.decision.summary,
        "could not launch agent command: x: not found"
    );
    assert_eq!(
        conclusion.launch_error.as_deref(),
        Some("could not launch agent command: x: not found")
    );
}

#[test]
fn a_held_interrupt_decides_an_attempt_whose_launch_failed() {
    let mut lifecycle = after([interrupt(2)]);
    let effects = lifecycle.handle(AttemptEvent::LaunchFailed {
        summary: "could not launch".into(),
    });
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::Interrupted);
    assert_eq!(conclusion.launch_error.as_deref(), Some("could not launch"));
}

#[test]
fn while_recording_only_an_interrupt_or_a_recording_finding_decides() {
    let recording = || {
        after([
            AttemptEvent::Launched,
            AttemptEvent::RunningRecorded,
            AttemptEvent::LeaderExited(COMPLETE),
            ended(OutputStream::Stdout),
            ended(OutputStream::Stderr),
            emptied(),
            AttemptEvent::NotificationsDrained,
        ])
    };
    let mut lifecycle = recording();
    lifecycle.handle(AttemptEvent::Failed(ExecutionFailure::Output {
        detail: "console".into(),
    }));
    assert_eq!(
        lifecycle.cause(),
        None,
        "a late output failure changes nothing"
    );
    let effects = lifecycle.handle(AttemptEvent::Gathered(Gathered {
        trailer_error: None,
        final_match: Some(matched(PatternKind::StopRegex, "done$")),
        verdict: complete_verdict(),
    }));
    assert_eq!(
        committed(&effects).decision.status,
        AttemptStatus::StopRegex
    );

    let mut lifecycle = recording();
    lifecycle.handle(interrupt(15));
    let effects = lifecycle.handle(gathered(complete_verdict()));
    assert_eq!(
        committed(&effects).decision.status,
        AttemptStatus::Interrupted
    );
}

#[test]
fn a_trailer_failure_beats_a_final_pattern_match() {
    let recording = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
        emptied(),
        AttemptEvent::NotificationsDrained,
    ]);
    let mut lifecycle = recording.clone();
    let effects = lifecycle.handle(AttemptEvent::Gathered(Gathered {
        trailer_error: Some("/t.txt: disk full".into()),
        final_match: Some(matched(PatternKind::RateLimit, "429$")),
        verdict: complete_verdict(),
    }));
    let decision = &committed(&effects).decision;
    assert_eq!(decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        decision.summary,
        "attempt execution IO failed: /t.txt: disk full"
    );
    let mut lifecycle = recording;
    let effects = lifecycle.handle(AttemptEvent::Gathered(Gathered {
        trailer_error: None,
        final_match: Some(matched(PatternKind::RateLimit, "429$")),
        verdict: complete_verdict(),
    }));
    assert_eq!(
        committed(&effects).decision.status,
        AttemptStatus::RateLimited
    );
}

#[test]
fn nothing_happens_once_done() {
    let mut lifecycle = after([AttemptEvent::PreparedRecordFailed]);
    assert!(lifecycle.is_done());
    for (_, event) in events() {
        assert!(lifecycle.handle(event).is_empty());
    }
}

/// The records `count` checks that ended with [`check_outcome`] leave.
fn records(codes: &[Option<i32>]) -> Vec<CheckRecord> {
    codes
        .iter()
        .enumerate()
        .map(|(at, code)| CheckRecord {
            index: at + 1,
            command_first_line: format!("check {}", at + 1),
            exit_code: *code,
            duration_ms: 3,
            output_bytes: 4,
        })
        .collect()
}

/// An attempt of a phase with `count` checks whose worker reported completion: check 1 runs.
fn verifying(count: usize) -> (AttemptLifecycle, Vec<AttemptEffect>) {
    let mut lifecycle = after_in(with_checks(count), to_recording());
    let effects = lifecycle.handle(gathered(complete_verdict()));
    (lifecycle, effects)
}

#[test]
fn a_completion_is_held_to_the_checks_in_order_and_accepted_when_all_pass() {
    let (mut lifecycle, effects) = verifying(2);
    assert_eq!(effects, [AttemptEffect::RunCheck(checks(2)[0].clone())]);
    assert_eq!(lifecycle.stage().name(), "verifying");
    assert_eq!(
        lifecycle.handle(check_ended(Some(0))),
        [AttemptEffect::RunCheck(checks(2)[1].clone())]
    );
    let effects = lifecycle.handle(check_ended(Some(0)));
    assert_eq!(
        effects,
        [AttemptEffect::Commit(Conclusion {
            decision: Decision {
                status: AttemptStatus::PhaseComplete,
                summary: "done".into()
            },
            exit: COMPLETE,
            launch_error: None,
            verification: Some(Verification::Passed(records(&[Some(0), Some(0)]))),
            usage: UsageSummary::unknown(),
            budget_note: None,
        })]
    );
    assert!(lifecycle.is_done());
    assert!(lifecycle.handle(check_ended(Some(0))).is_empty());
}

#[test]
fn the_first_failing_check_stops_the_rest_and_the_agents_summary_is_kept() {
    let (mut lifecycle, _) = verifying(3);
    lifecycle.handle(check_ended(Some(0)));
    let effects = lifecycle.handle(check_ended(Some(101)));
    let conclusion = committed(&effects);
    assert_eq!(effects.len(), 1, "no third check: {effects:?}");
    assert_eq!(
        conclusion.decision,
        Decision {
            status: AttemptStatus::VerificationFailed,
            summary: "done".into()
        }
    );
    assert_eq!(
        conclusion.verification,
        Some(Verification::Failed {
            checks: records(&[Some(0), Some(101)]),
            failure: FailedCheck {
                index: 2,
                command_first_line: "check 2".into(),
                exit_code: Some(101),
                signal: None,
                timed_out: false,
                output_tail: "tail".into(),
            },
        })
    );
}

#[test]
fn a_check_that_cannot_start_fails_verification_saying_why() {
    let (mut lifecycle, _) = verifying(1);
    let effects = lifecycle.handle(AttemptEvent::CheckEnded(CheckOutcome::unstarted(
        "could not start the check: python3: No such file or directory".into(),
    )));
    let conclusion = committed(&effects);
    assert_eq!(
        conclusion.decision.status,
        AttemptStatus::VerificationFailed
    );
    let Some(Verification::Failed { failure, .. }) = &conclusion.verification else {
        panic!("not failed: {conclusion:?}");
    };
    assert_eq!(failure.exit_code, None);
    assert!(failure.output_tail.contains("No such file"), "{failure:?}");
}

#[test]
fn no_other_decision_runs_a_check() {
    let no_check = |events: Vec<AttemptEvent>, status: AttemptStatus| {
        let mut lifecycle = with_checks(2);
        let mut issued = Vec::new();
        for event in events {
            issued.extend(lifecycle.handle(event));
        }
        assert!(
            !issued
                .iter()
                .any(|effect| matches!(effect, AttemptEffect::RunCheck(_))),
            "a check ran for {status}: {issued:?}"
        );
        let conclusion = committed(&issued);
        assert_eq!(conclusion.decision.status, status);
        assert_eq!(conclusion.verification, None);
    };
    let recorded = |verdict: MarkerVerdict| {
        let mut events = to_recording().to_vec();
        events.push(gathered(verdict));
        events
    };
    no_check(recorded(blocked_verdict()), AttemptStatus::Blocked);
    no_check(
        recorded(MarkerVerdict::Result(ResultBlock {
            kind: ResultKind::NeedsClarification,
            text: "which?".into(),
        })),
        AttemptStatus::NeedsClarification,
    );
    no_check(
        recorded(MarkerVerdict::Missing(String::new())),
        AttemptStatus::MissingMarker,
    );
    // A completion printed by a worker that then failed, or was interrupted while recording.
    no_check(
        vec![
            AttemptEvent::Launched,
            AttemptEvent::RunningRecorded,
            AttemptEvent::LeaderExited(ChildExit {
                code: Some(1),
                signal: None,
            }),
            ended(OutputStream::Stdout),
            ended(OutputStream::Stderr),
            emptied(),
            AttemptEvent::NotificationsDrained,
            gathered(complete_verdict()),
        ],
        AttemptStatus::AgentFailed,
    );
    let mut interrupted = to_recording().to_vec();
    interrupted.extend([interrupt(15), gathered(complete_verdict())]);
    no_check(interrupted, AttemptStatus::Interrupted);
    // A final stop-regex match found while recording.
    let mut matched_at_end = to_recording().to_vec();
    matched_at_end.push(AttemptEvent::Gathered(Gathered {
        trailer_error: None,
        final_match: Some(matched(PatternKind::StopRegex, "done$")),
        verdict: complete_verdict(),
    }));
    no_check(matched_at_end, AttemptStatus::StopRegex);
}

#[test]
fn no_verify_accepts_a_completion_as_skipped_and_records_nothing_else() {
    let skip = || {
        after_in(
            AttemptLifecycle::verified_by(VerifyPlan::Skip),
            to_recording(),
        )
    };
    let effects = skip().handle(gathered(complete_verdict()));
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::PhaseComplete);
    assert_eq!(conclusion.verification, Some(Verification::Skipped));
    let effects = skip().handle(gathered(blocked_verdict()));
    assert_eq!(committed(&effects).verification, None);
    // A phase without checks records no verification at all.
    let effects = after(to_recording()).handle(gathered(complete_verdict()));
    assert_eq!(committed(&effects).verification, None);
}

#[test]
fn an_interrupt_during_a_check_stops_it_and_decides_interrupted() {
    let (mut lifecycle, _) = verifying(2);
    assert_eq!(lifecycle.handle(interrupt(15)), [AttemptEffect::StopCheck]);
    assert_eq!(
        lifecycle.handle(interrupt(2)),
        [AttemptEffect::KillCheckNow]
    );
    assert!(lifecycle.handle(interrupt(2)).is_empty(), "asked once each");
    // Even a check that passed before its stop took effect decides nothing: no next check.
    let effects = lifecycle.handle(check_ended(Some(0)));
    assert_eq!(effects.len(), 1, "{effects:?}");
    let conclusion = committed(&effects);
    assert_eq!(
        conclusion.decision,
        Decision {
            status: AttemptStatus::Interrupted,
            summary: "handler interrupted while verify check 1 (check 1) ran (SIGTERM); the agent had reported phase-complete: done".into()
        }
    );
    assert_eq!(
        conclusion.verification,
        Some(Verification::Stopped(records(&[Some(0)])))
    );
}

#[test]
fn an_output_failure_during_a_check_stops_it_and_decides_unless_a_signal_does() {
    let failure = || {
        AttemptEvent::Failed(ExecutionFailure::Output {
            detail: "/t.txt: disk full".into(),
        })
    };
    let (mut lifecycle, _) = verifying(2);
    assert_eq!(lifecycle.handle(failure()), [AttemptEffect::StopCheck]);
    let effects = lifecycle.handle(check_ended(None));
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        conclusion.decision.summary,
        "attempt execution IO failed: /t.txt: disk full"
    );
    assert_eq!(
        conclusion.verification,
        Some(Verification::Stopped(records(&[None])))
    );

    let (mut lifecycle, _) = verifying(2);
    lifecycle.handle(failure());
    assert!(
        lifecycle.handle(interrupt(2)).is_empty(),
        "one signal does not skip the grace period"
    );
    assert_eq!(
        lifecycle.handle(interrupt(2)),
        [AttemptEffect::KillCheckNow]
    );
    let effects = lifecycle.handle(check_ended(None));
    assert_eq!(
        committed(&effects).decision.status,
        AttemptStatus::Interrupted
    );
}

#[test]
fn losing_the_watchdog_during_a_check_stops_it() {
    let (mut lifecycle, _) = verifying(2);
    assert_eq!(
        lifecycle.handle(AttemptEvent::Unprotected {
            detail: "no watchdog".into()
        }),
        [AttemptEffect::StopCheck]
    );
    let effects = lifecycle.handle(check_ended(None));
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert!(matches!(
        conclusion.verification,
        Some(Verification::Stopped(_))
    ));
}

#[test]
fn the_workers_events_change_nothing_while_a_check_runs() {
    let (verifying, _) = verifying(2);
    for (name, event) in events() {
        if matches!(
            event,
            AttemptEvent::Interrupt { .. }
                | AttemptEvent::Failed(_)
                | AttemptEvent::Unprotected { .. }
                | AttemptEvent::CheckEnded(_)
        ) {
            continue;
        }
        let mut lifecycle = verifying.clone();
        assert!(lifecycle.handle(event).is_empty(), "{name}");
        assert_eq!(lifecycle, verifying, "{name}");
    }
}

/// A report that changed the usage and did nothing else: it is streamed, nothing is stopped.
fn only_publishes(effects: &[AttemptEffect]) -> bool {
    matches!(effects, [AttemptEffect::PublishUsage(_)])
}

#[test]
fn a_running_report_that_reaches_a_cap_stops_the_attempt_as_budget_exceeded() {
    // 30 tokens spent by earlier attempts of the invocation, cap 100.
    let mut lifecycle = after_in(
        budgeted(30),
        [AttemptEvent::Launched, AttemptEvent::RunningRecorded],
    );
    assert!(
        only_publishes(&lifecycle.handle(usage(69, false))),
        "99 < 100"
    );
    let effects = lifecycle.handle(usage(70, false));
    assert!(
        matches!(&effects[0], AttemptEffect::PublishUsage(usage) if usage.counts.input_tokens == Some(70)),
        "{effects:?}"
    );
    assert_eq!(
        effects[1..],
        [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    let Some(StopCause::BudgetExceeded(reached)) = lifecycle.cause() else {
        panic!("{:?}", lifecycle.cause());
    };
    assert_eq!(
        reached.kind,
        CapKind::Tokens {
            limit: 100,
            spent: 100
        }
    );
    let lifecycle = after_in(
        lifecycle,
        [
            emptied(),
            AttemptEvent::NotificationsDrained,
            AttemptEvent::LeaderExited(COMPLETE),
            ended(OutputStream::Stdout),
            ended(OutputStream::Stderr),
        ],
    );
    let mut lifecycle = lifecycle;
    let effects = lifecycle.handle(gathered(complete_verdict()));
    let conclusion = committed(&effects);
    assert_eq!(conclusion.decision.status, AttemptStatus::BudgetExceeded);
    assert!(
        conclusion.decision.summary.starts_with(
            "100 tokens (input + output) spent of 100 (--max-tokens) by this plan's attempts"
        ),
        "{}",
        conclusion.decision.summary
    );
    assert_eq!(conclusion.usage.counts.input_tokens, Some(70));
    assert_eq!(conclusion.usage.completeness, Completeness::Partial);
}

#[test]
fn a_final_report_or_one_after_the_worker_ended_stops_nothing() {
    let mut lifecycle = after_in(budgeted(0), [AttemptEvent::Launched]);
    assert!(only_publishes(&lifecycle.handle(usage(500, true))));
    assert_eq!(lifecycle.stage().name(), "running");
    assert_eq!(lifecycle.cause(), None);
    // A lower running report after the final one changes nothing either…
    assert!(lifecycle.handle(usage(400, false)).is_empty());
    assert_eq!(lifecycle.cause(), None);
    // …but a higher one is counted: any process of the attempt may have sent the final one.
    lifecycle.handle(usage(900, false));
    assert!(
        matches!(lifecycle.cause(), Some(StopCause::BudgetExceeded(_))),
        "{:?}",
        lifecycle.cause()
    );
    let mut lifecycle = after_in(
        budgeted(0),
        [AttemptEvent::Launched, AttemptEvent::LeaderExited(COMPLETE)],
    );
    assert!(only_publishes(&lifecycle.handle(usage(500, false))));
    assert_eq!(lifecycle.cause(), None);
    // Without a cap nothing is ever stopped.
    let mut lifecycle = after([AttemptEvent::Launched]);
    assert!(only_publishes(&lifecycle.handle(usage(u64::MAX, false))));
}

#[test]
fn the_usage_is_concluded_and_an_unenforceable_cap_noted() {
    let run_to_the_end = |lifecycle: AttemptLifecycle, reports: Vec<AttemptEvent>| {
        let mut lifecycle = after_in(
            lifecycle,
            [AttemptEvent::Launched, AttemptEvent::RunningRecorded]
                .into_iter()
                .chain(reports)
                .chain([
                    AttemptEvent::LeaderExited(COMPLETE),
                    ended(OutputStream::Stdout),
                    ended(OutputStream::Stderr),
                    emptied(),
                    AttemptEvent::NotificationsDrained,
                ]),
        );
        let effects = lifecycle.handle(gathered(complete_verdict()));
        committed(&effects).clone()
    };
    let reported = run_to_the_end(budgeted(0), vec![usage(10, false), usage(40, true)]);
    assert_eq!(reported.usage.completeness, Completeness::Reported);
    assert_eq!(reported.usage.counts.input_tokens, Some(40));
    assert_eq!(reported.budget_note, None);
    let silent = run_to_the_end(budgeted(0), Vec::new());
    assert_eq!(silent.usage, UsageSummary::unknown());
    assert_eq!(
        silent.budget_note,
        crate::domain::budget::unenforceable_message(&budgeted(0).budget)
    );
    assert!(silent.budget_note.is_some());
    // No cap, no note; a worker that never ran spent nothing the cap missed.
    assert_eq!(
        run_to_the_end(AttemptLifecycle::new(), Vec::new()).budget_note,
        None
    );
    let mut lifecycle = budgeted(0);
    let effects = lifecycle.handle(AttemptEvent::LaunchFailed {
        summary: "could not launch".into(),
    });
    assert_eq!(committed(&effects).budget_note, None);
}

#[test]
fn recording_waits_for_the_notification_drain_and_carries_the_one_usage_warning() {
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        AttemptEvent::UsageRejected(UsageReportError("first".into())),
        AttemptEvent::UsageRejected(UsageReportError("second".into())),
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
        AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace),
    ]);
    assert_eq!(
        lifecycle.handle(emptied()),
        [
            AttemptEffect::StartTimer(AttemptTimer::DrainLimit),
            AttemptEffect::DrainNotifications
        ]
    );
    assert_eq!(lifecycle.stage().name(), "draining");
    // A final report read by the drain still counts.
    assert!(only_publishes(&lifecycle.handle(usage(7, true))));
    let effects = lifecycle.handle(AttemptEvent::NotificationsDrained);
    let [AttemptEffect::Gather(input)] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert_eq!(input.notes.len(), 1, "{:?}", input.notes);
    assert!(
        input.notes[0]
            .starts_with("[runner] ignored an invalid usage report (X_AISH_USAGE): first"),
        "{:?}",
        input.notes
    );
    let effects = lifecycle.handle(gathered(complete_verdict()));
    assert_eq!(committed(&effects).usage.counts.input_tokens, Some(7));
    // A drain that never reports is bounded by the drain limit.
    let mut lifecycle = after([
        AttemptEvent::Launched,
        AttemptEvent::RunningRecorded,
        deadline(),
        emptied(),
        AttemptEvent::LeaderExited(COMPLETE),
        ended(OutputStream::Stdout),
        ended(OutputStream::Stderr),
    ]);
    assert_eq!(lifecycle.stage().name(), "draining");
    assert!(matches!(
        lifecycle
            .handle(AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit))
            .as_slice(),
        [AttemptEffect::Gather(_)]
    ));
}

fn any_verdict() -> impl Strategy<Value = MarkerVerdict> {
    prop_oneof![
        Just(complete_verdict()),
        Just(MarkerVerdict::Missing(String::new())),
        Just(MarkerVerdict::Invalid("i".into())),
    ]
}

fn any_event() -> impl Strategy<Value = AttemptEvent> {
    prop_oneof![
        1 => Just(AttemptEvent::PreparedRecordFailed),
        1 => Just(AttemptEvent::SetupFailed {
            detail: "a".into()
        }),
        1 => Just(AttemptEvent::LaunchFailed {
            summary: "l".into()
        }),
        4 => Just(AttemptEvent::Launched),
        1 => Just(AttemptEvent::Unprotected {
            detail: "w".into()
        }),
        2 => Just(AttemptEvent::RunningRecorded),
        1 => Just(AttemptEvent::RunningRecordFailed {
            detail: "r".into()
        }),
        3 => (prop::option::of(0..3i32), prop::option::of(1..16i32))
            .prop_map(|(code, signal)| AttemptEvent::LeaderExited(ChildExit { code, signal })),
        4 => (any::<bool>(), prop::option::of(Just("e".to_owned()))).prop_map(|(stdout, error)| {
            AttemptEvent::StreamEnded {
                stream: if stdout {
                    OutputStream::Stdout
                } else {
                    OutputStream::Stderr
                },
                error,
            }
        }),
        1 => Just(pattern(PatternKind::StopRegex, "p")),
        1 => Just(pattern(PatternKind::RateLimit, "r")),
        2 => (prop::option::of(Just(1.0)), prop::option::of(Just(idle_stop())))
            .prop_map(|(timeout, idle)| AttemptEvent::DeadlinesPassed { timeout, idle }),
        2 => (0..200u64, any::<bool>()).prop_map(|(tokens, is_final)| usage(tokens, is_final)),
        1 => Just(AttemptEvent::UsageRejected(UsageReportError("x".into()))),
        2 => Just(AttemptEvent::NotificationsDrained),
        3 => prop::sample::select(vec![2, 15]).prop_map(|signal| AttemptEvent::Interrupt { signal }),
        1 => Just(AttemptEvent::Failed(ExecutionFailure::Output {
            detail: "o".into()
        })),
        3 => Just(AttemptEvent::GroupEmptied(GroupReport::default())),
        2 => Just(AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace)),
        2 => Just(AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit)),
        3 => (
            prop::option::of(Just("t".to_owned())),
            prop::option::of(prop::sample::select(vec![PatternKind::StopRegex, PatternKind::RateLimit])),
            any_verdict(),
        )
            .prop_map(|(trailer_error, kind, verdict)| {
                AttemptEvent::Gathered(Gathered {
                    trailer_error,
                    final_match: kind.map(|kind| matched(kind, "f")),
                    verdict,
                })
            }),
        4 => prop::option::of(0..3i32).prop_map(check_ended),
    ]
}

/// Random event sequences; half of them start with a worker that exited 0 and reported
/// completion, so that the checks' part of the machine is reached as often as the rest.
fn any_events() -> impl Strategy<Value = Vec<AttemptEvent>> {
    (any::<bool>(), prop::collection::vec(any_event(), 0..40)).prop_map(|(completed, events)| {
        if !completed {
            return events;
        }
        let mut sequence = to_recording().to_vec();
        sequence.push(gathered(complete_verdict()));
        sequence.extend(events);
        sequence
    })
}

/// A phase's checks as a run may hold an attempt to them.
fn any_verify_plan() -> impl Strategy<Value = VerifyPlan> {
    prop_oneof![
        Just(VerifyPlan::None),
        Just(VerifyPlan::Skip),
        (1..4usize).prop_map(|count| VerifyPlan::Run(checks(count))),
    ]
}

/// Where an effect sits in the fixed cleanup order.
fn order_rank(effect: &AttemptEffect) -> Option<u8> {
    match effect {
        AttemptEffect::CancelDeadlines => Some(0),
        AttemptEffect::BoundConsole => Some(1),
        AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit => Some(2),
        AttemptEffect::StartTimer(AttemptTimer::DrainLimit) => Some(3),
        AttemptEffect::DrainNotifications => Some(4),
        AttemptEffect::CloseReaders => Some(5),
        AttemptEffect::Gather(_) => Some(6),
        AttemptEffect::Commit(_)
        | AttemptEffect::LeaveUnresolved { .. }
        | AttemptEffect::ConcludeNotPrepared => Some(7),
        AttemptEffect::KillNow
        | AttemptEffect::StartTimer(AttemptTimer::LeakGrace)
        | AttemptEffect::RunCheck(_)
        | AttemptEffect::StopCheck
        | AttemptEffect::KillCheckNow
        | AttemptEffect::PublishUsage(_) => None,
    }
}

/// The conclusion an ending effect carries.
fn conclusion_of(effect: &AttemptEffect) -> Option<&Conclusion> {
    match effect {
        AttemptEffect::Commit(conclusion) | AttemptEffect::LeaveUnresolved { conclusion, .. } => {
            Some(conclusion)
        }
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Cleanup effects are issued at most once and in the fixed order; nothing is issued after
    /// the attempt is done; an interrupt that arrives before the decision decides the outcome,
    /// named after the first signal (the run loop gives the exit code 128 + that signal); a
    /// failed running record always leaves the attempt unresolved; no event sequence panics.
    #[test]
    fn random_event_sequences_keep_every_rule(
        plan in any_verify_plan(),
        events in any_events(),
    ) {
        let mut lifecycle = AttemptLifecycle::configured(plan.clone(), cap_100_tokens(), Spent::default());
        let mut issued: Vec<AttemptEffect> = Vec::new();
        let mut first_interrupt = None;
        // The first report of the running record while the worker runs settles it.
        let mut running_record: Option<bool> = None;
        for event in events {
            let decided = issued.iter().any(|effect| conclusion_of(effect).is_some());
            if !decided && let AttemptEvent::Interrupt { signal } = event {
                first_interrupt.get_or_insert(signal);
            }
            let worker_runs = matches!(
                lifecycle.stage(),
                Stage::Running | Stage::Sweeping { .. } | Stage::Stopping { .. } | Stage::Draining { .. }
            );
            if worker_runs && running_record.is_none() {
                match event {
                    AttemptEvent::RunningRecorded => running_record = Some(true),
                    AttemptEvent::RunningRecordFailed { .. } => running_record = Some(false),
                    _ => {}
                }
            }
            let done_before = lifecycle.is_done();
            let effects = lifecycle.handle(event);
            prop_assert!(!done_before || effects.is_empty(), "effects after done: {effects:?}");
            issued.extend(effects);
        }
        for once in [
            AttemptEffect::CancelDeadlines,
            AttemptEffect::BoundConsole,
            AttemptEffect::KillNow,
            AttemptEffect::StartTimer(AttemptTimer::LeakGrace),
            AttemptEffect::StartTimer(AttemptTimer::DrainLimit),
            AttemptEffect::DrainNotifications,
            AttemptEffect::CloseReaders,
        ] {
            prop_assert!(issued.iter().filter(|effect| **effect == once).count() <= 1, "{once:?} twice in {issued:?}");
        }
        let stops = issued.iter().filter(|effect| matches!(effect, AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit)).count();
        prop_assert!(stops <= 1, "the group is stopped once: {issued:?}");
        let gathers = issued.iter().filter(|effect| order_rank(effect) == Some(6)).count();
        prop_assert!(gathers <= 1, "one gathering: {issued:?}");
        let ends = issued.iter().filter(|effect| order_rank(effect) == Some(7)).count();
        prop_assert!(ends <= 1, "one conclusion: {issued:?}");
        let ranks: Vec<u8> = issued.iter().filter_map(order_rank).collect();
        prop_assert!(ranks.windows(2).all(|pair| pair[0] < pair[1]), "cleanup out of order: {issued:?}");
        let conclusion = issued.iter().find_map(conclusion_of);
        if let (Some(conclusion), Some(signal)) = (conclusion, first_interrupt) {
            prop_assert_eq!(conclusion.decision.status, AttemptStatus::Interrupted);
            let named = crate::domain::decision::signal_name(signal);
            let summary = &conclusion.decision.summary;
            prop_assert!(
                summary.starts_with(&format!("handler interrupted while the worker was active ({named})"))
                    || summary.starts_with("handler interrupted while verify check ")
                        && summary.contains(&format!(" ran ({named})")),
                "the first signal names the interruption: {}", summary
            );
        }
        // Checks run only between the gathering and the conclusion, in order, each once, and
        // only for the checks the plan names.
        let position = |wanted: fn(&AttemptEffect) -> bool| issued.iter().position(wanted);
        let gather_at = position(|effect| matches!(effect, AttemptEffect::Gather(_)));
        let end_at = position(|effect| order_rank(effect) == Some(7));
        let run: Vec<(usize, usize)> = issued
            .iter()
            .enumerate()
            .filter_map(|(at, effect)| match effect {
                AttemptEffect::RunCheck(check) => Some((at, check.index)),
                _ => None,
            })
            .collect();
        let indexes: Vec<usize> = run.iter().map(|(_, index)| *index).collect();
        prop_assert_eq!(&indexes, &(1..=run.len()).collect::<Vec<_>>(), "checks out of order: {:?}", issued);
        prop_assert!(run.len() <= plan.checks().len(), "more checks than the plan names: {:?}", issued);
        for (at, _) in &run {
            prop_assert!(gather_at.is_some_and(|gather| gather < *at), "a check before the gathering: {:?}", issued);
            prop_assert!(end_at.is_none_or(|end| *at < end), "a check after the conclusion: {:?}", issued);
        }
        for effect in [AttemptEffect::StopCheck, AttemptEffect::KillCheckNow] {
            let count = issued.iter().filter(|issued| **issued == effect).count();
            prop_assert!(count <= 1, "{:?} twice: {:?}", effect, issued);
            prop_assert!(count == 0 || !run.is_empty(), "{:?} without a check: {:?}", effect, issued);
        }
        if let Some(conclusion) = conclusion {
            let status = conclusion.decision.status;
            match (&plan, status, &conclusion.verification) {
                // A completion is accepted only once every check passed (or they were skipped).
                (VerifyPlan::Run(checks), AttemptStatus::PhaseComplete, Some(Verification::Passed(records))) => {
                    prop_assert_eq!(records.len(), checks.len());
                }
                (VerifyPlan::Skip, AttemptStatus::PhaseComplete, Some(Verification::Skipped)) => {}
                (VerifyPlan::None, AttemptStatus::PhaseComplete, None) => {}
                (_, AttemptStatus::PhaseComplete, verification) => {
                    prop_assert!(false, "completion accepted with {:?} under {:?}", verification, plan);
                }
                (VerifyPlan::Run(_), AttemptStatus::VerificationFailed, Some(Verification::Failed { .. })) => {}
                (_, AttemptStatus::VerificationFailed, _) => {
                    prop_assert!(false, "verification-failed without a failed check: {:?}", conclusion);
                }
                _ => {}
            }
            if !run.is_empty() {
                prop_assert!(
                    matches!(
                        status,
                        AttemptStatus::PhaseComplete
                            | AttemptStatus::VerificationFailed
                            | AttemptStatus::Interrupted
                            | AttemptStatus::ExecutionIoFailed
                    ),
                    "a check ran for an attempt that ended {}", status
                );
            }
        }
        if running_record == Some(false) {
            prop_assert!(
                !issued.iter().any(|effect| matches!(effect, AttemptEffect::Commit(_))),
                "nothing is committed after a failed running record: {issued:?}"
            );
        }
    }

    /// Whatever order the world reports things in, a launched attempt whose killer, pipes and
    /// leader behave reaches recording exactly once, and is decided once its findings are in.
    #[test]
    fn a_launched_attempt_always_reaches_recording(
        triggers in prop::collection::vec(any_event(), 0..6),
        order in Just(()).prop_perturb(|_, mut rng| {
            let mut order = vec![0u8, 1, 2, 3];
            for i in (1..order.len()).rev() {
                let j = (rng.next_u32() as usize) % (i + 1);
                order.swap(i, j);
            }
            order
        }),
    ) {
        let mut lifecycle = after([AttemptEvent::Launched, AttemptEvent::RunningRecorded]);
        let mut issued: Vec<AttemptEffect> = Vec::new();
        for trigger in triggers.into_iter().filter(|event| !matches!(
            event,
            AttemptEvent::PreparedRecordFailed
                | AttemptEvent::SetupFailed { .. }
                | AttemptEvent::LaunchFailed { .. }
                | AttemptEvent::LeaderExited(_)
                | AttemptEvent::StreamEnded { .. }
                | AttemptEvent::GroupEmptied(_)
                | AttemptEvent::Gathered(_)
        )) {
            issued.extend(lifecycle.handle(trigger));
        }
        for step in order {
            let event = match step {
                0 => AttemptEvent::LeaderExited(COMPLETE),
                1 => ended(OutputStream::Stdout),
                2 => ended(OutputStream::Stderr),
                _ => AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace),
            };
            issued.extend(lifecycle.handle(event));
            // The killer answers every stop request once the group is empty, and the drain
            // of the notification socket reports.
            if issued.iter().any(|effect| matches!(effect, AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit))
                && matches!(lifecycle.stage(), Stage::Stopping { .. } | Stage::Sweeping { sweep_requested: true, .. })
            {
                let effects = lifecycle.handle(emptied());
                let drain = effects.contains(&AttemptEffect::DrainNotifications);
                issued.extend(effects);
                if drain {
                    issued.extend(lifecycle.handle(AttemptEvent::NotificationsDrained));
                }
            }
        }
        issued.extend(lifecycle.handle(AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit)));
        let gathers = issued.iter().filter(|effect| matches!(effect, AttemptEffect::Gather(_))).count();
        prop_assert_eq!(gathers, 1, "{:?} in stage {}", issued, lifecycle.stage().name());
        issued.extend(lifecycle.handle(gathered(complete_verdict())));
        prop_assert!(lifecycle.is_done());
        prop_assert_eq!(issued.iter().filter(|effect| conclusion_of(effect).is_some()).count(), 1);
    }

    /// A completion held to its checks concludes exactly once however they end, with the
    /// verdict of the first failing check, or accepted when all pass; a signal or an output
    /// failure while a check runs stops it, and the next check never starts.
    #[test]
    fn a_verified_completion_always_concludes_with_the_checks_verdict(
        count in 1..4usize,
        ends in prop::collection::vec((prop::option::of(0..3i32), 0..6u8), 1..4),
    ) {
        let (mut lifecycle, mut issued) = verifying(count);
        let (mut interrupted, mut output_failed) = (false, false);
        let mut ran = Vec::new();
        for (code, disturbance) in ends {
            if lifecycle.is_done() {
                break;
            }
            match disturbance {
                0 => {
                    issued.extend(lifecycle.handle(interrupt(15)));
                    interrupted = true;
                }
                1 => {
                    issued.extend(lifecycle.handle(AttemptEvent::Failed(ExecutionFailure::Output {
                        detail: "o".into(),
                    })));
                    output_failed = true;
                }
                _ => {}
            }
            ran.push(code);
            issued.extend(lifecycle.handle(check_ended(code)));
        }
        let runs = issued.iter().filter(|effect| matches!(effect, AttemptEffect::RunCheck(_))).count();
        prop_assert_eq!(runs, ran.len() + usize::from(!lifecycle.is_done()));
        let ends = issued.iter().filter(|effect| conclusion_of(effect).is_some()).count();
        if !lifecycle.is_done() {
            prop_assert_eq!(ends, 0);
            prop_assert!(!interrupted && !output_failed && ran.iter().all(|code| *code == Some(0)));
            return Ok(());
        }
        prop_assert_eq!(ends, 1);
        let conclusion = issued.iter().find_map(conclusion_of).unwrap();
        let expected = if interrupted {
            AttemptStatus::Interrupted
        } else if output_failed {
            AttemptStatus::ExecutionIoFailed
        } else if ran.iter().all(|code| *code == Some(0)) {
            AttemptStatus::PhaseComplete
        } else {
            AttemptStatus::VerificationFailed
        };
        prop_assert_eq!(conclusion.decision.status, expected);
        if expected == AttemptStatus::VerificationFailed {
            let failed_at = ran.iter().position(|code| *code != Some(0)).unwrap() + 1;
            prop_assert_eq!(ran.len(), failed_at, "checks ran after the first failure");
            let is_failed = matches!(
                &conclusion.verification,
                Some(Verification::Failed { failure, .. }) if failure.index == failed_at
            );
            prop_assert!(is_failed, "{:?}", conclusion);
            prop_assert_eq!(&conclusion.decision.summary, "done");
        }
        if expected == AttemptStatus::PhaseComplete {
            prop_assert_eq!(ran.len(), count);
        }
    }
}
