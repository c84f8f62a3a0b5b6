//! Unit and property tests of the `X_AISH_USAGE` report parser.

use proptest::prelude::*;
use serde_json::{Map, json};

use super::*;

fn parse(value: &Value) -> Result<UsageReport, UsageReportError> {
    parse_usage_report(&value.to_string())
}

fn error(value: &Value) -> String {
    match parse(value) {
        Ok(report) => panic!("{value} accepted: {report:?}"),
        Err(UsageReportError(message)) => message,
    }
}

#[test]
fn every_key_is_optional() {
    assert_eq!(parse(&json!({})), Ok(UsageReport::default()));
    let report = parse(&json!({"input_tokens": 120, "cached_input_tokens": 100,
        "output_tokens": 30, "reasoning_tokens": 12, "cost_usd": 0.5, "final": true}))
    .unwrap();
    assert_eq!(
        report.totals,
        TokenCounts {
            input_tokens: Some(120),
            cached_input_tokens: Some(100),
            output_tokens: Some(30),
            reasoning_tokens: Some(12),
            cost_usd: Some(0.5),
        }
    );
    assert!(report.is_final);
    assert!(report.models.is_empty());
}

#[test]
fn null_is_the_same_as_absent() {
    assert_eq!(
        parse(
            &json!({"input_tokens": null, "cost_usd": null, "final": null,
            "model": null, "models": null})
        ),
        Ok(UsageReport::default())
    );
}

#[test]
fn a_model_names_the_counts() {
    let report = parse(&json!({"model": "gpt-5", "input_tokens": 3})).unwrap();
    assert_eq!(report.models.len(), 1);
    assert_eq!(report.models["gpt-5"].input_tokens, Some(3));
    assert_eq!(report.totals.input_tokens, Some(3));
}

#[test]
fn models_without_totals_add_up_to_the_totals() {
    let report = parse(&json!({"models": {
        "opus": {"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.25},
        "haiku": {"input_tokens": 5, "cost_usd": 0.25}}}))
    .unwrap();
    assert_eq!(
        report.totals,
        TokenCounts {
            input_tokens: Some(15),
            output_tokens: Some(1),
            cost_usd: Some(0.5),
            ..TokenCounts::default()
        }
    );
    // Totals given beside the models are the agent's own and are kept.
    let report = parse(&json!({"input_tokens": 99, "models": {
        "opus": {"input_tokens": 10}}}))
    .unwrap();
    assert_eq!(report.totals.input_tokens, Some(99));
    assert_eq!(report.models["opus"].input_tokens, Some(10));
}

#[test]
fn unknown_keys_are_ignored_and_noted() {
    let report = parse(&json!({"input_tokens": 1, "service_tier": "x", "speed": 2,
        "models": {"m": {"output_tokens": 2, "contextWindow": 5}}}))
    .unwrap();
    assert_eq!(report.totals.input_tokens, Some(1));
    assert_eq!(
        report.unknown_keys,
        ["service_tier", "speed", "models.m.contextWindow"]
    );
    assert_eq!(report.unknown_key_count, 3);
    let many: Map<String, Value> = (0..20).map(|i| (format!("k{i:02}"), json!(1))).collect();
    let report = parse(&Value::Object(many)).unwrap();
    assert_eq!(report.unknown_keys.len(), NOTED_UNKNOWN_KEYS);
    assert_eq!(report.unknown_key_count, 20);
}

#[test]
fn invalid_reports_name_the_key() {
    assert!(error(&json!([1])).contains("to be a JSON object"));
    assert_eq!(
        error(&json!({"input_tokens": -1})),
        "expected input_tokens to be a non-negative integer, got -1"
    );
    assert_eq!(
        error(&json!({"output_tokens": 1.5})),
        "expected output_tokens to be a non-negative integer, got 1.5"
    );
    assert_eq!(
        error(&json!({"reasoning_tokens": "12"})),
        "expected reasoning_tokens to be a non-negative integer, got \"12\""
    );
    assert_eq!(
        error(&json!({"cost_usd": -0.1})),
        "expected cost_usd to be a non-negative number, got -0.1"
    );
    assert_eq!(
        error(&json!({"final": "yes"})),
        "expected final to be true or false"
    );
    assert_eq!(error(&json!({"model": 5})), "expected model to be a string");
    assert_eq!(
        error(&json!({"model": " "})),
        "expected model to be a non-empty string"
    );
    assert_eq!(
        error(&json!({"models": [1]})),
        "expected models to be an object of per-model objects"
    );
    assert_eq!(
        error(&json!({"models": {"m": 1}})),
        "expected models.m to be an object"
    );
    assert_eq!(
        error(&json!({"models": {"m": {"input_tokens": -2}}})),
        "expected models.m.input_tokens to be a non-negative integer, got -2"
    );
    assert_eq!(
        error(&json!({"model": "a", "models": {}})),
        "give either model or models in X_AISH_USAGE, not both"
    );
    let message = parse_usage_report("{\"input_tokens\": 1, \"input_tokens\": 2}")
        .unwrap_err()
        .0;
    assert!(message.contains("duplicate key"), "{message}");
    let message = parse_usage_report("{nope").unwrap_err().0;
    assert!(
        message.starts_with("X_AISH_USAGE is not JSON: invalid JSON at line 1"),
        "{message}"
    );
}

#[test]
fn model_names_are_printable_and_bounded() {
    let long = "m".repeat(300);
    let report = parse(&json!({"models": {long.clone(): {"input_tokens": 1},
        "a\u{1b}b": {"input_tokens": 2}, "a b": {"input_tokens": 3}}}))
    .unwrap();
    let names: Vec<&String> = report.models.keys().collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(report.models["a b"].input_tokens, Some(5));
    assert!(
        names
            .iter()
            .all(|name| name.chars().count() <= MAX_MODEL_NAME_CHARS)
    );
}

#[test]
fn to_json_round_trips() {
    let report = parse(&json!({"input_tokens": 20, "cached_input_tokens": 0,
        "output_tokens": 40, "cost_usd": 0.0011, "final": true,
        "models": {"claude-opus": {"input_tokens": 20, "output_tokens": 40}}}))
    .unwrap();
    assert_eq!(
        report.to_json(),
        "{\"input_tokens\":20,\"cached_input_tokens\":0,\"output_tokens\":40,\
         \"cost_usd\":0.0011,\"models\":{\"claude-opus\":{\"input_tokens\":20,\
         \"output_tokens\":40}},\"final\":true}"
    );
    assert_eq!(parse_usage_report(&report.to_json()), Ok(report));
    assert_eq!(UsageReport::default().to_json(), "{}");
}

fn count() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(any::<u64>())
}

proptest! {
    #[test]
    fn never_panics(text in "(?s).{0,200}") {
        let _ = parse_usage_report(&text);
    }

    #[test]
    fn valid_reports_round_trip(
        input in count(), cached in count(), output in count(), reasoning in count(),
        // Dollars to the hundredth of a cent (serde_json reads arbitrary floats back to
        // within one unit in the last place only).
        cost in proptest::option::of((0u64..10_000_000_000).prop_map(|tenths| tenths as f64 / 10_000.0)),
        is_final in any::<bool>(),
    ) {
        let report = UsageReport {
            totals: TokenCounts {
                input_tokens: input,
                cached_input_tokens: cached,
                output_tokens: output,
                reasoning_tokens: reasoning,
                cost_usd: cost,
            },
            is_final,
            ..UsageReport::default()
        };
        prop_assert_eq!(parse_usage_report(&report.to_json()), Ok(report));
    }
}
