//! Reading one config object strictly, and the error that names the key to fix.
//!
//! [`ConfigError`] is every way `config.json` can be wrong, with the dotted key as data
//! (`retry.max_attempts`, `hooks[1].on[0]`); its message is the one the user reads after the
//! file path. [`Section`] reads a nested object (`retry`, `rate_limit`, `budget`) with the
//! same rules and words as the top level.
//!
//! The policy modules that own those objects import this module, and `config` imports them:
//! so nothing in here imports a policy module (their own error types, such as the hook
//! event's, live in files of their own).

use std::fmt;

use serde_json::{Map, Value};

use crate::domain::hooks::event::UnknownHookEvent;
use crate::domain::seconds::format_seconds;
use crate::domain::stop_regex::describe_regex_error;
use crate::domain::strict_json::StrictError;
use crate::domain::template::TemplateError;

/// A config error; the message names the key (the caller prefixes the file path).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The file is not strict JSON (a syntax error, a key given twice).
    #[error(transparent)]
    Syntax(StrictError),
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
    WrongValue { key: String, expected: Expected },
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
            expected,
        }
    }
}

/// What a key's value should have been, worded to follow `expected <key> to be`.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Object,
    ObjectOrNull,
    String,
    StringOrNull,
    Integer,
    IntegerOrNull,
    Number,
    NumberOrNull,
    List,
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
            Self::Object => f.write_str("an object"),
            Self::ObjectOrNull => f.write_str("an object or null"),
            Self::String => f.write_str("a string"),
            Self::StringOrNull => f.write_str("a string or null"),
            Self::Integer => f.write_str("an integer"),
            Self::IntegerOrNull => f.write_str("an integer or null"),
            Self::Number => f.write_str("a number"),
            Self::NumberOrNull => f.write_str("a number or null"),
            Self::List => f.write_str("a list"),
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

/// The alphabetically first key of `object` that is not in `known`, as an error naming it
/// `<prefix><key>`.
pub(crate) fn reject_unknown_keys(
    object: &Map<String, Value>,
    prefix: &str,
    known: &'static [&'static str],
) -> Result<(), ConfigError> {
    let first_unknown = object
        .keys()
        .filter(|key| !known.contains(&key.as_str()))
        .min();
    match first_unknown {
        None => Ok(()),
        Some(key) => Err(ConfigError::UnknownKey {
            key: format!("{prefix}{key}"),
            known,
        }),
    }
}

/// A nested config object (`retry`, `rate_limit`) being read. Absent keys are left to the
/// caller's defaults; present ones are checked strictly, and every message names the dotted
/// key.
pub(crate) struct Section<'a> {
    name: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Section<'a> {
    /// The object at top-level key `name`, its keys checked against `known` (unknown keys
    /// first, as at the top level). `None` when the key is absent or `null`: the defaults.
    pub(crate) fn read(
        name: &'static str,
        value: Option<&'a Value>,
        known: &'static [&'static str],
    ) -> Result<Option<Self>, ConfigError> {
        let map = match value {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(ConfigError::wrong(name, Expected::ObjectOrNull)),
        };
        reject_unknown_keys(map, &format!("{name}."), known)?;
        Ok(Some(Self { name, map }))
    }

    /// `retry.max_attempts`.
    pub(crate) fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    /// An integer from `min` to `u32::MAX`, when present.
    pub(crate) fn integer(&self, key: &str, min: u32) -> Result<Option<u32>, ConfigError> {
        let number = match self.map.get(key) {
            None => return Ok(None),
            // Booleans and non-integral numbers (`2.0` too) are rejected, as for max_phases.
            Some(Value::Number(number)) if number.is_u64() || number.is_i64() => number,
            Some(_) => return Err(ConfigError::wrong(self.key(key), Expected::Integer)),
        };
        match number.as_i64().map(|value| (value, u32::try_from(value))) {
            Some((_, Ok(value))) if value >= min => Ok(Some(value)),
            Some((value, _)) if value < i64::from(min) => Err(ConfigError::wrong(
                self.key(key),
                Expected::AtLeast(u64::from(min)),
            )),
            _ => Err(ConfigError::wrong(
                self.key(key),
                Expected::AtMost(u64::from(u32::MAX)),
            )),
        }
    }

    /// An integer from 1 to `u64::MAX`, when present and not `null`.
    pub(crate) fn positive_u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) if number.is_u64() || number.is_i64() => {
                match number.as_u64() {
                    Some(value) if value >= 1 => Ok(Some(value)),
                    _ => Err(ConfigError::wrong(self.key(key), Expected::AtLeast(1))),
                }
            }
            Some(_) => Err(ConfigError::wrong(self.key(key), Expected::Integer)),
        }
    }

    /// A finite number greater than 0, when present and not `null`.
    pub(crate) fn positive_number(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        if matches!(self.map.get(key), Some(Value::Null)) {
            return Ok(None);
        }
        self.seconds(key, false)
    }

    /// A finite number of seconds, when present: at least 0, or greater than 0 when
    /// `zero_allowed` is false.
    pub(crate) fn seconds(
        &self,
        key: &str,
        zero_allowed: bool,
    ) -> Result<Option<f64>, ConfigError> {
        let seconds = match self.map.get(key) {
            None => return Ok(None),
            Some(Value::Number(number)) => number.as_f64(),
            Some(_) => return Err(ConfigError::wrong(self.key(key), Expected::Number)),
        };
        match seconds {
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(Some(seconds)),
            // `-0.0` is read as 0 here: it waits no time at all.
            Some(seconds) if zero_allowed && seconds == 0.0 => Ok(Some(0.0)),
            _ if zero_allowed => Err(ConfigError::wrong(
                self.key(key),
                Expected::FiniteAtLeastZero,
            )),
            _ => Err(ConfigError::wrong(self.key(key), Expected::FiniteAboveZero)),
        }
    }

    /// A list of strings, when present; item `i` is named `<key>[i]`.
    pub(crate) fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let items = match self.map.get(key) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(ConfigError::wrong(self.key(key), Expected::List)),
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                _ => Err(ConfigError::wrong(
                    format!("{}[{index}]", self.key(key)),
                    Expected::String,
                )),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}
