//! Rendering a launcher's output as inert diagnostics, whole lines at a time: prefixed, every
//! `<` escaped, complete live result blocks hidden (docs/providers.md, "What a wrapper does",
//! step 2).

use memchr::memchr;

use super::notifier::Notice;
use crate::domain::marker::LiveFilter;

/// Turns the bytes a launcher writes on one stream into what the wrapper prints on it, whole
/// lines at a time: `translate` may hold a partial line back.
pub trait StreamTranslator {
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>);
    fn holds_partial_line(&self) -> bool;
    /// Appends the held partial line, ended with `\n`; its continuation starts a new line.
    fn flush_partial_line(&mut self, out: &mut Vec<u8>);
    /// The stream ended: appends whatever is still owed, ending the last line.
    fn finish(&mut self, out: &mut Vec<u8>);
    /// Moves what the runner should be told, learned since the last call, into `into`.
    fn take_notices(&mut self, _into: &mut Vec<Notice>) {}
}

/// A held partial line longer than this is written at once, so memory stays bounded however
/// long a line without a line end grows.
pub const MAX_PARTIAL_LINE: usize = 64 * 1024;

/// Appends `line` (without its `\n`) as one diagnostic line: prefixed, `<` escaped.
pub fn render_line(prefix: &str, line: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(prefix.as_bytes());
    escape_into(line, out);
    out.push(b'\n');
}

/// Renders a message of the wrapper's own (one or more lines).
pub fn render_message(prefix: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + message.len() + 1);
    render_lines(prefix, message.as_bytes(), &mut out);
    out
}

/// Appends every line of `text` as a diagnostic line; a last line without `\n` is ended.
pub fn render_lines(prefix: &str, text: &[u8], out: &mut Vec<u8>) {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    if text.is_empty() {
        return;
    }
    for line in text.split(|&byte| byte == b'\n') {
        render_line(prefix, line, out);
    }
}

fn escape_into(mut bytes: &[u8], out: &mut Vec<u8>) {
    while let Some(found) = memchr(b'<', bytes) {
        out.extend_from_slice(&bytes[..found]);
        out.extend_from_slice(b"&lt;");
        bytes = &bytes[found + 1..];
    }
    out.extend_from_slice(bytes);
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// One launcher stream shown as diagnostics: live result blocks hidden, whole lines rendered.
#[derive(Debug)]
pub struct DiagnosticStream {
    prefix: &'static str,
    filter: LiveFilter,
    /// What the filter let through, reused across calls.
    visible: Vec<u8>,
    /// Visible bytes of the current line not written yet.
    line: Vec<u8>,
    /// Part of the current line was written already (a flushed partial line).
    continued: bool,
    /// Non-blank input went into the current line; if it shows blank, a block was hidden.
    had_content: bool,
}

impl DiagnosticStream {
    pub fn new(prefix: &'static str) -> Self {
        Self {
            prefix,
            filter: LiveFilter::new(),
            visible: Vec::new(),
            line: Vec::new(),
            continued: false,
            had_content: false,
        }
    }

    /// Writes a line of the wrapper's own between the stream's lines, escaped but not
    /// filtered: a tool's command line is shown whole, tags and all. A held partial line is
    /// ended first.
    pub fn note(&mut self, note: &str, out: &mut Vec<u8>) {
        self.flush_partial_line(out);
        render_lines(self.prefix, note.as_bytes(), out);
    }

    /// Feeds one input line (ending at its `\n`, or at the end of the chunk) to the filter,
    /// so that the visible output of the call contains at most the line end of this input
    /// line, plus whatever a given-up hidden block releases.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if !is_blank(input) {
            self.had_content = true;
        }
        self.visible.clear();
        self.filter.filter(input, &mut self.visible);
        let visible = std::mem::take(&mut self.visible);
        let mut rest = visible.as_slice();
        // Only the first line end can close a line the input line fed: later ones come from
        // a block the filter gave up on and shows as it was.
        let mut first = true;
        while let Some(newline) = memchr(b'\n', rest) {
            self.line.extend_from_slice(&rest[..newline]);
            self.end_line(first, out);
            first = false;
            rest = &rest[newline + 1..];
        }
        self.line.extend_from_slice(rest);
        // A line that held only a result block vanished, line end and all: the next line
        // starts afresh, so a blank line the launcher printed after the block is shown.
        if visible.is_empty() && self.line.is_empty() && input.ends_with(b"\n") {
            self.had_content = false;
        }
        self.visible = visible;
        if self.line.len() > MAX_PARTIAL_LINE {
            self.flush_partial_line(out);
        }
    }

    /// The current line ended: writes it unless it is blank where something was hidden, or
    /// blank after its partial line was written.
    fn end_line(&mut self, hidden_possible: bool, out: &mut Vec<u8>) {
        let blank = is_blank(&self.line);
        let hid_something = hidden_possible && self.had_content;
        if !(blank && (self.continued || hid_something)) {
            render_line(self.prefix, &self.line, out);
        }
        self.line.clear();
        self.continued = false;
        self.had_content = false;
    }
}

impl StreamTranslator for DiagnosticStream {
    fn translate(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) {
        while !chunk.is_empty() {
            let len = memchr(b'\n', chunk).map_or(chunk.len(), |newline| newline + 1);
            let (input, rest) = chunk.split_at(len);
            self.feed(input, out);
            chunk = rest;
        }
    }

    fn holds_partial_line(&self) -> bool {
        !is_blank(&self.line)
    }

    fn flush_partial_line(&mut self, out: &mut Vec<u8>) {
        if self.holds_partial_line() {
            render_line(self.prefix, &self.line, out);
            self.line.clear();
            self.continued = true;
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.visible.clear();
        self.filter.finish(&mut self.visible);
        let released = std::mem::take(&mut self.visible);
        // What the filter still held was never hidden after all.
        for line in released.split_inclusive(|&byte| byte == b'\n') {
            self.line
                .extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
            if line.ends_with(b"\n") {
                self.end_line(false, out);
            }
        }
        if !self.line.is_empty() {
            self.end_line(false, out);
        }
    }
}

/// What every translator's property test feeds: JSON-ish chunks, tag openers included.
#[cfg(test)]
pub(crate) mod test_support {
    use proptest::prelude::*;

    use super::StreamTranslator;

    /// Up to eight chunks of up to 40 bytes, dense in the bytes JSON and tags are made of.
    pub(crate) fn json_like_chunks() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![
                    Just(b'{'),
                    Just(b'}'),
                    Just(b'"'),
                    Just(b'\n'),
                    Just(b'<'),
                    Just(b':'),
                    any::<u8>(),
                ],
                0..40,
            ),
            0..8,
        )
    }

    /// Feeds every chunk, then finishes the stream; returns everything written.
    pub(crate) fn translate_all(
        translator: &mut impl StreamTranslator,
        chunks: &[Vec<u8>],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks {
            translator.translate(chunk, &mut out);
        }
        translator.finish(&mut out);
        out
    }
}

#[cfg(test)]
mod tests;
