//! Unit tests of the budget caps (src/domain/budget.rs): precedence key by key, when a cap is
//! reached, what is spent, messages, `check` descriptions and strict flag and config values.

use serde_json::json;

use super::*;
use crate::domain::token_usage::summary::{Completeness, UsageSummary};

impl BudgetCaps {
    fn is_set(&self) -> bool {
        self.max_tokens.is_some() || self.max_cost_usd.is_some()
    }
}

impl Spent {
    /// Committed attempts.
    fn of<'a>(attempts: impl IntoIterator<Item = &'a UsageSummary>) -> Self {
        attempts
            .into_iter()
            .fold(Self::default(), |spent, summary| {
                spent.plus(&summary.counts)
            })
    }
}

fn tokens(limit: u64, origin: CapOrigin) -> BudgetCaps {
    BudgetCaps {
        max_tokens: Some(Cap { limit, origin }),
        max_cost_usd: None,
    }
}

fn spent(tokens: u64, cost_usd: f64) -> Spent {
    Spent {
        tokens,
        cost_micros: crate::domain::token_usage::usd_to_micros(cost_usd),
    }
}

#[test]
fn the_command_line_wins_key_by_key() {
    let config = BudgetConfig {
        max_tokens: Some(100),
        max_cost_usd: Some(2.0),
    };
    let caps = BudgetCaps::effective(Some(50), None, &config);
    assert_eq!(
        caps.max_tokens,
        Some(Cap {
            limit: 50,
            origin: CapOrigin::CommandLine
        })
    );
    assert_eq!(
        caps.max_cost_usd,
        Some(Cap {
            limit: 2.0,
            origin: CapOrigin::Config
        })
    );
    assert!(!BudgetCaps::effective(None, None, &BudgetConfig::default()).is_set());
}

#[test]
fn a_cap_is_reached_at_its_limit() {
    let caps = tokens(1000, CapOrigin::CommandLine);
    assert_eq!(caps.reached(spent(999, 9.0)), None);
    let reached = caps.reached(spent(1000, 0.0)).expect("reached");
    assert_eq!(
        reached.kind,
        CapKind::Tokens {
            limit: 1000,
            spent: 1000
        }
    );
    let cost = BudgetCaps::effective(None, Some(0.5), &BudgetConfig::default());
    assert_eq!(cost.reached(spent(u64::MAX, 0.49)), None);
    assert!(cost.reached(spent(0, 0.5)).is_some());
    assert_eq!(BudgetCaps::default().reached(spent(u64::MAX, 1e9)), None);
}

#[test]
fn tokens_are_checked_before_cost() {
    let caps = BudgetCaps::effective(Some(10), Some(1.0), &BudgetConfig::default());
    assert!(matches!(
        caps.reached(spent(10, 2.0)).map(|reached| reached.kind),
        Some(CapKind::Tokens { .. })
    ));
    assert!(matches!(
        caps.reached(spent(9, 2.0)).map(|reached| reached.kind),
        Some(CapKind::Cost { .. })
    ));
}

#[test]
fn spent_counts_input_and_output_of_every_attempt() {
    let summary = |input, output, cost| UsageSummary {
        counts: TokenCounts {
            input_tokens: input,
            cached_input_tokens: Some(1_000_000),
            output_tokens: output,
            reasoning_tokens: Some(1_000_000),
            cost_usd: cost,
        },
        models: Default::default(),
        completeness: Completeness::Partial,
    };
    let attempts = [
        summary(Some(100), Some(20), Some(0.25)),
        summary(None, Some(5), None),
        UsageSummary::unknown(),
    ];
    assert_eq!(Spent::of(&attempts), spent(125, 0.25));
    let live = TokenCounts {
        input_tokens: Some(10),
        output_tokens: Some(1),
        cost_usd: Some(0.5),
        ..TokenCounts::default()
    };
    assert_eq!(Spent::of(&attempts).plus(&live), spent(136, 0.75));
}

#[test]
fn messages_name_the_cap_the_amount_and_the_way_on() {
    let reached = tokens(1000, CapOrigin::CommandLine)
        .reached(spent(1234, 0.0))
        .expect("reached");
    assert_eq!(
        reached.stop_message(),
        "1234 tokens (input + output) spent of 1000 (--max-tokens) by this plan's attempts; \
         the agent was stopped; to continue, run again with --retry-stopped and --max-tokens \
         above 1234"
    );
    let reached = BudgetCaps::effective(
        None,
        None,
        &BudgetConfig {
            max_tokens: None,
            max_cost_usd: Some(2.0),
        },
    )
    .reached(spent(0, 2.5))
    .expect("reached");
    assert_eq!(reached.cap_name(), "budget.max_cost_usd");
    assert_eq!(
        reached.launch_refusal("phase-2"),
        "budget reached: $2.5 spent of $2 (budget.max_cost_usd) by this plan's attempts; \
         phase-2 was not launched; to continue, run again with --max-cost above $2.5"
    );
    assert_eq!(
        reached.raise_advice(),
        "raise the cap: give --max-cost USD a value above the $2.5 this plan has spent (the \
         cap was $2, budget.max_cost_usd)"
    );
}

#[test]
fn check_describes_the_caps() {
    assert_eq!(BudgetCaps::default().describe(), "no caps");
    let caps = BudgetCaps::effective(
        Some(100000),
        None,
        &BudgetConfig {
            max_tokens: None,
            max_cost_usd: Some(5.0),
        },
    );
    assert_eq!(
        caps.describe(),
        "at most 100000 tokens, input + output (--max-tokens) and $5 \
         (budget.max_cost_usd) for the whole plan"
    );
    assert_eq!(
        caps.spent_of(spent(450, 0.25)).as_deref(),
        Some(
            "450 of 100000 tokens (input + output) spent (--max-tokens); $0.25 of $5 spent (budget.max_cost_usd)"
        )
    );
    assert_eq!(BudgetCaps::default().spent_of(spent(1, 1.0)), None);
}

/// The plan's recorded attempts: a partial usage counts its lower bound, an unknown or absent
/// one nothing.
#[test]
fn recorded_usage_adds_up_what_is_known() {
    let usage = |input: u64, cost: f64, completeness: Completeness| UsageSummary {
        counts: crate::domain::token_usage::TokenCounts {
            input_tokens: Some(input),
            output_tokens: Some(1),
            cost_usd: Some(cost),
            ..Default::default()
        },
        models: Default::default(),
        completeness,
    };
    let reported = usage(100, 0.7, Completeness::Reported);
    let partial = usage(50, 0.1, Completeness::Partial);
    let unknown = UsageSummary::unknown();
    assert_eq!(
        Spent::recorded([Some(&reported), None, Some(&partial), Some(&unknown)]),
        Spent {
            tokens: 152,
            cost_micros: 800_000
        }
    );
    assert_eq!(Spent::recorded([]), Spent::default());
}

#[test]
fn unenforceable_names_the_caps() {
    assert_eq!(unenforceable_message(&BudgetCaps::default()), None);
    assert_eq!(
        unenforceable_message(&tokens(5, CapOrigin::Config)).as_deref(),
        Some(
            "budget.max_tokens cannot be enforced for this agent: it reported no usage \
             (X_AISH_USAGE, docs/worker-protocol.md); what it spent is not counted"
        )
    );
}

#[test]
fn command_line_values_are_checked() {
    assert_eq!(parse_max_tokens("1"), Ok(1));
    assert_eq!(parse_max_tokens(" 250000 "), Ok(250_000));
    for bad in ["0", "-1", "1.5", "abc", "", "1e6", "18446744073709551616"] {
        let error = parse_max_tokens(bad).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("expected a whole number of tokens of at least 1, got '{bad}'")
        );
    }
    assert_eq!(parse_max_cost("5"), Ok(5.0));
    assert_eq!(parse_max_cost("$0.25"), Ok(0.25));
    for bad in [
        "0", "-1", "nan", "NaN", "inf", "-inf", "infinity", "", "$", "five",
    ] {
        assert!(parse_max_cost(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_config_object_is_strict() {
    let read = |value: Value| {
        crate::domain::config::parse_config(json!({ "budget": value }).to_string().as_bytes())
            .map(|config| config.budget)
    };
    assert_eq!(read(json!(null)), Ok(BudgetConfig::default()));
    assert_eq!(
        crate::domain::config::parse_config(b"{}").map(|config| config.budget),
        Ok(BudgetConfig::default())
    );
    assert_eq!(
        read(json!({"max_tokens": 5000000000u64, "max_cost_usd": 0.5})),
        Ok(BudgetConfig {
            max_tokens: Some(5_000_000_000),
            max_cost_usd: Some(0.5)
        })
    );
    assert_eq!(
        read(json!({"max_tokens": null, "max_cost_usd": null})),
        Ok(BudgetConfig::default())
    );
    let error = |value: Value| read(value).unwrap_err().to_string();
    assert_eq!(
        error(json!({"max_token": 5})),
        "unknown key 'budget.max_token'; known keys: max_tokens, max_cost_usd"
    );
    assert_eq!(
        error(json!({"max_tokens": 0})),
        "expected budget.max_tokens to be at least 1"
    );
    assert_eq!(
        error(json!({"max_tokens": -3})),
        "expected budget.max_tokens to be at least 1"
    );
    assert_eq!(
        error(json!({"max_tokens": 2.5})),
        "expected budget.max_tokens to be an integer"
    );
    assert_eq!(
        error(json!({"max_cost_usd": 0})),
        "expected budget.max_cost_usd to be a finite number greater than 0"
    );
    assert_eq!(
        error(json!({"max_cost_usd": "5"})),
        "expected budget.max_cost_usd to be a number"
    );
    assert_eq!(error(json!([1])), "expected budget to be an object or null");
}

#[test]
fn costs_adding_up_to_the_cap_reach_it() {
    let caps = BudgetCaps::effective(None, Some(1.0), &BudgetConfig::default());
    let spent = [0.7, 0.1, 0.1]
        .into_iter()
        .fold(Spent::default(), |spent, cost| {
            spent.plus(&TokenCounts {
                cost_usd: Some(cost),
                ..TokenCounts::default()
            })
        });
    assert_eq!(caps.reached(spent), None);
    let spent = spent.plus(&TokenCounts {
        cost_usd: Some(0.1),
        ..TokenCounts::default()
    });
    let reached = caps
        .reached(spent)
        .expect("0.7 + 0.1 + 0.1 + 0.1 reaches 1");
    assert_eq!(
        reached.kind,
        CapKind::Cost {
            limit: 1.0,
            spent: 1.0
        }
    );
}

/// The run's warning names the attempt that reported nothing, and one that did report.
#[test]
fn the_unenforceable_warning_names_the_attempt() {
    assert_eq!(
        unenforceable_warning(&BudgetCaps::default(), "a-2", "phase-2", None),
        None
    );
    assert_eq!(
        unenforceable_warning(
            &tokens(5, CapOrigin::CommandLine),
            "a-2",
            "phase-2",
            Some("a-1")
        )
        .as_deref(),
        Some(
            "--max-tokens cannot be enforced: the agent of attempt a-2 (phase-2) reported no \
             usage (X_AISH_USAGE, docs/worker-protocol.md), though attempt a-1 of this plan had \
             reported usage; what it spent is not counted"
        )
    );
    assert_eq!(
        unenforceable_warning(&tokens(5, CapOrigin::Config), "a-1", "phase-1", None).as_deref(),
        Some(
            "budget.max_tokens cannot be enforced: the agent of attempt a-1 (phase-1) reported \
             no usage (X_AISH_USAGE, docs/worker-protocol.md); what it spent is not counted"
        )
    );
}
