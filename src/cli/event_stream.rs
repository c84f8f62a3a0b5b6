//! The run's event stream: every event as one JSON line in `events.jsonl` in the plan's state
//! directory (format: docs/cli.md, "The event stream"). The file is opened only once the run
//! launches an attempt or waits for one; output progress is kept to one line per
//! [`PROGRESS_INTERVAL`], a line inside the interval deferred (not dropped) to its end.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::actors::observer::RunObserver;
use crate::domain::events::{EventRecord, ProgressWrite, RunEvent, progress_write};
use crate::platform::event_log::{DeferredLine, EventLog};

/// How long the end of a run waits for queued events to be written.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// The stream keeps at most one output-progress line per this interval.
const PROGRESS_INTERVAL: chrono::TimeDelta = chrono::TimeDelta::seconds(2);
/// The size at which the stream rotates (to `events.jsonl.1`).
pub(super) const STREAM_CAP_BYTES: u64 = 8 << 20;

/// The event-stream observer.
pub(super) struct EventStream {
    log: EventLog,
    state: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    /// Events before the stream was opened.
    held: Vec<String>,
    open: bool,
    /// When the last output-progress line was written, or is due if it is deferred.
    progress_slot: Option<DateTime<Utc>>,
}

impl EventStream {
    pub(super) fn start(dir: &str) -> std::io::Result<Self> {
        Ok(Self {
            log: EventLog::start(PathBuf::from(dir).join("events.jsonl"), STREAM_CAP_BYTES)?,
            state: Mutex::new(StreamState::default()),
        })
    }

    /// Waits (bounded) until every event is written.
    pub(super) fn finish(&self) {
        self.log.drain(DRAIN_LIMIT);
    }
}

impl RunObserver for EventStream {
    fn observe(&self, record: &EventRecord) {
        let mut state = super::lock(&self.state);
        let line = record.to_json_line();
        if state.open
            && let RunEvent::OutputProgress { .. } = record.event
        {
            match progress_write(state.progress_slot, record.at, PROGRESS_INTERVAL) {
                ProgressWrite::At(due) => {
                    // Written when due, with that time as its `at` (its figures are the latest
                    // then); written early, with its own time, if another event comes first.
                    state.progress_slot = Some(due);
                    let wait = (due - record.at).to_std().unwrap_or_default();
                    let on_time = EventRecord {
                        at: due,
                        ..record.clone()
                    };
                    self.log.append_at(DeferredLine {
                        on_time: on_time.to_json_line(),
                        early: line,
                        due: Instant::now() + wait,
                    });
                }
                ProgressWrite::Now => {
                    state.progress_slot = Some(record.at);
                    self.log.append(line);
                }
            }
            return;
        }
        // Another event forces a held progress line out now, at its own time: the next one
        // keeps the interval from this moment.
        if let Some(slot) = state.progress_slot
            && slot > record.at
        {
            state.progress_slot = Some(record.at);
        }
        if !state.open {
            let opens = matches!(
                record.event,
                RunEvent::AttemptPrepared { .. } | RunEvent::RetryScheduled { .. }
            );
            if !opens {
                state.held.push(line);
                return;
            }
            state.open = true;
            for held in state.held.drain(..) {
                self.log.append(held);
            }
        }
        self.log.append(line);
    }
}
