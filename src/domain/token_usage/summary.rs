//! What an attempt's usage reports add up to, the summary recorded for it, and sums over
//! attempts, phases and runs (docs/cli.md, "Usage and its completeness").

use std::collections::BTreeMap;

use serde::de::{self, Deserializer, Unexpected};
use serde::{Deserialize, Serialize};

use super::report::{UsageReport, UsageReportError};
use super::{TokenCounts, cost, count, format_usd};
use crate::domain::strict_json::StrictError;

/// How much of an attempt's (or a sum's) usage is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, strum::EnumString)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Completeness {
    /// The provider's own final total arrived (for a sum: for every part, count by count).
    Reported,
    /// Only running totals arrived, or some parts are missing: the numbers are a lower bound.
    Partial,
    /// Nothing was reported: every number is `null`.
    Unknown,
}

/// `reported`, `partial` or `unknown`, whatever else the value is.
fn completeness<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Completeness, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    value
        .as_str()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            de::Error::invalid_value(Unexpected::Other("value"), &"reported, partial or unknown")
        })
}

/// The usage of the running attempt, report by report: each is cumulative, so the last one
/// wins, except that a non-final report never replaces a final one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptUsage {
    latest: Option<UsageReport>,
    final_seen: bool,
    /// Invalid reports received (ignored).
    invalid: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportEffect {
    Applied,
    IgnoredAfterFinal,
}

impl AttemptUsage {
    pub fn report(&mut self, report: UsageReport) -> ReportEffect {
        if self.final_seen && !report.is_final {
            return ReportEffect::IgnoredAfterFinal;
        }
        self.final_seen |= report.is_final;
        self.latest = Some(report);
        ReportEffect::Applied
    }

    /// An invalid report is ignored and counted; the warning for the transcript comes the
    /// first time only.
    pub fn invalid(&mut self, error: &UsageReportError) -> Option<String> {
        self.invalid += 1;
        (self.invalid == 1).then(|| {
            format!(
                "[runner] ignored an invalid usage report (X_AISH_USAGE): {error}; later invalid reports are only counted"
            )
        })
    }

    /// The attempt's totals so far, for a budget check mid-attempt.
    pub fn live(&self) -> Option<&TokenCounts> {
        self.latest.as_ref().map(|report| &report.totals)
    }

    pub fn summary(&self) -> UsageSummary {
        match &self.latest {
            None => UsageSummary::unknown(),
            Some(report) => UsageSummary {
                counts: report.totals.clone(),
                models: report.models.clone(),
                completeness: if self.final_seen {
                    Completeness::Reported
                } else {
                    Completeness::Partial
                },
            },
        }
    }
}

/// The recorded usage of an attempt, or a sum of such (`usage` in outcomes, `state.json`,
/// `status --json`, `run --json`, the event stream), every key written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "UsageFields")]
pub struct UsageSummary {
    /// All `None` when `completeness` is `Unknown`.
    #[serde(flatten)]
    pub counts: TokenCounts,
    pub models: BTreeMap<String, TokenCounts>,
    pub completeness: Completeness,
}

/// [`UsageSummary`] as read: its counts side by side with the other keys (serde cannot read a
/// flattened struct strictly).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageFields {
    #[serde(deserialize_with = "count")]
    input_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    cached_input_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    output_tokens: Option<u64>,
    #[serde(deserialize_with = "count")]
    reasoning_tokens: Option<u64>,
    #[serde(deserialize_with = "cost")]
    cost_usd: Option<f64>,
    models: BTreeMap<String, TokenCounts>,
    #[serde(deserialize_with = "completeness")]
    completeness: Completeness,
}

impl From<UsageFields> for UsageSummary {
    fn from(fields: UsageFields) -> Self {
        Self {
            counts: TokenCounts {
                input_tokens: fields.input_tokens,
                cached_input_tokens: fields.cached_input_tokens,
                output_tokens: fields.output_tokens,
                reasoning_tokens: fields.reasoning_tokens,
                cost_usd: fields.cost_usd,
            },
            models: fields.models,
            completeness: fields.completeness,
        }
    }
}

// A cost is never NaN: JSON has no NaN, reports and recorded summaries refuse negative or
// non-finite costs, and a sum of non-negative numbers is never NaN. So equality is an
// equivalence, and the documents that hold a summary keep their `Eq`.
impl Eq for UsageSummary {}

impl UsageSummary {
    pub fn unknown() -> Self {
        Self {
            counts: TokenCounts::default(),
            models: BTreeMap::new(),
            completeness: Completeness::Unknown,
        }
    }

    /// Sums `parts` count by count: `unknown` when every part is (or there is none),
    /// `reported` when every part is reported and each count is reported by all parts or by
    /// none, and `partial` otherwise.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a UsageSummary>) -> Self {
        let mut counts = TokenCounts::default();
        let mut models: BTreeMap<String, TokenCounts> = BTreeMap::new();
        let mut any_known = false;
        let mut all_reported = true;
        let mut presence: Option<[bool; 5]> = None;
        let mut consistent = true;
        for part in parts {
            if part.completeness == Completeness::Unknown {
                all_reported = false;
                continue;
            }
            any_known = true;
            all_reported &= part.completeness == Completeness::Reported;
            let present = part.counts.presence();
            consistent &= presence.is_none_or(|seen| seen == present);
            presence = Some(present);
            counts = counts.plus(&part.counts);
            for (name, model) in &part.models {
                let merged = models
                    .get(name)
                    .map_or_else(|| model.clone(), |sum| sum.plus(model));
                models.insert(name.clone(), merged);
            }
        }
        if !any_known {
            return Self::unknown();
        }
        Self {
            counts,
            models,
            completeness: if all_reported && consistent {
                Completeness::Reported
            } else {
                Completeness::Partial
            },
        }
    }

    /// An `unknown` summary has every number `null`; `key` names it in the message
    /// (`committed_outcomes[2].usage`).
    pub fn validate(&self, key: impl std::fmt::Display) -> Result<(), StrictError> {
        let numbers = !self.counts.is_empty() || !self.models.is_empty();
        if self.completeness == Completeness::Unknown && numbers {
            return Err(StrictError(format!(
                "{key} is unknown but holds numbers; unknown usage has every number null"
            )));
        }
        Ok(())
    }

    /// Input plus output tokens, for a table cell: `1801`, `≥ 110` when partial, `?` when
    /// unknown, `–` when the agent reported no token count.
    pub fn tokens_text(&self) -> String {
        self.cell(self.counts.capped_tokens().map(|tokens| tokens.to_string()))
    }

    /// The cost, for a table cell: `$0.25`, `≥ $0.25` when partial, `?` when unknown, `–`
    /// when the agent reported no cost (Codex reports none).
    pub fn cost_text(&self) -> String {
        self.cell(self.counts.cost_usd.map(format_usd))
    }

    fn cell(&self, amount: Option<String>) -> String {
        match (self.completeness, amount) {
            (Completeness::Unknown, _) => "?".to_owned(),
            (_, None) => "–".to_owned(),
            (Completeness::Reported, Some(amount)) => amount,
            (Completeness::Partial, Some(amount)) => format!("≥ {amount}"),
        }
    }

    /// For an attempt's end line: `1801 tokens, $0.25`, `≥ 110 tokens`; `None` when unknown
    /// or nothing was counted.
    pub fn brief(&self) -> Option<String> {
        let tokens = self
            .counts
            .capped_tokens()
            .map(|tokens| format!("{tokens} tokens"));
        let parts: Vec<String> = [tokens, self.counts.cost_usd.map(format_usd)]
            .into_iter()
            .flatten()
            .map(|part| self.cell(Some(part)))
            .collect();
        (self.completeness != Completeness::Unknown && !parts.is_empty()).then(|| parts.join(", "))
    }

    /// For `status`: `1234 in (1000 cached), 567 out tokens, $0.0123`; `≥ …` when partial;
    /// `?` when unknown.
    pub fn describe(&self) -> String {
        match self.completeness {
            Completeness::Unknown => "?".to_owned(),
            Completeness::Reported if self.counts.is_empty() => "none reported".to_owned(),
            Completeness::Reported => self.counts.describe(),
            Completeness::Partial if self.counts.is_empty() => "≥ 0".to_owned(),
            Completeness::Partial => format!("≥ {}", self.counts.describe()),
        }
    }
}

#[cfg(test)]
mod tests;
