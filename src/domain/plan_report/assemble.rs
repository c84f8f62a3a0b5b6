//! Builds the report's phases from what was read: the plan's phases, the state, the committed
//! outcomes and the event history.

use std::collections::HashMap;

use super::history::{HistoryEvent, HistoryLine};
use super::{AttemptReport, CheckReport, PhaseReport, Standing, StopReport, WaitReport};
use crate::domain::changes::Changes;
use crate::domain::outcome::OutcomeRecord;
use crate::domain::state::{AttemptStatus, State};
use crate::domain::tally::PhaseStanding;
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::verification::VerificationRecord;

pub struct Sources<'a> {
    /// The plan's phases, `(id, title)` in order.
    pub phases: Vec<(String, String)>,
    pub state: &'a State,
    /// The committed outcomes that could be read, by attempt id.
    pub outcomes: &'a HashMap<String, OutcomeRecord>,
    pub history: &'a [HistoryLine],
    /// Only the attempts of this invocation.
    pub run_id: Option<&'a str>,
}

/// Every phase with its standing, stop and attempts (of `run_id` when given), in plan order.
pub fn phases(sources: &Sources<'_>) -> Vec<PhaseReport> {
    let history = History {
        lines: sources.history,
    };
    let state = sources.state;
    sources
        .phases
        .iter()
        .map(|(id, title)| {
            let standing = match PhaseStanding::of(state, id) {
                PhaseStanding::Done => Standing::Done,
                PhaseStanding::Pending => Standing::Pending,
                PhaseStanding::Stopped(_) => Standing::Stopped,
                PhaseStanding::Active(_) => Standing::Running,
            };
            let stop = state
                .stop
                .as_ref()
                .filter(|stop| &stop.phase_id == id)
                .map(|stop| StopReport {
                    status: stop.reason,
                    text: stop
                        .clarification_request
                        .clone()
                        .or_else(|| stop.message.clone())
                        .unwrap_or_default(),
                });
            let mut attempts = committed_attempts(sources, &history, id);
            if let Some(active) = state.active_attempt.as_ref().filter(|a| &a.phase.id == id) {
                attempts.push(AttemptReport {
                    attempt_id: active.id.clone(),
                    run_id: history.run_of(&active.id),
                    started_at: active.started_at.to_string(),
                    waits: history.waits_before(id, &active.id),
                    idle_extensions: history.idle_extensions(&active.id),
                    transcript_path: active.transcript_path.clone(),
                    // Nothing is recorded of a running attempt yet: its usage is unknown.
                    ..AttemptReport::default()
                });
            }
            if let Some(run_id) = sources.run_id {
                attempts.retain(|attempt| attempt.run_id.as_deref() == Some(run_id));
            }
            PhaseReport {
                id: id.clone(),
                title: title.clone(),
                standing,
                stop,
                attempts,
            }
        })
        .collect()
}

/// The committed attempts of `phase_id` in commit order (abandoned ones where they were
/// resolved are not outcomes and are not shown).
fn committed_attempts(
    sources: &Sources<'_>,
    history: &History<'_>,
    phase_id: &str,
) -> Vec<AttemptReport> {
    sources
        .state
        .committed_outcomes
        .iter()
        .filter(|entry| entry.phase_id == phase_id)
        .map(|entry| {
            let outcome = sources.outcomes.get(&entry.attempt_id);
            let changes = outcome.and_then(|outcome| outcome.changes.clone());
            AttemptReport {
                attempt_id: entry.attempt_id.clone(),
                run_id: history.run_of(&entry.attempt_id),
                started_at: outcome.map_or_else(
                    || started_at_of(&entry.attempt_id),
                    |outcome| outcome.started_at.to_string(),
                ),
                finished_at: outcome.map(|outcome| outcome.finished_at.to_string()),
                duration_ms: outcome
                    .and_then(|outcome| outcome.duration_ms)
                    .or(entry.duration_ms),
                status: Some(entry.status),
                exit_code: outcome.and_then(|outcome| outcome.exit_code),
                signal: outcome.and_then(|outcome| outcome.signal),
                summary: outcome.map(|outcome| outcome.summary.clone()),
                checks: outcome.map(checks_of).unwrap_or_default(),
                usage: outcome
                    .and_then(|outcome| outcome.usage.clone())
                    .or_else(|| entry.usage.clone())
                    .unwrap_or_else(UsageSummary::unknown),
                completed_without_changes: entry.status == AttemptStatus::PhaseComplete
                    && changes.as_ref().and_then(Changes::changed_nothing) == Some(true),
                changes,
                waits: history.waits_before(phase_id, &entry.attempt_id),
                idle_extensions: history.idle_extensions(&entry.attempt_id),
                transcript_path: outcome.map_or_else(
                    || transcript_beside(&entry.path, &entry.attempt_id),
                    |outcome| outcome.artifacts.transcript_path.clone(),
                ),
                outcome_path: Some(entry.path.clone()),
            }
        })
        .collect()
}

/// The checks an outcome records: passed when they exited 0 and are not the failed one.
fn checks_of(outcome: &OutcomeRecord) -> Vec<CheckReport> {
    let Some(VerificationRecord::Checks(checks)) = &outcome.verification else {
        return Vec::new();
    };
    let failed = outcome
        .verification_failure
        .as_ref()
        .map(|failed| failed.index);
    checks
        .iter()
        .map(|check| CheckReport {
            index: check.index as u32,
            command_first_line: check.command_first_line.clone(),
            passed: check.exit_code == Some(0) && failed != Some(check.index),
            exit_code: check.exit_code,
            duration_ms: Some(check.duration_ms),
        })
        .collect()
}

/// `20261129T120102Z-phase-2-…` → `2026-11-29T12:01:02Z`.
fn started_at_of(attempt_id: &str) -> String {
    let compact = attempt_id.get(..16).unwrap_or_default();
    chrono::NaiveDateTime::parse_from_str(compact, "%Y%m%dT%H%M%SZ")
        .map(|at| {
            at.and_utc()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
        .unwrap_or_default()
}

/// The transcript path of an attempt whose outcome could not be read: beside its outcomes
/// directory, as every attempt's artifacts are.
fn transcript_beside(outcome_path: &str, attempt_id: &str) -> String {
    let dir = outcome_path
        .rsplit_once("/outcomes/")
        .map_or(outcome_path, |(dir, _)| dir);
    format!("{dir}/transcripts/{attempt_id}.txt")
}

/// The event history, indexed for the report.
struct History<'a> {
    lines: &'a [HistoryLine],
}

impl History<'_> {
    /// The invocation that prepared `attempt_id`.
    fn run_of(&self, attempt_id: &str) -> Option<String> {
        self.lines
            .iter()
            .find(|line| line.attempt_id.as_deref() == Some(attempt_id))
            .and_then(|line| line.run_id.clone())
    }

    fn idle_extensions(&self, attempt_id: &str) -> u32 {
        self.lines
            .iter()
            .filter(|line| {
                line.attempt_id.as_deref() == Some(attempt_id)
                    && matches!(line.event, HistoryEvent::IdleDeadlineExtended {})
            })
            .count() as u32
    }

    /// The waits of `phase_id` that ended with `attempt_id` being prepared: those scheduled
    /// after the phase's previous attempt was prepared.
    fn waits_before(&self, phase_id: &str, attempt_id: &str) -> Vec<WaitReport> {
        let prepared = |line: &HistoryLine| matches!(&line.event, HistoryEvent::AttemptPrepared { phase_id: id } if id == phase_id);
        let Some(this) = self
            .lines
            .iter()
            .position(|line| prepared(line) && line.attempt_id.as_deref() == Some(attempt_id))
        else {
            return Vec::new();
        };
        let since = self.lines[..this]
            .iter()
            .rposition(prepared)
            .map_or(0, |previous| previous + 1);
        self.lines[since..this]
            .iter()
            .enumerate()
            .filter_map(|(offset, line)| {
                let HistoryEvent::RetryScheduled {
                    schedule,
                    delay_seconds,
                    reset_phrase,
                } = &line.event
                else {
                    return None;
                };
                if schedule.phase_id != phase_id || *delay_seconds <= 0.0 {
                    return None;
                }
                let due = self.lines[since + offset..=this].iter().find(|later| {
                    matches!(&later.event, HistoryEvent::RetryDue { phase_id: id } if id == phase_id)
                        || prepared(later)
                });
                let until = due.map_or_else(|| schedule.not_before.clone(), |due| due.at.clone());
                Some(WaitReport {
                    // A rate limit's wait, else a retry's delay or a switch of template.
                    rate_limited: schedule.after == AttemptStatus::RateLimited,
                    seconds: seconds_between(&line.at, &until),
                    from: line.at.clone(),
                    until,
                    reason: match reset_phrase {
                        Some(phrase) => format!("after {}: {phrase}", schedule.after),
                        None => format!("after {}", schedule.after),
                    },
                })
            })
            .collect()
    }
}

fn seconds_between(from: &str, until: &str) -> u64 {
    let parse = |text: &str| chrono::DateTime::parse_from_rfc3339(text).ok();
    match (parse(from), parse(until)) {
        (Some(from), Some(until)) => (until - from).num_seconds().max(0) as u64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
