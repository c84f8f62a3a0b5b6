//! Unit tests of the `rate_limit` config object (src/domain/rate_limit/mod.rs): defaults, every
//! key, the wait flag and errors naming the dotted key.

use super::*;
use crate::domain::config::parse_config;

impl RateLimitPolicy {
    /// The number of agent templates: the primary one plus the fallbacks.
    pub(crate) fn template_count(&self) -> usize {
        self.fallback_agent_cmds.len().saturating_add(1)
    }
}

fn parse(text: &str) -> Result<RateLimitPolicy, String> {
    parse_config(text.as_bytes())
        .map(|config| config.rate_limit)
        .map_err(|error| error.to_string())
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(policy) => panic!("expected an error for {text}, got {policy:?}"),
        Err(message) => message,
    }
}

#[test]
fn absent_or_null_is_the_default_which_never_waits() {
    for text in ["{}", r#"{"rate_limit": null}"#, r#"{"rate_limit": {}}"#] {
        assert_eq!(parse(text).unwrap(), RateLimitPolicy::default(), "{text}");
    }
    let default = RateLimitPolicy::default();
    assert!(!default.waits_enabled());
    assert_eq!(default.template_count(), 1);
    assert_eq!(
        (default.default_wait_seconds, default.max_wait_seconds),
        (300.0, 21600.0)
    );
    assert_eq!(
        default.describe(),
        "0 patterns and exit 75; waits off; 0 fallback agent commands"
    );
}

#[test]
fn every_key_set() {
    let policy = parse(
        r#"{"rate_limit": {"patterns": ["usage limit reached", "(?i)429"], "max_waits": 2,
            "default_wait_seconds": 60, "max_wait_seconds": 3600.5,
            "fallback_agent_cmds": ["claude -p {prompt_file}"]}}"#,
    )
    .unwrap();
    assert_eq!(
        policy,
        RateLimitPolicy {
            patterns: vec!["usage limit reached".into(), "(?i)429".into()],
            max_waits: 2,
            default_wait_seconds: 60.0,
            max_wait_seconds: 3600.5,
            fallback_agent_cmds: vec!["claude -p {prompt_file}".into()],
        }
    );
    assert_eq!(policy.template_count(), 2);
    assert_eq!(policy.fallback_templates().unwrap().len(), 1);
    assert_eq!(
        policy.describe(),
        "2 patterns and exit 75; up to 2 waits of 60 s by default, at most \
         3600.5 s each; 1 fallback agent command"
    );
}

#[test]
fn wait_flag_turns_waits_on() {
    assert_eq!(RateLimitPolicy::default().with_waits().max_waits, 3);
    let configured = RateLimitPolicy {
        max_waits: 7,
        ..RateLimitPolicy::default()
    };
    assert_eq!(configured.with_waits().max_waits, 7);
}

#[test]
fn errors_name_the_dotted_key() {
    assert_eq!(
        error(r#"{"rate_limit": {"max_wait": 1}}"#),
        "unknown key 'rate_limit.max_wait'; known keys: patterns, max_waits, \
         default_wait_seconds, max_wait_seconds, fallback_agent_cmds"
    );
    assert_eq!(
        error(r#"{"rate_limit": []}"#),
        "expected rate_limit to be an object or null"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"patterns": "429"}}"#),
        "expected rate_limit.patterns to be a list"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"patterns": ["429", null]}}"#),
        "expected rate_limit.patterns[1] to be a string"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"patterns": ["429", "(usage"]}}"#),
        "rate_limit.patterns[1]: invalid rate-limit regex '(usage': unclosed group"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"max_waits": -1}}"#),
        "expected rate_limit.max_waits to be at least 0"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"max_waits": 1.5}}"#),
        "expected rate_limit.max_waits to be an integer"
    );
    for key in ["default_wait_seconds", "max_wait_seconds"] {
        for bad in ["0", "-0.0", "-5"] {
            assert_eq!(
                error(&format!(r#"{{"rate_limit": {{"{key}": {bad}}}}}"#)),
                format!("expected rate_limit.{key} to be a finite number greater than 0"),
                "{bad}"
            );
        }
        assert_eq!(
            error(&format!(r#"{{"rate_limit": {{"{key}": null}}}}"#)),
            format!("expected rate_limit.{key} to be a number")
        );
    }
    assert_eq!(
        error(r#"{"rate_limit": {"fallback_agent_cmds": [5]}}"#),
        "expected rate_limit.fallback_agent_cmds[0] to be a string"
    );
    assert_eq!(
        error(r#"{"rate_limit": {"fallback_agent_cmds": ["ok", ""]}}"#),
        "rate_limit.fallback_agent_cmds[1]: agent command template produced an empty command"
    );
    assert!(
        error(r#"{"rate_limit": {"fallback_agent_cmds": ["agent {prompt}"]}}"#)
            .starts_with("rate_limit.fallback_agent_cmds[0]: "),
    );
}

#[test]
fn max_waits_zero_is_allowed_and_means_off() {
    let policy = parse(r#"{"rate_limit": {"max_waits": 0}}"#).unwrap();
    assert!(!policy.waits_enabled());
}
