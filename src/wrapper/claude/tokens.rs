//! Claude Code's token usage, as the runner's usage reports (`X_AISH_USAGE`, issue 19).
//!
//! - **As the session goes**: every API message reports its usage in its stream events
//!   (`message_start`: input and the first output token; `message_delta`: output so far) and
//!   again in its `assistant` events. Each message's counts are kept (the largest seen per
//!   count, since they only grow) and summed over the messages: a running report,
//!   `final: false`. A killed attempt is left with this.
//! - **At the end**: the `result` event's `usage`, `modelUsage` and `total_cost_usd` are the
//!   CLI's own totals: the final report. The cost is Claude Code's client-side estimate (on a
//!   subscription, the API-equivalent price), not a bill; the wrapper's usage line says so.
//!
//! Claude's `input_tokens` counts only uncached input; the report's `input_tokens` is the sum
//! of uncached, cache-read and cache-creation input, and `cached_input_tokens` the cache-read
//! part. Claude reports no reasoning tokens.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::domain::token_usage::TokenCounts;
use crate::domain::token_usage::report::UsageReport;

/// One API message's usage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct MessageUsage {
    model: Option<String>,
    uncached_input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
}

impl MessageUsage {
    /// Takes the larger of each count in `usage` (an API `usage` object); whether any grew.
    fn merge(&mut self, usage: &Value) -> bool {
        let before = self.clone();
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        let grow = |slot: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *slot = (*slot).max(value);
            }
        };
        grow(&mut self.uncached_input, count("input_tokens"));
        grow(&mut self.cache_read, count("cache_read_input_tokens"));
        grow(
            &mut self.cache_creation,
            count("cache_creation_input_tokens"),
        );
        grow(&mut self.output, count("output_tokens"));
        *self != before
    }

    fn counts(&self) -> TokenCounts {
        TokenCounts {
            input_tokens: Some(
                self.uncached_input
                    .saturating_add(self.cache_read)
                    .saturating_add(self.cache_creation),
            ),
            cached_input_tokens: Some(self.cache_read),
            output_tokens: Some(self.output),
            reasoning_tokens: None,
            cost_usd: None,
        }
    }
}

/// The usage of a session so far, message by message.
#[derive(Clone, Debug, Default)]
pub struct ClaudeUsage {
    messages: BTreeMap<String, MessageUsage>,
}

impl ClaudeUsage {
    /// A `message` object (of `message_start` or `assistant`) with its `id`, `model` and
    /// `usage`; whether the counts changed.
    pub fn message(&mut self, message: &Value) -> bool {
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return false;
        };
        let entry = self.messages.entry(id.to_owned()).or_default();
        if entry.model.is_none() {
            entry.model = message
                .get("model")
                .and_then(Value::as_str)
                .filter(|model| !model.starts_with('<'))
                .map(str::to_owned);
        }
        message.get("usage").is_some_and(|usage| entry.merge(usage))
    }

    /// A `message_delta`'s `usage` for message `id`; whether the counts changed.
    pub fn delta(&mut self, id: &str, usage: &Value) -> bool {
        self.messages.entry(id.to_owned()).or_default().merge(usage)
    }

    /// The running report (`final: false`), or `None` before any message reported usage.
    pub fn running_report(&self) -> Option<UsageReport> {
        if self.messages.is_empty() {
            return None;
        }
        let mut totals = TokenCounts::default();
        let mut models: BTreeMap<String, TokenCounts> = BTreeMap::new();
        for message in self.messages.values() {
            let counts = message.counts();
            totals = totals.plus(&counts);
            if let Some(model) = &message.model {
                let merged = models
                    .get(model)
                    .map_or_else(|| counts.clone(), |sum| sum.plus(&counts));
                models.insert(model.clone(), merged);
            }
        }
        Some(UsageReport {
            totals,
            models,
            ..UsageReport::default()
        })
    }
}

/// The final report from a `result` event, when it carries `usage`.
pub fn final_report(result: &Map<String, Value>) -> Option<UsageReport> {
    let usage = result.get("usage")?;
    let count = |value: &Value, name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
    let cost = |value: Option<&Value>| {
        value
            .and_then(Value::as_f64)
            .filter(|cost| cost.is_finite() && *cost >= 0.0)
    };
    let totals = TokenCounts {
        input_tokens: Some(
            count(usage, "input_tokens")
                .saturating_add(count(usage, "cache_read_input_tokens"))
                .saturating_add(count(usage, "cache_creation_input_tokens")),
        ),
        cached_input_tokens: Some(count(usage, "cache_read_input_tokens")),
        output_tokens: Some(count(usage, "output_tokens")),
        reasoning_tokens: None,
        cost_usd: cost(result.get("total_cost_usd")),
    };
    let models = result
        .get("modelUsage")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(model, usage)| {
            let counts = TokenCounts {
                input_tokens: Some(
                    count(usage, "inputTokens")
                        .saturating_add(count(usage, "cacheReadInputTokens"))
                        .saturating_add(count(usage, "cacheCreationInputTokens")),
                ),
                cached_input_tokens: Some(count(usage, "cacheReadInputTokens")),
                output_tokens: Some(count(usage, "outputTokens")),
                reasoning_tokens: None,
                cost_usd: cost(usage.get("costUSD")),
            };
            (model.clone(), counts)
        })
        .collect();
    Some(UsageReport {
        totals,
        models,
        is_final: true,
        ..UsageReport::default()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_add_up_with_cached_input_counted_as_input() {
        let mut usage = ClaudeUsage::default();
        assert_eq!(usage.running_report(), None);
        assert!(usage.message(&json!({"id": "m1", "model": "claude-opus",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 5, "output_tokens": 1}})));
        assert!(usage.delta("m1", &json!({"output_tokens": 20})));
        assert!(
            !usage.delta("m1", &json!({"output_tokens": 20})),
            "no change"
        );
        // The assistant event repeats the message start's counts: nothing grows backwards.
        assert!(!usage.message(&json!({"id": "m1", "model": "claude-opus",
            "usage": {"input_tokens": 10, "output_tokens": 1}})));
        usage.message(&json!({"id": "m2", "model": "claude-opus",
            "usage": {"input_tokens": 3, "output_tokens": 4}}));
        let report = usage.running_report().expect("report");
        assert!(!report.is_final);
        assert_eq!(
            report.totals,
            TokenCounts {
                input_tokens: Some(118),
                cached_input_tokens: Some(100),
                output_tokens: Some(24),
                reasoning_tokens: None,
                cost_usd: None,
            }
        );
        assert_eq!(report.models["claude-opus"], report.totals);
    }

    #[test]
    fn synthetic_messages_name_no_model() {
        let mut usage = ClaudeUsage::default();
        usage.message(&json!({"id": "x", "model": "<synthetic>",
            "usage": {"input_tokens": 0, "output_tokens": 0}}));
        assert!(usage.running_report().expect("report").models.is_empty());
    }

    #[test]
    fn the_result_event_is_the_final_report() {
        // As Claude Code 2.1.197 printed it (tests/fixtures/replay/claude/partial).
        let result = json!({"type": "result", "total_cost_usd": 0.0011,
            "usage": {"input_tokens": 20, "cache_creation_input_tokens": 2,
                "cache_read_input_tokens": 30, "output_tokens": 40,
                "server_tool_use": {"web_search_requests": 0}},
            "modelUsage": {"claude-opus-4-8[1m]": {"inputTokens": 20, "outputTokens": 40,
                "cacheReadInputTokens": 30, "cacheCreationInputTokens": 2,
                "webSearchRequests": 0, "costUSD": 0.0011, "contextWindow": 1000000}}});
        let report = final_report(result.as_object().unwrap()).expect("report");
        assert!(report.is_final);
        let expected = TokenCounts {
            input_tokens: Some(52),
            cached_input_tokens: Some(30),
            output_tokens: Some(40),
            reasoning_tokens: None,
            cost_usd: Some(0.0011),
        };
        assert_eq!(report.totals, expected);
        assert_eq!(report.models["claude-opus-4-8[1m]"], expected);
        assert_eq!(
            final_report(json!({"type": "result"}).as_object().unwrap()),
            None
        );
    }
}
