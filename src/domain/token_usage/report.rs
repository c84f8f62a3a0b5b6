//! `X_AISH_USAGE=<json object>`: a usage report an agent sends on its notification socket, and
//! its strict reading (docs/worker-protocol.md, "Usage reports", has the keys and rules).
//! Each report is cumulative for the attempt; what they add up to is
//! [`super::summary::AttemptUsage`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{COUNT_KEYS, TokenCounts, as_cost, counted_usd};
use crate::domain::status_text::{first_chars, sanitize_status};
use crate::domain::strict_json::parse_document;

/// How many unknown key names a report keeps for the note (the count is exact).
const NOTED_UNKNOWN_KEYS: usize = 8;

/// Model names are cut to this many characters.
const MAX_MODEL_NAME_CHARS: usize = 100;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageReport {
    /// The attempt's totals so far.
    pub totals: TokenCounts,
    /// When the agent said (`model` or `models`).
    pub models: BTreeMap<String, TokenCounts>,
    /// `final: true`: the provider's own end-of-session total.
    pub is_final: bool,
    /// Ignored keys (at most `NOTED_UNKNOWN_KEYS` names, dotted inside `models`).
    pub unknown_keys: Vec<String>,
    pub unknown_key_count: usize,
}

/// Why a report was ignored; the message names the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageReportError(pub String);

pub fn parse_usage_report(text: &str) -> Result<UsageReport, UsageReportError> {
    let value = parse_document(text.as_bytes())
        .map_err(|error| invalid(format!("X_AISH_USAGE is not JSON: {error}")))?;
    let Value::Object(object) = value else {
        return Err(invalid("expected X_AISH_USAGE to be a JSON object"));
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
                    _ => return Err(invalid("expected final to be true or false")),
                }
            }
            key if COUNT_KEYS.contains(&key) => read_count(&mut totals, key, key, value)?,
            other => report.note_unknown(other.to_owned()),
        }
    }
    match (model.flatten(), models) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "give either model or models in X_AISH_USAGE, not both",
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
        let mut sent = known(&self.totals);
        if !self.models.is_empty() {
            let models = self
                .models
                .iter()
                .map(|(name, counts)| (name.clone(), Value::Object(known(counts))))
                .collect();
            sent.insert("models".to_owned(), Value::Object(models));
        }
        if self.is_final {
            sent.insert("final".to_owned(), Value::Bool(true));
        }
        Value::Object(sent).to_string()
    }
}

/// The counts that are known (a cost that is not finite is written `null`, so it is not), in
/// their order.
fn known(counts: &TokenCounts) -> Map<String, Value> {
    let Ok(Value::Object(mut object)) = serde_json::to_value(counts) else {
        unreachable!("token counts serialize to an object");
    };
    object.retain(|_, count| !count.is_null());
    object
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
                Err(invalid("expected model to be a non-empty string"))
            } else {
                Ok(Some(name))
            }
        }
        _ => Err(invalid("expected model to be a string")),
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
            return Err(invalid(
                "expected models to be an object of per-model objects",
            ));
        }
    };
    let mut models = BTreeMap::new();
    for (name, counts) in entries {
        let Some(label) = model_name(&Value::String(name.clone()))? else {
            continue;
        };
        let Value::Object(fields) = counts else {
            return Err(invalid(format!("expected models.{label} to be an object")));
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
    let expected = |what: &str| {
        let got = excerpt(&value.to_string());
        invalid(format!(
            "expected {label} to be a non-negative {what}, got {got}"
        ))
    };
    if key == "cost_usd" {
        let cost = as_cost(value).ok_or_else(|| expected("number"))?;
        counts.cost_usd = Some(counted_usd(cost));
        return Ok(());
    }
    let count = value.as_u64().ok_or_else(|| expected("integer"))?;
    let slot = match key {
        "input_tokens" => &mut counts.input_tokens,
        "cached_input_tokens" => &mut counts.cached_input_tokens,
        "output_tokens" => &mut counts.output_tokens,
        _ => &mut counts.reasoning_tokens,
    };
    *slot = Some(count);
    Ok(())
}

fn invalid(message: impl Into<String>) -> UsageReportError {
    UsageReportError(message.into())
}

/// At most 40 characters of a value an agent sent, printable, for a warning.
pub(crate) fn excerpt(value: &str) -> String {
    sanitize_status(&first_chars(value, 40))
}

#[cfg(test)]
mod tests;
