//! `report` for a terminal: one block per phase, one indented block per attempt, the totals and
//! the `next:` line. Agent text passes through `domain::display::printable`.

use std::fmt::Write;

use super::{excerpt, file_lines, standing_words, status_name, usage_line, wait_kind};
use crate::domain::changes::Changes;
use crate::domain::decision::signal_name;
use crate::domain::display::printable;
use crate::domain::plan_report::{AttemptReport, PhaseReport, PlanReport};
use crate::units::duration;

pub(super) fn render(report: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plan: {}", printable(&report.plan));
    let _ = writeln!(out, "state: {}", printable(&report.state_path));
    if let Some(run_id) = &report.run_id {
        let _ = writeln!(out, "run: {run_id}");
    }
    if report.run_in_progress {
        out.push_str("a run is in progress: this is where it stands now\n");
    }
    for phase in &report.phases {
        out.push('\n');
        phase_block(&mut out, phase);
    }
    out.push('\n');
    totals(&mut out, report);
    if let Some(next) = &report.next {
        let _ = writeln!(out, "next: {}", printable(next));
    }
    out
}

fn phase_block(out: &mut String, phase: &PhaseReport) {
    let _ = writeln!(
        out,
        "{} {} — {}",
        phase.id,
        printable(&phase.title),
        standing_words(phase)
    );
    if let Some(stop) = &phase.stop {
        let label = if stop.status.is_answerable() {
            "  question:"
        } else {
            "  reason:"
        };
        indented(out, label, &excerpt(&stop.text));
    }
    for (number, attempt) in phase.attempts.iter().enumerate() {
        attempt_block(out, number + 1, attempt);
    }
}

fn attempt_block(out: &mut String, number: usize, attempt: &AttemptReport) {
    for wait in &attempt.waits {
        let _ = writeln!(
            out,
            "  waited {} ({}: {}) until {}",
            duration(wait.seconds * 1000),
            wait_kind(wait),
            printable(&wait.reason),
            wait.until
        );
    }
    let status = status_name(attempt.status, "running or unresolved");
    let took = attempt.duration_ms.map(duration).unwrap_or_default();
    let exit = match (attempt.exit_code, attempt.signal) {
        (Some(code), _) => format!(", exit {code}"),
        (None, Some(signal)) => format!(", {}", signal_name(signal)),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        out,
        "  attempt {number}: {status}{exit} — started {} {took}",
        attempt.started_at
    );
    if let Some(summary) = &attempt.summary {
        indented(out, "    said:", &excerpt(summary));
    }
    for check in &attempt.checks {
        let verdict = if check.passed { "passed" } else { "failed" };
        let _ = writeln!(
            out,
            "    verify {} {verdict}: {}",
            check.index,
            printable(&check.command_first_line)
        );
    }
    let _ = writeln!(out, "    usage: {}", usage_line(&attempt.usage));
    match &attempt.changes {
        Some(Changes::Recorded(summary)) => {
            let _ = writeln!(out, "    changed: {}", super::changes_line(summary));
            for line in file_lines(summary, |text| printable(text).into_owned()) {
                let _ = writeln!(out, "      {line}");
            }
        }
        Some(Changes::Unrecorded { detail, .. }) => {
            let _ = writeln!(out, "    changes not recorded: {}", printable(detail));
        }
        None => {}
    }
    if attempt.completed_without_changes {
        out.push_str("    warning: reported phase-complete but changed nothing\n");
    }
    if attempt.idle_extensions > 0 {
        let _ = writeln!(
            out,
            "    idle deadline extended {} times by the agent",
            attempt.idle_extensions
        );
    }
    let _ = writeln!(
        out,
        "    transcript: {}",
        printable(&attempt.transcript_path)
    );
}

fn totals(out: &mut String, report: &PlanReport) {
    let totals = &report.totals;
    let _ = writeln!(
        out,
        "totals: {} of {} phases done, {} attempts, agents ran {}, waited {}",
        totals.phases_done,
        totals.phases,
        totals.attempts,
        duration(totals.agent_ms),
        duration(totals.waiting_ms)
    );
    let _ = writeln!(out, "usage: {} (an estimate)", usage_line(&totals.usage));
    let _ = writeln!(
        out,
        "checks: {} passed, {} failed",
        totals.checks_passed, totals.checks_failed
    );
    if totals.completed_without_changes > 0 {
        let _ = writeln!(
            out,
            "warning: {} attempts reported phase-complete but changed nothing",
            totals.completed_without_changes
        );
    }
}

/// `label` then `text`, each line indented under it.
fn indented(out: &mut String, label: &str, text: &str) {
    let _ = writeln!(out, "{label}");
    let pad = " ".repeat(label.len() - label.trim_start().len() + 2);
    for line in printable(text).lines() {
        let _ = writeln!(out, "{pad}{line}");
    }
}
