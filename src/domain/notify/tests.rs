//! Unit and property tests of the sd_notify datagram parser, the read guard and the tally.

use proptest::prelude::*;

use super::*;
use crate::domain::status_text::{MAX_STATUS_CHARS, is_unprintable};

fn parse(text: &str) -> Result<Notification, Rejection> {
    parse_datagram(text.as_bytes(), text.len())
}

fn accepted(text: &str) -> Notification {
    parse(text).unwrap_or_else(|rejection| panic!("{text:?} rejected: {rejection}"))
}

#[test]
fn the_honoured_keys_are_read() {
    let notification =
        accepted("STATUS=tool: Bash cargo test\nWATCHDOG=1\nEXTEND_TIMEOUT_USEC=5000000\n");
    assert_eq!(
        notification,
        Notification {
            status: Some(StatusChange::Set("tool: Bash cargo test".to_owned())),
            watchdog: true,
            extend_timeout: Some(Duration::from_secs(5)),
            ..Notification::default()
        }
    );
}

#[test]
fn every_other_key_is_ignored_but_the_datagram_is_accepted() {
    let notification = accepted("READY=1\nBARRIER=1\nMAINPID=42\nX_OTHER=x\nWATCHDOG=trigger");
    assert_eq!(notification.ignored_assignments, 5);
    assert_eq!(notification.status, None);
    assert!(!notification.watchdog, "only WATCHDOG=1 is a ping");
    assert!(notification.invalid_values.is_empty());
}

#[test]
fn the_last_assignment_of_a_key_wins() {
    let notification =
        accepted("STATUS=first\nSTATUS=second\nEXTEND_TIMEOUT_USEC=1\nEXTEND_TIMEOUT_USEC=2");
    assert_eq!(
        notification.status,
        Some(StatusChange::Set("second".to_owned()))
    );
    assert_eq!(notification.extend_timeout, Some(Duration::from_micros(2)));
}

#[test]
fn a_status_becomes_one_printable_bounded_line() {
    let status = |text: &str| accepted(&format!("STATUS={text}")).status;
    assert_eq!(
        status("  tool:\tBash \u{1b}[31mls\r  -la  "),
        Some(StatusChange::Set("tool: Bash [31mls -la".to_owned()))
    );
    assert_eq!(
        status("x\u{202e}y\u{0}z"),
        Some(StatusChange::Set("x y z".to_owned()))
    );
    assert_eq!(status(""), Some(StatusChange::Cleared));
    assert_eq!(status(" \t "), Some(StatusChange::Cleared));
    let long = "é".repeat(500);
    let Some(StatusChange::Set(cut)) = status(&long) else {
        panic!("no status");
    };
    assert_eq!(cut.chars().count(), MAX_STATUS_CHARS);
    assert!(cut.ends_with("é…"), "{cut}");
    let exact = "a".repeat(MAX_STATUS_CHARS);
    assert_eq!(status(&exact), Some(StatusChange::Set(exact.clone())));
}

#[test]
fn an_unparsable_extension_is_an_invalid_value_not_a_rejection() {
    for value in ["", "-5", "5s", "1e6", " 5", "0x10"] {
        let notification = accepted(&format!("EXTEND_TIMEOUT_USEC={value}\nWATCHDOG=1"));
        assert_eq!(notification.extend_timeout, None, "{value:?}");
        assert!(notification.watchdog);
        assert_eq!(notification.invalid_values.len(), 1, "{value:?}");
        assert_eq!(notification.invalid_values[0].key, "EXTEND_TIMEOUT_USEC");
    }
    assert_eq!(
        accepted("EXTEND_TIMEOUT_USEC=0").extend_timeout,
        Some(Duration::ZERO)
    );
    assert_eq!(
        accepted("EXTEND_TIMEOUT_USEC=99999999999999999999999").extend_timeout,
        Some(Duration::from_micros(u64::MAX))
    );
}

#[test]
fn a_usage_report_is_parsed_or_counted_invalid() {
    let notification = accepted("X_AISH_USAGE={\"input_tokens\": 5, \"final\": true}");
    let report = notification.usage.expect("usage").expect("valid");
    assert_eq!(report.totals.input_tokens, Some(5));
    assert!(report.is_final);
    let notification = accepted("X_AISH_USAGE={broken");
    assert!(matches!(notification.usage, Some(Err(_))));
    assert_eq!(notification.invalid_values[0].key, "X_AISH_USAGE");
}

#[test]
fn garbage_is_rejected() {
    assert_eq!(parse(""), Err(Rejection::Empty));
    assert_eq!(parse("\n\n"), Err(Rejection::Empty));
    assert_eq!(parse("hello"), Err(Rejection::Malformed { line: 1 }));
    assert_eq!(
        parse("WATCHDOG=1\nstatus=x"),
        Err(Rejection::Malformed { line: 2 })
    );
    assert_eq!(parse("=1"), Err(Rejection::Malformed { line: 1 }));
    assert_eq!(parse("1KEY=1"), Err(Rejection::Malformed { line: 1 }));
    assert_eq!(parse("STATUS =x"), Err(Rejection::Malformed { line: 1 }));
    assert_eq!(parse_datagram(b"STATUS=\xff", 8), Err(Rejection::NotUtf8));
    assert_eq!(
        parse_datagram(b"WATCHDOG=1", MAX_DATAGRAM_BYTES + 1),
        Err(Rejection::Oversized {
            len: MAX_DATAGRAM_BYTES + 1
        })
    );
    // A length beyond what was received means the buffer truncated the datagram.
    assert_eq!(
        parse_datagram(b"WATCHDOG=1", 64),
        Err(Rejection::Oversized { len: 64 })
    );
    let largest = format!("STATUS={}", "x".repeat(MAX_DATAGRAM_BYTES - 7));
    assert!(parse(&largest).is_ok());
}

#[test]
fn a_crlf_line_end_leaves_a_carriage_return_in_the_value() {
    // systemd splits on \n only; the \r is unprintable and becomes a trimmed space.
    assert_eq!(
        accepted("STATUS=working\r\n").status,
        Some(StatusChange::Set("working".to_owned()))
    );
    assert!(
        !accepted("WATCHDOG=1\r\n").watchdog,
        "WATCHDOG=1\\r is not WATCHDOG=1"
    );
}

#[test]
fn the_tally_counts_and_describes() {
    let mut tally = NotifyTally::default();
    assert_eq!(tally.describe(), None);
    tally.count(&parse("WATCHDOG=1"));
    tally.count(&parse("EXTEND_TIMEOUT_USEC=x"));
    tally.count(&parse("garbage"));
    tally.count(&parse_datagram(b"", MAX_DATAGRAM_BYTES + 5));
    tally.from_outside += 2;
    tally.flooded += 1;
    tally.descriptors_closed += 1;
    assert_eq!(tally.accepted, 2);
    assert_eq!(tally.dropped(), 5);
    assert_eq!(
        tally.describe().as_deref(),
        Some(
            "2 accepted (1 with invalid values, ignored); 5 dropped (2 from outside the \
             attempt, 1 oversized, 1 malformed, 1 over the rate limit); 1 passed \
             descriptors closed"
        )
    );
    let only_accepted = NotifyTally {
        accepted: 3,
        ..NotifyTally::default()
    };
    assert_eq!(only_accepted.describe().as_deref(), Some("3 accepted"));
}

#[test]
fn a_flood_is_parsed_within_the_burst_and_then_at_the_rate() {
    let mut guard = FloodGuard::default();
    let start = Duration::from_secs(1);
    let parsed = (0..10_000).filter(|_| {
        assert_eq!(guard.before_read(start), None);
        guard.may_parse(start)
    });
    assert_eq!(parsed.count(), PARSE_BURST as usize);
    // A second later another second's worth may be parsed.
    let later = start + Duration::from_secs(1);
    let parsed = (0..10_000).filter(|_| guard.may_parse(later)).count();
    assert_eq!(parsed, PARSE_PER_SECOND as usize);
}

#[test]
fn reading_pauses_beyond_the_read_budget() {
    let mut guard = FloodGuard::default();
    let at = Duration::from_secs(1);
    for _ in 0..READ_BURST {
        assert_eq!(guard.before_read(at), None);
    }
    let pause = guard.before_read(at).expect("over the budget");
    assert!(
        pause > Duration::ZERO && pause <= Duration::from_millis(1),
        "{pause:?}"
    );
    assert_eq!(guard.before_read(at + Duration::from_millis(1)), None);
}

proptest! {
    #[test]
    fn never_panics_and_a_status_is_always_printable_and_bounded(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        claimed in 0usize..(MAX_DATAGRAM_BYTES + 64),
    ) {
        let _ = parse_datagram(&bytes, claimed.min(bytes.len()));
        let _ = parse_datagram(&bytes, claimed);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let status = sanitize_status(text);
            prop_assert!(status.chars().count() <= MAX_STATUS_CHARS);
            prop_assert!(!status.chars().any(is_unprintable));
            prop_assert_eq!(status.trim(), status.as_str());
            prop_assert!(!status.contains("  "));
        }
    }

    #[test]
    fn well_formed_assignments_are_always_accepted(
        lines in proptest::collection::vec(("[A-Z_][A-Z0-9_]{0,12}", "[^\n]{0,40}"), 1..8),
    ) {
        let text: String = lines.iter().map(|(key, value)| format!("{key}={value}\n")).collect();
        let parsed = parse(&text);
        prop_assert!(parsed.is_ok(), "{:?}", parsed);
    }

    #[test]
    fn a_line_without_an_assignment_rejects_the_datagram(
        before in proptest::collection::vec("[A-Z]{1,5}=[a-z0-9 ]{0,9}", 0..3),
        garbage in "[a-z ]{1,20}",
    ) {
        let mut lines = before.clone();
        lines.push(garbage);
        let text = lines.join("\n");
        prop_assert_eq!(parse(&text), Err(Rejection::Malformed { line: lines.len() }));
    }
}

#[test]
fn a_sender_is_judged_once_a_while_not_once_a_datagram() {
    let mut verdicts = SenderVerdicts::default();
    let walks = std::cell::Cell::new(0);
    let judge = |member: bool| {
        let walks = &walks;
        move |_: u32| {
            walks.set(walks.get() + 1);
            member
        }
    };
    // An outsider flooding for half a second: judged once.
    for step in 0..10_000u64 {
        let at = Duration::from_micros(step * 50);
        assert!(!verdicts.judge(7, at, judge(false)));
    }
    // A member's flood too, and each keeps its own verdict.
    for step in 0..10_000u64 {
        let at = Duration::from_micros(step * 50);
        assert!(verdicts.judge(8, at, judge(true)));
    }
    assert_eq!(walks.get(), 2);
    // After a second, judged again.
    assert!(verdicts.judge(7, Duration::from_millis(1_000), judge(true)));
    assert_eq!(walks.get(), 3);
}

#[test]
fn judged_senders_are_bounded() {
    let mut verdicts = SenderVerdicts::default();
    let at = Duration::from_secs(5);
    for pid in 0..(3 * MAX_JUDGED_SENDERS as u32) {
        verdicts.judge(pid, at, |_| false);
        assert!(verdicts.judged.len() <= MAX_JUDGED_SENDERS);
    }
    // Stale verdicts make room first.
    let later = at + REJUDGE_AFTER;
    verdicts.judge(u32::MAX, later, |_| true);
    assert_eq!(verdicts.judged.len(), 1);
}
