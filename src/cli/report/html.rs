//! `report --format html`: one self-contained page — no script, no network request (a
//! Content-Security-Policy forbids both) — with an inline SVG timeline (a lane per phase, a bar
//! per attempt coloured by status, waits hatched, Verify checks as ticks) and a per-phase
//! tokens and cost chart. `maud` escapes every interpolated string, agent text included.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use strum::VariantArray;

use super::{Tone, changes_line, excerpt, phase_usage, status_name, usage_line, wait_kind};
use crate::domain::changes::Changes;
use crate::domain::decision::signal_name;
use crate::domain::plan_report::{AttemptReport, PhaseReport, PlanReport};
use crate::domain::token_usage::summary::UsageSummary;
use crate::units::duration;

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                   script-src 'none'; base-uri 'none'; form-action 'none'";

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #1b1f24; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin-top: 1em; } td, th { border: 1px solid #d0d7de; padding: .25em .6em; text-align: left; }
pre { background: #f6f8fa; padding: .6em; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 24em; overflow: auto; }
.complete { color: #1a7f37; } .person { color: #9a6700; } .failed { color: #cf222e; } .running { color: #0969da; }
.warning { color: #9a6700; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; }
";

pub(super) fn render(report: &PlanReport) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                meta name="referrer" content="no-referrer";
                title { "Plan report: " (report.plan) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "Plan report: " code { (report.plan) } }
                p id="summary" {
                    (summary_line(report))
                    @if report.run_in_progress { " · " strong { "a run is in progress" } }
                }
                @if let Some(next) = &report.next {
                    p { "Next: " code id="next" { (next) } }
                }
                (timeline(report))
                (usage_chart(report))
                table id="phases" {
                    tr { th { "Phase" } th { "Title" } th { "Standing" } th { "Attempts" } th { "Usage" } }
                    @for phase in &report.phases {
                        tr data-phase=(phase.id) {
                            td { (phase.id) }
                            td { (phase.title) }
                            td class=(standing_class(phase)) { (super::standing_words(phase)) }
                            td { (phase.attempts.len()) }
                            td { (usage_line(&phase_usage(phase))) }
                        }
                    }
                }
                @for phase in &report.phases { (phase_section(phase)) }
                p { small { "generated " (report.generated_at) " from " code { (report.state_path) } } }
            }
        }
    };
    // maud escapes markup; control characters (an escape sequence, a NUL, a bidirectional
    // override) in agent text are replaced here, once for the whole page.
    super::without_controls(&page.into_string())
}

fn summary_line(report: &PlanReport) -> String {
    let totals = &report.totals;
    format!(
        "{} of {} phases done · {} attempts · agents ran {} · waited {} · {} (an estimate) · checks {} passed, {} failed",
        totals.phases_done,
        totals.phases,
        totals.attempts,
        duration(totals.agent_ms),
        duration(totals.waiting_ms),
        usage_line(&totals.usage),
        totals.checks_passed,
        totals.checks_failed
    )
}

fn phase_section(phase: &PhaseReport) -> Markup {
    html! {
        section class="phase" id=(phase.id) data-standing=(super::standing_words(phase)) {
            h2 { (phase.id) ": " (phase.title) " — " span class=(standing_class(phase)) { (super::standing_words(phase)) } }
            @if let Some(stop) = &phase.stop {
                p { @if stop.status.is_answerable() { "Question:" } @else { "Reason:" } }
                pre class="stop" { (excerpt(&stop.text)) }
            }
            @for (number, attempt) in phase.attempts.iter().enumerate() {
                (attempt_section(number + 1, attempt))
            }
        }
    }
}

fn attempt_section(number: usize, attempt: &AttemptReport) -> Markup {
    let tone = Tone::of(attempt.status);
    html! {
        article class="attempt" data-attempt=(attempt.attempt_id) data-status=(status_name(attempt.status, "running")) {
            h3 class=(tone.class()) {
                "Attempt " (number) ": " (status_name(attempt.status, "running or unresolved"))
            }
            ul {
                li { "started " (attempt.started_at)
                    @if let Some(ms) = attempt.duration_ms { ", took " (duration(ms)) } }
                @match (attempt.exit_code, attempt.signal) {
                    (Some(code), _) => li { "exit code " (code) },
                    (None, Some(signal)) => li { "ended by " (signal_name(signal)) },
                    (None, None) => {},
                }
                @for wait in &attempt.waits {
                    li class="wait" { "waited " (duration(wait.seconds * 1000)) " before it ("
                        (wait_kind(wait)) ": " (wait.reason) ")" }
                }
                li { "usage: " (usage_line(&attempt.usage)) }
                @for check in &attempt.checks {
                    li class=(if check.passed { "check complete" } else { "check failed" }) {
                        "verify " (check.index) " " @if check.passed { "passed" } @else { "failed" }
                        ": " code { (check.command_first_line) }
                    }
                }
                @match &attempt.changes {
                    Some(Changes::Recorded(summary)) => li class="changes" {
                        "changed: " (changes_line(summary))
                        ul {
                            @for file in &summary.files {
                                li { (file.change.letter()) " "
                                    @if let Some(from) = &file.from { code { (from) } " → " }
                                    code { (file.path) } }
                            }
                            @if summary.files_not_listed > 0 { li { "… and " (summary.files_not_listed) " more" } }
                        }
                    },
                    Some(Changes::Unrecorded { detail, .. }) => li { "changes not recorded: " (detail) },
                    None => {},
                }
                @if attempt.completed_without_changes {
                    li class="warning" { "reported phase-complete but changed nothing" }
                }
                @if attempt.idle_extensions > 0 {
                    li { "the agent extended its idle deadline " (attempt.idle_extensions) " times" }
                }
                li { "transcript: " code { (attempt.transcript_path) } }
            }
            @if let Some(summary) = &attempt.summary {
                p { "The agent said:" }
                pre class="summary" { (excerpt(summary)) }
            }
        }
    }
}

/// Geometry of the timeline.
const LABEL_WIDTH: f64 = 90.0;
const PLOT_WIDTH: f64 = 860.0;
const LANE_HEIGHT: f64 = 26.0;

/// A lane per phase, a bar per attempt (its status' colour), a hatched bar per wait, a tick per
/// Verify check at the end of its attempt. Times are scaled from the first start to the last end.
fn timeline(report: &PlanReport) -> Markup {
    let spans: Vec<(i64, i64)> = report
        .phases
        .iter()
        .flat_map(|phase| &phase.attempts)
        .filter_map(attempt_span)
        .chain(
            report
                .phases
                .iter()
                .flat_map(|phase| &phase.attempts)
                .flat_map(|attempt| &attempt.waits)
                .filter_map(|wait| Some((millis(&wait.from)?, millis(&wait.until)?))),
        )
        .collect();
    let (Some(start), Some(end)) = (
        spans.iter().map(|span| span.0).min(),
        spans.iter().map(|span| span.1).max(),
    ) else {
        return html! {};
    };
    let scale = PLOT_WIDTH / ((end - start).max(1) as f64);
    let x = |at: i64| LABEL_WIDTH + (at - start) as f64 * scale;
    let height = LANE_HEIGHT * report.phases.len() as f64 + 20.0;
    html! {
        h2 { "Timeline" }
        svg id="timeline" xmlns="http://www.w3.org/2000/svg" role="img"
            width=(LABEL_WIDTH + PLOT_WIDTH + 10.0) height=(height)
            viewBox=(format!("0 0 {} {height}", LABEL_WIDTH + PLOT_WIDTH + 10.0)) {
            defs {
                pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)" {
                    rect width="3" height="6" fill="#afb8c1" {}
                }
            }
            @for (lane, phase) in report.phases.iter().enumerate() {
                @let y = lane as f64 * LANE_HEIGHT;
                text x="2" y=(y + 17.0) { (phase.id) }
                line x1=(LABEL_WIDTH) x2=(LABEL_WIDTH + PLOT_WIDTH) y1=(y + LANE_HEIGHT) y2=(y + LANE_HEIGHT) stroke="#eaeef2" {}
                @for attempt in &phase.attempts {
                    @for wait in &attempt.waits {
                        @if let (Some(from), Some(until)) = (millis(&wait.from), millis(&wait.until)) {
                            rect class="wait" x=(x(from)) y=(y + 6.0) width=((x(until) - x(from)).max(1.0)) height="14" fill="url(#hatch)" {
                                title { "waited " (duration(wait.seconds * 1000)) }
                            }
                        }
                    }
                    @if let Some((from, until)) = attempt_span(attempt) {
                        rect class="bar" data-status=(status_name(attempt.status, "running"))
                            x=(x(from)) y=(y + 4.0) width=((x(until) - x(from)).max(2.0)) height="18"
                            fill=(Tone::of(attempt.status).colour()) {
                            title { (status_name(attempt.status, "running")) }
                        }
                        @for (index, check) in attempt.checks.iter().enumerate() {
                            rect class="check" x=(x(until) - 3.0 - 4.0 * index as f64) y=(y + 1.0) width="2" height="24"
                                fill=(if check.passed { "#1a7f37" } else { "#cf222e" }) {}
                        }
                    }
                }
            }
            text x=(LABEL_WIDTH) y=(height - 4.0) { (short_time(start)) }
            text x=(LABEL_WIDTH + PLOT_WIDTH) y=(height - 4.0) text-anchor="end" { (short_time(end)) }
        }
        p class="legend" {
            @for tone in Tone::VARIANTS {
                span style=(format!("display:inline-block;width:1em;height:.8em;background:{}", tone.colour())) {}
                " " (tone.legend()) " · "
            }
            "hatched: a wait · ticks: Verify checks (green passed, red failed)"
        }
    }
}

/// Tokens (input + output) per phase as bars, with the cost beside them.
fn usage_chart(report: &PlanReport) -> Markup {
    let rows: Vec<(&PhaseReport, UsageSummary)> = report
        .phases
        .iter()
        .map(|phase| (phase, phase_usage(phase)))
        .collect();
    let tokens = |usage: &UsageSummary| {
        usage.counts.input_tokens.unwrap_or(0) + usage.counts.output_tokens.unwrap_or(0)
    };
    let most = rows
        .iter()
        .map(|(_, usage)| tokens(usage))
        .max()
        .unwrap_or(0);
    if most == 0 {
        return html! {};
    }
    let height = LANE_HEIGHT * rows.len() as f64;
    html! {
        h2 { "Tokens and cost per phase" }
        svg id="usage" xmlns="http://www.w3.org/2000/svg" role="img"
            width=(LABEL_WIDTH + PLOT_WIDTH + 10.0) height=(height)
            viewBox=(format!("0 0 {} {height}", LABEL_WIDTH + PLOT_WIDTH + 10.0)) {
            @for (lane, (phase, usage)) in rows.iter().enumerate() {
                @let y = lane as f64 * LANE_HEIGHT;
                @let width = tokens(usage) as f64 / most as f64 * (PLOT_WIDTH - 320.0);
                text x="2" y=(y + 17.0) { (phase.id) }
                rect x=(LABEL_WIDTH) y=(y + 4.0) width=(width.max(1.0)) height="18" fill="#54aeff" {}
                text x=(LABEL_WIDTH + width + 6.0) y=(y + 17.0) { (usage_line(usage)) }
            }
        }
    }
}

/// An attempt's start and end, in milliseconds since the epoch.
fn attempt_span(attempt: &AttemptReport) -> Option<(i64, i64)> {
    let start = millis(&attempt.started_at)?;
    let end = match &attempt.finished_at {
        Some(finished) => millis(finished)?,
        None => start + attempt.duration_ms.unwrap_or(0) as i64,
    };
    Some((start, end.max(start)))
}

fn millis(rfc3339: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|at| at.timestamp_millis())
}

fn short_time(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis).map_or_else(String::new, |at| {
        at.format("%Y-%m-%d %H:%M UTC").to_string()
    })
}

fn standing_class(phase: &PhaseReport) -> &'static str {
    match phase.attempts.last() {
        Some(attempt) => Tone::of(attempt.status).class(),
        None => "",
    }
}
