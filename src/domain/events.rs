//! What a run tells its observers as it goes: typed lifecycle events, pure data, which the
//! command layer turns into progress lines, the status line, the `run --json` result and the
//! event stream (`events.jsonl`, one [`EventRecord`] per line; fields in docs/cli.md).

use std::borrow::Cow;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};

use super::display::printable_json;
use super::lifecycle::GroupReport;
use super::retry::schedule::RetrySchedule;
use super::state::{AttemptStatus, STATE_TEXT_LIMIT, excerpt};
use super::status_text::sanitize_status;
use super::token_usage::summary::UsageSummary;
use super::verification::{FailedCheck, VerificationRecord};
use super::watchdog::{LossCause, Replacement, WatchdogLoss};

/// One thing that happened during a run, serialized with its kind in `event` (kebab case).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub(crate) enum RunEvent {
    RunStarted {
        pid: u32,
        version: String,
        args: Vec<String>,
        plan: String,
        phases: usize,
        completed: usize,
        /// Why the run's hooks do not run (its handler was started by a hook).
        #[serde(skip_serializing_if = "Option::is_none")]
        hooks_off: Option<String>,
    },
    /// An attempt's prepared record is durable: the phase is about to run.
    AttemptPrepared {
        phase_id: String,
        title: String,
        /// 1-based.
        phase_index: usize,
        phases: usize,
        /// This attempt's number among its phase's recorded attempts.
        phase_attempt: u32,
        /// Counted attempt k of n in this run.
        attempt: u32,
        of: u32,
        agent_cmd: String,
        prompt_path: String,
        transcript_path: String,
    },
    /// The worker runs, leader of its own process group.
    WorkerSpawned { pid: u32, pgid: u32 },
    /// Emitted as the signal arrives, before the attempt is stopped.
    SignalReceived { signal: String },
    OutputProgress {
        stdout_bytes: u64,
        stderr_bytes: u64,
        last_line: Option<String>,
    },
    /// The agent's `STATUS=`; `text` is `None` when it cleared its status.
    Activity {
        text: Option<String>,
        since: Option<String>,
    },
    /// The agent announced a silence (`EXTEND_TIMEOUT_USEC`).
    IdleDeadlineExtended { until: String, seconds: f64 },
    /// The attempt, or its running check, is being stopped.
    StopRequested { cause: String, detail: String },
    WatchdogLost {
        pid: u32,
        cause: &'static str,
        code: i32,
        replaced_by: Option<u32>,
        error: Option<String>,
        detail: String,
    },
    /// A budget cap is set, but an attempt reported no usage; once per run.
    BudgetUnenforceable { message: String },
    /// A usage report changed the running attempt's usage.
    Usage {
        phase_id: String,
        usage: UsageSummary,
    },
    /// The worker's group is empty.
    GroupStopped(GroupReport),
    OutcomeCommitted {
        phase_id: String,
        status: AttemptStatus,
        duration_ms: u64,
        summary: String,
        stdout_bytes: u64,
        stderr_bytes: u64,
        outcome_path: String,
        transcript_path: String,
        usage: UsageSummary,
        #[serde(skip_serializing_if = "Option::is_none")]
        verification: Option<VerificationRecord>,
        #[serde(skip_serializing_if = "Option::is_none")]
        verification_failure: Option<FailedCheck>,
    },
    VerifyStarted {
        phase_id: String,
        /// 1-based, in the Verify section's order.
        index: usize,
        of: usize,
        command_first_line: String,
    },
    VerifyFinished {
        phase_id: String,
        index: usize,
        command_first_line: String,
        passed: bool,
        exit_code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
        stopped: bool,
        duration_ms: u64,
        output_bytes: u64,
    },
    /// The retry policy durably scheduled the next attempt of a phase.
    RetryScheduled {
        schedule: RetrySchedule,
        /// Until the attempt is due, exact (the schedule's time is rounded up to the second).
        delay_seconds: f64,
        of: u32,
        template: String,
        reset_phrase: Option<String>,
        /// Found in state and resumed by this run, rather than just made.
        resumed: bool,
    },
    /// A scheduled attempt is due: the phase runs again now.
    RetryDue { phase_id: String, attempt: u32 },
    /// The run ended with this exit code.
    RunFinished { exit_code: i32 },
    /// A hook could not be started, failed, timed out or was stopped; it changes nothing else.
    HookFailed {
        hook: String,
        hook_event: String,
        command: String,
        reason: String,
        exit_code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
        duration_ms: u64,
        log_path: String,
    },
}

impl RunEvent {
    pub(crate) fn watchdog_lost(loss: &WatchdogLoss) -> Self {
        let (cause, code) = match loss.cause {
            LossCause::Killed(signal) => ("killed", signal),
            LossCause::Stopped(signal) => ("stopped", signal),
            LossCause::Exited(code) => ("exited", code),
        };
        let (replaced_by, error) = match &loss.replacement {
            Replacement::Started(pid) => (Some(*pid), None),
            Replacement::Failed(error) => (None, Some(error.clone())),
            Replacement::GaveUp { losses } => (
                None,
                Some(format!("lost {losses} times; not replaced again")),
            ),
        };
        Self::WatchdogLost {
            pid: loss.pid,
            cause,
            code,
            replaced_by,
            error,
            detail: loss.describe(),
        }
    }
}

/// An event with when it happened and which run and attempt it belongs to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct EventRecord {
    #[serde(serialize_with = "rfc3339_millis")]
    pub at: DateTime<Utc>,
    pub run_id: String,
    pub attempt_id: Option<String>,
    #[serde(flatten)]
    pub event: RunEvent,
}

impl EventRecord {
    /// One line of the event stream (no newline), printable ([`printable_json`]).
    pub(crate) fn to_json_line(&self) -> String {
        // The stream carries an excerpt of a long summary, like `state.json`: the outcome
        // file has it whole, and a line of megabytes helps no one following the stream.
        let mut record = Cow::Borrowed(self);
        if let RunEvent::OutcomeCommitted {
            summary,
            outcome_path,
            ..
        } = &self.event
            && summary.len() > STATE_TEXT_LIMIT
            && let RunEvent::OutcomeCommitted { summary: kept, .. } = &mut record.to_mut().event
        {
            *kept = excerpt(summary, Some(outcome_path));
        }
        // Every field serializes (no maps with non-string keys, no floats that are NaN: the
        // delay is a measured duration), so this cannot fail; keep a line rather than panic.
        let json = serde_json::to_string(&record).unwrap_or_else(|error| {
            format!(
                "{{\"event\":\"unserializable\",\"error\":{:?}}}",
                error.to_string()
            )
        });
        printable_json(&json).into_owned()
    }
}

/// When a stream that keeps one output-progress line per interval writes the one arriving
/// `at`, given its `slot` (when its last one was written, or is due).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProgressWrite {
    /// Write it now; it becomes the slot.
    Now,
    /// Hold it, replacing any held one, until this time (the new slot) or until another line
    /// is written first: a burst's last figures always arrive.
    At(DateTime<Utc>),
}

pub(crate) fn progress_write(
    slot: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
    interval: chrono::TimeDelta,
) -> ProgressWrite {
    match slot {
        // A held line is waiting: this one replaces it, due at the same time.
        Some(slot) if at < slot => ProgressWrite::At(slot),
        Some(slot) if at - slot < interval => ProgressWrite::At(slot + interval),
        _ => ProgressWrite::Now,
    }
}

/// The agent's latest status as the event stream last published it (`status` reads it there,
/// since a status is never written to `state.json`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StreamedActivity {
    /// The latest `activity` of the attempt: its text and since when (RFC 3339).
    Status { text: String, since: String },
    /// The attempt has no status: it never set one, or cleared it.
    NoStatus,
    /// The attempt is not in this part of the stream (look in the earlier file).
    NotFound,
}

/// Finds the latest `activity` event of `attempt_id` in `stream` (event-stream lines, oldest
/// first), reading from the end and stopping at the attempt's `attempt-prepared`. The text is
/// made one printable line of at most 200 characters again: the stream is a file anyone could
/// have written.
pub(crate) fn latest_activity(stream: &str, attempt_id: &str) -> StreamedActivity {
    stream
        .rsplit('\n')
        .filter(|line| line.contains(attempt_id))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["attempt_id"].as_str() == Some(attempt_id))
        .find_map(|event| match event["event"].as_str() {
            Some("activity") => match (event["text"].as_str(), event["since"].as_str()) {
                (Some(text), Some(since)) => Some(StreamedActivity::Status {
                    text: sanitize_status(text),
                    since: since.to_owned(),
                }),
                _ => Some(StreamedActivity::NoStatus),
            },
            Some("attempt-prepared") => Some(StreamedActivity::NoStatus),
            _ => None,
        })
        .unwrap_or(StreamedActivity::NotFound)
}

fn rfc3339_millis<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests;
