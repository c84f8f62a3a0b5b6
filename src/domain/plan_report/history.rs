//! What the report reads back from `events.jsonl`: the few events that say which run started
//! an attempt, how long the phase waited before it, and how often its agent moved its idle
//! deadline. The stream is a log: unknown events and fields are passed over, and a line that
//! does not parse is skipped by the reader.

use serde::Deserialize;

use crate::domain::state::AttemptStatus;

/// One line of the stream, as far as the report reads it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct HistoryLine {
    pub at: String,
    pub run_id: Option<String>,
    pub attempt_id: Option<String>,
    #[serde(flatten)]
    pub event: HistoryEvent,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum HistoryEvent {
    RunStarted {
        args: Vec<String>,
    },
    AttemptPrepared {
        phase_id: String,
    },
    IdleDeadlineExtended {},
    RetryScheduled {
        schedule: ScheduledRetry,
        delay_seconds: f64,
        reset_phrase: Option<String>,
    },
    RetryDue {
        phase_id: String,
    },
    /// Written by the watchdog of a handler that died without stopping its workers.
    WatchdogStopped {
        handler_pid: Option<u32>,
        #[serde(default)]
        groups: Vec<u32>,
        #[serde(default)]
        escaped: Vec<u32>,
        #[serde(default)]
        survivors: Vec<u32>,
    },
    #[serde(other)]
    Other,
}

/// The part of a `retry-scheduled` event's schedule the report shows.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ScheduledRetry {
    pub phase_id: String,
    /// The status of the attempt before the wait.
    pub after: AttemptStatus,
    pub not_before: String,
}

/// Parses one line; `None` for a line that is not an event object.
pub fn parse_line(line: &[u8]) -> Option<HistoryLine> {
    serde_json::from_slice(line).ok()
}
