//! Unit tests of the watchdog's rules: its messages, what it signals, the children it notes, its replacement and its report.

use super::*;

fn stat(pid: u32, state: char, started: u64) -> ProcStat {
    ProcStat {
        pid,
        state,
        ppid: 1,
        pgrp: pid,
        start_time_ticks: started,
        cpu_ticks: 0,
        reaped_children_ticks: 0,
    }
}

#[test]
fn messages_round_trip_without_allocating() {
    let attempt = "20261129T120102Z-phase-2-3f2b8c1e-0000-4000-8000-000000000000";
    for message in [
        WatchdogMessage::Watch {
            pgid: 0,
            attempt: "",
        },
        WatchdogMessage::Watch { pgid: 7, attempt },
        WatchdogMessage::Release(4_194_304),
        WatchdogMessage::Watch {
            pgid: u32::MAX,
            attempt,
        },
    ] {
        let mut buffer = [0u8; MAX_MESSAGE];
        let length = message.encode(&mut buffer);
        assert_eq!(WatchdogMessage::parse(&buffer[..length]), Some(message));
    }
    let mut buffer = [0u8; MAX_MESSAGE];
    let length = WatchdogMessage::Watch {
        pgid: 4242,
        attempt: "a-1",
    }
    .encode(&mut buffer);
    assert_eq!(&buffer[..length], b"watch 4242 a-1");
    assert_eq!(WatchdogMessage::parse(b"stop 12"), None);
    assert_eq!(WatchdogMessage::parse(b"watch x"), None);
    assert_eq!(WatchdogMessage::parse(b"watch 1 ../x"), None);
    assert_eq!(WatchdogMessage::parse(b"watch 1 a b"), None);
    assert_eq!(WatchdogMessage::parse(b"release 1 a"), None);
    for packet in [
        &b"expect"[..],
        b"expect ",
        b"expect 12 a-1",
        b"expect ../x",
        b"unexpect",
    ] {
        assert_eq!(WatchdogMessage::parse(packet), None, "{packet:?}");
    }
}

#[test]
fn an_attempt_id_that_does_not_fit_or_is_unsafe_is_left_out() {
    let long = "x".repeat(MAX_MESSAGE);
    for attempt in [long.as_str(), "a/b", "a b"] {
        let mut buffer = [0u8; MAX_MESSAGE];
        let length = WatchdogMessage::Watch { pgid: 9, attempt }.encode(&mut buffer);
        assert_eq!(&buffer[..length], b"watch 9");
    }
}

#[test]
fn only_unreleased_existing_worker_groups_are_signalled() {
    let mut registry = Registry::new(500, 600);
    for pgid in [1000, 2000, 3000, 500, 600, 1, 0] {
        registry.apply(
            WatchdogMessage::Watch {
                pgid,
                attempt: "a-1",
            },
            Some(10),
        );
    }
    registry.apply(WatchdogMessage::Release(2000), None);
    // Never its own group, the handler's, init's or 0.
    assert_eq!(registry.unreleased(), [1000, 3000]);
    registry.forget_gone(|pgid| pgid != 3000);
    assert_eq!(registry.unreleased(), [1000]);
    // A gone group is not signalled again, but its token still is searched for.
    assert!(registry.is_watching());
    assert_eq!(registry.tokens(), ["a-1"]);
    registry.forget_gone(|_| true);
    assert_eq!(registry.unreleased(), [1000], "gone stays gone");
}

#[test]
fn a_repeated_registration_keeps_the_first_leader_start_and_adds_a_token() {
    let mut registry = Registry::new(5, 6);
    registry.apply(
        WatchdogMessage::Watch {
            pgid: 100,
            attempt: "",
        },
        Some(50),
    );
    registry.apply(
        WatchdogMessage::Watch {
            pgid: 100,
            attempt: "a-2",
        },
        Some(77),
    );
    assert_eq!(registry.tokens(), ["a-2"]);
    registry.note_handler_child(&stat(300, 'S', 50), 5);
    assert_eq!(registry.adoptees(), [(300, 50)]);
}

#[test]
fn handler_children_are_noted_only_when_they_could_be_a_workers() {
    let mut registry = Registry::new(5, 6);
    registry.note_handler_child(&stat(300, 'S', 90), 5);
    assert!(
        registry.adoptees().is_empty(),
        "nothing watched: no escapee"
    );
    registry.apply(
        WatchdogMessage::Watch {
            pgid: 100,
            attempt: "a-1",
        },
        Some(50),
    );
    for (child, noted) in [
        (stat(300, 'S', 50), true),  // same tick as the leader
        (stat(301, 'R', 90), true),  // later
        (stat(302, 'S', 49), false), // earlier: inherited
        (stat(303, 'Z', 90), false), // a zombie
        (stat(100, 'S', 50), false), // the leader itself
        (stat(5, 'S', 90), false),   // the watchdog
    ] {
        registry.note_handler_child(&child, 5);
        assert_eq!(
            registry.adoptees().iter().any(|(pid, _)| *pid == child.pid),
            noted,
            "{child:?}"
        );
    }
    registry.prune_adoptees(|pid| (pid == 300).then(|| stat(300, 'S', 50)));
    assert_eq!(registry.adoptees(), [(300, 50)]);
    registry.prune_adoptees(|pid| (pid == 300).then(|| stat(300, 'S', 51)));
    assert!(
        registry.adoptees().is_empty(),
        "a reused pid is not the noted one"
    );
    registry.note_handler_child(&stat(304, 'S', 60), 5);
    registry.apply(WatchdogMessage::Release(100), None);
    assert!(
        registry.adoptees().is_empty(),
        "all released: the handler swept them"
    );
}

#[test]
fn a_lost_watchdog_is_replaced_a_bounded_number_of_times() {
    let mut budget = LossBudget::default();
    for _ in 0..REPLACEMENT_LIMIT {
        assert!(budget.replace_after_loss());
    }
    assert!(!budget.replace_after_loss());
    assert_eq!(budget.losses(), REPLACEMENT_LIMIT + 1);
}

#[test]
fn a_loss_is_described_and_stops_the_attempt_only_without_a_replacement() {
    let replaced = WatchdogLoss {
        pid: 12,
        cause: LossCause::Killed(9),
        replacement: Replacement::Started(40),
        signal_name: Some("SIGKILL"),
    };
    assert_eq!(
        replaced.trailer_line(),
        "watchdog_lost: the watchdog (pid 12) was killed by SIGKILL; a new watchdog (pid 40) took over"
    );
    assert_eq!(replaced.reaction(), LossReaction::Continue);
    let failed = WatchdogLoss {
        pid: 12,
        cause: LossCause::Stopped(19),
        replacement: Replacement::Failed("fork: resource temporarily unavailable".into()),
        signal_name: Some("SIGSTOP"),
    };
    assert_eq!(
        failed.reaction(),
        LossReaction::StopAttempt(
            "no watchdog protects the worker any more: the watchdog (pid 12) was stopped by SIGSTOP (the handler killed it); no new watchdog could be started: fork: resource temporarily unavailable".into()
        )
    );
    let gave_up = WatchdogLoss {
        pid: 3,
        cause: LossCause::Exited(1),
        replacement: Replacement::GaveUp { losses: 4 },
        signal_name: None,
    };
    assert!(matches!(gave_up.reaction(), LossReaction::StopAttempt(_)));
    assert!(gave_up.describe().contains("exited with code 1"));
}

#[test]
fn the_stop_report_names_groups_escapees_and_survivors() {
    let report = StopReport {
        groups: vec![100],
        escaped: vec![201, 202],
        survivors: vec![],
    };
    assert_eq!(
        report.message(7),
        "[ai-session-handler watchdog] the handler (pid 7) ended without stopping its workers; stopped process group 100, killed 2 escaped descendant(s): 201, 202"
    );
    assert!(StopReport::default().is_empty());
    let many = StopReport {
        groups: vec![],
        escaped: (1..=25).collect(),
        survivors: vec![9],
    };
    let text = many.message(7);
    assert!(
        text.contains("20, …; still alive after SIGKILL: 9"),
        "{text}"
    );
}

#[test]
fn the_log_record_names_the_invocation_and_the_attempt_in_either_format() {
    let report = StopReport {
        groups: vec![12],
        escaped: vec![34],
        survivors: Vec::new(),
    };
    let ids = LogIds {
        at: "2026-12-05T00:00:00.000000Z",
        run_id: "r-1",
        attempt_id: Some("a-1"),
        handler_pid: 7,
    };
    let text = report.log_record(&ids, false);
    assert!(
        text.starts_with(
            "2026-12-05T00:00:00.000000Z  WARN run{run_id=r-1}:attempt{attempt_id=\"a-1\"}: ai_session_handler::watchdog: [ai-session-handler watchdog] the handler (pid 7)"
        ),
        "{text}"
    );
    assert!(text.ends_with(" handler_pid=7 groups=[12] escaped=[34] survivors=[]\n"));
    let json: serde_json::Value =
        serde_json::from_str(&report.log_record(&ids, true)).expect("one JSON object");
    assert_eq!(json["level"], "WARN");
    assert_eq!(json["target"], "ai_session_handler::watchdog");
    assert_eq!(json["spans"][0]["run_id"], "r-1");
    assert_eq!(json["span"]["attempt_id"], "a-1");
    assert_eq!(json["fields"]["groups"], serde_json::json!([12]));
}

#[test]
fn a_released_groups_token_is_kept_for_a_handler_that_dies_later() {
    let mut registry = Registry::new(5, 6);
    assert!(!registry.has_work(), "nothing told");
    registry.apply(
        WatchdogMessage::Watch {
            pgid: 100,
            attempt: "helper-1",
        },
        Some(50),
    );
    assert_eq!(registry.watched_token(), Some("helper-1"));
    registry.apply(WatchdogMessage::Release(100), None);
    assert!(!registry.is_watching());
    assert_eq!(registry.watched_token(), None);
    // A hook's escapee carries it until the run's end sweeps it.
    assert_eq!(registry.tokens(), ["helper-1"]);
    assert!(registry.has_work(), "the handler died: search for it");
    registry.apply(WatchdogMessage::Finish, None);
    assert!(!registry.has_work(), "the handler finished: it swept");
}

#[test]
fn suspend_and_resume_travel_as_one_word_each() {
    for message in [
        WatchdogMessage::Suspend,
        WatchdogMessage::Resume,
        WatchdogMessage::Finish,
    ] {
        let mut buffer = [0u8; MAX_MESSAGE];
        let length = message.encode(&mut buffer);
        assert_eq!(WatchdogMessage::parse(&buffer[..length]), Some(message));
    }
    assert_eq!(WatchdogMessage::parse(b"suspend 3"), None);
    let mut registry = Registry::new(5, 6);
    assert!(!registry.suspended());
    registry.apply(WatchdogMessage::Suspend, None);
    assert!(registry.suspended());
    registry.apply(WatchdogMessage::Resume, None);
    assert!(!registry.suspended());
}

#[test]
fn a_handler_stopped_without_a_suspension_is_continued_after_the_limit() {
    let start = std::time::Instant::now();
    let at = |millis: u64| start + std::time::Duration::from_millis(millis);
    let mut stops = HandlerStops::default();
    assert!(!stops.look(false, false, at(0)), "running");
    assert!(!stops.look(true, false, at(100)), "just stopped");
    assert!(!stops.look(true, false, at(1099)));
    assert!(stops.look(true, false, at(1100)), "stopped for the limit");
    assert!(
        !stops.look(true, false, at(1200)),
        "counted again from here"
    );
    assert!(stops.look(true, false, at(2200)));
    // A person's suspension lasts as long as they like.
    let mut stops = HandlerStops::default();
    assert!(!stops.look(true, true, at(0)));
    assert!(!stops.look(true, true, at(60_000)));
    // A stop that ended in between starts over.
    let mut stops = HandlerStops::default();
    assert!(!stops.look(true, false, at(0)));
    assert!(!stops.look(false, false, at(900)));
    assert!(!stops.look(true, false, at(1000)));
    assert!(!stops.look(true, false, at(1900)));
}
