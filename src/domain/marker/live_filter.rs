//! The live-display filter: hides every span from an exact opening tag (at any position) through
//! its closing tag, even when split across reads, holding back at most a possible partial tag at
//! a chunk boundary. What it holds is bounded in bytes (a block that would outgrow the result
//! cap is shown) and in time (the caller releases a hold older than [`LIVE_HOLD_LIMIT`]).

use std::fmt;
use std::time::Duration;

use super::framing::MAX_RESULT_BYTES;
use super::tags::*;

pub(super) struct HiddenBlock {
    kind: ResultKind,
    /// Everything from the opening tag on, kept to be shown if the block never closes.
    text: Vec<u8>,
    /// How many bytes of the closing tag end `text`.
    close_matched: usize,
    /// For a block opened mid-line: how many more line ends it may contain before it is given
    /// up and shown. `None` for a block opened at a line start.
    line_ends_left: Option<usize>,
}

/// How long the live console may hold text back before the caller releases it: a result block
/// arrives in one go, so a hold this old is an opening tag that is not closing soon.
pub const LIVE_HOLD_LIMIT: Duration = Duration::from_secs(5);

/// How many line ends a block opened mid-line may span (the reference hides `first
/// <phase-blocked>secret\r\nsecond line</phase-blocked>`). Such a block is never a result, and a
/// tag quoted in chatter (`grep '<phase-complete>'`) must not hide everything up to the real
/// result block at the end.
const MID_LINE_BLOCK_LINE_ENDS: usize = 2;

/// Whether the line end after a hidden block is still to be swallowed: a block that began its
/// line takes the line end after its closing tag with it, so it leaves no blank line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LineEndAfterBlock {
    /// Nothing to swallow.
    None,
    /// The next byte, if it is `\n`, or the next two, if they are `\r\n`.
    Expected,
    /// A `\r` ended the last chunk: held, and swallowed with a `\n` that follows.
    CrHeld,
}

/// Hides complete result blocks from live output, holding back possible partial tags across
/// chunks. One filter per stream.
pub struct LiveFilter {
    /// The start of a possible opening tag cut off at the end of the last chunk.
    pub(super) held: Vec<u8>,
    pub(super) hidden: Option<HiddenBlock>,
    /// A block whose hidden text would outgrow this is shown instead: it cannot be a result.
    hidden_cap: usize,
    /// The last byte settled (shown or hidden) ended a line, or nothing was settled yet.
    pub(super) at_line_start: bool,
    pub(super) line_end_after_block: LineEndAfterBlock,
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

    pub(super) fn with_hidden_cap(hidden_cap: usize) -> Self {
        Self {
            held: Vec::new(),
            hidden: None,
            hidden_cap: hidden_cap.max(LONGEST_TAG),
            at_line_start: true,
            line_end_after_block: LineEndAfterBlock::None,
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
                None if self.line_end_after_block != LineEndAfterBlock::None => {
                    self.swallow_line_end(chunk, visible)
                }
                None => self.show(chunk, visible),
                Some(block) => self.hide(block, chunk, visible),
            };
        }
    }

    /// Filters `chunk` without copying it when it passes through unchanged: nothing held or
    /// hidden, no line end to swallow, no `<phase-` in it and no end that could begin one.
    /// Returns true when it did (the caller shows `chunk` itself); otherwise nothing happened
    /// and the caller uses [`filter`](Self::filter).
    pub fn pass_through(&mut self, chunk: &[u8]) -> bool {
        let unchanged = self.held.is_empty()
            && self.hidden.is_none()
            && self.line_end_after_block == LineEndAfterBlock::None
            && OPENING_PREFIX_FINDER.find(chunk).is_none()
            && !(1..OPENING_PREFIX.len()).any(|len| chunk.ends_with(&OPENING_PREFIX[..len]));
        if unchanged && let Some(last) = chunk.last() {
            self.at_line_start = *last == b'\n';
        }
        unchanged
    }

    /// Whether text is held back: a block being hidden, a possible partial tag, or a `\r`
    /// that may begin the line end after a hidden block.
    pub fn is_holding(&self) -> bool {
        self.hidden.is_some()
            || !self.held.is_empty()
            || self.line_end_after_block == LineEndAfterBlock::CrHeld
    }

    /// Ends the stream, or gives up the current hold ([`LIVE_HOLD_LIMIT`]): shows a held
    /// partial tag, a still-open block or a held `\r`. After a hold is given up, the rest of the
    /// block it began, closing tag included, shows as ordinary text.
    pub fn finish(&mut self, visible: &mut Vec<u8>) {
        let line_end = std::mem::replace(&mut self.line_end_after_block, LineEndAfterBlock::None);
        if line_end == LineEndAfterBlock::CrHeld {
            self.show_settled(b"\r", visible);
        }
        if let Some(block) = self.hidden.take() {
            self.show_settled(&block.text, visible);
        }
        let held = std::mem::take(&mut self.held);
        self.show_settled(&held, visible);
    }

    /// Right after a hidden block that began its line: drops the line end that follows it;
    /// returns the rest of `chunk`.
    fn swallow_line_end<'a>(&mut self, chunk: &'a [u8], visible: &mut Vec<u8>) -> &'a [u8] {
        let expected = std::mem::replace(&mut self.line_end_after_block, LineEndAfterBlock::None);
        match (expected, chunk) {
            (_, [b'\n', rest @ ..]) | (LineEndAfterBlock::Expected, [b'\r', b'\n', rest @ ..]) => {
                self.at_line_start = true;
                rest
            }
            (LineEndAfterBlock::Expected, [b'\r']) => {
                self.line_end_after_block = LineEndAfterBlock::CrHeld;
                &[]
            }
            (LineEndAfterBlock::CrHeld, _) => {
                self.show_settled(b"\r", visible);
                chunk
            }
            _ => chunk,
        }
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
                if block.line_ends_left.is_none() {
                    self.line_end_after_block = LineEndAfterBlock::Expected;
                }
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
