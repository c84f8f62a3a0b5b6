//! Token usage and cost: what an agent reports ([`report`]), what an attempt's reports add up
//! to and how summaries are summed ([`summary`]), and how often a running attempt's usage is
//! streamed ([`publication`]); docs/liveness.md, "Usage and budget". Every count is optional: a
//! count nobody reported is `None`, never 0 (Codex reports no cost, Claude no reasoning tokens).

pub mod publication;
pub mod report;
pub mod summary;

use serde::de::{self, Deserializer, Unexpected};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// The names of the counts, in the order they are written.
pub const COUNT_KEYS: [&str; 5] = [
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
];

/// Token counts and cost, each as reported or not (docs/worker-protocol.md, "Usage reports",
/// says what each counts); recorded as a JSON object with every key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenCounts {
    #[serde(deserialize_with = "count")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    pub cached_input_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    pub reasoning_tokens: Option<u64>,
    #[serde(serialize_with = "finite_or_null", deserialize_with = "cost")]
    pub cost_usd: Option<f64>,
}

/// A recorded count: `expected usage.input_tokens to be a non-negative integer or null`.
pub(crate) fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    null_or(
        deserializer,
        Value::as_u64,
        "a non-negative integer or null",
    )
}

/// A recorded cost: `expected usage.cost_usd to be a non-negative number or null`.
pub(crate) fn cost<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    null_or(deserializer, as_cost, "a non-negative number or null")
}

/// A cost as reports send it and records hold it: a finite number, not negative.
fn as_cost(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .filter(|cost| cost.is_finite() && *cost >= 0.0)
}

fn null_or<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    read: impl FnOnce(&Value) -> Option<T>,
    expected: &str,
) -> Result<Option<T>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => read(&value)
            .map(Some)
            .ok_or_else(|| de::Error::invalid_value(Unexpected::Other("value"), &expected)),
    }
}

/// A cost that is not finite has no JSON number and is written `null`.
fn finite_or_null<S: Serializer>(cost: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    cost.filter(|cost| cost.is_finite()).serialize(serializer)
}

impl TokenCounts {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The tokens a `--max-tokens` cap counts: input (cached included) plus output. `None` when
    /// neither was reported.
    pub fn capped_tokens(&self) -> Option<u64> {
        add(self.input_tokens, self.output_tokens)
    }

    /// Adds `other` count by count: a count neither side has stays `None`.
    pub fn plus(&self, other: &Self) -> Self {
        Self {
            input_tokens: add(self.input_tokens, other.input_tokens),
            cached_input_tokens: add(self.cached_input_tokens, other.cached_input_tokens),
            output_tokens: add(self.output_tokens, other.output_tokens),
            reasoning_tokens: add(self.reasoning_tokens, other.reasoning_tokens),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (None, None) => None,
                (a, b) => Some(micros_to_usd(
                    usd_to_micros(a.unwrap_or(0.0)).saturating_add(usd_to_micros(b.unwrap_or(0.0))),
                )),
            },
        }
    }

    /// Count by count, the higher of the two (a count either side has is kept).
    pub fn highest(&self, other: &Self) -> Self {
        Self {
            input_tokens: self.input_tokens.max(other.input_tokens),
            cached_input_tokens: self.cached_input_tokens.max(other.cached_input_tokens),
            output_tokens: self.output_tokens.max(other.output_tokens),
            reasoning_tokens: self.reasoning_tokens.max(other.reasoning_tokens),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// Whether some count of `self` is below `other`'s (a count `self` lacks counts as 0).
    pub fn lower_than(&self, other: &Self) -> bool {
        let below =
            |mine: Option<u64>, theirs: Option<u64>| mine.unwrap_or(0) < theirs.unwrap_or(0);
        below(self.input_tokens, other.input_tokens)
            || below(self.cached_input_tokens, other.cached_input_tokens)
            || below(self.output_tokens, other.output_tokens)
            || below(self.reasoning_tokens, other.reasoning_tokens)
            || self.cost_usd.unwrap_or(0.0) < other.cost_usd.unwrap_or(0.0)
    }

    /// Which counts are present, in [`COUNT_KEYS`] order.
    fn presence(&self) -> [bool; 5] {
        [
            self.input_tokens.is_some(),
            self.cached_input_tokens.is_some(),
            self.output_tokens.is_some(),
            self.reasoning_tokens.is_some(),
            self.cost_usd.is_some(),
        ]
    }

    /// `1234 in (1000 cached), 567 out (120 reasoning) tokens, $0.0123`: the counts that were
    /// reported.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(input) = self.input_tokens {
            let cached = self
                .cached_input_tokens
                .map(|cached| format!(" ({cached} cached)"))
                .unwrap_or_default();
            parts.push(format!("{input} in{cached}"));
        }
        if let Some(output) = self.output_tokens {
            let reasoning = self
                .reasoning_tokens
                .map(|reasoning| format!(" ({reasoning} reasoning)"))
                .unwrap_or_default();
            parts.push(format!("{output} out{reasoning}"));
        }
        let tokens = (!parts.is_empty()).then(|| format!("{} tokens", parts.join(", ")));
        let cost = self.cost_usd.map(format_usd);
        [tokens, cost]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A sum (saturating) that is `None` only when both sides are.
fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// Money is counted in whole micro-dollars, so sums are exact (0.7 + 0.1 + 0.1 + 0.1 is 1, and
/// reaches a cap of 1) and bounded: a sum saturates at `u64::MAX` micro-dollars (about $1.8e13)
/// instead of growing to infinity. A negative amount, or one that is not a number, is 0.
pub fn usd_to_micros(amount: f64) -> u64 {
    if amount > 0.0 {
        // `as` saturates: an amount beyond the range is the largest one.
        (amount * 1e6).round() as u64
    } else {
        0
    }
}

/// Dollars for `micros`, as written in JSON.
pub fn micros_to_usd(micros: u64) -> f64 {
    micros as f64 / 1e6
}

/// An agent's cost as it is counted: whole micro-dollars, at most the largest sum.
pub fn counted_usd(amount: f64) -> f64 {
    micros_to_usd(usd_to_micros(amount))
}

/// `$5`, `$0.0011`, `$1.2346`: at most four decimals, trailing zeros dropped; never `-0`,
/// never more than 14 digits before the point.
pub fn format_usd(amount: f64) -> String {
    let micros = usd_to_micros(amount);
    let ten_thousandths = micros / 100 + u64::from(micros % 100 >= 50);
    let (dollars, fraction) = (ten_thousandths / 10_000, ten_thousandths % 10_000);
    if fraction == 0 {
        format!("${dollars}")
    } else {
        let fraction = format!("{fraction:04}");
        format!("${dollars}.{}", fraction.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(input: Option<u64>, output: Option<u64>, cost: Option<f64>) -> TokenCounts {
        TokenCounts {
            input_tokens: input,
            output_tokens: output,
            cost_usd: cost,
            ..TokenCounts::default()
        }
    }

    #[test]
    fn capped_tokens_are_input_plus_output() {
        assert_eq!(counts(Some(10), Some(20), None).capped_tokens(), Some(30));
        assert_eq!(counts(Some(10), None, None).capped_tokens(), Some(10));
        assert_eq!(counts(None, Some(7), None).capped_tokens(), Some(7));
        assert_eq!(counts(None, None, Some(1.0)).capped_tokens(), None);
        assert_eq!(
            counts(Some(u64::MAX), Some(1), None).capped_tokens(),
            Some(u64::MAX)
        );
    }

    #[test]
    fn adding_keeps_what_either_side_has() {
        let a = TokenCounts {
            input_tokens: Some(10),
            cached_input_tokens: Some(4),
            cost_usd: Some(0.5),
            ..TokenCounts::default()
        };
        let b = counts(Some(5), Some(3), None);
        assert_eq!(
            a.plus(&b),
            TokenCounts {
                input_tokens: Some(15),
                cached_input_tokens: Some(4),
                output_tokens: Some(3),
                reasoning_tokens: None,
                cost_usd: Some(0.5),
            }
        );
        assert_eq!(
            TokenCounts::default().plus(&TokenCounts::default()),
            TokenCounts::default()
        );
    }

    #[test]
    fn json_members_name_every_count() {
        assert_eq!(
            serde_json::to_value(counts(Some(1), None, Some(0.25))).unwrap(),
            serde_json::json!({"input_tokens": 1, "cached_input_tokens": null,
                "output_tokens": null, "reasoning_tokens": null, "cost_usd": 0.25})
        );
    }

    #[test]
    fn descriptions_name_what_was_reported() {
        let all = TokenCounts {
            input_tokens: Some(1234),
            cached_input_tokens: Some(1000),
            output_tokens: Some(567),
            reasoning_tokens: Some(120),
            cost_usd: Some(0.01234),
        };
        assert_eq!(
            all.describe(),
            "1234 in (1000 cached), 567 out (120 reasoning) tokens, $0.0123"
        );
        assert_eq!(
            counts(Some(3), Some(4), None).describe(),
            "3 in, 4 out tokens"
        );
        assert_eq!(counts(None, None, Some(5.0)).describe(), "$5");
        assert_eq!(TokenCounts::default().describe(), "");
        assert_eq!(format_usd(0.0011), "$0.0011");
        assert_eq!(format_usd(1.23456), "$1.2346");
        assert_eq!(format_usd(0.0), "$0");
    }

    #[test]
    fn money_is_counted_exactly_in_micro_dollars() {
        let sum = [0.7, 0.1, 0.1, 0.1]
            .into_iter()
            .fold(TokenCounts::default(), |sum, cost| {
                sum.plus(&counts(None, None, Some(cost)))
            });
        assert_eq!(sum.cost_usd, Some(1.0));
        assert_eq!(usd_to_micros(0.0000004), 0);
        assert_eq!(usd_to_micros(0.0000005), 1);
        assert_eq!(usd_to_micros(-1.0), 0);
        assert_eq!(usd_to_micros(f64::NAN), 0);
        assert_eq!(counted_usd(0.0011), 0.0011);
    }

    #[test]
    fn huge_and_odd_costs_stay_bounded_and_print_sanely() {
        let huge = counts(None, None, Some(counted_usd(1e308)));
        let sum = huge.plus(&huge);
        let cost = sum.cost_usd.expect("a cost");
        assert!(cost.is_finite(), "{cost}");
        assert_eq!(usd_to_micros(cost), u64::MAX);
        assert_eq!(format_usd(cost), "$18446744073709.5516");
        assert_eq!(format_usd(1e308), "$18446744073709.5516");
        assert_eq!(format_usd(f64::INFINITY), "$18446744073709.5516");
        assert_eq!(format_usd(-0.0), "$0");
        assert_eq!(format_usd(0.00004), "$0");
        assert_eq!(format_usd(0.00005), "$0.0001");
        assert_eq!(format_usd(2.5), "$2.5");
        assert_eq!(
            serde_json::to_value(&sum).unwrap()["cost_usd"],
            serde_json::json!(18446744073709.55)
        );
    }
}
