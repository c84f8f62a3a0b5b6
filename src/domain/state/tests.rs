//! Unit and property tests of the state schema, reader, invariants and transitions.

use super::*;
use crate::domain::identity::ProcessIdentity;
use crate::domain::outcome::Artifacts;
use crate::domain::outcome::OutcomeRecord;
use crate::domain::retry::next_step::RetryReason;
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::timestamp::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use strum::IntoEnumIterator;

const DIR: &str = "/ws/.ai-session-handler/plans/key";
const PLAN_PATH: &str = "/ws/docs/plan.md";
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const OTHER_SHA: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
const ID1: &str = "20260705T120102Z-phase-1-a1";
const ID2: &str = "20260705T120500Z-phase-2-b2";
const ID3: &str = "20260705T121000Z-phase-2-c3";

/// One edit of a valid state, for tables of invariant violations.
type Edit = Box<dyn FnOnce(&mut State)>;

// The on-disk key order of each object.
const STATE_KEYS: [&str; 7] = [
    "plan",
    "completed_phase_ids",
    "committed_outcomes",
    "current_phase",
    "active_attempt",
    "stop",
    "last_run",
];
const OPTIONAL_STATE_KEYS: [&str; 2] = ["retry_schedule", "abandoned_attempts"];
const PLAN_KEYS: [&str; 3] = ["path", "sha256", "accepted_at"];
const PHASE_KEYS: [&str; 2] = ["id", "title"];
const SNAPSHOT_KEYS: [&str; 2] = ["path", "sha256"];
const OUTCOME_REF_KEYS: [&str; 4] = ["attempt_id", "phase_id", "status", "path"];
const OPTIONAL_OUTCOME_REF_KEYS: [&str; 4] =
    ["duration_ms", "output_bytes", "watchdog_losses", "usage"];
const ACTIVE_ATTEMPT_KEYS: [&str; 10] = [
    "id",
    "status",
    "phase",
    "snapshot",
    "execution_workspace",
    "started_at",
    "prompt_path",
    "transcript_path",
    "outcome_path",
    "process",
];
const PROCESS_KEYS: [&str; 4] = ["pid", "process_group_id", "boot_id", "start_time_ticks"];
const STOP_KEYS: [&str; 4] = ["reason", "phase_id", "message", "clarification_request"];
const LAST_RUN_KEYS: [&str; 11] = [
    "run_id",
    "phase_id",
    "status",
    "started_at",
    "finished_at",
    "exit_code",
    "execution_workspace",
    "prompt_path",
    "transcript_path",
    "outcome_path",
    "summary",
];

fn layout() -> StateLayout {
    StateLayout { dir: DIR.into() }
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn phase(n: u32) -> PhaseRef {
    let titles = ["First", "Second", "Third"];
    PhaseRef {
        id: format!("phase-{n}"),
        title: titles[(n - 1) as usize].into(),
    }
}

fn fresh_state() -> State {
    State {
        plan: Some(PlanRecord {
            path: PLAN_PATH.into(),
            sha256: SHA.into(),
            accepted_at: at("2026-07-05T12:00:00Z"),
        }),
        ..State::default()
    }
}

fn prepared(id: &str, phase: PhaseRef, started_at: &str) -> ActiveAttempt {
    let layout = layout();
    ActiveAttempt {
        id: id.into(),
        status: ActiveStatus::Prepared,
        phase,
        snapshot: SnapshotRef {
            path: PLAN_PATH.into(),
            sha256: SHA.into(),
        },
        execution_workspace: "/ws/app".into(),
        started_at: at(started_at),
        prompt_path: layout.prompt_path(id),
        transcript_path: layout.transcript_path(id),
        outcome_path: layout.outcome_path(id),
        process: None,
    }
}

fn identity() -> ProcessIdentity {
    ProcessIdentity {
        pid: 4242,
        process_group_id: 4242,
        boot_id: "boot-a".into(),
        start_time_ticks: 987654,
    }
}

fn outcome(
    attempt: &ActiveAttempt,
    status: AttemptStatus,
    summary: &str,
    finished_at: &str,
) -> OutcomeRecord {
    OutcomeRecord {
        attempt_id: attempt.id.clone(),
        plan: attempt.snapshot.clone(),
        phase: attempt.phase.clone(),
        status,
        summary: summary.into(),
        started_at: attempt.started_at,
        finished_at: at(finished_at),
        execution_workspace: attempt.execution_workspace.clone(),
        artifacts: Artifacts {
            prompt_path: attempt.prompt_path.clone(),
            transcript_path: attempt.transcript_path.clone(),
        },
        exit_code: Some(0),
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

/// Runs `attempt` to `status` through every transition, validating at each write point.
fn run_attempt(state: &mut State, attempt: ActiveAttempt, status: AttemptStatus, summary: &str) {
    let two_minutes_later = attempt.started_at.as_datetime() + chrono::Duration::minutes(2);
    let finished_at = Timestamp::from_datetime(two_minutes_later).to_string();
    let record = outcome(&attempt, status, summary, &finished_at);
    let id = attempt.id.clone();
    let path = attempt.outcome_path.clone();
    state.prepare(attempt).unwrap();
    state.validate(&layout()).unwrap();
    state.mark_running(&id, Some(identity())).unwrap();
    state.validate(&layout()).unwrap();
    state.commit(&record, &path).unwrap();
    state.validate(&layout()).unwrap();
}

/// Phase 1 completed, phase 2 stopped waiting for clarification (the original test suite, item 2).
fn clarification_state() -> State {
    let mut state = fresh_state();
    let first = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    run_attempt(&mut state, first, AttemptStatus::PhaseComplete, "done one");
    let second = prepared(ID2, phase(2), "2026-07-05T12:05:00Z");
    run_attempt(
        &mut state,
        second,
        AttemptStatus::NeedsClarification,
        "Which database?",
    );
    state
}

/// Phase 1 completed, phase 2 running with a recorded identity.
fn running_state() -> State {
    let mut state = fresh_state();
    let first = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    run_attempt(&mut state, first, AttemptStatus::PhaseComplete, "done one");
    state
        .prepare(prepared(ID2, phase(2), "2026-07-05T12:05:00Z"))
        .unwrap();
    state.mark_running(ID2, Some(identity())).unwrap();
    state
}

fn read(text: &str) -> Result<State, StateError> {
    State::from_json(text.as_bytes(), &layout())
}

/// The message for `state` serialized, edited as JSON by `edit`, and read back.
fn read_error(state: &State, edit: impl FnOnce(&mut Value)) -> String {
    let mut value = serde_json::to_value(state).unwrap();
    edit(&mut value);
    read(&value.to_string()).unwrap_err().to_string()
}

fn at_pointer<'a>(value: &'a mut Value, pointer: &str) -> &'a mut Value {
    value.pointer_mut(pointer).unwrap()
}

fn set(pointer: &'static str, new: Value) -> impl FnOnce(&mut Value) {
    move |value| *at_pointer(value, pointer) = new
}

fn insert(pointer: &'static str, key: &'static str) -> impl FnOnce(&mut Value) {
    move |value| {
        at_pointer(value, pointer)
            .as_object_mut()
            .unwrap()
            .insert(key.into(), json!(1));
    }
}

fn remove(pointer: &'static str, key: &'static str) -> impl FnOnce(&mut Value) {
    move |value| {
        at_pointer(value, pointer)
            .as_object_mut()
            .unwrap()
            .shift_remove(key)
            .unwrap();
    }
}

/// The message `validate` gives for `state` after `edit`; reading the serialized edit
/// must give the same message.
fn invalid(mut state: State, edit: impl FnOnce(&mut State)) -> String {
    edit(&mut state);
    let message = state.validate(&layout()).unwrap_err().to_string();
    assert_eq!(read(&state.to_json()).unwrap_err().to_string(), message);
    message
}

// ---- reading, writing, round trips (as in the original test suite) ----

#[test]
fn the_empty_state_writes_every_key_and_round_trips() {
    let state = State::default();
    assert_eq!(
        state.to_json(),
        "{\n  \"plan\": null,\n  \"completed_phase_ids\": [],\n  \"committed_outcomes\": [],\n  \
             \"current_phase\": null,\n  \"active_attempt\": null,\n  \"stop\": null,\n  \
             \"last_run\": null\n}\n"
    );
    assert_eq!(
        State::from_json(state.to_json().as_bytes(), &layout()).unwrap(),
        state
    );
    assert_eq!(
        State::from_json(b"[]", &layout()).unwrap_err().to_string(),
        "expected $ to be an object"
    );
}

#[test]
fn stopped_state_writes_schema_order_and_round_trips() {
    let state = clarification_state();
    let expected = format!(
        r#"{{
  "plan": {{
    "path": "{PLAN_PATH}",
    "sha256": "{SHA}",
    "accepted_at": "2026-07-05T12:00:00Z"
  }},
  "completed_phase_ids": [
    "phase-1"
  ],
  "committed_outcomes": [
    {{
      "attempt_id": "{ID1}",
      "phase_id": "phase-1",
      "status": "phase-complete",
      "path": "{DIR}/outcomes/{ID1}.json"
    }},
    {{
      "attempt_id": "{ID2}",
      "phase_id": "phase-2",
      "status": "needs-clarification",
      "path": "{DIR}/outcomes/{ID2}.json"
    }}
  ],
  "current_phase": {{
    "id": "phase-2",
    "title": "Second"
  }},
  "active_attempt": null,
  "stop": {{
    "reason": "needs-clarification",
    "phase_id": "phase-2",
    "message": null,
    "clarification_request": "Which database?"
  }},
  "last_run": {{
    "run_id": "{ID2}",
    "phase_id": "phase-2",
    "status": "needs-clarification",
    "started_at": "2026-07-05T12:05:00Z",
    "finished_at": "2026-07-05T12:07:00Z",
    "exit_code": 3,
    "execution_workspace": "/ws/app",
    "prompt_path": "{DIR}/prompts/{ID2}.txt",
    "transcript_path": "{DIR}/transcripts/{ID2}.txt",
    "outcome_path": "{DIR}/outcomes/{ID2}.json",
    "summary": "Which database?"
  }}
}}
"#
    );
    assert_eq!(state.to_json(), expected);
    assert!(!expected.contains("schema_version"));
    assert_eq!(read(&expected).unwrap(), state);
}

#[test]
fn running_attempt_writes_schema_order_and_round_trips() {
    let state = running_state();
    let text = state.to_json();
    let expected_attempt = format!(
        r#"  "active_attempt": {{
    "id": "{ID2}",
    "status": "running",
    "phase": {{
      "id": "phase-2",
      "title": "Second"
    }},
    "snapshot": {{
      "path": "{PLAN_PATH}",
      "sha256": "{SHA}"
    }},
    "execution_workspace": "/ws/app",
    "started_at": "2026-07-05T12:05:00Z",
    "prompt_path": "{DIR}/prompts/{ID2}.txt",
    "transcript_path": "{DIR}/transcripts/{ID2}.txt",
    "outcome_path": "{DIR}/outcomes/{ID2}.json",
    "process": {{
      "pid": 4242,
      "process_group_id": 4242,
      "boot_id": "boot-a",
      "start_time_ticks": 987654
    }}
  }},
  "stop": null,
"#
    );
    assert!(text.contains(&expected_attempt), "{text}");
    assert_eq!(read(&text).unwrap(), state);
}

#[test]
fn key_constants_match_the_serialized_order() {
    fn keys(value: &Value) -> Vec<&str> {
        value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }
    let running = serde_json::to_value(running_state()).unwrap();
    let stopped = serde_json::to_value(clarification_state()).unwrap();
    assert_eq!(keys(&running), STATE_KEYS);
    assert_eq!(keys(&running["plan"]), PLAN_KEYS);
    assert_eq!(keys(&running["current_phase"]), PHASE_KEYS);
    assert_eq!(keys(&running["active_attempt"]), ACTIVE_ATTEMPT_KEYS);
    assert_eq!(keys(&running["active_attempt"]["snapshot"]), SNAPSHOT_KEYS);
    assert_eq!(keys(&running["active_attempt"]["process"]), PROCESS_KEYS);
    assert_eq!(keys(&running["committed_outcomes"][0]), OUTCOME_REF_KEYS);
    assert_eq!(keys(&stopped["stop"]), STOP_KEYS);
    assert_eq!(keys(&stopped["last_run"]), LAST_RUN_KEYS);
}

// ---- structural errors (docs/state-and-recovery.md) ----

#[test]
fn invalid_json_names_line_and_column() {
    assert_eq!(
        read("{\n  \"plan\": x\n}").unwrap_err().to_string(),
        "invalid JSON at line 2, column 11: expected value"
    );
    assert_eq!(
        read("{").unwrap_err().to_string(),
        "invalid JSON at line 1, column 2: EOF while parsing an object"
    );
    assert_eq!(
        State::from_json(b"\xff", &layout())
            .unwrap_err()
            .to_string(),
        "invalid JSON at line 1, column 1: expected value"
    );
}

#[test]
fn top_level_must_be_an_object() {
    assert_eq!(
        read("[]").unwrap_err().to_string(),
        "expected $ to be an object"
    );
    assert_eq!(
        read("null").unwrap_err().to_string(),
        "expected $ to be an object"
    );
}

#[test]
fn unexpected_and_missing_keys_are_named() {
    let state = clarification_state();
    let running = running_state();
    // The original runner's state-validation cases: unknown, missing and mistyped keys.
    assert_eq!(
        read_error(&state, insert("", "obsolete")),
        "unexpected key obsolete"
    );
    assert_eq!(
        read_error(&state, insert("", "schema_version")),
        "unexpected key schema_version"
    );
    assert_eq!(
        read_error(&state, remove("", "active_attempt")),
        "missing required key active_attempt"
    );
    assert_eq!(
        read_error(&state, insert("/plan", "obsolete")),
        "unexpected key plan.obsolete"
    );
    assert_eq!(
        read_error(&state, insert("/plan", "version")),
        "unexpected key plan.version"
    );
    assert_eq!(
        read_error(&running, insert("/active_attempt/snapshot", "extra")),
        "unexpected key active_attempt.snapshot.extra"
    );
    assert_eq!(
        read_error(&running, insert("/active_attempt/process", "extra")),
        "unexpected key active_attempt.process.extra"
    );
    assert_eq!(
        read_error(&state, insert("/committed_outcomes/0", "extra")),
        "unexpected key committed_outcomes[0].extra"
    );
    assert_eq!(
        read_error(&state, insert("/stop", "note")),
        "unexpected key stop.note"
    );
    assert_eq!(
        read_error(&state, insert("/last_run", "note")),
        "unexpected key last_run.note"
    );
    assert_eq!(
        read_error(&state, insert("/current_phase", "body")),
        "unexpected key current_phase.body"
    );
    // Several unexpected keys: the alphabetically first, and before any missing key.
    assert_eq!(
        read_error(&state, |value| {
            insert("", "zz")(value);
            insert("", "aa")(value);
            remove("", "plan")(value);
        }),
        "unexpected key aa"
    );
    // Missing nested keys are reported bare.
    assert_eq!(
        read_error(&state, remove("/plan", "sha256")),
        "missing required key sha256 (at plan.sha256)"
    );
    assert_eq!(
        read_error(&running, remove("/active_attempt/process", "boot_id")),
        "missing required key boot_id (at active_attempt.process.boot_id)"
    );
    assert_eq!(
        read_error(&state, remove("/last_run", "outcome_path")),
        "missing required key outcome_path (at last_run.outcome_path)"
    );
    assert_eq!(
        read_error(&state, remove("/stop", "clarification_request")),
        "missing required key clarification_request (at stop.clarification_request)"
    );
    assert_eq!(
        read_error(&state, |value| {
            remove("", "completed_phase_ids")(value);
            remove("", "last_run")(value);
        }),
        "missing required key completed_phase_ids"
    );
}

#[test]
fn wrong_types_are_named() {
    let state = clarification_state();
    let running = running_state();
    let cases: Vec<(&State, &'static str, Value, &str)> = vec![
        (&state, "/plan", json!("x"), "expected plan to be an object"),
        (
            &state,
            "/current_phase",
            json!([]),
            "expected current_phase to be an object",
        ),
        (&state, "/stop", json!(1), "expected stop to be an object"),
        (
            &state,
            "/last_run",
            json!(true),
            "expected last_run to be an object",
        ),
        (
            &running,
            "/active_attempt",
            json!("x"),
            "expected active_attempt to be an object",
        ),
        (
            &running,
            "/active_attempt/phase",
            json!(null),
            "expected active_attempt.phase to be an object",
        ),
        (
            &running,
            "/active_attempt/snapshot",
            json!(1),
            "expected active_attempt.snapshot to be an object",
        ),
        (
            &running,
            "/active_attempt/process",
            json!([]),
            "expected active_attempt.process to be an object",
        ),
        (
            &state,
            "/committed_outcomes/1",
            json!("x"),
            "expected committed_outcomes[1] to be an object",
        ),
        (
            &state,
            "/completed_phase_ids",
            json!("phase-1"),
            "expected completed_phase_ids to be a list",
        ),
        (
            &state,
            "/completed_phase_ids/0",
            json!(1),
            "expected completed_phase_ids[0] to be a string",
        ),
        (
            &state,
            "/committed_outcomes",
            json!({}),
            "expected committed_outcomes to be a list",
        ),
        (
            &state,
            "/plan/path",
            json!(null),
            "expected path to be a string (at plan.path)",
        ),
        (
            &state,
            "/plan/sha256",
            json!(1),
            "expected sha256 to be a string (at plan.sha256)",
        ),
        (
            &state,
            "/current_phase/title",
            json!(null),
            "expected title to be a string (at current_phase.title)",
        ),
        (
            &state,
            "/stop/message",
            json!(1),
            "expected message to be a string or null (at stop.message)",
        ),
        (
            &state,
            "/stop/clarification_request",
            json!([]),
            "expected clarification_request to be a string or null (at stop.clarification_request)",
        ),
        (
            &state,
            "/last_run/exit_code",
            json!(true),
            "expected exit_code to be an integer (at last_run.exit_code)",
        ),
        (
            &state,
            "/last_run/exit_code",
            json!(3.0),
            "expected exit_code to be an integer (at last_run.exit_code)",
        ),
        (
            &state,
            "/last_run/exit_code",
            json!("3"),
            "expected exit_code to be an integer (at last_run.exit_code)",
        ),
        (
            &state,
            "/last_run/exit_code",
            json!(1_i64 << 40),
            "expected exit_code to be an integer that fits in 32 bits (at last_run.exit_code)",
        ),
        (
            &state,
            "/last_run/outcome_path",
            json!(1),
            "expected outcome_path to be a string or null (at last_run.outcome_path)",
        ),
        (
            &state,
            "/last_run/summary",
            json!(null),
            "expected summary to be a string (at last_run.summary)",
        ),
        (
            &running,
            "/active_attempt/process/pid",
            json!(0),
            "expected pid to be a positive integer (at active_attempt.process.pid)",
        ),
        (
            &running,
            "/active_attempt/process/pid",
            json!(-1),
            "expected pid to be a positive integer (at active_attempt.process.pid)",
        ),
        (
            &running,
            "/active_attempt/process/pid",
            json!(true),
            "expected pid to be a positive integer (at active_attempt.process.pid)",
        ),
        (
            &running,
            "/active_attempt/process/pid",
            json!(1_u64 << 33),
            "expected pid to be a positive integer that fits in 32 bits (at active_attempt.process.pid)",
        ),
        (
            &running,
            "/active_attempt/process/process_group_id",
            json!(1.5),
            "expected process_group_id to be a positive integer (at active_attempt.process.process_group_id)",
        ),
        (
            &running,
            "/active_attempt/process/start_time_ticks",
            json!("9"),
            "expected start_time_ticks to be a positive integer (at active_attempt.process.start_time_ticks)",
        ),
        (
            &running,
            "/active_attempt/process/boot_id",
            json!(null),
            "expected boot_id to be a string (at active_attempt.process.boot_id)",
        ),
        (
            &running,
            "/active_attempt/outcome_path",
            json!(null),
            "expected outcome_path to be a string (at active_attempt.outcome_path)",
        ),
    ];
    for (state, pointer, new, message) in cases {
        assert_eq!(read_error(state, set(pointer, new)), message, "{pointer}");
    }
}

#[test]
fn invalid_enumeration_values_are_named() {
    let state = clarification_state();
    let running = running_state();
    assert_eq!(
        read_error(&state, set("/committed_outcomes/0/status", json!("x"))),
        "invalid status 'x' (at committed_outcomes[0].status)"
    );
    assert_eq!(
        read_error(&state, set("/last_run/status", json!("done"))),
        "invalid status 'done' (at last_run.status)"
    );
    assert_eq!(
        read_error(&state, set("/stop/reason", json!("x"))),
        "invalid reason 'x' (at stop.reason)"
    );
    assert_eq!(
        read_error(&state, set("/stop/reason", json!("phase-complete"))),
        "invalid reason 'phase-complete' (at stop.reason)"
    );
    assert_eq!(
        read_error(&running, set("/active_attempt/status", json!("finished"))),
        "invalid status 'finished' (at active_attempt.status)"
    );
    assert_eq!(
        read_error(&state, set("/last_run/status", json!("io-error"))),
        "invalid status 'io-error' (at last_run.status)"
    );
    assert_eq!(
        read_error(&state, set("/stop/reason", json!(2))),
        "expected reason to be a string (at stop.reason)"
    );
}

#[test]
fn timestamps_must_carry_an_offset() {
    let state = clarification_state();
    let running = running_state();
    assert_eq!(
        read_error(
            &state,
            set("/plan/accepted_at", json!("2026-07-05T12:00:00"))
        ),
        "expected plan.accepted_at to include a UTC offset"
    );
    assert_eq!(
        read_error(&state, set("/plan/accepted_at", json!("noon"))),
        "expected plan.accepted_at to be an ISO 8601 timestamp"
    );
    assert_eq!(
        read_error(&running, set("/active_attempt/started_at", json!(""))),
        "expected active_attempt.started_at to be an ISO 8601 timestamp"
    );
    assert_eq!(
        read_error(
            &state,
            set("/last_run/finished_at", json!("2026-13-01T00:00:00Z"))
        ),
        "expected last_run.finished_at to be an ISO 8601 timestamp"
    );
    assert_eq!(
        read_error(&state, set("/last_run/started_at", json!(5))),
        "expected started_at to be a string (at last_run.started_at)"
    );
    // Any offset is accepted on read and normalized to UTC on write.
    let mut value = serde_json::to_value(&state).unwrap();
    *at_pointer(&mut value, "/plan/accepted_at") = json!("2026-07-05T14:00:00+02:00");
    assert_eq!(read(&value.to_string()).unwrap(), state);
}

// ---- semantic errors, in docs/state-and-recovery.md ----

#[test]
fn completed_phase_ids_are_unique_and_nonempty() {
    let state = clarification_state();
    assert_eq!(
        invalid(state.clone(), |s| s
            .completed_phase_ids
            .push("phase-1".into())),
        "completed_phase_ids contains duplicates"
    );
    assert_eq!(
        invalid(state, |s| s.completed_phase_ids.push(String::new())),
        "completed_phase_ids cannot contain an empty id"
    );
}

#[test]
fn current_phase_fields_are_nonempty() {
    let state = clarification_state();
    assert_eq!(
        invalid(state.clone(), |s| s
            .current_phase
            .as_mut()
            .unwrap()
            .id
            .clear()),
        "expected current_phase.id to be nonempty"
    );
    assert_eq!(
        invalid(state, |s| s.current_phase.as_mut().unwrap().title.clear()),
        "expected current_phase.title to be nonempty"
    );
}

#[test]
fn plan_record_is_checked() {
    let state = clarification_state();
    fn plan(s: &mut State) -> &mut PlanRecord {
        s.plan.as_mut().unwrap()
    }
    assert_eq!(
        invalid(state.clone(), |s| plan(s).path = "docs/plan.md".into()),
        "expected plan.path to be an absolute path"
    );
    assert_eq!(
        invalid(state.clone(), |s| plan(s).sha256 = SHA.to_uppercase()),
        "expected plan.sha256 to be a lowercase SHA-256 digest"
    );
    assert_eq!(
        invalid(state, |s| plan(s).sha256 = "abc".into()),
        "expected plan.sha256 to be a lowercase SHA-256 digest"
    );
}

#[test]
fn active_attempt_and_stop_are_exclusive() {
    let stop = clarification_state().stop;
    assert_eq!(
        invalid(running_state(), |s| s.stop = stop),
        "active_attempt and stop cannot both be set"
    );
}

#[test]
fn active_attempt_invariants() {
    let running = running_state();
    fn attempt(s: &mut State) -> &mut ActiveAttempt {
        s.active_attempt.as_mut().unwrap()
    }
    let cases: Vec<(Edit, String)> = vec![
        (
            Box::new(|s| s.plan = None),
            "active_attempt requires plan".into(),
        ),
        (
            Box::new(move |s| attempt(s).id.clear()),
            "expected active_attempt.id to be nonempty".into(),
        ),
        (
            Box::new(move |s| attempt(s).id = "../escape".into()),
            "expected active_attempt.id to be a safe file name (ASCII letters, digits, '-', '_' \
                 and '.', not starting with '.')"
                .into(),
        ),
        (
            Box::new(move |s| attempt(s).phase.id.clear()),
            "expected active_attempt.phase.id to be nonempty".into(),
        ),
        (
            Box::new(move |s| attempt(s).phase.title.clear()),
            "expected active_attempt.phase.title to be nonempty".into(),
        ),
        (
            Box::new(|s| s.current_phase = None),
            "current_phase must match active_attempt.phase".into(),
        ),
        (
            Box::new(|s| s.current_phase = Some(phase(1))),
            "current_phase must match active_attempt.phase".into(),
        ),
        (
            Box::new(|s| s.current_phase.as_mut().unwrap().title = "Renamed".into()),
            "current_phase must match active_attempt.phase".into(),
        ),
        (
            Box::new(|s| s.completed_phase_ids.push("phase-2".into())),
            "active_attempt phase is already completed".into(),
        ),
        (
            Box::new(move |s| attempt(s).snapshot.path = "/ws/other.md".into()),
            "active_attempt.snapshot.path must match plan.path".into(),
        ),
        (
            Box::new(move |s| attempt(s).snapshot.sha256 = OTHER_SHA.into()),
            "active_attempt.snapshot.sha256 must match plan.sha256".into(),
        ),
        (
            Box::new(move |s| attempt(s).execution_workspace = "app".into()),
            "expected active_attempt.execution_workspace to be an absolute path".into(),
        ),
        (
            Box::new(move |s| attempt(s).prompt_path = format!("{DIR}/prompts/other.txt")),
            format!("expected active_attempt.prompt_path to be {DIR}/prompts/{ID2}.txt"),
        ),
        (
            Box::new(move |s| {
                attempt(s).transcript_path = format!("/elsewhere/transcripts/{ID2}.txt")
            }),
            format!("expected active_attempt.transcript_path to be {DIR}/transcripts/{ID2}.txt"),
        ),
        (
            Box::new(move |s| attempt(s).outcome_path = format!("{DIR}/outcomes/{ID2}.txt")),
            format!("expected active_attempt.outcome_path to be {DIR}/outcomes/{ID2}.json"),
        ),
        (
            Box::new(move |s| attempt(s).status = ActiveStatus::Prepared),
            "prepared active_attempt.process must be null".into(),
        ),
        (
            Box::new(move |s| attempt(s).process.as_mut().unwrap().pid = 0),
            "expected active_attempt.process.pid to be a positive integer".into(),
        ),
        (
            Box::new(move |s| attempt(s).process.as_mut().unwrap().process_group_id = 0),
            "expected active_attempt.process.process_group_id to be a positive integer".into(),
        ),
        (
            Box::new(move |s| attempt(s).process.as_mut().unwrap().start_time_ticks = 0),
            "expected active_attempt.process.start_time_ticks to be a positive integer".into(),
        ),
        (
            Box::new(move |s| attempt(s).process.as_mut().unwrap().boot_id.clear()),
            "expected active_attempt.process.boot_id to be nonempty".into(),
        ),
    ];
    for (edit, message) in cases {
        let mut state = running.clone();
        edit(&mut state);
        assert_eq!(state.validate(&layout()).unwrap_err().to_string(), message);
        // Reading rejects a zero identity field structurally, naming the bare key and
        // then where it is.
        let on_read = if message.contains("positive integer") {
            let path = message
                .trim_start_matches("expected ")
                .trim_end_matches(" to be a positive integer")
                .to_owned();
            format!(
                "{} (at {path})",
                message.replace("active_attempt.process.", "")
            )
        } else {
            message
        };
        assert_eq!(read(&state.to_json()).unwrap_err().to_string(), on_read);
    }
    // A running attempt whose identity could not be read is valid.
    let mut state = running.clone();
    attempt(&mut state).process = None;
    state.validate(&layout()).unwrap();
}

#[test]
fn stop_invariants() {
    let state = clarification_state();
    fn stop(s: &mut State) -> &mut Stop {
        s.stop.as_mut().unwrap()
    }
    assert_eq!(
        invalid(state.clone(), move |s| stop(s).phase_id.clear()),
        "expected stop.phase_id to be nonempty"
    );
    assert_eq!(
        invalid(state.clone(), |s| s.current_phase = None),
        "current_phase must match stop.phase_id"
    );
    assert_eq!(
        invalid(state.clone(), |s| s.current_phase = Some(phase(3))),
        "current_phase must match stop.phase_id"
    );
    assert_eq!(
        invalid(state.clone(), |s| s
            .completed_phase_ids
            .push("phase-2".into())),
        "stopped phase is already completed"
    );
    assert_eq!(
        invalid(state.clone(), move |s| stop(s).clarification_request = None),
        "needs-clarification stop requires clarification_request"
    );
    assert_eq!(
        invalid(state.clone(), move |s| stop(s).clarification_request =
            Some(String::new())),
        "needs-clarification stop requires clarification_request"
    );
    assert_eq!(
        invalid(state.clone(), move |s| stop(s).reason =
            AttemptStatus::Blocked),
        "stop.clarification_request requires needs-clarification reason"
    );
    let mut completed = state;
    stop(&mut completed).reason = AttemptStatus::PhaseComplete;
    assert_eq!(
        completed.validate(&layout()).unwrap_err().to_string(),
        "invalid reason 'phase-complete' (at stop.reason)"
    );
}

#[test]
fn current_phase_needs_a_reason() {
    assert_eq!(
        invalid(clarification_state(), |s| s.stop = None),
        "current_phase requires active_attempt or stop"
    );
}

#[test]
fn committed_outcomes_invariants() {
    let state = clarification_state();
    fn entry(s: &mut State) -> &mut OutcomeRef {
        &mut s.committed_outcomes[0]
    }
    assert_eq!(
        invalid(state.clone(), |s| {
            let first = s.committed_outcomes[0].clone();
            s.committed_outcomes.insert(1, first);
        }),
        "committed_outcomes contains duplicate attempt ids"
    );
    assert_eq!(
        invalid(state.clone(), move |s| entry(s).attempt_id.clear()),
        "expected committed_outcomes[0].attempt_id to be nonempty"
    );
    assert!(
        invalid(state.clone(), move |s| entry(s).attempt_id =
            ".hidden".into())
        .starts_with("expected committed_outcomes[0].attempt_id to be a safe file name")
    );
    assert_eq!(
        invalid(state.clone(), move |s| entry(s).phase_id.clear()),
        "expected committed_outcomes[0].phase_id to be nonempty"
    );
    assert_eq!(
        invalid(state, move |s| entry(s).path =
            format!("{DIR}/outcomes/{ID2}.json")),
        format!("expected committed_outcomes[0].path to be {DIR}/outcomes/{ID1}.json")
    );
}

#[test]
fn last_run_invariants() {
    let state = clarification_state();
    fn last(s: &mut State) -> &mut LastRun {
        s.last_run.as_mut().unwrap()
    }
    let cases: Vec<(Edit, String)> = vec![
        (
            Box::new(move |s| last(s).run_id.clear()),
            "expected last_run.run_id to be nonempty".into(),
        ),
        (
            Box::new(move |s| last(s).phase_id.clear()),
            "expected last_run.phase_id to be nonempty".into(),
        ),
        (
            Box::new(move |s| last(s).execution_workspace = "./app".into()),
            "expected last_run.execution_workspace to be an absolute path".into(),
        ),
        (
            Box::new(move |s| last(s).prompt_path = format!("{DIR}/prompts/{ID1}.txt")),
            format!("expected last_run.prompt_path to be {DIR}/prompts/{ID2}.txt"),
        ),
        (
            Box::new(move |s| last(s).transcript_path = format!("{DIR}/prompts/{ID2}.txt")),
            format!("expected last_run.transcript_path to be {DIR}/transcripts/{ID2}.txt"),
        ),
        (
            Box::new(move |s| last(s).outcome_path = Some(format!("{DIR}/outcomes/{ID1}.json"))),
            format!("expected last_run.outcome_path to be {DIR}/outcomes/{ID2}.json"),
        ),
        (
            Box::new(move |s| last(s).outcome_path = None),
            "only an interrupted recovery may omit last_run.outcome_path".into(),
        ),
        (
            Box::new(move |s| last(s).exit_code = 4),
            "last_run.exit_code does not match status 'needs-clarification'".into(),
        ),
        (
            Box::new(|s| {
                s.completed_phase_ids.clear();
                s.last_run.as_mut().unwrap().status = AttemptStatus::PhaseComplete;
                s.last_run.as_mut().unwrap().exit_code = 0;
            }),
            "completed last_run.phase_id is not in completed_phase_ids".into(),
        ),
        (
            Box::new(|s| {
                s.committed_outcomes.pop();
            }),
            "last_run outcome must be the latest committed_outcomes entry".into(),
        ),
        (
            Box::new(|s| s.committed_outcomes.clear()),
            "last_run outcome must be the latest committed_outcomes entry".into(),
        ),
        (
            Box::new(|s| s.committed_outcomes[1].status = AttemptStatus::Blocked),
            "last_run outcome must be the latest committed_outcomes entry".into(),
        ),
        (
            Box::new(|s| s.committed_outcomes[1].phase_id = "phase-3".into()),
            "last_run outcome must be the latest committed_outcomes entry".into(),
        ),
    ];
    for (edit, message) in cases {
        assert_eq!(invalid(state.clone(), edit), message);
    }
}

#[test]
fn every_status_has_its_handler_exit_code() {
    let parse = |text: &str| text.parse::<AttemptStatus>().ok();
    let parse_active = |text: &str| serde_json::from_value::<ActiveStatus>(json!(text)).ok();
    let codes: Vec<i32> = AttemptStatus::iter()
        .map(|s| s.exit_code().code())
        .collect();
    assert_eq!(codes, [0, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]);
    for status in AttemptStatus::iter() {
        assert_eq!(parse(status.as_str()), Some(status));
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            json!(status.as_str())
        );
    }
    assert_eq!(parse("io-error"), None);
    assert_eq!(parse_active("running"), Some(ActiveStatus::Running));
    assert_eq!(parse_active("prepared"), Some(ActiveStatus::Prepared));
    assert_eq!(parse_active("Running"), None);
}

// ---- transitions (docs/state-and-recovery.md) ----

#[test]
fn prepare_sets_the_current_phase_and_clears_the_stop() {
    let mut state = clarification_state();
    let retry = prepared(ID3, phase(2), "2026-07-05T12:10:00Z");
    state.prepare(retry.clone()).unwrap();
    assert_eq!(state.active_attempt, Some(retry));
    assert_eq!(state.current_phase, Some(phase(2)));
    assert_eq!(state.stop, None);
    state.validate(&layout()).unwrap();
}

#[test]
fn prepare_refuses_to_replace_an_active_attempt_or_a_launched_one() {
    let mut state = running_state();
    let before = state.clone();
    assert_eq!(
        state
            .prepare(prepared(ID3, phase(2), "2026-07-05T12:10:00Z"))
            .unwrap_err()
            .to_string(),
        format!("cannot prepare attempt {ID3}: attempt {ID2} is still active")
    );
    assert_eq!(state, before);
    let mut state = fresh_state();
    let mut launched = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    launched.process = Some(identity());
    assert_eq!(
        state.prepare(launched.clone()).unwrap_err().to_string(),
        format!("cannot prepare attempt {ID1}: a new attempt must be prepared with no process")
    );
    launched.process = None;
    launched.status = ActiveStatus::Running;
    assert!(state.prepare(launched).is_err());
    assert_eq!(state, fresh_state());
}

#[test]
fn mark_running_records_the_identity() {
    let mut state = fresh_state();
    state
        .prepare(prepared(ID1, phase(1), "2026-07-05T12:01:02Z"))
        .unwrap();
    state.mark_running(ID1, None).unwrap();
    let attempt = state.active_attempt.as_ref().unwrap();
    assert_eq!(
        (attempt.status, attempt.process.clone()),
        (ActiveStatus::Running, None)
    );
    state.validate(&layout()).unwrap();
    assert_eq!(
        state
            .mark_running(ID1, Some(identity()))
            .unwrap_err()
            .to_string(),
        format!("cannot mark attempt {ID1} running: it is already running")
    );
}

#[test]
fn mark_running_needs_the_matching_active_attempt() {
    let mut state = fresh_state();
    assert_eq!(
        state.mark_running(ID1, None).unwrap_err().to_string(),
        format!("cannot mark attempt {ID1} running: there is no active attempt")
    );
    state
        .prepare(prepared(ID1, phase(1), "2026-07-05T12:01:02Z"))
        .unwrap();
    assert_eq!(
        state.mark_running(ID2, None).unwrap_err().to_string(),
        format!("cannot mark attempt {ID2} running: the active attempt is {ID1}")
    );
}

#[test]
fn completion_adds_the_phase_and_clears_the_current_phase() {
    // The current-phase reference is set, then cleared.
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    let record = outcome(
        &attempt,
        AttemptStatus::PhaseComplete,
        "all good",
        "2026-07-05T12:03:00Z",
    );
    state.prepare(attempt.clone()).unwrap();
    assert_eq!(state.current_phase, Some(phase(1)));
    state.commit(&record, &attempt.outcome_path).unwrap();
    assert_eq!(state.current_phase, None);
    assert_eq!(state.active_attempt, None);
    assert_eq!(state.stop, None);
    assert_eq!(state.completed_phase_ids, ["phase-1"]);
    assert_eq!(
        state.committed_outcomes,
        [OutcomeRef {
            attempt_id: ID1.into(),
            phase_id: "phase-1".into(),
            status: AttemptStatus::PhaseComplete,
            path: attempt.outcome_path.clone(),
            duration_ms: None,
            output_bytes: None,
            watchdog_losses: None,
            usage: None,
            changed_nothing: None,
        }]
    );
    assert_eq!(
        state.last_run,
        Some(LastRun {
            run_id: ID1.into(),
            phase_id: "phase-1".into(),
            status: AttemptStatus::PhaseComplete,
            started_at: at("2026-07-05T12:01:02Z"),
            finished_at: at("2026-07-05T12:03:00Z"),
            exit_code: 0,
            execution_workspace: "/ws/app".into(),
            prompt_path: attempt.prompt_path,
            transcript_path: attempt.transcript_path,
            outcome_path: Some(attempt.outcome_path),
            summary: "all good".into(),
        })
    );
    state.validate(&layout()).unwrap();
}

#[test]
fn a_failed_check_is_the_stop_message_and_the_agents_summary_stays_the_last_runs() {
    use crate::domain::verification::{CheckRecord, FailedCheck, VerificationRecord};
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    let mut record = outcome(
        &attempt,
        AttemptStatus::VerificationFailed,
        "implemented the parser",
        "2026-07-05T12:03:00Z",
    );
    record.verification = Some(VerificationRecord::Checks(vec![CheckRecord {
        index: 1,
        command_first_line: "cargo test".into(),
        exit_code: Some(101),
        duration_ms: 5,
        output_bytes: 9,
    }]));
    record.verification_failure = Some(FailedCheck {
        index: 1,
        command_first_line: "cargo test".into(),
        exit_code: Some(101),
        signal: None,
        timed_out: false,
        output_tail: "test parse ... FAILED".into(),
    });
    record.validate().unwrap();
    state.prepare(attempt.clone()).unwrap();
    state.commit(&record, &attempt.outcome_path).unwrap();
    state.validate(&layout()).unwrap();
    let stop = state.stop.as_ref().unwrap();
    assert_eq!(stop.reason, AttemptStatus::VerificationFailed);
    assert_eq!(
        stop.message.as_deref(),
        Some("verify check 1 (cargo test) exited with code 101")
    );
    assert_eq!(
        state.last_run.as_ref().unwrap().summary,
        "implemented the parser"
    );
    assert_eq!(state.last_run.as_ref().unwrap().exit_code, 4);
}

#[test]
fn non_completion_stops_the_phase() {
    for status in AttemptStatus::iter() {
        if status == AttemptStatus::PhaseComplete {
            continue;
        }
        let mut state = fresh_state();
        let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        run_attempt(&mut state, attempt, status, "line one\nline two");
        let clarifying = status == AttemptStatus::NeedsClarification;
        assert_eq!(
            state.stop,
            Some(Stop {
                reason: status,
                phase_id: "phase-1".into(),
                message: (!clarifying).then(|| "line one\nline two".into()),
                clarification_request: clarifying.then(|| "line one\nline two".into()),
            }),
            "{status}"
        );
        assert_eq!(state.current_phase, Some(phase(1)));
        assert!(state.completed_phase_ids.is_empty());
        assert_eq!(state.committed_outcomes.len(), 1);
        let last_run = state.last_run.as_ref().unwrap();
        assert_eq!(last_run.exit_code, status.exit_code().code());
        assert_eq!(last_run.status, status);
        assert_eq!(read(&state.to_json()).unwrap(), state);
    }
}

#[test]
fn commit_needs_the_matching_active_attempt() {
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    let record = outcome(
        &attempt,
        AttemptStatus::PhaseComplete,
        "ok",
        "2026-07-05T12:03:00Z",
    );
    assert_eq!(
        state
            .commit(&record, &attempt.outcome_path)
            .unwrap_err()
            .to_string(),
        format!("cannot commit attempt {ID1}: there is no active attempt")
    );
    state
        .prepare(prepared(ID2, phase(2), "2026-07-05T12:01:02Z"))
        .unwrap();
    assert_eq!(
        state
            .commit(&record, &attempt.outcome_path)
            .unwrap_err()
            .to_string(),
        format!("cannot commit attempt {ID1}: the active attempt is {ID2}")
    );

    let mut state = fresh_state();
    state.prepare(attempt.clone()).unwrap();
    let before = state.clone();
    let mut other_phase = record.clone();
    other_phase.phase = phase(2);
    assert_eq!(
        state
            .commit(&other_phase, &attempt.outcome_path)
            .unwrap_err()
            .to_string(),
        format!(
            "cannot commit attempt {ID1}: the outcome is for phase phase-2, the attempt for phase phase-1"
        )
    );
    assert_eq!(
        state
            .commit(&record, "/tmp/x.json")
            .unwrap_err()
            .to_string(),
        format!(
            "cannot commit attempt {ID1}: outcome path /tmp/x.json is not the planned {}",
            attempt.outcome_path
        )
    );
    assert_eq!(state, before);
}

#[test]
fn abandoned_attempt_resolves_as_interrupted_without_a_commit() {
    let mut state = running_state();
    let committed_before = state.committed_outcomes.clone();
    state.resolve_abandoned(at("2026-07-05T13:00:00Z")).unwrap();
    assert_eq!(state.active_attempt, None);
    assert_eq!(state.current_phase, Some(phase(2)));
    assert_eq!(state.committed_outcomes, committed_before);
    assert_eq!(
        state.last_run,
        Some(LastRun {
            run_id: ID2.into(),
            phase_id: "phase-2".into(),
            status: AttemptStatus::Interrupted,
            started_at: at("2026-07-05T12:05:00Z"),
            finished_at: at("2026-07-05T13:00:00Z"),
            exit_code: 4,
            execution_workspace: "/ws/app".into(),
            prompt_path: layout().prompt_path(ID2),
            transcript_path: layout().transcript_path(ID2),
            outcome_path: None,
            summary:
                "previous handler ended without recording a terminal outcome; result is unknown"
                    .into(),
        })
    );
    // Alone this is not a state to write; with the retry prepared it is.
    assert_eq!(
        state.validate(&layout()).unwrap_err().to_string(),
        "current_phase requires active_attempt or stop"
    );
    state
        .prepare(prepared(ID3, phase(2), "2026-07-05T13:00:00Z"))
        .unwrap();
    state.validate(&layout()).unwrap();
    assert_eq!(read(&state.to_json()).unwrap(), state);
    // The abandoned attempt is listed, so the phase's attempts still count it.
    assert_eq!(
        state.abandoned_attempts,
        [AbandonedRef {
            attempt_id: ID2.into(),
            phase_id: "phase-2".into(),
            started_at: at("2026-07-05T12:05:00Z"),
            resolved_at: at("2026-07-05T13:00:00Z"),
        }]
    );
    assert_eq!(state.finished_attempts_of("phase-2"), 1);
    assert_eq!(state.finished_attempts_of("phase-1"), 1);
    assert!(state.to_json().contains("\"abandoned_attempts\": ["));

    assert_eq!(
        fresh_state()
            .resolve_abandoned(at("2026-07-05T13:00:00Z"))
            .unwrap_err()
            .to_string(),
        "cannot resolve an abandoned attempt: there is no active attempt"
    );
}

#[test]
fn snapshot_hash_mismatch_is_refused_before_writing() {
    let mut state = fresh_state();
    let mut attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    attempt.snapshot.sha256 = OTHER_SHA.into();
    state.prepare(attempt).unwrap();
    assert_eq!(
        state.validate(&layout()).unwrap_err().to_string(),
        "active_attempt.snapshot.sha256 must match plan.sha256"
    );
}

// ---- properties ----

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        prop::sample::select(STATE_KEYS.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        let key = prop_oneof![
            prop::sample::select(
                [
                    &STATE_KEYS[..],
                    &ACTIVE_ATTEMPT_KEYS,
                    &LAST_RUN_KEYS,
                    &PROCESS_KEYS
                ]
                .concat()
            )
            .prop_map(String::from),
            "[a-z_]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Replaces the `index`-th node (pre-order, modulo the node count) of `value`.
fn replace_node(value: &mut Value, index: usize, replacement: Value) {
    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk(value: &mut Value, index: &mut usize, replacement: &mut Option<Value>) {
        if *index == 0 {
            if let Some(new) = replacement.take() {
                *value = new;
            }
            return;
        }
        *index -= 1;
        let children: Vec<&mut Value> = match value {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Object(map) => map.values_mut().collect(),
            _ => Vec::new(),
        };
        for child in children {
            walk(child, index, replacement);
        }
    }
    let mut index = index % count(value);
    walk(value, &mut index, &mut Some(replacement));
}

#[derive(Clone, Debug)]
enum Step {
    Start,
    Launch {
        identity_known: bool,
    },
    Finish {
        status: AttemptStatus,
        summary: String,
    },
    Abandon,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Start),
        any::<bool>().prop_map(|identity_known| Step::Launch { identity_known }),
        (
            prop::sample::select(AttemptStatus::iter().collect::<Vec<_>>()),
            "\\PC{1,16}"
        )
            .prop_map(|(status, summary)| Step::Finish { status, summary }),
        Just(Step::Abandon),
    ]
}

/// Drives the runner's transitions with arbitrary results; every state it would write.
fn written_states(steps: &[Step]) -> Vec<State> {
    let phases = [phase(1), phase(2), phase(3)];
    let mut state = fresh_state();
    let mut written = vec![state.clone()];
    for (n, step) in steps.iter().enumerate() {
        let now = Timestamp::from_datetime(
            at("2026-07-05T12:00:00Z").as_datetime() + chrono::Duration::seconds(n as i64),
        );
        let new_attempt = |phase: &PhaseRef| {
            prepared(
                &format!("{}-{}-{n}", now.compact(), phase.id),
                phase.clone(),
                &now.to_string(),
            )
        };
        let changed = match (step, state.active_attempt.clone()) {
            (Step::Start, None) => {
                let phase = match &state.stop {
                    Some(stop) => phases.iter().find(|p| p.id == stop.phase_id).cloned(),
                    None => phases
                        .iter()
                        .find(|p| !state.completed_phase_ids.contains(&p.id))
                        .cloned(),
                };
                phase
                    .map(|phase| state.prepare(new_attempt(&phase)).unwrap())
                    .is_some()
            }
            (Step::Launch { identity_known }, Some(attempt))
                if attempt.status == ActiveStatus::Prepared =>
            {
                let identity = identity_known.then(identity);
                state.mark_running(&attempt.id, identity).unwrap();
                true
            }
            (Step::Finish { status, summary }, Some(attempt)) => {
                let mut record = outcome(&attempt, *status, summary, &now.to_string());
                record.exit_code = None;
                state.commit(&record, &attempt.outcome_path).unwrap();
                true
            }
            (Step::Abandon, Some(attempt)) => {
                state.resolve_abandoned(now).unwrap();
                state.prepare(new_attempt(&attempt.phase)).unwrap();
                true
            }
            _ => false,
        };
        if changed {
            written.push(state.clone());
        }
    }
    written
}

proptest! {
    #[test]
    fn reading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = State::from_json(&bytes, &layout());
    }

    #[test]
    fn reading_arbitrary_json_never_panics(value in arbitrary_json()) {
        let _ = read(&value.to_string());
    }

    #[test]
    fn reading_a_damaged_state_never_panics(
        index in any::<usize>(),
        replacement in arbitrary_json(),
        running in any::<bool>(),
    ) {
        let state = if running { running_state() } else { clarification_state() };
        let mut value = serde_json::to_value(&state).unwrap();
        replace_node(&mut value, index, replacement);
        if let Ok(read_back) = read(&value.to_string()) {
            // Whatever survives reading is valid and writes back to what was read.
            prop_assert!(read_back.validate(&layout()).is_ok());
            prop_assert_eq!(read(&read_back.to_json()).unwrap(), read_back);
        }
    }

    #[test]
    fn every_written_state_is_valid_and_round_trips(steps in prop::collection::vec(step(), 0..24)) {
        for state in written_states(&steps) {
            prop_assert_eq!(state.validate(&layout()), Ok(()));
            prop_assert_eq!(read(&state.to_json()), Ok(state));
        }
    }

}

/// Phase 1 completed, phase 2 stopped by a missing marker with a retry scheduled after it.
fn scheduled_state() -> State {
    let mut state = fresh_state();
    let first = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    run_attempt(&mut state, first, AttemptStatus::PhaseComplete, "done one");
    let second = prepared(ID2, phase(2), "2026-07-05T12:05:00Z");
    run_attempt(
        &mut state,
        second,
        AttemptStatus::MissingMarker,
        "agent output did not contain a terminal marker",
    );
    state.schedule_retry(retry_schedule()).unwrap();
    state.validate(&layout()).unwrap();
    state
}

fn retry_schedule() -> RetrySchedule {
    RetrySchedule {
        phase_id: "phase-2".into(),
        after: AttemptStatus::MissingMarker,
        attempt: 2,
        max_attempts: Some(3),
        waits_used: 0,
        template_index: 0,
        not_before: at("2026-07-05T12:10:00Z"),
        reason: RetryReason::Backoff,
        rate_limited: Vec::new(),
    }
}

#[test]
fn a_retry_schedule_is_written_after_the_original_keys_and_read_back() {
    let state = scheduled_state();
    let text = state.to_json();
    let value: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        STATE_KEYS
            .iter()
            .chain(&OPTIONAL_STATE_KEYS[..1])
            .copied()
            .collect::<Vec<_>>()
    );
    assert_eq!(State::from_json(text.as_bytes(), &layout()).unwrap(), state);
}

#[test]
fn abandoned_attempts_are_optional_strict_and_listed_once() {
    // Absent (every state written before the key existed): none.
    let state = running_state();
    assert!(!state.to_json().contains("abandoned_attempts"));
    assert!(
        read(&state.to_json())
            .unwrap()
            .abandoned_attempts
            .is_empty()
    );
    let mut resolved = running_state();
    resolved
        .resolve_abandoned(at("2026-07-05T13:00:00Z"))
        .unwrap();
    resolved
        .prepare(prepared(ID3, phase(2), "2026-07-05T13:00:00Z"))
        .unwrap();
    assert_eq!(
        read_error(&resolved, insert("/abandoned_attempts/0", "extra")),
        "unexpected key abandoned_attempts[0].extra"
    );
    assert_eq!(
        read_error(&resolved, remove("/abandoned_attempts/0", "resolved_at")),
        "missing required key resolved_at (at abandoned_attempts[0].resolved_at)"
    );
    assert_eq!(
        invalid(resolved.clone(), |state| {
            let twice = state.abandoned_attempts[0].clone();
            state.abandoned_attempts.push(twice);
        }),
        "abandoned_attempts[1].attempt_id is listed twice (an attempt is abandoned or committed, once)"
    );
    assert_eq!(
        invalid(resolved, |state| {
            state.abandoned_attempts[0].attempt_id = state.committed_outcomes[0].attempt_id.clone();
        }),
        "abandoned_attempts[0].attempt_id is listed twice (an attempt is abandoned or committed, once)"
    );
}

#[test]
fn a_state_without_a_schedule_is_written_as_before() {
    let text = clarification_state().to_json();
    assert!(!text.contains("retry_schedule"), "{text}");
}

#[test]
fn a_retry_schedule_must_continue_the_stop_of_its_phase() {
    let mut state = scheduled_state();
    state.stop = None;
    state.current_phase = None;
    assert_eq!(
        state.validate(&layout()).unwrap_err().to_string(),
        "retry_schedule requires a stop of its phase with its status (stop.phase_id, stop.reason)"
    );
    let mut value: Value = serde_json::from_str(&scheduled_state().to_json()).unwrap();
    value["retry_schedule"]["extra"] = 1.into();
    assert_eq!(
        State::from_json(value.to_string().as_bytes(), &layout())
            .unwrap_err()
            .to_string(),
        "unexpected key retry_schedule.extra"
    );
    let mut stopped = clarification_state();
    assert!(
        stopped.schedule_retry(retry_schedule()).is_ok() || stopped.validate(&layout()).is_err()
    );
}

#[test]
fn a_retry_schedule_without_max_attempts_written_before_the_key_existed_is_read() {
    let mut value: Value = serde_json::from_str(&scheduled_state().to_json()).unwrap();
    value["retry_schedule"]
        .as_object_mut()
        .unwrap()
        .remove("max_attempts");
    let read = State::from_json(value.to_string().as_bytes(), &layout()).unwrap();
    let schedule = read.retry_schedule.as_ref().unwrap();
    assert_eq!(schedule.max_attempts, None);
    assert_eq!(schedule.attempt, 2);
    // Rewritten as read: the old document stays the old document.
    assert!(!read.to_json().contains("max_attempts"));
}

#[test]
fn preparing_the_retry_clears_its_schedule() {
    let mut state = scheduled_state();
    state
        .prepare(prepared(ID3, phase(2), "2026-07-05T12:10:00Z"))
        .unwrap();
    assert!(state.retry_schedule.is_none());
    assert!(state.stop.is_none());
    state.validate(&layout()).unwrap();
}

// ---- committed_outcomes figures (docs/state-and-recovery.md, "Schema evolution") ----

#[test]
fn a_commit_copies_the_outcomes_duration_and_total_output_into_its_entry() {
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    let mut record = outcome(
        &attempt,
        AttemptStatus::PhaseComplete,
        "done",
        "2026-07-05T12:03:00Z",
    );
    record.duration_ms = Some(118_250);
    record.output_bytes = Some(crate::domain::outcome::OutputBytes {
        stdout: 1_000,
        stderr: 24,
    });
    record.watchdog_losses = Some(2);
    let usage: crate::domain::token_usage::summary::UsageSummary =
        crate::domain::strict_json::from_value(
            &json!({"input_tokens": 1234, "cached_input_tokens": 1000, "output_tokens": 567,
            "reasoning_tokens": null, "cost_usd": 0.25, "models": {}, "completeness": "reported"}),
        )
        .unwrap();
    record.usage = Some(usage.clone());
    let path = attempt.outcome_path.clone();
    state.prepare(attempt).unwrap();
    state.commit(&record, &path).unwrap();
    let entry = &state.committed_outcomes[0];
    assert_eq!(
        (
            entry.duration_ms,
            entry.output_bytes,
            entry.watchdog_losses,
            entry.usage.as_ref()
        ),
        (Some(118_250), Some(1_024), Some(2), Some(&usage))
    );

    let value = serde_json::to_value(&state).unwrap();
    let keys: Vec<&str> = value["committed_outcomes"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: Vec<&str> = OUTCOME_REF_KEYS
        .iter()
        .chain(&OPTIONAL_OUTCOME_REF_KEYS)
        .copied()
        .collect();
    assert_eq!(keys, expected);
    assert_eq!(read(&state.to_json()).unwrap(), state);
}

#[test]
fn entries_without_figures_are_read_and_written_as_before() {
    let state = clarification_state();
    assert!(
        state
            .committed_outcomes
            .iter()
            .all(|entry| entry.duration_ms.is_none())
    );
    let text = state.to_json();
    assert!(
        !text.contains("duration_ms") && !text.contains("output_bytes"),
        "{text}"
    );
    assert_eq!(read(&text).unwrap(), state);
}

#[test]
fn figures_are_strict_when_present() {
    let state = clarification_state();
    let edit = |key: &'static str, value: Value| {
        move |document: &mut Value| document["committed_outcomes"][0][key] = value
    };
    assert_eq!(
        read_error(&state, edit("duration_ms", Value::Null)),
        "expected duration_ms to be an integer (at committed_outcomes[0].duration_ms)"
    );
    assert!(
        read_error(&state, edit("output_bytes", json!(-1))).contains("output_bytes"),
        "a negative size is rejected"
    );
    assert_eq!(
        read_error(
            &state,
            edit("output_bytes", json!({"stdout": 1, "stderr": 2}))
        ),
        "expected output_bytes to be an integer (at committed_outcomes[0].output_bytes)"
    );
    assert_eq!(
        read_error(&state, edit("phase_attempt", json!(1))),
        "unexpected key committed_outcomes[0].phase_attempt"
    );
    let mut with_both = state.clone();
    with_both.committed_outcomes[0].duration_ms = Some(5);
    with_both.committed_outcomes[0].output_bytes = Some(0);
    assert_eq!(read(&with_both.to_json()).unwrap(), with_both);
}

// Bounded texts (issue 23): an agent's text is held as an excerpt, whatever its size, and no
// state over the write limit is produced.

#[test]
fn a_huge_result_body_is_held_once_in_full_in_the_outcome_and_as_an_excerpt_in_the_state() {
    let body = "\u{1}".repeat(12 << 20);
    for status in [AttemptStatus::Blocked, AttemptStatus::NeedsClarification] {
        let mut state = fresh_state();
        let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
        let path = attempt.outcome_path.clone();
        run_attempt(&mut state, attempt, status, &body);
        let stop = state.stop.as_ref().unwrap();
        let kept = stop
            .message
            .as_ref()
            .or(stop.clarification_request.as_ref())
            .unwrap();
        assert!(kept.starts_with(&body[..STATE_TEXT_LIMIT]));
        assert!(kept.ends_with(&format!("the full text is in {path}]")));
        assert_eq!(&state.last_run.as_ref().unwrap().summary, kept);
        let text = state.to_checked_json().unwrap();
        assert!(text.len() < 300 * 1024, "{} bytes", text.len());
        // It reads back as written.
        assert_eq!(read(&text).unwrap(), state);
    }
}

#[test]
fn a_state_written_with_whole_texts_reads_back_bounded() {
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    run_attempt(&mut state, attempt, AttemptStatus::Blocked, "short");
    let huge = "x".repeat(1 << 20);
    // As an earlier version wrote it: the whole text, twice.
    state.stop.as_mut().unwrap().message = Some(huge.clone());
    state.last_run.as_mut().unwrap().summary = huge.clone();
    let legacy = state.to_json();
    let read_back = read(&legacy).unwrap();
    let message = read_back.stop.as_ref().unwrap().message.clone().unwrap();
    assert!(message.len() < STATE_TEXT_LIMIT + 1024);
    assert!(message.starts_with(&huge[..STATE_TEXT_LIMIT]));
    assert_eq!(read_back.last_run.as_ref().unwrap().summary, message);
    // A current state is left exactly as it is.
    let current = clarification_state();
    assert_eq!(read(&current.to_json()).unwrap(), current);
}

#[test]
fn no_state_over_the_write_limit_is_serialized() {
    let mut state = fresh_state();
    let attempt = prepared(ID1, phase(1), "2026-07-05T12:01:02Z");
    run_attempt(&mut state, attempt, AttemptStatus::PhaseComplete, "done");
    // A history too long to write (a title is plan text, not bounded by the excerpt).
    state.current_phase = None;
    state.committed_outcomes[0].phase_id = "phase-1".into();
    let padding = "t".repeat((MAX_STATE_BYTES as usize) + 1);
    state.plan.as_mut().unwrap().path = format!("/{padding}");
    let error = state.to_checked_json().unwrap_err().to_string();
    assert!(
        error.starts_with("state.json would be ")
            && error.ends_with(&format!(
                "bytes, over the {MAX_STATE_BYTES}-byte limit of what is written"
            )),
        "{error}"
    );
}

#[test]
fn usage_in_committed_outcomes_is_optional_and_strict_when_present() {
    let state = clarification_state();
    assert!(
        !state.to_json().contains("usage"),
        "older entries have none"
    );
    let mut with_usage = state.clone();
    with_usage.committed_outcomes[0].usage =
        Some(crate::domain::token_usage::summary::UsageSummary::unknown());
    let text = with_usage.to_json();
    assert!(text.contains("\"completeness\": \"unknown\""), "{text}");
    assert_eq!(read(&text).unwrap(), with_usage);
    let edit = |value: Value| {
        move |document: &mut Value| document["committed_outcomes"][0]["usage"] = value
    };
    assert_eq!(
        read_error(&state, edit(json!({"completeness": "reported"}))),
        "missing required key input_tokens (at committed_outcomes[0].usage.input_tokens)"
    );
    let mut unknown_key =
        serde_json::to_value(with_usage.committed_outcomes[0].usage.clone()).unwrap();
    unknown_key["tokens"] = json!(1);
    assert_eq!(
        read_error(&state, edit(unknown_key)),
        "unexpected key committed_outcomes[0].usage.tokens"
    );
}

#[test]
fn an_outcome_path_is_recognised_exactly_as_the_layout_derives_it() {
    let layout = layout();
    let id = "20260705T120102Z-phase-1-abc";
    assert!(layout.is_outcome_path(&layout.outcome_path(id), id));
    for other in [
        format!("{}/outcomes/{id}.json.tmp", layout.dir),
        format!("{}/outcomes/{id}x.json", layout.dir),
        format!("{}/transcripts/{id}.json", layout.dir),
        format!(
            "{}/outcomes/{id}.json",
            layout.dir.trim_end_matches(char::is_alphanumeric)
        ),
        format!("{}//outcomes/{id}.json", layout.dir),
        format!("{}/outcomes/.json", layout.dir),
        String::new(),
    ] {
        assert!(!layout.is_outcome_path(&other, id), "{other}");
    }
}
