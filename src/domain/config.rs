//! `.ai-session-handler/config.json` (docs/cli.md): strict keys and types, defaults for what is
//! absent, and messages that name the key to fix. Also the seconds values shared with the
//! command line: `--timeout`/`--idle-timeout` parsing and the `:g`-style rendering used in
//! timeout messages.

use serde_json::{Map, Value};

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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            agent_cmd: None,
            max_phases: None,
            timeout_seconds: Some(DEFAULT_TIMEOUT_SECONDS),
            stop_on_regex: Vec::new(),
            idle_timeout_seconds: None,
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
const KNOWN_KEYS: [&str; 5] = [
    "agent_cmd",
    "max_phases",
    "timeout_seconds",
    "stop_on_regex",
    "idle_timeout_seconds",
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
             stop_on_regex, idle_timeout_seconds"
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
            ],
            value in prop_oneof![
                Just("null".to_owned()), Just("true".to_owned()), Just("[1, \"a\"]".to_owned()),
                any::<i64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|n| n.to_string()),
                "\"[a-z{}]*\"",
            ],
        ) {
            let _ = parse(&format!("{{\"{key}\": {value}}}"));
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
