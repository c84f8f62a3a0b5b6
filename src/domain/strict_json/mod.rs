//! Helpers for reading JSON strictly: exact key sets, typed fields, and error wording that
//! names the dotted key to fix (`missing required key sha256`, `unexpected key plan.version`).
//! Shared by the state, outcome and config readers so all three speak the same language.
//!
//! Wording follows the reference (§6.3): key-set and object errors name the *qualified* key
//! (`unexpected key active_attempt.snapshot.extra`, `expected plan to be an object`), while
//! missing keys and scalar type errors name the *bare* key (`missing required key sha256`,
//! `expected pid to be a positive integer`) — followed, inside a nested object, by the dotted
//! path docs/state-and-recovery.md asks for (`missing required key sha256 (at plan.sha256)`).

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

impl std::error::Error for StrictError {}

/// Describes a JSON syntax error in `bytes` the way users read it:
/// `invalid JSON at line 1, column 2: EOF while parsing an object`.
pub(crate) fn describe_syntax_error(error: &serde_json::Error, bytes: &[u8]) -> String {
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
pub(crate) fn parse_document(bytes: &[u8]) -> Result<Value, StrictError> {
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
pub(crate) fn root_object(value: &Value) -> Result<Object<'_>, StrictError> {
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
    /// Adds where a bare-key error happened when it is inside a nested object: the reference
    /// wording names the bare key (`missing required key summary`), and docs/state-and-recovery.md asks for the
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

    /// Like [`Object::expect_keys`], for a schema that grew: `optional` keys (added later, so
    /// absent from older documents) may be missing, but nothing outside both lists is allowed.
    pub fn expect_keys_and_optional(
        &self,
        required: &[&str],
        optional: &[&str],
    ) -> Result<(), StrictError> {
        let known: Vec<&str> = required.iter().chain(optional).copied().collect();
        if let Some(extra) = self.first_unexpected_key(&known) {
            return Err(StrictError(format!(
                "unexpected key {}",
                self.qualified(extra).escape_debug()
            )));
        }
        match required.iter().find(|key| !self.map.contains_key(**key)) {
            Some(missing) => Err(self.locate(missing_key(missing), missing)),
            None => Ok(()),
        }
    }

    /// Whether `key` is present (for optional keys).
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
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
// run after reading, when the value's position is no longer at hand. The key is anything that
// displays (`format_args!` for an indexed one): it is written out only for an error, since
// every state write checks every committed outcome.

/// `expected <key> to be nonempty`.
pub(crate) fn require_nonempty(
    key: impl std::fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    if value.is_empty() {
        return Err(StrictError(format!("expected {key} to be nonempty")));
    }
    Ok(())
}

/// `expected <key> to be an absolute path`.
pub(crate) fn require_absolute_path(
    key: impl std::fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    if !value.starts_with('/') {
        return Err(StrictError(format!(
            "expected {key} to be an absolute path"
        )));
    }
    Ok(())
}

/// `expected <key> to be a lowercase SHA-256 digest`.
pub(crate) fn require_sha256_digest(
    key: impl std::fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    if !is_sha256_hex(value) {
        return Err(StrictError(format!(
            "expected {key} to be a lowercase SHA-256 digest"
        )));
    }
    Ok(())
}

/// A non-empty attempt id that is safe to build file paths from, since artifact paths are
/// derived from ids read back from disk.
pub(crate) fn require_attempt_id(
    key: impl std::fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    require_nonempty(&key, value)?;
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
mod tests;
