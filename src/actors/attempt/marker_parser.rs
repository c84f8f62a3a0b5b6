//! MarkerParser: owns the per-stream result-block framing state. It keeps only framing state
//! (and the body of a candidate block), never the output, and gives its verdict on `Finish`.
//! Each stream has its own framer, so scheduling between the two pipes can never join
//! fragments into a result.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::domain::marker::{MarkerVerdict, StreamFramer, combine};
use crate::domain::output_stream::OutputStream;

pub(crate) enum MarkerMsg {
    /// The next bytes of `stream`, shared with the other consumers of the chunk; the reply
    /// comes after this actor dropped its reference.
    Feed {
        stream: OutputStream,
        bytes: Arc<Vec<u8>>,
        reply: RpcReplyPort<()>,
    },
    /// Both streams ended: the verdict over both.
    Finish { reply: RpcReplyPort<MarkerVerdict> },
}

pub(crate) struct MarkerParser;

pub(crate) struct MarkerState {
    stdout: Option<StreamFramer>,
    stderr: Option<StreamFramer>,
    /// The attempt's span: every record of the parser carries the run and attempt ids.
    span: tracing::Span,
}

impl Actor for MarkerParser {
    type Msg = MarkerMsg;
    type State = MarkerState;
    /// The attempt's span.
    type Arguments = tracing::Span;

    async fn pre_start(
        &self,
        _myself: ActorRef<MarkerMsg>,
        span: tracing::Span,
    ) -> Result<MarkerState, ActorProcessingErr> {
        Ok(MarkerState {
            stdout: Some(StreamFramer::new(OutputStream::Stdout)),
            stderr: Some(StreamFramer::new(OutputStream::Stderr)),
            span,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<MarkerMsg>,
        message: MarkerMsg,
        state: &mut MarkerState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        let _entered = span.enter();
        match message {
            MarkerMsg::Feed {
                stream,
                bytes,
                reply,
            } => {
                let framer = match stream {
                    OutputStream::Stdout => state.stdout.as_mut(),
                    OutputStream::Stderr => state.stderr.as_mut(),
                };
                if let Some(framer) = framer {
                    framer.feed(&bytes);
                }
                drop(bytes);
                let _ = reply.send(());
            }
            MarkerMsg::Finish { reply } => {
                let verdict = match (state.stdout.take(), state.stderr.take()) {
                    (Some(stdout), Some(stderr)) => combine(stdout.finish(), stderr.finish()),
                    _ => MarkerVerdict::Invalid("result framing was already finished".to_owned()),
                };
                let (kind, detail) = match &verdict {
                    MarkerVerdict::Result(block) => (block.kind.tag(), ""),
                    MarkerVerdict::Missing(detail) => ("missing", detail.as_str()),
                    MarkerVerdict::Invalid(detail) => ("invalid", detail.as_str()),
                    MarkerVerdict::Multiple(detail) => ("multiple", detail.as_str()),
                };
                tracing::info!(verdict = kind, detail, "marker verdict");
                let _ = reply.send(verdict);
            }
        }
        Ok(())
    }
}
