//! `.ai-session-handler/config.json` (docs/cli.md): strict keys and types, defaults for what is
//! absent, and messages that name the key to fix. Also the seconds values shared with the
//! command line: `--timeout`/`--idle-timeout` parsing and the `:g`-style rendering used in
//! timeout messages.
//!
//! The nested `retry` and `rate_limit` objects (issue 11) are read by their own modules
//! ([`crate::domain::retry`], [`crate::domain::rate_limit`]) through `Section`, so their
//! messages name the dotted key (`unknown key 'retry.max_attempt'`,
//! `expected rate_limit.max_waits to be an integer`) in the same words as the top level.

use serde_json::{Map, Value};

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
pub const EXAMPLE_CONFIG: &str = "{\n  \"agent_cmd\": \"codex exec\",\n  \"max_phases\": null,\n  \"timeout_seconds\": 3600,\n  \"stop_on_regex\": []\n}\n";

/// The per-attempt timeout when the config file does not mention `timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 3600.0;

/// Every key the config file may hold, in the order they are validated and listed in the
/// unknown-key message.
const KNOWN_KEYS: [&str; 7] = [
    "agent_cmd",
    "max_phases",
    "timeout_seconds",
    "stop_on_regex",
    "idle_timeout_seconds",
    "retry",
    "rate_limit",
];

/// Parses and validates config bytes.
pub fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
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
    })
}

/// Parses a `--timeout`/`--idle-timeout` value (a clap value parser): a finite number of
/// seconds greater than 0. Surrounding whitespace is accepted, as Python's `float()` did.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if is_valid_duration(seconds) => Ok(seconds),
        _ => Err(format!(
            "expected a finite number of seconds greater than 0, got '{text}'"
        )),
    }
}

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

/// `timeout_seconds` and `idle_timeout_seconds` share their rules; only the default for an
/// absent key differs, and that is decided by the caller.
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        parse_config(text.as_bytes())
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(config) => panic!("expected an error for {text}, got {config:?}"),
            Err(ConfigError(message)) => message,
        }
    }

    #[test]
    fn empty_object_is_all_defaults() {
        assert_eq!(parse("{}").unwrap(), Config::default());
        assert_eq!(
            Config::default(),
            Config {
                agent_cmd: None,
                max_phases: None,
                timeout_seconds: Some(3600.0),
                stop_on_regex: vec![],
                idle_timeout_seconds: None,
                retry: RetryPolicy::default(),
                rate_limit: RateLimitPolicy::default(),
            }
        );
    }

    #[test]
    fn example_config_parses_to_its_documented_values() {
        assert_eq!(
            parse(EXAMPLE_CONFIG).unwrap(),
            Config {
                agent_cmd: Some("codex exec".to_owned()),
                max_phases: None,
                timeout_seconds: Some(3600.0),
                stop_on_regex: vec![],
                idle_timeout_seconds: None,
                ..Config::default()
            }
        );
    }

    #[test]
    fn every_key_set() {
        let config = parse(
            r#"{"agent_cmd": "agent {prompt_file}", "max_phases": 2, "timeout_seconds": 0.5,
                "stop_on_regex": ["rate limit", "(?m)^FATAL"], "idle_timeout_seconds": 30}"#,
        )
        .unwrap();
        assert_eq!(
            config,
            Config {
                agent_cmd: Some("agent {prompt_file}".to_owned()),
                max_phases: Some(2),
                timeout_seconds: Some(0.5),
                stop_on_regex: vec!["rate limit".to_owned(), "(?m)^FATAL".to_owned()],
                idle_timeout_seconds: Some(30.0),
                ..Config::default()
            }
        );
    }

    #[test]
    fn invalid_json_names_line_and_column() {
        assert_eq!(
            error("{"),
            "invalid JSON at line 1, column 2: EOF while parsing an object"
        );
        assert!(
            error("{\n  \"agent_cmd\": ,\n}").starts_with("invalid JSON at line 2, column 16: "),
            "{}",
            error("{\n  \"agent_cmd\": ,\n}")
        );
        assert!(error("").starts_with("invalid JSON at line 1, column 1: "));
        assert!(error("{} {}").starts_with("invalid JSON at line 1, column 4: "));
        assert!(error("{\"timeout_seconds\": NaN}").starts_with("invalid JSON at line 1, "));
        assert!(error("\u{feff}{}").starts_with("invalid JSON at line 1, "));
        assert!(
            parse_config(b"{\"agent_cmd\": \"\xff\"}")
                .unwrap_err()
                .0
                .starts_with("invalid JSON at line 1, ")
        );
    }

    #[test]
    fn top_level_must_be_an_object() {
        for text in ["[]", "null", "1", "\"agent\"", "true"] {
            assert_eq!(error(text), "expected config to be an object", "{text}");
        }
    }

    #[test]
    fn unknown_key_is_named_with_the_known_keys() {
        assert_eq!(
            error(r#"{"timeout": 5}"#),
            "unknown key 'timeout'; known keys: agent_cmd, max_phases, timeout_seconds, \
             stop_on_regex, idle_timeout_seconds, retry, rate_limit"
        );
    }

    #[test]
    fn several_unknown_keys_name_the_alphabetically_first() {
        let message = error(r#"{"zeta": 1, "agent_cmd": 5, "beta": 2, "alpha": 3}"#);
        assert!(message.starts_with("unknown key 'alpha'; "), "{message}");
    }

    #[test]
    fn unknown_keys_are_reported_before_type_errors() {
        let message = error(r#"{"agent_cmd": 5, "timeout": 1}"#);
        assert!(message.starts_with("unknown key 'timeout'"), "{message}");
    }

    #[test]
    fn agent_cmd_is_a_string_or_null() {
        assert_eq!(parse(r#"{"agent_cmd": null}"#).unwrap().agent_cmd, None);
        assert_eq!(
            parse(r#"{"agent_cmd": ""}"#).unwrap().agent_cmd,
            Some(String::new())
        );
        for bad in ["1", "true", "[]", "{}", "[\"codex\"]"] {
            assert_eq!(
                error(&format!(r#"{{"agent_cmd": {bad}}}"#)),
                "expected agent_cmd to be a string or null",
                "{bad}"
            );
        }
    }

    #[test]
    fn max_phases_is_a_positive_integer_or_null() {
        assert_eq!(parse(r#"{"max_phases": null}"#).unwrap().max_phases, None);
        assert_eq!(parse(r#"{"max_phases": 1}"#).unwrap().max_phases, Some(1));
        assert_eq!(
            parse(r#"{"max_phases": 18446744073709551615}"#)
                .unwrap()
                .max_phases,
            Some(u64::MAX)
        );
        for bad in ["true", "false", "1.0", "2.5", "\"3\"", "[]", "1e3"] {
            assert_eq!(
                error(&format!(r#"{{"max_phases": {bad}}}"#)),
                "expected max_phases to be an integer or null",
                "{bad}"
            );
        }
        for low in ["0", "-1", "-9223372036854775808"] {
            assert_eq!(
                error(&format!(r#"{{"max_phases": {low}}}"#)),
                "expected max_phases to be at least 1",
                "{low}"
            );
        }
    }

    #[test]
    fn timeout_seconds_defaults_to_3600_and_null_disables_it() {
        assert_eq!(parse("{}").unwrap().timeout_seconds, Some(3600.0));
        assert_eq!(
            parse(r#"{"timeout_seconds": null}"#)
                .unwrap()
                .timeout_seconds,
            None
        );
        assert_eq!(
            parse(r#"{"timeout_seconds": 5}"#).unwrap().timeout_seconds,
            Some(5.0)
        );
        assert_eq!(
            parse(r#"{"timeout_seconds": 0.001}"#)
                .unwrap()
                .timeout_seconds,
            Some(0.001)
        );
    }

    #[test]
    fn seconds_keys_reject_wrong_types_and_non_positive_values() {
        for key in ["timeout_seconds", "idle_timeout_seconds"] {
            for bad in ["true", "\"10\"", "[]", "{}"] {
                assert_eq!(
                    error(&format!(r#"{{"{key}": {bad}}}"#)),
                    format!("expected {key} to be a number or null"),
                    "{key} {bad}"
                );
            }
            for bad in ["0", "0.0", "-0.0", "-1", "-1e-9"] {
                assert_eq!(
                    error(&format!(r#"{{"{key}": {bad}}}"#)),
                    format!("expected {key} to be a finite number greater than 0"),
                    "{key} {bad}"
                );
            }
        }
    }

    #[test]
    fn idle_timeout_defaults_to_none() {
        assert_eq!(parse("{}").unwrap().idle_timeout_seconds, None);
        assert_eq!(
            parse(r#"{"idle_timeout_seconds": null}"#)
                .unwrap()
                .idle_timeout_seconds,
            None
        );
        assert_eq!(
            parse(r#"{"idle_timeout_seconds": 2.5}"#)
                .unwrap()
                .idle_timeout_seconds,
            Some(2.5)
        );
    }

    #[test]
    fn stop_on_regex_is_a_list_of_strings() {
        assert_eq!(
            parse(r#"{"stop_on_regex": []}"#).unwrap().stop_on_regex,
            Vec::<String>::new()
        );
        assert_eq!(
            parse(r#"{"stop_on_regex": ["a", "["]}"#)
                .unwrap()
                .stop_on_regex,
            vec!["a".to_owned(), "[".to_owned()],
            "patterns are compiled later, not here"
        );
        for bad in ["null", "\"rate limit\"", "1", "{}"] {
            assert_eq!(
                error(&format!(r#"{{"stop_on_regex": {bad}}}"#)),
                "expected stop_on_regex to be a list",
                "{bad}"
            );
        }
        assert_eq!(
            error(r#"{"stop_on_regex": ["ok", "fine", 3]}"#),
            "expected stop_on_regex[2] to be a string"
        );
        assert_eq!(
            error(r#"{"stop_on_regex": [null]}"#),
            "expected stop_on_regex[0] to be a string"
        );
    }

    #[test]
    fn keys_are_validated_in_documented_order() {
        let all_bad = r#"{"idle_timeout_seconds": 0, "stop_on_regex": 1,
                          "timeout_seconds": 0, "max_phases": 0, "agent_cmd": 1}"#;
        assert_eq!(error(all_bad), "expected agent_cmd to be a string or null");
        assert_eq!(
            error(r#"{"stop_on_regex": 1, "max_phases": 0}"#),
            "expected max_phases to be at least 1"
        );
        assert_eq!(
            error(r#"{"idle_timeout_seconds": 0, "stop_on_regex": 1}"#),
            "expected stop_on_regex to be a list"
        );
    }

    #[test]
    fn duplicate_keys_are_an_error() {
        assert_eq!(
            error(r#"{"max_phases": 1, "max_phases": 3}"#),
            "invalid JSON at line 1, column 30: duplicate key 'max_phases'"
        );
    }

    #[test]
    fn parse_seconds_accepts_finite_positive_numbers() {
        assert_eq!(parse_seconds("1"), Ok(1.0));
        assert_eq!(parse_seconds("0.1"), Ok(0.1));
        assert_eq!(parse_seconds("1e3"), Ok(1000.0));
        assert_eq!(parse_seconds(" 2.5 "), Ok(2.5));
        for bad in [
            "0", "-1", "nan", "NaN", "inf", "-inf", "", "ten", "1_000", "0x10",
        ] {
            assert_eq!(
                parse_seconds(bad),
                Err(format!(
                    "expected a finite number of seconds greater than 0, got '{bad}'"
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn format_seconds_matches_python_g() {
        let cases = [
            (1.0, "1"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (3600.0, "3600"),
            (0.25, "0.25"),
            (100.0, "100"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (1e6, "1e+06"),
            (999999.4, "999999"),
            (999999.5, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (1.0 / 3.0, "0.333333"),
            (0.0, "0"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(format_seconds(seconds), expected, "{seconds:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_config_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_config(&bytes);
        }

        #[test]
        fn parse_config_never_panics_on_config_shaped_json(
            key in prop_oneof![
                Just("agent_cmd"), Just("max_phases"), Just("timeout_seconds"),
                Just("stop_on_regex"), Just("idle_timeout_seconds"), Just("other"),
                Just("retry"), Just("rate_limit"),
            ],
            value in prop_oneof![
                Just("null".to_owned()), Just("true".to_owned()), Just("[1, \"a\"]".to_owned()),
                any::<i64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|n| n.to_string()),
                "\"[a-z{}]*\"",
                Just("{}".to_owned()),
            ],
        ) {
            let _ = parse(&format!("{{\"{key}\": {value}}}"));
        }

        #[test]
        fn parse_config_never_panics_on_nested_policy_json(
            section in prop_oneof![Just("retry"), Just("rate_limit")],
            key in prop_oneof![
                Just("max_attempts"), Just("on"), Just("backoff_seconds"),
                Just("max_backoff_seconds"), Just("patterns"), Just("max_waits"),
                Just("default_wait_seconds"), Just("max_wait_seconds"),
                Just("fallback_agent_cmds"), Just("other"),
            ],
            value in prop_oneof![
                Just("null".to_owned()), Just("true".to_owned()),
                Just("[\"timeout\", \"(\", \"\", 1]".to_owned()),
                Just("[\"blocked\"]".to_owned()), Just("[\"agent {x}\"]".to_owned()),
                any::<i64>().prop_map(|n| n.to_string()),
                any::<u64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|n| n.to_string()),
                "\"[a-z(){}-]*\"",
            ],
        ) {
            let _ = parse(&format!("{{\"{section}\": {{\"{key}\": {value}}}}}"));
        }

        #[test]
        fn parse_seconds_never_panics_and_only_accepts_valid_durations(text in ".{0,12}") {
            if let Ok(seconds) = parse_seconds(&text) {
                prop_assert!(seconds.is_finite() && seconds > 0.0);
            }
        }

        #[test]
        fn format_seconds_round_trips_to_six_significant_digits(seconds in 1e-9f64..1e12) {
            let text = format_seconds(seconds);
            let reparsed: f64 = text.parse().unwrap();
            prop_assert!(((reparsed - seconds) / seconds).abs() <= 5e-6, "{} -> {}", seconds, text);
        }
    }
}
