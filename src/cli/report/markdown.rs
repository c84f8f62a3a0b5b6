//! `report --format markdown`, for a pull request or an issue: a table of phases, a mermaid
//! `gantt` timeline GitHub renders, and one section per phase.
//!
//! Agent text never reaches Markdown syntax: summaries, questions and reasons go into fenced
//! code blocks whose fence is longer than any backtick run in the text, and every other string
//! that is not the runner's own (titles, paths, check commands) is escaped inline. The timeline
//! holds only the runner's own words (phase ids, statuses, times), so a summary cannot carry a
//! mermaid directive.

use std::fmt::Write;

use super::{
    Tone, changes_line, excerpt, file_lines, phase_usage, status_name, usage_line, wait_kind,
};
use crate::domain::changes::Changes;
use crate::domain::decision::signal_name;
use crate::domain::plan_report::{AttemptReport, PhaseReport, PlanReport};
use crate::units::duration;

pub(super) fn render(report: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Plan report: {}\n", inline(&report.plan));
    let totals = &report.totals;
    let _ = writeln!(
        out,
        "{} of {} phases done · {} attempts · agents ran {} · waited {} · {} · checks {} passed, {} failed{}\n",
        totals.phases_done,
        totals.phases,
        totals.attempts,
        duration(totals.agent_ms),
        duration(totals.waiting_ms),
        usage_line(&totals.usage),
        totals.checks_passed,
        totals.checks_failed,
        if report.run_in_progress {
            " · **a run is in progress**"
        } else {
            ""
        }
    );
    if let Some(next) = &report.next {
        let _ = writeln!(out, "Next:\n\n{}", fenced("sh", next));
    }
    out.push_str("| Phase | Title | Standing | Attempts | Usage |\n|---|---|---|---|---|\n");
    for phase in &report.phases {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            phase.id,
            inline(&phase.title),
            super::standing_words(phase),
            phase.attempts.len(),
            usage_line(&phase_usage(phase))
        );
    }
    out.push('\n');
    gantt(&mut out, report);
    for phase in &report.phases {
        phase_section(&mut out, phase);
    }
    out
}

/// The timeline: a section per phase, a task per attempt and per wait. Only runner-made text.
fn gantt(out: &mut String, report: &PlanReport) {
    let attempts = report
        .phases
        .iter()
        .flat_map(|phase| &phase.attempts)
        .filter(|attempt| attempt.duration_ms.is_some());
    if attempts.count() == 0 {
        return;
    }
    out.push_str("```mermaid\ngantt\n    dateFormat YYYY-MM-DDTHH:mm:ss\n    axisFormat %H:%M\n");
    for phase in &report.phases {
        let _ = writeln!(out, "    section {}", phase.id);
        for (number, attempt) in phase.attempts.iter().enumerate() {
            for wait in &attempt.waits {
                let _ = writeln!(
                    out,
                    "    {} :done, {}, {}s",
                    if wait.rate_limited {
                        "rate-limit wait"
                    } else {
                        "retry delay"
                    },
                    mermaid_time(&wait.from),
                    wait.seconds.max(1)
                );
            }
            let Some(ms) = attempt.duration_ms else {
                continue;
            };
            let status = status_name(attempt.status, "running");
            let tag = match Tone::of(attempt.status) {
                Tone::Complete => "",
                Tone::Person | Tone::Running => "active, ",
                Tone::Failed => "crit, ",
            };
            let _ = writeln!(
                out,
                "    attempt {} {status} :{tag}{}, {}s",
                number + 1,
                mermaid_time(&attempt.started_at),
                (ms / 1000).max(1)
            );
        }
    }
    out.push_str("```\n\n");
}

/// `2026-12-04T21:00:03.123Z` → `2026-12-04T21:00:03` (the diagram's `dateFormat`).
fn mermaid_time(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || matches!(c, '-' | ':' | 'T'))
        .collect()
}

fn phase_section(out: &mut String, phase: &PhaseReport) {
    let _ = writeln!(
        out,
        "## {}: {} — {}\n",
        phase.id,
        inline(&phase.title),
        super::standing_words(phase)
    );
    if let Some(stop) = &phase.stop {
        let label = if stop.status.is_answerable() {
            "Question"
        } else {
            "Reason"
        };
        let _ = writeln!(out, "{label}:\n\n{}", fenced("text", &excerpt(&stop.text)));
    }
    for (number, attempt) in phase.attempts.iter().enumerate() {
        attempt_section(out, number + 1, attempt);
    }
}

fn attempt_section(out: &mut String, number: usize, attempt: &AttemptReport) {
    let status = status_name(attempt.status, "running or unresolved");
    let _ = writeln!(
        out,
        "### Attempt {number}: {status}\n\n- started {}{}",
        attempt.started_at,
        attempt
            .duration_ms
            .map(|ms| format!(", took {}", duration(ms)))
            .unwrap_or_default()
    );
    match (attempt.exit_code, attempt.signal) {
        (Some(code), _) => {
            let _ = writeln!(out, "- exit code {code}");
        }
        (None, Some(signal)) => {
            let _ = writeln!(out, "- ended by {}", signal_name(signal));
        }
        (None, None) => {}
    }
    for wait in &attempt.waits {
        let _ = writeln!(
            out,
            "- waited {} before it ({}: {})",
            duration(wait.seconds * 1000),
            wait_kind(wait),
            inline(&wait.reason)
        );
    }
    let _ = writeln!(out, "- usage: {}", usage_line(&attempt.usage));
    for check in &attempt.checks {
        let _ = writeln!(
            out,
            "- verify {} {}: {}",
            check.index,
            if check.passed { "passed" } else { "**failed**" },
            inline(&check.command_first_line)
        );
    }
    match &attempt.changes {
        Some(Changes::Recorded(summary)) => {
            let _ = writeln!(out, "- changed: {}", changes_line(summary));
            for line in file_lines(summary, inline) {
                let _ = writeln!(out, "  - {line}");
            }
        }
        Some(Changes::Unrecorded { detail, .. }) => {
            let _ = writeln!(out, "- changes not recorded: {}", inline(detail));
        }
        None => {}
    }
    if attempt.completed_without_changes {
        out.push_str("- **reported phase-complete but changed nothing**\n");
    }
    if attempt.idle_extensions > 0 {
        let _ = writeln!(
            out,
            "- the agent extended its idle deadline {} times",
            attempt.idle_extensions
        );
    }
    let _ = writeln!(out, "- transcript: {}", inline(&attempt.transcript_path));
    if let Some(summary) = &attempt.summary {
        let _ = writeln!(
            out,
            "\nThe agent said:\n\n{}",
            fenced("text", &excerpt(summary))
        );
    } else {
        out.push('\n');
    }
}

/// `text` as a fenced code block no line of it can close (nothing inside is Markdown).
fn fenced(info: &str, text: &str) -> String {
    let text = super::without_controls(text);
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run.max(2) + 1);
    format!("{fence}{info}\n{}\n{fence}\n", text.trim_end_matches('\n'))
}

/// `text` on one line with every character Markdown or HTML would read escaped.
pub(super) fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in super::without_controls(text).chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '|' => out.push_str("\\|"),
            c if "\\`*_{}[]()#+-.!~:".contains(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}
