//! `X_AISH_USAGE=<json object>`: a usage report an agent sends on its notification socket
//! (docs/worker-protocol.md, "Usage reports"). Each report is cumulative for the attempt; what
//! the reports of an attempt add up to is [`super::summary::AttemptUsage`].
//!
//! Every key is optional:
//!
//! | Key | Value |
//! |---|---|
//! | `input_tokens`, `cached_input_tokens`, `output_tokens`, `reasoning_tokens` | non-negative integer |
//! | `cost_usd` | non-negative number |
//! | `model` | string: the model the counts are for |
//! | `models` | object: model name → an object with the count keys above |
//! | `final` | boolean: this is the provider's own end-of-session total |
//!
//! `null` is the same as an absent key. With `models` and no top-level counts, the totals are
//! the sum over the models. `model` and `models` together are a contradiction and make the
//! report invalid, as do a value of the wrong type, a negative or fractional count, a
//! duplicate key, and anything that is not a JSON object. Unknown keys are ignored and noted
//! ([`UsageReport::unknown_keys`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{COUNT_KEYS, TokenCounts};
use crate::domain::notify::sanitize_status;
use crate::domain::strict_json::parse_document;

/// How many unknown key names a report keeps for the note (the count is exact).
const NOTED_UNKNOWN_KEYS: usize = 8;

/// Model names are cut to this many characters.
const MAX_MODEL_NAME_CHARS: usize = 100;

/// One valid usage report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageReport {
    /// The attempt's totals so far.
    pub totals: TokenCounts,
    /// Per model, when the agent said (`model` or `models`).
    pub models: BTreeMap<String, TokenCounts>,
    /// `final: true`: the provider's own end-of-session total.
    pub is_final: bool,
    /// Keys that mean nothing here, ignored (at most `NOTED_UNKNOWN_KEYS` names, dotted for
    /// keys inside `models`).
    pub unknown_keys: Vec<String>,
    /// How many unknown keys there were in all.
    pub unknown_key_count: usize,
}

/// Why a report was ignored; the message names the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageReportError(pub String);

/// Reads the value of one `X_AISH_USAGE=` assignment.
pub fn parse_usage_report(text: &str) -> Result<UsageReport, UsageReportError> {
    let value = parse_document(text.as_bytes())
        .map_err(|error| UsageReportError(format!("X_AISH_USAGE is not JSON: {error}")))?;
    let Value::Object(object) = value else {
        return Err(UsageReportError(
            "expected X_AISH_USAGE to be a JSON object".to_owned(),
        ));
    };
    let mut report = UsageReport::default();
    let mut totals = TokenCounts::default();
    let mut model = None;
    let mut models = None;
    for (key, value) in &object {
        match key.as_str() {
            "model" => model = Some(model_name(value)?),
            "models" => models = Some(per_model(value, &mut report)?),
            "final" => {
                report.is_final = match value {
                    Value::Null => false,
                    Value::Bool(flag) => *flag,
                    _ => {
                        return Err(UsageReportError(
                            "expected final to be true or false".to_owned(),
                        ));
                    }
                }
            }
            key if COUNT_KEYS.contains(&key) => read_count(&mut totals, key, key, value)?,
            other => report.note_unknown(other.to_owned()),
        }
    }
    match (model.flatten(), models) {
        (Some(_), Some(_)) => {
            return Err(UsageReportError(
                "give either model or models in X_AISH_USAGE, not both".to_owned(),
            ));
        }
        (Some(name), None) => {
            report.models.insert(name, totals.clone());
        }
        (None, Some(models)) => {
            if totals.is_empty() {
                totals = models
                    .values()
                    .fold(TokenCounts::default(), |sum, counts| sum.plus(counts));
            }
            report.models = models;
        }
        (None, None) => {}
    }
    report.totals = totals;
    Ok(report)
}

impl UsageReport {
    fn note_unknown(&mut self, key: String) {
        self.unknown_key_count += 1;
        if self.unknown_keys.len() < NOTED_UNKNOWN_KEYS {
            self.unknown_keys.push(key);
        }
    }

    /// The report as the one-line JSON an agent sends (what the wrappers send): counts that
    /// are known, `models` when there are any, `final` when true.
    pub fn to_json(&self) -> String {
        let mut object = Map::new();
        write_known_counts(&self.totals, &mut object);
        if !self.models.is_empty() {
            let models: Map<String, Value> = self
                .models
                .iter()
                .map(|(name, counts)| {
                    let mut model = Map::new();
                    write_known_counts(counts, &mut model);
                    (name.clone(), Value::Object(model))
                })
                .collect();
            object.insert("models".into(), Value::Object(models));
        }
        if self.is_final {
            object.insert("final".into(), Value::Bool(true));
        }
        Value::Object(object).to_string()
    }
}

fn write_known_counts(counts: &TokenCounts, object: &mut Map<String, Value>) {
    let mut all = Map::new();
    counts.write_json(&mut all);
    object.extend(all.into_iter().filter(|(_, value)| !value.is_null()));
}

/// `model`: a non-empty string, made printable and bounded; `null` means none.
fn model_name(value: &Value) -> Result<Option<String>, UsageReportError> {
    match value {
        Value::Null => Ok(None),
        Value::String(name) => {
            let name: String = sanitize_status(name)
                .chars()
                .take(MAX_MODEL_NAME_CHARS)
                .collect();
            if name.is_empty() {
                Err(UsageReportError(
                    "expected model to be a non-empty string".to_owned(),
                ))
            } else {
                Ok(Some(name))
            }
        }
        _ => Err(UsageReportError("expected model to be a string".to_owned())),
    }
}

/// `models`: model name → counts.
fn per_model(
    value: &Value,
    report: &mut UsageReport,
) -> Result<BTreeMap<String, TokenCounts>, UsageReportError> {
    let entries = match value {
        Value::Null => return Ok(BTreeMap::new()),
        Value::Object(entries) => entries,
        _ => {
            return Err(UsageReportError(
                "expected models to be an object of per-model objects".to_owned(),
            ));
        }
    };
    let mut models = BTreeMap::new();
    for (name, counts) in entries {
        let Some(label) = model_name(&Value::String(name.clone()))? else {
            continue;
        };
        let Value::Object(fields) = counts else {
            return Err(UsageReportError(format!(
                "expected models.{label} to be an object"
            )));
        };
        let mut model = TokenCounts::default();
        for (key, value) in fields {
            if COUNT_KEYS.contains(&key.as_str()) {
                read_count(&mut model, key, &format!("models.{label}.{key}"), value)?;
            } else {
                report.note_unknown(format!("models.{label}.{key}"));
            }
        }
        // Two names that print the same add up rather than hide each other.
        let merged = models
            .remove(&label)
            .map_or(model.clone(), |earlier: TokenCounts| earlier.plus(&model));
        models.insert(label, merged);
    }
    Ok(models)
}

/// Reads count `key` (`label` names it in messages) into `counts`.
fn read_count(
    counts: &mut TokenCounts,
    key: &str,
    label: &str,
    value: &Value,
) -> Result<(), UsageReportError> {
    if value.is_null() {
        return Ok(());
    }
    if key == "cost_usd" {
        let cost = value
            .as_f64()
            .filter(|cost| cost.is_finite() && *cost >= 0.0)
            .ok_or_else(|| {
                UsageReportError(format!(
                    "expected {label} to be a non-negative number, got {}",
                    shown(value)
                ))
            })?;
        counts.cost_usd = Some(cost);
        return Ok(());
    }
    let count = value.as_u64().ok_or_else(|| {
        UsageReportError(format!(
            "expected {label} to be a non-negative integer, got {}",
            shown(value)
        ))
    })?;
    let slot = match key {
        "input_tokens" => &mut counts.input_tokens,
        "cached_input_tokens" => &mut counts.cached_input_tokens,
        "output_tokens" => &mut counts.output_tokens,
        _ => &mut counts.reasoning_tokens,
    };
    *slot = Some(count);
    Ok(())
}

/// A value as it appeared, shortened for a message.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    let mut short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    sanitize_status(&short)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

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
}
