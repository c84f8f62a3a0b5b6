//! The three result tags and how they are recognised in raw bytes: the possible-tag reader the
//! framer steps byte by byte, exact and partial matches for the live filter, and the searches
//! that skip output in which no tag can begin.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::{memchr, memmem, memrchr};
use strum::IntoEnumIterator;

/// Length of the longest exact tag, `</phase-needs-clarification>`.
pub(super) const LONGEST_TAG: usize = ResultKind::NeedsClarification.close_tag().len();

/// Searching for it, rather than stopping at every `<`, keeps framing fast on markup-heavy
/// output (`</div>`, `a < b`, `Vec<u8>`).
pub(super) const NAME_PREFIX: &[u8] = b"phase-";

pub(super) const OPENING_PREFIX: &[u8] = b"<phase-";

pub(super) static NAME_PREFIX_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(NAME_PREFIX));

pub(super) static OPENING_PREFIX_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(OPENING_PREFIX));

#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "kebab-case", prefix = "phase-")]
pub enum ResultKind {
    Complete,
    Blocked,
    NeedsClarification,
}

impl ResultKind {
    /// The tag name, e.g. `phase-complete`.
    pub fn tag(self) -> &'static str {
        self.into()
    }

    pub(super) const fn open_tag(self) -> &'static str {
        match self {
            Self::Complete => "<phase-complete>",
            Self::Blocked => "<phase-blocked>",
            Self::NeedsClarification => "<phase-needs-clarification>",
        }
    }

    pub(super) const fn close_tag(self) -> &'static str {
        match self {
            Self::Complete => "</phase-complete>",
            Self::Blocked => "</phase-blocked>",
            Self::NeedsClarification => "</phase-needs-clarification>",
        }
    }

    /// This kind's bit in a set of kinds still matching a partial tag name.
    pub(super) fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// Whitespace as far as framing is concerned: ASCII only, since the stream is not decoded.
pub(super) fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// Where in `chunk[from..]` the next tag may begin: the first `<` followed by optional
/// whitespace, `/` and whitespace, then `phase-` (or a part of all that cut off by the chunk's
/// end). Every other `<` would be read as ordinary text, so skipping it changes nothing.
pub(super) fn next_tag_start(chunk: &[u8], from: usize) -> Option<usize> {
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
pub(super) fn tag_start_before(before: &[u8]) -> Option<usize> {
    let last_non_space = |bytes: &[u8]| bytes.iter().rposition(|&byte| !is_space(byte));
    let mut at = last_non_space(before)?;
    if before[at] == b'/' {
        at = last_non_space(&before[..at])?;
    }
    (before[at] == b'<').then_some(at)
}

#[derive(Clone, Copy, Debug)]
pub(super) enum TagProgress {
    /// After `<` and any whitespace.
    Open,
    /// After `</` and any whitespace.
    Slash,
    /// Inside a tag name: `len` bytes read, `kinds` the names they still match.
    Name { len: usize, kinds: u8 },
    /// A whole tag name has been read; only `>` can follow in an exact tag.
    AfterName(ResultKind),
}

pub(super) enum TagStep {
    Pending,
    Exact(ResultKind),
    Malformed,
    NotATag,
}

/// A possible tag being read, possibly across chunks.
#[derive(Clone, Copy, Debug)]
pub(super) struct TagCandidate {
    pub(super) progress: TagProgress,
    pub(super) closing: bool,
    /// False once whitespace appeared inside the tag.
    pub(super) exact: bool,
    /// The `<` began its line (nothing before it) outside any code fence.
    pub(super) framed: bool,
    /// Stream offset of the `<`.
    pub(super) start: u64,
}

impl TagCandidate {
    pub(super) fn step(&mut self, byte: u8) -> TagStep {
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

    pub(super) fn step_name(&mut self, len: usize, kinds: u8, byte: u8) -> TagStep {
        let still_matching = ResultKind::iter()
            .filter(|kind| kinds & kind.bit() != 0 && kind.tag().as_bytes().get(len) == Some(&byte))
            .fold(0, |set, kind| set | kind.bit());
        if still_matching == 0 {
            return TagStep::NotATag;
        }
        let len = len + 1;
        // No tag name is a prefix of another, so a completed name is unambiguous.
        self.progress = match ResultKind::iter()
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

/// How bytes compare with an exact tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TagMatch {
    /// The tag is complete after this many bytes of `rest`.
    Complete(usize),
    /// `rest` ran out while still matching.
    Partial,
    Mismatch,
}

/// Compares `held ++ rest` with the start of `tag` without joining them.
pub(super) fn match_tag(held: &[u8], rest: &[u8], tag: &str) -> TagMatch {
    let Some(tail) = tag.as_bytes().strip_prefix(held) else {
        return TagMatch::Mismatch;
    };
    if rest.starts_with(tail) {
        TagMatch::Complete(tail.len())
    } else if tail.starts_with(rest) {
        TagMatch::Partial
    } else {
        TagMatch::Mismatch
    }
}

/// Like [`match_tag`] against all three opening tags.
pub(super) fn match_opening_tag(held: &[u8], rest: &[u8]) -> (TagMatch, ResultKind) {
    let mut best = (TagMatch::Mismatch, ResultKind::Complete);
    for kind in ResultKind::iter() {
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
pub(super) fn find_opening_tag(chunk: &[u8]) -> Option<(usize, TagMatch, ResultKind)> {
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

/// Like [`find_opening_tag`] for one given (closing) tag.
pub(super) fn find_tag(chunk: &[u8], tag: &str) -> Option<(usize, TagMatch)> {
    if let Some(at) = memmem::find(chunk, tag.as_bytes()) {
        return Some((at, TagMatch::Complete(tag.len())));
    }
    let tail_from = chunk.len().saturating_sub(tag.len() - 1);
    let at = tail_from + memrchr(b'<', &chunk[tail_from..])?;
    (match_tag(&[], &chunk[at..], tag) == TagMatch::Partial).then_some((at, TagMatch::Partial))
}

/// `text` with an invisible WORD JOINER (U+2060) after every `<` that could begin a result tag,
/// exact or malformed: a terminal shows the tag as the agent printed it (`<phase-complete>`),
/// while a nested outer handler reading it sees `<` followed by a character that is neither
/// whitespace, `/` nor a tag name, so no tag at all (docs/worker-protocol.md).
pub fn inert_tags(text: &str) -> Cow<'_, str> {
    replace_tag_starts(text, "<\u{2060}")
}

/// `text` with every `<` that could begin a result tag, exact or malformed, written as `&lt;`
/// (how the wrappers render diagnostics), so that a nested outer handler sees no tag at all.
pub fn defuse_tags(text: &str) -> Cow<'_, str> {
    replace_tag_starts(text, "&lt;")
}

/// `text` with every `<` that could begin a result tag replaced by `replacement`.
fn replace_tag_starts<'a>(text: &'a str, replacement: &str) -> Cow<'a, str> {
    let bytes = text.as_bytes();
    let tag_starts: Vec<usize> = memchr::memchr_iter(b'<', bytes)
        .filter(|&at| could_begin_tag(&bytes[at + 1..]))
        .collect();
    if tag_starts.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + replacement.len() * tag_starts.len());
    let mut from = 0;
    for at in tag_starts {
        out.push_str(&text[from..at]);
        out.push_str(replacement);
        from = at + 1;
    }
    out.push_str(&text[from..]);
    Cow::Owned(out)
}

/// Whether `bytes` hold anything that reads as the start of a result tag, exact or malformed.
pub fn mentions_result_tag(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'<', bytes).any(|at| could_begin_tag(&bytes[at + 1..]))
}

fn could_begin_tag(after: &[u8]) -> bool {
    let skip_spaces =
        |bytes: &[u8]| -> usize { bytes.iter().take_while(|&&b| is_space(b)).count() };
    let mut at = skip_spaces(after);
    if after.get(at) == Some(&b'/') {
        at += 1;
        at += skip_spaces(&after[at..]);
    }
    after[at..].starts_with(NAME_PREFIX)
}

/// Zero-width, no line break opportunity: invisible in a terminal ([`inert_tags`] writes it).
#[cfg(test)]
pub const WORD_JOINER: char = '\u{2060}';
