//! Unit and property tests of `domain::strict_json`: the reader's words, on small records.

use super::*;
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Plan {
    path: String,
    sha256: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Document {
    #[serde(deserialize_with = "Option::deserialize")]
    plan: Option<Plan>,
    ids: Vec<String>,
    #[serde(default)]
    items: Vec<Plan>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Scalars {
    #[serde(default)]
    i: Option<i32>,
    #[serde(default)]
    wide: Option<i64>,
    #[serde(default, deserialize_with = "present")]
    n: Option<i32>,
    #[serde(default, deserialize_with = "present")]
    s: Option<String>,
    #[serde(default, deserialize_with = "present")]
    b: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    at: Option<crate::domain::timestamp::Timestamp>,
    #[serde(default, deserialize_with = "some_positive")]
    p: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    status: Option<crate::domain::state::AttemptStatus>,
}

fn some_positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    positive(deserializer).map(Some)
}

fn err<T: DeserializeOwned + std::fmt::Debug>(value: serde_json::Value) -> String {
    StrictError::from(from_slice::<T>(value.to_string().as_bytes()).unwrap_err()).0
}

fn syntax(bytes: &[u8]) -> String {
    parse_document(bytes).unwrap_err()
}

#[test]
fn syntax_error_names_line_and_column() {
    let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
    let text = describe_syntax_error(&error, b"{");
    assert!(
        text.starts_with("invalid JSON at line 1, column 2: "),
        "{text}"
    );
}

#[test]
fn parse_document_reports_position_of_the_problem() {
    assert_eq!(
        syntax(b"{\n  \"a\": 1,\n  oops\n}"),
        "invalid JSON at line 3, column 3: key must be a string"
    );
    assert_eq!(
        syntax(b""),
        "invalid JSON at line 1, column 1: EOF while parsing a value"
    );
    assert_eq!(
        syntax(b"{} x"),
        "invalid JSON at line 1, column 4: trailing characters"
    );
    assert_eq!(
        syntax(b"{\"stop\": null,\n \"stop\": 1}"),
        "invalid JSON at line 2, column 7: duplicate key 'stop'"
    );
    assert_eq!(
        syntax(b"{\"a\": [{\"b\": 1, \"b\": 2}]}"),
        "invalid JSON at line 1, column 19: duplicate key 'b'"
    );
    // The same value as serde_json's own reading otherwise.
    let text = br#"{"a": [1, -2, 3.5, true, null, "x", {"b": {}}], "c": 18446744073709551615}"#;
    assert_eq!(
        parse_document(text).unwrap(),
        serde_json::from_slice::<Value>(text).unwrap()
    );
    // A value cut short by a line break is reported on its own line.
    assert_eq!(
        syntax(b"{\n  \"agent_cmd\": nul\n}"),
        "invalid JSON at line 2, column 19: expected ident"
    );
}

#[test]
fn top_level_must_be_an_object() {
    for value in [json!([]), json!(null), json!(1), json!("x"), json!(true)] {
        assert_eq!(
            err::<Document>(value.clone()),
            "expected $ to be an object",
            "{value}"
        );
    }
}

#[test]
fn unexpected_key_is_reported_before_missing_and_alphabetically_first() {
    assert_eq!(
        err::<Document>(json!({"zeta": 1, "beta": 2, "ids": 3})),
        "unexpected key beta"
    );
    assert_eq!(
        err::<Document>(json!({"ids": []})),
        "missing required key plan"
    );
}

#[test]
fn nested_keys_are_qualified_but_missing_keys_are_bare() {
    let plan = json!({"path": "/p", "sha256": "x"});
    assert_eq!(
        err::<Document>(json!({"plan": {"path": "/p", "sha256": "x", "version": 1}, "ids": []})),
        "unexpected key plan.version"
    );
    assert_eq!(
        err::<Document>(json!({"plan": {"path": "/p"}, "ids": []})),
        "missing required key sha256 (at plan.sha256)"
    );
    assert_eq!(
        err::<Document>(json!({"plan": plan, "ids": [], "items": [plan, {"x": 1}]})),
        "unexpected key items[1].x"
    );
}

#[test]
fn object_errors_name_the_qualified_key() {
    assert_eq!(
        err::<Document>(json!({"plan": 1, "ids": []})),
        "expected plan to be an object"
    );
    assert_eq!(
        err::<Document>(json!({"plan": null, "ids": [], "items": [2]})),
        "expected items[0] to be an object"
    );
    assert_eq!(
        err::<Document>(json!({"plan": null, "ids": {}})),
        "expected ids to be a list"
    );
}

#[test]
fn strings() {
    assert_eq!(
        err::<Document>(json!({"plan": null, "ids": ["a", 2]})),
        "expected ids[1] to be a string"
    );
    assert_eq!(
        err::<Document>(json!({"plan": {"path": null, "sha256": "x"}, "ids": []})),
        "expected path to be a string (at plan.path)"
    );
    assert_eq!(
        err::<Scalars>(json!({"s": null})),
        "expected s to be a string"
    );
}

#[test]
fn integers_reject_bools_fractions_and_overflow() {
    for bad in [json!(true), json!(1.0), json!("1"), json!([])] {
        assert_eq!(
            err::<Scalars>(json!({ "n": bad })),
            "expected n to be an integer",
            "{bad}"
        );
        assert_eq!(
            err::<Scalars>(json!({ "i": bad })),
            "expected i to be an integer or null",
            "{bad}"
        );
    }
    assert_eq!(
        err::<Scalars>(json!({"wide": u64::MAX})),
        "expected wide to be an integer or null that fits in 64 bits"
    );
    assert_eq!(
        err::<Scalars>(json!({"n": 1_i64 << 40})),
        "expected n to be an integer that fits in 32 bits"
    );
}

#[test]
fn positive_integers() {
    for bad in [json!(0), json!(-1), json!(false), json!(2.5), json!(null)] {
        assert_eq!(
            err::<Scalars>(json!({ "p": bad })),
            "expected p to be a positive integer",
            "{bad}"
        );
    }
    assert_eq!(
        err::<Scalars>(json!({"p": 1_u64 << 40})),
        "expected p to be a positive integer that fits in 32 bits"
    );
}

#[test]
fn booleans_name_the_qualified_key() {
    assert_eq!(
        err::<Scalars>(json!({"b": "no"})),
        "expected b to be a boolean"
    );
}

#[test]
fn enumerations() {
    assert_eq!(
        err::<Scalars>(json!({"status": "no"})),
        "invalid status 'no'"
    );
    assert_eq!(
        err::<Scalars>(json!({"status": 1})),
        "expected status to be a string"
    );
    // Control characters are escaped so the message stays on one line.
    assert_eq!(
        err::<Scalars>(json!({"status": "a\nb"})),
        "invalid status 'a\\nb'"
    );
}

#[test]
fn timestamps() {
    assert_eq!(
        err::<Scalars>(json!({"at": "2026-07-05T12:01:02"})),
        "expected at to include a UTC offset"
    );
    assert_eq!(
        err::<Scalars>(json!({"at": "soon"})),
        "expected at to be an ISO 8601 timestamp"
    );
    assert_eq!(
        err::<Scalars>(json!({"at": 5})),
        "expected at to be a string"
    );
}

#[test]
fn value_rules_name_the_dotted_key() {
    let err = |result: Result<(), StrictError>| result.unwrap_err().0;
    assert!(require_nonempty("a.b", "x").is_ok());
    assert_eq!(
        err(require_nonempty("a.b", "")),
        "expected a.b to be nonempty"
    );
    assert!(require_absolute_path("p", "/x").is_ok());
    for relative in ["", "x", "./x", "~/x"] {
        assert_eq!(
            err(require_absolute_path("p", relative)),
            "expected p to be an absolute path"
        );
    }
    assert!(require_sha256_digest("s", &"a".repeat(64)).is_ok());
    for bad in ["", "abc", &"A".repeat(64), &"g".repeat(64), &"a".repeat(65)] {
        assert_eq!(
            err(require_sha256_digest("s", bad)),
            "expected s to be a lowercase SHA-256 digest"
        );
    }
    assert!(require_attempt_id("id", "20260705T120102Z-phase-1-3f2b").is_ok());
    assert_eq!(
        err(require_attempt_id("id", "")),
        "expected id to be nonempty"
    );
    for unsafe_id in ["../x", ".hidden", "a b", "a/b"] {
        assert_eq!(
            err(require_attempt_id("id", unsafe_id)),
            "expected id to be a safe file name (ASCII letters, digits, '-', '_' and '.', \
                 not starting with '.')"
        );
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{0,3}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn reading_never_panics(value in arbitrary_json(), key in "[a-z]{0,3}") {
        let _ = from_value::<Document>(&value);
        let _ = from_value::<Scalars>(&value);
        let _ = from_value::<Scalars>(&json!({ key: value }));
    }

    #[test]
    fn parse_document_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_document(&bytes);
    }
}
