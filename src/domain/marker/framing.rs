//! Incremental per-stream framing ([`StreamFramer`]) and the cross-stream verdict
//! ([`combine`]).

use std::fmt;

use super::tags::*;
use crate::domain::fence::FenceTracker;
use crate::domain::output_stream::OutputStream;

/// Largest result body accepted, in bytes; it also bounds what the framer and the live filter
/// keep while a block is open.
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;

/// A well-framed result: its kind and its body with surrounding whitespace removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultBlock {
    pub kind: ResultKind,
    pub text: String,
}

/// The verdict over one stream or both: a result, or the message of `missing-marker` (no
/// recognized tag text at all), `invalid-marker` or `multiple-markers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkerVerdict {
    Result(ResultBlock),
    Missing(String),
    Invalid(String),
    Multiple(String),
}

enum Body {
    /// Every byte after the opening tag so far (possibly ending in part of the closing tag).
    Kept(Vec<u8>),
    /// Longer than [`MAX_RESULT_BYTES`]; the bytes were released.
    TooLarge,
    /// The block can no longer become the result (unframed, nested, malformed output), so its
    /// bytes are not worth keeping.
    Dropped,
}

impl Body {
    fn append(&mut self, bytes: &[u8]) {
        if let Self::Kept(kept) = self {
            // Room for a closing tag beyond the largest body: the caller cuts it off once the
            // tag is recognized.
            if kept.len() + bytes.len() > MAX_RESULT_BYTES + LONGEST_TAG {
                *self = Self::TooLarge;
            } else {
                kept.extend_from_slice(bytes);
            }
        }
    }

    fn drop_bytes(&mut self) {
        if matches!(self, Self::Kept(_)) {
            *self = Self::Dropped;
        }
    }

    fn retained_len(&self) -> usize {
        match self {
            Self::Kept(kept) => kept.len(),
            Self::TooLarge | Self::Dropped => 0,
        }
    }
}

struct Block {
    kind: ResultKind,
    framed: bool,
    /// Stream offset of the first body byte.
    body_start: u64,
    body: Body,
}

/// Incremental framing state for one stream: never the output, only a candidate body.
pub struct StreamFramer {
    stream: OutputStream,
    fences: FenceTracker,
    /// Stream offset of the next chunk.
    offset: u64,
    pub(super) candidate: Option<TagCandidate>,
    exact_tags: u32,
    closed_blocks: u32,
    malformed: bool,
    /// An opening tag arrived while a block was open.
    nested: bool,
    /// Its closing tag has not been read yet.
    open: Option<Block>,
    /// The first block that was closed.
    closed: Option<Block>,
    /// Non-whitespace appeared after the first closed block.
    text_after_result: bool,
}

impl fmt::Debug for StreamFramer {
    // A derived Debug would print a retained body of up to 16 MiB.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamFramer")
            .field("stream", &self.stream)
            .field("offset", &self.offset)
            .field("exact_tags", &self.exact_tags)
            .field("closed_blocks", &self.closed_blocks)
            .field("malformed", &self.malformed)
            .field("retained_bytes", &self.retained_bytes())
            .finish_non_exhaustive()
    }
}

impl StreamFramer {
    pub fn new(stream: OutputStream) -> Self {
        Self {
            stream,
            fences: FenceTracker::new(),
            offset: 0,
            candidate: None,
            exact_tags: 0,
            closed_blocks: 0,
            malformed: false,
            nested: false,
            open: None,
            closed: None,
            text_after_result: false,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        self.feed_with(chunk, next_tag_start);
    }

    /// Feeds `chunk`, reading a possible tag from each `<` that `next_start(chunk, from)`
    /// returns: the first at or after `from` that may begin one. Returning every `<` would be
    /// correct too, only slower (the tests use that as the reference).
    pub(super) fn feed_with(
        &mut self,
        chunk: &[u8],
        next_start: impl Fn(&[u8], usize) -> Option<usize>,
    ) {
        if self.is_settled() {
            return;
        }
        if self.closed.is_some() {
            self.note_text_after_result(chunk);
        }
        // Prefix of `chunk` already given to the fence tracker.
        let mut fenced_to = 0;
        // Start of the part of `chunk` not yet appended to an open block's body.
        let mut body_from = 0;
        let mut index = 0;
        while index < chunk.len() {
            let Some(mut candidate) = self.candidate.take() else {
                let Some(start) = next_start(chunk, index) else {
                    break;
                };
                index = start;
                self.fences.feed(&chunk[fenced_to..index]);
                fenced_to = index;
                self.candidate = Some(TagCandidate {
                    progress: TagProgress::Open,
                    closing: false,
                    exact: true,
                    framed: self.fences.at_line_start() && self.fences.open_fence().is_none(),
                    start: self.offset + index as u64,
                });
                index += 1;
                continue;
            };
            let byte = chunk[index];
            match candidate.step(byte) {
                TagStep::Pending => {
                    self.candidate = Some(candidate);
                    index += 1;
                }
                TagStep::Exact(kind) => {
                    if let Some(open) = &mut self.open {
                        open.body.append(&chunk[body_from..=index]);
                    }
                    body_from = index + 1;
                    let tag_end = self.offset + body_from as u64;
                    self.accept_tag(candidate, kind, tag_end);
                    if self.is_settled() {
                        return;
                    }
                    if self.closed.is_some() {
                        self.note_text_after_result(&chunk[body_from..]);
                    }
                    index += 1;
                }
                TagStep::Malformed => {
                    self.malformed = true;
                    if let Some(open) = &mut self.open {
                        open.body.drop_bytes();
                    }
                    index += 1;
                }
                // A `<` that ends one candidate may begin the next.
                TagStep::NotATag if byte == b'<' => {}
                TagStep::NotATag => index += 1,
            }
        }
        self.fences.feed(&chunk[fenced_to..]);
        if let Some(open) = &mut self.open {
            open.body.append(&chunk[body_from..]);
        }
        self.offset += chunk.len() as u64;
    }

    /// Ends the stream and returns its verdict. When several rules are broken the first
    /// checked here wins, so the verdict never depends on chunking.
    pub fn finish(mut self) -> MarkerVerdict {
        let stream = self.stream.name();
        if let Some(TagCandidate {
            progress: TagProgress::AfterName(_),
            ..
        }) = self.candidate
        {
            // A tag name cut off by the end of the stream.
            self.malformed = true;
        }
        let fence_left_open = self.fences.finish().is_some();

        if self.is_settled() {
            return MarkerVerdict::Multiple(format!("multiple terminal markers in {stream}"));
        }
        if self.malformed {
            return MarkerVerdict::Invalid(format!("malformed terminal marker in {stream}"));
        }
        if self.exact_tags == 0 {
            return MarkerVerdict::Missing("missing terminal marker".to_owned());
        }
        if self.exact_tags != 2 {
            return MarkerVerdict::Invalid(format!("unclosed terminal marker in {stream}"));
        }
        let Some(block) = self.closed else {
            // Two tags that are not one block: a block opened inside another is a second
            // result (multiple); a closing tag of another kind, or one before its opening
            // tag, is broken framing (invalid), as in the reference.
            return if self.nested {
                MarkerVerdict::Multiple(format!("nested terminal marker in {stream}"))
            } else {
                MarkerVerdict::Invalid(format!("mismatched terminal marker in {stream}"))
            };
        };
        let misplaced = MarkerVerdict::Invalid(format!(
            "terminal marker in {stream} must begin at a line boundary and be its final content"
        ));
        if !block.framed || self.text_after_result || fence_left_open {
            return misplaced;
        }
        let body = match block.body {
            Body::Kept(body) => body,
            Body::TooLarge => {
                return MarkerVerdict::Invalid(format!(
                    "terminal marker in {stream} exceeds 16 MiB"
                ));
            }
            Body::Dropped => {
                // Bodies are dropped only for faults reported above; fail closed if not.
                debug_assert!(false, "the body of a well-framed block was dropped");
                return misplaced;
            }
        };
        let text = String::from_utf8_lossy(&body);
        let text = text.trim();
        if text.is_empty() {
            return MarkerVerdict::Invalid(format!(
                "terminal marker in {stream} has an empty result"
            ));
        }
        MarkerVerdict::Result(ResultBlock {
            kind: block.kind,
            text: text.to_owned(),
        })
    }

    /// True once the verdict can only be `multiple`, whatever follows.
    fn is_settled(&self) -> bool {
        self.exact_tags > 2 || self.closed_blocks > 1
    }

    pub(super) fn retained_bytes(&self) -> usize {
        let open = self
            .open
            .as_ref()
            .map_or(0, |open| open.body.retained_len());
        let closed = self
            .closed
            .as_ref()
            .map_or(0, |closed| closed.body.retained_len());
        open + closed
    }

    fn note_text_after_result(&mut self, bytes: &[u8]) {
        if !self.text_after_result && !bytes.iter().all(|&byte| is_space(byte)) {
            self.text_after_result = true;
        }
    }

    /// Records an exact tag; `tag_end` is the stream offset just past its `>`.
    fn accept_tag(&mut self, tag: TagCandidate, kind: ResultKind, tag_end: u64) {
        self.exact_tags = self.exact_tags.saturating_add(1);
        match self.open.take() {
            Some(mut open) if tag.closing && open.kind == kind => {
                self.closed_blocks = self.closed_blocks.saturating_add(1);
                let body_len = tag.start.saturating_sub(open.body_start);
                if body_len > MAX_RESULT_BYTES as u64 {
                    open.body = Body::TooLarge;
                } else if let Body::Kept(kept) = &mut open.body {
                    // `body_len` fits: it is at most MAX_RESULT_BYTES.
                    kept.truncate(body_len as usize);
                }
                if self.closed.is_none() {
                    self.closed = Some(open);
                }
            }
            Some(mut open) => {
                // A nested or mismatched tag: this block can no longer be the result.
                self.nested |= !tag.closing;
                open.body.drop_bytes();
                self.open = Some(open);
            }
            None if tag.closing => {}
            None => {
                // Worth keeping only while this could still be the one result.
                let promising = tag.framed && !self.malformed && self.exact_tags == 1;
                self.open = Some(Block {
                    kind,
                    framed: tag.framed,
                    body_start: tag_end,
                    body: if promising {
                        Body::Kept(Vec::new())
                    } else {
                        Body::Dropped
                    },
                });
            }
        }
    }
}

/// Combines the two stream verdicts, failing closed: a faulty stream outweighs a result on the
/// other one. Faults on stdout are reported before faults on stderr.
pub fn combine(stdout: MarkerVerdict, stderr: MarkerVerdict) -> MarkerVerdict {
    use MarkerVerdict::{Invalid, Missing, Multiple, Result};
    match (stdout, stderr) {
        (fault @ (Multiple(_) | Invalid(_)), _) | (_, fault @ (Multiple(_) | Invalid(_))) => fault,
        (Result(_), Result(_)) => {
            Multiple("terminal result was emitted on both stdout and stderr".to_owned())
        }
        (Result(block), Missing(_)) | (Missing(_), Result(block)) => Result(block),
        (missing @ Missing(_), Missing(_)) => missing,
    }
}

/// Whole-buffer convenience: frames both streams and combines them.
pub fn validate_streams(stdout: &[u8], stderr: &[u8]) -> MarkerVerdict {
    let mut out = StreamFramer::new(OutputStream::Stdout);
    out.feed(stdout);
    let mut err = StreamFramer::new(OutputStream::Stderr);
    err.feed(stderr);
    combine(out.finish(), err.finish())
}
