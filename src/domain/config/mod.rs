//! `.ai-session-handler/config.json` (docs/cli.md): strict keys and types, defaults for what is
//! absent, and messages that name the key to fix. Also the seconds values shared with the
//! command line: `--timeout`/`--idle-timeout` parsing and the `:g`-style rendering used in
//! timeout messages.
//!
//! The nested `retry`, `rate_limit` (issue 11) and `budget` (issue 19) objects are read by
//! their own modules ([`crate::domain::retry`], [`crate::domain::rate_limit`],
//! [`crate::domain::budget`]) through `Section`, so their messages name the dotted key
//! (`unknown key 'retry.max_attempt'`, `expected rate_limit.max_waits to be an integer`) in the
//! same words as the top level.

use serde_json::{Map, Value};

use crate::domain::budget::BudgetConfig;
use crate::domain::hooks::{Hook, hooks_from_config};
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::retry::RetryPolicy;
use crate::domain::strict_json::parse_document;

/// Effective config-file values. A missing file is `Config::default()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub agent_cmd: Option<String>,
    /// `None` runs to completion.
    pub max_phases: Option<u64>,
    /// `None` (explicit `null`) means no timeout; the default is 3600.
    pub timeout_seconds: Option<f64>,
    pub stop_on_regex: Vec<String>,
    pub idle_timeout_seconds: Option<f64>,
    /// `retry`; the default (one attempt) retries nothing, as before the key existed.
    pub retry: RetryPolicy,
    /// `rate_limit`; the default detects nothing but exit 75 and never waits.
    pub rate_limit: RateLimitPolicy,
    /// `hooks` (issue 21): commands run at a run's notable moments; none by default.
    pub hooks: Vec<Hook>,
    /// `verify_timeout_seconds` (issue 20): the limit on each verification check; `None`
    /// (explicit `null`) means none, the default is 600.
    pub verify_timeout_seconds: Option<f64>,
    /// `budget`; the default caps nothing.
    pub budget: BudgetConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            agent_cmd: None,
            max_phases: None,
            timeout_seconds: Some(DEFAULT_TIMEOUT_SECONDS),
            stop_on_regex: Vec::new(),
            idle_timeout_seconds: None,
            retry: RetryPolicy::default(),
            rate_limit: RateLimitPolicy::default(),
            hooks: Vec::new(),
            verify_timeout_seconds: Some(DEFAULT_VERIFY_TIMEOUT_SECONDS),
            budget: BudgetConfig::default(),
        }
    }
}

/// A config error; the message names the key (the caller prefixes the file path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The example config `init` writes.
/// The program of [`EXAMPLE_CONFIG`]'s `agent_cmd`, which `init` looks up to say whether the
/// config runs here as it is.
pub const EXAMPLE_AGENT_PROGRAM: &str = "codex";

pub const EXAMPLE_CONFIG: &str = "{\n  \"agent_cmd\": \"codex exec\",\n  \"max_phases\": null,\n  \"timeout_seconds\": 3600,\n  \"stop_on_regex\": []\n}\n";

/// The per-attempt timeout when the config file does not mention `timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 3600.0;

/// The per-check limit when the config file does not mention `verify_timeout_seconds`.
pub const DEFAULT_VERIFY_TIMEOUT_SECONDS: f64 = 600.0;

/// Every key the config file may hold, in the order they are validated and listed in the
/// unknown-key message.
const KNOWN_KEYS: [&str; 10] = [
    "agent_cmd",
    "max_phases",
    "timeout_seconds",
    "stop_on_regex",
    "idle_timeout_seconds",
    "retry",
    "rate_limit",
    "hooks",
    "verify_timeout_seconds",
    "budget",
];

/// The UTF-8 byte order mark some editors put first; plans accept it, and so does the config.
const BYTE_ORDER_MARK: &[u8] = "\u{feff}".as_bytes();

/// Parses and validates config bytes (a leading byte order mark is skipped).
pub fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
    let bytes = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
    let value = parse_document(bytes).map_err(|error| ConfigError(error.0))?;
    let Value::Object(object) = value else {
        return Err(invalid("expected config to be an object"));
    };
    reject_unknown_keys(&object)?;
    Ok(Config {
        agent_cmd: agent_cmd(object.get("agent_cmd"))?,
        max_phases: max_phases(object.get("max_phases"))?,
        timeout_seconds: match object.get("timeout_seconds") {
            None => Some(DEFAULT_TIMEOUT_SECONDS),
            Some(value) => optional_seconds("timeout_seconds", value)?,
        },
        stop_on_regex: stop_on_regex(object.get("stop_on_regex"))?,
        idle_timeout_seconds: match object.get("idle_timeout_seconds") {
            None => None,
            Some(value) => optional_seconds("idle_timeout_seconds", value)?,
        },
        retry: RetryPolicy::from_config(object.get("retry"))?,
        rate_limit: RateLimitPolicy::from_config(object.get("rate_limit"))?,
        hooks: hooks_from_config(object.get("hooks"))?,
        verify_timeout_seconds: match object.get("verify_timeout_seconds") {
            None => Some(DEFAULT_VERIFY_TIMEOUT_SECONDS),
            Some(value) => optional_seconds("verify_timeout_seconds", value)?,
        },
        budget: BudgetConfig::from_config(object.get("budget"))?,
    })
}

/// Parses a `--timeout`/`--idle-timeout` value (a clap value parser): a finite number of
/// seconds greater than 0. Surrounding whitespace is accepted, as Python's `float()` did.
pub fn parse_seconds(text: &str) -> Result<f64, InvalidSeconds> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if is_valid_duration(seconds) => Ok(seconds),
        _ => Err(InvalidSeconds(text.to_owned())),
    }
}

/// A `--timeout`/`--idle-timeout` value that is not a finite number of seconds above 0.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a finite number of seconds greater than 0, got '{0}'")]
pub struct InvalidSeconds(pub String);

/// Renders seconds the way Python's `format(seconds, "g")` does, because the timeout message
/// (`agent command timed out after <t> seconds`) is part of the observable contract: six
/// significant digits, no trailing zeros, scientific notation below 1e-4 and from 1e6 on
/// (`1`, `0.1`, `2.5`, `3600`, `1e+06`, `1e-05`).
pub fn format_seconds(seconds: f64) -> String {
    const SIGNIFICANT_DIGITS: i32 = 6;
    if seconds.is_nan() {
        return "nan".to_owned();
    }
    if seconds.is_infinite() {
        return if seconds > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rounding to six significant digits decides the exponent (999999.5 becomes 1e+06), so
    // take it from the rounded scientific rendering rather than from log10.
    let scientific = format!("{:.*e}", (SIGNIFICANT_DIGITS - 1) as usize, seconds);
    let Some((mantissa, exponent)) = scientific
        .split_once('e')
        .and_then(|(mantissa, exponent)| Some((mantissa, exponent.parse::<i32>().ok()?)))
    else {
        // `{:e}` always writes `<mantissa>e<exponent>`; keep a rendering rather than panic.
        return seconds.to_string();
    };
    if (-4..SIGNIFICANT_DIGITS).contains(&exponent) {
        let decimals = (SIGNIFICANT_DIGITS - 1 - exponent) as usize;
        without_trailing_zeros(&format!("{seconds:.decimals$}")).to_owned()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            without_trailing_zeros(mantissa),
            exponent.unsigned_abs()
        )
    }
}

/// `2.500` → `2.5`, `3600.0` → `3600`; text without a decimal point is left alone.
fn without_trailing_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

fn is_valid_duration(seconds: f64) -> bool {
    seconds.is_finite() && seconds > 0.0
}

fn invalid(message: &str) -> ConfigError {
    ConfigError(message.to_owned())
}

/// A typo such as `timeout` must not be silently ignored (docs/cli.md). With several unknown keys
/// the alphabetically first is named, so the message does not depend on key order.
fn reject_unknown_keys(object: &Map<String, Value>) -> Result<(), ConfigError> {
    let first_unknown = object
        .keys()
        .filter(|key| !KNOWN_KEYS.contains(&key.as_str()))
        .min();
    match first_unknown {
        None => Ok(()),
        Some(key) => Err(ConfigError(format!(
            "unknown key '{key}'; known keys: {}",
            KNOWN_KEYS.join(", ")
        ))),
    }
}

fn agent_cmd(value: Option<&Value>) -> Result<Option<String>, ConfigError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(template)) => Ok(Some(template.clone())),
        Some(_) => Err(invalid("expected agent_cmd to be a string or null")),
    }
}

fn max_phases(value: Option<&Value>) -> Result<Option<u64>, ConfigError> {
    let number = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) if number.is_u64() || number.is_i64() => number,
        // Booleans and non-integral numbers (`2.0` included, as in the original) are rejected.
        Some(_) => return Err(invalid("expected max_phases to be an integer or null")),
    };
    match number.as_u64() {
        Some(count) if count >= 1 => Ok(Some(count)),
        _ => Err(invalid("expected max_phases to be at least 1")),
    }
}

/// `timeout_seconds`, `idle_timeout_seconds` and `verify_timeout_seconds` share their rules;
/// only the default for an absent key differs, and that is decided by the caller.
fn optional_seconds(key: &str, value: &Value) -> Result<Option<f64>, ConfigError> {
    let seconds = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => number.as_f64(),
        _ => {
            return Err(ConfigError(format!(
                "expected {key} to be a number or null"
            )));
        }
    };
    match seconds {
        Some(seconds) if is_valid_duration(seconds) => Ok(Some(seconds)),
        _ => Err(ConfigError(format!(
            "expected {key} to be a finite number greater than 0"
        ))),
    }
}

fn stop_on_regex(value: Option<&Value>) -> Result<Vec<String>, ConfigError> {
    let items = match value {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid("expected stop_on_regex to be a list")),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::String(pattern) => Ok(pattern.clone()),
            _ => Err(ConfigError(format!(
                "expected stop_on_regex[{index}] to be a string"
            ))),
        })
        .collect()
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
        known: &[&str],
    ) -> Result<Option<Self>, ConfigError> {
        let map = match value {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(ConfigError(format!(
                    "expected {name} to be an object or null"
                )));
            }
        };
        let first_unknown = map
            .keys()
            .filter(|key| !known.contains(&key.as_str()))
            .min();
        if let Some(key) = first_unknown {
            return Err(ConfigError(format!(
                "unknown key '{name}.{key}'; known keys: {}",
                known.join(", ")
            )));
        }
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
            Some(_) => {
                return Err(ConfigError(format!(
                    "expected {} to be an integer",
                    self.key(key)
                )));
            }
        };
        match number.as_i64().map(|value| (value, u32::try_from(value))) {
            Some((_, Ok(value))) if value >= min => Ok(Some(value)),
            Some((value, _)) if value < i64::from(min) => Err(ConfigError(format!(
                "expected {} to be at least {min}",
                self.key(key)
            ))),
            _ => Err(ConfigError(format!(
                "expected {} to be at most {}",
                self.key(key),
                u32::MAX
            ))),
        }
    }

    /// An integer from 1 to `u64::MAX`, when present and not `null`.
    pub(crate) fn positive_u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) if number.is_u64() || number.is_i64() => {
                match number.as_u64() {
                    Some(value) if value >= 1 => Ok(Some(value)),
                    _ => Err(ConfigError(format!(
                        "expected {} to be at least 1",
                        self.key(key)
                    ))),
                }
            }
            Some(_) => Err(ConfigError(format!(
                "expected {} to be an integer",
                self.key(key)
            ))),
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
            Some(_) => {
                return Err(ConfigError(format!(
                    "expected {} to be a number",
                    self.key(key)
                )));
            }
        };
        match seconds {
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(Some(seconds)),
            // `-0.0` is read as 0 here: it waits no time at all.
            Some(seconds) if zero_allowed && seconds == 0.0 => Ok(Some(0.0)),
            _ if zero_allowed => Err(ConfigError(format!(
                "expected {} to be a finite number of at least 0",
                self.key(key)
            ))),
            _ => Err(ConfigError(format!(
                "expected {} to be a finite number greater than 0",
                self.key(key)
            ))),
        }
    }

    /// A list of strings, when present; item `i` is named `<key>[i]`.
    pub(crate) fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let items = match self.map.get(key) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(ConfigError(format!(
                    "expected {} to be a list",
                    self.key(key)
                )));
            }
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                _ => Err(ConfigError(format!(
                    "expected {}[{index}] to be a string",
                    self.key(key)
                ))),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }
}

#[cfg(test)]
mod tests;
