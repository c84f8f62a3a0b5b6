//! Every line the handler prints, built as values and printed in one place so stdout and stderr
//! never interleave mid-report (wording: docs/cli.md, "What `run` prints").

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::actors::run::{RunEnd, RunResult};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::budget::CapReached;
use crate::domain::decision::signal_name;
use crate::domain::display::{printable, printable_json};
use crate::domain::events::RunEvent;
use crate::domain::exit_code::ExitCode;
use crate::domain::lifecycle::run::{RecordFailure, RefusedRun, Uncommitted};
use crate::domain::recovery::{
    Invocation, NextAction, NextStep, after_stop, flags_after_stop, raising_cap, with_cap_raised,
};
use crate::domain::retry::next_step::{RetryReason, StepKind};
use crate::domain::seconds::format_tenths;
use crate::domain::selection::{PlanChange, RecoveryFlags, Refusal};
use crate::domain::state::{ActiveAttempt, ActiveStatus, AttemptStatus, PhaseRef, Stop};
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::verification::{FailedCheck, Verification, VerificationReport};
use crate::invocation::history::WatchdogStop;
use crate::invocation::{InputError, PlanSnapshot};
use crate::platform::locate::PlanLocation;
use crate::platform::locks::LockError;
use crate::platform::regular_file;
use crate::units;
use terminal::Stream;

pub(crate) mod terminal;

/// How many transcript lines a failure report shows.
pub(crate) const TAIL_LINES: usize = 40;

/// Lines for stdout and stderr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Output {
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

impl Output {
    pub(crate) fn stdout(lines: Vec<String>) -> Self {
        Self {
            stdout: lines,
            stderr: Vec::new(),
        }
    }

    pub(crate) fn stderr(lines: Vec<String>) -> Self {
        Self {
            stdout: Vec::new(),
            stderr: lines,
        }
    }

    /// `error: <message>` on stderr: the form of every input error.
    pub(crate) fn error(message: impl AsRef<str>) -> Self {
        Self::stderr(vec![format!("error: {}", message.as_ref())])
    }

    pub(crate) fn err_line(&mut self, line: impl Into<String>) -> &mut Self {
        self.stderr.push(line.into());
        self
    }

    /// Writes stdout, then stderr, every line made [`printable`], its `error:` or `warning:`
    /// label coloured where colour is on. Write errors are ignored: there is nowhere left to
    /// report them.
    pub(crate) fn print(&self) {
        // A stream with nothing to print is not even locked: it may be a console that stopped
        // reading.
        if !self.stdout.is_empty() {
            write_lines(std::io::stdout().lock(), &self.stdout, Stream::Stdout);
        }
        if !self.stderr.is_empty() {
            write_lines(std::io::stderr().lock(), &self.stderr, Stream::Stderr);
        }
    }

    /// A JSON document on stdout, the characters [`printable`] would change written as JSON
    /// escapes instead (so `print` leaves it as it is).
    pub(crate) fn json(json: &str) -> Self {
        Self::stdout(vec![printable_json(json).into_owned()])
    }
}

fn write_lines(mut stream: impl Write, lines: &[String], which: Stream) {
    for line in lines {
        let _ = writeln!(stream, "{}", terminal::label(&printable(line), which));
    }
    let _ = stream.flush();
}

/// The first line a person would read of how a run ended: the result line of a blocked or
/// clarification stop (on stdout), else the failure, refusal or error.
pub(crate) fn end_message(end: &RunEnd, facts: &EndFacts) -> Option<String> {
    let body = end_report(end, facts);
    body.stdout.first().or(body.stderr.first()).cloned()
}

/// The report of how a run ended, without its `next:` line ([`next_step`]'s, printed last).
pub(crate) fn end_report(end: &RunEnd, facts: &EndFacts) -> Output {
    match end {
        RunEnd::AllComplete => {
            Output::stdout(vec!["runner-complete: all phases complete".to_owned()])
        }
        RunEnd::PhaseLimitReached { last_completed } => {
            Output::stdout(vec![format!("phase-complete: {last_completed}")])
        }
        RunEnd::PhaseStopped {
            decision,
            outcome_path,
            transcript_path,
            retry_scheduled,
            failed_check,
            ..
        } => {
            // A result the worker reported is the run's result, on stdout; a failure is
            // reported on stderr, with the failed check when there is one.
            let mut output = match (decision.status.result_tag(), failed_check) {
                (Some(tag), _) => Output::stdout(vec![format!("{tag}: {}", decision.summary)]),
                (None, Some(failed)) => {
                    verification_failure(&decision.summary, failed, outcome_path, transcript_path)
                }
                // The user's own stop: what it left and where, without the tail of what was on
                // screen a moment ago.
                (None, None) if decision.status == AttemptStatus::Interrupted => {
                    Output::stderr(vec![
                        format!("{}: {}", decision.status, decision.summary),
                        format!("outcome: {outcome_path}"),
                        format!("transcript: {transcript_path}"),
                    ])
                }
                (None, None) => details(
                    format!("{}: {}", decision.status, decision.summary),
                    Some(outcome_path),
                    transcript_path,
                ),
            };
            if let Some(signal) = end.signal_after_decision() {
                output.err_line(format!(
                    "interrupted by {} after the attempt's outcome was decided; the outcome stands as recorded ({}) and nothing more was launched{}",
                    signal_name(signal),
                    decision.status,
                    retry_stays(*retry_scheduled)
                ));
            }
            output
        }
        RunEnd::Uncommitted { end, .. } => match end {
            Uncommitted::NotPrepared {
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
                    None => Output::stderr(vec![first_line]),
                }
            }
            Uncommitted::Unresolved {
                decision,
                failure,
                attempt,
                still_active,
            } => {
                let first_line = if decision.status.exit_code() == ExitCode::AgentFailed {
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
                        // How a result line names it: the worker's result tag.
                        decision
                            .status
                            .result_tag()
                            .unwrap_or(decision.status.as_str())
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
        },
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
            "interrupted by {} while waiting to run {phase_id} again{}",
            signal_name(*signal),
            retry_stays(true)
        )),
        RunEnd::BudgetReached {
            reached,
            phase_id,
            retry_scheduled,
        } => Output::stderr(vec![format!(
            "{}{}",
            reached.launch_refusal(phase_id),
            retry_stays(*retry_scheduled)
        )]),
        RunEnd::Refused(run) => match &run.refusal {
            Refusal::Stopped(stop) => stopped(stop, run),
            Refusal::UnresolvedAttempt(attempt) => {
                abandoned(attempt, &run.refusal, facts.watchdog_stop.as_ref())
            }
            Refusal::PlanHashMismatch(change) => plan_hash_mismatch(change),
            Refusal::PlanPathMismatch { stored, actual } => Output::error(format!(
                "{actual}: plan path mismatch; state belongs to {stored}. A renamed or relocated plan requires an explicit history decision: restore the plan at {stored}, or start fresh by moving its state directory aside (see docs/state-and-recovery.md)"
            )),
            Refusal::CompletedPhasesMissing { .. } | Refusal::RetriedPhaseMissing { .. } => {
                Output::error(run.refusal.to_string())
            }
        },
        RunEnd::PlanChanged(change) => {
            let mut output = plan_hash_mismatch(change);
            output.err_line("recorded outcomes are kept");
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

/// `; the retry stays scheduled …` when it does.
fn retry_stays(scheduled: bool) -> &'static str {
    if scheduled {
        "; the retry stays scheduled in the state, and a later run with the same retry policy resumes it"
    } else {
        ""
    }
}

/// What a run's end does not carry but its report and next step need, read from the plan's
/// state and event stream once the run is over.
#[derive(Clone, Debug, Default)]
pub(crate) struct EndFacts {
    /// When the scheduled retry a later run resumes is due.
    pub retry_due: Option<String>,
    /// What the watchdog of the handler that left the abandoned attempt did.
    pub watchdog_stop: Option<WatchdogStop>,
    /// The cap the plan's recorded attempts have reached, if one has.
    pub budget_reached: Option<CapReached>,
}

/// The step that continues a run that ended like `end`, if one does (docs/cli.md, "The `next:`
/// line"): nothing after a complete plan, a bad input or an interruption with nothing left.
pub(crate) fn next_step(
    end: &RunEnd,
    invocation: &Invocation,
    facts: &EndFacts,
) -> Option<NextStep> {
    let again = |flags: RecoveryFlags, action: NextAction, why: Option<String>| {
        NextStep::run(invocation, flags, action, why)
    };
    // The same command: its retry policy resumes the schedule when it is due.
    let resume = || {
        let step = again(RecoveryFlags::default(), NextAction::Continue, None);
        match &facts.retry_due {
            Some(due) => step.waiting_until(due.clone()),
            None => step,
        }
    };
    let as_given = invocation.flags;
    match end {
        RunEnd::AllComplete
        | RunEnd::InterruptedBeforeLaunch {
            plan_complete: true,
            ..
        } => None,
        RunEnd::PhaseLimitReached { .. }
        | RunEnd::InterruptedBeforeLaunch {
            plan_complete: false,
            ..
        } => Some(again(RecoveryFlags::default(), NextAction::Continue, None)),
        // Only a larger cap continues: the caps count every recorded attempt of the plan.
        RunEnd::BudgetReached { reached, .. } => Some(raising_cap(invocation, as_given, reached)),
        RunEnd::InterruptedDuringWait { .. } => Some(resume()),
        RunEnd::PhaseStopped {
            decision,
            retry_scheduled: true,
            ..
        } if decision.status != AttemptStatus::PhaseComplete => Some(resume()),
        RunEnd::PhaseStopped { decision, .. } => {
            let step = after_stop(invocation, decision.status, RecoveryFlags::default());
            // Only a larger cap continues a plan whose recorded attempts reached one.
            Some(match &facts.budget_reached {
                Some(reached) => with_cap_raised(step, invocation, Some(decision.status), reached),
                None => step,
            })
        }
        RunEnd::Uncommitted {
            end:
                Uncommitted::NotPrepared {
                    still_active: Some(_),
                    ..
                }
                | Uncommitted::Unresolved {
                    still_active: Some(_),
                    ..
                },
            ..
        } => Some(again(
            flags_after_stop(false),
            NextAction::Retry,
            Some("inspect the workspace".to_owned()),
        )),
        // The commit is visible; only its durability failed.
        RunEnd::Uncommitted {
            end: Uncommitted::Unresolved { decision, .. },
            ..
        } => Some(after_stop(
            invocation,
            decision.status,
            RecoveryFlags::default(),
        )),
        RunEnd::Uncommitted {
            end: Uncommitted::NotPrepared { .. },
            ..
        }
        | RunEnd::AcceptanceFailed(_) => Some(again(
            as_given,
            NextAction::FixAndRetry,
            Some("fix what made the state write fail".to_owned()),
        )),
        RunEnd::Refused(run) => Some(after_refusal(
            invocation,
            &run.refusal,
            run.lifted_by,
            facts,
        )),
        RunEnd::PlanChanged(_) => Some(again(
            RecoveryFlags {
                accept_plan_change: true,
                ..as_given
            },
            NextAction::AcceptPlanChange,
            Some("review the edit".to_owned()),
        )),
        RunEnd::Input(InputError::Lock(LockError::Contended { holder, .. })) => {
            // The holder may be running another plan of the workspace: no `watch` to offer.
            let holder = match holder {
                Some(pid) => format!("handler pid {pid}"),
                None => "the other invocation".to_owned(),
            };
            Some(again(
                as_given,
                NextAction::WaitForHandler,
                Some(format!("wait for {holder} to end")),
            ))
        }
        RunEnd::Input(InputError::WorkerAlive { pid, .. }) => Some(again(
            as_given,
            NextAction::FixAndRetry,
            Some(format!(
                "stop worker pid {pid} (or wait for it to exit) and inspect its partial changes"
            )),
        )),
        RunEnd::Input(_) => None,
        RunEnd::Internal { .. } => Some(NextStep::command(
            invocation,
            "status",
            NextAction::Inspect,
            None,
        )),
    }
}

/// Why admission refused a run, as `run --json`'s `refusal` names it: a caller tells "another
/// handler holds the plan, wait" from "a stopped phase needs a decision" by it, not by the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RefusalKind {
    /// Another invocation holds the plan workspace lock.
    LockHeld,
    /// The abandoned attempt's worker still runs.
    WorkerRunning,
    /// A phase is stopped (blocked, a question, a failure): it needs `--retry-stopped`.
    PhaseStopped,
    /// An attempt was left unresolved by a handler that died: it needs `--retry-stopped`.
    AttemptAbandoned,
    /// The plan was edited since it was accepted.
    PlanChanged,
    /// The plan is not at the path its state belongs to.
    PlanMoved,
    /// Phases the state depends on are gone from the plan.
    PhasesMissing,
}

impl RefusalKind {
    /// The kind of a run that ended as `end`, when it was refused.
    fn of(end: &RunEnd) -> Option<Self> {
        match end {
            RunEnd::Refused(run) => Some(match &run.refusal {
                Refusal::Stopped(_) => Self::PhaseStopped,
                Refusal::UnresolvedAttempt(_) => Self::AttemptAbandoned,
                Refusal::PlanHashMismatch(_) => Self::PlanChanged,
                Refusal::PlanPathMismatch { .. } => Self::PlanMoved,
                Refusal::CompletedPhasesMissing { .. } | Refusal::RetriedPhaseMissing { .. } => {
                    Self::PhasesMissing
                }
            }),
            RunEnd::Input(InputError::Lock(LockError::Contended { .. })) => Some(Self::LockHeld),
            RunEnd::Input(InputError::WorkerAlive { .. }) => Some(Self::WorkerRunning),
            RunEnd::AllComplete
            | RunEnd::PhaseLimitReached { .. }
            | RunEnd::PhaseStopped { .. }
            | RunEnd::Uncommitted { .. }
            | RunEnd::InterruptedBeforeLaunch { .. }
            | RunEnd::InterruptedDuringWait { .. }
            | RunEnd::BudgetReached { .. }
            | RunEnd::PlanChanged(_)
            | RunEnd::Input(_)
            | RunEnd::AcceptanceFailed(_)
            | RunEnd::Internal { .. } => None,
        }
    }
}

/// The step after admission refused the run: the flags that lift the refusal, or, when none
/// does, the change to make first.
fn after_refusal(
    invocation: &Invocation,
    refusal: &Refusal,
    lifted_by: Option<RecoveryFlags>,
    facts: &EndFacts,
) -> NextStep {
    let flags = lifted_by.unwrap_or(invocation.flags);
    let first =
        |action: NextAction, why: String| NextStep::run(invocation, flags, action, Some(why));
    match refusal {
        Refusal::Stopped(stop) => after_stop(invocation, stop.reason, flags),
        Refusal::UnresolvedAttempt(attempt) => first(
            NextAction::Retry,
            match facts
                .watchdog_stop
                .as_ref()
                .filter(|stop| stop.left_nothing())
            {
                Some(_) => "inspect its partial changes".to_owned(),
                None => format!(
                    "make sure no worker of attempt {} is still running (status shows it) and inspect its partial changes",
                    attempt.id
                ),
            },
        ),
        Refusal::PlanHashMismatch(_) => first(
            NextAction::AcceptPlanChange,
            "review the edit (every completed phase id must still exist)".to_owned(),
        ),
        Refusal::PlanPathMismatch { stored, .. } => NextStep::run(
            &Invocation {
                plan: stored.clone(),
                ..invocation.clone()
            },
            flags,
            NextAction::FixAndRetry,
            Some(format!(
                "restore the plan at {stored} (or move its state directory aside to start afresh)"
            )),
        ),
        Refusal::CompletedPhasesMissing { missing, .. } => first(
            NextAction::FixAndRetry,
            format!("restore the completed {} in the plan", headings(missing)),
        ),
        Refusal::RetriedPhaseMissing { phase_id, .. } => NextStep::run(
            invocation,
            RecoveryFlags {
                retry_stopped: true,
                accept_plan_change: true,
            },
            NextAction::FixAndRetry,
            Some(format!(
                "restore the {} in the plan",
                headings(std::slice::from_ref(phase_id))
            )),
        ),
    }
}

/// `phase-2 heading`, `phase-1 and phase-2 headings`.
fn headings(ids: &[String]) -> String {
    match ids {
        [one] => format!("{one} heading"),
        [rest @ .., last] => format!("{} and {last} headings", rest.join(", ")),
        [] => "phase headings".to_owned(),
    }
}

/// `warning: …` lines on stderr for what the plan does not mean to say (docs/plan-format.md).
pub(crate) fn plan_warnings(snapshot: &PlanSnapshot) -> Output {
    Output::stderr(prefixed("warning", &snapshot.warnings))
}

/// `warning: …`, `note: …` lines.
pub(crate) fn prefixed(label: &str, lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| format!("{label}: {line}"))
        .collect()
}

/// The line a run event prints on stderr as it happens, if it has one: a retry or a wait, or a
/// warning (a lost watchdog, a budget that cannot be enforced, a failed hook).
pub(crate) fn event_line(event: &RunEvent, now: DateTime<Utc>) -> Option<String> {
    let (schedule, delay_seconds, of, template, reset_phrase, resumed) = match event {
        RunEvent::WatchdogLost { detail, .. } => return Some(format!("warning: {detail}")),
        RunEvent::BudgetUnenforceable { message } => return Some(format!("warning: {message}")),
        RunEvent::HookFailed {
            hook,
            hook_event,
            reason,
            log_path,
            ..
        } => {
            return Some(format!(
                "warning: hook {hook} ({hook_event}) failed: {reason}; its output is in {log_path}"
            ));
        }
        RunEvent::RetryScheduled {
            schedule,
            delay_seconds,
            of,
            template,
            reset_phrase,
            resumed,
        } => (schedule, delay_seconds, of, template, reset_phrase, resumed),
        _ => return None,
    };
    let phase = &schedule.phase_id;
    let attempt = schedule.attempt;
    let resuming = if *resumed {
        "resuming the schedule: "
    } else {
        ""
    };
    Some(match schedule.reason.kind() {
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
                format_tenths(*delay_seconds)
            )
        }
    })
}

/// One attempt as a run's ledger keeps it (from the run's events).
#[derive(Clone, Debug)]
pub(crate) struct AttemptRow {
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
    pub verification: Option<Verification>,
    pub usage: UsageSummary,
}

/// Which attempt an attempt is: its number among its phase's recorded attempts (what `status`
/// counts), and under a retry policy its number `in_run` of the `of` the policy allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttemptNumber {
    pub of_phase: u32,
    pub in_run: u32,
    pub of: u32,
}

/// `phase-2 (2/5) Second · attempt 1`; under a retry policy `… · attempt 2 of 3`, or, when the
/// phase had attempts before this run, `… · attempt 4 (2 of 3 in this run)`.
pub(crate) fn phase_banner(
    phase_id: &str,
    index: usize,
    phases: usize,
    title: &str,
    number: AttemptNumber,
) -> String {
    let AttemptNumber {
        of_phase,
        in_run,
        of,
    } = number;
    let attempt = if of <= 1 {
        of_phase.to_string()
    } else if of_phase == in_run {
        format!("{in_run} of {of}")
    } else {
        format!("{of_phase} ({in_run} of {of} in this run)")
    };
    format!(
        "{phase_id} ({index}/{phases}) {} · attempt {attempt}",
        printable(title)
    )
}

/// `phase-2 complete in 3m12s · 1.2 MiB output`, or `phase-2 timeout in 2.0s · 12 B output`;
/// with the attempt's usage when it reported some (`… · 1801 tokens, $0.25`).
pub(crate) fn phase_ended(
    phase_id: &str,
    status: AttemptStatus,
    duration_ms: u64,
    bytes: u64,
    usage: Option<&UsageSummary>,
) -> String {
    let ended = if status == AttemptStatus::PhaseComplete {
        "complete"
    } else {
        status.as_str()
    };
    let mut line = format!(
        "{phase_id} {ended} in {} · {} output",
        units::duration(duration_ms),
        units::bytes(bytes)
    );
    if let Some(brief) = usage.and_then(UsageSummary::brief) {
        line.push_str(" · ");
        line.push_str(&brief);
    }
    line
}

/// The summary after a run of several attempts: one row per attempt.
pub(crate) fn summary_table(rows: &[AttemptRow]) -> Vec<String> {
    let width = rows
        .iter()
        .map(|row| row.phase_id.len())
        .fold(5, usize::max);
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

/// An attempt in progress as the live lines show it, in `run`'s progress and in `watch`.
#[derive(Clone, Debug)]
pub(crate) struct LiveAttempt {
    pub phase_id: String,
    pub index: usize,
    pub phases: usize,
    /// When it started (as observed).
    pub started: Instant,
    /// Its output so far and the last line of it.
    pub output_bytes: u64,
    pub last_line: Option<String>,
    /// The agent's latest status and when it was set.
    pub status: Option<(String, DateTime<Utc>)>,
}

impl LiveAttempt {
    pub(crate) fn new(phase_id: String, index: usize, phases: usize) -> Self {
        Self {
            phase_id,
            index,
            phases,
            started: Instant::now(),
            output_bytes: 0,
            last_line: None,
            status: None,
        }
    }

    /// The agent's latest status and how long ago it was set: `tool: Bash cargo test (12s)`.
    fn status_with_age(&self) -> Option<String> {
        self.status.as_ref().map(|(text, since)| {
            let age = (Utc::now() - *since).to_std().unwrap_or_default();
            let age = units::elapsed(whole_seconds(age));
            format!("{} ({age})", printable(text.trim()))
        })
    }

    /// The live status line: `phase-2 (2/5) 1m03s · 12.3 KiB · <last output line>`, with the
    /// agent's latest status and its age before the last line when it has one (`… · tool:
    /// Bash cargo test (12s) · <last output line>`).
    pub(crate) fn status_line(&self) -> String {
        let last_line = self.last_line.as_deref();
        let mut line = self.head();
        for part in self
            .status_with_age()
            .into_iter()
            .chain(last_line.map(|last| printable(last.trim()).into_owned()))
        {
            line.push_str(" · ");
            line.push_str(&part);
        }
        line
    }

    /// Its [`sign_of_life`] after `silent_for` without output.
    pub(crate) fn sign_of_life(&self, silent_for: Duration) -> String {
        sign_of_life(self.head(), silent_for, self.status_with_age().as_deref())
    }

    /// `phase-2 (2/5) 1m03s · 12.3 KiB`.
    fn head(&self) -> String {
        attempt_head(
            &self.phase_id,
            self.index,
            self.phases,
            self.started.elapsed(),
            self.output_bytes,
        )
    }
}

/// `phase-2 (2/5) 1m03s · 12.3 KiB`: where an attempt stands.
fn attempt_head(
    phase_id: &str,
    index: usize,
    phases: usize,
    elapsed: Duration,
    bytes: u64,
) -> String {
    format!(
        "{phase_id} ({index}/{phases}) {} · {}",
        units::elapsed(elapsed),
        units::bytes(bytes)
    )
}

/// The sign of life of a silent attempt, after its `head`: `phase-2 (2/5) 41s · 1.2 KiB · no
/// output for 38s`, or with the agent's own latest status in place of the silence (`… ·
/// <status>`).
fn sign_of_life(head: String, silent_for: Duration, latest_status: Option<&str>) -> String {
    let mut line = head;
    match latest_status {
        Some(status) => line.push_str(&format!(" · {}", printable(status.trim()))),
        None => line.push_str(&format!(
            " · no output for {}",
            units::elapsed(whole_seconds(silent_for))
        )),
    }
    line
}

/// The lines that show a silence or a status's age are redrawn once a second.
fn whole_seconds(time: Duration) -> Duration {
    Duration::from_secs(time.as_secs())
}

/// The dim line the console shows when the agent's status changes (without `--quiet`):
/// `phase-2 · tool: Bash cargo test`, or `phase-2 · (no status)` when it was cleared.
pub(crate) fn status_change(phase_id: &str, text: Option<&str>) -> String {
    match text {
        Some(text) => format!("{phase_id} · {}", printable(text.trim())),
        None => format!("{phase_id} · (no status)"),
    }
}

/// `15:00:00 UTC` today (in UTC), else `2026-12-02 15:00:00 UTC`.
fn clock_time(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at.date_naive() == now.date_naive() {
        at.format("%H:%M:%S UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }
}

/// What `run --json` reports besides the run's result: how it was invoked, and where the plan
/// and its state are.
pub(crate) struct RunJsonContext<'a> {
    pub invocation: &'a Invocation,
    pub location: &'a PlanLocation,
    pub snapshot: &'a PlanSnapshot,
    pub elapsed: Duration,
    pub facts: &'a EndFacts,
}

/// What `run --json` reads of the run's ledger (`cli::progress` keeps it from the run's
/// events): the attempts that ended, and the phase (id, title) and prompt of the attempt
/// running or last run.
pub(crate) struct LedgerView<'a> {
    pub attempts: &'a [AttemptRow],
    pub last_phase: Option<(String, String)>,
    pub last_prompt: Option<String>,
}

/// `run --json`: the one object a nested caller reads (schema: docs/run-result.schema.json).
#[derive(Debug, Default, Serialize)]
pub(crate) struct RunJson {
    exit_code: i32,
    result: &'static str,
    attempt_id: Option<String>,
    status: Option<AttemptStatus>,
    phase: Option<PhaseRef>,
    text: Option<String>,
    message: Option<String>,
    outcome_path: Option<String>,
    transcript_path: Option<String>,
    prompt_path: Option<String>,
    plan_path: Option<String>,
    state_path: Option<String>,
    phases_completed: Vec<String>,
    next_phase: Option<NextPhase>,
    next: Option<NextStep>,
    /// Why the run was refused, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<RefusalKind>,
    attempts: usize,
    duration_ms: u64,
    attempt_duration_ms: Option<u64>,
    verification: Option<VerificationReport>,
    usage: UsageJson,
    error: Option<String>,
}

/// `next_phase`: its title is `null` when the plan cannot say.
#[derive(Debug, Serialize)]
struct NextPhase {
    id: String,
    title: Option<String>,
}

/// `usage`: this invocation's total and each committed attempt's.
#[derive(Debug, Default, Serialize)]
struct UsageJson {
    total: UsageSummary,
    attempts: Vec<AttemptUsage>,
}

#[derive(Debug, Serialize)]
struct AttemptUsage {
    attempt_id: Option<String>,
    phase_id: String,
    status: AttemptStatus,
    usage: UsageSummary,
}

impl UsageJson {
    fn of(rows: &[AttemptRow]) -> Self {
        Self {
            total: UsageSummary::sum(rows.iter().map(|row| &row.usage)),
            attempts: rows
                .iter()
                .map(|row| AttemptUsage {
                    attempt_id: row.attempt_id.clone(),
                    phase_id: row.phase_id.clone(),
                    status: row.status,
                    usage: row.usage.clone(),
                })
                .collect(),
        }
    }
}

impl RunJson {
    /// The object of a run that ended as `result` tells.
    pub(crate) fn of(
        result: &RunResult,
        ledger: &LedgerView<'_>,
        context: &RunJsonContext<'_>,
    ) -> Self {
        let end = &result.end;
        let last = ledger.attempts.last();
        let (kind, text) = match end {
            RunEnd::AllComplete => ("complete", last.map(|row| row.summary.clone())),
            RunEnd::PhaseLimitReached { .. } => {
                ("phase-limit", last.map(|row| row.summary.clone()))
            }
            // The text of a result the worker reported.
            RunEnd::PhaseStopped { decision, .. } => (
                decision.status.run_result(),
                decision
                    .status
                    .result_tag()
                    .map(|_| decision.summary.clone()),
            ),
            // The prepared record was not written: nothing was launched and nothing changed,
            // unless the failed write became visible anyway (then that attempt is unresolved).
            RunEnd::Uncommitted { end, .. } if end.attempt().is_none() => ("not-prepared", None),
            RunEnd::Uncommitted { .. } => ("unresolved", None),
            RunEnd::InterruptedBeforeLaunch { .. } | RunEnd::InterruptedDuringWait { .. } => {
                ("interrupted", None)
            }
            RunEnd::BudgetReached { .. } => ("budget-reached", None),
            // An edited plan is one situation whether it is found at the start or during the
            // run: the caller's way out is `--accept-plan-change` either way.
            RunEnd::Refused(run) if matches!(run.refusal, Refusal::PlanHashMismatch(_)) => {
                ("plan-changed", None)
            }
            RunEnd::Refused(_) => ("refused", None),
            RunEnd::PlanChanged(_) => ("plan-changed", None),
            // Nothing is wrong with the input: another run holds the workspace, or the
            // abandoned attempt's worker still runs. Both refuse until that ends.
            RunEnd::Input(
                InputError::Lock(LockError::Contended { .. }) | InputError::WorkerAlive { .. },
            ) => ("refused", None),
            RunEnd::Input(_) => ("invalid-input", None),
            RunEnd::AcceptanceFailed(_) | RunEnd::Internal { .. } => ("error", None),
        };
        let facts = context.facts;
        let message = (result.exit() != ExitCode::Success)
            .then(|| end_message(end, facts))
            .flatten();
        let error = (result.exit() == ExitCode::InvalidInput || kind == "error")
            .then(|| message.clone())
            .flatten();
        // An attempt whose outcome was not committed is the invocation's last attempt too.
        let uncommitted = match end {
            RunEnd::Uncommitted { end, .. } => end.attempt(),
            _ => None,
        };
        let (outcome_path, transcript_path) = match end {
            RunEnd::PhaseStopped {
                outcome_path,
                transcript_path,
                ..
            } => (Some(outcome_path.clone()), Some(transcript_path.clone())),
            _ => match uncommitted {
                Some(attempt) => (None, Some(attempt.transcript_path.clone())),
                None => (
                    last.map(|row| row.outcome_path.clone()),
                    last.map(|row| row.transcript_path.clone()),
                ),
            },
        };
        let attempt_id = match uncommitted {
            Some(attempt) => Some(attempt.id.clone()),
            None => last.and_then(|row| row.attempt_id.clone()),
        };
        let plan = &context.snapshot.plan;
        Self {
            attempt_id,
            status: last.map(|row| row.status),
            phase: ledger
                .last_phase
                .clone()
                .map(|(id, title)| PhaseRef { id, title }),
            text,
            message,
            outcome_path,
            transcript_path,
            prompt_path: ledger.last_prompt.clone(),
            phases_completed: ledger
                .attempts
                .iter()
                .filter(|row| row.status == AttemptStatus::PhaseComplete)
                .map(|row| row.phase_id.clone())
                .collect(),
            next_phase: result.next_phase.as_ref().map(|id| NextPhase {
                id: id.clone(),
                title: plan.phase(id).map(|phase| phase.title.clone()),
            }),
            next: next_step(end, context.invocation, facts),
            refusal: RefusalKind::of(end),
            attempts: ledger.attempts.len(),
            attempt_duration_ms: last.map(|row| row.duration_ms),
            verification: last.map(|row| {
                let configured = plan.phase(&row.phase_id).map(|phase| phase.verify.len());
                VerificationReport::of(configured, row.verification.clone())
            }),
            usage: UsageJson::of(ledger.attempts),
            error,
            ..Self::bare(result.exit(), kind, Some(context.location), context.elapsed)
        }
    }

    /// The object of a run that never started (invalid input, or the run's threads could not
    /// start): mostly empty; the plan's paths once it was located.
    pub(crate) fn error(
        exit: ExitCode,
        message: &str,
        location: Option<&PlanLocation>,
        elapsed: Duration,
    ) -> Self {
        let kind = if exit == ExitCode::InvalidInput {
            "invalid-input"
        } else {
            "error"
        };
        let line = format!("error: {message}");
        Self {
            message: Some(line.clone()),
            error: Some(line),
            ..Self::bare(exit, kind, location, elapsed)
        }
    }

    /// How the run ended, with where the plan is (once it was located), and nothing else.
    fn bare(
        exit: ExitCode,
        result: &'static str,
        location: Option<&PlanLocation>,
        elapsed: Duration,
    ) -> Self {
        Self {
            exit_code: exit.code(),
            result,
            plan_path: location.map(|location| location.plan_path.clone()),
            state_path: location.map(|location| location.layout.state_path()),
            duration_ms: units::millis(elapsed),
            ..Self::default()
        }
    }

    /// One line of compact JSON.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the run's result serializes")
    }
}

/// A completion a Verify check failed: the check and how it ended, the agent's summary, where
/// to look, and the check's own output tail (docs/plan-format.md, "Verify").
fn verification_failure(
    summary: &str,
    failed: &FailedCheck,
    outcome_path: &str,
    transcript_path: &str,
) -> Output {
    let mut output = Output::stderr(vec![
        format!(
            "{}: {}",
            AttemptStatus::VerificationFailed,
            failed.describe()
        ),
        format!("the agent had reported phase-complete: {summary}"),
        format!("outcome: {outcome_path}"),
        format!("transcript: {transcript_path}"),
    ]);
    let lines: Vec<&str> = failed.output_tail.lines().collect();
    output.err_line(match lines.len() {
        0 => format!("verify check {} printed nothing", failed.index),
        count => format!(
            "verify check {} output (last {}):",
            failed.index,
            units::count(count, "line")
        ),
    });
    output.stderr.extend(lines.into_iter().map(str::to_owned));
    output
}

/// A first line, then the outcome and transcript paths and the transcript tail.
fn details(first_line: String, outcome_path: Option<&str>, transcript_path: &str) -> Output {
    let mut output = Output::stderr(vec![first_line]);
    if let Some(path) = outcome_path {
        output.err_line(format!("outcome: {path}"));
    }
    output.err_line(format!("transcript: {transcript_path}"));
    output.stderr.extend(transcript_tail(transcript_path));
    output
}

/// An attempt whose outcome could not be committed: it stays the active attempt.
fn unresolved(first_line: String, attempt: &ActiveAttempt) -> Output {
    let mut output = Output::stderr(vec![
        first_line,
        format!(
            "unresolved attempt: {} ({}, attempt {})",
            attempt.phase.id,
            attempt.status.as_str(),
            attempt.id
        ),
        format!("transcript: {}", attempt.transcript_path),
        format!("planned outcome (uncommitted): {}", attempt.outcome_path),
    ]);
    output
        .stderr
        .extend(transcript_tail(&attempt.transcript_path));
    output
}

/// How much of a transcript's end is read for its tail: memory must not grow with the output,
/// and 40 lines of a sane transcript fit many times over.
const TAIL_BYTES: u64 = 1024 * 1024;

/// The last [`TAIL_LINES`] lines of a transcript, under a header line. Only the file's last
/// [`TAIL_BYTES`] are read; a line cut at that limit is shown from `[…]`. A transcript that
/// cannot be read is one line saying why.
pub(crate) fn transcript_tail(path: &str) -> Vec<String> {
    match regular_file::read_end(Path::new(path), TAIL_BYTES) {
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
        "transcript tail (last {}):",
        units::count(shown, "line")
    )];
    // As the agent printed them, tags included: made inert, so that `printable` has none to
    // defuse and a nested outer handler reading the report sees no tag.
    tail.extend(
        lines[start..]
            .iter()
            .map(|line| crate::domain::marker::inert_tags(line).into_owned()),
    );
    if cut && let Some(first) = tail.get_mut(1) {
        first.insert_str(0, "[…]");
    }
    tail
}

/// The three-line plan hash mismatch report.
fn plan_hash_mismatch(change: &PlanChange) -> Output {
    Output::stderr(vec![
        format!("plan hash mismatch: {}", change.path),
        format!("expected: {}", change.expected),
        format!("actual:   {}", change.actual),
    ])
}

/// A stopped phase refused a run: the stop, where to look, and the last run's transcript tail.
fn stopped(stop: &Stop, run: &RefusedRun<InputError>) -> Output {
    let mut output = Output::error(run.refusal.to_string());
    output.stderr.extend(stop_lines(stop));
    output.err_line(format!("plan workspace path: {}", run.plan_workspace));
    match &run.execution_workspace {
        Some(Ok(path)) => output.err_line(format!("execution workspace path: {path}")),
        Some(Err(error)) => {
            output.err_line(format!("execution workspace path unavailable: {error}"))
        }
        None => &mut output,
    };
    if let Some(last_run) = &run.last_run {
        output.err_line(format!(
            "last run: {} ({})",
            last_run.run_id, last_run.status
        ));
        output.err_line(format!("transcript: {}", last_run.transcript_path));
        if let Some(path) = &last_run.outcome_path {
            output.err_line(format!("outcome: {path}"));
        }
        output
            .stderr
            .extend(transcript_tail(&last_run.transcript_path));
    }
    output
}

/// The `clarification:` and `message:` lines of a stop, when it has them.
pub(crate) fn stop_lines(stop: &Stop) -> impl Iterator<Item = String> {
    let question = stop.clarification_request.iter();
    let message = stop.message.iter();
    (question.map(|question| format!("clarification: {question}")))
        .chain(message.map(|message| format!("message: {message}")))
}

/// An abandoned attempt refused a run: its paths and what is known of its worker — when the
/// watchdog of the handler that left it stopped its worker, when and which group.
fn abandoned(
    attempt: &ActiveAttempt,
    refusal: &Refusal,
    watchdog_stop: Option<&WatchdogStop>,
) -> Output {
    let mut output = Output::error(match watchdog_stop {
        Some(stop) => format!(
            "phase {} has an abandoned {} attempt {}: its handler (pid {}) ended without stopping it, and at {} its watchdog {}; inspect partial changes before retrying",
            attempt.phase.id,
            attempt.status.as_str(),
            attempt.id,
            stop.handler_pid
                .map_or_else(|| "unknown".to_owned(), |pid| pid.to_string()),
            stop.at,
            stop.describe()
        ),
        None => refusal.to_string(),
    });
    output.stderr.extend([
        format!("execution workspace path: {}", attempt.execution_workspace),
        format!("prompt: {}", attempt.prompt_path),
        format!("transcript: {}", attempt.transcript_path),
        format!("planned outcome (uncommitted): {}", attempt.outcome_path),
    ]);
    output.err_line(match (&attempt.process, attempt.status) {
        (Some(process), _) => format!(
            "recorded worker pid: {} (process group {})",
            process.pid, process.process_group_id
        ),
        (None, ActiveStatus::Prepared) => {
            "worker process identity: unknown (prepared, launch not recorded)".to_owned()
        }
        (None, ActiveStatus::Running) => "worker process identity: unknown".to_owned(),
    });
    output.err_line("retry requires: --retry-stopped");
    output
}

#[cfg(test)]
mod tests;
