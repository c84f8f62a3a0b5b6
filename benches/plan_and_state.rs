//! Start-of-command costs that grow with the user's data (docs/benchmarks.md): parsing a 5 MB plan of
//! 200 phases, and reading, validating and writing a `state.json` holding 1,000 committed
//! outcomes — what `status`, `check` and every `run` commit pay — and the per-phase table
//! `status` tallies from that state.
//!
//! Baselines, measured in the same run: one UTF-8 check plus a newline count over the plan
//! (the least a line-based parser must do), and `serde_json`'s untyped parse of the state
//! bytes (the least a strict reader must do).

mod common;

use std::hint::black_box;
use std::time::Duration;

use ai_session_handler::domain::plan::parse_plan;
use ai_session_handler::domain::state::State;
use ai_session_handler::domain::tally::tally;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const PLAN_PHASES: usize = 200;
const PLAN_LEN: usize = 5_000_000;
const STATE_OUTCOMES: usize = 1_000;
const STATE_PHASES: usize = 200;

fn plan_parser(c: &mut Criterion) {
    let plan = common::plan(PLAN_PHASES, PLAN_LEN);
    let parsed = parse_plan(&plan).expect("generated plan parses");
    assert_eq!(parsed.phases.len(), PLAN_PHASES);

    let mut group = c.benchmark_group("plan_parser");
    group.throughput(Throughput::Bytes(plan.len() as u64));
    group.bench_function("baseline/utf8_and_lines", |b| {
        b.iter(|| {
            let text = std::str::from_utf8(black_box(&plan)).expect("utf-8");
            memchr::memchr_iter(b'\n', text.as_bytes()).count()
        })
    });
    group.bench_function("parse_plan/5MB_200_phases", |b| {
        b.iter(|| parse_plan(black_box(&plan)).expect("parses"))
    });
    group.finish();
}

fn state_json(c: &mut Criterion) {
    let (state, layout) = common::state(STATE_PHASES, STATE_OUTCOMES);
    state.validate(&layout).expect("generated state is valid");
    let bytes = state.to_json().into_bytes();
    assert_eq!(
        State::from_json(&bytes, &layout).expect("round trip"),
        state
    );

    let mut group = c.benchmark_group("state_json");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("baseline/serde_json_value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).expect("json"))
    });
    group.bench_function("read_and_validate/1000_outcomes", |b| {
        b.iter(|| State::from_json(black_box(&bytes), &layout).expect("valid"))
    });
    group.bench_function("validate_and_write/1000_outcomes", |b| {
        b.iter(|| {
            black_box(&state).validate(&layout).expect("valid");
            state.to_json()
        })
    });
    // The three parts of a state write's CPU: the copy the transition is applied to, the
    // invariants, the document.
    group.bench_function("copy/1000_outcomes", |b| {
        b.iter(|| black_box(&state).clone())
    });
    group.bench_function("validate/1000_outcomes", |b| {
        b.iter(|| black_box(&state).validate(&layout).expect("valid"))
    });
    group.bench_function("write/1000_outcomes", |b| {
        b.iter(|| black_box(&state).to_json())
    });
    // What `status` does with the state besides printing: read it, then tally the phase table
    // and the run totals against the plan's 200 phases.
    let names: Vec<(String, String)> = (1..=STATE_PHASES)
        .map(|n| (format!("phase-{n}"), format!("Step {n}")))
        .collect();
    let plan_phases: Vec<(&str, &str)> = names
        .iter()
        .map(|(id, title)| (id.as_str(), title.as_str()))
        .collect();
    let table = tally(&state, Some(&plan_phases));
    assert_eq!(table.totals.attempts, STATE_OUTCOMES as u64);
    assert_eq!(table.totals.attempts_without_figures, 0);
    group.bench_function("status_table/1000_outcomes", |b| {
        b.iter(|| {
            let read = State::from_json(black_box(&bytes), &layout).expect("valid");
            tally(&read, Some(&plan_phases))
        })
    });
    group.bench_function("tally_only/1000_outcomes", |b| {
        b.iter(|| tally(black_box(&state), Some(&plan_phases)))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = plan_parser, state_json
}
criterion_main!(benches);
