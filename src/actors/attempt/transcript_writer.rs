//! TranscriptWriter: owns the attempt's transcript file and its echo on the live console, with
//! the live filters; the order it takes chunks in is the transcript's (docs/architecture.md,
//! "Flow control"). After the trailer it writes the Verify checks' records too.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::Instrument;

use super::deadline_timer::{NOTICE_INTERVAL, TimerMsg};
use super::messages::{AttemptMsg, Output};
use crate::actors::observer::Emitter;
use crate::actors::{notify, off_runtime};
use crate::domain::events::RunEvent;
use crate::domain::failure::ExecutionFailure;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::marker::{LIVE_HOLD_LIMIT, LiveFilter};
use crate::domain::outcome::OutputBytes;
use crate::domain::output_stream::{LastLine, OutputStream};
use crate::domain::transcript::{CheckFooter, Trailer, render_check_footer, render_trailer};
use crate::platform::console::Console;
use crate::platform::durable::TranscriptFile;

/// Output progress events are emitted at most once per this interval; output held back by it
/// is reported when it ends, so the last chunk of a burst is never left unreported.
const PROGRESS_EVENT_INTERVAL: Duration = Duration::from_millis(250);

/// Once the console is bounded, how long one echo may take before the console is dropped.
/// Well inside the attempt's drain limit (2 s), so the pipes still drain into the transcript.
pub(crate) const ECHO_LIMIT: Duration = Duration::from_secs(1);

pub(crate) enum WriterMsg {
    Output(Output),
    /// Once both streams ended: flush the live filters, write the trailer and report it
    /// ([`AttemptMsg::TrailerWritten`]).
    Finish(Box<Trailer>),
    /// [`LIVE_HOLD_LIMIT`] after the live filter of `stream` began hold number `hold`.
    HoldElapsed {
        stream: OutputStream,
        hold: u64,
    },
    ProgressDue,
    /// Part of a Verify check's record, after the trailer; the reply comes once it is in
    /// the transcript and on the console (backpressure for the check's output).
    Verify {
        part: VerifyOutput,
        reply: RpcReplyPort<()>,
    },
}

impl From<Output> for WriterMsg {
    fn from(output: Output) -> Self {
        Self::Output(output)
    }
}

/// Lets the pipe readers hand output through a `DerivedActorRef<Output>`.
impl TryFrom<WriterMsg> for Output {
    type Error = WriterMsg;

    fn try_from(message: WriterMsg) -> Result<Self, WriterMsg> {
        match message {
            WriterMsg::Output(output) => Ok(output),
            other => Err(other),
        }
    }
}

/// What a Verify check adds to the transcript, in order.
pub(crate) enum VerifyOutput {
    /// `--- verify N: <first line> ---`, without its line end.
    Header(String),
    Output(Vec<u8>),
    Footer(Box<CheckFooter>),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputError {
    #[error("{path}: {source}")]
    Transcript { path: String, source: io::Error },
    /// An earlier transcript write failed, so the trailer would close an incomplete record.
    #[error("{path}: transcript is incomplete")]
    TranscriptIncomplete { path: String },
    #[error("transcript writer stopped before the trailer was written")]
    WriterStopped,
}

pub(crate) struct TranscriptWriter;

pub(crate) struct WriterArgs {
    pub(crate) transcript: TranscriptFile,
    pub(crate) transcript_path: String,
    /// The run's console (`RunArgs::console`).
    pub(crate) console: Option<Arc<Console>>,
    /// Where output progress goes, as events of `attempt_id`.
    pub(crate) events: Emitter,
    pub(crate) attempt_id: String,
    pub(crate) timer: Option<ActorRef<TimerMsg>>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// Becomes true when the lifecycle bounds the console: a watch channel, because the writer
    /// may be waiting on the console inside a handler, where no message reaches it.
    pub(crate) console_bound: watch::Receiver<bool>,
    pub(crate) span: tracing::Span,
}

#[derive(Default)]
struct EchoStream {
    filter: LiveFilter,
    /// The echo of this stream failed (the viewer went away): nothing more is shown.
    stopped: bool,
    /// Numbers the holds of the live filter, so a stale time-bound message is ignored.
    hold: u64,
    /// The filter holds text back since hold number `hold`.
    holding: bool,
}

pub(crate) struct WriterState {
    args: WriterArgs,
    stdout: EchoStream,
    stderr: EchoStream,
    /// `None` with `--quiet`, or once dropped after a stall.
    console: Option<Arc<Console>>,
    /// Reused for the visible part of a chunk: a fresh allocation per echoed chunk raises
    /// the peak RSS of a fast stream.
    visible: Vec<u8>,
    output: OutputBytes,
    ends_with_newline: bool,
    transcript_failed: bool,
    /// What happened to the live output (`live_output_…` lines).
    console_notes: Vec<String>,
    last_activity_notice: Option<Instant>,
    last_line: LastLine,
    last_progress_event: Option<Instant>,
    /// Output arrived since the last progress event; a [`WriterMsg::ProgressDue`] is on its way.
    progress_held: bool,
    /// The running Verify check's output so far ended a line (or there is none yet).
    check_ends_with_newline: bool,
    /// The streams still open: the trailer waits until neither is.
    open: Vec<OutputStream>,
    trailer: Option<Box<Trailer>>,
}

enum EchoEnd {
    Written,
    Failed(io::Error),
    /// Not written within [`ECHO_LIMIT`] after the console was bounded.
    Stalled,
}

impl Actor for TranscriptWriter {
    type Msg = WriterMsg;
    type State = WriterState;
    type Arguments = WriterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<WriterMsg>,
        args: WriterArgs,
    ) -> Result<WriterState, ActorProcessingErr> {
        let mut args = args;
        let console = args.console.take();
        Ok(WriterState {
            args,
            console,
            stdout: EchoStream::default(),
            stderr: EchoStream::default(),
            visible: Vec::new(),
            output: OutputBytes::default(),
            ends_with_newline: true,
            transcript_failed: false,
            console_notes: Vec::new(),
            last_activity_notice: None,
            last_line: LastLine::default(),
            last_progress_event: None,
            progress_held: false,
            check_ends_with_newline: true,
            open: vec![OutputStream::Stdout, OutputStream::Stderr],
            trailer: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<WriterMsg>,
        message: WriterMsg,
        state: &mut WriterState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.args.span.clone();
        state.on_message(message, &myself).instrument(span).await;
        Ok(())
    }
}

impl WriterState {
    async fn on_message(&mut self, message: WriterMsg, myself: &ActorRef<WriterMsg>) {
        match message {
            WriterMsg::Output(Output::Chunk {
                stream,
                bytes,
                done,
            }) => {
                self.take_chunk(stream, bytes, myself).await;
                let _ = done.send(());
            }
            WriterMsg::Output(Output::Ended(stream)) => {
                self.open.retain(|open| *open != stream);
                self.finish_when_ended().await;
            }
            WriterMsg::Finish(trailer) => {
                self.trailer = Some(trailer);
                self.finish_when_ended().await;
            }
            WriterMsg::HoldElapsed { stream, hold } => self.release_hold(stream, hold).await,
            WriterMsg::ProgressDue => {
                if std::mem::take(&mut self.progress_held) {
                    self.emit_progress(Instant::now());
                }
            }
            WriterMsg::Verify { part, reply } => {
                self.take_verify_output(part).await;
                let _ = reply.send(());
            }
        }
    }

    /// Writes the trailer once it is asked for and both streams ended (every chunk is in).
    async fn finish_when_ended(&mut self) {
        if !self.open.is_empty() {
            return;
        }
        let Some(mut trailer) = self.trailer.take() else {
            return;
        };
        // The output held back by the interval, before the attempt's later events.
        if std::mem::take(&mut self.progress_held) {
            self.emit_progress(Instant::now());
        }
        self.flush_live_filters().await;
        trailer.console_notes = std::mem::take(&mut self.console_notes);
        let error = self.write_trailer(&trailer).await.err();
        notify(
            &self.args.supervisor,
            AttemptMsg::TrailerWritten {
                error: error.map(|error| error.to_string()),
                output: self.output,
            },
        );
    }

    /// Records a part of a Verify check's run: into the transcript, and verbatim on the
    /// console's stderr (stdout stays the caller's). A failed transcript write is the
    /// attempt's output failure, as for the agent's output.
    async fn take_verify_output(&mut self, part: VerifyOutput) {
        let bytes = match part {
            VerifyOutput::Header(header) => {
                self.check_ends_with_newline = true;
                format!("{header}\n").into_bytes()
            }
            VerifyOutput::Output(bytes) => {
                if let Some(&last) = bytes.last() {
                    self.check_ends_with_newline = last == b'\n';
                }
                bytes
            }
            VerifyOutput::Footer(footer) => {
                let mut text = render_check_footer(&footer, self.check_ends_with_newline);
                // What happened to the live output since the trailer (or the last footer).
                for note in std::mem::take(&mut self.console_notes) {
                    text.push_str(&note);
                    text.push('\n');
                }
                text.into_bytes()
            }
        };
        if bytes.is_empty() {
            return;
        }
        let chunk = Arc::new(bytes);
        let echo = match &self.console {
            Some(console) if !self.stderr.stopped => Some(Echo {
                written: console.submit(OutputStream::Stderr, chunk.clone()),
                copy: None,
            }),
            _ => None,
        };
        self.record(&chunk).await;
        if let Some(echo) = echo {
            self.finish_echo(OutputStream::Stderr, echo).await;
        }
    }

    /// Appends off the runtime threads; a failed append stops the transcript and fails the
    /// output.
    async fn record(&mut self, bytes: &[u8]) {
        if self.transcript_failed {
            return;
        }
        let transcript = &self.args.transcript;
        if let Err(source) = off_runtime(|| transcript.append(bytes)).await {
            self.transcript_failed = true;
            self.fail(OutputError::Transcript {
                path: self.args.transcript_path.clone(),
                source,
            });
        }
    }

    async fn take_chunk(
        &mut self,
        stream: OutputStream,
        chunk: Arc<Vec<u8>>,
        myself: &ActorRef<WriterMsg>,
    ) {
        match stream {
            OutputStream::Stdout => self.output.stdout += chunk.len() as u64,
            OutputStream::Stderr => self.output.stderr += chunk.len() as u64,
        }
        if let Some(&last) = chunk.last() {
            self.ends_with_newline = last == b'\n';
        }
        self.last_line.feed(stream, &chunk);
        self.note_activity();
        self.report_progress(myself);
        // The console's thread echoes the chunk while the transcript append runs here.
        let echoed = self.start_echo(stream, &chunk);
        self.watch_hold(stream, myself);
        self.record(&chunk).await;
        if let Some(echoed) = echoed {
            self.finish_echo(stream, echoed).await;
        }
    }

    fn report_progress(&mut self, myself: &ActorRef<WriterMsg>) {
        let now = Instant::now();
        match self.last_progress_event {
            Some(last) if now.duration_since(last) < PROGRESS_EVENT_INTERVAL => {
                if !self.progress_held {
                    self.progress_held = true;
                    let due = PROGRESS_EVENT_INTERVAL - now.duration_since(last);
                    myself.send_after(due, || WriterMsg::ProgressDue);
                }
            }
            _ => self.emit_progress(now),
        }
    }

    fn emit_progress(&mut self, now: Instant) {
        self.last_progress_event = Some(now);
        self.args.events.emit(
            Some(&self.args.attempt_id),
            RunEvent::OutputProgress {
                stdout_bytes: self.output.stdout,
                stderr_bytes: self.output.stderr,
                last_line: self.last_line.line(),
            },
        );
    }

    fn note_activity(&mut self) {
        let Some(timer) = &self.args.timer else {
            return;
        };
        let now = Instant::now();
        if self
            .last_activity_notice
            .is_none_or(|last| now.duration_since(last) >= NOTICE_INTERVAL)
        {
            self.last_activity_notice = Some(now);
            notify(timer, TimerMsg::Output);
        }
    }

    fn echo_stream(&mut self, stream: OutputStream) -> &mut EchoStream {
        match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }

    /// Filters the chunk for the console and hands the visible part to the console thread:
    /// the chunk itself when it passes through unchanged (the common case), else a copy.
    fn start_echo(&mut self, stream: OutputStream, chunk: &Arc<Vec<u8>>) -> Option<Echo> {
        let echo = match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        };
        if echo.stopped {
            return None;
        }
        let console = self.console.as_ref()?;
        let filter = &mut echo.filter;
        if filter.pass_through(chunk) {
            return Some(Echo {
                written: console.submit(stream, chunk.clone()),
                copy: None,
            });
        }
        let mut visible = std::mem::take(&mut self.visible);
        visible.clear();
        filter.filter(chunk, &mut visible);
        if visible.is_empty() {
            self.visible = visible;
            return None;
        }
        let copy = Arc::new(visible);
        Some(Echo {
            written: console.submit(stream, copy.clone()),
            copy: Some(copy),
        })
    }

    async fn finish_echo(&mut self, stream: OutputStream, echo: Echo) {
        let end = self.wait_for_echo(echo.written).await;
        if let Some(copy) = echo.copy {
            // The console thread dropped its reference before reporting: reuse the buffer.
            // (After a stall it still holds it, and a fresh buffer is used.)
            self.visible = Arc::try_unwrap(copy).unwrap_or_default();
        }
        match end {
            EchoEnd::Written => {}
            EchoEnd::Failed(source) => {
                // The viewer went away (EPIPE) or the console broke: stop showing this stream;
                // the worker goes on and the transcript keeps every byte.
                tracing::info!(stream = stream.name(), error = %source, "live output stopped");
                self.echo_stream(stream).stopped = true;
                self.console_notes.push(format!(
                    "live_output_stopped: {}: {}; the rest of it was not shown live",
                    stream.name(),
                    source
                ));
            }
            EchoEnd::Stalled => {
                tracing::info!(
                    stream = stream.name(),
                    "the console took no output while the attempt was stopping; dropping it"
                );
                // This attempt shows nothing more; the run's console thread finishes the
                // write it is stuck in on its own, and nothing of this attempt queues behind it.
                self.console = None;
                self.console_notes.push(format!(
                    "live_output_dropped: the console took no output for {} s while the attempt was ending; the rest was not shown live",
                    ECHO_LIMIT.as_secs()
                ));
            }
        }
    }

    /// Waits for a console write: as long as it takes while the worker runs (backpressure),
    /// at most [`ECHO_LIMIT`] once the console is bounded.
    async fn wait_for_echo(&mut self, mut written: oneshot::Receiver<io::Result<()>>) -> EchoEnd {
        let ended = |result: Result<io::Result<()>, oneshot::error::RecvError>| match result {
            Ok(Ok(())) => EchoEnd::Written,
            Ok(Err(error)) => EchoEnd::Failed(error),
            Err(_) => EchoEnd::Failed(io::Error::other("console thread stopped")),
        };
        if !*self.args.console_bound.borrow() {
            tokio::select! {
                result = &mut written => return ended(result),
                // A closed channel (the supervisor is gone) bounds the console as well.
                _ = self.args.console_bound.wait_for(|bound| *bound) => {}
            }
        }
        match tokio::time::timeout(ECHO_LIMIT, written).await {
            Ok(result) => ended(result),
            Err(_) => EchoEnd::Stalled,
        }
    }

    /// Starts the time bound ([`LIVE_HOLD_LIMIT`]) of a hold that began with this chunk, or
    /// forgets one that ended.
    fn watch_hold(&mut self, stream: OutputStream, myself: &ActorRef<WriterMsg>) {
        let echo = self.echo_stream(stream);
        let holding = echo.filter.is_holding();
        if holding && !echo.holding {
            echo.hold += 1;
            let hold = echo.hold;
            myself.send_after(LIVE_HOLD_LIMIT, move || WriterMsg::HoldElapsed {
                stream,
                hold,
            });
        }
        echo.holding = holding;
    }

    async fn release_hold(&mut self, stream: OutputStream, hold: u64) {
        let echo = self.echo_stream(stream);
        if !echo.holding || echo.hold != hold {
            return;
        }
        echo.holding = false;
        tracing::debug!(
            stream = stream.name(),
            "releasing live output held back too long"
        );
        let mut released = Vec::new();
        echo.filter.finish(&mut released);
        self.show(stream, released).await;
    }

    /// Echoes bytes that are not a chunk (released or flushed by the live filter).
    async fn show(&mut self, stream: OutputStream, bytes: Vec<u8>) {
        if bytes.is_empty() || self.echo_stream(stream).stopped {
            return;
        }
        let Some(console) = &self.console else {
            return;
        };
        let echo = Echo {
            written: console.submit(stream, Arc::new(bytes)),
            copy: None,
        };
        self.finish_echo(stream, echo).await;
    }

    async fn flush_live_filters(&mut self) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let echo = self.echo_stream(stream);
            echo.holding = false;
            let mut held = Vec::new();
            echo.filter.finish(&mut held);
            self.show(stream, held).await;
        }
    }

    async fn write_trailer(&mut self, trailer: &Trailer) -> Result<(), OutputError> {
        if self.transcript_failed {
            return Err(OutputError::TranscriptIncomplete {
                path: self.args.transcript_path.clone(),
            });
        }
        let bytes_seen = self.output.stdout + self.output.stderr;
        let text = render_trailer(trailer, bytes_seen, self.ends_with_newline);
        // No fsync: the transcript is evidence, and the page cache already protects it from a
        // handler crash; only state and outcomes pay for power-loss durability.
        let transcript = &self.args.transcript;
        off_runtime(|| transcript.append(text.as_bytes()))
            .await
            .map_err(|source| OutputError::Transcript {
                path: self.args.transcript_path.clone(),
                source,
            })
    }

    fn fail(&self, error: OutputError) {
        tracing::info!(%error, "output failure");
        let failed = AttemptEvent::Failed(ExecutionFailure::Output {
            detail: error.to_string(),
        });
        notify(&self.args.supervisor, failed.into());
    }
}

struct Echo {
    written: oneshot::Receiver<std::io::Result<()>>,
    /// The filtered copy being written, to reuse afterwards (`None` when the chunk itself is).
    copy: Option<Arc<Vec<u8>>>,
}
