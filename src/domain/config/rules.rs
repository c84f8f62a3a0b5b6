//! The error that names the config key to fix, and the value rules config keys are read
//! with.
//!
//! [`ConfigError`] is every way `config.json` can be wrong, with the dotted key as data
//! (`retry.max_attempts`, `hooks[1].on[0]`); its message is the one the user reads after the
//! file path. The records' strict reader (`domain::strict_json`) reads the file; a mismatch
//! it finds becomes a [`ConfigError`] here.
//!
//! The policy modules that own the nested objects (`retry`, `rate_limit`, `budget`, `hooks`)
//! import this module, and `config` imports them: so nothing in here imports a policy module
//! (their own error types, such as the hook event's, live in files of their own).

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
    /// The file is not strict JSON (a syntax error, a key given twice).
    #[error("{0}")]
    Syntax(String),
    /// An object holds a key it does not know; `known` are its keys, in validation order.
    /// With several unknown keys the alphabetically first is named, so the message does not
    /// depend on key order.
    #[error("unknown key '{key}'; known keys: {}", .known.join(", "))]
    UnknownKey {
        key: String,
        known: &'static [&'static str],
    },
    /// A key that must be given is absent.
    #[error("missing required key '{key}'")]
    MissingKey { key: String },
    /// A value of the wrong JSON type, or out of range.
    #[error("expected {key} to be {expected}")]
    WrongValue { key: String, expected: String },
    /// A value that breaks a rule the reader words itself.
    #[error("expected {key} {rule}")]
    Rule { key: String, rule: String },
    /// A string that names no value the key may have.
    #[error("invalid {key} '{}'", .value.escape_debug())]
    UnknownValue { key: String, value: String },
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
    /// [`ConfigError::WrongValue`], the shape most mistakes take.
    pub(crate) fn wrong(key: impl Into<String>, expected: Expected) -> Self {
        Self::WrongValue {
            key: key.into(),
            expected: expected.to_string(),
        }
    }
}

/// The config file's words for what the reader found: every key dotted (`retry.on[1]`), the
/// file itself `config`.
impl From<ReadError> for ConfigError {
    fn from(error: ReadError) -> Self {
        let mismatch = match error {
            ReadError::Syntax(message) => return Self::Syntax(message),
            ReadError::Mismatch(mismatch) => mismatch,
        };
        let key = |extra: Option<&str>| match (mismatch.path.is_empty(), extra) {
            (true, None) => "config".to_owned(),
            _ => mismatch.qualified(extra),
        };
        match &mismatch.kind {
            Kind::UnknownKey {
                key: unknown,
                known,
            } => Self::UnknownKey {
                key: key(Some(unknown)),
                known,
            },
            Kind::MissingKey(missing) => Self::MissingKey {
                key: key(Some(missing)),
            },
            Kind::WrongType { expected, or_null } => Self::WrongValue {
                key: key(None),
                expected: expected.words(*or_null),
            },
            Kind::UnknownVariant(value) => Self::UnknownValue {
                key: key(None),
                value: value.clone(),
            },
            Kind::Rule(rule) => Self::Rule {
                key: key(None),
                rule: rule.clone(),
            },
        }
    }
}

/// What a key's value should have been, worded to follow `expected <key> to be`.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Integer,
    IntegerOrNull,
    Number,
    NumberOrNull,
    /// A list with at least one item, each one of `known` (`hooks[i].on`: `items` is
    /// `events`).
    NonEmptyListOf {
        items: &'static str,
        known: &'static [&'static str],
    },
    /// An integer in range, below it.
    AtLeast(u64),
    /// An integer in range, above it.
    AtMost(u64),
    /// A number of seconds below the one another key holds (`retry.max_backoff_seconds`
    /// under `retry.backoff_seconds`).
    AtLeastSecondsOf {
        key: &'static str,
        seconds: f64,
    },
    /// A duration: finite and greater than 0.
    FiniteAboveZero,
    /// A wait that may be none: finite and at least 0.
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
    /// Not a valid command template (`rate_limit.fallback_agent_cmds[i]`, `hooks[i].command`).
    #[error(transparent)]
    Template(TemplateError),
    /// Not a hook event name (`hooks[i].on[j]`).
    #[error(transparent)]
    UnknownEvent(UnknownHookEvent),
    /// A `rate_limit.patterns` item `regex` refuses; the problem is its last line.
    #[error("invalid rate-limit regex '{pattern}': {}", describe_regex_error(.error))]
    RateLimitRegex {
        pattern: String,
        error: regex::Error,
    },
    /// A status `retry.on` may not name; `retryable` are the ones it may.
    #[error("{status} is never retried; retryable statuses: {}", .retryable.join(", "))]
    NeverRetried {
        status: &'static str,
        retryable: Vec<&'static str>,
    },
    /// A status `retry.on` names a second time.
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
