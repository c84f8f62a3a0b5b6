//! Terminal result blocks (docs/worker-protocol.md; docs/worker-protocol.md): incremental per-stream framing that keeps
//! only framing state (never the output), the cross-stream verdict, and the live-display filter
//! that hides complete blocks even when split across reads.
//!
//! # Framing ([`StreamFramer`])
//!
//! A worker ends its phase with one block such as `<phase-complete>summary</phase-complete>`.
//! Each stream is framed on its own, so interleaving between the two pipes can never join
//! fragments into a result. The framer reads a possible tag at every `<`:
//!
//! - `<` or `</`, a tag name, then `>` is an *exact* tag;
//! - the same with whitespace after `<` or `/`, or a tag name followed by whitespace or `/` (or
//!   by the end of the stream) is *malformed*: it looks like a result but is not one;
//! - anything else, including a longer word such as `<phase-completed>`, is ordinary text.
//!
//! Every exact tag counts, wherever it appears (inline, fenced, inside a block). A stream holds a
//! result when it has exactly two exact tags forming one block whose opening tag begins a line
//! (nothing before it, not even spaces) outside any code fence, whose closing tag is the last
//! non-whitespace output and not inside a fence left open, and whose body is not blank.
//!
//! When several rules are broken the first of these wins, so the verdict never depends on
//! chunking: more than two exact tags or more than one block (`multiple`), a malformed tag, no
//! exact tag at all (no result), one exact tag (`unclosed`), two tags that are not one block
//! (`nested` — a block opened inside another, counted as multiple — or `mismatched`, an
//! opening tag closed by another kind or a closing tag first, which is invalid), bad placement
//! (`must begin at a line boundary…`), a body over [`MAX_RESULT_BYTES`], a blank body.
//!
//! Only the body of the first block is kept, from its opening tag onward, and only while it can
//! still become the result; ordinary output is never retained.
//!
//! # Live display ([`LiveFilter`])
//!
//! Independently of framing, the live copy of each stream hides every span from an exact opening
//! tag (at any position) through the matching exact closing tag. Bytes that might begin an
//! opening tag are held back at a chunk boundary (never more than a tag's length); any other `<`
//! passes straight through. At end of stream a block that never closed, or a held partial tag,
//! is shown after all.

mod framing;
mod live_filter;
mod tags;

#[cfg(test)]
mod tests;

pub use framing::{
    MAX_RESULT_BYTES, MarkerVerdict, ResultBlock, StreamFramer, StreamVerdict, combine,
    validate_streams,
};
pub use live_filter::{LIVE_HOLD_LIMIT, LiveFilter};
pub use tags::{ResultKind, defuse_tags, mentions_result_tag};
