//! `.ai-session-handler/config.json` (docs/cli.md): strict keys and types, defaults for what is
//! absent, and messages that name the dotted key to fix. The nested `retry`, `rate_limit`,
//! `budget` and `hooks` values are declared by their own modules, which import [`rules`].

pub(crate) mod rules;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::domain::budget::BudgetConfig;
use crate::domain::hooks::{Hook, HookEntry};
use crate::domain::rate_limit::{RateLimitConfig, RateLimitPolicy};
use crate::domain::retry::{RetryConfig, RetryPolicy};
use crate::domain::seconds::is_valid_duration;
use crate::domain::strict_json;
use rules::{ConfigError, Expected, positive_or_null, read};

/// Effective config-file values. A missing file is `Config::default()`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Config {
    pub agent_cmd: Option<String>,
    /// `None` runs to completion.
    pub max_phases: Option<u64>,
    /// `None` (explicit `null`) means no timeout.
    pub timeout_seconds: Option<f64>,
    pub stop_on_regex: Vec<String>,
    pub idle_timeout_seconds: Option<f64>,
    pub retry: RetryPolicy,
    pub rate_limit: RateLimitPolicy,
    pub hooks: Vec<Hook>,
    /// The limit on each verification check; `None` (explicit `null`) means none.
    pub verify_timeout_seconds: Option<f64>,
    pub budget: BudgetConfig,
    /// `record_changes`: each outcome records what its attempt changed in its git work tree;
    /// on by default.
    pub record_changes: bool,
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
            record_changes: true,
        }
    }
}

/// The program of [`EXAMPLE_CONFIG`]'s `agent_cmd`, which `init` looks up to say whether the
/// config runs here as it is.
pub(crate) const EXAMPLE_AGENT_PROGRAM: &str = "codex";

/// The example config `init` writes.
pub(crate) const EXAMPLE_CONFIG: &str = "{\n  \"agent_cmd\": \"codex exec\",\n  \"max_phases\": null,\n  \"timeout_seconds\": 3600,\n  \"stop_on_regex\": []\n}\n";

pub(crate) const DEFAULT_TIMEOUT_SECONDS: f64 = 3600.0;

pub(crate) const DEFAULT_VERIFY_TIMEOUT_SECONDS: f64 = 600.0;

/// Some editors put it first; plans accept it, and so does the config.
const BYTE_ORDER_MARK: &[u8] = "\u{feff}".as_bytes();

/// `config.json` as written: every key optional, checked in this order.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ConfigFile {
    agent_cmd: Option<String>,
    #[serde(deserialize_with = "max_phases")]
    max_phases: Option<u64>,
    #[serde(default = "default_timeout", deserialize_with = "seconds_or_null")]
    timeout_seconds: Option<f64>,
    stop_on_regex: Vec<String>,
    #[serde(deserialize_with = "seconds_or_null")]
    idle_timeout_seconds: Option<f64>,
    retry: Option<RetryConfig>,
    rate_limit: Option<RateLimitConfig>,
    hooks: Option<Vec<HookEntry>>,
    #[serde(
        default = "default_verify_timeout",
        deserialize_with = "seconds_or_null"
    )]
    verify_timeout_seconds: Option<f64>,
    budget: Option<BudgetConfig>,
    #[serde(default = "default_record_changes")]
    record_changes: bool,
}

fn default_record_changes() -> bool {
    true
}

fn default_timeout() -> Option<f64> {
    Some(DEFAULT_TIMEOUT_SECONDS)
}

fn default_verify_timeout() -> Option<f64> {
    Some(DEFAULT_VERIFY_TIMEOUT_SECONDS)
}

pub(crate) fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
    let bytes = bytes.strip_prefix(BYTE_ORDER_MARK).unwrap_or(bytes);
    let file: ConfigFile = strict_json::from_slice(bytes)?;
    Ok(Config {
        agent_cmd: file.agent_cmd,
        max_phases: file.max_phases,
        timeout_seconds: file.timeout_seconds,
        stop_on_regex: file.stop_on_regex,
        idle_timeout_seconds: file.idle_timeout_seconds,
        retry: file
            .retry
            .map(RetryPolicy::from_config)
            .transpose()?
            .unwrap_or_default(),
        rate_limit: file
            .rate_limit
            .map(RateLimitPolicy::from_config)
            .transpose()?
            .unwrap_or_default(),
        hooks: file
            .hooks
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(index, entry)| Hook::from_config(entry, index))
            .collect::<Result<_, _>>()?,
        verify_timeout_seconds: file.verify_timeout_seconds,
        budget: file.budget.unwrap_or_default(),
        record_changes: file.record_changes,
    })
}

/// An integer of at least 1, or `null` for no limit.
fn max_phases<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    // Booleans and non-integral numbers (`2.0` included, as in the original) are rejected.
    read(deserializer, |value| {
        positive_or_null(value, Expected::IntegerOrNull)
    })
}

/// `timeout_seconds`, `idle_timeout_seconds` and `verify_timeout_seconds`: a duration, or `null`
/// for none.
fn seconds_or_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    read(deserializer, |value| match value {
        Value::Null => Ok(None),
        Value::Number(number) => number
            .as_f64()
            .filter(|seconds| is_valid_duration(*seconds))
            .map(Some)
            .ok_or(Expected::FiniteAboveZero),
        _ => Err(Expected::NumberOrNull),
    })
}

#[cfg(test)]
mod tests;
