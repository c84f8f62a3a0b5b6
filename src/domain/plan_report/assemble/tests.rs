use super::*;
use crate::domain::plan_report::history::parse_line;

fn history(lines: &[&str]) -> Vec<HistoryLine> {
    lines
        .iter()
        .map(|line| parse_line(line.as_bytes()).expect(line))
        .collect()
}

#[test]
fn waits_belong_to_the_attempt_they_preceded() {
    let lines = history(&[
        r#"{"at":"2026-12-04T20:00:00.000Z","run_id":"r1","attempt_id":"a1","event":"attempt-prepared","phase_id":"phase-1","title":"x"}"#,
        r#"{"at":"2026-12-04T20:01:00.000Z","run_id":"r1","attempt_id":"a1","event":"idle-deadline-extended","until":"x","seconds":5}"#,
        r#"{"at":"2026-12-04T20:01:01.000Z","run_id":"r1","attempt_id":"a1","event":"idle-deadline-extended","until":"x","seconds":5}"#,
        r#"{"at":"2026-12-04T20:02:00.000Z","run_id":"r1","attempt_id":null,"event":"retry-scheduled","schedule":{"phase_id":"phase-1","after":"rate-limited","attempt":2,"waits_used":1,"template_index":0,"not_before":"2026-12-04T20:12:00Z","reason":"reset-time","rate_limited":[]},"delay_seconds":600.0,"of":3,"template":"t","reset_phrase":"resets at 20:12","resumed":false}"#,
        r#"{"at":"2026-12-04T20:12:00.500Z","run_id":"r1","attempt_id":null,"event":"retry-due","phase_id":"phase-1","attempt":2}"#,
        r#"{"at":"2026-12-04T20:12:01.000Z","run_id":"r1","attempt_id":"a2","event":"attempt-prepared","phase_id":"phase-1","title":"x"}"#,
        r#"{"at":"2026-12-04T20:13:00.000Z","run_id":"r1","attempt_id":"a2","event":"some-future-event","whatever":1}"#,
    ]);
    let history = History { lines: &lines };
    assert_eq!(history.run_of("a2").as_deref(), Some("r1"));
    assert_eq!(history.idle_extensions("a1"), 2);
    assert!(history.waits_before("phase-1", "a1").is_empty());
    let waits = history.waits_before("phase-1", "a2");
    assert_eq!(waits.len(), 1);
    assert!(waits[0].rate_limited);
    assert_eq!(waits[0].seconds, 600);
    assert_eq!(waits[0].reason, "after rate-limited: resets at 20:12");
    assert!(history.waits_before("phase-2", "a2").is_empty());
}

#[test]
fn an_attempt_id_gives_its_start() {
    assert_eq!(
        started_at_of("20261129T120102Z-phase-2-0f0e"),
        "2026-11-29T12:01:02Z"
    );
    assert_eq!(started_at_of("junk"), "");
}

#[test]
fn unknown_events_and_fields_are_passed_over() {
    let line = parse_line(
        br#"{"at":"x","run_id":null,"attempt_id":null,"event":"hook-failed","hook":"h"}"#,
    )
    .unwrap();
    assert_eq!(line.event, HistoryEvent::Other);
    assert!(parse_line(b"not json").is_none());
    assert!(
        parse_line(br#"{"at":"x","run_id":null,"attempt_id":null,"event":"attempt-prepared"}"#)
            .is_none()
    );
}
