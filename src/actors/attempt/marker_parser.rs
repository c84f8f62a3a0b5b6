//! MarkerParser: owns the result-block framing state of each stream (never the output), so
//! scheduling between the two pipes can never join fragments into a result. Once both
//! streams ended it tells the attempt supervisor its verdict.

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::messages::{AttemptMsg, Output};
use crate::actors::notify;
use crate::domain::marker::{MarkerVerdict, StreamFramer, combine};
use crate::domain::output_stream::OutputStream;

pub(crate) struct MarkerParser;

pub(crate) struct MarkerArgs {
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    pub(crate) span: tracing::Span,
}

/// One stream's framer while it runs, then its verdict until both are reported.
struct Framing {
    framer: Option<StreamFramer>,
    verdict: Option<MarkerVerdict>,
}

impl Framing {
    fn new(stream: OutputStream) -> Self {
        Self {
            framer: Some(StreamFramer::new(stream)),
            verdict: None,
        }
    }
}

pub(crate) struct MarkerState {
    args: MarkerArgs,
    stdout: Framing,
    stderr: Framing,
}

impl Actor for MarkerParser {
    type Msg = Output;
    type State = MarkerState;
    type Arguments = MarkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Output>,
        args: MarkerArgs,
    ) -> Result<MarkerState, ActorProcessingErr> {
        Ok(MarkerState {
            args,
            stdout: Framing::new(OutputStream::Stdout),
            stderr: Framing::new(OutputStream::Stderr),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Output>,
        message: Output,
        state: &mut MarkerState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            Output::Chunk {
                stream,
                bytes,
                done,
            } => {
                if let Some(framer) = &mut state.framing(stream).framer {
                    framer.feed(&bytes);
                }
                drop(bytes);
                let _ = done.send(());
            }
            Output::Ended(stream) => {
                let framing = state.framing(stream);
                if let Some(framer) = framing.framer.take() {
                    framing.verdict = Some(framer.finish());
                }
                if state.stdout.verdict.is_some()
                    && state.stderr.verdict.is_some()
                    && let (Some(stdout), Some(stderr)) =
                        (state.stdout.verdict.take(), state.stderr.verdict.take())
                {
                    let verdict = combine(stdout, stderr);
                    log_verdict(&verdict, &state.args.span);
                    notify(&state.args.supervisor, AttemptMsg::Verdict(verdict));
                }
            }
        }
        Ok(())
    }
}

impl MarkerState {
    fn framing(&mut self, stream: OutputStream) -> &mut Framing {
        match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }
}

fn log_verdict(verdict: &MarkerVerdict, span: &tracing::Span) {
    let (kind, detail) = match verdict {
        MarkerVerdict::Result(block) => (block.kind.tag(), ""),
        MarkerVerdict::Missing(detail) => ("missing", detail.as_str()),
        MarkerVerdict::Invalid(detail) => ("invalid", detail.as_str()),
        MarkerVerdict::Multiple(detail) => ("multiple", detail.as_str()),
    };
    tracing::info!(parent: span, verdict = kind, detail, "marker verdict");
}
