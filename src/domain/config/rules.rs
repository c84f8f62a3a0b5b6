//! [`ConfigError`], which names the dotted config key to fix, and the value rules config keys
//! are read with. The policy modules that own nested objects (`retry`, `rate_limit`, `budget`,
//! `hooks`) import this module and `config` imports them, so nothing here imports a policy
//! module.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Deserialize, Unexpected};
use serde_json::Value;

use crate::domain::hooks::event::UnknownHookEvent;
use crate::domain::seconds::{format_seconds, is_valid_duration};
use crate::domain::stop_regex::describe_regex_error;
use crate::domain::strict_json::{Kind, ReadError};
use crate::domain::template::TemplateError;

/// A config error; the message names the key (the caller prefixes the file path).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not strict JSON (a syntax error, a key given twice), or a key that is unknown, missing,
    /// of the wrong type or out of range: `expected retry.on[1] to be a string`.
    #[error("{0}")]
    Read(String),
    /// A value of the right type that its own parser refuses.
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: Reason },
    /// A `retry.on` item that names no attempt status at all.
    #[error(
        "invalid {key} '{}'; retryable statuses: {}",
        .name.escape_debug(),
        .retryable.join(", ")
    )]
    UnknownStatus {
        key: String,
        name: String,
        retryable: Vec<&'static str>,
    },
}

impl ConfigError {
    /// `expected <key> to be <expected>`, the shape most mistakes take.
    pub(crate) fn wrong(key: &str, expected: Expected) -> Self {
        Self::Read(format!("expected {key} to be {expected}"))
    }
}

/// Every key dotted (`retry.on[1]`), the file itself `config`.
impl From<ReadError> for ConfigError {
    fn from(error: ReadError) -> Self {
        let mismatch = match error {
            ReadError::Syntax(message) => return Self::Read(message),
            ReadError::Mismatch(mismatch) => mismatch,
        };
        let key = |extra: Option<&str>| match (mismatch.path.is_empty(), extra) {
            (true, None) => "config".to_owned(),
            _ => mismatch.qualified(extra),
        };
        Self::Read(match &mismatch.kind {
            Kind::UnknownKey {
                key: unknown,
                known,
            } => format!(
                "unknown key '{}'; known keys: {}",
                key(Some(unknown)),
                known.join(", ")
            ),
            Kind::MissingKey(missing) => format!("missing required key '{}'", key(Some(missing))),
            Kind::WrongType { expected, or_null } => {
                format!("expected {} to be {}", key(None), expected.words(*or_null))
            }
            Kind::UnknownVariant(value) => {
                format!("invalid {} '{}'", key(None), value.escape_debug())
            }
            Kind::Rule(rule) => format!("expected {} {rule}", key(None)),
        })
    }
}

/// What a key's value should have been, worded to follow `expected <key> to be`.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Integer,
    IntegerOrNull,
    Number,
    NumberOrNull,
    /// `a non-empty list of <items> (<known>)`.
    NonEmptyListOf {
        items: &'static str,
        known: &'static [&'static str],
    },
    AtLeast(u64),
    AtMost(u64),
    /// At least the seconds another key holds (`retry.max_backoff_seconds`).
    AtLeastSecondsOf {
        key: &'static str,
        seconds: f64,
    },
    FiniteAboveZero,
    FiniteAtLeastZero,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Integer => f.write_str("an integer"),
            Self::IntegerOrNull => f.write_str("an integer or null"),
            Self::Number => f.write_str("a number"),
            Self::NumberOrNull => f.write_str("a number or null"),
            Self::NonEmptyListOf { items, known } => {
                write!(f, "a non-empty list of {items} ({})", known.join(", "))
            }
            Self::AtLeast(min) => write!(f, "at least {min}"),
            Self::AtMost(max) => write!(f, "at most {max}"),
            Self::AtLeastSecondsOf { key, seconds } => {
                write!(f, "at least {key} ({})", format_seconds(*seconds))
            }
            Self::FiniteAboveZero => f.write_str("a finite number greater than 0"),
            Self::FiniteAtLeastZero => f.write_str("a finite number of at least 0"),
        }
    }
}

/// Why a value of the right JSON type is refused: what its own parser said.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Reason {
    #[error(transparent)]
    Template(TemplateError),
    #[error(transparent)]
    UnknownEvent(UnknownHookEvent),
    #[error("invalid rate-limit regex '{pattern}': {}", describe_regex_error(.error))]
    RateLimitRegex {
        pattern: String,
        error: regex::Error,
    },
    #[error("{status} is never retried; retryable statuses: {}", .retryable.join(", "))]
    NeverRetried {
        status: &'static str,
        retryable: Vec<&'static str>,
    },
    #[error("{status} is listed twice")]
    ListedTwice { status: &'static str },
}

// ---- value rules, for `deserialize_with` ----

/// Reads a value with `rule`, whose error says what the value should have been.
pub(crate) fn read<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    rule: impl FnOnce(&Value) -> Result<T, Expected>,
) -> Result<T, D::Error> {
    let value = Value::deserialize(deserializer)?;
    rule(&value).map_err(|expected| {
        let words = expected.to_string();
        de::Error::invalid_type(Unexpected::Other("value"), &words.as_str())
    })
}

/// An integer from `MIN` to `u32::MAX`; `null` is no integer.
pub(crate) fn integer_at_least<'de, D: Deserializer<'de>, const MIN: u32>(
    deserializer: D,
) -> Result<Option<u32>, D::Error> {
    read(deserializer, |value| match value {
        // Booleans and non-integral numbers (`2.0` too) are rejected.
        Value::Number(number) if number.is_u64() || number.is_i64() => {
            match number.as_i64().map(|value| (value, u32::try_from(value))) {
                Some((_, Ok(value))) if value >= MIN => Ok(Some(value)),
                Some((value, _)) if value < i64::from(MIN) => {
                    Err(Expected::AtLeast(u64::from(MIN)))
                }
                _ => Err(Expected::AtMost(u64::from(u32::MAX))),
            }
        }
        _ => Err(Expected::Integer),
    })
}

/// An integer from 1 to `u64::MAX`, or `null` for none; `not_integer` is what any other value
/// should have been.
pub(crate) fn positive_or_null(
    value: &Value,
    not_integer: Expected,
) -> Result<Option<u64>, Expected> {
    match value {
        Value::Null => Ok(None),
        Value::Number(number) if number.is_u64() || number.is_i64() => number
            .as_u64()
            .filter(|value| *value >= 1)
            .map(Some)
            .ok_or(Expected::AtLeast(1)),
        _ => Err(not_integer),
    }
}

/// A finite number of seconds greater than 0 (`rate_limit.default_wait_seconds`); `null` is
/// no number.
pub(crate) fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    read(deserializer, |value| match value {
        Value::Number(number) => number
            .as_f64()
            .filter(|seconds| is_valid_duration(*seconds))
            .map(Some)
            .ok_or(Expected::FiniteAboveZero),
        _ => Err(Expected::Number),
    })
}

/// A finite number of seconds of at least 0 (`retry.backoff_seconds`; `-0.0` is 0, no wait at
/// all); `null` is no number.
pub(crate) fn seconds_or_zero<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    read(deserializer, |value| match value {
        Value::Number(number) => match number.as_f64() {
            Some(seconds) if is_valid_duration(seconds) => Ok(Some(seconds)),
            Some(0.0) => Ok(Some(0.0)),
            _ => Err(Expected::FiniteAtLeastZero),
        },
        _ => Err(Expected::Number),
    })
}
