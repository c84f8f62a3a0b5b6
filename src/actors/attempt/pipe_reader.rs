//! PipeReader: owns the read end of one child stream.
//!
//! The read loop runs in a task (a blocked read inside a handler would make the actor deaf to
//! `Close`). Each chunk is handed to the transcript writer with a *call*: the loop waits for
//! the writer's reply — which returns the buffer for reuse — before reading again. One chunk in
//! flight per stream bounds memory whatever the child writes, and a full pipe then slows the
//! child down: backpressure end to end, despite ractor's unbounded mailboxes.

use futures_util::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::messages::AttemptMsg;
use super::transcript_writer::WriterMsg;
use crate::actors::notify;
use crate::domain::output_stream::OutputStream;

/// Largest chunk handed on at once: the pipe's capacity. Each chunk costs several
/// cross-thread hand-offs, so a fast producer's output travels in few, large chunks.
pub(crate) const CHUNK_SIZE: usize = 1024 * 1024;
/// The buffer a stream starts with. Most streams of a short attempt carry a few lines; a
/// chunk-sized buffer for each would be a fresh mapping of its own, and its unmapping a TLB
/// shootdown across the handler's threads, for every stream of every attempt. A stream whose
/// chunk fills this buffer gets a chunk-sized one from then on.
const FIRST_BUFFER: usize = 64 * 1024;
/// A chunk is topped up from the pipe only while at least this much room is left.
const MIN_TOP_UP: usize = 16 * 1024;

pub(crate) enum ReaderMsg {
    /// Stop reading and close our read end (used when a process outside the group keeps the
    /// pipe open after the group is gone).
    Close,
}

pub(crate) struct PipeReader;

pub(crate) struct ReaderArgs {
    pub(crate) stream: OutputStream,
    pub(crate) pipe: Box<dyn AsyncRead + Send + Unpin>,
    pub(crate) writer: ActorRef<WriterMsg>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// The attempt's span, so the read loop's events carry the attempt id.
    pub(crate) span: tracing::Span,
}

pub(crate) struct ReaderState {
    stream: OutputStream,
    task: JoinHandle<()>,
}

impl Actor for PipeReader {
    type Msg = ReaderMsg;
    type State = ReaderState;
    type Arguments = ReaderArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ReaderMsg>,
        args: ReaderArgs,
    ) -> Result<ReaderState, ActorProcessingErr> {
        let stream = args.stream;
        let span = args.span.clone();
        let task = tokio::spawn(read_loop(args).instrument(span));
        Ok(ReaderState { stream, task })
    }

    async fn handle(
        &self,
        myself: ActorRef<ReaderMsg>,
        message: ReaderMsg,
        state: &mut ReaderState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ReaderMsg::Close => {
                if !state.task.is_finished() {
                    tracing::info!(
                        stream = state.stream.name(),
                        "closing a pipe still held open"
                    );
                }
                state.task.abort();
                myself.stop(None);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ReaderMsg>,
        state: &mut ReaderState,
    ) -> Result<(), ActorProcessingErr> {
        state.task.abort();
        Ok(())
    }
}

async fn read_loop(args: ReaderArgs) {
    let ReaderArgs {
        stream,
        mut pipe,
        writer,
        supervisor,
        span: _,
    } = args;
    let mut buffer = Vec::with_capacity(FIRST_BUFFER);
    let mut limit = FIRST_BUFFER;
    let mut at_eof = false;
    let error = loop {
        if at_eof {
            break None;
        }
        buffer.clear();
        match pipe.read_buf(&mut buffer).await {
            Ok(0) => break None,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => break Some(format!("failed reading agent {}: {error}", stream.name())),
        }
        // Take whatever else is already in the pipe, without waiting: a fast producer then
        // costs one hand-off per full chunk instead of one per write it made.
        while buffer.len() + MIN_TOP_UP <= limit {
            match pipe.read_buf(&mut buffer).now_or_never() {
                Some(Ok(0)) => {
                    at_eof = true;
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            }
        }
        limit = next_limit(buffer.len(), limit);
        let chunk = std::mem::take(&mut buffer);
        match writer
            .call(
                |reply: RpcReplyPort<Vec<u8>>| WriterMsg::Chunk {
                    stream,
                    bytes: chunk,
                    reply,
                },
                None,
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(returned)) => buffer = returned,
            _ => {
                break Some(format!(
                    "transcript writer stopped while reading agent {}",
                    stream.name()
                ));
            }
        }
        if buffer.capacity() < limit {
            buffer.reserve(limit);
        }
    };
    tracing::info!(stream = stream.name(), error = error.as_deref(), "pipe EOF");
    notify(&supervisor, AttemptMsg::StreamEnded { stream, error });
}

/// The buffer size for the next chunk: a chunk that left too little room to top it up came
/// from a fast producer, whose output travels in full-sized chunks from then on.
fn next_limit(chunk_len: usize, limit: usize) -> usize {
    if chunk_len + MIN_TOP_UP > limit {
        CHUNK_SIZE
    } else {
        limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_grows_to_full_chunks_once_a_chunk_fills_its_buffer() {
        assert_eq!(next_limit(36, FIRST_BUFFER), FIRST_BUFFER, "a few lines");
        assert_eq!(
            next_limit(FIRST_BUFFER - MIN_TOP_UP, FIRST_BUFFER),
            FIRST_BUFFER,
            "room left for a top-up"
        );
        assert_eq!(
            next_limit(FIRST_BUFFER - MIN_TOP_UP + 1, FIRST_BUFFER),
            CHUNK_SIZE
        );
        assert_eq!(next_limit(FIRST_BUFFER, FIRST_BUFFER), CHUNK_SIZE);
        assert_eq!(next_limit(10, CHUNK_SIZE), CHUNK_SIZE, "never shrinks back");
    }
}
