//! Unit tests of the lifecycle events (src/domain/events.rs): event-stream records, summary
//! excerpts, JSON forms, the latest activity and the spacing of progress lines.

use super::*;

#[test]
fn a_record_is_one_flat_json_object_with_millisecond_time() {
    let record = EventRecord {
        at: DateTime::parse_from_rfc3339("2026-12-01T12:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc),
        run_id: "run-1".into(),
        attempt_id: Some("20261201T120000Z-phase-1-x".into()),
        event: RunEvent::WorkerSpawned { pid: 42, pgid: 42 },
    };
    assert_eq!(
        record.to_json_line(),
        r#"{"at":"2026-12-01T12:00:00.123Z","run_id":"run-1","attempt_id":"20261201T120000Z-phase-1-x","event":"worker-spawned","pid":42,"pgid":42}"#
    );
}

#[test]
fn a_long_summary_is_an_excerpt_in_the_stream() {
    let record = |summary: String| EventRecord {
        at: Utc::now(),
        run_id: "r".into(),
        attempt_id: None,
        event: RunEvent::OutcomeCommitted {
            phase_id: "phase-1".into(),
            status: AttemptStatus::Blocked,
            duration_ms: 1,
            summary,
            stdout_bytes: 0,
            stderr_bytes: 0,
            outcome_path: "/k/outcomes/a.json".into(),
            transcript_path: "/k/transcripts/a.txt".into(),
            usage: UsageSummary::unknown(),
            verification: None,
            verification_failure: None,
        },
    };
    let line = record("\u{1}".repeat(1 << 20)).to_json_line();
    assert!(line.len() < 7 * STATE_TEXT_LIMIT, "{} bytes", line.len());
    let value: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert!(
        value["summary"]
            .as_str()
            .unwrap()
            .ends_with("the full text is in /k/outcomes/a.json]")
    );
    let short = record("need a key".into()).to_json_line();
    assert!(short.contains(r#""summary":"need a key""#), "{short}");
}

#[test]
fn statuses_and_lists_keep_their_json_forms() {
    let record = EventRecord {
        at: Utc::now(),
        run_id: "r".into(),
        attempt_id: None,
        event: RunEvent::GroupStopped(GroupReport {
            leaked: vec![1, 2],
            escaped: vec![],
            survivors: vec![],
        }),
    };
    let value: serde_json::Value = serde_json::from_str(&record.to_json_line()).unwrap();
    assert_eq!(value["event"], "group-stopped");
    assert_eq!(value["leaked"], serde_json::json!([1, 2]));
    assert!(value["attempt_id"].is_null());
}

#[test]
fn the_latest_activity_of_the_attempt_is_found_from_the_end() {
    let line = |attempt: &str, event: RunEvent| {
        EventRecord {
            at: Utc::now(),
            run_id: "r".into(),
            attempt_id: Some(attempt.into()),
            event,
        }
        .to_json_line()
    };
    let activity = |text: Option<&str>| RunEvent::Activity {
        text: text.map(str::to_owned),
        since: text.map(|_| "2026-12-01T12:00:00.000Z".to_owned()),
    };
    let prepared = RunEvent::AttemptPrepared {
        phase_id: "phase-1".into(),
        title: "One".into(),
        phase_index: 1,
        phases: 1,
        phase_attempt: 1,
        attempt: 1,
        of: 1,
        agent_cmd: "agent".into(),
        prompt_path: "/p".into(),
        transcript_path: "/t".into(),
    };
    let stream = [
        line("a-1", activity(Some("old attempt"))),
        line("a-2", prepared.clone()),
        line("a-2", activity(Some("thinking"))),
        line("a-2", activity(Some("tool: Bash <cargo test>"))),
        line("a-3", activity(Some("another attempt"))),
        "not json".to_owned(),
    ]
    .join("\n");
    assert_eq!(
        latest_activity(&stream, "a-2"),
        StreamedActivity::Status {
            text: "tool: Bash <cargo test>".into(),
            since: "2026-12-01T12:00:00.000Z".into()
        }
    );
    let cleared = format!("{stream}\n{}", line("a-2", activity(None)));
    assert_eq!(latest_activity(&cleared, "a-2"), StreamedActivity::NoStatus);
    assert_eq!(latest_activity(&stream, "a-9"), StreamedActivity::NotFound);
    let silent = format!("{stream}\n{}", line("a-4", prepared.clone()));
    assert_eq!(latest_activity(&silent, "a-4"), StreamedActivity::NoStatus);
    // A hand-made stream gets no further than the protocol lets an agent.
    let huge = format!(
        "{stream}\n{}",
        line("a-2", activity(Some(&"w\u{1b}".repeat(1000))))
    );
    let StreamedActivity::Status { text, .. } = latest_activity(&huge, "a-2") else {
        panic!("no status");
    };
    assert_eq!(text.chars().count(), 200, "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
}

#[test]
fn progress_lines_are_spaced_by_the_interval_and_the_last_is_held_not_dropped() {
    let start = Utc::now();
    let second = chrono::TimeDelta::seconds(1);
    let interval = chrono::TimeDelta::seconds(2);
    let at = |seconds: i64| start + second * i32::try_from(seconds).unwrap();
    assert_eq!(progress_write(None, at(0), interval), ProgressWrite::Now);
    // Inside the interval: held until it ends.
    assert_eq!(
        progress_write(Some(at(0)), at(1), interval),
        ProgressWrite::At(at(2))
    );
    // Another one before that time replaces the held one, due at the same time.
    assert_eq!(
        progress_write(Some(at(2)), at(1), interval),
        ProgressWrite::At(at(2))
    );
    // After the held one's time, but within an interval of it: the next slot.
    assert_eq!(
        progress_write(Some(at(2)), at(3), interval),
        ProgressWrite::At(at(4))
    );
    assert_eq!(
        progress_write(Some(at(2)), at(4), interval),
        ProgressWrite::Now
    );
}
