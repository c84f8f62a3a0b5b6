//! `.ai-session-handler/config.json` (docs/cli.md): strict keys and types, defaults for what is
//! absent, and messages that name the key to fix.
//!
//! The nested `retry`, `rate_limit` (issue 11), `budget` (issue 19) and `hooks` (issue 21)
//! values are read by their own modules ([`crate::domain::retry`],
//! [`crate::domain::rate_limit`], [`crate::domain::budget`], [`crate::domain::hooks`]) with
//! [`section`], so their messages name the dotted key (`unknown key 'retry.max_attempt'`,
//! `expected rate_limit.max_waits to be an integer`) in the same words as the top level. Those
//! modules import [`section`] and not this file, which imports them.

pub(crate) mod section;

use serde_json::Value;

use crate::domain::budget::BudgetConfig;
use crate::domain::hooks::{Hook, hooks_from_config};
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::retry::RetryPolicy;
use crate::domain::seconds::is_valid_duration;
use crate::domain::strict_json::parse_document;
use section::{ConfigError, Expected, reject_unknown_keys};

/// Effective config-file values. A missing file is `Config::default()`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Config {
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

/// The example config `init` writes.
/// The program of [`EXAMPLE_CONFIG`]'s `agent_cmd`, which `init` looks up to say whether the
/// config runs here as it is.
pub(crate) const EXAMPLE_AGENT_PROGRAM: &str = "codex";

pub(crate) const EXAMPLE_CONFIG: &str = "{\n  \"agent_cmd\": \"codex exec\",\n  \"max_phases\": null,\n  \"timeout_seconds\": 3600,\n  \"stop_on_regex\": []\n}\n";

/// The per-attempt timeout when the config file does not mention `timeout_seconds`.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: f64 = 3600.0;

/// The per-check limit when the config file does not mention `verify_timeout_seconds`.
pub(crate) const DEFAULT_VERIFY_TIMEOUT_SECONDS: f64 = 600.0;

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
pub(crate) fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
    let bytes = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
    let value = parse_document(bytes)
        .map_err(|message| ConfigError::Syntax(crate::domain::strict_json::StrictError(message)))?;
    let Value::Object(object) = value else {
        return Err(ConfigError::wrong("config", Expected::Object));
    };
    // A typo such as `timeout` must not be silently ignored (docs/cli.md).
    reject_unknown_keys(&object, "", &KNOWN_KEYS)?;
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

fn agent_cmd(value: Option<&Value>) -> Result<Option<String>, ConfigError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(template)) => Ok(Some(template.clone())),
        Some(_) => Err(ConfigError::wrong("agent_cmd", Expected::StringOrNull)),
    }
}

fn max_phases(value: Option<&Value>) -> Result<Option<u64>, ConfigError> {
    let number = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) if number.is_u64() || number.is_i64() => number,
        // Booleans and non-integral numbers (`2.0` included, as in the original) are rejected.
        Some(_) => return Err(ConfigError::wrong("max_phases", Expected::IntegerOrNull)),
    };
    match number.as_u64() {
        Some(count) if count >= 1 => Ok(Some(count)),
        _ => Err(ConfigError::wrong("max_phases", Expected::AtLeast(1))),
    }
}

/// `timeout_seconds`, `idle_timeout_seconds` and `verify_timeout_seconds` share their rules;
/// only the default for an absent key differs, and that is decided by the caller.
fn optional_seconds(key: &str, value: &Value) -> Result<Option<f64>, ConfigError> {
    let seconds = match value {
        Value::Null => return Ok(None),
        Value::Number(number) => number.as_f64(),
        _ => return Err(ConfigError::wrong(key, Expected::NumberOrNull)),
    };
    match seconds {
        Some(seconds) if is_valid_duration(seconds) => Ok(Some(seconds)),
        _ => Err(ConfigError::wrong(key, Expected::FiniteAboveZero)),
    }
}

fn stop_on_regex(value: Option<&Value>) -> Result<Vec<String>, ConfigError> {
    let items = match value {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ConfigError::wrong("stop_on_regex", Expected::List)),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::String(pattern) => Ok(pattern.clone()),
            _ => Err(ConfigError::wrong(
                format!("stop_on_regex[{index}]"),
                Expected::String,
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests;
