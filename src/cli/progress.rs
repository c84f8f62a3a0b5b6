//! Progress lines on stderr while a run goes on (retries and waits), written by a thread of
//! their own so that a stalled stderr never blocks the actors that report events. stdout stays
//! the caller's.

use std::io::Write;
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use crate::actors::observer::RunObserver;
use crate::domain::events::RunEvent;
use crate::report;

/// How long the end of a run waits for queued progress lines to reach stderr.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The stderr progress printer.
pub struct ProgressLines {
    lines: Mutex<Option<Sender<String>>>,
    drained: Mutex<Option<Receiver<()>>>,
}

impl ProgressLines {
    pub fn start() -> std::io::Result<Self> {
        let (lines, queue) = mpsc::channel::<String>();
        let (done, drained) = mpsc::channel();
        std::thread::Builder::new()
            .name("ash-progress".into())
            .spawn(move || {
                for line in queue {
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(err, "{line}");
                    let _ = err.flush();
                }
                let _ = done.send(());
            })?;
        Ok(Self {
            lines: Mutex::new(Some(lines)),
            drained: Mutex::new(Some(drained)),
        })
    }

    /// Closes the queue and waits (bounded) until what is queued is written, so the run's
    /// final report comes after every progress line. Later events are dropped.
    pub fn finish(&self) {
        drop(self.lines.lock().ok().and_then(|mut slot| slot.take()));
        if let Some(drained) = self.drained.lock().ok().and_then(|mut slot| slot.take()) {
            let _ = drained.recv_timeout(DRAIN_LIMIT);
        }
    }
}

impl RunObserver for ProgressLines {
    fn observe(&self, event: &RunEvent) {
        let Some(line) = report::event_line(event, chrono::Utc::now()) else {
            return;
        };
        if let Some(lines) = self
            .lines
            .lock()
            .ok()
            .as_ref()
            .and_then(|slot| slot.as_ref())
        {
            let _ = lines.send(line);
        }
    }
}
