//! StopScanner: owns the stop-regex scanning state over the combined output in arrival order,
//! never the output itself ([`crate::domain::stop_regex`]). The first match is reported at
//! once; once both streams ended it reports its last word, which may be a match only the real
//! end of input decides (`$`, `\z`, a trailing `\b`).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::messages::{AttemptMsg, Output};
use crate::actors::notify;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::output_stream::OutputStream;
use crate::domain::stop_regex::{StopMatch, StopPatterns, StopScanner as Scanner};

pub(crate) struct StopScanner;

pub(crate) struct ScanArgs {
    pub(crate) patterns: Arc<StopPatterns>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    pub(crate) span: tracing::Span,
}

pub(crate) struct ScanState {
    scanner: Scanner,
    supervisor: ActorRef<AttemptMsg>,
    matched: Option<StopMatch>,
    /// The streams still open; the last word comes when neither is.
    open: Vec<OutputStream>,
    span: tracing::Span,
}

impl Actor for StopScanner {
    type Msg = Output;
    type State = ScanState;
    type Arguments = ScanArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Output>,
        args: ScanArgs,
    ) -> Result<ScanState, ActorProcessingErr> {
        Ok(ScanState {
            scanner: Scanner::new(args.patterns),
            supervisor: args.supervisor,
            matched: None,
            open: vec![OutputStream::Stdout, OutputStream::Stderr],
            span: args.span,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Output>,
        message: Output,
        state: &mut ScanState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            Output::Chunk { bytes, done, .. } => {
                if state.matched.is_none()
                    && let Some(found) = state.scanner.feed(&bytes)
                {
                    tracing::info!(parent: &state.span, pattern = %found.pattern, "stop regex matched");
                    let matched = AttemptEvent::StopRegexMatched(found.clone());
                    notify(&state.supervisor, matched.into());
                    state.matched = Some(found);
                }
                drop(bytes);
                let _ = done.send(());
            }
            Output::Ended(stream) => {
                let was_open = !state.open.is_empty();
                state.open.retain(|open| *open != stream);
                if was_open && state.open.is_empty() {
                    let found = match state.matched.clone() {
                        Some(found) => Some(found),
                        None => state.scanner.finish(),
                    };
                    notify(&state.supervisor, AttemptMsg::FinalMatch(found));
                }
            }
        }
        Ok(())
    }
}
