//! What an attempt's usage reports add up to, the summary recorded for it, and sums over
//! attempts, phases and runs (docs/cli.md, "Usage and its completeness").

use std::collections::BTreeMap;

use serde::de::{self, Deserializer, Unexpected};
use serde::{Deserialize, Serialize};

use super::report::{UsageReport, UsageReportError};
use super::{TokenCounts, cost, count, format_usd};
use crate::domain::strict_json::StrictError;

/// How much of an attempt's (or a sum's) usage is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, strum::EnumString)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Completeness {
    /// The provider's own final total arrived (for a sum: for every part, count by count).
    Reported,
    /// Only running totals arrived, or some parts are missing: the numbers are a lower bound.
    Partial,
    /// Nothing was reported: every number is `null`.
    #[default]
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

/// The usage of the running attempt, report by report. Reports are cumulative, but any process
/// of the attempt may send one (a tool the agent runs can find the socket), so no report can
/// lower what was counted: each count is the highest any report gave, per model too. A final
/// report (the provider's own total) makes the usage `reported`; one lower than what was
/// counted is noted, not believed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptUsage {
    counted: Option<TokenCounts>,
    models: BTreeMap<String, TokenCounts>,
    final_seen: bool,
    /// Invalid reports received (ignored).
    invalid: u64,
    /// Final reports lower than what was already counted.
    lower_finals: u64,
}

/// What a report changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportEffect {
    /// The usage is higher, or now final.
    Changed,
    Unchanged,
    /// A final report below what was counted (ignored where lower); the warning for the
    /// transcript, the first time only.
    LowerFinal(Option<String>),
}

impl AttemptUsage {
    pub fn report(&mut self, report: UsageReport) -> ReportEffect {
        let before = (self.counted.clone(), self.models.clone(), self.final_seen);
        let lower = self
            .counted
            .as_ref()
            .is_some_and(|counted| report.totals.lower_than(counted));
        let counted = self.counted.as_ref().map_or_else(
            || report.totals.clone(),
            |counted| counted.highest(&report.totals),
        );
        self.counted = Some(counted);
        for (name, counts) in &report.models {
            let highest = self
                .models
                .get(name)
                .map_or_else(|| counts.clone(), |seen| seen.highest(counts));
            self.models.insert(name.clone(), highest);
        }
        self.final_seen |= report.is_final;
        if report.is_final && lower {
            self.lower_finals += 1;
            let warning = (self.lower_finals == 1).then(|| {
                format!(
                    "[runner] a final usage report ({}) is lower than what the attempt had already reported ({}); the higher counts are kept (any process of the attempt can send a report)",
                    describe_or_nothing(&report.totals),
                    describe_or_nothing(self.counted.as_ref().unwrap_or(&TokenCounts::default())),
                )
            });
            return ReportEffect::LowerFinal(warning);
        }
        if before == (self.counted.clone(), self.models.clone(), self.final_seen) {
            ReportEffect::Unchanged
        } else {
            ReportEffect::Changed
        }
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

    /// What the attempt has spent so far (never less than before), for a budget check
    /// mid-attempt.
    pub fn live(&self) -> Option<&TokenCounts> {
        self.counted.as_ref()
    }

    pub fn summary(&self) -> UsageSummary {
        match &self.counted {
            None => UsageSummary::unknown(),
            Some(counted) => UsageSummary {
                counts: counted.clone(),
                models: self.models.clone(),
                completeness: if self.final_seen {
                    Completeness::Reported
                } else {
                    Completeness::Partial
                },
            },
        }
    }
}

fn describe_or_nothing(counts: &TokenCounts) -> String {
    if counts.is_empty() {
        "no counts".to_owned()
    } else {
        counts.describe()
    }
}

/// The recorded usage of an attempt, or a sum of such (`usage` in outcomes, `state.json`,
/// `status --json`, `run --json`, the event stream), every key written; `unknown` by default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
        Self::default()
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
