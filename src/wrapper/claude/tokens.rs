//! Claude Code's token usage as the runner's usage reports: a running report summed over the
//! API messages as they stream, and the `result` event's totals as the final one
//! (docs/providers.md, "Token usage").

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_with::DefaultOnError;

use crate::domain::token_usage::TokenCounts;
use crate::domain::token_usage::report::UsageReport;

/// An API `usage` object (of a message, a `message_delta` or a `result`), or an entry of a
/// result's `modelUsage`, which spells the same counts in camelCase and adds its cost.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Usage {
    /// Only the uncached input.
    #[serde(alias = "inputTokens")]
    input_tokens: Option<u64>,
    #[serde(alias = "cacheReadInputTokens")]
    cache_read_input_tokens: Option<u64>,
    #[serde(alias = "cacheCreationInputTokens")]
    cache_creation_input_tokens: Option<u64>,
    #[serde(alias = "outputTokens")]
    output_tokens: Option<u64>,
    #[serde(rename = "costUSD")]
    cost_usd: Option<f64>,
}

/// A cost, unless it is no cost at all.
fn cost(cost: Option<f64>) -> Option<f64> {
    cost.filter(|cost| cost.is_finite() && *cost >= 0.0)
}

impl Usage {
    /// The runner's counts: input is uncached + cache-read + cache-creation, the cache-read
    /// part is the cached input; Claude reports no reasoning tokens.
    fn counts(&self) -> TokenCounts {
        let cache_read = self.cache_read_input_tokens.unwrap_or(0);
        TokenCounts {
            input_tokens: Some(
                self.input_tokens
                    .unwrap_or(0)
                    .saturating_add(cache_read)
                    .saturating_add(self.cache_creation_input_tokens.unwrap_or(0)),
            ),
            cached_input_tokens: Some(cache_read),
            output_tokens: Some(self.output_tokens.unwrap_or(0)),
            reasoning_tokens: None,
            cost_usd: None,
        }
    }

    /// Takes the larger of each count (they only grow while a message streams).
    fn grow(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.max(other.input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .max(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .max(other.cache_creation_input_tokens);
        self.output_tokens = self.output_tokens.max(other.output_tokens);
    }
}

#[derive(Clone, Debug, Default)]
struct MessageUsage {
    model: Option<String>,
    usage: Usage,
}

/// The usage of a session so far, message by message.
#[derive(Clone, Debug, Default)]
pub struct ClaudeUsage {
    messages: BTreeMap<String, MessageUsage>,
}

impl ClaudeUsage {
    /// A message (of `message_start` or `assistant`) with its `id`, `model` and `usage`;
    /// whether the counts changed.
    pub fn message(&mut self, id: Option<&str>, model: Option<&str>, usage: &Usage) -> bool {
        let Some(id) = id else {
            return false;
        };
        let entry = self.messages.entry(id.to_owned()).or_default();
        if entry.model.is_none() {
            // `<synthetic>`: a message the CLI made up itself used no model.
            entry.model = model
                .filter(|model| !model.starts_with('<'))
                .map(str::to_owned);
        }
        Self::merge(entry, usage)
    }

    /// A `message_delta`'s `usage` for message `id`; whether the counts changed.
    pub fn delta(&mut self, id: &str, usage: &Usage) -> bool {
        Self::merge(self.messages.entry(id.to_owned()).or_default(), usage)
    }

    fn merge(message: &mut MessageUsage, usage: &Usage) -> bool {
        let before = message.usage.counts();
        message.usage.grow(usage);
        message.usage.counts() != before
    }

    /// The running report (`final: false`), or `None` before any message reported usage.
    pub fn running_report(&self) -> Option<UsageReport> {
        if self.messages.is_empty() {
            return None;
        }
        let mut totals = TokenCounts::default();
        let mut models: BTreeMap<String, TokenCounts> = BTreeMap::new();
        for message in self.messages.values() {
            let counts = message.usage.counts();
            totals = totals.plus(&counts);
            if let Some(model) = &message.model {
                let sum = models.entry(model.clone()).or_default();
                *sum = sum.plus(&counts);
            }
        }
        Some(UsageReport {
            totals,
            models,
            ..UsageReport::default()
        })
    }
}

/// The final report from a `result` event's `usage`, `modelUsage` and `total_cost_usd`; `None`
/// without `usage`. The cost is Claude Code's client-side estimate, not a bill.
pub fn final_report(
    usage: Option<&Usage>,
    model_usage: &BTreeMap<String, Usage>,
    total_cost_usd: Option<f64>,
) -> Option<UsageReport> {
    let totals = TokenCounts {
        cost_usd: cost(total_cost_usd),
        ..usage?.counts()
    };
    let models = model_usage
        .iter()
        .map(|(model, usage)| {
            let counts = TokenCounts {
                cost_usd: cost(usage.cost_usd),
                ..usage.counts()
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
    use serde_json::{Value, json};

    use super::*;

    fn usage(value: Value) -> Usage {
        serde_json::from_value(value).expect("usage")
    }

    #[test]
    fn messages_add_up_with_cached_input_counted_as_input() {
        let mut counts = ClaudeUsage::default();
        assert_eq!(counts.running_report(), None);
        assert!(counts.message(
            Some("m1"),
            Some("claude-opus"),
            &usage(json!({"input_tokens": 10, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 5, "output_tokens": 1}))
        ));
        assert!(counts.delta("m1", &usage(json!({"output_tokens": 20}))));
        assert!(
            !counts.delta("m1", &usage(json!({"output_tokens": 20}))),
            "no change"
        );
        // The assistant event repeats the message start's counts: nothing grows backwards.
        assert!(!counts.message(
            Some("m1"),
            Some("claude-opus"),
            &usage(json!({"input_tokens": 10, "output_tokens": 1}))
        ));
        counts.message(
            Some("m2"),
            Some("claude-opus"),
            &usage(json!({"input_tokens": 3, "output_tokens": 4})),
        );
        let report = counts.running_report().expect("report");
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
        let mut counts = ClaudeUsage::default();
        counts.message(
            Some("x"),
            Some("<synthetic>"),
            &usage(json!({"input_tokens": 0, "output_tokens": 0})),
        );
        assert!(counts.running_report().expect("report").models.is_empty());
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
        let model_usage: BTreeMap<String, Usage> =
            serde_json::from_value(result["modelUsage"].clone()).expect("modelUsage");
        let report = final_report(
            Some(&usage(result["usage"].clone())),
            &model_usage,
            result["total_cost_usd"].as_f64(),
        )
        .expect("report");
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
        assert_eq!(final_report(None, &BTreeMap::new(), None), None);
    }
}
