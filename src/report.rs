//! What the handler prints: result lines, failure details with the transcript tail, and the
//! refusal explanations with their recovery instructions (docs/worker-protocol.md; docs/cli.md). Built as
//! values first and printed in one place, so stdout and stderr content is easy to test and
//! never interleaves mid-report.

use std::io::Write;
use std::path::Path;

use crate::actors::attempt_supervisor::RecordFailure;
use crate::actors::run_supervisor::{RunEnd, RunResult};
use crate::cli::Ledger;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::config::format_seconds;
use crate::domain::decision::signal_name;
use crate::domain::display::{printable, printable_json};
use crate::domain::events::RunEvent;
use crate::domain::exit_code::ExitCode;
use crate::domain::retry::next_step::{RetryReason, StepKind};
use crate::domain::selection::Refusal;
use crate::domain::state::{ActiveAttempt, ActiveStatus, AttemptStatus, LastRun, Stop};
use crate::invocation::InputError;
use crate::platform::file_tail;
use crate::units;

/// How many transcript lines a failure report shows.
pub const TAIL_LINES: usize = 40;

/// Lines for stdout and stderr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

impl Output {
    pub fn stdout(line: impl Into<String>) -> Self {
        Self {
            stdout: vec![line.into()],
            stderr: Vec::new(),
        }
    }

    /// `error: <message>` on stderr: the form of every input error.
    pub fn error(message: impl AsRef<str>) -> Self {
        Self {
            stdout: Vec::new(),
            stderr: vec![format!("error: {}", message.as_ref())],
        }
    }

    pub fn err_line(&mut self, line: impl Into<String>) -> &mut Self {
        self.stderr.push(line.into());
        self
    }

    /// Writes stdout first, then stderr, each flushed, every line made printable
    /// ([`printable`]: no control character, no live result tag). A stream with nothing to
    /// print is not touched at all: it may be a console that stopped reading. Write errors are
    /// ignored: there is nowhere left to report them.
    pub fn print(&self) {
        if !self.stdout.is_empty() {
            let mut out = std::io::stdout().lock();
            for line in &self.stdout {
                let _ = writeln!(out, "{}", printable(line));
            }
            let _ = out.flush();
        }
        if !self.stderr.is_empty() {
            let mut err = std::io::stderr().lock();
            for line in &self.stderr {
                let _ = writeln!(err, "{}", printable(line));
            }
            let _ = err.flush();
        }
    }

    /// A JSON document on stdout, with the same characters written as JSON escapes.
    pub fn print_json(json: &str) {
        Self::stdout(printable_json(json)).print_raw();
    }

    /// Writes the lines as they are (already printable).
    fn print_raw(&self) {
        let mut out = std::io::stdout().lock();
        for line in &self.stdout {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}

/// What `run` prints when it ends.
pub fn run_end(end: &RunEnd) -> Output {
    match end {
        RunEnd::AllComplete => Output::stdout("runner-complete: all phases complete"),
        RunEnd::PhaseLimitReached { last_completed } => {
            Output::stdout(format!("phase-complete: {last_completed}"))
        }
        RunEnd::PhaseStopped {
            decision,
            outcome_path,
            transcript_path,
            signal_after_decision,
            retry_scheduled,
        } => {
            let mut output = match decision.status {
                AttemptStatus::Blocked | AttemptStatus::NeedsClarification => {
                    Output::stdout(result_line(decision.status, &decision.summary))
                }
                status => failure(
                    status,
                    &decision.summary,
                    Some(outcome_path),
                    transcript_path,
                ),
            };
            if let Some(signal) = signal_after_decision {
                let retry = if *retry_scheduled {
                    "; the retry stays scheduled in the state, and a later run with the same retry policy resumes it"
                } else {
                    ""
                };
                output.err_line(format!(
                    "interrupted by {} after the attempt's outcome was decided; the outcome stands as recorded ({}) and nothing more was launched{retry}",
                    signal_name(*signal),
                    decision.status
                ));
            }
            output
        }
        RunEnd::NotPrepared {
            error,
            still_active,
        } => {
            let first_line = format!(
                "{}: could not prepare attempt state: {error}",
                AttemptStatus::ExecutionIoFailed
            );
            match still_active {
                // The prepared record became visible even though the write failed.
                Some(active) => unresolved(first_line, active),
                None => Output {
                    stdout: Vec::new(),
                    stderr: vec![first_line],
                },
            }
        }
        RunEnd::Unresolved {
            decision,
            failure,
            attempt,
            still_active,
        } => {
            let first_line = if ExitCode::for_status(decision.status) == ExitCode::AgentFailed {
                match failure {
                    // The failure is what decided the status: say it once.
                    RecordFailure::RunningRecord { decided: true, .. } => {
                        format!("{}: {}", decision.status, decision.summary)
                    }
                    _ => format!("{}: {}; {failure}", decision.status, decision.summary),
                }
            } else {
                // The worker had reported a result that the failed write could not record:
                // say which, so nobody takes the failure for the worker's.
                format!(
                    "{}: {failure}; the worker had reported {}",
                    AttemptStatus::ExecutionIoFailed,
                    reported_result(decision.status)
                )
            };
            match still_active {
                Some(active) => unresolved(first_line, active),
                // The commit is visible (only its durability failed): report the outcome
                // where it is.
                None => details(
                    first_line,
                    Some(&attempt.outcome_path),
                    &attempt.transcript_path,
                ),
            }
        }
        RunEnd::InterruptedBeforeLaunch {
            signal,
            plan_complete: false,
        } => Output::error(format!(
            "interrupted by {} before launching the next phase; no worker was started",
            signal_name(*signal)
        )),
        RunEnd::InterruptedBeforeLaunch {
            signal,
            plan_complete: true,
        } => Output::error(format!(
            "interrupted by {} after the last phase completed; every phase is complete and nothing was left to launch",
            signal_name(*signal)
        )),
        RunEnd::InterruptedDuringWait { signal, phase_id } => Output::error(format!(
            "interrupted by {} while waiting to run {phase_id} again; the retry stays scheduled in the state, and a later run with the same retry policy resumes it",
            signal_name(*signal)
        )),
        RunEnd::Refused {
            refusal: refused,
            plan_workspace,
            execution_workspace,
            last_run,
        } => refusal(
            refused,
            &RefusalContext {
                plan_workspace,
                execution_workspace: execution_workspace.as_ref(),
                last_run: last_run.as_deref(),
            },
        ),
        RunEnd::PlanChanged {
            path,
            expected,
            actual,
        } => {
            let mut output = plan_hash_mismatch(path, expected, actual);
            output.err_line(
                "recorded outcomes are kept; review the edit, then rerun with --accept-plan-change",
            );
            output
        }
        RunEnd::Input(error) => Output::error(error.to_string()),
        RunEnd::AcceptanceFailed(error) => {
            Output::error(format!("could not record plan acceptance: {error}"))
        }
        RunEnd::Internal {
            message,
            attempt_may_be_unresolved,
        } => {
            let mut output = Output::error(format!("internal error: {message}"));
            if *attempt_may_be_unresolved {
                output.err_line("the active attempt may be unresolved; check `status`");
            }
            output
        }
    }
}

/// How a worker reported `status`: the name of its result tag.
fn reported_result(status: AttemptStatus) -> String {
    match status {
        AttemptStatus::PhaseComplete => "phase-complete".to_owned(),
        AttemptStatus::Blocked => "phase-blocked".to_owned(),
        AttemptStatus::NeedsClarification => "phase-needs-clarification".to_owned(),
        other => other.to_string(),
    }
}

/// The progress line for a run event, if it has one (stderr, printed as it happens).
pub fn event_line(event: &RunEvent, now: DateTime<Utc>) -> Option<String> {
    if let RunEvent::WatchdogLost { detail, .. } = event {
        return Some(format!("warning: {detail}"));
    }
    let RunEvent::RetryScheduled {
        schedule,
        delay_seconds,
        of,
        template,
        reset_phrase,
        resumed,
    } = event
    else {
        return None;
    };
    let phase = &schedule.phase_id;
    let attempt = schedule.attempt;
    let resuming = if *resumed {
        "resuming the schedule: "
    } else {
        ""
    };
    let line = match schedule.reason.kind() {
        StepKind::Switch => format!(
            "{resuming}{}: {phase} (attempt {attempt} of {of}): trying fallback agent command {} now: {}",
            schedule.after,
            schedule.template_index,
            printable(template)
        ),
        StepKind::Wait => {
            let why = match reset_phrase {
                Some(phrase) => format!("{}: {}", schedule.reason.describe(), printable(phrase)),
                None => schedule.reason.describe().to_owned(),
            };
            format!(
                "{resuming}{}: {phase} (attempt {attempt} of {of}): waiting until {} ({why}); Ctrl-C stops",
                schedule.after,
                clock_time(schedule.not_before.as_datetime(), now)
            )
        }
        StepKind::Retry => {
            let capped = if schedule.reason == RetryReason::BackoffCapped {
                " (backoff capped at max_backoff_seconds)"
            } else {
                ""
            };
            format!(
                "{resuming}retrying {phase} (attempt {attempt} of {of}) after {} in {} s{capped}",
                schedule.after,
                // Tenths: the wait is measured, not configured, so it is a hair under.
                format_seconds((delay_seconds * 10.0).round() / 10.0)
            )
        }
    };
    Some(line)
}

/// One attempt as a run's ledger keeps it (from the run's events).
#[derive(Clone, Debug)]
pub struct AttemptRow {
    pub attempt_id: Option<String>,
    pub phase_id: String,
    pub title: String,
    pub status: AttemptStatus,
    pub summary: String,
    pub duration_ms: u64,
    pub output_bytes: u64,
    pub outcome_path: String,
    pub transcript_path: String,
    pub prompt_path: Option<String>,
}

/// `phase-2 (2/5) Second · attempt 1`, or `… · attempt 2 of 3` under a retry policy.
pub fn phase_banner(
    phase_id: &str,
    index: usize,
    phases: usize,
    title: &str,
    attempt: u32,
    of: u32,
) -> String {
    let of = if of > 1 {
        format!(" of {of}")
    } else {
        String::new()
    };
    format!(
        "{phase_id} ({index}/{phases}) {} · attempt {attempt}{of}",
        printable(title)
    )
}

/// `phase-2 complete in 3m12s · 1.2 MiB output`, or `phase-2 timeout in 2.0s · 12 B output`.
pub fn phase_ended(phase_id: &str, status: AttemptStatus, duration_ms: u64, bytes: u64) -> String {
    let ended = match status {
        AttemptStatus::PhaseComplete => "complete".to_owned(),
        other => other.to_string(),
    };
    format!(
        "{phase_id} {ended} in {} · {} output",
        units::duration(duration_ms),
        units::bytes(bytes)
    )
}

/// The summary after a run of several attempts: one row per attempt.
pub fn summary_table(rows: &[AttemptRow]) -> Vec<String> {
    let width = rows
        .iter()
        .map(|row| row.phase_id.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut lines = vec![format!(
        "{:<width$}  {:<20}  {:>9}  {:>10}",
        "phase", "status", "duration", "output"
    )];
    for row in rows {
        lines.push(format!(
            "{:<width$}  {:<20}  {:>9}  {:>10}",
            row.phase_id,
            row.status.as_str(),
            units::duration(row.duration_ms),
            units::bytes(row.output_bytes)
        ));
    }
    lines
}

/// The live status line: `phase-2 (2/5) 1m03s · 12.3 KiB · <last output line>`.
pub fn status_line(
    phase_id: &str,
    index: usize,
    phases: usize,
    elapsed: std::time::Duration,
    bytes: u64,
    last_line: Option<&str>,
) -> String {
    let mut line = format!(
        "{phase_id} ({index}/{phases}) {} · {}",
        units::duration(elapsed.as_millis().try_into().unwrap_or(u64::MAX)),
        units::bytes(bytes)
    );
    if let Some(last) = last_line {
        line.push_str(" · ");
        line.push_str(&printable(last.trim()));
    }
    line
}

/// `15:00:00 UTC` today (in UTC), else `2026-12-02 15:00:00 UTC`.
fn clock_time(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at.date_naive() == now.date_naive() {
        at.format("%H:%M:%S UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }
}

/// `run --json`: the one object a nested caller reads (schema: docs/run-result.schema.json).
pub fn run_json(result: &RunResult, ledger: &Ledger, elapsed: std::time::Duration) -> Value {
    let end = &result.end;
    let last = ledger.attempts.last();
    let phase = ledger
        .last_phase()
        .map(|(id, title)| json!({"id": id, "title": title}));
    let (kind, text) = match end {
        RunEnd::AllComplete => ("complete", last.map(|row| row.summary.clone())),
        RunEnd::PhaseLimitReached { .. } => ("phase-limit", last.map(|row| row.summary.clone())),
        RunEnd::PhaseStopped { decision, .. } => match decision.status {
            AttemptStatus::Blocked => ("blocked", Some(decision.summary.clone())),
            AttemptStatus::NeedsClarification => {
                ("needs-clarification", Some(decision.summary.clone()))
            }
            AttemptStatus::Interrupted => ("interrupted", None),
            _ => ("failed", None),
        },
        // The prepared record was not written: nothing was launched and nothing changed,
        // unless the failed write became visible anyway (then that attempt is unresolved).
        RunEnd::NotPrepared {
            still_active: None, ..
        } => ("not-prepared", None),
        RunEnd::NotPrepared { .. } | RunEnd::Unresolved { .. } => ("unresolved", None),
        RunEnd::InterruptedBeforeLaunch { .. } | RunEnd::InterruptedDuringWait { .. } => {
            ("interrupted", None)
        }
        // An edited plan is one situation whether it is found at the start or during the
        // run: the caller's way out is `--accept-plan-change` either way.
        RunEnd::Refused {
            refusal: Refusal::PlanHashMismatch { .. },
            ..
        } => ("plan-changed", None),
        RunEnd::Refused { .. } => ("refused", None),
        RunEnd::PlanChanged { .. } => ("plan-changed", None),
        RunEnd::Input(_) => ("invalid-input", None),
        RunEnd::AcceptanceFailed(_) | RunEnd::Internal { .. } => ("error", None),
    };
    let output = run_end(end);
    // The first line a person would read: the failure, refusal or error (none on success).
    let message = output.stderr.first().cloned();
    let error = (result.exit == ExitCode::InvalidInput || kind == "error")
        .then(|| message.clone())
        .flatten();
    let (outcome_path, transcript_path) = match end {
        RunEnd::PhaseStopped {
            outcome_path,
            transcript_path,
            ..
        } => (Some(outcome_path.clone()), Some(transcript_path.clone())),
        RunEnd::Unresolved { attempt, .. } => (None, Some(attempt.transcript_path.clone())),
        RunEnd::NotPrepared {
            still_active: Some(active),
            ..
        } => (None, Some(active.transcript_path.clone())),
        _ => (
            last.map(|row| row.outcome_path.clone()),
            last.map(|row| row.transcript_path.clone()),
        ),
    };
    // An attempt whose outcome was not committed is the invocation's last attempt too.
    let attempt_id = match end {
        RunEnd::Unresolved { attempt, .. } => Some(attempt.id.clone()),
        RunEnd::NotPrepared {
            still_active: Some(active),
            ..
        } => Some(active.id.clone()),
        _ => last.and_then(|row| row.attempt_id.clone()),
    };
    let completed: Vec<&str> = ledger
        .attempts
        .iter()
        .filter(|row| row.status == AttemptStatus::PhaseComplete)
        .map(|row| row.phase_id.as_str())
        .collect();
    json!({
        "exit_code": result.exit.code(),
        "result": kind,
        "attempt_id": attempt_id,
        "status": last.map(|row| row.status.as_str()),
        "phase": phase,
        "text": text,
        "message": message.filter(|_| result.exit != ExitCode::Success),
        "outcome_path": outcome_path,
        "transcript_path": transcript_path,
        "prompt_path": ledger.last_prompt(),
        "phases_completed": completed,
        "next_phase": result.next_phase,
        "attempts": ledger.attempts.len(),
        "duration_ms": millis(elapsed),
        "attempt_duration_ms": last.map(|row| row.duration_ms),
        "error": error,
    })
}

/// `run --json` for a run that never started (invalid input): the same object, mostly empty.
pub fn run_json_error(exit: ExitCode, message: &str, elapsed: std::time::Duration) -> Value {
    let kind = if exit == ExitCode::InvalidInput {
        "invalid-input"
    } else {
        "error"
    };
    let line = format!("error: {message}");
    json!({
        "exit_code": exit.code(),
        "result": kind,
        "attempt_id": null,
        "status": null,
        "phase": null,
        "text": null,
        "message": line,
        "outcome_path": null,
        "transcript_path": null,
        "prompt_path": null,
        "phases_completed": [],
        "next_phase": null,
        "attempts": 0,
        "duration_ms": millis(elapsed),
        "attempt_duration_ms": null,
        "error": line,
    })
}

fn millis(elapsed: std::time::Duration) -> u64 {
    elapsed.as_millis().try_into().unwrap_or(u64::MAX)
}

/// The final line of a successful or stopped run.
pub fn result_line(status: AttemptStatus, summary: &str) -> String {
    match status {
        AttemptStatus::Blocked => format!("phase-blocked: {summary}"),
        AttemptStatus::NeedsClarification => format!("phase-needs-clarification: {summary}"),
        other => format!("{other}: {summary}"),
    }
}

/// A failed attempt: `<status>: <message>`, then where to look.
pub fn failure(
    status: AttemptStatus,
    summary: &str,
    outcome_path: Option<&str>,
    transcript_path: &str,
) -> Output {
    details(
        format!("{status}: {summary}"),
        outcome_path,
        transcript_path,
    )
}

/// A first line, then the outcome and transcript paths and the transcript tail.
pub fn details(first_line: String, outcome_path: Option<&str>, transcript_path: &str) -> Output {
    let mut output = Output::default();
    output.err_line(first_line);
    if let Some(path) = outcome_path {
        output.err_line(format!("outcome: {path}"));
    }
    output.err_line(format!("transcript: {transcript_path}"));
    output.stderr.extend(transcript_tail(transcript_path));
    output
}

/// An attempt whose outcome could not be committed: it stays the active attempt.
pub fn unresolved(first_line: String, attempt: &ActiveAttempt) -> Output {
    let mut output = Output::default();
    output.err_line(first_line);
    output.err_line(format!(
        "unresolved attempt: {} ({}, attempt {})",
        attempt.phase.id,
        attempt.status.as_str(),
        attempt.id
    ));
    output.err_line(format!("transcript: {}", attempt.transcript_path));
    output.err_line(format!(
        "planned outcome (uncommitted): {}",
        attempt.outcome_path
    ));
    output
        .stderr
        .extend(transcript_tail(&attempt.transcript_path));
    output.err_line("inspect the workspace, then rerun with --retry-stopped");
    output
}

/// How much of a transcript's end is read for its tail: the report must not cost memory in
/// proportion to the output (docs/worker-protocol.md), and 40 lines of a sane transcript fit many times over.
const TAIL_BYTES: u64 = 1024 * 1024;

/// The last [`TAIL_LINES`] lines of a transcript, under a header line. Only the file's last
/// [`TAIL_BYTES`] are read; a line cut at that limit is shown from `[…]`. A transcript that
/// cannot be read is one line saying why.
pub fn transcript_tail(path: &str) -> Vec<String> {
    match file_tail::read_end(Path::new(path), TAIL_BYTES) {
        Ok((bytes, from_start)) => tail_lines(&bytes, from_start),
        Err(error) => vec![format!(
            "transcript tail unavailable: {path}: {}",
            crate::platform::locate::os_message(&error)
        )],
    }
}

/// The header and the last lines of `bytes`, the end of a file (all of it if `from_start`).
fn tail_lines(bytes: &[u8], from_start: bool) -> Vec<String> {
    let mut text = bytes;
    let mut cut = false;
    if !from_start {
        // The read began inside a line: drop that fragment, unless it is all there is.
        match memchr::memchr(b'\n', text) {
            Some(newline) => text = &text[newline + 1..],
            None => cut = true,
        }
    }
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let shown = lines.len() - start;
    let mut tail = vec![format!(
        "transcript tail (last {shown} line{}):",
        if shown == 1 { "" } else { "s" }
    )];
    tail.extend(lines[start..].iter().map(|line| (*line).to_owned()));
    if cut && let Some(first) = tail.get_mut(1) {
        first.insert_str(0, "[…]");
    }
    tail
}

/// Where to find what happened last, for refusal and status reports.
fn last_run_lines(last_run: &LastRun) -> Vec<String> {
    let mut lines = vec![
        format!("last run: {} ({})", last_run.run_id, last_run.status),
        format!("transcript: {}", last_run.transcript_path),
    ];
    if let Some(path) = &last_run.outcome_path {
        lines.push(format!("outcome: {path}"));
    }
    lines
}

/// The three-line plan hash mismatch report.
pub fn plan_hash_mismatch(path: &str, expected: &str, actual: &str) -> Output {
    let mut output = Output::default();
    output.err_line(format!("plan hash mismatch: {path}"));
    output.err_line(format!("expected: {expected}"));
    output.err_line(format!("actual:   {actual}"));
    output
}

/// Context a refusal report may show beyond the refusal itself.
pub struct RefusalContext<'a> {
    pub plan_workspace: &'a str,
    /// The execution workspace of a stopped phase, or why it is unavailable.
    pub execution_workspace: Option<&'a Result<String, InputError>>,
    pub last_run: Option<&'a LastRun>,
}

/// Explains a refused `run` and the exact way forward.
pub fn refusal(refusal: &Refusal, context: &RefusalContext<'_>) -> Output {
    match refusal {
        Refusal::Stopped(stop) => stopped(stop, context),
        Refusal::UnresolvedAttempt(attempt) => abandoned(attempt),
        Refusal::PlanHashMismatch {
            path,
            expected,
            actual,
        } => {
            let mut output = plan_hash_mismatch(path, expected, actual);
            output.err_line(
                "to run the edited plan, rerun with --accept-plan-change (completed phase ids must still exist)",
            );
            output
        }
        Refusal::PlanPathMismatch { stored, actual } => Output::error(format!(
            "{actual}: plan path mismatch; state belongs to {stored}. A renamed or relocated plan requires an explicit history decision: restore the plan at {stored}, or start fresh by moving its state directory aside (see docs/state-and-recovery.md)"
        )),
        Refusal::CompletedPhasesMissing { .. } => Output::error(refusal.to_string()),
        Refusal::RetriedPhaseMissing { phase_id, .. } => {
            let mut output = Output::error(refusal.to_string());
            output.err_line(format!(
                "restore the {phase_id} heading in the plan to retry it, then rerun with --retry-stopped --accept-plan-change"
            ));
            output
        }
    }
}

fn stopped(stop: &Stop, context: &RefusalContext<'_>) -> Output {
    let mut output = Output::error(format!(
        "phase {} is stopped: {}",
        stop.phase_id, stop.reason
    ));
    if let Some(question) = &stop.clarification_request {
        output.err_line(format!("clarification: {question}"));
    }
    if let Some(message) = &stop.message {
        output.err_line(format!("message: {message}"));
    }
    output.err_line(format!("plan workspace path: {}", context.plan_workspace));
    match context.execution_workspace {
        Some(Ok(path)) => output.err_line(format!("execution workspace path: {path}")),
        Some(Err(error)) => {
            output.err_line(format!("execution workspace path unavailable: {error}"))
        }
        None => &mut output,
    };
    if let Some(last_run) = context.last_run {
        output.stderr.extend(last_run_lines(last_run));
        output
            .stderr
            .extend(transcript_tail(&last_run.transcript_path));
    }
    output.err_line("after inspecting the workspace (and answering any clarification in the plan or repository docs), rerun with --retry-stopped");
    output
}

fn abandoned(attempt: &ActiveAttempt) -> Output {
    let mut output = Output::error(format!(
        "phase {} has an abandoned {} attempt {}; inspect partial changes and stop any surviving worker before retrying",
        attempt.phase.id,
        attempt.status.as_str(),
        attempt.id
    ));
    output.stderr.extend(attempt_lines(attempt));
    output.err_line("retry requires: --retry-stopped");
    output
}

/// Paths and identity of an active attempt.
fn attempt_lines(attempt: &ActiveAttempt) -> Vec<String> {
    let mut lines = vec![
        format!("execution workspace path: {}", attempt.execution_workspace),
        format!("prompt: {}", attempt.prompt_path),
        format!("transcript: {}", attempt.transcript_path),
        format!("planned outcome (uncommitted): {}", attempt.outcome_path),
    ];
    lines.push(match (&attempt.process, attempt.status) {
        (Some(process), _) => format!(
            "recorded worker pid: {} (process group {})",
            process.pid, process.process_group_id
        ),
        (None, ActiveStatus::Prepared) => {
            "worker process identity: unknown (prepared, launch not recorded)".to_owned()
        }
        (None, ActiveStatus::Running) => "worker process identity: unknown".to_owned(),
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_of_a_whole_file_is_its_last_forty_lines() {
        let text: String = (1..=50).map(|n| format!("line {n}\r\n")).collect();
        let tail = tail_lines(text.as_bytes(), true);
        assert_eq!(tail[0], "transcript tail (last 40 lines):");
        assert_eq!(tail[1], "line 11");
        assert_eq!(tail[40], "line 50");
        assert_eq!(tail.len(), 41);
    }

    #[test]
    fn tail_of_a_short_file_has_every_line() {
        let tail = tail_lines(b"only\nlast without newline", true);
        assert_eq!(
            tail,
            [
                "transcript tail (last 2 lines):",
                "only",
                "last without newline"
            ]
        );
    }

    #[test]
    fn a_partial_first_line_of_a_bounded_read_is_dropped() {
        let tail = tail_lines(b"ment of a cut line\nwhole line\n", false);
        assert_eq!(tail, ["transcript tail (last 1 line):", "whole line"]);
    }

    #[test]
    fn a_line_longer_than_the_read_is_shown_cut() {
        let tail = tail_lines(b"end of a very long line", false);
        assert_eq!(
            tail,
            [
                "transcript tail (last 1 line):",
                "[…]end of a very long line"
            ]
        );
    }

    #[test]
    fn an_unreadable_tail_is_one_line_saying_why() {
        assert_eq!(
            transcript_tail("/nonexistent/transcript.txt"),
            ["transcript tail unavailable: /nonexistent/transcript.txt: No such file or directory"]
        );
    }
}
