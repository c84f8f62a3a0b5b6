//! Terminal result blocks (SPEC §8; reference §10): incremental per-stream framing that keeps
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
//! (`nested or mismatched`, counted as multiple like the reference), bad placement (`must begin
//! at a line boundary…`), a body over [`MAX_RESULT_BYTES`], a blank body.
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

use std::fmt;
use std::sync::LazyLock;

use memchr::{memchr, memmem, memrchr};

use super::fence::FenceTracker;

/// Largest result body accepted, in bytes. It bounds what the framer and the live filter keep
/// while a block is open.
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;

/// Length of the longest exact tag, `</phase-needs-clarification>`.
const LONGEST_TAG: usize = ResultKind::NeedsClarification.close_tag().len();

/// How every tag name begins. Searching for it, rather than stopping at every `<`, keeps
/// framing fast on markup-heavy output (`</div>`, `a < b`, `Vec<u8>`).
const NAME_PREFIX: &[u8] = b"phase-";

/// How every opening tag begins, for the live filter's search.
const OPENING_PREFIX: &[u8] = b"<phase-";

static NAME_PREFIX_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(NAME_PREFIX));

static OPENING_PREFIX_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(OPENING_PREFIX));

/// Which child stream bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    pub fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// The three result kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    Complete,
    Blocked,
    NeedsClarification,
}

impl ResultKind {
    const ALL: [Self; 3] = [Self::Complete, Self::Blocked, Self::NeedsClarification];

    /// The tag name, e.g. `phase-complete`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Complete => "phase-complete",
            Self::Blocked => "phase-blocked",
            Self::NeedsClarification => "phase-needs-clarification",
        }
    }

    const fn open_tag(self) -> &'static str {
        match self {
            Self::Complete => "<phase-complete>",
            Self::Blocked => "<phase-blocked>",
            Self::NeedsClarification => "<phase-needs-clarification>",
        }
    }

    const fn close_tag(self) -> &'static str {
        match self {
            Self::Complete => "</phase-complete>",
            Self::Blocked => "</phase-blocked>",
            Self::NeedsClarification => "</phase-needs-clarification>",
        }
    }

    /// This kind's bit in a set of kinds still matching a partial tag name.
    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A well-framed result: its kind and its body with surrounding whitespace removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultBlock {
    pub kind: ResultKind,
    pub text: String,
}

/// The verdict for one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamVerdict {
    /// No recognized tag text at all.
    NoResult,
    Result(ResultBlock),
    /// Ambiguous framing (inline, fenced, unclosed, empty, trailing text, malformed tag…).
    Invalid(String),
    /// More than one block, or nesting.
    Multiple(String),
}

/// The verdict over both streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkerVerdict {
    Result(ResultBlock),
    /// `missing-marker`.
    Missing(String),
    /// `invalid-marker`.
    Invalid(String),
    /// `multiple-markers`.
    Multiple(String),
}

/// Whitespace as far as framing is concerned: ASCII only, since the stream is not decoded.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// Where in `chunk[from..]` the next tag may begin: the first `<` there whose reading (see
/// [`TagCandidate`]) can reach a tag name, because it is followed by optional whitespace, `/`
/// and whitespace, then either `phase-` or a part of all that cut off by the chunk's end.
///
/// Every other `<` would be read as ordinary text, so skipping it changes nothing: each `<`
/// starts a reading of its own, and no reading in progress before `from` can still reach a
/// name (the caller has read those, see [`StreamFramer::feed_with`]).
fn next_tag_start(chunk: &[u8], from: usize) -> Option<usize> {
    // Plain output has no `<` at all; one byte search settles it.
    let from = from + memchr(b'<', &chunk[from..])?;
    let rest = &chunk[from..];
    for name_at in NAME_PREFIX_FINDER.find_iter(rest) {
        if let Some(start) = tag_start_before(&rest[..name_at]) {
            return Some(from + start);
        }
    }
    // A tag cut off by the chunk's end before its name prefix is complete: its reading
    // continues with the next chunk.
    let cut_name = (1..NAME_PREFIX.len())
        .rev()
        .find(|&len| rest.ends_with(&NAME_PREFIX[..len]))
        .unwrap_or(0);
    tag_start_before(&rest[..rest.len() - cut_name]).map(|start| from + start)
}

/// The `<` that begins a tag whose name would start right after `before`: `before` ends with
/// `<`, optional whitespace, optionally `/` and whitespace.
fn tag_start_before(before: &[u8]) -> Option<usize> {
    let last_non_space = |bytes: &[u8]| bytes.iter().rposition(|&byte| !is_space(byte));
    let mut at = last_non_space(before)?;
    if before[at] == b'/' {
        at = last_non_space(&before[..at])?;
    }
    (before[at] == b'<').then_some(at)
}

/// How far a possible tag beginning at `<` has been read.
#[derive(Clone, Copy, Debug)]
enum TagProgress {
    /// After `<` and any whitespace.
    Open,
    /// After `</` and any whitespace.
    Slash,
    /// Inside a tag name: `len` bytes read, `kinds` the names they still match.
    Name { len: usize, kinds: u8 },
    /// A whole tag name has been read; only `>` can follow in an exact tag.
    AfterName(ResultKind),
}

/// What one more byte made of a possible tag.
enum TagStep {
    Pending,
    Exact(ResultKind),
    Malformed,
    NotATag,
}

/// A possible tag being read, possibly across chunks.
#[derive(Clone, Copy, Debug)]
struct TagCandidate {
    progress: TagProgress,
    closing: bool,
    /// False once whitespace appeared inside the tag.
    exact: bool,
    /// The `<` began its line (nothing before it) outside any code fence.
    framed: bool,
    /// Stream offset of the `<`.
    start: u64,
}

impl TagCandidate {
    fn step(&mut self, byte: u8) -> TagStep {
        match self.progress {
            TagProgress::Open | TagProgress::Slash if is_space(byte) => {
                self.exact = false;
                TagStep::Pending
            }
            TagProgress::Open if byte == b'/' => {
                self.closing = true;
                self.progress = TagProgress::Slash;
                TagStep::Pending
            }
            TagProgress::Open | TagProgress::Slash => self.step_name(0, 0b111, byte),
            TagProgress::Name { len, kinds } => self.step_name(len, kinds, byte),
            TagProgress::AfterName(kind) => match byte {
                b'>' if self.exact => TagStep::Exact(kind),
                b'>' | b'/' => TagStep::Malformed,
                _ if is_space(byte) => TagStep::Malformed,
                _ => TagStep::NotATag,
            },
        }
    }

    fn step_name(&mut self, len: usize, kinds: u8, byte: u8) -> TagStep {
        let still_matching = ResultKind::ALL
            .into_iter()
            .filter(|kind| kinds & kind.bit() != 0 && kind.tag().as_bytes().get(len) == Some(&byte))
            .fold(0, |set, kind| set | kind.bit());
        if still_matching == 0 {
            return TagStep::NotATag;
        }
        let len = len + 1;
        // No tag name is a prefix of another, so a completed name is unambiguous.
        self.progress = match ResultKind::ALL
            .into_iter()
            .find(|kind| still_matching & kind.bit() != 0 && kind.tag().len() == len)
        {
            Some(kind) => TagProgress::AfterName(kind),
            None => TagProgress::Name {
                len,
                kinds: still_matching,
            },
        };
        TagStep::Pending
    }
}

/// The retained body of a block.
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

/// A block whose opening tag has been read and whose closing tag has not.
struct OpenBlock {
    kind: ResultKind,
    framed: bool,
    /// Stream offset of the first body byte.
    body_start: u64,
    body: Body,
}

/// The first block that was closed.
struct ClosedBlock {
    kind: ResultKind,
    framed: bool,
    body: Body,
}

/// Incremental framing state for one stream.
pub struct StreamFramer {
    stream: OutputStream,
    fences: FenceTracker,
    /// Stream offset of the next chunk.
    offset: u64,
    candidate: Option<TagCandidate>,
    exact_tags: u32,
    closed_blocks: u32,
    malformed: bool,
    open: Option<OpenBlock>,
    closed: Option<ClosedBlock>,
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
            open: None,
            closed: None,
            text_after_result: false,
        }
    }

    /// Feeds the next bytes of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.feed_with(chunk, next_tag_start);
    }

    /// Feeds `chunk`, reading a possible tag from each `<` that `next_start(chunk, from)`
    /// returns: the first at or after `from` that may begin one. Returning every `<` would be
    /// correct too, only slower (the tests use that as the reference).
    fn feed_with(&mut self, chunk: &[u8], next_start: impl Fn(&[u8], usize) -> Option<usize>) {
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
                    framed: self.fences.at_line_start() && !self.fences.in_fence(),
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

    /// Ends the stream and returns its verdict.
    pub fn finish(mut self) -> StreamVerdict {
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
            return StreamVerdict::Multiple(format!("multiple terminal markers in {stream}"));
        }
        if self.malformed {
            return StreamVerdict::Invalid(format!("malformed terminal marker in {stream}"));
        }
        if self.exact_tags == 0 {
            return StreamVerdict::NoResult;
        }
        if self.exact_tags != 2 {
            return StreamVerdict::Invalid(format!("unclosed terminal marker in {stream}"));
        }
        let Some(block) = self.closed else {
            return StreamVerdict::Multiple(format!(
                "nested or mismatched terminal marker in {stream}"
            ));
        };
        let misplaced = StreamVerdict::Invalid(format!(
            "terminal marker in {stream} must begin at a line boundary and be its final content"
        ));
        if !block.framed || self.text_after_result || fence_left_open {
            return misplaced;
        }
        let body = match block.body {
            Body::Kept(body) => body,
            Body::TooLarge => {
                return StreamVerdict::Invalid(format!(
                    "terminal marker in {stream} exceeds 16 MiB"
                ));
            }
            Body::Dropped => {
                // Bodies are dropped only for faults reported above; fail closed if not.
                debug_assert!(false, "the body of a well-framed block was dropped");
                return misplaced;
            }
        };
        let text = match String::from_utf8(body) {
            Ok(text) => text,
            Err(invalid) => String::from_utf8_lossy(invalid.as_bytes()).into_owned(),
        };
        let text = text.trim();
        if text.is_empty() {
            return StreamVerdict::Invalid(format!(
                "terminal marker in {stream} has an empty result"
            ));
        }
        StreamVerdict::Result(ResultBlock {
            kind: block.kind,
            text: text.to_owned(),
        })
    }

    /// True once the verdict can only be `multiple`, whatever follows.
    fn is_settled(&self) -> bool {
        self.exact_tags > 2 || self.closed_blocks > 1
    }

    fn retained_bytes(&self) -> usize {
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
            Some(open) if tag.closing && open.kind == kind => {
                self.closed_blocks = self.closed_blocks.saturating_add(1);
                let mut body = open.body;
                let body_len = tag.start.saturating_sub(open.body_start);
                if body_len > MAX_RESULT_BYTES as u64 {
                    body = Body::TooLarge;
                } else if let Body::Kept(kept) = &mut body {
                    // `body_len` fits: it is at most MAX_RESULT_BYTES.
                    kept.truncate(body_len as usize);
                }
                if self.closed.is_none() {
                    self.closed = Some(ClosedBlock {
                        kind,
                        framed: open.framed,
                        body,
                    });
                }
            }
            Some(mut open) => {
                // A nested or mismatched tag: this block can no longer be the result.
                open.body.drop_bytes();
                self.open = Some(open);
            }
            None if tag.closing => {}
            None => {
                // Worth keeping only while this could still be the one result.
                let promising = tag.framed && !self.malformed && self.exact_tags == 1;
                self.open = Some(OpenBlock {
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

/// Combines the two stream verdicts.
///
/// Failing closed: a faulty stream outweighs a result on the other one. Faults on stdout are
/// reported before faults on stderr.
pub fn combine(stdout: StreamVerdict, stderr: StreamVerdict) -> MarkerVerdict {
    use StreamVerdict::{Invalid, Multiple, NoResult, Result};
    match (stdout, stderr) {
        (Multiple(message), _) => MarkerVerdict::Multiple(message),
        (Invalid(message), _) => MarkerVerdict::Invalid(message),
        (_, Multiple(message)) => MarkerVerdict::Multiple(message),
        (_, Invalid(message)) => MarkerVerdict::Invalid(message),
        (Result(_), Result(_)) => MarkerVerdict::Multiple(
            "terminal result was emitted on both stdout and stderr".to_owned(),
        ),
        (Result(block), NoResult) | (NoResult, Result(block)) => MarkerVerdict::Result(block),
        (NoResult, NoResult) => MarkerVerdict::Missing("missing terminal marker".to_owned()),
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

/// How bytes compare with an exact tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TagMatch {
    /// The tag is complete after this many bytes of `rest`.
    Complete(usize),
    /// `rest` ran out while still matching.
    Partial,
    Mismatch,
}

/// Compares `held ++ rest` with the start of `tag` without joining them.
fn match_tag(held: &[u8], rest: &[u8], tag: &str) -> TagMatch {
    let Some(tail) = tag.as_bytes().strip_prefix(held) else {
        return TagMatch::Mismatch;
    };
    if rest.len() >= tail.len() {
        if rest.starts_with(tail) {
            TagMatch::Complete(tail.len())
        } else {
            TagMatch::Mismatch
        }
    } else if tail.starts_with(rest) {
        TagMatch::Partial
    } else {
        TagMatch::Mismatch
    }
}

/// Like [`match_tag`] against all three opening tags.
fn match_opening_tag(held: &[u8], rest: &[u8]) -> (TagMatch, ResultKind) {
    let mut best = (TagMatch::Mismatch, ResultKind::Complete);
    for kind in ResultKind::ALL {
        match match_tag(held, rest, kind.open_tag()) {
            // No opening tag is a prefix of another, so a complete match is the only match.
            TagMatch::Complete(used) => return (TagMatch::Complete(used), kind),
            TagMatch::Partial => best = (TagMatch::Partial, kind),
            TagMatch::Mismatch => {}
        }
    }
    best
}

/// The first `<` in `chunk` that begins an opening tag ([`TagMatch::Complete`]), or a part of
/// one cut off by the chunk's end ([`TagMatch::Partial`]).
fn find_opening_tag(chunk: &[u8]) -> Option<(usize, TagMatch, ResultKind)> {
    // Plain output has no `<` at all; one byte search settles it.
    let first = memchr(b'<', chunk)?;
    for at in OPENING_PREFIX_FINDER.find_iter(&chunk[first..]) {
        let at = first + at;
        match match_opening_tag(&[], &chunk[at..]) {
            (TagMatch::Mismatch, _) => {}
            (found, kind) => return Some((at, found, kind)),
        }
    }
    // A tag cut off within its prefix lies in the chunk's last bytes, and a tag holds a single
    // `<`, so only the last `<` can begin it.
    let tail_from = chunk.len().saturating_sub(OPENING_PREFIX.len() - 1);
    let at = tail_from + memrchr(b'<', &chunk[tail_from..])?;
    match match_opening_tag(&[], &chunk[at..]) {
        (TagMatch::Partial, kind) => Some((at, TagMatch::Partial, kind)),
        _ => None,
    }
}

/// Like [`find_opening_tag`] for one given tag.
fn find_tag(chunk: &[u8], tag: &str) -> Option<(usize, TagMatch)> {
    if let Some(at) = memmem::find(chunk, tag.as_bytes()) {
        return Some((at, TagMatch::Complete(tag.len())));
    }
    let tail_from = chunk.len().saturating_sub(tag.len() - 1);
    let at = tail_from + memrchr(b'<', &chunk[tail_from..])?;
    (match_tag(&[], &chunk[at..], tag) == TagMatch::Partial).then_some((at, TagMatch::Partial))
}

/// A block being hidden from live output.
struct HiddenBlock {
    kind: ResultKind,
    /// Everything from the opening tag on, kept to be shown if the block never closes.
    text: Vec<u8>,
    /// How many bytes of the closing tag end `text`.
    close_matched: usize,
    /// For a block opened mid-line: how many more line ends it may contain before it is given
    /// up and shown. `None` for a block opened at a line start.
    line_ends_left: Option<usize>,
}

/// How many line ends a block opened mid-line may span: it must close by the end of the line
/// after its opening tag (the reference's `first <phase-blocked>secret\r\nsecond
/// line</phase-blocked>` is hidden). Such a block can never be a result (SPEC §8), and a tag
/// merely quoted in chatter (`grep '<phase-complete>'`) must not hide everything up to the
/// real result block at the end.
const MID_LINE_BLOCK_LINE_ENDS: usize = 2;

/// Hides complete result blocks from live output, holding back possible partial tags across
/// chunks. One filter per stream.
pub struct LiveFilter {
    /// The start of a possible opening tag cut off at the end of the last chunk.
    held: Vec<u8>,
    hidden: Option<HiddenBlock>,
    /// A block whose hidden text would outgrow this is shown instead: it cannot be a valid
    /// result, and hiding it would need unbounded memory.
    hidden_cap: usize,
    /// The last byte settled (shown or hidden) ended a line, or nothing was settled yet.
    at_line_start: bool,
}

impl fmt::Debug for LiveFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveFilter")
            .field("held", &String::from_utf8_lossy(&self.held))
            .field("hiding", &self.hidden.as_ref().map(|block| block.kind))
            .finish_non_exhaustive()
    }
}

impl Default for LiveFilter {
    fn default() -> Self {
        Self::with_hidden_cap(MAX_RESULT_BYTES + 2 * LONGEST_TAG)
    }
}

impl LiveFilter {
    pub fn new() -> Self {
        Self::default()
    }

    fn with_hidden_cap(hidden_cap: usize) -> Self {
        Self {
            held: Vec::new(),
            hidden: None,
            hidden_cap: hidden_cap.max(LONGEST_TAG),
            at_line_start: true,
        }
    }

    /// Shows `bytes` and notes where they leave the line.
    fn show_settled(&mut self, bytes: &[u8], visible: &mut Vec<u8>) {
        if let Some(last) = bytes.last() {
            self.at_line_start = *last == b'\n';
            visible.extend_from_slice(bytes);
        }
    }

    /// Appends the visible part of `chunk` to `visible`.
    pub fn filter(&mut self, mut chunk: &[u8], visible: &mut Vec<u8>) {
        while !chunk.is_empty() {
            chunk = match self.hidden.take() {
                None => self.show(chunk, visible),
                Some(block) => self.hide(block, chunk, visible),
            };
        }
    }

    /// Filters `chunk` without copying it when it passes through unchanged: nothing held or
    /// hidden, no `<phase-` in the chunk (every opening tag, whole or cut off after its prefix,
    /// contains it) and no end of the chunk that could be the start of one (`<`, `<p`, …
    /// `<phase`). Returns true when it did; the caller then shows `chunk` itself. Otherwise
    /// nothing happened and the caller uses [`filter`](Self::filter).
    pub fn pass_through(&mut self, chunk: &[u8]) -> bool {
        let unchanged = self.held.is_empty()
            && self.hidden.is_none()
            && OPENING_PREFIX_FINDER.find(chunk).is_none()
            && !(1..OPENING_PREFIX.len()).any(|len| chunk.ends_with(&OPENING_PREFIX[..len]));
        if unchanged && let Some(last) = chunk.last() {
            self.at_line_start = *last == b'\n';
        }
        unchanged
    }

    /// Ends the stream: flushes a held partial tag or a still-open block, visibly.
    pub fn finish(&mut self, visible: &mut Vec<u8>) {
        if let Some(block) = self.hidden.take() {
            self.show_settled(&block.text, visible);
        }
        let held = std::mem::take(&mut self.held);
        self.show_settled(&held, visible);
    }

    /// Passes `chunk` through up to an opening tag; returns what follows the tag.
    fn show<'a>(&mut self, chunk: &'a [u8], visible: &mut Vec<u8>) -> &'a [u8] {
        if !self.held.is_empty() {
            match match_opening_tag(&self.held, chunk) {
                (TagMatch::Complete(used), kind) => {
                    let mut text = std::mem::take(&mut self.held);
                    text.extend_from_slice(&chunk[..used]);
                    self.start_hiding(kind, text);
                    return &chunk[used..];
                }
                (TagMatch::Partial, _) => {
                    self.held.extend_from_slice(chunk);
                    return &[];
                }
                // The bytes that matched contain no `<`, so scanning `chunk` from its start
                // misses no tag.
                (TagMatch::Mismatch, _) => {
                    let held = std::mem::take(&mut self.held);
                    self.show_settled(&held, visible);
                }
            }
        }
        match find_opening_tag(chunk) {
            Some((at, TagMatch::Complete(used), kind)) => {
                self.show_settled(&chunk[..at], visible);
                self.start_hiding(kind, chunk[at..at + used].to_vec());
                &chunk[at + used..]
            }
            Some((at, _, _)) => {
                self.show_settled(&chunk[..at], visible);
                self.held.extend_from_slice(&chunk[at..]);
                &[]
            }
            None => {
                self.show_settled(chunk, visible);
                &[]
            }
        }
    }

    /// Starts hiding at an opening tag; everything before it is settled, so `at_line_start`
    /// says whether the tag begins its line.
    fn start_hiding(&mut self, kind: ResultKind, text: Vec<u8>) {
        self.hidden = Some(HiddenBlock {
            kind,
            text,
            close_matched: 0,
            line_ends_left: (!self.at_line_start).then_some(MID_LINE_BLOCK_LINE_ENDS),
        });
    }

    /// Hides `chunk` up to the block's closing tag; returns what follows the block.
    ///
    /// A block is given up, and shown, at the byte that takes its hidden text past the cap,
    /// unless that byte completes the closing tag, or (opened mid-line) at the line end that
    /// uses up its [`MID_LINE_BLOCK_LINE_ENDS`]. Deciding per byte keeps the output independent
    /// of how the stream was chunked.
    fn hide<'a>(
        &mut self,
        mut block: HiddenBlock,
        chunk: &'a [u8],
        visible: &mut Vec<u8>,
    ) -> &'a [u8] {
        let close = block.kind.close_tag();
        let mut close_end = None;
        let mut close_matched = 0;
        if block.close_matched > 0 {
            match match_tag(&close.as_bytes()[..block.close_matched], chunk, close) {
                TagMatch::Complete(used) => close_end = Some(used),
                TagMatch::Partial => close_matched = block.close_matched + chunk.len(),
                TagMatch::Mismatch => {}
            }
        }
        if close_end.is_none() && close_matched == 0 {
            match find_tag(chunk, close) {
                Some((at, TagMatch::Complete(used))) => close_end = Some(at + used),
                Some((at, _)) => close_matched = chunk.len() - at,
                None => {}
            }
        }

        // Where the block must be given up within this chunk (exclusive end of what is shown
        // with it), if it does not close first.
        let room = self.hidden_cap.saturating_sub(block.text.len());
        let past_cap = (chunk.len() > room).then_some(room + 1);
        let past_line_ends = block.line_ends_left.and_then(|left| {
            memchr::memchr_iter(b'\n', chunk)
                .nth(left.checked_sub(1)?)
                .map(|newline| newline + 1)
        });
        let given_up_at = match (past_cap, past_line_ends) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (close_end, given_up_at) {
            (Some(end), limit) if limit.is_none_or(|limit| end <= limit) => {
                self.at_line_start = false;
                &chunk[end..]
            }
            (_, Some(limit)) => {
                visible.extend_from_slice(&block.text);
                self.show_settled(&chunk[..limit], visible);
                &chunk[limit..]
            }
            _ => {
                if let Some(left) = block.line_ends_left.as_mut() {
                    *left -= memchr::memchr_iter(b'\n', chunk).count();
                }
                block.text.extend_from_slice(chunk);
                block.close_matched = close_matched;
                self.hidden = Some(block);
                &[]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STDOUT_MISPLACED: &str =
        "terminal marker in stdout must begin at a line boundary and be its final content";

    fn frame_chunks(chunks: &[&[u8]]) -> StreamVerdict {
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        for chunk in chunks {
            framer.feed(chunk);
        }
        framer.finish()
    }

    fn frame(text: &str) -> StreamVerdict {
        frame_chunks(&[text.as_bytes()])
    }

    fn result(kind: ResultKind, text: &str) -> StreamVerdict {
        StreamVerdict::Result(ResultBlock {
            kind,
            text: text.to_owned(),
        })
    }

    fn invalid(message: &str) -> StreamVerdict {
        StreamVerdict::Invalid(message.to_owned())
    }

    fn multiple(message: &str) -> StreamVerdict {
        StreamVerdict::Multiple(message.to_owned())
    }

    fn complete(text: &str) -> MarkerVerdict {
        MarkerVerdict::Result(ResultBlock {
            kind: ResultKind::Complete,
            text: text.to_owned(),
        })
    }

    /// Visible output of each chunk, then of `finish`.
    fn filter_chunks(chunks: &[&str]) -> Vec<String> {
        let mut filter = LiveFilter::new();
        let mut outputs = Vec::new();
        for chunk in chunks {
            let mut visible = Vec::new();
            filter.filter(chunk.as_bytes(), &mut visible);
            outputs.push(String::from_utf8(visible).expect("test input is UTF-8"));
        }
        let mut visible = Vec::new();
        filter.finish(&mut visible);
        outputs.push(String::from_utf8(visible).expect("test input is UTF-8"));
        outputs
    }

    fn filter_all(mut filter: LiveFilter, chunks: &[&[u8]]) -> Vec<u8> {
        let mut visible = Vec::new();
        for chunk in chunks {
            filter.filter(chunk, &mut visible);
            assert!(filter.held.len() < LONGEST_TAG, "held {:?}", filter.held);
        }
        filter.finish(&mut visible);
        visible
    }

    // Reference §10.2, scenarios 1–12.

    #[test]
    fn s01_complete_after_progress() {
        assert_eq!(
            validate_streams(b"done\n<phase-complete>Built it.</phase-complete>\n", b""),
            complete("Built it.")
        );
    }

    #[test]
    fn s02_blocked_at_stream_start() {
        assert_eq!(
            frame("<phase-blocked>Need credentials.</phase-blocked>"),
            result(ResultKind::Blocked, "Need credentials.")
        );
    }

    #[test]
    fn s03_needs_clarification() {
        assert_eq!(
            frame("<phase-needs-clarification>Which API?</phase-needs-clarification>"),
            result(ResultKind::NeedsClarification, "Which API?")
        );
    }

    #[test]
    fn s04_multiline_body() {
        assert_eq!(
            frame("<phase-complete>\nImplemented parser.\nAll tests pass.\n</phase-complete>\n"),
            result(ResultKind::Complete, "Implemented parser.\nAll tests pass.")
        );
    }

    #[test]
    fn s05_result_on_stderr() {
        assert_eq!(
            validate_streams(
                b"ordinary progress\n",
                b"warn: x\n<phase-blocked>No network.</phase-blocked>\n"
            ),
            MarkerVerdict::Result(ResultBlock {
                kind: ResultKind::Blocked,
                text: "No network.".to_owned()
            })
        );
    }

    #[test]
    fn s06_split_tags_and_multibyte_character() {
        let chunks: [&[u8]; 4] = [
            b"<phase-",
            b"complete>Changed caf\xc3",
            b"\xa9.txt.\nTests pass.</phase-com",
            b"plete>\n",
        ];
        assert_eq!(
            frame_chunks(&chunks),
            result(ResultKind::Complete, "Changed café.txt.\nTests pass.")
        );
    }

    #[test]
    fn s07_ordinary_output_is_not_retained() {
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        for line in 0..1000 {
            framer.feed(format!("diagnostic line {line} with a < b\n").as_bytes());
            assert_eq!(framer.retained_bytes(), 0);
        }
        assert!(framer.candidate.is_none());
        assert_eq!(framer.finish(), StreamVerdict::NoResult);
        assert_eq!(
            validate_streams(&b"diagnostic\n".repeat(1000), b""),
            MarkerVerdict::Missing("missing terminal marker".to_owned())
        );
    }

    #[test]
    fn s08_missing() {
        assert_eq!(
            validate_streams(b"no terminal marker", b""),
            MarkerVerdict::Missing("missing terminal marker".to_owned())
        );
    }

    #[test]
    fn s09_two_adjacent_blocks() {
        assert_eq!(
            frame("<phase-complete>a</phase-complete>\n<phase-complete>b</phase-complete>\n"),
            multiple("multiple terminal markers in stdout")
        );
    }

    #[test]
    fn s10_results_on_both_streams() {
        assert_eq!(
            validate_streams(
                b"<phase-complete>Done.</phase-complete>\n",
                b"<phase-blocked>Stuck.</phase-blocked>\n"
            ),
            MarkerVerdict::Multiple("terminal result was emitted on both stdout and stderr".into())
        );
    }

    #[test]
    fn s11_invalid_framings() {
        let cases = [
            (
                "quoted <phase-complete>fixture</phase-complete>",
                STDOUT_MISPLACED,
            ),
            (
                "<phase-complete>Done.</phase-complete>\nBut then it failed.\n",
                STDOUT_MISPLACED,
            ),
            (
                "<phase-complete> \n\t </phase-complete>",
                "terminal marker in stdout has an empty result",
            ),
            (
                "<phase-complete>Done.\n",
                "unclosed terminal marker in stdout",
            ),
            (
                "Done.</phase-complete>\n",
                "unclosed terminal marker in stdout",
            ),
            (
                "<phase-complete result\n",
                "malformed terminal marker in stdout",
            ),
            (
                "```text\n<phase-complete>Done.</phase-complete>\n",
                STDOUT_MISPLACED,
            ),
            (
                "~~~\n<phase-blocked>Stuck.</phase-blocked>\n",
                STDOUT_MISPLACED,
            ),
        ];
        for (text, message) in cases {
            assert_eq!(frame(text), invalid(message), "{text:?}");
            assert_eq!(
                validate_streams(text.as_bytes(), b""),
                MarkerVerdict::Invalid(message.to_owned()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn s12_nested_block() {
        assert_eq!(
            frame("<phase-complete>\n<phase-blocked>x</phase-blocked>\n</phase-complete>\n"),
            multiple("multiple terminal markers in stdout")
        );
    }

    // Reference §10.2, scenarios 13–15, and §14.1's rendering example.

    #[test]
    fn s13_filter_hides_body_across_chunks() {
        assert_eq!(
            filter_chunks(&[
                "before <phase-blocked>secret",
                " detail",
                "</phase-blocked> after\n"
            ]),
            ["before ", "", " after\n", ""]
        );
    }

    #[test]
    fn s14_filter_hides_split_tags_and_multiline_body() {
        assert_eq!(
            filter_chunks(&[
                "before <phase-",
                "complete>secret\nsecond line",
                "</phase-",
                "complete> after"
            ]),
            ["before ", "", "", " after", ""]
        );
    }

    #[test]
    fn s15_filter_flushes_partial_prefix_at_end() {
        assert_eq!(filter_chunks(&["ordinary <pha"]), ["ordinary ", "<pha"]);
    }

    #[test]
    fn filter_matches_codex_wrapper_example() {
        let outputs = filter_chunks(&[
            "first <phase-blo",
            "cked>secret\r\nsecond",
            " line</phase-blocked> tail\r",
            "\n<fence>\r\n",
            "print('<phase-blocked >')",
        ]);
        assert_eq!(
            outputs.concat(),
            "first  tail\r\n<fence>\r\nprint('<phase-blocked >')"
        );
    }

    // Tag grammar.

    #[test]
    fn malformed_tags() {
        for tag in [
            "<phase-blocked >",
            "<phase-complete result>",
            "</phase-complete x>",
            "< phase-complete>",
            "</ phase-complete>",
            "<phase-complete/",
            "<phase-complete/>",
            "</phase-complete/>",
            "<\nphase-complete>",
            "<phase-complete\n",
            "<phase-needs-clarification\t>",
        ] {
            let text = format!("<phase-complete>Done.</phase-complete>\n{tag}");
            assert_eq!(
                frame(&text),
                invalid("malformed terminal marker in stdout"),
                "{tag:?}"
            );
        }
    }

    #[test]
    fn tag_name_cut_off_at_end_is_malformed() {
        for end in [
            "<phase-complete",
            "</phase-blocked",
            "< /phase-needs-clarification",
        ] {
            assert_eq!(
                frame(end),
                invalid("malformed terminal marker in stdout"),
                "{end:?}"
            );
        }
    }

    #[test]
    fn near_misses_are_ordinary_text() {
        for text in [
            "<phase-completed>",
            "</phase-blockedness>",
            "<phase-complete-x>",
            "<phase->",
            "<phase-",
            "<pha",
            "<",
            "</",
            "< b",
            "a < b and c > d",
            "<p>html</p>",
            "<<phase-",
            "<PHASE-COMPLETE>",
            "<phase-complete<",
            "<phase_complete>",
        ] {
            assert_eq!(frame(text), StreamVerdict::NoResult, "{text:?}");
            let with_result = format!("{text}\n<phase-complete>Done.</phase-complete>");
            assert_eq!(
                frame(&with_result),
                result(ResultKind::Complete, "Done."),
                "{text:?}"
            );
        }
    }

    #[test]
    fn doubled_angle_bracket_starts_a_new_tag() {
        assert_eq!(
            frame("<\n<phase-complete>Done.</phase-complete>"),
            result(ResultKind::Complete, "Done.")
        );
        assert_eq!(
            frame("<<phase-complete>Done.</phase-complete>"),
            invalid(STDOUT_MISPLACED)
        );
    }

    // Placement.

    #[test]
    fn opening_tag_must_start_its_line() {
        for text in [
            " <phase-complete>Done.</phase-complete>",
            "\t<phase-complete>Done.</phase-complete>",
            "x\r<phase-complete>Done.</phase-complete>",
            "note: <phase-complete>Done.</phase-complete>\n",
        ] {
            assert_eq!(frame(text), invalid(STDOUT_MISPLACED), "{text:?}");
        }
    }

    #[test]
    fn closing_tag_may_sit_anywhere_on_its_line() {
        assert_eq!(
            frame("<phase-complete>Done.\n  </phase-complete>"),
            result(ResultKind::Complete, "Done.")
        );
    }

    #[test]
    fn only_whitespace_may_follow_the_block() {
        assert_eq!(
            frame("<phase-complete>Done.</phase-complete> \t\r\n\n  \x0b\x0c\n"),
            result(ResultKind::Complete, "Done.")
        );
        assert_eq!(
            frame("<phase-complete>Done.</phase-complete>."),
            invalid(STDOUT_MISPLACED)
        );
        assert_eq!(
            frame_chunks(&[b"<phase-complete>Done.</phase-complete>\n", b"\n", b"x"]),
            invalid(STDOUT_MISPLACED)
        );
    }

    #[test]
    fn fences_around_the_block() {
        let fenced_example = "```\n<phase-complete>Example.</phase-complete>\n```\n";
        assert_eq!(frame(fenced_example), invalid(STDOUT_MISPLACED));
        // A fenced example still counts as a block.
        assert_eq!(
            frame(&format!(
                "{fenced_example}<phase-complete>Real.</phase-complete>\n"
            )),
            multiple("multiple terminal markers in stdout")
        );
        // A closed fence before the block, or inside its body, is harmless.
        assert_eq!(
            frame("```\ncode\n```\n<phase-complete>Done.</phase-complete>"),
            result(ResultKind::Complete, "Done.")
        );
        assert_eq!(
            frame("<phase-complete>Ran:\n~~~\nmake\n~~~\n</phase-complete>"),
            result(ResultKind::Complete, "Ran:\n~~~\nmake\n~~~")
        );
        // A fence opened in the body and never closed puts the closing tag inside it.
        assert_eq!(
            frame("<phase-complete>Ran:\n```\nmake\n</phase-complete>\n"),
            invalid(STDOUT_MISPLACED)
        );
        // An indented fence still counts; four spaces do not make a fence.
        assert_eq!(
            frame("   ~~~\n<phase-complete>Done.</phase-complete>"),
            invalid(STDOUT_MISPLACED)
        );
        assert_eq!(
            frame("    ~~~\n<phase-complete>Done.</phase-complete>"),
            result(ResultKind::Complete, "Done.")
        );
    }

    // Counting.

    #[test]
    fn tag_counts() {
        assert_eq!(
            frame("<phase-complete>a</phase-complete>\n</phase-complete>"),
            multiple("multiple terminal markers in stdout")
        );
        assert_eq!(
            frame("<phase-complete>a</phase-complete>\n<phase-complete>"),
            multiple("multiple terminal markers in stdout")
        );
        assert_eq!(
            frame("<phase-complete>\n<phase-complete>"),
            multiple("nested or mismatched terminal marker in stdout")
        );
        assert_eq!(
            frame("<phase-complete>a</phase-blocked>"),
            multiple("nested or mismatched terminal marker in stdout")
        );
        assert_eq!(
            frame("</phase-complete>\n<phase-complete>a"),
            multiple("nested or mismatched terminal marker in stdout")
        );
        assert_eq!(
            frame("<phase-blocked>\n</phase-blocked>\n<phase-blocked>\n</phase-blocked>"),
            multiple("multiple terminal markers in stdout")
        );
    }

    #[test]
    fn precedence_of_faults() {
        // Multiple beats malformed.
        assert_eq!(
            frame("<phase-complete >\n<phase-complete>a</phase-complete>\n</phase-complete>"),
            multiple("multiple terminal markers in stdout")
        );
        // Malformed beats unclosed and placement.
        assert_eq!(
            frame("x <phase-complete>a\n<phase-blocked/"),
            invalid("malformed terminal marker in stdout")
        );
        // Unclosed beats placement.
        assert_eq!(
            frame("x <phase-complete>a"),
            invalid("unclosed terminal marker in stdout")
        );
        // Nested or mismatched beats placement.
        assert_eq!(
            frame("x <phase-complete>a</phase-blocked>"),
            multiple("nested or mismatched terminal marker in stdout")
        );
        // Placement beats an empty body.
        assert_eq!(
            frame("x <phase-complete> </phase-complete>"),
            invalid(STDOUT_MISPLACED)
        );
        assert_eq!(
            frame("<phase-complete> </phase-complete>\ntrailing"),
            invalid(STDOUT_MISPLACED)
        );
    }

    #[test]
    fn messages_name_the_stream() {
        let mut framer = StreamFramer::new(OutputStream::Stderr);
        framer.feed(b"<phase-complete>a");
        assert_eq!(
            framer.finish(),
            invalid("unclosed terminal marker in stderr")
        );
    }

    // Bodies.

    #[test]
    fn crlf_bodies_and_crlf_after_close() {
        assert_eq!(
            frame("log\r\n<phase-complete>\r\nLine one.\r\nLine two.\r\n</phase-complete>\r\n"),
            result(ResultKind::Complete, "Line one.\r\nLine two.")
        );
    }

    #[test]
    fn invalid_utf8_in_body_is_replaced() {
        assert_eq!(
            frame_chunks(&[b"<phase-complete>caf\xff!</phase-complete>"]),
            result(ResultKind::Complete, "caf\u{fffd}!")
        );
    }

    #[test]
    fn body_keeps_inner_angle_brackets_and_near_misses() {
        assert_eq!(
            frame("<phase-complete>Use <b> and <phase-completed> tags; a < b.</phase-complete>"),
            result(
                ResultKind::Complete,
                "Use <b> and <phase-completed> tags; a < b."
            )
        );
    }

    #[test]
    fn ten_mib_body_fed_in_chunks() {
        let body = "0123456789abcdef\n".repeat(10 * 1024 * 1024 / 17);
        let text = format!("progress\n<phase-complete>{body}x</phase-complete>\n");
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        for chunk in text.as_bytes().chunks(64 * 1024) {
            framer.feed(chunk);
        }
        let StreamVerdict::Result(block) = framer.finish() else {
            panic!("expected a result");
        };
        assert_eq!(block.text.len(), body.len() + 1);
        assert!(block.text.starts_with("0123456789abcdef\n"));
        assert!(block.text.ends_with("\nx"));
    }

    #[test]
    fn body_size_limit() {
        let at_limit = vec![b'a'; MAX_RESULT_BYTES];
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        framer.feed(b"<phase-complete>");
        framer.feed(&at_limit);
        framer.feed(b"</phase-complete>");
        let StreamVerdict::Result(block) = framer.finish() else {
            panic!("a body of exactly the limit is accepted");
        };
        assert_eq!(block.text.len(), MAX_RESULT_BYTES);

        let mut framer = StreamFramer::new(OutputStream::Stdout);
        framer.feed(b"<phase-complete>");
        framer.feed(&at_limit);
        framer.feed(b" </phase-complete>");
        assert_eq!(
            framer.finish(),
            invalid("terminal marker in stdout exceeds 16 MiB")
        );
    }

    #[test]
    fn oversized_body_is_released_while_streaming() {
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        framer.feed(b"<phase-complete>");
        for _ in 0..20 {
            framer.feed(&[b'a'; 1024 * 1024]);
        }
        assert_eq!(framer.retained_bytes(), 0);
        framer.feed(b"</phase-complete>");
        assert_eq!(
            framer.finish(),
            invalid("terminal marker in stdout exceeds 16 MiB")
        );
    }

    #[test]
    fn hopeless_blocks_keep_no_body() {
        for start in [
            "quoted <phase-complete>",
            "```\n<phase-complete>",
            "<phase-blocked >\n<phase-complete>",
            "<phase-complete>a<phase-complete>",
            "<phase-complete>a</phase-blocked>",
        ] {
            let mut framer = StreamFramer::new(OutputStream::Stdout);
            framer.feed(start.as_bytes());
            framer.feed(b"lots of output");
            assert_eq!(framer.retained_bytes(), 0, "{start:?}");
        }
    }

    // Across streams.

    #[test]
    fn combine_fails_closed_and_prefers_stdout() {
        let done = || result(ResultKind::Complete, "Done.");
        let bad = |s: &str| invalid(&format!("bad {s}"));
        let many = |s: &str| multiple(&format!("many {s}"));
        use StreamVerdict::NoResult;
        let cases = [
            (
                NoResult,
                NoResult,
                MarkerVerdict::Missing("missing terminal marker".into()),
            ),
            (done(), NoResult, complete("Done.")),
            (NoResult, done(), complete("Done.")),
            (
                done(),
                done(),
                MarkerVerdict::Multiple(
                    "terminal result was emitted on both stdout and stderr".into(),
                ),
            ),
            (done(), bad("err"), MarkerVerdict::Invalid("bad err".into())),
            (bad("out"), done(), MarkerVerdict::Invalid("bad out".into())),
            (
                done(),
                many("err"),
                MarkerVerdict::Multiple("many err".into()),
            ),
            (
                NoResult,
                bad("err"),
                MarkerVerdict::Invalid("bad err".into()),
            ),
            (
                bad("out"),
                many("err"),
                MarkerVerdict::Invalid("bad out".into()),
            ),
            (
                many("out"),
                bad("err"),
                MarkerVerdict::Multiple("many out".into()),
            ),
        ];
        for (stdout, stderr, expected) in cases {
            assert_eq!(
                combine(stdout.clone(), stderr.clone()),
                expected,
                "{stdout:?} {stderr:?}"
            );
        }
    }

    #[test]
    fn fragments_on_two_streams_never_join() {
        assert_eq!(
            validate_streams(b"<phase-complete>Done.", b"</phase-complete>"),
            MarkerVerdict::Invalid("unclosed terminal marker in stdout".into())
        );
        assert_eq!(
            validate_streams(b"<phase-", b"complete>Done.</phase-complete>"),
            MarkerVerdict::Invalid("unclosed terminal marker in stderr".into())
        );
    }

    // Chunking.

    const REPRESENTATIVE: &[&str] = &[
        "done\n<phase-complete>Built it.</phase-complete>\n",
        "<phase-needs-clarification>Which\r\nAPI?</phase-needs-clarification>\r\n",
        "quoted <phase-complete>fixture</phase-complete>",
        "<phase-complete>a</phase-complete>\n<phase-complete>b</phase-complete>",
        "```\n<phase-blocked>x</phase-blocked>\n```\n",
        "~~~\nx\n~~~\n<phase-blocked>x\n```\ny\n```\n</phase-blocked>  \n",
        "<phase-complete result\n",
        "< phase-complete>",
        "a <phase-completed> b\n<phase-complete>x</phase-complete>",
        "<<phase-complete>x</phase-complete>",
        "<\n<phase-blocked>caf\u{e9}</phase-blocked>",
        "<phase-complete>x</phase-blocked>",
        "<phase-complete>   </phase-complete>",
        "<phase-complete>x</phase-complete>\ntail",
        "<phase-complete>x</phase-complete",
        "<phase-blocked>\u{1F600}</phase-blocked>",
    ];

    #[test]
    fn framer_verdict_ignores_chunk_boundaries() {
        for text in REPRESENTATIVE {
            let bytes = text.as_bytes();
            let whole = frame_chunks(&[bytes]);
            for first in 0..=bytes.len() {
                for second in first..=bytes.len() {
                    let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                    assert_eq!(frame_chunks(&chunks), whole, "{text:?} at {first}/{second}");
                }
            }
        }
    }

    #[test]
    fn filter_output_ignores_chunk_boundaries() {
        let inputs = [
            "before <phase-blocked>secret</phase-blocked> after\n",
            "x<phase-complete>a</phase-blocked>b</phase-complete>c",
            "<phase-<phase-complete>hidden</phase-complete>!",
            "open <phase-needs-clarification>never closed </phase-needs-clarif",
            "a < b <p> <phase-completed>",
            "<phase-complete><phase-complete>x</phase-complete>y</phase-complete>",
        ];
        for text in inputs {
            let bytes = text.as_bytes();
            let whole = filter_all(LiveFilter::new(), &[bytes]);
            for first in 0..=bytes.len() {
                for second in first..=bytes.len() {
                    let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                    assert_eq!(
                        filter_all(LiveFilter::new(), &chunks),
                        whole,
                        "{text:?} at {first}/{second}"
                    );
                }
            }
        }
    }

    // Live filter rules.

    #[test]
    fn pass_through_only_without_tag_starts() {
        let mut filter = LiveFilter::new();
        assert!(filter.pass_through(b"a < b and Vec<u8>\n"));
        assert!(filter.pass_through(b"ends in a tag <p>"));
        // An end that could begin a tag in the next chunk.
        assert!(!filter.pass_through(b"ends in <p"));
        assert!(!filter.pass_through(b"ends in <phase"));
        assert!(!filter.pass_through(b"x <phase-complete>"));
        assert!(!filter.pass_through(b"text ending in <"));
        assert!(!filter.pass_through(b"text ending in <pha"));
        let mut holding = LiveFilter::new();
        holding.filter(b"<phase-", &mut Vec::new());
        assert!(!holding.pass_through(b"plain"));
    }

    #[test]
    fn filter_passes_other_angle_brackets_at_once() {
        assert_eq!(
            filter_chunks(&["a < b <p>", "x<y"]),
            ["a < b <p>", "x<y", ""]
        );
        assert_eq!(filter_chunks(&["x <", "p"]), ["x ", "", "<p"]);
        assert_eq!(filter_chunks(&["<phase-", "x"]), ["", "<phase-x", ""]);
        assert_eq!(
            filter_chunks(&["</phase-complete>"]),
            ["</phase-complete>", ""]
        );
    }

    #[test]
    fn filter_held_prefix_can_give_way_to_a_new_tag() {
        assert_eq!(
            filter_chunks(&["<phase-", "<phase-blocked>hidden</phase-blocked>!"]),
            ["", "<phase-!", ""]
        );
    }

    #[test]
    fn filter_hides_only_through_the_matching_close() {
        assert_eq!(
            filter_chunks(&["x<phase-complete>a</phase-blocked>b</phase-complete>c"]),
            ["xc", ""]
        );
        assert_eq!(
            filter_chunks(&[
                "<phase-complete><phase-complete>x</phase-complete>y</phase-complete>"
            ]),
            ["y</phase-complete>", ""]
        );
    }

    #[test]
    fn filter_hides_inline_blocks() {
        assert_eq!(
            filter_chunks(&[
                "say <phase-complete>x</phase-complete> twice <phase-blocked>y</phase-blocked>."
            ]),
            ["say  twice .", ""]
        );
    }

    #[test]
    fn filter_gives_up_a_mid_line_block_at_the_end_of_the_next_line() {
        // A tag quoted in chatter: shown again from the second line end on, so the lines after
        // it are not swallowed up to the real block at the end, which is still hidden.
        assert_eq!(
            filter_chunks(&[
                "$ grep -n '<phase-complete>' src/\n",
                "src/a.rs:1: match\n",
                "tests pass\n",
                "<phase-complete>done</phase-complete>\n",
            ])
            .concat(),
            "$ grep -n '<phase-complete>' src/\nsrc/a.rs:1: match\ntests pass\n\n"
        );
        // Cut anywhere, the same.
        assert_eq!(
            filter_chunks(&["say <phase-blocked>x\ny", "\nz</phase-blocked>\n"]).concat(),
            "say <phase-blocked>x\ny\nz</phase-blocked>\n"
        );
        // A block that closes on its second line is hidden (the reference's example).
        assert_eq!(
            filter_chunks(&["say <phase-blocked>x\ny</phase-blocked>!\n"]).concat(),
            "say !\n"
        );
    }

    #[test]
    fn filter_hides_a_line_start_block_over_many_lines() {
        let body: String = (0..100).map(|n| format!("line {n}\n")).collect();
        assert_eq!(
            filter_chunks(&["progress\n<phase-complete>", &body, "</phase-complete>\n"]).concat(),
            "progress\n\n"
        );
        // A block opened right after a hidden one is not at a line start.
        assert_eq!(
            filter_chunks(&[
                "<phase-complete>a</phase-complete><phase-blocked>\n\nb</phase-blocked>"
            ])
            .concat(),
            "<phase-blocked>\n\nb</phase-blocked>"
        );
    }

    #[test]
    fn filter_shows_unclosed_block_at_end() {
        assert_eq!(
            filter_chunks(&["x<phase-blocked>secret", "\nmore</phase-bl"]),
            ["x", "", "<phase-blocked>secret\nmore</phase-bl"]
        );
    }

    #[test]
    fn filter_shows_a_block_that_outgrows_the_cap() {
        let mut filter = LiveFilter::with_hidden_cap(32);
        let mut visible = Vec::new();
        // `<phase-complete>` is 16 bytes, so the 17th body byte is the first past the cap.
        filter.filter(b"a<phase-complete>0123456789abcdef", &mut visible);
        assert_eq!(visible, b"a");
        filter.filter(b"XYZ", &mut visible);
        assert_eq!(visible, b"a<phase-complete>0123456789abcdefXYZ");
        filter.filter(b"</phase-complete>b", &mut visible);
        filter.finish(&mut visible);
        assert_eq!(
            visible,
            b"a<phase-complete>0123456789abcdefXYZ</phase-complete>b"
        );

        // The byte that completes the closing tag wins over the cap.
        let mut visible = Vec::new();
        let mut filter = LiveFilter::with_hidden_cap(32);
        filter.filter(b"<phase-complete></phase-complete>b", &mut visible);
        filter.finish(&mut visible);
        assert_eq!(visible, b"b");
    }

    #[test]
    fn filter_holds_nothing_in_plain_output() {
        let mut filter = LiveFilter::new();
        let mut visible = Vec::new();
        filter.filter(b"plain output\nwithout tags\n", &mut visible);
        assert!(filter.held.is_empty() && filter.hidden.is_none());
        assert_eq!(visible, b"plain output\nwithout tags\n");
    }

    // Properties.

    /// Exact tags and a malformed one: each decides a verdict, so they are drawn rarely.
    const TAGS: &[&str] = &[
        "<phase-blocked ",
        "<phase-complete>",
        "</phase-complete>",
        "<phase-blocked>",
        "</phase-blocked>",
        "<phase-needs-clarification>",
        "</phase-needs-clarification>",
    ];

    const NOISE: &[&str] = &[
        "<phase-",
        "</phase-comp",
        "<phase-needs-",
        "<phase-completed>",
        "<",
        "</",
        ">",
        "/",
        "\n",
        "\r\n",
        "\r",
        "```",
        "~~~",
        "```text",
        "   ",
        " ",
        "\t",
        "done",
        "phase-complete",
        "caf\u{e9}",
        "x",
    ];

    /// Text from the fragment vocabulary, a tag about one fragment in `1 + noise`.
    fn fragments(noise: u32) -> impl Strategy<Value = String> {
        let fragment = prop_oneof![
            noise => prop::sample::select(NOISE),
            1 => prop::sample::select(TAGS),
        ];
        prop::collection::vec(fragment, 0..30).prop_map(|parts| parts.concat())
    }

    fn vocabulary_text() -> impl Strategy<Value = Vec<u8>> {
        let loose = fragments(6).prop_map(String::into_bytes);
        // Text around one well-formed block, so that results are exercised too.
        let around_block = (
            fragments(40),
            prop::sample::select(&ResultKind::ALL[..]),
            fragments(40),
            prop::sample::select(&["", "\n", " \r\n", "x"][..]),
        )
            .prop_map(|(before, kind, body, after)| {
                format!(
                    "{before}\n{}{body}{}{after}",
                    kind.open_tag(),
                    kind.close_tag()
                )
                .into_bytes()
            });
        prop_oneof![loose, around_block]
    }

    /// Splits `bytes` at the given (unsorted, unbounded) cut points.
    fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&bytes[start..cut]);
            start = cut;
        }
        chunks.push(&bytes[start..]);
        chunks
    }

    /// Fragments that crowd the cases the tag search must get right: `<` with and without
    /// `/` and whitespace (newlines included) before a name, names with and without their `<`,
    /// names cut short, and fences that change where an opening tag is framed.
    const DENSE: &[&str] = &[
        "<",
        "</",
        "< ",
        "</ ",
        "<\n",
        "/",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\x0c",
        ">",
        "p",
        "pha",
        "phase",
        "phase-",
        "phase-complete",
        "phase-blocked",
        "phase-needs-clarification",
        "<phase-",
        "<phase-complete",
        "</phase-blocked",
        "<phase-complete>",
        "</phase-complete>",
        "<phase-blocked>",
        "</phase-blocked>",
        "x",
        "```",
        "~~~",
        "\n```\n",
    ];

    fn dense_text() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(DENSE), 0..40)
            .prop_map(|parts| parts.concat().into_bytes())
    }

    /// The straightforward search the fast ones must agree with: reads a possible tag at
    /// every `<`.
    fn every_angle_bracket(chunk: &[u8], from: usize) -> Option<usize> {
        memchr(b'<', &chunk[from..]).map(|at| from + at)
    }

    fn reference_find_opening_tag(chunk: &[u8]) -> Option<(usize, TagMatch, ResultKind)> {
        memchr::memchr_iter(b'<', chunk).find_map(|at| match match_opening_tag(&[], &chunk[at..]) {
            (TagMatch::Mismatch, _) => None,
            (found, kind) => Some((at, found, kind)),
        })
    }

    fn reference_find_tag(chunk: &[u8], tag: &str) -> Option<(usize, TagMatch)> {
        memchr::memchr_iter(b'<', chunk).find_map(|at| match match_tag(&[], &chunk[at..], tag) {
            TagMatch::Mismatch => None,
            found => Some((at, found)),
        })
    }

    #[test]
    fn every_tag_name_starts_with_the_searched_prefix() {
        for kind in ResultKind::ALL {
            assert!(kind.tag().as_bytes().starts_with(NAME_PREFIX), "{kind:?}");
            assert!(
                kind.open_tag().as_bytes().starts_with(OPENING_PREFIX),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn tag_search_skips_only_hopeless_angle_brackets() {
        let cases: &[(&str, Option<usize>)] = &[
            ("a < b </div> <p> Vec<u8>", None),
            ("x <phase-complete>", Some(2)),
            ("x < \n / \t phase-", Some(2)),
            ("x </phase-", Some(2)),
            ("x <//phase-", None),
            ("x </ /phase-", None),
            ("x <a phase-", None),
            ("phase- <", Some(7)),
            ("x < /", Some(2)),
            ("x <\n  pha", Some(2)),
            ("x <phx", None),
            ("x <<phase-", Some(3)),
        ];
        for &(text, expected) in cases {
            assert_eq!(next_tag_start(text.as_bytes(), 0), expected, "{text:?}");
        }
        assert_eq!(next_tag_start(b"<phase- <phase-", 1), Some(8));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn framer_matches_reading_every_angle_bracket(
            text in dense_text(),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
        ) {
            let chunks = split(&text, &cuts);
            let mut fast = StreamFramer::new(OutputStream::Stdout);
            let mut reference = StreamFramer::new(OutputStream::Stdout);
            for chunk in &chunks {
                fast.feed(chunk);
                reference.feed_with(chunk, every_angle_bracket);
                prop_assert_eq!(format!("{fast:?}"), format!("{reference:?}"));
            }
            let mut whole = StreamFramer::new(OutputStream::Stdout);
            whole.feed_with(&text, every_angle_bracket);
            let verdict = fast.finish();
            prop_assert_eq!(&verdict, &reference.finish());
            prop_assert_eq!(verdict, whole.finish());
        }

        #[test]
        fn live_filter_search_matches_checking_every_angle_bracket(text in dense_text()) {
            // Every prefix, as chunks end anywhere and the tail is where cut-off tags hide.
            for end in 0..=text.len() {
                let chunk = &text[..end];
                prop_assert_eq!(find_opening_tag(chunk), reference_find_opening_tag(chunk));
                for kind in ResultKind::ALL {
                    prop_assert_eq!(
                        find_tag(chunk, kind.close_tag()),
                        reference_find_tag(chunk, kind.close_tag())
                    );
                }
            }
        }

        #[test]
        fn never_panics_on_arbitrary_chunks(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)
        ) {
            let mut framer = StreamFramer::new(OutputStream::Stderr);
            let mut filter = LiveFilter::with_hidden_cap(40);
            let mut visible = Vec::new();
            for chunk in &chunks {
                framer.feed(chunk);
                filter.filter(chunk, &mut visible);
            }
            let _ = framer.finish();
            filter.finish(&mut visible);
        }

        #[test]
        fn framer_verdict_is_the_same_for_any_chunking(
            text in vocabulary_text(),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
        ) {
            let whole = frame_chunks(&[&text]);
            prop_assert_eq!(frame_chunks(&split(&text, &cuts)), whole);
        }

        #[test]
        fn filter_output_is_the_same_for_any_chunking(
            text in vocabulary_text(),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
            cap in 28usize..80,
        ) {
            let chunks = split(&text, &cuts);
            prop_assert_eq!(
                filter_all(LiveFilter::new(), &chunks),
                filter_all(LiveFilter::new(), &[&text])
            );
            prop_assert_eq!(
                filter_all(LiveFilter::with_hidden_cap(cap), &chunks),
                filter_all(LiveFilter::with_hidden_cap(cap), &[&text])
            );
        }

        #[test]
        fn pass_through_means_filter_is_identity(
            text in dense_text(),
            cut in any::<usize>(),
        ) {
            let cut = cut % (text.len() + 1);
            let (prefix, chunk) = text.split_at(cut);
            let mut filter = LiveFilter::new();
            let mut ignored = Vec::new();
            filter.filter(prefix, &mut ignored);
            let mut copy = LiveFilter::new();
            copy.filter(prefix, &mut ignored);
            if filter.pass_through(chunk) {
                let mut visible = Vec::new();
                copy.filter(chunk, &mut visible);
                prop_assert_eq!(visible, chunk.to_vec());
                prop_assert!(copy.held.is_empty() && copy.hidden.is_none());
                prop_assert_eq!(copy.at_line_start, filter.at_line_start);
            }
        }

        #[test]
        fn filter_is_identity_without_angle_brackets(
            text in prop::collection::vec(any::<u8>().prop_filter("no <", |b| *b != b'<'), 0..200),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
        ) {
            let chunks = split(&text, &cuts);
            let mut filter = LiveFilter::new();
            for chunk in &chunks {
                let mut visible = Vec::new();
                filter.filter(chunk, &mut visible);
                prop_assert_eq!(&visible[..], *chunk);
            }
            let mut visible = Vec::new();
            filter.finish(&mut visible);
            prop_assert!(visible.is_empty());
        }
    }
}
