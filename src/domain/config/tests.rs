//! Unit and property tests of `domain::config`.

use super::*;
use proptest::prelude::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_config(text.as_bytes())
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(config) => panic!("expected an error for {text}, got {config:?}"),
        Err(error) => error.to_string(),
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
            hooks: Vec::new(),
            verify_timeout_seconds: Some(600.0),
            budget: crate::domain::budget::BudgetConfig::default(),
            record_changes: true,
        }
    );
}

#[test]
fn verify_timeout_seconds_defaults_to_600_and_null_means_none() {
    assert_eq!(parse("{}").unwrap().verify_timeout_seconds, Some(600.0));
    assert_eq!(
        parse(r#"{"verify_timeout_seconds": 12.5}"#)
            .unwrap()
            .verify_timeout_seconds,
        Some(12.5)
    );
    assert_eq!(
        parse(r#"{"verify_timeout_seconds": null}"#)
            .unwrap()
            .verify_timeout_seconds,
        None
    );
    for bad in ["0", "-1", "\"600\"", "true"] {
        let message = error(&format!(r#"{{"verify_timeout_seconds": {bad}}}"#));
        assert!(
            message.starts_with("expected verify_timeout_seconds to be a"),
            "{bad}: {message}"
        );
    }
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
fn the_example_agent_program_is_the_example_config_s() {
    let agent_cmd = parse(EXAMPLE_CONFIG).unwrap().agent_cmd.unwrap();
    let template = crate::domain::template::CommandTemplate::parse(&agent_cmd).unwrap();
    assert_eq!(template.literal_program(), Some(EXAMPLE_AGENT_PROGRAM));
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
    // A byte order mark is skipped (an editor's), but only one, and only first.
    assert_eq!(
        parse_config("\u{feff}{\"max_phases\": 2}".as_bytes())
            .unwrap()
            .max_phases,
        Some(2)
    );
    assert!(error("\u{feff}\u{feff}{}").starts_with("invalid JSON at line 1, "));
    assert!(error(" \u{feff}{}").starts_with("invalid JSON at line 1, "));
    assert!(
        parse_config(b"{\"agent_cmd\": \"\xff\"}")
            .unwrap_err()
            .to_string()
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
             stop_on_regex, idle_timeout_seconds, retry, rate_limit, hooks, verify_timeout_seconds, budget, record_changes"
    );
}

#[test]
fn budget_is_read_with_its_dotted_keys() {
    let config = parse(r#"{"budget": {"max_tokens": 200000, "max_cost_usd": 2.5}}"#).unwrap();
    assert_eq!(
        config.budget,
        crate::domain::budget::BudgetConfig {
            max_tokens: Some(200_000),
            max_cost_usd: Some(2.5),
        }
    );
    assert_eq!(
        error(r#"{"budget": {"max_cost": 1}}"#),
        "unknown key 'budget.max_cost'; known keys: max_tokens, max_cost_usd"
    );
    assert_eq!(
        error(r#"{"budget": {"max_tokens": 0}}"#),
        "expected budget.max_tokens to be at least 1"
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
            Just("retry"), Just("rate_limit"), Just("hooks"), Just("verify_timeout_seconds"),
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
}
