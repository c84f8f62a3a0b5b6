//! Reading JSON records strictly through their serde derives (`deny_unknown_fields`, no key
//! twice), each error keeping where it happened and its [`Kind`] so readers word it
//! themselves; [`Mismatch`]'s `Display` is docs/state-and-recovery.md, "A malformed state
//! file". Unknown keys are checked first, then declared fields in order, then missing keys.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::attempt_id::is_safe_file_stem;
use super::plan_key::is_sha256_hex;

/// A record's message naming the key to fix; callers prefix the file path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StrictError(pub String);

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// Not JSON, or a key given twice: `invalid JSON at line 2, column 7: duplicate key 'stop'`.
    Syntax(String),
    /// JSON that does not have the record's shape.
    Mismatch(Mismatch),
}

/// Where a document does not have the record's shape, and how. It is also the error serde's
/// derives build through [`de::Error`]: while reading, each enclosing list or object pushes its
/// segment on the way out, and [`from_value`] then turns the path around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// The keys and list indices from the top level to the value (empty: the document).
    pub path: Vec<Segment>,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

/// Serde's error constructors map to these: `unknown_field`, `missing_field`,
/// `invalid_type` (worded after the visitor's expectation), `unknown_variant`, and
/// `invalid_value` (`to be <expected>`) or `custom` as a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `known` are the object's fields in declaration order.
    UnknownKey {
        key: String,
        known: &'static [&'static str],
    },
    MissingKey(&'static str),
    /// The wrong JSON type, or a value that breaks a rule worded as a type (`a positive
    /// integer`).
    WrongType {
        expected: Expected,
        or_null: bool,
    },
    UnknownVariant(String),
    /// A value of the right type that breaks a rule, worded to follow the key: `to include a
    /// UTC offset`.
    Rule(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expected {
    String,
    /// `bits` when a value was out of range.
    Integer {
        bits: Option<usize>,
    },
    Number,
    Boolean,
    List,
    Object,
    /// A visitor's own words: `a positive integer`.
    Described(String),
}

impl Expected {
    /// `an integer or null that fits in 32 bits` (a list is never said to be `or null`).
    pub(crate) fn words(&self, or_null: bool) -> String {
        let null = if or_null { " or null" } else { "" };
        match self {
            Self::String => format!("a string{null}"),
            Self::Integer { bits: None } => format!("an integer{null}"),
            Self::Integer { bits: Some(bits) } => {
                format!("an integer{null} that fits in {bits} bits")
            }
            Self::Number => format!("a number{null}"),
            Self::Boolean => format!("a boolean{null}"),
            Self::List => "a list".to_owned(),
            Self::Object => format!("an object{null}"),
            Self::Described(words) => words.clone(),
        }
    }
}

/// `committed_outcomes[0].status`.
fn dotted(segments: &[Segment]) -> String {
    let mut text = String::new();
    for segment in segments {
        match segment {
            Segment::Key(key) if text.is_empty() => text.push_str(key),
            Segment::Key(key) => text.push_str(&format!(".{key}")),
            Segment::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

impl Mismatch {
    fn new(kind: Kind) -> Self {
        Self {
            path: Vec::new(),
            kind,
        }
    }

    fn within(mut self, segment: Segment) -> Self {
        self.path.push(segment);
        self
    }

    /// The dotted path of `key` inside the value at the path (`plan.version`), or of the value
    /// itself; `$` for the document.
    pub(crate) fn qualified(&self, key: Option<&str>) -> String {
        let mut path = self.path.clone();
        path.extend(key.map(|key| Segment::Key(key.to_owned())));
        match dotted(&path) {
            text if text.is_empty() => "$".to_owned(),
            text => text,
        }
    }

    /// The value's key inside its object (`pid`, `completed_phase_ids[0]`), and ` (at <dotted
    /// path>)` when that object is not the document.
    fn bare_and_at(&self) -> (String, String) {
        match self
            .path
            .iter()
            .rposition(|segment| matches!(segment, Segment::Key(_)))
        {
            Some(0) => (dotted(&self.path), String::new()),
            Some(key_at) => (
                dotted(&self.path[key_at..]),
                format!(" (at {})", dotted(&self.path)),
            ),
            None => (self.qualified(None), String::new()),
        }
    }
}

/// Key-set and object errors name the qualified key (`unexpected key a.b.extra`), missing keys
/// and type errors the bare key then, inside a nested object, where it is (`missing required
/// key sha256 (at plan.sha256)`); a rule names the dotted key.
impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::UnknownKey { key, .. } => write!(
                f,
                "unexpected key {}",
                self.qualified(Some(key)).escape_debug()
            ),
            Kind::MissingKey(key) if self.path.is_empty() => {
                write!(f, "missing required key {key}")
            }
            Kind::MissingKey(key) => write!(
                f,
                "missing required key {key} (at {})",
                self.qualified(Some(key))
            ),
            Kind::WrongType {
                expected: expected @ (Expected::Object | Expected::Boolean),
                ..
            } => write!(
                f,
                "expected {} to be {}",
                self.qualified(None),
                expected.words(false)
            ),
            Kind::WrongType { expected, or_null } => {
                let (bare, at) = self.bare_and_at();
                write!(f, "expected {bare} to be {}{at}", expected.words(*or_null))
            }
            Kind::UnknownVariant(value) => {
                let (bare, at) = self.bare_and_at();
                write!(f, "invalid {bare} '{}'{at}", value.escape_debug())
            }
            Kind::Rule(rule) => write!(f, "expected {} {rule}", self.qualified(None)),
        }
    }
}

impl From<ReadError> for StrictError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Syntax(message) => Self(message),
            ReadError::Mismatch(mismatch) => Self(mismatch.to_string()),
        }
    }
}

pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ReadError> {
    let value = parse_document(bytes).map_err(ReadError::Syntax)?;
    from_value(&value).map_err(ReadError::Mismatch)
}

/// Reads `value` as `T` (a document already parsed, or a part of one).
pub(crate) fn from_value<'de, T: Deserialize<'de>>(value: &'de Value) -> Result<T, Mismatch> {
    T::deserialize(Reader::new(value)).map_err(|mut mismatch| {
        mismatch.path.reverse();
        mismatch
    })
}

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

/// Parses a whole document. A key given twice in one object is an error (`duplicate key
/// 'stop'`): serde_json would keep the second silently.
pub(crate) fn parse_document(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice::<UniqueKeys>(bytes)
        .map(|document| document.0)
        .map_err(|error| describe_syntax_error(&error, bytes))
}

/// A JSON value read with duplicate object keys rejected.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(UniqueKeysVisitor)
            .map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
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

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
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

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key '{key}'")));
            }
            let UniqueKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

// ---- value rules, for `deserialize_with` ----

/// An optional key that, when present, holds a `T` (never `null`). A key that must be present
/// but may be `null` is `#[serde(deserialize_with = "Option::deserialize")]` instead.
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// An integer ≥ 1 that fits in `T` (`expected pid to be a positive integer`).
pub(crate) fn positive<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    deserializer: D,
) -> Result<T, D::Error> {
    let value = Value::deserialize(deserializer)?;
    let number = value
        .as_u64()
        .filter(|number| *number >= 1)
        .ok_or_else(|| {
            de::Error::invalid_type(Unexpected::Other("value"), &"a positive integer")
        })?;
    T::try_from(number).map_err(|_| {
        let bits = std::mem::size_of::<T>() * 8;
        de::Error::invalid_type(
            Unexpected::Unsigned(number),
            &format!("a positive integer that fits in {bits} bits").as_str(),
        )
    })
}

// ---- rules checked after reading (and before writing), naming the dotted key ----

// The key is anything that displays (`format_args!` for an indexed one): it is written out
// only for an error, since every state write checks every committed outcome.

pub(crate) fn require_nonempty(key: impl fmt::Display, value: &str) -> Result<(), StrictError> {
    require(!value.is_empty(), key, "to be nonempty")
}

pub(crate) fn require_absolute_path(
    key: impl fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    require(value.starts_with('/'), key, "to be an absolute path")
}

pub(crate) fn require_sha256_digest(
    key: impl fmt::Display,
    value: &str,
) -> Result<(), StrictError> {
    require(
        is_sha256_hex(value),
        key,
        "to be a lowercase SHA-256 digest",
    )
}

/// A non-empty attempt id that is safe to build file paths from: artifact paths are derived
/// from ids read back from disk.
pub(crate) fn require_attempt_id(key: impl fmt::Display, value: &str) -> Result<(), StrictError> {
    require_nonempty(&key, value)?;
    require(
        is_safe_file_stem(value),
        key,
        "to be a safe file name (ASCII letters, digits, '-', '_' and '.', not starting with '.')",
    )
}

/// `expected <key> <rule>` unless `holds`.
fn require(holds: bool, key: impl fmt::Display, rule: &str) -> Result<(), StrictError> {
    if holds {
        return Ok(());
    }
    Err(StrictError(format!("expected {key} {rule}")))
}

// ---- the deserializer over a parsed document ----

impl std::error::Error for Mismatch {}

impl de::Error for Mismatch {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::new(Kind::Rule(message.to_string()))
    }

    fn invalid_type(_: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self::new(Kind::WrongType {
            expected: Expected::Described(expected.to_string()),
            or_null: false,
        })
    }

    fn invalid_value(_: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self::new(Kind::Rule(format!("to be {expected}")))
    }

    fn unknown_variant(variant: &str, _: &'static [&'static str]) -> Self {
        Self::new(Kind::UnknownVariant(variant.to_owned()))
    }

    fn unknown_field(field: &str, known: &'static [&'static str]) -> Self {
        Self::new(Kind::UnknownKey {
            key: field.to_owned(),
            known,
        })
    }

    fn missing_field(field: &'static str) -> Self {
        Self::new(Kind::MissingKey(field))
    }
}

struct Reader<'de> {
    value: &'de Value,
    /// Inside an `Option`: a type error says `or null`.
    or_null: bool,
}

impl<'de> Reader<'de> {
    fn new(value: &'de Value) -> Self {
        Self {
            value,
            or_null: false,
        }
    }

    fn wrong(&self, expected: Expected) -> Mismatch {
        Mismatch::new(Kind::WrongType {
            expected,
            or_null: self.or_null,
        })
    }

    /// An integer (booleans and numbers with a fraction or exponent are not integers) that
    /// fits in `T`.
    fn integer<T: TryFrom<i64>>(&self) -> Result<T, Mismatch> {
        let Value::Number(number) = self.value else {
            return Err(self.wrong(Expected::Integer { bits: None }));
        };
        let out_of_range = || {
            self.wrong(Expected::Integer {
                bits: Some(std::mem::size_of::<T>() * 8),
            })
        };
        match number.as_i64() {
            Some(integer) => T::try_from(integer).map_err(|_| out_of_range()),
            // A whole number above i64::MAX is still an integer, just not one that fits.
            None if number.is_u64() => Err(out_of_range()),
            None => Err(self.wrong(Expected::Integer { bits: None })),
        }
    }

    fn object(&self) -> Result<&'de Map<String, Value>, Mismatch> {
        match self.value {
            Value::Object(map) => Ok(map),
            _ => Err(self.wrong(Expected::Object)),
        }
    }
}

macro_rules! integers {
    ($($method:ident => $visit:ident($type:ty),)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
            let integer: $type = self.integer()?;
            visitor.$visit(integer)
        })*
    };
}

impl<'de> Deserializer<'de> for Reader<'de> {
    type Error = Mismatch;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(value) => visitor.visit_bool(*value),
            Value::Number(number) => match (number.as_u64(), number.as_i64(), number.as_f64()) {
                (Some(value), _, _) => visitor.visit_u64(value),
                (None, Some(value), _) => visitor.visit_i64(value),
                (None, None, value) => visitor.visit_f64(value.unwrap_or(f64::NAN)),
            },
            Value::String(text) => visitor.visit_borrowed_str(text),
            Value::Array(_) => self.deserialize_seq(visitor),
            Value::Object(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::Bool(value) => visitor.visit_bool(*value),
            _ => Err(self.wrong(Expected::Boolean)),
        }
    }

    integers! {
        deserialize_i8 => visit_i8(i8),
        deserialize_i16 => visit_i16(i16),
        deserialize_i32 => visit_i32(i32),
        deserialize_i64 => visit_i64(i64),
        deserialize_u8 => visit_u8(u8),
        deserialize_u16 => visit_u16(u16),
        deserialize_u32 => visit_u32(u32),
        deserialize_u64 => visit_u64(u64),
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value.as_f64() {
            Some(number) => visitor.visit_f64(number),
            None => Err(self.wrong(Expected::Number)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::String(text) => visitor.visit_borrowed_str(text),
            _ => Err(self.wrong(Expected::String)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(Reader {
                or_null: true,
                ..self
            }),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Mismatch> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::Array(items) => visitor.visit_seq(Items(items.iter().enumerate())),
            _ => Err(self.wrong(Expected::List)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        let map = self.object()?;
        visitor.visit_map(Entries {
            entries: map
                .iter()
                .map(|(key, value)| (key.as_str(), value))
                .collect(),
            next: 0,
        })
    }

    /// Unknown keys first, alphabetically, so that the first one is what a derive with
    /// `deny_unknown_fields` reports; then the fields present, in declaration order.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Mismatch> {
        let map = self.object()?;
        let mut unknown: Vec<(&str, &Value)> = map
            .iter()
            .map(|(key, value)| (key.as_str(), value))
            .filter(|(key, _)| !fields.contains(key))
            .collect();
        unknown.sort_by_key(|(key, _)| *key);
        let known = fields
            .iter()
            .filter_map(|field| map.get_key_value(*field))
            .map(|(key, value)| (key.as_str(), value));
        visitor.visit_map(Entries {
            entries: unknown.into_iter().chain(known).collect(),
            next: 0,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Mismatch> {
        match self.value {
            Value::String(name) => visitor.visit_enum(BorrowedStrDeserializer::new(name)),
            _ => Err(self.wrong(Expected::String)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Mismatch> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct tuple tuple_struct identifier
    }
}

struct Items<'de>(std::iter::Enumerate<std::slice::Iter<'de, Value>>);

impl<'de> de::SeqAccess<'de> for Items<'de> {
    type Error = Mismatch;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Mismatch> {
        let Some((index, item)) = self.0.next() else {
            return Ok(None);
        };
        seed.deserialize(Reader::new(item))
            .map(Some)
            .map_err(|error| error.within(Segment::Index(index)))
    }
}

/// The entries of an object, in the order they are read.
struct Entries<'de> {
    entries: Vec<(&'de str, &'de Value)>,
    next: usize,
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = Mismatch;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Mismatch> {
        let Some((key, _)) = self.entries.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Mismatch> {
        let (key, value) = self.entries[self.next];
        self.next += 1;
        seed.deserialize(Reader::new(value))
            .map_err(|error| error.within(Segment::Key(key.to_owned())))
    }
}

#[cfg(test)]
mod tests;
