//! Terminal result blocks (docs/worker-protocol.md, "The result block"): per-stream framing
//! that keeps only framing state and a candidate body ([`StreamFramer`]), the verdict over both
//! streams ([`combine`]), and the live-console filter that hides complete blocks even when split
//! across reads ([`LiveFilter`]).

mod framing;
mod live_filter;
mod tags;

#[cfg(test)]
mod tests;

pub use framing::{
    MAX_RESULT_BYTES, MarkerVerdict, ResultBlock, StreamFramer, combine, validate_streams,
};
pub use live_filter::{LIVE_HOLD_LIMIT, LiveFilter};
#[cfg(test)]
pub use tags::WORD_JOINER;
pub use tags::{ResultKind, defuse_tags, inert_tags, mentions_result_tag};
