//! StopScanner: owns the stop-regex scanning state of one attempt — a DFA state and, for
//! patterns on the NFA path, a few bytes of look-around context and a bounded cache, carried
//! over the combined output in arrival order; never the output itself. The first match is
//! reported to the attempt supervisor at once; the final end-of-input check happens on
//! `Finish`.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::messages::AttemptMsg;
use crate::actors::notify;
use crate::domain::stop_regex::{StopMatch, StopPatterns, StopScanner as Scanner};

pub(crate) enum ScanMsg {
    /// The next chunk of combined output, shared with the other consumers of the chunk; the
    /// reply comes after this actor dropped its reference.
    Feed {
        bytes: Arc<Vec<u8>>,
        reply: RpcReplyPort<()>,
    },
    /// End of input: a match decided only by the end (`$`, `\z`, a trailing `\b`).
    Finish {
        reply: RpcReplyPort<Option<StopMatch>>,
    },
}

pub(crate) struct StopScanner;

pub(crate) struct ScanArgs {
    pub(crate) patterns: Arc<StopPatterns>,
    pub(crate) supervisor: ActorRef<AttemptMsg>,
    /// The attempt's span: every record of the scanner carries the run and attempt ids.
    pub(crate) span: tracing::Span,
}

pub(crate) struct ScanState {
    scanner: Scanner,
    supervisor: ActorRef<AttemptMsg>,
    matched: Option<StopMatch>,
    span: tracing::Span,
}

impl Actor for StopScanner {
    type Msg = ScanMsg;
    type State = ScanState;
    type Arguments = ScanArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ScanMsg>,
        args: ScanArgs,
    ) -> Result<ScanState, ActorProcessingErr> {
        Ok(ScanState {
            scanner: Scanner::new(args.patterns),
            supervisor: args.supervisor,
            matched: None,
            span: args.span,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ScanMsg>,
        message: ScanMsg,
        state: &mut ScanState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.span.clone();
        let _entered = span.enter();
        match message {
            ScanMsg::Feed { bytes, reply } => {
                if state.matched.is_none()
                    && let Some(found) = state.scanner.feed(&bytes)
                {
                    tracing::info!(pattern = %found.pattern, "stop regex matched");
                    notify(&state.supervisor, AttemptMsg::StopMatched(found.clone()));
                    state.matched = Some(found);
                }
                drop(bytes);
                let _ = reply.send(());
            }
            ScanMsg::Finish { reply } => {
                let found = match state.matched.clone() {
                    Some(found) => Some(found),
                    None => state.scanner.finish(),
                };
                let _ = reply.send(found);
            }
        }
        Ok(())
    }
}
