//! PipeReader: owns the read end of one of the worker's streams. Each `Read` message reads one
//! chunk, hands it to the output's consumers and waits until each is done with it before
//! reading again: one chunk in flight per stream (docs/architecture.md, "Flow control"). At the
//! end of the stream, or when the supervisor closes the readers, it tells them and stops.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef, RpcReplyPort};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tracing::Instrument;

use super::messages::{AttemptMsg, Output};
use crate::actors::notify;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::output_stream::OutputStream;

/// Largest chunk read at once: the pipe's capacity. Each chunk costs several hand-offs
/// between threads, so a fast producer's output travels in few, large chunks.
const CHUNK_SIZE: usize = 1024 * 1024;

/// The read end of one of the worker's pipes.
pub(crate) type Pipe = Box<dyn AsyncRead + Send + Unpin>;

pub(crate) enum ReaderMsg {
    Read,
}

pub(crate) struct PipeReader;

pub(crate) struct ReaderArgs {
    pub(crate) stream: OutputStream,
    pub(crate) pipe: Pipe,
    /// Where each chunk goes first: a writer that is gone fails the stream.
    pub(crate) writer: DerivedActorRef<Output>,
    /// The other consumers (the marker parser, the stop scanner when there is one).
    pub(crate) analysers: Vec<DerivedActorRef<Output>>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// Becomes true when the supervisor closes the readers.
    pub(crate) closed: watch::Receiver<bool>,
    pub(crate) span: tracing::Span,
}

pub(crate) struct ReaderState {
    args: ReaderArgs,
    buffer: Vec<u8>,
    /// The consumers were told the stream ended.
    ended: bool,
}

impl Drop for ReaderState {
    /// However the reader ends — its stream's end, a panic — the consumers hear that nothing
    /// more comes, so none waits for it.
    fn drop(&mut self) {
        self.end();
    }
}

enum Read {
    /// A chunk was handed on (or the read was interrupted): read again.
    Again,
    /// End of file, or why reading failed.
    End(Option<String>),
    /// The supervisor closed the readers.
    Closed,
}

impl Actor for PipeReader {
    type Msg = ReaderMsg;
    type State = ReaderState;
    type Arguments = ReaderArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ReaderMsg>,
        args: ReaderArgs,
    ) -> Result<ReaderState, ActorProcessingErr> {
        myself.send_message(ReaderMsg::Read)?;
        Ok(ReaderState {
            args,
            buffer: Vec::with_capacity(CHUNK_SIZE),
            ended: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ReaderMsg>,
        message: ReaderMsg,
        state: &mut ReaderState,
    ) -> Result<(), ActorProcessingErr> {
        let ReaderMsg::Read = message;
        let span = state.args.span.clone();
        let stream = state.args.stream;
        match state.read().instrument(span.clone()).await {
            Read::Again => myself.send_message(ReaderMsg::Read)?,
            Read::End(error) => {
                tracing::info!(parent: &span, stream = stream.name(), error = error.as_deref(), "pipe EOF");
                state.end();
                let ended = AttemptEvent::StreamEnded { stream, error };
                notify(&state.args.supervisor, ended.into());
                myself.stop(None);
            }
            Read::Closed => {
                tracing::info!(parent: &span, stream = stream.name(), "closing a pipe still held open");
                state.end();
                myself.stop(None);
            }
        }
        Ok(())
    }
}

impl ReaderState {
    /// Reads one chunk and waits until every consumer is done with it.
    async fn read(&mut self) -> Read {
        let stream = self.args.stream;
        self.buffer.clear();
        let read = tokio::select! {
            biased;
            _ = self.args.closed.wait_for(|closed| *closed) => return Read::Closed,
            read = self.args.pipe.read_buf(&mut self.buffer) => read,
        };
        match read {
            Ok(0) => return Read::End(None),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => return Read::Again,
            Err(error) => {
                return Read::End(Some(format!(
                    "failed reading agent {}: {error}",
                    stream.name()
                )));
            }
        }
        let bytes = Arc::new(std::mem::take(&mut self.buffer));
        let chunk = |done| Output::Chunk {
            stream,
            bytes: bytes.clone(),
            done,
        };
        let written = hand(&self.args.writer, chunk);
        let analysed: Vec<_> = self
            .args
            .analysers
            .iter()
            .filter_map(|analyser| hand(analyser, chunk))
            .collect();
        let writer_done = match written {
            Some(done) => done.await.is_ok(),
            None => false,
        };
        for done in analysed {
            // An analyser that stopped (only during teardown) costs the chunk its analysis.
            let _ = done.await;
        }
        // Every consumer dropped its reference before answering: the buffer is ours again.
        self.buffer = Arc::try_unwrap(bytes).unwrap_or_else(|_| Vec::with_capacity(CHUNK_SIZE));
        if !writer_done {
            return Read::End(Some(format!(
                "transcript writer stopped while reading agent {}",
                stream.name()
            )));
        }
        Read::Again
    }

    /// Tells the consumers that nothing more comes from this stream (once).
    fn end(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let stream = self.args.stream;
        for consumer in std::iter::once(&self.args.writer).chain(&self.args.analysers) {
            let _ = consumer.send_message(Output::Ended(stream));
        }
    }
}

/// Hands a chunk to a consumer; the receiver answers once the consumer is done with it
/// (`None` when the consumer is gone).
fn hand(
    consumer: &DerivedActorRef<Output>,
    chunk: impl FnOnce(RpcReplyPort<()>) -> Output,
) -> Option<ractor::concurrency::OneshotReceiver<()>> {
    let (done, answered) = ractor::concurrency::oneshot();
    consumer
        .send_message(chunk(done.into()))
        .ok()
        .map(|()| answered)
}
