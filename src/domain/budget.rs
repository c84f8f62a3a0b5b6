//! Budget caps: `--max-tokens N` and `--max-cost USD`, or `budget` in the config (the command
//! line wins, key by key), for the whole plan: every attempt its state records, across
//! invocations, so that a loop rerunning `run` gets no fresh budget each time. Their values,
//! when one is reached, and the messages (docs/cli.md, "Budget caps").

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::config::rules::{Expected, positive_or_null, read};
use super::token_usage::summary::UsageSummary;
use super::token_usage::{TokenCounts, format_usd, micros_to_usd, usd_to_micros};

/// Where a cap was set, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapOrigin {
    CommandLine,
    Config,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cap<T> {
    pub limit: T,
    pub origin: CapOrigin,
}

/// The `budget` object of the config file (absent or `null`: no caps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    #[serde(default, deserialize_with = "max_tokens")]
    pub max_tokens: Option<u64>,
    #[serde(default, deserialize_with = "max_cost")]
    pub max_cost_usd: Option<f64>,
}

/// An integer ≥ 1, or `null` for no cap.
fn max_tokens<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    read(deserializer, |value| {
        positive_or_null(value, Expected::Integer)
    })
}

/// A finite number > 0, or `null` for no cap.
fn max_cost<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    read(deserializer, |value| match value {
        Value::Null => Ok(None),
        Value::Number(number) => number
            .as_f64()
            .filter(|cost| cost.is_finite() && *cost > 0.0)
            .map(Some)
            .ok_or(Expected::FiniteAboveZero),
        _ => Err(Expected::Number),
    })
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetCaps {
    pub max_tokens: Option<Cap<u64>>,
    pub max_cost_usd: Option<Cap<f64>>,
}

// A cost cap is a finite number > 0 (never NaN), so equality is an equivalence and the run
// loop's rules, which hold the caps, keep their `Eq`.
impl Eq for BudgetCaps {}

/// The command line's value, else the config's.
fn cap<T>(command_line: Option<T>, config: Option<T>) -> Option<Cap<T>> {
    let (limit, origin) = match (command_line, config) {
        (Some(limit), _) => (limit, CapOrigin::CommandLine),
        (None, Some(limit)) => (limit, CapOrigin::Config),
        (None, None) => return None,
    };
    Some(Cap { limit, origin })
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CapKind {
    Tokens { limit: u64, spent: u64 },
    Cost { limit: f64, spent: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapReached {
    pub kind: CapKind,
    pub origin: CapOrigin,
}

/// What the plan has spent so far, as far as it is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    /// Input plus output tokens (cached input counts).
    pub tokens: u64,
    /// Exact, so that costs adding up to a cap reach it.
    pub cost_micros: u64,
}

impl Spent {
    /// With an attempt's (latest) counts added.
    pub fn plus(self, counts: &TokenCounts) -> Self {
        Self {
            tokens: self
                .tokens
                .saturating_add(counts.capped_tokens().unwrap_or(0)),
            cost_micros: self
                .cost_micros
                .saturating_add(usd_to_micros(counts.cost_usd.unwrap_or(0.0))),
        }
    }

    /// What the recorded attempts spent: each committed outcome's usage as recorded. A
    /// `partial` usage counts its lower bound, an `unknown` one (or none recorded: an older
    /// entry, an abandoned attempt) counts nothing — what is not known cannot be charged, and
    /// the warning for an agent that reports nothing says so.
    pub fn recorded<'a>(usages: impl IntoIterator<Item = Option<&'a UsageSummary>>) -> Self {
        usages
            .into_iter()
            .flatten()
            .fold(Self::default(), |spent, usage| spent.plus(&usage.counts))
    }

    /// What every attempt the plan's state records spent: the caps count the whole plan.
    pub fn of_state(state: &crate::domain::state::State) -> Self {
        Self::recorded(
            state
                .committed_outcomes
                .iter()
                .map(|entry| entry.usage.as_ref()),
        )
    }
}

/// The plan's spending against its caps (`status`, `check`; the `budget` object of
/// `status --json`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BudgetStanding {
    pub spent_tokens: u64,
    pub spent_cost_usd: f64,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl BudgetStanding {
    /// `None` when no cap is set.
    pub fn of(caps: &BudgetCaps, spent: Spent) -> Option<Self> {
        (caps.max_tokens.is_some() || caps.max_cost_usd.is_some()).then(|| Self {
            spent_tokens: spent.tokens,
            spent_cost_usd: micros_to_usd(spent.cost_micros),
            max_tokens: caps.max_tokens.map(|cap| cap.limit),
            max_cost_usd: caps.max_cost_usd.map(|cap| cap.limit),
        })
    }
}

impl BudgetCaps {
    /// The command line's caps over the config's, key by key.
    pub fn effective(
        max_tokens: Option<u64>,
        max_cost_usd: Option<f64>,
        config: &BudgetConfig,
    ) -> Self {
        Self {
            max_tokens: cap(max_tokens, config.max_tokens),
            max_cost_usd: cap(max_cost_usd, config.max_cost_usd),
        }
    }

    /// The first cap `spent` has reached (spent ≥ cap; tokens before cost). Before a launch
    /// `spent` is the committed total; during an attempt, that plus its latest report.
    pub fn reached(&self, spent: Spent) -> Option<CapReached> {
        if let Some(cap) = self.max_tokens
            && spent.tokens >= cap.limit
        {
            return Some(CapReached {
                kind: CapKind::Tokens {
                    limit: cap.limit,
                    spent: spent.tokens,
                },
                origin: cap.origin,
            });
        }
        // A cap below half a micro-dollar is still a cap: one micro-dollar.
        if let Some(cap) = self.max_cost_usd
            && spent.cost_micros >= usd_to_micros(cap.limit).max(1)
        {
            return Some(CapReached {
                kind: CapKind::Cost {
                    limit: cap.limit,
                    spent: micros_to_usd(spent.cost_micros),
                },
                origin: cap.origin,
            });
        }
        None
    }

    /// The caps set, tokens first: which, its flag or config key, and its limit in words.
    fn set(&self) -> Vec<(CapField, &'static str, String)> {
        let tokens = self.max_tokens.map(|cap| {
            let field = CapField::Tokens;
            (field, cap_name(field, cap.origin), cap.limit.to_string())
        });
        let cost = self.max_cost_usd.map(|cap| {
            let field = CapField::Cost;
            (field, cap_name(field, cap.origin), format_usd(cap.limit))
        });
        tokens.into_iter().chain(cost).collect()
    }

    /// `450 of 1000 tokens (input + output) spent (--max-tokens); $0.25 of $5 spent
    /// (budget.max_cost_usd)`: the plan's spending against each cap set; `None` without caps.
    pub fn spent_of(&self, spent: Spent) -> Option<String> {
        let parts: Vec<String> = self
            .set()
            .into_iter()
            .map(|(field, name, limit)| match field {
                CapField::Tokens => format!(
                    "{} of {limit} tokens (input + output) spent ({name})",
                    spent.tokens
                ),
                CapField::Cost => format!(
                    "{} of {limit} spent ({name})",
                    format_usd(micros_to_usd(spent.cost_micros))
                ),
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// For `check`: `at most 100000 tokens, input + output (--max-tokens) and $5
    /// (budget.max_cost_usd) for the whole plan`, or `no caps`.
    pub fn describe(&self) -> String {
        let caps: Vec<String> = self
            .set()
            .into_iter()
            .map(|(field, name, limit)| match field {
                CapField::Tokens => format!("{limit} tokens, input + output ({name})"),
                CapField::Cost => format!("{limit} ({name})"),
            })
            .collect();
        if caps.is_empty() {
            "no caps".to_owned()
        } else {
            format!("at most {} for the whole plan", caps.join(" and "))
        }
    }
}

#[derive(Clone, Copy)]
enum CapField {
    Tokens,
    Cost,
}

/// `--max-tokens`, `budget.max_cost_usd`, …
fn cap_name(field: CapField, origin: CapOrigin) -> &'static str {
    match (field, origin) {
        (CapField::Tokens, CapOrigin::CommandLine) => "--max-tokens",
        (CapField::Tokens, CapOrigin::Config) => "budget.max_tokens",
        (CapField::Cost, CapOrigin::CommandLine) => "--max-cost",
        (CapField::Cost, CapOrigin::Config) => "budget.max_cost_usd",
    }
}

impl CapReached {
    fn field(&self) -> CapField {
        match self.kind {
            CapKind::Tokens { .. } => CapField::Tokens,
            CapKind::Cost { .. } => CapField::Cost,
        }
    }

    /// The flag or config key of the cap.
    pub fn cap_name(&self) -> &'static str {
        cap_name(self.field(), self.origin)
    }

    /// The flag that raises the cap: the command line wins over the config.
    pub fn flag(&self) -> &'static str {
        cap_name(self.field(), CapOrigin::CommandLine)
    }

    /// The flag's value name in a `next:` step, standing for a larger value to choose.
    pub fn placeholder(&self) -> &'static str {
        match self.field() {
            CapField::Tokens => "N",
            CapField::Cost => "USD",
        }
    }

    /// `150`, `$2.5`: what the plan has spent, and the cap, as numbers of the cap's unit.
    fn numbers(&self) -> (String, String) {
        match self.kind {
            CapKind::Tokens { limit, spent } => (spent.to_string(), limit.to_string()),
            CapKind::Cost { limit, spent } => (format_usd(spent), format_usd(limit)),
        }
    }

    /// `150 tokens (input + output)`, `$2.5`: what the plan has spent in the cap's unit.
    fn spent_text(&self) -> String {
        let (spent, _) = self.numbers();
        match self.field() {
            CapField::Tokens => format!("{spent} tokens (input + output)"),
            CapField::Cost => spent,
        }
    }

    /// `1500 tokens (input + output) spent of 1000 (--max-tokens)`.
    fn amounts(&self) -> String {
        let (_, limit) = self.numbers();
        format!(
            "{} spent of {limit} ({})",
            self.spent_text(),
            self.cap_name()
        )
    }

    /// What to do before running again: `raise the cap: give --max-tokens N a value above the
    /// 150 tokens (input + output) this plan has spent (the cap was 120, --max-tokens)`.
    pub fn raise_advice(&self) -> String {
        let (_, limit) = self.numbers();
        format!(
            "raise the cap: give {} {} a value above the {} this plan has spent (the cap was {limit}, {})",
            self.flag(),
            self.placeholder(),
            self.spent_text(),
            self.cap_name()
        )
    }

    /// The summary of an attempt stopped mid-way (`budget-exceeded`, which already names the
    /// status).
    pub fn stop_message(&self) -> String {
        format!(
            "{} by this plan's attempts; the agent was stopped; to continue, run again with --retry-stopped and {} above {}",
            self.amounts(),
            self.flag(),
            self.numbers().0
        )
    }

    /// Why nothing more was launched. Nothing was stopped, so no recovery flag is needed; the
    /// caps count every recorded attempt of the plan, so only a larger cap continues.
    pub fn launch_refusal(&self, phase_id: &str) -> String {
        format!(
            "budget reached: {} by this plan's attempts; {phase_id} was not launched; to continue, run again with {} above {}",
            self.amounts(),
            self.flag(),
            self.numbers().0
        )
    }
}

/// An outcome's note when a cap is set and its attempt's usage is unknown.
pub fn unenforceable_message(caps: &BudgetCaps) -> Option<String> {
    cap_names(caps).map(|names| {
        format!(
            "{names} cannot be enforced for this agent: it reported no usage (X_AISH_USAGE, docs/worker-protocol.md); what it spent is not counted"
        )
    })
}

/// The run's `warning:` about the same (once per run): which attempt reported nothing, and
/// an earlier attempt of the plan that did report usage, when one did.
pub fn unenforceable_warning(
    caps: &BudgetCaps,
    attempt_id: &str,
    phase_id: &str,
    reported_before: Option<&str>,
) -> Option<String> {
    let earlier = match reported_before {
        Some(earlier) => format!(", though attempt {earlier} of this plan had reported usage"),
        None => String::new(),
    };
    cap_names(caps).map(|names| {
        format!(
            "{names} cannot be enforced: the agent of attempt {attempt_id} ({phase_id}) reported no usage (X_AISH_USAGE, docs/worker-protocol.md){earlier}; what it spent is not counted"
        )
    })
}

/// `--max-tokens and budget.max_cost_usd`; `None` without caps.
fn cap_names(caps: &BudgetCaps) -> Option<String> {
    let names: Vec<&str> = caps.set().into_iter().map(|(_, name, _)| name).collect();
    (!names.is_empty()).then(|| names.join(" and "))
}

/// `--max-tokens`: an integer ≥ 1 (a clap value parser).
pub fn parse_max_tokens(text: &str) -> Result<u64, InvalidCap> {
    match text.trim().parse::<u64>() {
        Ok(limit) if limit >= 1 => Ok(limit),
        _ => Err(InvalidCap(format!(
            "expected a whole number of tokens of at least 1, got '{text}'"
        ))),
    }
}

/// `--max-cost`: US dollars, a finite number > 0 (a clap value parser). A leading `$` is
/// accepted.
pub fn parse_max_cost(text: &str) -> Result<f64, InvalidCap> {
    let number = text.trim();
    let number = number.strip_prefix('$').unwrap_or(number);
    match number.parse::<f64>() {
        Ok(limit) if limit.is_finite() && limit > 0.0 => Ok(limit),
        _ => Err(InvalidCap(format!(
            "expected US dollars as a finite number greater than 0, got '{text}'"
        ))),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidCap(String);

#[cfg(test)]
mod tests;
