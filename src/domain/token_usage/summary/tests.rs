//! Unit and property tests of usage summaries (src/domain/token_usage/summary.rs): the last report
//! wins, partial and unknown sums, descriptions, table cells and the strict JSON read-back.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::domain::token_usage::report::parse_usage_report;

impl AttemptUsage {
    fn invalid_reports(&self) -> u64 {
        self.invalid
    }
}

/// Reads `value` as the `usage` key of a record, as outcomes and the state do.
fn read(value: &Value) -> Result<UsageSummary, StrictError> {
    #[derive(Deserialize)]
    struct Record {
        usage: UsageSummary,
    }
    let record: Record = crate::domain::strict_json::from_value(&json!({ "usage": value }))
        .map_err(|mismatch| StrictError(mismatch.to_string()))?;
    record.usage.validate("usage")?;
    Ok(record.usage)
}

fn to_json(summary: &UsageSummary) -> Value {
    serde_json::to_value(summary).unwrap()
}

fn report(json: Value) -> UsageReport {
    parse_usage_report(&json.to_string()).expect("valid report")
}

fn summary(input: u64, output: u64, completeness: Completeness) -> UsageSummary {
    UsageSummary {
        counts: TokenCounts {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..TokenCounts::default()
        },
        models: BTreeMap::new(),
        completeness,
    }
}

#[test]
fn no_report_is_unknown_with_null_numbers() {
    let usage = AttemptUsage::default();
    assert_eq!(usage.summary(), UsageSummary::unknown());
    assert_eq!(usage.live(), None);
    assert_eq!(
        to_json(&UsageSummary::unknown()),
        json!({"input_tokens": null, "cached_input_tokens": null, "output_tokens": null,
            "reasoning_tokens": null, "cost_usd": null, "models": {},
            "completeness": "unknown"})
    );
}

#[test]
fn the_last_report_wins_and_only_non_final_ones_are_partial() {
    let mut usage = AttemptUsage::default();
    usage.report(report(json!({"input_tokens": 10, "output_tokens": 1})));
    usage.report(report(json!({"input_tokens": 10, "output_tokens": 7})));
    let partial = usage.summary();
    assert_eq!(partial.completeness, Completeness::Partial);
    assert_eq!(partial.counts.output_tokens, Some(7));
    assert_eq!(usage.live().and_then(|live| live.output_tokens), Some(7));
}

#[test]
fn a_final_report_makes_the_usage_reported_and_nothing_lowers_it() {
    let mut usage = AttemptUsage::default();
    usage.report(report(json!({"input_tokens": 10})));
    assert_eq!(
        usage.report(report(
            json!({"input_tokens": 20, "cost_usd": 0.1, "final": true})
        )),
        ReportEffect::Changed
    );
    assert_eq!(
        usage.report(report(json!({"input_tokens": 5}))),
        ReportEffect::Unchanged
    );
    let summary = usage.summary();
    assert_eq!(summary.completeness, Completeness::Reported);
    assert_eq!(summary.counts.input_tokens, Some(20));
    // Later and higher counts are counted, final or not.
    assert_eq!(
        usage.report(report(json!({"input_tokens": 30, "output_tokens": 4}))),
        ReportEffect::Changed
    );
    let summary = usage.summary();
    assert_eq!(summary.counts.input_tokens, Some(30));
    assert_eq!(summary.counts.output_tokens, Some(4));
    assert_eq!(
        summary.counts.cost_usd,
        Some(0.1),
        "a count is never dropped"
    );
    assert_eq!(summary.completeness, Completeness::Reported);
}

/// A tool the agent runs can reach the socket and claim a final total of 0: the counts the
/// budget sees never go down, and the claim is noted once.
#[test]
fn a_lower_final_report_is_noted_not_believed() {
    let mut usage = AttemptUsage::default();
    usage.report(report(json!({"input_tokens": 1000, "model": "m"})));
    let ReportEffect::LowerFinal(Some(warning)) = usage.report(report(
        json!({"input_tokens": 0, "final": true, "model": "m"}),
    )) else {
        panic!("a lower final report was believed");
    };
    assert_eq!(
        warning,
        "[runner] a final usage report (0 in tokens) is lower than what the attempt had already reported (1000 in tokens); the higher counts are kept (any process of the attempt can send a report)"
    );
    assert_eq!(usage.live().and_then(|live| live.input_tokens), Some(1000));
    assert_eq!(usage.summary().models["m"].input_tokens, Some(1000));
    assert_eq!(usage.summary().completeness, Completeness::Reported);
    // The agent's later running totals still count.
    usage.report(report(json!({"input_tokens": 5000})));
    assert_eq!(usage.live().and_then(|live| live.input_tokens), Some(5000));
    assert_eq!(
        usage.report(report(json!({"final": true}))),
        ReportEffect::LowerFinal(None),
        "noted once"
    );
    assert_eq!(usage.summary().counts.input_tokens, Some(5000));
}

#[test]
fn invalid_reports_warn_once() {
    let mut usage = AttemptUsage::default();
    let error = UsageReportError("expected input_tokens to be …".to_owned());
    let warning = usage.invalid(&error).expect("first warning");
    assert_eq!(
        warning,
        "[runner] ignored an invalid usage report (X_AISH_USAGE): expected input_tokens to be …; later invalid reports are only counted"
    );
    assert_eq!(usage.invalid(&error), None);
    assert_eq!(usage.invalid_reports(), 2);
    assert_eq!(usage.summary(), UsageSummary::unknown());
}

#[test]
fn sums_propagate_partial_and_unknown() {
    use Completeness::*;
    let reported = summary(10, 1, Reported);
    let partial = summary(5, 2, Partial);
    let unknown = UsageSummary::unknown();
    assert_eq!(UsageSummary::sum([]), UsageSummary::unknown());
    assert_eq!(
        UsageSummary::sum([&unknown, &unknown]),
        UsageSummary::unknown()
    );
    assert_eq!(
        UsageSummary::sum([&reported, &reported]),
        summary(20, 2, Reported)
    );
    assert_eq!(
        UsageSummary::sum([&reported, &partial]),
        summary(15, 3, Partial)
    );
    assert_eq!(
        UsageSummary::sum([&reported, &unknown]),
        summary(10, 1, Partial)
    );
}

#[test]
fn a_count_only_some_parts_report_makes_the_sum_partial() {
    let mut with_cost = summary(10, 1, Completeness::Reported);
    with_cost.counts.cost_usd = Some(0.5);
    let without_cost = summary(10, 1, Completeness::Reported);
    let sum = UsageSummary::sum([&with_cost, &without_cost]);
    assert_eq!(sum.completeness, Completeness::Partial);
    assert_eq!(sum.counts.cost_usd, Some(0.5));
    assert_eq!(
        UsageSummary::sum([&with_cost, &with_cost]).completeness,
        Completeness::Reported
    );
}

#[test]
fn sums_merge_models_by_name() {
    let mut a = summary(10, 1, Completeness::Reported);
    a.models.insert("opus".into(), a.counts.clone());
    let mut b = summary(5, 5, Completeness::Reported);
    b.models.insert("opus".into(), b.counts.clone());
    b.models.insert("haiku".into(), TokenCounts::default());
    let sum = UsageSummary::sum([&a, &b]);
    assert_eq!(sum.models["opus"].input_tokens, Some(15));
    assert!(sum.models.contains_key("haiku"));
}

#[test]
fn descriptions_mark_partial_and_unknown() {
    assert_eq!(
        summary(10, 2, Completeness::Reported).describe(),
        "10 in, 2 out tokens"
    );
    assert_eq!(
        summary(10, 2, Completeness::Partial).describe(),
        "≥ 10 in, 2 out tokens"
    );
    assert_eq!(UsageSummary::unknown().describe(), "?");
}

#[test]
fn table_cells_and_end_lines_are_short() {
    let mut reported = summary(1500, 301, Completeness::Reported);
    assert_eq!(reported.tokens_text(), "1801");
    assert_eq!(reported.cost_text(), "–", "Codex reports no cost");
    assert_eq!(reported.brief().as_deref(), Some("1801 tokens"));
    reported.counts.cost_usd = Some(0.25);
    assert_eq!(reported.cost_text(), "$0.25");
    assert_eq!(reported.brief().as_deref(), Some("1801 tokens, $0.25"));
    let mut partial = summary(100, 10, Completeness::Partial);
    partial.counts.cost_usd = Some(0.01);
    assert_eq!(partial.tokens_text(), "≥ 110");
    assert_eq!(partial.cost_text(), "≥ $0.01");
    assert_eq!(partial.brief().as_deref(), Some("≥ 110 tokens, ≥ $0.01"));
    let unknown = UsageSummary::unknown();
    assert_eq!(
        (unknown.tokens_text(), unknown.cost_text(), unknown.brief()),
        ("?".to_owned(), "?".to_owned(), None)
    );
    let cost_only = UsageSummary {
        counts: TokenCounts {
            cost_usd: Some(1.0),
            ..TokenCounts::default()
        },
        models: BTreeMap::new(),
        completeness: Completeness::Reported,
    };
    assert_eq!(cost_only.tokens_text(), "–");
    assert_eq!(cost_only.brief().as_deref(), Some("$1"));
}

#[test]
fn json_is_read_back_strictly() {
    let mut full = summary(10, 2, Completeness::Partial);
    full.counts.cost_usd = Some(0.25);
    full.models.insert("m".into(), full.counts.clone());
    for summary in [full, UsageSummary::unknown()] {
        assert_eq!(read(&to_json(&summary)), Ok(summary));
    }
    let error = |value: Value| read(&value).unwrap_err().0;
    let mut value = to_json(&UsageSummary::unknown());
    value["extra"] = json!(1);
    assert_eq!(error(value), "unexpected key usage.extra");
    let mut value = to_json(&UsageSummary::unknown());
    value.as_object_mut().unwrap().remove("cost_usd");
    assert_eq!(
        error(value),
        "missing required key cost_usd (at usage.cost_usd)"
    );
    let mut value = to_json(&UsageSummary::unknown());
    value["completeness"] = json!("some");
    assert_eq!(
        error(value),
        "expected usage.completeness to be reported, partial or unknown"
    );
    let mut value = to_json(&UsageSummary::unknown());
    value["input_tokens"] = json!(3);
    assert!(error(value).contains("unknown but holds numbers"));
    let mut value = to_json(&summary(1, 1, Completeness::Reported));
    value["output_tokens"] = json!(-1);
    assert_eq!(
        error(value),
        "expected usage.output_tokens to be a non-negative integer or null"
    );
    assert_eq!(error(json!([])), "expected usage to be an object");
}

fn any_summary() -> impl Strategy<Value = UsageSummary> {
    let count = || proptest::option::of(0u64..1_000_000);
    (
        count(),
        count(),
        proptest::sample::select(vec![
            Completeness::Reported,
            Completeness::Partial,
            Completeness::Unknown,
        ]),
    )
        .prop_map(|(input, output, completeness)| {
            if completeness == Completeness::Unknown {
                return UsageSummary::unknown();
            }
            UsageSummary {
                counts: TokenCounts {
                    input_tokens: input,
                    output_tokens: output,
                    ..TokenCounts::default()
                },
                models: BTreeMap::new(),
                completeness,
            }
        })
}

fn dyadic_cost() -> impl Strategy<Value = f64> {
    (0u32..100_000_000).prop_map(|units| f64::from(units) / 1024.0)
}

proptest! {
    #[test]
    fn a_sum_is_reported_only_when_every_part_is(parts in proptest::collection::vec(any_summary(), 0..6)) {
        let sum = UsageSummary::sum(&parts);
        if sum.completeness == Completeness::Reported {
            prop_assert!(parts.iter().all(|part| part.completeness == Completeness::Reported));
        }
        if parts.iter().all(|part| part.completeness == Completeness::Unknown) {
            prop_assert_eq!(sum.completeness, Completeness::Unknown);
        }
        let input: u64 = parts.iter().filter_map(|part| part.counts.input_tokens).sum();
        prop_assert_eq!(sum.counts.input_tokens.unwrap_or(0), input);
        prop_assert_eq!(read(&to_json(&sum)), Ok(sum));
    }

    #[test]
    fn what_is_serialized_reads_back_with_costs_that_are_not_numbers_as_null(
        parts in proptest::collection::vec(any_summary(), 0..6),
        // Dyadic costs: their shortest decimal form parses back to the same number (the
        // reader's float parsing is not exact for every 17-digit form).
        cost in proptest::option::of(prop_oneof![dyadic_cost(), Just(f64::NAN), Just(f64::INFINITY)]),
        cached in proptest::option::of(any::<u64>()),
        models in proptest::collection::btree_map("[a-z\\-\"]{0,8}", (proptest::option::of(any::<u64>()), proptest::option::of(dyadic_cost())), 0..3),
    ) {
        let mut summary = UsageSummary::sum(&parts);
        if summary.completeness != Completeness::Unknown {
            summary.counts.cost_usd = cost;
            summary.counts.cached_input_tokens = cached;
            summary.models = models
                .into_iter()
                .map(|(name, (output, cost))| {
                    (name, TokenCounts { output_tokens: output, cost_usd: cost, ..TokenCounts::default() })
                })
                .collect();
        }
        let mut expected = summary.clone();
        expected.counts.cost_usd = expected.counts.cost_usd.filter(|cost| cost.is_finite());
        for text in [
            serde_json::to_string(&summary).expect("serializes"),
            serde_json::to_string_pretty(&summary).expect("serializes"),
        ] {
            let value: Value = serde_json::from_str(&text).expect("valid JSON");
            prop_assert_eq!(read(&value), Ok(expected.clone()));
        }
    }
}
