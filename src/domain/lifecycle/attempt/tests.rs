//! Tests of the attempt lifecycle: the stage × event table (also published in
//! docs/architecture.md), the rules one by one, and properties over random event sequences.

use proptest::prelude::*;

use super::*;
use crate::domain::marker::{ResultBlock, ResultKind};

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
    let mut lifecycle = AttemptLifecycle::new();
    for event in events {
        lifecycle.handle(event);
    }
    lifecycle
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
    AttemptEvent::DeadlineReached { seconds: 1.0 }
}

fn emptied() -> AttemptEvent {
    AttemptEvent::GroupEmptied(GroupReport::default())
}

/// One instance of every stage, reached through the events that lead there.
fn stages() -> Vec<(&'static str, AttemptLifecycle)> {
    vec![
        ("Preparing", AttemptLifecycle::new()),
        // The running record is still being written here; in the later stages it is durable.
        ("Running", after([AttemptEvent::Launched])),
        (
            "Sweeping",
            after([
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                AttemptEvent::LeaderExited(COMPLETE),
            ]),
        ),
        (
            "Stopping",
            after([
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                deadline(),
            ]),
        ),
        (
            "Draining",
            after([
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::RunningRecorded,
                deadline(),
                emptied(),
            ]),
        ),
        (
            "Recording",
            after([
                AttemptEvent::Launched,
                AttemptEvent::RunningRecorded,
                AttemptEvent::LeaderExited(COMPLETE),
                ended(OutputStream::Stdout),
                ended(OutputStream::Stderr),
                emptied(),
            ]),
        ),
        ("Done", {
            let mut done = after([AttemptEvent::PreparedRecordFailed]);
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
                message: "disk full".into(),
            },
        ),
        (
            "LaunchFailed",
            AttemptEvent::LaunchFailed {
                summary: "could not launch".into(),
            },
        ),
        ("Launched", AttemptEvent::Launched),
        ("RunningRecorded", AttemptEvent::RunningRecorded),
        (
            "RunningRecordFailed",
            AttemptEvent::RunningRecordFailed {
                message: "disk full".into(),
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
            "StopRegexMatched",
            AttemptEvent::StopRegexMatched {
                pattern: "FATAL".into(),
            },
        ),
        (
            "RateLimitMatched",
            AttemptEvent::RateLimitMatched {
                pattern: "429".into(),
            },
        ),
        ("DeadlineReached", deadline()),
        (
            "IdleDeadlineReached",
            AttemptEvent::IdleDeadlineReached { seconds: 2.0 },
        ),
        ("Interrupt", interrupt(2)),
        (
            "OutputFailed",
            AttemptEvent::OutputFailed {
                message: "write failed".into(),
            },
        ),
        ("GroupEmptied", emptied()),
        ("LeakGraceElapsed", AttemptEvent::LeakGraceElapsed),
        ("DrainLimitElapsed", AttemptEvent::DrainLimitElapsed),
        (
            "TrailerFailed",
            AttemptEvent::TrailerFailed {
                message: "write failed".into(),
            },
        ),
        (
            "FinalStopMatch",
            AttemptEvent::FinalStopMatch {
                pattern: "FATAL".into(),
            },
        ),
        (
            "FinalRateLimitMatch",
            AttemptEvent::FinalRateLimitMatch {
                pattern: "429".into(),
            },
        ),
    ]
}

fn effect_name(effect: &AttemptEffect) -> &'static str {
    match effect {
        AttemptEffect::CancelTimers => "cancel timers",
        AttemptEffect::BoundConsole => "bound console",
        AttemptEffect::TerminateGroup => "terminate group",
        AttemptEffect::KillNow => "kill now",
        AttemptEffect::StartLeakGrace => "start leak grace",
        AttemptEffect::SweepAfterExit => "sweep after exit",
        AttemptEffect::StartDrainLimit => "start drain limit",
        AttemptEffect::CloseReaders => "close readers",
        AttemptEffect::Record(_) => "record",
        AttemptEffect::RecordWithoutWorker { .. } => "record without worker",
        AttemptEffect::ConcludeNotPrepared => "conclude: not prepared",
    }
}

fn cause_name(cause: Option<&StopCause>) -> String {
    match cause {
        None => "–".into(),
        Some(StopCause::Timeout { .. }) => "timeout".into(),
        Some(StopCause::IdleTimeout { .. }) => "idle timeout".into(),
        Some(StopCause::StopRegex { .. }) => "stop regex".into(),
        Some(StopCause::RateLimited { .. }) => "rate limited".into(),
        Some(StopCause::ExecutionIo { .. }) => "execution io".into(),
        Some(StopCause::Interrupted { during: None, .. }) => "interrupted".into(),
        Some(StopCause::Interrupted {
            during: Some(earlier),
            ..
        }) => format!("interrupted (during {})", cause_name(Some(earlier))),
    }
}

/// The stage × event table, as published in docs/architecture.md: each row is a stage, the
/// event, the stage it leads to, the effects, and the cause afterwards.
fn lifecycle_table() -> String {
    let mut table = String::from(
        "| Stage | Event | Next stage | Effects | Cause after |\n|---|---|---|---|---|\n",
    );
    for (stage_name, stage) in stages() {
        for (event_name, event) in events() {
            let mut lifecycle = stage.clone();
            let effects = lifecycle.handle(event);
            let effects: Vec<&str> = effects.iter().map(effect_name).collect();
            let unchanged = lifecycle == stage;
            table.push_str(&format!(
                "| {stage_name} | {event_name} | {} | {} | {} |\n",
                if unchanged {
                    "(ignored)".to_owned()
                } else {
                    lifecycle.stage().name().to_owned()
                },
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
    let docs = include_str!("../../../../docs/architecture.md");
    let table = lifecycle_table();
    assert!(
        docs.contains(&table),
        "docs/architecture.md must contain the lifecycle table exactly as the machine behaves:\n{table}"
    );
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
            AttemptEffect::CancelTimers,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    assert!(
        lifecycle
            .handle(AttemptEvent::IdleDeadlineReached { seconds: 2.0 })
            .is_empty()
    );
    assert_eq!(
        lifecycle.cause(),
        Some(&StopCause::Timeout { seconds: 1.0 })
    );
}

#[test]
fn an_interrupt_while_preparing_waits_for_the_launch() {
    let mut lifecycle = AttemptLifecycle::new();
    assert!(lifecycle.handle(interrupt(15)).is_empty());
    assert_eq!(lifecycle.cause(), None);
    assert_eq!(
        lifecycle.handle(AttemptEvent::Launched),
        [
            AttemptEffect::CancelTimers,
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
            AttemptEffect::CancelTimers,
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
            .handle(AttemptEvent::StopRegexMatched {
                pattern: "x".into()
            })
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
            AttemptEffect::CancelTimers,
            AttemptEffect::BoundConsole,
            AttemptEffect::StartLeakGrace
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
            AttemptEffect::StartDrainLimit,
            AttemptEffect::Record(RecordingInput {
                exit: Some(COMPLETE),
                group: GroupReport::default(),
                pipes_held_open: false
            })
        ]
    );
    let conclusion = lifecycle.decide(Some(COMPLETE), complete_verdict());
    assert_eq!(conclusion.decision.status, AttemptStatus::PhaseComplete);
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
        lifecycle.handle(AttemptEvent::LeakGraceElapsed),
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
    let effects = lifecycle.handle(AttemptEvent::DrainLimitElapsed);
    assert_eq!(
        effects,
        [
            AttemptEffect::CloseReaders,
            AttemptEffect::Record(RecordingInput {
                exit: Some(COMPLETE),
                group: GroupReport::default(),
                pipes_held_open: true
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
    let effects = lifecycle.handle(AttemptEvent::DrainLimitElapsed);
    assert!(matches!(
        effects.as_slice(),
        [AttemptEffect::Record(RecordingInput {
            exit: Some(ChildExit {
                code: None,
                signal: None
            }),
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
    ]);
    assert_eq!(lifecycle.stage().name(), "draining");
    assert!(matches!(
        lifecycle.handle(AttemptEvent::RunningRecorded).as_slice(),
        [AttemptEffect::Record(_)]
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
            message: "disk full".into()
        }),
        [
            AttemptEffect::CancelTimers,
            AttemptEffect::BoundConsole,
            AttemptEffect::TerminateGroup
        ]
    );
    lifecycle.handle(emptied());
    lifecycle.handle(AttemptEvent::LeaderExited(COMPLETE));
    lifecycle.handle(ended(OutputStream::Stdout));
    let effects = lifecycle.handle(ended(OutputStream::Stderr));
    assert!(matches!(effects.as_slice(), [AttemptEffect::Record(_)]));
    let conclusion = lifecycle.decide(Some(COMPLETE), complete_verdict());
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        conclusion.unresolved.as_deref(),
        Some("could not record running attempt: disk full")
    );
}

#[test]
fn artifacts_and_launch_failures_record_without_a_worker() {
    let mut lifecycle = AttemptLifecycle::new();
    assert_eq!(
        lifecycle.handle(AttemptEvent::SetupFailed {
            message: "disk full".into()
        }),
        [AttemptEffect::RecordWithoutWorker { launch_error: None }]
    );
    let conclusion = lifecycle.decide(None, MarkerVerdict::Missing(String::new()));
    assert_eq!(conclusion.decision.status, AttemptStatus::ExecutionIoFailed);
    assert_eq!(
        conclusion.exit,
        ChildExit {
            code: None,
            signal: None
        }
    );

    let mut lifecycle = AttemptLifecycle::new();
    lifecycle.handle(AttemptEvent::LaunchFailed {
        summary: "could not launch agent command: x: not found".into(),
    });
    let conclusion = lifecycle.decide(None, MarkerVerdict::Missing(String::new()));
    assert_eq!(conclusion.decision.status, AttemptStatus::LaunchFailed);
    assert_eq!(
        conclusion.decision.summary,
        "could not launch agent command: x: not found"
    );
}

#[test]
fn a_held_interrupt_decides_an_attempt_whose_launch_failed() {
    let mut lifecycle = after([interrupt(2)]);
    assert_eq!(
        lifecycle.handle(AttemptEvent::LaunchFailed {
            summary: "could not launch".into()
        }),
        [AttemptEffect::RecordWithoutWorker {
            launch_error: Some("could not launch".into())
        }]
    );
    let conclusion = lifecycle.decide(None, MarkerVerdict::Missing(String::new()));
    assert_eq!(conclusion.decision.status, AttemptStatus::Interrupted);
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
        ])
    };
    let mut lifecycle = recording();
    lifecycle.handle(AttemptEvent::OutputFailed {
        message: "console".into(),
    });
    assert_eq!(
        lifecycle.cause(),
        None,
        "a late output failure changes nothing"
    );
    lifecycle.handle(AttemptEvent::FinalStopMatch {
        pattern: "done$".into(),
    });
    assert_eq!(
        lifecycle
            .decide(Some(COMPLETE), complete_verdict())
            .decision
            .status,
        AttemptStatus::StopRegex
    );

    let mut lifecycle = recording();
    lifecycle.handle(interrupt(15));
    assert_eq!(
        lifecycle
            .decide(Some(COMPLETE), complete_verdict())
            .decision
            .status,
        AttemptStatus::Interrupted
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

fn any_event() -> impl Strategy<Value = AttemptEvent> {
    prop_oneof![
        1 => Just(AttemptEvent::PreparedRecordFailed),
        1 => Just(AttemptEvent::SetupFailed {
            message: "a".into()
        }),
        1 => Just(AttemptEvent::LaunchFailed {
            summary: "l".into()
        }),
        4 => Just(AttemptEvent::Launched),
        2 => Just(AttemptEvent::RunningRecorded),
        1 => Just(AttemptEvent::RunningRecordFailed {
            message: "r".into()
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
        1 => Just(AttemptEvent::StopRegexMatched {
            pattern: "p".into()
        }),
        1 => Just(AttemptEvent::RateLimitMatched {
            pattern: "r".into()
        }),
        1 => Just(AttemptEvent::DeadlineReached { seconds: 1.0 }),
        1 => Just(AttemptEvent::IdleDeadlineReached { seconds: 1.0 }),
        3 => prop::sample::select(vec![2, 15]).prop_map(|signal| AttemptEvent::Interrupt { signal }),
        1 => Just(AttemptEvent::OutputFailed {
            message: "o".into()
        }),
        3 => Just(AttemptEvent::GroupEmptied(GroupReport::default())),
        2 => Just(AttemptEvent::LeakGraceElapsed),
        2 => Just(AttemptEvent::DrainLimitElapsed),
        1 => Just(AttemptEvent::TrailerFailed {
            message: "t".into()
        }),
        1 => Just(AttemptEvent::FinalStopMatch {
            pattern: "f".into()
        }),
        1 => Just(AttemptEvent::FinalRateLimitMatch {
            pattern: "f".into()
        }),
    ]
}

/// Where an effect sits in the fixed cleanup order.
fn order_rank(effect: &AttemptEffect) -> Option<u8> {
    match effect {
        AttemptEffect::CancelTimers => Some(0),
        AttemptEffect::BoundConsole => Some(1),
        AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit => Some(2),
        AttemptEffect::StartDrainLimit => Some(3),
        AttemptEffect::CloseReaders => Some(4),
        AttemptEffect::Record(_)
        | AttemptEffect::RecordWithoutWorker { .. }
        | AttemptEffect::ConcludeNotPrepared => Some(5),
        AttemptEffect::KillNow | AttemptEffect::StartLeakGrace => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Cleanup effects are issued at most once and in the fixed order; nothing is issued after
    /// the attempt is done; an interrupt that arrives before the decision decides the outcome,
    /// named after the first signal (the run loop gives the exit code 128 + that signal); no
    /// event sequence panics.
    #[test]
    fn random_event_sequences_keep_every_rule(
        events in prop::collection::vec(any_event(), 0..40),
        decide_at in 0usize..40,
    ) {
        let mut lifecycle = AttemptLifecycle::new();
        let mut issued: Vec<AttemptEffect> = Vec::new();
        let mut first_interrupt = None;
        let mut conclusion = None;
        for (index, event) in events.into_iter().enumerate() {
            if conclusion.is_none()
                && let AttemptEvent::Interrupt { signal } = event
            {
                first_interrupt.get_or_insert(signal);
            }
            let done_before = lifecycle.is_done();
            let effects = lifecycle.handle(event);
            prop_assert!(!done_before || effects.is_empty(), "effects after done: {effects:?}");
            issued.extend(effects);
            let recording = issued.iter().any(|effect| matches!(
                effect,
                AttemptEffect::Record(_) | AttemptEffect::RecordWithoutWorker { .. }
            ));
            if recording && conclusion.is_none() && index >= decide_at {
                conclusion = Some(lifecycle.decide(Some(COMPLETE), complete_verdict()));
                prop_assert!(lifecycle.is_done());
            }
        }
        for once in [
            AttemptEffect::CancelTimers,
            AttemptEffect::BoundConsole,
            AttemptEffect::KillNow,
            AttemptEffect::StartLeakGrace,
            AttemptEffect::StartDrainLimit,
            AttemptEffect::CloseReaders,
        ] {
            prop_assert!(issued.iter().filter(|effect| **effect == once).count() <= 1, "{once:?} twice in {issued:?}");
        }
        let stops = issued.iter().filter(|effect| matches!(effect, AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit)).count();
        prop_assert!(stops <= 1, "the group is stopped once: {issued:?}");
        let ends = issued.iter().filter(|effect| order_rank(effect) == Some(5)).count();
        prop_assert!(ends <= 1, "one record or conclusion: {issued:?}");
        let ranks: Vec<u8> = issued.iter().filter_map(order_rank).collect();
        prop_assert!(ranks.windows(2).all(|pair| pair[0] < pair[1]), "cleanup out of order: {issued:?}");
        if let (Some(conclusion), Some(signal)) = (&conclusion, first_interrupt) {
            prop_assert_eq!(conclusion.decision.status, AttemptStatus::Interrupted);
            let named = crate::domain::decision::signal_name(signal);
            prop_assert!(
                conclusion.decision.summary.starts_with(&format!("handler interrupted while the worker was active ({named})")),
                "the first signal names the interruption: {}", conclusion.decision.summary
            );
        }
    }

    /// Whatever order the world reports things in, a launched attempt whose killer, pipes and
    /// leader behave reaches recording exactly once.
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
        )) {
            issued.extend(lifecycle.handle(trigger));
        }
        for step in order {
            let event = match step {
                0 => AttemptEvent::LeaderExited(COMPLETE),
                1 => ended(OutputStream::Stdout),
                2 => ended(OutputStream::Stderr),
                _ => AttemptEvent::LeakGraceElapsed,
            };
            issued.extend(lifecycle.handle(event));
            // The killer answers every stop request once the group is empty.
            if issued.iter().any(|effect| matches!(effect, AttemptEffect::TerminateGroup | AttemptEffect::SweepAfterExit))
                && matches!(lifecycle.stage(), Stage::Stopping { .. } | Stage::Sweeping { sweep_requested: true, .. })
            {
                issued.extend(lifecycle.handle(emptied()));
            }
        }
        issued.extend(lifecycle.handle(AttemptEvent::DrainLimitElapsed));
        let records = issued.iter().filter(|effect| matches!(effect, AttemptEffect::Record(_))).count();
        prop_assert_eq!(records, 1, "{:?} in stage {}", issued, lifecycle.stage().name());
    }
}
