//! Helpers for reading JSON strictly: exact key sets, typed fields, and error wording that
//! names the dotted key to fix (`missing required key sha256`, `unexpected key plan.version`).
//! Shared by the state, outcome and config readers so all three speak the same language.
//!
//! Wording follows the reference (§6.3): key-set and object errors name the *qualified* key
//! (`unexpected key active_attempt.snapshot.extra`, `expected plan to be an object`), while
//! missing keys and scalar type errors name the *bare* key (`missing required key sha256`,
//! `expected pid to be a positive integer`) — followed, inside a nested object, by the dotted
//! path SPEC §6 asks for (`missing required key sha256 (at plan.sha256)`).

use serde_json::{Map, Value};

use super::attempt_id::is_safe_file_stem;
use super::plan_key::is_sha256_hex;
use super::timestamp::Timestamp;

/// A document that is not valid JSON or does not have the expected shape. The message names
/// the key to fix; callers wrap it in their own error type and prefix the file path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrictError(pub String);

impl std::fmt::Display for StrictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Describes a JSON syntax error in `bytes` the way users read it:
/// `invalid JSON at line 1, column 2: EOF while parsing an object`.
pub fn describe_syntax_error(error: &serde_json::Error, bytes: &[u8]) -> String {
    let message = error.to_string();
    // serde_json appends " at line L column C"; drop it, we lead with the position instead.
    let detail = match message.rfind(" at line ") {
        Some(index) => &message[..index],
        None => message.as_str(),
    };
    let (line, column) = match (error.line(), error.column()) {
        // serde_json stopped on the line break that ended the previous line (`"key": nul⏎`):
        // point just past that line's last byte, not at "column 0" of the next line.
        (line, 0) if line > 1 => {
            let previous = bytes.split(|byte| *byte == b'\n').nth(line - 2);
            (line - 1, previous.map_or(1, |text| text.len() + 1))
        }
        // At end of input serde_json points at the last byte read; point one past it, at the
        // place where more input was expected (what Python's json module, and users, report).
        (line, column) if error.is_eof() => (line, column + 1),
        position => position,
    };
    format!("invalid JSON at line {line}, column {column}: {detail}")
}

/// Parses a whole document, reporting syntax errors with [`describe_syntax_error`]. A key
/// that appears twice in one object is an error too (`duplicate key 'stop'`): serde_json
/// would keep the second silently, so the document would not mean what it shows first.
pub fn parse_document(bytes: &[u8]) -> Result<Value, StrictError> {
    serde_json::from_slice::<UniqueKeys>(bytes)
        .map(|document| document.0)
        .map_err(|error| StrictError(describe_syntax_error(&error, bytes)))
}

/// A JSON value read with duplicate object keys rejected.
struct UniqueKeys(Value);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(UniqueKeysVisitor)
            .map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key '{key}'"
                )));
            }
            let UniqueKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The top-level value as an object (`expected $ to be an object` otherwise).
pub fn root_object(value: &Value) -> Result<Object<'_>, StrictError> {
    match value {
        Value::Object(map) => Ok(Object {
            map,
            path: String::new(),
        }),
        _ => Err(StrictError("expected $ to be an object".to_owned())),
    }
}

/// A JSON object being read, together with the dotted path it was found at (empty for the
/// top level) so that errors can name nested keys.
#[derive(Clone, Debug)]
pub struct Object<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Object<'a> {
    /// The dotted path of this object (`active_attempt.snapshot`, `committed_outcomes[0]`),
    /// empty at the top level.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds where a bare-key error happened when it is inside a nested object: the reference
    /// wording names the bare key (`missing required key summary`), and SPEC §6 asks for the
    /// dotted path, so a nested error says both (`… summary (at last_run.summary)`).
    fn locate(&self, error: StrictError, key: &str) -> StrictError {
        if self.path.is_empty() {
            return error;
        }
        StrictError(format!("{} (at {})", error.0, self.qualified(key)))
    }

    /// The dotted path of `key` inside this object.
    pub fn qualified(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The alphabetically first key not in `known`, if any. Alphabetical rather than document
    /// order so the same file always yields the same message, whatever its key order.
    pub fn first_unexpected_key(&self, known: &[&str]) -> Option<&'a str> {
        self.map
            .keys()
            .map(String::as_str)
            .filter(|key| !known.contains(key))
            .min()
    }

    /// Requires exactly the keys `keys`: an unexpected key is reported before a missing one,
    /// and missing keys are reported in the order given.
    pub fn expect_keys(&self, keys: &[&str]) -> Result<(), StrictError> {
        if let Some(extra) = self.first_unexpected_key(keys) {
            return Err(StrictError(format!(
                "unexpected key {}",
                self.qualified(extra).escape_debug()
            )));
        }
        match keys.iter().find(|key| !self.map.contains_key(**key)) {
            Some(missing) => Err(self.locate(missing_key(missing), missing)),
            None => Ok(()),
        }
    }

    /// The raw value of a required key.
    pub fn value(&self, key: &str) -> Result<&'a Value, StrictError> {
        self.map
            .get(key)
            .ok_or_else(|| self.locate(missing_key(key), key))
    }

    pub fn string(&self, key: &str) -> Result<&'a str, StrictError> {
        self.value(key)?
            .as_str()
            .ok_or_else(|| self.locate(expected(key, "a string"), key))
    }

    pub fn optional_string(&self, key: &str) -> Result<Option<&'a str>, StrictError> {
        match self.value(key)? {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text)),
            _ => Err(self.locate(expected(key, "a string or null"), key)),
        }
    }

    /// An integer (booleans and numbers with a fraction or exponent are not integers) that
    /// fits in `T`.
    pub fn integer<T: TryFrom<i64>>(&self, key: &str) -> Result<T, StrictError> {
        integer_in(self.value(key)?, key, "an integer").map_err(|error| self.locate(error, key))
    }

    pub fn optional_integer<T: TryFrom<i64>>(&self, key: &str) -> Result<Option<T>, StrictError> {
        match self.value(key)? {
            Value::Null => Ok(None),
            value => integer_in(value, key, "an integer or null")
                .map(Some)
                .map_err(|error| self.locate(error, key)),
        }
    }

    /// An integer ≥ 1 that fits in `T`.
    pub fn positive_integer<T: TryFrom<u64>>(&self, key: &str) -> Result<T, StrictError> {
        let what = "a positive integer";
        let number = match self.value(key)? {
            Value::Number(number) => number.as_u64().filter(|n| *n >= 1),
            _ => None,
        }
        .ok_or_else(|| self.locate(expected(key, what), key))?;
        T::try_from(number).map_err(|_| self.locate(out_of_range::<T>(key, what), key))
    }

    pub fn string_list(&self, key: &str) -> Result<Vec<&'a str>, StrictError> {
        self.list(key)?
            .iter()
            .enumerate()
            .map(|(index, item)| {
                item.as_str().ok_or_else(|| {
                    let item = format!("{key}[{index}]");
                    self.locate(expected(&item, "a string"), &item)
                })
            })
            .collect()
    }

    pub fn list(&self, key: &str) -> Result<&'a [Value], StrictError> {
        match self.value(key)? {
            Value::Array(items) => Ok(items),
            _ => Err(self.locate(expected(key, "a list"), key)),
        }
    }

    /// A list whose items are all objects; item `i` is addressed as `<key>[i]`.
    pub fn object_list(&self, key: &str) -> Result<Vec<Object<'a>>, StrictError> {
        let path = self.qualified(key);
        self.list(key)?
            .iter()
            .enumerate()
            .map(|(index, item)| as_object(item, format!("{path}[{index}]")))
            .collect()
    }

    pub fn object(&self, key: &str) -> Result<Object<'a>, StrictError> {
        as_object(self.value(key)?, self.qualified(key))
    }

    pub fn optional_object(&self, key: &str) -> Result<Option<Object<'a>>, StrictError> {
        match self.value(key)? {
            Value::Null => Ok(None),
            value => as_object(value, self.qualified(key)).map(Some),
        }
    }

    /// A string naming one value of an enumeration; `parse` maps it to the value
    /// (`invalid status 'x'` when it does not).
    pub fn enumerated<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, StrictError> {
        let text = self.string(key)?;
        parse(text).ok_or_else(|| {
            self.locate(
                StrictError(format!("invalid {key} '{}'", text.escape_debug())),
                key,
            )
        })
    }

    /// An RFC 3339 timestamp with an explicit UTC offset. A string that is a valid date and
    /// time but lacks the offset gets its own message, since adding `Z` is the fix.
    pub fn timestamp(&self, key: &str) -> Result<Timestamp, StrictError> {
        let text = self.string(key)?;
        Timestamp::parse(text).map_err(|_| {
            let problem = if is_local_date_time(text) {
                "to include a UTC offset"
            } else {
                "to be an ISO 8601 timestamp"
            };
            StrictError(format!("expected {} {problem}", self.qualified(key)))
        })
    }
}

// Rules for values that already have the right type. They name the dotted key, because they
// run after reading, when the value's position is no longer at hand.

/// `expected <key> to be nonempty`.
pub fn require_nonempty(key: &str, value: &str) -> Result<(), StrictError> {
    if value.is_empty() {
        return Err(StrictError(format!("expected {key} to be nonempty")));
    }
    Ok(())
}

/// `expected <key> to be an absolute path`.
pub fn require_absolute_path(key: &str, value: &str) -> Result<(), StrictError> {
    if !value.starts_with('/') {
        return Err(StrictError(format!(
            "expected {key} to be an absolute path"
        )));
    }
    Ok(())
}

/// `expected <key> to be a lowercase SHA-256 digest`.
pub fn require_sha256_digest(key: &str, value: &str) -> Result<(), StrictError> {
    if !is_sha256_hex(value) {
        return Err(StrictError(format!(
            "expected {key} to be a lowercase SHA-256 digest"
        )));
    }
    Ok(())
}

/// A non-empty attempt id that is safe to build file paths from, since artifact paths are
/// derived from ids read back from disk.
pub fn require_attempt_id(key: &str, value: &str) -> Result<(), StrictError> {
    require_nonempty(key, value)?;
    if !is_safe_file_stem(value) {
        return Err(StrictError(format!(
            "expected {key} to be a safe file name (ASCII letters, digits, '-', '_' and '.', \
             not starting with '.')"
        )));
    }
    Ok(())
}

/// True for an ISO 8601 date or date-time without an offset (`2026-07-05T12:01:02`,
/// `2026-07-05 12:01`, `2026-07-05`): a timestamp that only lacks its offset.
fn is_local_date_time(text: &str) -> bool {
    const DATE_TIMES: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ];
    DATE_TIMES
        .iter()
        .any(|format| chrono::NaiveDateTime::parse_from_str(text, format).is_ok())
        || chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
}

fn as_object(value: &Value, path: String) -> Result<Object<'_>, StrictError> {
    match value {
        Value::Object(map) => Ok(Object { map, path }),
        _ => Err(StrictError(format!("expected {path} to be an object"))),
    }
}

fn integer_in<T: TryFrom<i64>>(value: &Value, key: &str, what: &str) -> Result<T, StrictError> {
    let Value::Number(number) = value else {
        return Err(expected(key, what));
    };
    match number.as_i64() {
        Some(integer) => T::try_from(integer).map_err(|_| out_of_range::<T>(key, what)),
        // A whole number above i64::MAX is still an integer, just not one that fits.
        None if number.is_u64() => Err(out_of_range::<T>(key, what)),
        None => Err(expected(key, what)),
    }
}

fn missing_key(key: &str) -> StrictError {
    StrictError(format!("missing required key {key}"))
}

fn expected(key: &str, what: &str) -> StrictError {
    StrictError(format!("expected {key} to be {what}"))
}

fn out_of_range<T>(key: &str, what: &str) -> StrictError {
    let bits = std::mem::size_of::<T>() * 8;
    StrictError(format!(
        "expected {key} to be {what} that fits in {bits} bits"
    ))
}

#[cfg(test)]
mod tests {
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
        assert_eq!(root_object(&value).unwrap().path(), "");
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
        assert_eq!(inner.path(), "plan.inner");
        assert_eq!(
            err(inner.expect_keys(&["path"])),
            "unexpected key plan.inner.version"
        );
        assert_eq!(
            err(inner.expect_keys(&["version", "sha256"])),
            "missing required key sha256 (at plan.inner.sha256)"
        );
        let items = root.object_list("items").unwrap();
        assert_eq!(items[1].path(), "items[1]");
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
}
