//! TranscriptWriter: owns the attempt's transcript file and the handler's live console.
//!
//! Both pipe readers hand it their chunks; the order in which it handles them *is* the arrival
//! order recorded everywhere. Each chunk, shared as an `Arc`, goes at once to the marker
//! parser, the stop scanner, the transcript thread (every byte, as it arrives) and the console
//! thread (minus any result block, unless `--quiet`); they work concurrently and the reader
//! gets its buffer back only when all of them are done. The file and terminal writes happen on
//! threads of their own ([`crate::platform::write_thread`]), never on a runtime worker.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::attempt_supervisor::AttemptMsg;
use super::deadline_timer::TimerMsg;
use super::marker_parser::MarkerMsg;
use super::notify;
use super::observer::Emitter;
use super::stop_scanner::ScanMsg;
use crate::domain::events::RunEvent;
use crate::domain::marker::LiveFilter;
use crate::domain::outcome::OutputBytes;
use crate::domain::output_stream::{LastLine, OutputStream};
use crate::domain::transcript::{Trailer, render_trailer};
use crate::platform::console::Console;
use crate::platform::transcript_file::TranscriptFile;

/// Output progress events are emitted at most once per this interval (a live status line
/// redraws a few times a second; the event stream keeps fewer).
const PROGRESS_EVENT_INTERVAL: Duration = Duration::from_millis(250);

/// Output notifications to the deadline timer are coalesced to at most one per this interval.
const ACTIVITY_NOTIFY_INTERVAL: Duration = Duration::from_millis(20);

pub enum WriterMsg {
    /// A chunk read from `stream`; the reply returns the buffer for reuse.
    Chunk {
        stream: OutputStream,
        bytes: Vec<u8>,
        reply: RpcReplyPort<Vec<u8>>,
    },
    /// Flush the live filters and write the trailer; replies with the output sizes too.
    Finish {
        trailer: Trailer,
        reply: RpcReplyPort<(Result<(), OutputError>, OutputBytes)>,
    },
}

/// Why output could not be recorded or shown.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: {source}")]
    Transcript { path: String, source: io::Error },
    /// An earlier transcript write failed, so the trailer would close an incomplete record.
    #[error("{path}: transcript is incomplete")]
    TranscriptIncomplete { path: String },
    #[error("transcript writer stopped before the trailer was written")]
    WriterStopped,
    #[error("failed writing live output to handler {}: {source}", .stream.name())]
    Console {
        stream: OutputStream,
        source: io::Error,
    },
}

pub struct TranscriptWriter;

pub struct WriterArgs {
    pub transcript: TranscriptFile,
    pub transcript_path: String,
    /// The run's live console; `None` with `--quiet`.
    pub console: Option<Arc<Console>>,
    /// Where output progress goes, as events of `attempt_id`.
    pub events: Emitter,
    pub attempt_id: String,
    pub marker: ActorRef<MarkerMsg>,
    pub scanner: Option<ActorRef<ScanMsg>>,
    pub timer: Option<ActorRef<TimerMsg>>,
    pub supervisor: ActorRef<AttemptMsg>,
}

pub struct WriterState {
    args: WriterArgs,
    stdout_filter: LiveFilter,
    stderr_filter: LiveFilter,
    /// The live console, unless `--quiet`.
    console: Option<Arc<Console>>,
    /// Reused buffer for the visible part of a chunk.
    visible: Vec<u8>,
    bytes_seen: u64,
    output: OutputBytes,
    ends_with_newline: bool,
    transcript_failed: bool,
    console_failed: bool,
    last_activity_notice: Option<Instant>,
    last_line: LastLine,
    last_progress_event: Option<Instant>,
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
            stdout_filter: LiveFilter::new(),
            stderr_filter: LiveFilter::new(),
            visible: Vec::new(),
            bytes_seen: 0,
            output: OutputBytes::default(),
            ends_with_newline: true,
            transcript_failed: false,
            console_failed: false,
            last_activity_notice: None,
            last_line: LastLine::default(),
            last_progress_event: None,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<WriterMsg>,
        message: WriterMsg,
        state: &mut WriterState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WriterMsg::Chunk {
                stream,
                bytes,
                reply,
            } => {
                let bytes = state.take_chunk(stream, bytes).await;
                let _ = reply.send(bytes);
            }
            WriterMsg::Finish { trailer, reply } => {
                state.flush_live_filters().await;
                let written = state.write_trailer(&trailer).await;
                let _ = reply.send((written, state.output));
            }
        }
        Ok(())
    }
}

impl WriterState {
    async fn take_chunk(&mut self, stream: OutputStream, bytes: Vec<u8>) -> Vec<u8> {
        self.bytes_seen += bytes.len() as u64;
        match stream {
            OutputStream::Stdout => self.output.stdout += bytes.len() as u64,
            OutputStream::Stderr => self.output.stderr += bytes.len() as u64,
        }
        if let Some(&last) = bytes.last() {
            self.ends_with_newline = last == b'\n';
        }
        self.last_line.feed(stream, &bytes);
        self.note_activity();
        self.report_progress();
        // The marker parser and the stop scanner start on the shared chunk first, so that the
        // transcript write and the console echo here overlap their work; all of it is done
        // before the buffer goes back to the reader.
        let chunk = Arc::new(bytes);
        let framed = request(&self.args.marker, |reply| MarkerMsg::Feed {
            stream,
            bytes: chunk.clone(),
            reply,
        });
        let scanned = self.args.scanner.as_ref().map(|scanner| {
            request(scanner, |reply| ScanMsg::Feed {
                bytes: chunk.clone(),
                reply,
            })
        });
        let recorded =
            (!self.transcript_failed).then(|| self.args.transcript.append(chunk.clone()));
        let echoed = self.start_echo(stream, &chunk);
        if let Some(framed) = framed {
            let _ = framed.await;
        }
        if let Some(Some(scanned)) = scanned {
            let _ = scanned.await;
        }
        if let Some(recorded) = recorded {
            let result = recorded
                .await
                .unwrap_or_else(|_| Err(io::Error::other("transcript thread stopped")));
            if let Err(source) = result {
                self.transcript_failed = true;
                self.fail(OutputError::Transcript {
                    path: self.args.transcript_path.clone(),
                    source,
                });
            }
        }
        if let Some(echoed) = echoed {
            self.finish_echo(stream, echoed).await;
        }
        // Every consumer dropped its reference before replying; the clone is a fallback only.
        Arc::try_unwrap(chunk).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// Emits the output so far, at most once per [`PROGRESS_EVENT_INTERVAL`].
    fn report_progress(&mut self) {
        let now = Instant::now();
        if self
            .last_progress_event
            .is_some_and(|last| now.duration_since(last) < PROGRESS_EVENT_INTERVAL)
        {
            return;
        }
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

    /// Tells the deadline timer about output, at most once per interval.
    fn note_activity(&mut self) {
        let Some(timer) = &self.args.timer else {
            return;
        };
        let now = Instant::now();
        if self
            .last_activity_notice
            .is_none_or(|last| now.duration_since(last) >= ACTIVITY_NOTIFY_INTERVAL)
        {
            self.last_activity_notice = Some(now);
            notify(timer, TimerMsg::OutputObserved);
        }
    }

    /// Filters the chunk for the console and hands the visible part to the console thread:
    /// the chunk itself when it passes through unchanged (the common case), else a copy.
    fn start_echo(&mut self, stream: OutputStream, chunk: &Arc<Vec<u8>>) -> Option<Echo> {
        if self.console_failed {
            return None;
        }
        let console = self.console.as_ref()?;
        let filter = match stream {
            OutputStream::Stdout => &mut self.stdout_filter,
            OutputStream::Stderr => &mut self.stderr_filter,
        };
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
        let result = echo
            .written
            .await
            .unwrap_or_else(|_| Err(io::Error::other("console thread stopped")));
        if let Some(copy) = echo.copy {
            // The console thread dropped its reference before reporting: reuse the buffer.
            self.visible = Arc::try_unwrap(copy).unwrap_or_default();
        }
        if let Err(source) = result {
            self.console_failed = true;
            self.fail(OutputError::Console { stream, source });
        }
    }

    async fn flush_live_filters(&mut self) {
        if self.console.is_none() || self.console_failed {
            return;
        }
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let mut held = Vec::new();
            match stream {
                OutputStream::Stdout => self.stdout_filter.finish(&mut held),
                OutputStream::Stderr => self.stderr_filter.finish(&mut held),
            }
            if let (false, Some(console)) = (held.is_empty(), &self.console) {
                let echo = Echo {
                    written: console.submit(stream, Arc::new(held)),
                    copy: None,
                };
                self.finish_echo(stream, echo).await;
            }
        }
    }

    async fn write_trailer(&mut self, trailer: &Trailer) -> Result<(), OutputError> {
        if self.transcript_failed {
            return Err(OutputError::TranscriptIncomplete {
                path: self.args.transcript_path.clone(),
            });
        }
        let text = render_trailer(trailer, self.bytes_seen, self.ends_with_newline);
        // No fsync: the transcript is evidence, and the page cache already protects it from a
        // handler crash; only state and outcomes pay for power-loss durability.
        self.args
            .transcript
            .append(Arc::new(text.into_bytes()))
            .await
            .unwrap_or_else(|_| Err(io::Error::other("transcript thread stopped")))
            .map_err(|source| OutputError::Transcript {
                path: self.args.transcript_path.clone(),
                source,
            })
    }

    fn fail(&self, error: OutputError) {
        tracing::info!(%error, "output failure");
        notify(
            &self.args.supervisor,
            AttemptMsg::OutputFailed(error.to_string()),
        );
    }
}

/// Hands a shared chunk to a consumer actor and waits until it is done with it. A consumer
/// that stopped (only possible during teardown) costs the chunk nothing but its analysis.
/// Sends a request at once and returns the receiver for its reply (`None` when the actor is
/// gone: a stopped consumer must not stall the output).
fn request<M: ractor::Message>(
    actor: &ActorRef<M>,
    message: impl FnOnce(RpcReplyPort<()>) -> M,
) -> Option<ractor::concurrency::OneshotReceiver<()>> {
    let (reply, replied) = ractor::concurrency::oneshot();
    actor.cast(message(reply.into())).ok().map(|()| replied)
}

/// A console write in progress.
struct Echo {
    written: oneshot::Receiver<std::io::Result<()>>,
    /// The filtered copy being written, to reuse afterwards (`None` when the chunk itself is).
    copy: Option<Arc<Vec<u8>>>,
}
