//! Unit and property tests of `domain::outcome`.

use super::*;
use crate::domain::verification::CheckRecord;
use proptest::prelude::*;
use serde_json::{Value, json};
use strum::IntoEnumIterator;

const ID: &str = "20260705T120102Z-phase-1-a1";
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const DIR: &str = "/ws/.ai-session-handler/plans/key";

fn record() -> OutcomeRecord {
    OutcomeRecord {
        attempt_id: ID.into(),
        plan: SnapshotRef {
            path: "/ws/docs/plan.md".into(),
            sha256: SHA.into(),
        },
        phase: PhaseRef {
            id: "phase-1".into(),
            title: "First".into(),
        },
        status: AttemptStatus::AgentFailed,
        summary: "agent command exited with code 7".into(),
        started_at: Timestamp::parse("2026-07-05T12:01:02Z").unwrap(),
        finished_at: Timestamp::parse("2026-07-05T12:03:04Z").unwrap(),
        execution_workspace: "/ws/app".into(),
        artifacts: Artifacts {
            prompt_path: format!("{DIR}/prompts/{ID}.txt"),
            transcript_path: format!("{DIR}/transcripts/{ID}.txt"),
        },
        exit_code: Some(7),
        signal: None,
        duration_ms: None,
        output_bytes: None,
        phase_attempt: None,
        agent_cmd: None,
        verification: None,
        verification_failure: None,
        watchdog_losses: None,
        usage: None,
        budget_note: None,
        changes: None,
    }
}

type Edit = fn(&mut OutcomeRecord);

fn file_name() -> String {
    format!("{ID}.json")
}

fn read(text: &str) -> Result<OutcomeRecord, OutcomeError> {
    OutcomeRecord::from_json(text.as_bytes(), &file_name())
}

fn read_error(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
    let mut value = serde_json::to_value(record()).unwrap();
    edit(value.as_object_mut().unwrap());
    read(&value.to_string()).unwrap_err().0
}

/// The message `validate` gives after `edit`; reading the edited record says the same.
fn invalid(edit: impl FnOnce(&mut OutcomeRecord)) -> String {
    let mut record = record();
    edit(&mut record);
    let message = record.validate().unwrap_err().0;
    assert_eq!(read(&record.to_json()).unwrap_err().0, message);
    message
}

#[test]
fn writes_schema_order_and_round_trips() {
    let expected = format!(
        r#"{{
  "attempt_id": "{ID}",
  "plan": {{
    "path": "/ws/docs/plan.md",
    "sha256": "{SHA}"
  }},
  "phase": {{
    "id": "phase-1",
    "title": "First"
  }},
  "status": "agent-failed",
  "summary": "agent command exited with code 7",
  "started_at": "2026-07-05T12:01:02Z",
  "finished_at": "2026-07-05T12:03:04Z",
  "execution_workspace": "/ws/app",
  "artifacts": {{
    "prompt_path": "{DIR}/prompts/{ID}.txt",
    "transcript_path": "{DIR}/transcripts/{ID}.txt"
  }},
  "exit_code": 7,
  "signal": null
}}
"#
    );
    assert_eq!(record().to_json(), expected);
    assert!(!expected.contains("schema_version"));
    assert_eq!(read(&expected).unwrap(), record());
    assert_eq!(record().file_name(), file_name());
}

// The on-disk key order.
const OUTCOME_KEYS: [&str; 11] = [
    "attempt_id",
    "plan",
    "phase",
    "status",
    "summary",
    "started_at",
    "finished_at",
    "execution_workspace",
    "artifacts",
    "exit_code",
    "signal",
];
/// Keys added later, in on-disk order after the original ones; optional on read.
const OPTIONAL_OUTCOME_KEYS: [&str; 9] = [
    "duration_ms",
    "output_bytes",
    "phase_attempt",
    "agent_cmd",
    "verification",
    "verification_failure",
    "watchdog_losses",
    "usage",
    "budget_note",
];
const ARTIFACTS_KEYS: [&str; 2] = ["prompt_path", "transcript_path"];

#[test]
fn key_constants_match_the_serialized_order() {
    let value = serde_json::to_value(record()).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, OUTCOME_KEYS);
    let artifacts: Vec<&str> = value["artifacts"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(artifacts, ARTIFACTS_KEYS);
}

#[test]
fn signalled_and_unlaunched_records_round_trip() {
    let mut signalled = record();
    signalled.status = AttemptStatus::Interrupted;
    signalled.summary = "handler interrupted while the worker was active".into();
    signalled.exit_code = None;
    signalled.signal = Some(15);
    assert_eq!(read(&signalled.to_json()).unwrap(), signalled);
    let mut unlaunched = record();
    unlaunched.status = AttemptStatus::LaunchFailed;
    unlaunched.exit_code = None;
    assert_eq!(read(&unlaunched.to_json()).unwrap(), unlaunched);
}

#[test]
fn file_name_must_match_the_attempt_id() {
    let text = record().to_json();
    assert_eq!(
        OutcomeRecord::from_json(text.as_bytes(), "other.json")
            .unwrap_err()
            .0,
        "outcome filename does not match attempt_id"
    );
    assert_eq!(
        OutcomeRecord::from_json(text.as_bytes(), ID).unwrap_err().0,
        "outcome filename does not match attempt_id"
    );
    let path = format!("{DIR}/outcomes/{ID}.json");
    assert_eq!(
        OutcomeRecord::from_json(text.as_bytes(), &path).unwrap(),
        record()
    );
}

#[test]
fn structural_errors() {
    assert_eq!(
        read("{\"attempt_id\": }").unwrap_err().0,
        "invalid JSON at line 1, column 16: expected value"
    );
    assert_eq!(read("[1]").unwrap_err().0, "expected $ to be an object");
    assert_eq!(
        read_error(|map| {
            map.insert("schema_version".into(), json!(1));
        }),
        "unexpected key schema_version"
    );
    assert_eq!(
        read_error(|map| {
            map.shift_remove("signal");
            map.insert("b".into(), json!(1));
            map.insert("a".into(), json!(1));
        }),
        "unexpected key a"
    );
    assert_eq!(
        read_error(|map| {
            map.shift_remove("exit_code");
        }),
        "missing required key exit_code"
    );
    assert_eq!(
        read_error(|map| {
            map["plan"]
                .as_object_mut()
                .unwrap()
                .insert("version".into(), json!(1));
        }),
        "unexpected key plan.version"
    );
    assert_eq!(
        read_error(|map| {
            map["artifacts"]
                .as_object_mut()
                .unwrap()
                .shift_remove("transcript_path");
        }),
        "missing required key transcript_path (at artifacts.transcript_path)"
    );
    assert_eq!(
        read_error(|map| {
            map["phase"]
                .as_object_mut()
                .unwrap()
                .insert("body".into(), json!(""));
        }),
        "unexpected key phase.body"
    );
    let cases: Vec<(&str, Value, &str)> = vec![
        ("attempt_id", json!(1), "expected attempt_id to be a string"),
        ("plan", json!(null), "expected plan to be an object"),
        ("phase", json!("phase-1"), "expected phase to be an object"),
        ("artifacts", json!([]), "expected artifacts to be an object"),
        ("status", json!("io-error"), "invalid status 'io-error'"),
        ("status", json!(null), "expected status to be a string"),
        ("summary", json!(null), "expected summary to be a string"),
        (
            "started_at",
            json!("2026-07-05 12:01:02"),
            "expected started_at to include a UTC offset",
        ),
        (
            "finished_at",
            json!("later"),
            "expected finished_at to be an ISO 8601 timestamp",
        ),
        (
            "execution_workspace",
            json!(false),
            "expected execution_workspace to be a string",
        ),
        (
            "exit_code",
            json!(true),
            "expected exit_code to be an integer or null",
        ),
        (
            "exit_code",
            json!(0.5),
            "expected exit_code to be an integer or null",
        ),
        (
            "exit_code",
            json!("7"),
            "expected exit_code to be an integer or null",
        ),
        (
            "exit_code",
            json!(1_i64 << 40),
            "expected exit_code to be an integer or null that fits in 32 bits",
        ),
        (
            "signal",
            json!([]),
            "expected signal to be an integer or null",
        ),
    ];
    for (key, new, message) in cases {
        assert_eq!(
            read_error(|map| {
                map[key] = new;
            }),
            message,
            "{key}"
        );
    }
    assert_eq!(
        read_error(|map| map["plan"]["sha256"] = json!(1)),
        "expected sha256 to be a string (at plan.sha256)"
    );
    assert_eq!(
        read_error(|map| map["artifacts"]["prompt_path"] = json!(null)),
        "expected prompt_path to be a string (at artifacts.prompt_path)"
    );
}

#[test]
fn every_text_field_must_be_nonempty() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            |r| r.attempt_id.clear(),
            "expected attempt_id to be nonempty",
        ),
        (|r| r.plan.path.clear(), "expected plan.path to be nonempty"),
        (
            |r| r.plan.sha256.clear(),
            "expected plan.sha256 to be nonempty",
        ),
        (|r| r.phase.id.clear(), "expected phase.id to be nonempty"),
        (
            |r| r.phase.title.clear(),
            "expected phase.title to be nonempty",
        ),
        (|r| r.summary.clear(), "expected summary to be nonempty"),
        (
            |r| r.execution_workspace.clear(),
            "expected execution_workspace to be nonempty",
        ),
        (
            |r| r.artifacts.prompt_path.clear(),
            "expected artifacts.prompt_path to be nonempty",
        ),
        (
            |r| r.artifacts.transcript_path.clear(),
            "expected artifacts.transcript_path to be nonempty",
        ),
    ];
    for (edit, message) in cases {
        let mut record = record();
        edit(&mut record);
        assert_eq!(record.validate().unwrap_err().0, message);
    }
}

#[test]
fn content_rules() {
    assert!(
        invalid(|r| r.attempt_id = "a/b".into())
            .starts_with("expected attempt_id to be a safe file name")
    );
    assert_eq!(
        invalid(|r| r.plan.sha256 = "abc".into()),
        "expected plan.sha256 to be a lowercase SHA-256 digest"
    );
    assert_eq!(
        invalid(|r| r.plan.path = "docs/plan.md".into()),
        "expected plan.path to be an absolute path"
    );
    assert_eq!(
        invalid(|r| r.execution_workspace = "app".into()),
        "expected execution_workspace to be an absolute path"
    );
    assert_eq!(
        invalid(|r| r.artifacts.prompt_path = "prompt.txt".into()),
        "expected artifacts.prompt_path to be an absolute path"
    );
    assert_eq!(
        invalid(|r| r.artifacts.transcript_path = "t.txt".into()),
        "expected artifacts.transcript_path to be an absolute path"
    );
    assert_eq!(
        invalid(|r| r.signal = Some(9)),
        "exit_code and signal cannot both be set"
    );
    assert_eq!(
        invalid(|r| {
            r.exit_code = None;
            r.signal = Some(0);
        }),
        "expected signal to be positive"
    );
    record().validate().unwrap();
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        let key = prop_oneof![
            prop::sample::select([&OUTCOME_KEYS[..], &ARTIFACTS_KEYS].concat())
                .prop_map(String::from),
            "[a-z_]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..12)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn reading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = OutcomeRecord::from_json(&bytes, "x.json");
    }

    #[test]
    fn reading_arbitrary_json_never_panics(value in arbitrary_json()) {
        let _ = read(&value.to_string());
    }

    #[test]
    fn reading_a_damaged_record_never_panics(key in prop::sample::select(OUTCOME_KEYS.to_vec()), new in arbitrary_json()) {
        let mut value = serde_json::to_value(record()).unwrap();
        value[key] = new;
        if let Ok(read_back) = read(&value.to_string()) {
            prop_assert!(read_back.validate().is_ok());
            prop_assert_eq!(read(&read_back.to_json()).unwrap(), read_back);
        }
    }

    #[test]
    fn valid_records_round_trip(
        summary in "\\PC{1,40}",
        title in "\\PC{1,20}",
        status in prop::sample::select(AttemptStatus::iter().collect::<Vec<_>>()),
        exit_code in proptest::option::of(any::<i32>()),
    ) {
        let mut original = record();
        original.summary = summary;
        original.phase.title = title;
        original.status = status;
        original.exit_code = exit_code;
        if status == AttemptStatus::VerificationFailed {
            let (verification, failure) = failed_verification().to_record();
            original.verification = Some(verification);
            original.verification_failure = failure;
        }
        prop_assert_eq!(original.validate(), Ok(()));
        prop_assert_eq!(read(&original.to_json()), Ok(original));
    }
}

/// A record with the keys added later (duration, sizes, attempt number, template, a failed
/// verification).
fn current_record() -> OutcomeRecord {
    let (verification, verification_failure) = failed_verification().to_record();
    OutcomeRecord {
        status: AttemptStatus::VerificationFailed,
        summary: "implemented the parser; tests pass".into(),
        exit_code: Some(0),
        verification: Some(verification),
        verification_failure,
        duration_ms: Some(1234),
        output_bytes: Some(OutputBytes {
            stdout: 10,
            stderr: 2,
        }),
        phase_attempt: Some(3),
        agent_cmd: Some("ai-session-handler-claude-high".into()),
        watchdog_losses: Some(1),
        usage: Some(
            crate::domain::strict_json::from_value::<UsageSummary>(
                &json!({"input_tokens": 10, "cached_input_tokens": null, "output_tokens": 2,
                    "reasoning_tokens": null, "cost_usd": null, "completeness": "partial",
                    "models": {"m": {"input_tokens": 10, "cached_input_tokens": null,
                        "output_tokens": 2, "reasoning_tokens": null, "cost_usd": null}}}),
            )
            .unwrap(),
        ),
        budget_note: Some("--max-cost cannot be enforced for this agent".into()),
        ..record()
    }
}

#[test]
fn the_later_keys_are_written_after_the_original_ones_and_read_back() {
    let record = current_record();
    let text = record.to_json();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&keys[..OUTCOME_KEYS.len()], OUTCOME_KEYS);
    assert_eq!(&keys[OUTCOME_KEYS.len()..], OPTIONAL_OUTCOME_KEYS);
    assert_eq!(
        value["output_bytes"],
        serde_json::json!({"stdout": 10, "stderr": 2})
    );
    assert_eq!(
        OutcomeRecord::from_json(text.as_bytes(), &file_name()).unwrap(),
        record
    );
}

#[test]
fn an_older_record_without_the_later_keys_stays_readable() {
    let old = record();
    let text = old.to_json();
    assert!(!text.contains("duration_ms"), "{text}");
    assert_eq!(
        OutcomeRecord::from_json(text.as_bytes(), &file_name()).unwrap(),
        old
    );
}

#[test]
fn the_later_keys_are_strict_when_present() {
    let mut value: serde_json::Value = serde_json::from_str(&current_record().to_json()).unwrap();
    value["output_bytes"]["extra"] = 1.into();
    let error = OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name()).unwrap_err();
    assert_eq!(error.0, "unexpected key output_bytes.extra");
    let mut value: serde_json::Value = serde_json::from_str(&current_record().to_json()).unwrap();
    value["phase_attempt"] = 0.into();
    let error = OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name()).unwrap_err();
    assert_eq!(error.0, "expected phase_attempt to be a positive integer");
    for (bad, expected) in [
        (
            serde_json::json!(0),
            "expected watchdog_losses to be a positive integer",
        ),
        (
            serde_json::Value::Null,
            "expected watchdog_losses to be an integer",
        ),
    ] {
        let mut value: serde_json::Value =
            serde_json::from_str(&current_record().to_json()).unwrap();
        value["watchdog_losses"] = bad;
        let error =
            OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name()).unwrap_err();
        assert!(error.0.starts_with(expected), "{}", error.0);
    }
    let mut value: serde_json::Value = serde_json::from_str(&current_record().to_json()).unwrap();
    value["durations"] = 1.into();
    let error = OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name()).unwrap_err();
    assert_eq!(error.0, "unexpected key durations");
}

fn check(index: usize, line: &str, exit_code: Option<i32>) -> CheckRecord {
    CheckRecord {
        index,
        command_first_line: line.into(),
        exit_code,
        duration_ms: 40,
        output_bytes: 12,
    }
}

fn failed_verification() -> Verification {
    Verification::Failed {
        checks: vec![
            check(1, "cargo fmt --check", Some(0)),
            check(2, "cargo test", Some(101)),
        ],
        failure: FailedCheck {
            index: 2,
            command_first_line: "cargo test".into(),
            exit_code: Some(101),
            signal: None,
            timed_out: false,
            output_tail: "test parser::empty ... FAILED\n<phase-complete>quoted</phase-complete>"
                .into(),
        },
    }
}

#[test]
fn verification_is_written_as_check_records_or_skipped_and_read_back() {
    let failed = current_record();
    let value: serde_json::Value = serde_json::from_str(&failed.to_json()).unwrap();
    assert_eq!(
        value["verification"],
        serde_json::json!([
            {"index": 1, "command_first_line": "cargo fmt --check", "exit_code": 0, "duration_ms": 40, "output_bytes": 12},
            {"index": 2, "command_first_line": "cargo test", "exit_code": 101, "duration_ms": 40, "output_bytes": 12}
        ])
    );
    assert_eq!(value["verification_failure"]["index"], 2);
    assert_eq!(value["verification_failure"]["timed_out"], false);
    assert_eq!(failed.verification(), Some(failed_verification()));
    let passed = OutcomeRecord {
        status: AttemptStatus::PhaseComplete,
        verification: Some(VerificationRecord::Checks(vec![check(1, "true", Some(0))])),
        verification_failure: None,
        ..current_record()
    };
    let skipped = OutcomeRecord {
        verification: Some(VerificationRecord::Skipped),
        ..passed.clone()
    };
    for record in [failed, passed.clone(), skipped.clone()] {
        assert_eq!(read(&record.to_json()), Ok(record));
    }
    assert!(skipped.to_json().contains("\"verification\": \"skipped\""));
    assert_eq!(
        passed.verification(),
        Some(Verification::Passed(vec![check(1, "true", Some(0))]))
    );
    assert_eq!(skipped.verification(), Some(Verification::Skipped));
    assert_eq!(record().verification(), None);
}

#[test]
fn verification_keys_are_strict_and_consistent_with_the_status() {
    let error = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value: serde_json::Value =
            serde_json::from_str(&current_record().to_json()).unwrap();
        edit(&mut value);
        OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name())
            .unwrap_err()
            .0
    };
    assert_eq!(
        error(&|value| value["verification"] = "none".into()),
        "expected verification to be a list of checks or \"skipped\""
    );
    assert_eq!(
        error(&|value| value["verification"][0]["extra"] = 1.into()),
        "unexpected key verification[0].extra"
    );
    assert_eq!(
        error(&|value| value["verification"][1]["index"] = 3.into()),
        "expected verification[1].index to be 2"
    );
    assert_eq!(
        error(&|value| value["verification_failure"]["index"] = 1.into()),
        "verification_failure.index 1 is not the last check in verification"
    );
    assert_eq!(
        error(&|value| value["verification_failure"]["timed_out"] = "no".into()),
        "expected verification_failure.timed_out to be a boolean"
    );
    assert_eq!(
        error(&|value| {
            value
                .as_object_mut()
                .unwrap()
                .remove("verification_failure");
        }),
        "status verification-failed requires verification_failure"
    );
    assert_eq!(
        error(&|value| value["status"] = "phase-complete".into()),
        "verification_failure cannot go with status phase-complete"
    );
    assert_eq!(
        error(&|value| value["verification"] = "skipped".into()),
        "verification_failure cannot go with verification \"skipped\""
    );
    assert_eq!(
        error(&|value| {
            value.as_object_mut().unwrap().remove("verification");
        }),
        "verification_failure requires verification"
    );
}

#[test]
fn usage_is_read_strictly_and_a_budget_note_is_never_empty() {
    let text = current_record().to_json();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut value: Value = serde_json::from_str(&text).unwrap();
        edit(&mut value);
        OutcomeRecord::from_json(value.to_string().as_bytes(), &file_name())
            .map(|_| ())
            .map_err(|error| error.0)
    };
    assert_eq!(
        with(&|value| value["usage"]["bogus"] = json!(1)),
        Err("unexpected key usage.bogus".to_owned())
    );
    assert_eq!(
        with(&|value| {
            value["usage"]["completeness"] = json!("unknown");
        }),
        Err("usage is unknown but holds numbers; unknown usage has every number null".to_owned())
    );
    assert_eq!(
        with(&|value| value["usage"]["input_tokens"] = json!(-1)),
        Err("expected usage.input_tokens to be a non-negative integer or null".to_owned())
    );
    assert_eq!(
        with(&|value| value["budget_note"] = json!("")),
        Err("expected budget_note to be nonempty".to_owned())
    );
}
