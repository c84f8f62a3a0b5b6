//! What a person (or a log) sees on stderr while a run goes on; stdout stays the caller's.
//!
//! - Without `--quiet`: a banner when a phase starts (`phase-2 (2/5) Second · attempt 1`), one
//!   line when it ends (`phase-2 complete in 3m12s · 1.2 MiB output`), the retry and wait
//!   lines, and after a run of several attempts a short summary table. The lines go through
//!   the run's console thread, the same one that echoes the agent's output, so a banner is
//!   always printed before the output of its phase.
//! - With `--quiet` and stderr a terminal: one live status line (phase, elapsed, bytes, the last
//!   output line, cut to the terminal width), recomputed and redrawn by a thread of its own four
//!   times a second — so the elapsed time moves on while the agent is silent, and no actor
//!   ever writes to the terminal for it — and cleared at the end; retry and wait lines are
//!   printed above it.
//! - With `--quiet` and stderr not a terminal (nested callers, CI logs): only the retry and
//!   wait lines, which exist only when a retry policy is on.
//!
//! Every mode also keeps the run's ledger (the attempts and how they ended) for the summary
//! table and `run --json`.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::oneshot;

use crate::actors::observer::RunObserver;
use crate::domain::events::{EventRecord, RunEvent};
use crate::domain::output_stream::OutputStream;
use crate::platform::console::Console;
use crate::report::{self, AttemptRow};

/// How long the end of a run waits for queued progress lines to reach stderr.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How often the live status line is recomputed and redrawn.
const STATUS_LINE_HZ: u8 = 4;

/// Which of the three presentations a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// Banners, end lines, retry lines and the summary table.
    Lines,
    /// The live status line (`--quiet` on a terminal).
    StatusLine,
    /// Retry and wait lines only (`--quiet` elsewhere).
    Quiet,
}

/// The attempt in progress.
#[derive(Clone, Debug)]
struct Current {
    phase_id: String,
    title: String,
    phase_index: usize,
    phases: usize,
    prompt_path: String,
    started: Instant,
    output_bytes: u64,
    last_line: Option<String>,
}

/// What the run did, from its events.
#[derive(Debug, Default)]
pub struct Ledger {
    pub attempts: Vec<AttemptRow>,
    current: Option<Current>,
}

impl Ledger {
    /// The phase of the attempt running or last run, with its title.
    pub fn last_phase(&self) -> Option<(String, String)> {
        match (&self.current, self.attempts.last()) {
            (Some(current), _) => Some((current.phase_id.clone(), current.title.clone())),
            (None, Some(row)) => Some((row.phase_id.clone(), row.title.clone())),
            (None, None) => None,
        }
    }

    /// The prompt of the attempt running or last prepared.
    pub fn last_prompt(&self) -> Option<String> {
        self.current
            .as_ref()
            .map(|current| current.prompt_path.clone())
            .or_else(|| self.attempts.last().and_then(|row| row.prompt_path.clone()))
    }
}

/// The stderr progress observer.
pub struct Progress {
    mode: ProgressMode,
    console: Arc<Console>,
    bar: Option<ProgressBar>,
    ledger: Arc<Mutex<Ledger>>,
    /// The thread that redraws the status line, and the channel that stops it.
    redrawer: Mutex<Option<(mpsc::Sender<()>, JoinHandle<()>)>>,
    /// The last line handed to the console, to wait for at the end.
    last_line: Mutex<Option<oneshot::Receiver<std::io::Result<()>>>>,
}

impl Progress {
    pub fn new(mode: ProgressMode, console: Arc<Console>) -> Self {
        let bar = (mode == ProgressMode::StatusLine).then(|| {
            let bar = ProgressBar::with_draw_target(
                None,
                ProgressDrawTarget::stderr_with_hz(STATUS_LINE_HZ),
            );
            bar.set_style(
                ProgressStyle::with_template("{spinner} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar
        });
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let redrawer = bar
            .as_ref()
            .and_then(|bar| start_redrawer(bar.clone(), ledger.clone()));
        Self {
            mode,
            console,
            bar,
            ledger,
            redrawer: Mutex::new(redrawer),
            last_line: Mutex::new(None),
        }
    }

    /// The run's ledger so far.
    pub fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    /// Ends the presentation: clears the status line, or prints the summary table after a run
    /// of several attempts; then waits (bounded) until every queued line is on stderr, so the
    /// run's final report comes after them.
    pub fn finish(&self) {
        if let Some((stop, thread)) = lock(&self.redrawer).take() {
            drop(stop);
            let _ = thread.join();
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.mode == ProgressMode::Lines {
            let ledger = self.ledger();
            if ledger.attempts.len() > 1 {
                for line in report::summary_table(&ledger.attempts) {
                    self.say(line);
                }
            }
        }
        let pending = lock(&self.last_line).take();
        if let Some(mut written) = pending {
            let deadline = Instant::now() + DRAIN_LIMIT;
            while Instant::now() < deadline {
                match written.try_recv() {
                    Err(oneshot::error::TryRecvError::Empty) => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    _ => break,
                }
            }
        }
    }

    /// A line on stderr, above the status line if there is one.
    fn say(&self, line: String) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                let written = self.console.submit(OutputStream::Stderr, Arc::new(bytes));
                *lock(&self.last_line) = Some(written);
            }
        }
    }
}

/// Starts the thread that recomputes the status line [`STATUS_LINE_HZ`] times a second from
/// the ledger — the elapsed time included, so it advances while the agent prints nothing —
/// until its channel closes. `None` when no thread can be started: the line is then not shown.
fn start_redrawer(
    bar: ProgressBar,
    ledger: Arc<Mutex<Ledger>>,
) -> Option<(mpsc::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = mpsc::channel::<()>();
    let interval = Duration::from_millis(1000 / u64::from(STATUS_LINE_HZ));
    let thread = std::thread::Builder::new()
        .name("ash-status-line".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                // Computed under the lock, drawn without it: observers never wait on the
                // terminal.
                let line = lock(&ledger).current.as_ref().map(|current| {
                    report::status_line(
                        &current.phase_id,
                        current.phase_index,
                        current.phases,
                        current.started.elapsed(),
                        current.output_bytes,
                        current.last_line.as_deref(),
                    )
                });
                if let Some(line) = line {
                    // The message first: if the draw rate limit lets only one of the two
                    // draws through, it is the one with the current line.
                    bar.set_message(line);
                    bar.tick();
                }
            }
        });
    match thread {
        Ok(thread) => Some((stop, thread)),
        Err(error) => {
            tracing::warn!(%error, "cannot start the status line thread; no status line");
            None
        }
    }
}

impl RunObserver for Progress {
    fn observe(&self, record: &EventRecord) {
        let mut ledger = self.ledger();
        match &record.event {
            RunEvent::AttemptPrepared {
                phase_id,
                title,
                phase_index,
                phases,
                attempt,
                of,
                prompt_path,
                ..
            } => {
                ledger.current = Some(Current {
                    phase_id: phase_id.clone(),
                    title: title.clone(),
                    phase_index: *phase_index,
                    phases: *phases,
                    prompt_path: prompt_path.clone(),
                    started: Instant::now(),
                    output_bytes: 0,
                    last_line: None,
                });
                match self.mode {
                    ProgressMode::Lines => self.say(report::phase_banner(
                        phase_id,
                        *phase_index,
                        *phases,
                        title,
                        *attempt,
                        *of,
                    )),
                    // The status line's own thread draws the new attempt.
                    ProgressMode::StatusLine | ProgressMode::Quiet => {}
                }
            }
            RunEvent::OutputProgress {
                stdout_bytes,
                stderr_bytes,
                last_line,
            } => {
                if let Some(current) = ledger.current.as_mut() {
                    current.output_bytes = stdout_bytes.saturating_add(*stderr_bytes);
                    if last_line.is_some() {
                        current.last_line = last_line.clone();
                    }
                }
            }
            RunEvent::OutcomeCommitted {
                phase_id,
                status,
                duration_ms,
                summary,
                stdout_bytes,
                stderr_bytes,
                outcome_path,
                transcript_path,
            } => {
                let current = ledger.current.take();
                let output_bytes = stdout_bytes.saturating_add(*stderr_bytes);
                if self.mode == ProgressMode::Lines {
                    self.say(report::phase_ended(
                        phase_id,
                        *status,
                        *duration_ms,
                        output_bytes,
                    ));
                }
                ledger.attempts.push(AttemptRow {
                    attempt_id: record.attempt_id.clone(),
                    phase_id: phase_id.clone(),
                    title: current
                        .as_ref()
                        .map(|current| current.title.clone())
                        .unwrap_or_default(),
                    status: *status,
                    summary: summary.clone(),
                    duration_ms: *duration_ms,
                    output_bytes,
                    outcome_path: outcome_path.clone(),
                    transcript_path: transcript_path.clone(),
                    prompt_path: current.map(|current| current.prompt_path),
                });
            }
            RunEvent::RetryScheduled { .. } | RunEvent::WatchdogLost { .. } => {
                if let Some(line) = report::event_line(&record.event, chrono::Utc::now()) {
                    self.say(line);
                }
            }
            RunEvent::RunStarted { .. }
            | RunEvent::WorkerSpawned { .. }
            | RunEvent::StopRequested { .. }
            | RunEvent::GroupStopped { .. }
            | RunEvent::RetryDue { .. }
            | RunEvent::RunFinished { .. } => {}
        }
    }
}

/// A poisoned lock only means another observer call panicked; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
