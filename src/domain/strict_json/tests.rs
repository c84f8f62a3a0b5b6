//! Unit and property tests of `domain::strict_json`.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn err<T: std::fmt::Debug>(result: Result<T, StrictError>) -> String {
    result.unwrap_err().0
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
        err(parse_document(b"{\n  \"a\": 1,\n  oops\n}")),
        "invalid JSON at line 3, column 3: key must be a string"
    );
    assert_eq!(
        err(parse_document(b"")),
        "invalid JSON at line 1, column 1: EOF while parsing a value"
    );
    assert_eq!(
        err(parse_document(b"{} x")),
        "invalid JSON at line 1, column 4: trailing characters"
    );
    assert_eq!(
        err(parse_document(b"{\"stop\": null,\n \"stop\": 1}")),
        "invalid JSON at line 2, column 7: duplicate key 'stop'"
    );
    assert_eq!(
        err(parse_document(b"{\"a\": [{\"b\": 1, \"b\": 2}]}")),
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
        err(parse_document(b"{\n  \"agent_cmd\": nul\n}")),
        "invalid JSON at line 2, column 19: expected ident"
    );
}

#[test]
fn top_level_must_be_an_object() {
    for text in ["[]", "null", "1", "\"x\"", "true"] {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            err(root_object(&value)),
            "expected $ to be an object",
            "{text}"
        );
    }
    let value = json!({});
    assert_eq!(root_object(&value).unwrap().path, "");
}

#[test]
fn unexpected_key_is_reported_before_missing_and_alphabetically_first() {
    let value = json!({"zeta": 1, "beta": 2, "a": 3});
    let root = root_object(&value).unwrap();
    assert_eq!(err(root.expect_keys(&["a", "b"])), "unexpected key beta");
    let value = json!({"b": 1});
    let root = root_object(&value).unwrap();
    assert_eq!(
        err(root.expect_keys(&["a", "b", "c"])),
        "missing required key a"
    );
    assert!(root.expect_keys(&["b"]).is_ok());
    assert_eq!(root.first_unexpected_key(&["a"]), Some("b"));
    assert_eq!(root.first_unexpected_key(&["b"]), None);
}

#[test]
fn nested_keys_are_qualified_but_missing_keys_are_bare() {
    let value = json!({"plan": {"inner": {"version": 1}}, "items": [{}, {"x": 1}]});
    let root = root_object(&value).unwrap();
    let inner = root.object("plan").unwrap().object("inner").unwrap();
    assert_eq!(inner.path, "plan.inner");
    assert_eq!(
        err(inner.expect_keys(&["path"])),
        "unexpected key plan.inner.version"
    );
    assert_eq!(
        err(inner.expect_keys(&["version", "sha256"])),
        "missing required key sha256 (at plan.inner.sha256)"
    );
    let items = root.object_list("items").unwrap();
    assert_eq!(items[1].path, "items[1]");
    assert_eq!(err(items[1].expect_keys(&[])), "unexpected key items[1].x");
    assert_eq!(err(root.object("nope")), "missing required key nope");
}

#[test]
fn object_errors_name_the_qualified_key() {
    let value = json!({"plan": {"phase": 1}, "list": [{}, 2], "null": null});
    let root = root_object(&value).unwrap();
    let plan = root.object("plan").unwrap();
    assert_eq!(
        err(plan.object("phase")),
        "expected plan.phase to be an object"
    );
    assert_eq!(
        err(plan.optional_object("phase")),
        "expected plan.phase to be an object"
    );
    assert_eq!(err(root.object("null")), "expected null to be an object");
    assert!(root.optional_object("null").unwrap().is_none());
    assert_eq!(
        err(root.object_list("list")),
        "expected list[1] to be an object"
    );
    assert_eq!(err(root.object_list("plan")), "expected plan to be a list");
}

#[test]
fn strings() {
    let value = json!({"s": "text", "n": null, "i": 1, "l": ["a", 2]});
    let root = root_object(&value).unwrap();
    assert_eq!(root.string("s").unwrap(), "text");
    assert_eq!(err(root.string("n")), "expected n to be a string");
    assert_eq!(err(root.string("missing")), "missing required key missing");
    assert_eq!(root.optional_string("s").unwrap(), Some("text"));
    assert_eq!(root.optional_string("n").unwrap(), None);
    assert_eq!(
        err(root.optional_string("i")),
        "expected i to be a string or null"
    );
    assert_eq!(err(root.string_list("l")), "expected l[1] to be a string");
    assert_eq!(err(root.string_list("s")), "expected s to be a list");
    let value = json!({"l": ["a", "b"], "e": []});
    let root = root_object(&value).unwrap();
    assert_eq!(root.string_list("l").unwrap(), vec!["a", "b"]);
    assert!(root.string_list("e").unwrap().is_empty());
}

#[test]
fn integers_reject_bools_fractions_and_overflow() {
    let value = json!({
        "i": -7, "b": true, "f": 1.0, "s": "1", "big": u64::MAX, "n": null, "wide": 1_i64 << 40
    });
    let root = root_object(&value).unwrap();
    assert_eq!(root.integer::<i32>("i").unwrap(), -7);
    assert_eq!(err(root.integer::<i32>("b")), "expected b to be an integer");
    assert_eq!(err(root.integer::<i32>("f")), "expected f to be an integer");
    assert_eq!(err(root.integer::<i32>("s")), "expected s to be an integer");
    assert_eq!(err(root.integer::<i32>("n")), "expected n to be an integer");
    assert_eq!(
        err(root.integer::<i64>("big")),
        "expected big to be an integer that fits in 64 bits"
    );
    assert_eq!(
        err(root.integer::<i32>("wide")),
        "expected wide to be an integer that fits in 32 bits"
    );
    assert_eq!(root.optional_integer::<i32>("n").unwrap(), None);
    assert_eq!(root.optional_integer::<i32>("i").unwrap(), Some(-7));
    assert_eq!(
        err(root.optional_integer::<i32>("b")),
        "expected b to be an integer or null"
    );
    assert_eq!(
        err(root.optional_integer::<i32>("wide")),
        "expected wide to be an integer or null that fits in 32 bits"
    );
}

#[test]
fn positive_integers() {
    let value = json!({"one": 1, "zero": 0, "neg": -1, "b": false, "f": 2.5, "wide": 1_u64 << 40, "max": u64::MAX});
    let root = root_object(&value).unwrap();
    assert_eq!(root.positive_integer::<u32>("one").unwrap(), 1);
    assert_eq!(root.positive_integer::<u64>("max").unwrap(), u64::MAX);
    for key in ["zero", "neg", "b", "f"] {
        assert_eq!(
            err(root.positive_integer::<u32>(key)),
            format!("expected {key} to be a positive integer")
        );
    }
    assert_eq!(
        err(root.positive_integer::<u32>("wide")),
        "expected wide to be a positive integer that fits in 32 bits"
    );
}

#[test]
fn enumerations() {
    let parse = |text: &str| (text == "yes").then_some(true);
    let value = json!({"ok": "yes", "bad": "no", "num": 1, "odd": "a\nb"});
    let root = root_object(&value).unwrap();
    assert!(root.enumerated("ok", parse).unwrap());
    assert_eq!(err(root.enumerated("bad", parse)), "invalid bad 'no'");
    assert_eq!(
        err(root.enumerated("num", parse)),
        "expected num to be a string"
    );
    // Control characters are escaped so the message stays on one line.
    assert_eq!(err(root.enumerated("odd", parse)), "invalid odd 'a\\nb'");
}

#[test]
fn timestamps() {
    let value = json!({"p": {"z": "2026-07-05T12:01:02Z", "off": "2026-07-05T14:01:02+02:00",
            "naive": "2026-07-05T12:01:02", "junk": "soon", "num": 5}});
    let root = root_object(&value).unwrap();
    let plan = root.object("p").unwrap();
    assert_eq!(
        plan.timestamp("z").unwrap().to_string(),
        "2026-07-05T12:01:02Z"
    );
    assert_eq!(
        plan.timestamp("off").unwrap().to_string(),
        "2026-07-05T12:01:02Z"
    );
    assert_eq!(
        err(plan.timestamp("naive")),
        "expected p.naive to include a UTC offset"
    );
    for local in ["2026-07-05 12:01:02.5", "2026-07-05T12:01", "2026-07-05"] {
        assert!(is_local_date_time(local), "{local}");
    }
    for other in [
        "2026-07-05T25:00:00",
        "12:01:02",
        "2026-07-05T12:01:02Z",
        "",
    ] {
        assert!(!is_local_date_time(other), "{other}");
    }
    assert_eq!(
        err(plan.timestamp("junk")),
        "expected p.junk to be an ISO 8601 timestamp"
    );
    assert_eq!(
        err(plan.timestamp("num")),
        "expected num to be a string (at p.num)"
    );
}

#[test]
fn value_rules_name_the_dotted_key() {
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
    fn getters_never_panic(value in arbitrary_json(), key in "[a-z]{0,3}") {
        let wrapped = serde_json::json!({ "root": value });
        let root = root_object(&wrapped).unwrap();
        let _ = root.expect_keys(&["root"]);
        let _ = root.string("root");
        let _ = root.optional_string("root");
        let _ = root.integer::<i32>("root");
        let _ = root.optional_integer::<i8>("root");
        let _ = root.positive_integer::<u16>("root");
        let _ = root.string_list("root");
        let _ = root.object_list("root");
        let _ = root.enumerated("root", |_| None::<()>);
        let _ = root.timestamp("root");
        if let Ok(object) = root.object("root") {
            let _ = object.expect_keys(&["a", "b"]);
            let _ = object.timestamp(&key);
            let _ = object.optional_object(&key);
        }
    }

    #[test]
    fn parse_document_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_document(&bytes);
    }
}
