//! What a person (or a log) sees on stderr while a run goes on, in three modes (docs/cli.md,
//! "Progress while it runs"): banners and end lines through the console thread, the live status
//! line drawn by a thread of its own, or only the retry and wait lines. Every mode keeps the
//! run's ledger for the summary table and `run --json`.

use std::borrow::Cow;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::lock;
use crate::actors::observer::RunObserver;
use crate::domain::events::{EventRecord, RunEvent};
use crate::domain::output_stream::OutputStream;
use crate::domain::verification::Verification;
use crate::platform::console::{self, Console};
use crate::report::terminal::{self, Stream};
use crate::report::{self, AttemptRow, LiveAttempt};

/// How long the end of a run waits for queued progress lines to reach stderr.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How often the live status line is recomputed and redrawn.
const STATUS_LINE_HZ: u8 = 4;
/// How many lines may wait for the status-line thread; more are dropped while a paused
/// terminal holds the thread, so nothing of the run ever waits.
const STATUS_LINE_QUEUE: usize = 64;
pub(super) const SILENCE_BEFORE_SIGN: Duration = Duration::from_secs(3);
const SIGN_OF_LIFE_INTERVAL: Duration = Duration::from_secs(1);

/// Which of the three presentations a run uses: banners and end lines (without `--quiet`),
/// the live status line (`--quiet` on a terminal), retry and wait lines only (`--quiet`
/// elsewhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ProgressMode {
    Lines,
    StatusLine,
    Quiet,
}

/// The attempt in progress.
#[derive(Clone, Debug)]
struct Current {
    live: LiveAttempt,
    title: String,
    prompt_path: String,
    /// When the output last grew (the attempt's start before any).
    last_output: Instant,
    /// A Verify check runs: its header and output are on the console, and its silence is not
    /// the agent's, so no sign of life is drawn.
    verifying: bool,
}

/// What the run did, from its events.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    pub attempts: Vec<AttemptRow>,
    current: Option<Current>,
}

impl Ledger {
    /// What `run --json` reads of it.
    pub(super) fn view(&self) -> report::LedgerView<'_> {
        let last = self.attempts.last();
        report::LedgerView {
            attempts: &self.attempts,
            last_phase: match &self.current {
                Some(current) => Some((current.live.phase_id.clone(), current.title.clone())),
                None => last.map(|row| (row.phase_id.clone(), row.title.clone())),
            },
            last_prompt: match &self.current {
                Some(current) => Some(current.prompt_path.clone()),
                None => last.and_then(|row| row.prompt_path.clone()),
            },
        }
    }
}

/// The stderr progress observer.
pub(super) struct Progress {
    mode: ProgressMode,
    /// stderr is a terminal: the sign of life and the status changes are drawn only there.
    terminal: bool,
    console: Arc<Console>,
    ledger: Arc<Mutex<Ledger>>,
    redrawer: Mutex<Option<StatusLineThread>>,
    sign_of_life: Mutex<Option<JoinHandle<()>>>,
    /// The last line handed to the console, to wait for at the end.
    last_line: Mutex<Option<oneshot::Receiver<std::io::Result<()>>>>,
}

impl Progress {
    pub(super) fn new(
        mode: ProgressMode,
        console: Arc<Console>,
        terminal: bool,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let redrawer = if mode == ProgressMode::StatusLine {
            start_redrawer(ledger.clone())
        } else {
            None
        };
        let sign_of_life = (mode == ProgressMode::Lines && terminal)
            .then(|| runtime.spawn(sign_of_life(console.clone(), ledger.clone())));
        Self {
            mode,
            terminal,
            console,
            ledger,
            redrawer: Mutex::new(redrawer),
            sign_of_life: Mutex::new(sign_of_life),
            last_line: Mutex::new(None),
        }
    }

    /// A stopping signal arrived: the live status line is cleared now and drawn no more, and the
    /// sign of life is erased, so nothing stale stands above the stop's report. Never waits on
    /// the terminal: the threads that draw do the clearing.
    fn signal_received(&self) {
        if let Some(thread) = lock(&self.redrawer).as_ref() {
            thread.clear();
        }
        if let Some(task) = lock(&self.sign_of_life).as_ref() {
            task.abort();
            drop(self.console.clear_transient());
        }
    }

    pub(super) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    /// Ends the presentation: clears the status line, or prints the summary table after a run
    /// of several attempts (`table`: not after the user's own interrupt, whose report is only
    /// what helps to go on); then waits (bounded) until every queued line is on stderr, so the
    /// run's final report comes after them.
    pub(super) fn finish(&self, table: bool) {
        if let Some(thread) = lock(&self.redrawer).take() {
            thread.finish();
        }
        if let Some(task) = lock(&self.sign_of_life).take() {
            task.abort();
            // Queued after anything the task drew (the run's runtime is gone by now); the
            // wait below covers it.
            *lock(&self.last_line) = Some(self.console.clear_transient());
        }
        if table && self.mode != ProgressMode::Quiet {
            let rows = self.ledger().attempts.clone();
            if rows.len() > 1 {
                // Above the status line, which is cleared next: the table stays on screen.
                for line in report::summary_table(&rows) {
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

    /// A line on stderr, above the status line if there is one, its `error:` or `warning:`
    /// label coloured where colour is on. Never waits for the terminal: the status-line thread
    /// or the console thread writes it.
    fn say(&self, line: String) {
        let line = match terminal::label(&line, Stream::Stderr) {
            Cow::Borrowed(_) => line,
            Cow::Owned(coloured) => coloured,
        };
        if let Some(thread) = lock(&self.redrawer).as_ref() {
            return thread.print(line);
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let written = self.console.submit(OutputStream::Stderr, Arc::new(bytes));
        *lock(&self.last_line) = Some(written);
    }
}

/// What the status-line thread is asked to draw: a line above the status line, or the end of
/// the status line.
enum Drawing {
    Line(String),
    Clear,
}

/// The status-line thread: the only code that draws on the terminal for the status line,
/// including the lines printed above it, so a paused terminal (Ctrl-S) holds this thread
/// and nothing else.
struct StatusLineThread {
    lines: mpsc::SyncSender<Drawing>,
    /// Disconnected when the thread ends.
    ended: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl StatusLineThread {
    /// Queues a line to print above the status line; dropped when the queue is full (the
    /// terminal does not take output).
    fn print(&self, line: String) {
        if let Err(mpsc::TrySendError::Full(_)) = self.lines.try_send(Drawing::Line(line)) {
            tracing::debug!("progress line dropped: the terminal is not taking output");
        }
    }

    /// Clears the status line for good (a stopping signal arrived); lines still print.
    fn clear(&self) {
        // A full queue means a paused terminal: the line is cleared when it resumes and the
        // queue drains, or at the end.
        let _ = self.lines.try_send(Drawing::Clear);
    }

    /// Lets the thread print what is queued and end; waits for it, bounded (a paused terminal
    /// keeps it), so the final report comes after its lines.
    fn finish(self) {
        drop(self.lines);
        if self.ended.recv_timeout(DRAIN_LIMIT) != Err(RecvTimeoutError::Timeout) {
            let _ = self.thread.join();
        }
    }
}

/// Starts the thread that recomputes the status line from the ledger [`STATUS_LINE_HZ`] times a
/// second (so the elapsed time moves while the agent is silent) and prints the lines queued for
/// above it, until its queue closes. `None` (no status line) when no thread can be started.
fn start_redrawer(ledger: Arc<Mutex<Ledger>>) -> Option<StatusLineThread> {
    let (lines, queued) = mpsc::sync_channel::<Drawing>(STATUS_LINE_QUEUE);
    let (ended_sender, ended) = mpsc::channel::<()>();
    let interval = Duration::from_millis(1000 / u64::from(STATUS_LINE_HZ));
    let thread = std::thread::Builder::new()
        .name("ash-status-line".into())
        .spawn(move || {
            let _ended = ended_sender;
            let mut line = StatusLine::default();
            let mut cleared = false;
            loop {
                match queued.recv_timeout(interval) {
                    Ok(Drawing::Line(above)) => line.print_above(&above, !cleared),
                    Ok(Drawing::Clear) => {
                        cleared = true;
                        line.clear();
                    }
                    Err(RecvTimeoutError::Timeout) if !cleared => {
                        // Computed under the lock, drawn without it: observers never wait
                        // on the terminal.
                        let message = lock(&ledger)
                            .current
                            .as_ref()
                            .map(|current| current.live.status_line());
                        if let Some(message) = message {
                            line.draw(message);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            // The end of the run: the line goes now.
            line.clear();
        });
    match thread {
        Ok(thread) => Some(StatusLineThread {
            lines,
            ended,
            thread,
        }),
        Err(error) => {
            tracing::warn!(%error, "cannot start the status line thread; no status line");
            None
        }
    }
}

/// The spinner's frames, one per redraw.
const SPINNER: [char; 8] = ['⠁', '⠂', '⠄', '⡀', '⢀', '⠠', '⠐', '⠈'];

/// The status line as the status-line thread has drawn it on stderr. Each draw replaces the
/// line and stops short of the last column ([`console::redrawn_line`]), so the erase reaches
/// everything drawn, the terminal's `^C` echo included. Write errors are ignored: a terminal
/// that went away takes no status line.
#[derive(Default)]
struct StatusLine {
    /// The last message drawn, redrawn after a line printed above it.
    message: Option<String>,
    frame: usize,
    shown: bool,
}

impl StatusLine {
    fn draw(&mut self, message: String) {
        self.frame = (self.frame + 1) % SPINNER.len();
        let text = format!("{} {message}", SPINNER[self.frame]);
        let _ = console::write_stderr(&console::redrawn_line(&text));
        self.shown = true;
        self.message = Some(message);
    }

    /// `above` as a whole line where the status line was, then the status line again below
    /// it when `redraw`.
    fn print_above(&mut self, above: &str, redraw: bool) {
        let mut bytes = if self.shown {
            console::ERASE_LINE.to_vec()
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(above.as_bytes());
        bytes.push(b'\n');
        let _ = console::write_stderr(&bytes);
        self.shown = false;
        if let (true, Some(message)) = (redraw, self.message.take()) {
            self.draw(message);
        }
    }

    fn clear(&mut self) {
        if self.shown {
            let _ = console::write_stderr(console::ERASE_LINE);
            self.shown = false;
        }
    }
}

/// Draws the sign of life every [`SIGN_OF_LIFE_INTERVAL`] while the current attempt has been
/// silent for [`SILENCE_BEFORE_SIGN`], until the task is aborted; the console thread erases it
/// before the next output.
async fn sign_of_life(console: Arc<Console>, ledger: Arc<Mutex<Ledger>>) {
    let first = tokio::time::Instant::now() + SIGN_OF_LIFE_INTERVAL;
    let mut ticks = tokio::time::interval_at(first, SIGN_OF_LIFE_INTERVAL);
    loop {
        ticks.tick().await;
        let line = lock(&ledger).current.as_ref().and_then(|current| {
            let silent = current.last_output.elapsed();
            (silent >= SILENCE_BEFORE_SIGN && !current.verifying)
                .then(|| current.live.sign_of_life(silent))
        });
        if let Some(line) = line {
            // Not waited for: the console thread draws it when it gets to it.
            drop(console.show_transient(line));
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
                phase_attempt,
                attempt,
                of,
                prompt_path,
                ..
            } => {
                let live = LiveAttempt::new(phase_id.clone(), *phase_index, *phases);
                ledger.current = Some(Current {
                    last_output: live.started,
                    live,
                    title: title.clone(),
                    prompt_path: prompt_path.clone(),
                    verifying: false,
                });
                // The status line's own thread draws the new attempt.
                if self.mode == ProgressMode::Lines {
                    self.say(report::phase_banner(
                        phase_id,
                        *phase_index,
                        *phases,
                        title,
                        report::AttemptNumber {
                            of_phase: *phase_attempt,
                            in_run: *attempt,
                            of: *of,
                        },
                    ));
                }
            }
            RunEvent::OutputProgress {
                stdout_bytes,
                stderr_bytes,
                last_line,
            } => {
                if let Some(current) = ledger.current.as_mut() {
                    let bytes = stdout_bytes.saturating_add(*stderr_bytes);
                    if bytes > current.live.output_bytes {
                        current.last_output = Instant::now();
                    }
                    current.live.output_bytes = bytes;
                    if last_line.is_some() {
                        current.live.last_line = last_line.clone();
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
                verification,
                verification_failure,
                usage,
            } => {
                let current = ledger.current.take();
                let output_bytes = stdout_bytes.saturating_add(*stderr_bytes);
                // Under `--quiet` on a terminal too: above the status line, it stays on screen.
                if self.mode != ProgressMode::Quiet {
                    let line = report::phase_ended(
                        phase_id,
                        *status,
                        *duration_ms,
                        output_bytes,
                        Some(usage),
                    );
                    self.say(terminal::phase_end(&line, *status).into_owned());
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
                    verification: verification.as_ref().and_then(|record| {
                        Verification::read(*status, record, verification_failure.as_ref()).ok()
                    }),
                    usage: usage.clone(),
                });
            }
            // The check's header and output reach the console through the attempt's writer;
            // the status line names the check instead of the agent's last line.
            RunEvent::VerifyStarted {
                index,
                of,
                command_first_line,
                ..
            } => {
                if let Some(current) = ledger.current.as_mut() {
                    current.live.last_line =
                        Some(format!("verify {index} of {of}: {command_first_line}"));
                    current.last_output = Instant::now();
                    current.verifying = true;
                }
            }
            RunEvent::Activity { text, since } => {
                let Some(current) = ledger.current.as_mut() else {
                    return;
                };
                current.live.status = text.clone().map(|text| {
                    let since = since
                        .as_deref()
                        .and_then(|since| DateTime::parse_from_rfc3339(since).ok())
                        .map_or(record.at, |since| since.with_timezone(&Utc));
                    (text, since)
                });
                if self.mode == ProgressMode::Lines && self.terminal {
                    let line = report::status_change(&current.live.phase_id, text.as_deref());
                    drop(self.console.note(terminal::dim(&line).into_owned()));
                }
            }
            // In every mode: a notification that failed is news to whoever relies on it.
            RunEvent::BudgetUnenforceable { .. }
            | RunEvent::RetryScheduled { .. }
            | RunEvent::WatchdogLost { .. }
            | RunEvent::HookFailed { .. } => {
                if let Some(line) = report::event_line(&record.event, Utc::now()) {
                    self.say(line);
                }
            }
            RunEvent::SignalReceived { .. } => self.signal_received(),
            RunEvent::RunStarted { .. }
            | RunEvent::WorkerSpawned { .. }
            | RunEvent::StopRequested { .. }
            | RunEvent::IdleDeadlineExtended { .. }
            | RunEvent::GroupStopped { .. }
            | RunEvent::RetryDue { .. }
            | RunEvent::VerifyFinished { .. }
            | RunEvent::Usage { .. }
            | RunEvent::RunFinished { .. } => {}
        }
    }
}
