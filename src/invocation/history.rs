//! What `events.jsonl` (and its rotated `events.jsonl.1`) still say about earlier runs of a
//! plan, for `answer` and `report`. The stream is a log, not a record: a line that does not
//! parse is skipped, and what was rotated away is simply not known.

use std::path::Path;

use crate::domain::plan_report::history::{HistoryEvent, HistoryLine, parse_line};
use crate::domain::state::StateLayout;
use crate::domain::watchdog::StopReport;
use crate::platform::event_log::MAX_STREAM_BYTES;
use crate::platform::regular_file::read_regular_file;

/// Every parseable line, oldest first.
pub(crate) fn read_history(layout: &StateLayout) -> Vec<HistoryLine> {
    [
        format!("{}/events.jsonl.1", layout.dir),
        format!("{}/events.jsonl", layout.dir),
    ]
    .iter()
    .filter_map(|path| read_regular_file(Path::new(path), MAX_STREAM_BYTES).ok())
    .flat_map(|bytes| {
        bytes
            .split(|&byte| byte == b'\n')
            .filter_map(parse_line)
            .collect::<Vec<_>>()
    })
    .collect()
}

/// The command line of the run that prepared `attempt_id`, from its `run-started` event.
pub(crate) fn stopped_run_args(layout: &StateLayout, attempt_id: &str) -> Option<Vec<String>> {
    let lines = read_history(layout);
    let run_id = lines
        .iter()
        .find(|line| line.attempt_id.as_deref() == Some(attempt_id))?
        .run_id
        .clone()?;
    lines.into_iter().find_map(|line| match line.event {
        HistoryEvent::RunStarted { args } if line.run_id.as_deref() == Some(&run_id) => Some(args),
        _ => None,
    })
}

/// What the watchdog of a handler that died did to an attempt's processes (its
/// `watchdog-stopped` record in events.jsonl).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchdogStop {
    /// When (RFC 3339, UTC).
    pub at: String,
    pub handler_pid: Option<u32>,
    pub report: StopReport,
}

impl WatchdogStop {
    /// What it did (`stopped process group 4242`), or that it found nothing left to stop.
    pub(crate) fn describe(&self) -> String {
        if self.report.is_empty() {
            "found nothing of it left running".to_owned()
        } else {
            self.report.what_it_did()
        }
    }

    /// Whether nothing it stopped is known to be still alive.
    pub(crate) fn left_nothing(&self) -> bool {
        self.report.survivors.is_empty()
    }
}

/// The last `watchdog-stopped` record naming `attempt_id`.
pub(crate) fn watchdog_stop(layout: &StateLayout, attempt_id: &str) -> Option<WatchdogStop> {
    read_history(layout)
        .into_iter()
        .rev()
        .find_map(|line| match line.event {
            HistoryEvent::WatchdogStopped {
                handler_pid,
                groups,
                escaped,
                survivors,
            } if line.attempt_id.as_deref() == Some(attempt_id) => Some(WatchdogStop {
                at: line.at,
                handler_pid,
                report: StopReport {
                    groups,
                    escaped,
                    survivors,
                },
            }),
            _ => None,
        })
}
