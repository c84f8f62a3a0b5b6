//! What an attempt's usage reports add up to, the summary recorded for it, and sums over
//! attempts, phases and runs.
//!
//! - **One attempt** ([`AttemptUsage`]): each report is cumulative, so the last one wins.
//!   Once a `final` report (the provider's own end-of-session total) has arrived, later
//!   non-final reports no longer replace it; a later final one does.
//! - **Its summary** ([`UsageSummary`], the outcome's `usage`): the winning report's counts,
//!   and `completeness`: `reported` when a final report arrived, `partial` when only non-final
//!   ones did (the attempt was killed, or the agent never says "final"), `unknown` when none
//!   did — then every number is `null`, never 0.
//! - **Sums** ([`UsageSummary::sum`]): count by count. The sum is `unknown` when every part is
//!   (or there is none), `reported` when every part is reported and each count is reported by
//!   all parts or by none, and `partial` otherwise: its numbers are then a lower bound (shown
//!   with `≥`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::report::{UsageReport, UsageReportError};
use super::{TokenCounts, format_usd};
use crate::domain::strict_json::StrictError;

/// How much of an attempt's (or a sum's) usage is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completeness {
    /// The provider's own final total arrived (for a sum: for every part, count by count).
    Reported,
    /// Only running totals arrived, or some parts are missing: the numbers are a lower bound.
    Partial,
    /// Nothing was reported: the numbers are unknown.
    Unknown,
}

impl Completeness {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reported => "reported",
            Self::Partial => "partial",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "reported" => Some(Self::Reported),
            "partial" => Some(Self::Partial),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

/// The usage of the running attempt, report by report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttemptUsage {
    latest: Option<UsageReport>,
    final_seen: bool,
    /// Valid reports received (applied or not).
    reports: u64,
    /// Invalid reports received (ignored).
    invalid: u64,
}

/// What a valid report did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportEffect {
    /// It is now the attempt's usage.
    Applied,
    /// A final report came earlier; this non-final one changes nothing.
    IgnoredAfterFinal,
}

impl AttemptUsage {
    /// A valid report arrived.
    pub fn report(&mut self, report: UsageReport) -> ReportEffect {
        self.reports += 1;
        if self.final_seen && !report.is_final {
            return ReportEffect::IgnoredAfterFinal;
        }
        self.final_seen |= report.is_final;
        self.latest = Some(report);
        ReportEffect::Applied
    }

    /// An invalid report arrived: it is ignored and counted. Returns the warning for the
    /// transcript the first time only (one line per attempt, however many follow).
    pub fn invalid(&mut self, error: &UsageReportError) -> Option<String> {
        self.invalid += 1;
        (self.invalid == 1).then(|| {
            format!(
                "[runner] ignored an invalid usage report (X_AISH_USAGE): {error}; later invalid reports are only counted"
            )
        })
    }

    /// How many invalid reports were ignored.
    pub fn invalid_reports(&self) -> u64 {
        self.invalid
    }

    /// The attempt's totals so far, for a budget check mid-attempt.
    pub fn live(&self) -> Option<&TokenCounts> {
        self.latest.as_ref().map(|report| &report.totals)
    }

    /// The summary to record.
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
/// `status --json`, `run --json`, the event stream).
#[derive(Clone, Debug, PartialEq)]
pub struct UsageSummary {
    /// All `None` when `completeness` is `Unknown`.
    pub counts: TokenCounts,
    pub models: BTreeMap<String, TokenCounts>,
    pub completeness: Completeness,
}

/// The members of [`UsageSummary::to_json`], written straight to the serializer: every state
/// write serializes one summary per committed outcome, and building a [`Value`] for each (an
/// ordered map and a string per key) cost more than the rest of the document.
impl serde::Serialize for UsageSummary {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut object = serializer.serialize_map(Some(super::COUNT_KEYS.len() + 2))?;
        self.counts.serialize_entries(&mut object)?;
        object.serialize_entry("models", &self.models)?;
        object.serialize_entry("completeness", self.completeness.as_str())?;
        object.end()
    }
}

// A cost is never NaN: JSON has no NaN, reports and recorded summaries refuse negative or
// non-finite costs, and a sum of non-negative numbers is never NaN. So equality is an
// equivalence, and the documents that hold a summary keep their `Eq`.
impl Eq for UsageSummary {}

impl UsageSummary {
    /// No report: numbers `null`.
    pub fn unknown() -> Self {
        Self {
            counts: TokenCounts::default(),
            models: BTreeMap::new(),
            completeness: Completeness::Unknown,
        }
    }

    /// Sums `parts` count by count (see the module documentation for completeness).
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

    /// `{input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, cost_usd,
    /// models, completeness}`.
    pub fn to_json(&self) -> Value {
        // Numbers, strings and fixed keys: nothing here can fail to serialize.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads what [`Self::to_json`] wrote, strictly (every key present, no other key; an
    /// `unknown` summary with a number is invalid). `key` names the object in messages
    /// (`committed_outcomes[2].usage`).
    pub fn from_json(value: &Value, key: &str) -> Result<Self, StrictError> {
        let object = expect_object(value, key)?;
        let mut keys: Vec<&str> = super::COUNT_KEYS.to_vec();
        keys.extend(["models", "completeness"]);
        expect_exact_keys(object, &keys, key)?;
        let completeness = match object.get("completeness") {
            Some(Value::String(text)) => Completeness::parse(text),
            _ => None,
        }
        .ok_or_else(|| {
            StrictError(format!(
                "expected {key}.completeness to be reported, partial or unknown"
            ))
        })?;
        let counts = counts_from_json(object, key)?;
        let models_object = expect_object(&object["models"], &format!("{key}.models"))?;
        let mut models = BTreeMap::new();
        for (name, value) in models_object {
            let label = format!("{key}.models.{name}");
            let model = expect_object(value, &label)?;
            expect_exact_keys(model, &super::COUNT_KEYS, &label)?;
            models.insert(name.clone(), counts_from_json(model, &label)?);
        }
        if completeness == Completeness::Unknown && (!counts.is_empty() || !models.is_empty()) {
            return Err(StrictError(format!(
                "{key} is unknown but holds numbers; unknown usage has every number null"
            )));
        }
        Ok(Self {
            counts,
            models,
            completeness,
        })
    }

    /// Input plus output tokens, for a table cell: `1801`, `≥ 110` when partial, `?` when
    /// unknown, `–` when the agent reported no token count.
    pub fn tokens_text(&self) -> String {
        match (self.completeness, self.counts.capped_tokens()) {
            (Completeness::Unknown, _) => "?".to_owned(),
            (_, None) => "–".to_owned(),
            (Completeness::Reported, Some(tokens)) => tokens.to_string(),
            (Completeness::Partial, Some(tokens)) => format!("≥ {tokens}"),
        }
    }

    /// The cost, for a table cell: `$0.25`, `≥ $0.25` when partial, `?` when unknown, `–`
    /// when the agent reported no cost (Codex reports none).
    pub fn cost_text(&self) -> String {
        match (self.completeness, self.counts.cost_usd) {
            (Completeness::Unknown, _) => "?".to_owned(),
            (_, None) => "–".to_owned(),
            (Completeness::Reported, Some(cost)) => format_usd(cost),
            (Completeness::Partial, Some(cost)) => format!("≥ {}", format_usd(cost)),
        }
    }

    /// For an attempt's end line: `1801 tokens, $0.25`, `≥ 110 tokens`; `None` when unknown
    /// or nothing was counted.
    pub fn brief(&self) -> Option<String> {
        if self.completeness == Completeness::Unknown {
            return None;
        }
        let prefix = if self.completeness == Completeness::Partial {
            "≥ "
        } else {
            ""
        };
        let mut parts = Vec::new();
        if let Some(tokens) = self.counts.capped_tokens() {
            parts.push(format!("{prefix}{tokens} tokens"));
        }
        if let Some(cost) = self.counts.cost_usd {
            parts.push(format!("{prefix}{}", format_usd(cost)));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
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

fn expect_object<'a>(value: &'a Value, key: &str) -> Result<&'a Map<String, Value>, StrictError> {
    value
        .as_object()
        .ok_or_else(|| StrictError(format!("expected {key} to be an object")))
}

fn expect_exact_keys(
    object: &Map<String, Value>,
    keys: &[&str],
    key: &str,
) -> Result<(), StrictError> {
    if let Some(unexpected) = object.keys().find(|name| !keys.contains(&name.as_str())) {
        return Err(StrictError(format!("unexpected key {key}.{unexpected}")));
    }
    if let Some(missing) = keys.iter().find(|name| !object.contains_key(**name)) {
        return Err(StrictError(format!(
            "missing required key {missing} (at {key}.{missing})"
        )));
    }
    Ok(())
}

fn counts_from_json(object: &Map<String, Value>, key: &str) -> Result<TokenCounts, StrictError> {
    let count = |name: &str| -> Result<Option<u64>, StrictError> {
        match &object[name] {
            Value::Null => Ok(None),
            value => value.as_u64().map(Some).ok_or_else(|| {
                StrictError(format!(
                    "expected {key}.{name} to be a non-negative integer or null"
                ))
            }),
        }
    };
    let cost = match &object["cost_usd"] {
        Value::Null => None,
        value => Some(
            value
                .as_f64()
                .filter(|cost| cost.is_finite() && *cost >= 0.0)
                .ok_or_else(|| {
                    StrictError(format!(
                        "expected {key}.cost_usd to be a non-negative number or null"
                    ))
                })?,
        ),
    };
    Ok(TokenCounts {
        input_tokens: count("input_tokens")?,
        cached_input_tokens: count("cached_input_tokens")?,
        output_tokens: count("output_tokens")?,
        reasoning_tokens: count("reasoning_tokens")?,
        cost_usd: cost,
    })
}

#[cfg(test)]
mod tests;
