//! Reading a launcher's stdout as one JSON event per line (Claude's stream-json, Codex's
//! `exec --json`): [`JsonEvents`] assembles lines across reads, parses each into the
//! provider's typed event and hands it to the provider's [`EventReader`]. What each provider
//! shows: docs/providers.md, "What a wrapper does".

use memchr::memchr;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::diagnostics::{DiagnosticStream, StreamTranslator};
use super::notifier::Notice;

/// Longest line kept for parsing; a result may be 16 MiB before JSON escaping.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// One line of the stream, without its line end (`ended` is false only for an unterminated
/// last line), or the news that one was longer than the limit and was dropped.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    Text { text: &'a [u8], ended: bool },
    TooLong,
}

/// Assembles lines across reads.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    line: Vec<u8>,
    too_long: bool,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::with_limit(MAX_LINE_BYTES)
    }
}

impl LineSplitter {
    pub fn with_limit(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            too_long: false,
        }
    }

    /// Calls `each` for every line `chunk` completes.
    pub fn push(&mut self, mut chunk: &[u8], mut each: impl FnMut(Line<'_>)) {
        while let Some(newline) = memchr(b'\n', chunk) {
            self.extend(&chunk[..newline]);
            self.end(true, &mut each);
            chunk = &chunk[newline + 1..];
        }
        self.extend(chunk);
    }

    /// The stream ended: calls `each` for an unterminated last line, if any.
    pub fn finish(&mut self, mut each: impl FnMut(Line<'_>)) {
        if !self.line.is_empty() || self.too_long {
            self.end(false, &mut each);
        }
    }

    fn extend(&mut self, bytes: &[u8]) {
        if self.too_long {
            return;
        }
        if self.line.len() + bytes.len() > self.max {
            self.too_long = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    fn end(&mut self, ended: bool, each: &mut impl FnMut(Line<'_>)) {
        if std::mem::take(&mut self.too_long) {
            each(Line::TooLong);
        } else {
            each(Line::Text {
                text: &self.line,
                ended,
            });
        }
        self.line.clear();
    }
}

/// What a provider makes of its events (`claude::stream_json`, `codex::events`).
pub trait EventReader {
    const PREFIX: &'static str;
    /// One line's event: a `#[serde(tag = "type")]` enum whose default variant stands for
    /// every event the reader ignores.
    type Event: DeserializeOwned + Default;

    fn event(&mut self, event: Self::Event, shown: &mut Shown, out: &mut Vec<u8>);

    /// The stream ended: shows what the reader still holds back.
    fn finish(&mut self, _shown: &mut Shown, _out: &mut Vec<u8>) {}
}

/// What a reader shows as diagnostics and tells the runner.
#[derive(Debug)]
pub struct Shown {
    text: DiagnosticStream,
    /// The text shown last did not end its line.
    open_line: bool,
    notices: Vec<Notice>,
}

impl Shown {
    pub fn note(&mut self, note: &str, out: &mut Vec<u8>) {
        self.text.note(note, out);
    }

    /// The provider's text, live result blocks hidden; its last line may stay open.
    pub fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        if text.is_empty() {
            return;
        }
        self.text.translate(text.as_bytes(), out);
        self.open_line = !text.ends_with('\n');
    }

    /// Ends the line the last text left open, so what follows starts a line.
    pub fn end_line(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.open_line) {
            self.text.translate(b"\n", out);
        }
    }

    pub fn status(&mut self, text: &str) {
        self.notices.push(Notice::status(text));
    }

    pub fn notify(&mut self, notice: Notice) {
        self.notices.push(notice);
    }
}

/// The stdout translator of a provider whose stdout is JSON events.
#[derive(Debug)]
pub struct JsonEvents<R> {
    lines: LineSplitter,
    shown: Shown,
    reader: R,
}

impl<R: EventReader + Default> Default for JsonEvents<R> {
    fn default() -> Self {
        Self {
            lines: LineSplitter::default(),
            shown: Shown {
                text: DiagnosticStream::new(R::PREFIX),
                open_line: false,
                notices: Vec::new(),
            },
            reader: R::default(),
        }
    }
}

impl<R: EventReader> JsonEvents<R> {
    pub fn reader(&self) -> &R {
        &self.reader
    }

    pub fn into_reader(self) -> R {
        self.reader
    }
}

/// Shows one line: an event goes to the reader, a line that is not a JSON object is shown as
/// it is.
fn read_line<R: EventReader>(reader: &mut R, shown: &mut Shown, line: Line<'_>, out: &mut Vec<u8>) {
    let (text, ended) = match line {
        Line::Text { text, ended } => (text, ended),
        Line::TooLong => {
            shown.end_line(out);
            let note = format!("skipped an output line longer than {MAX_LINE_BYTES} bytes");
            shown.note(&note, out);
            return;
        }
    };
    match serde_json::from_slice::<Value>(text) {
        Ok(object @ Value::Object(_)) => {
            // An object without a `type` the reader knows is an event it ignores.
            let event = R::Event::deserialize(object).unwrap_or_default();
            reader.event(event, shown, out);
        }
        _ => {
            shown.end_line(out);
            shown.text.translate(text, out);
            if ended {
                shown.text.translate(b"\n", out);
            }
        }
    }
}

impl<R: EventReader> StreamTranslator for JsonEvents<R> {
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.lines.push(chunk, |line| {
            read_line(&mut self.reader, &mut self.shown, line, out);
        });
    }

    fn holds_partial_line(&self) -> bool {
        self.shown.text.holds_partial_line()
    }

    fn flush_partial_line(&mut self, out: &mut Vec<u8>) {
        self.shown.text.flush_partial_line(out);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.lines
            .finish(|line| read_line(&mut self.reader, &mut self.shown, line, out));
        self.reader.finish(&mut self.shown, out);
        self.shown.end_line(out);
        self.shown.text.finish(out);
    }

    fn take_notices(&mut self, into: &mut Vec<Notice>) {
        into.append(&mut self.shown.notices);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(splitter: &mut LineSplitter, chunks: &[&[u8]]) -> Vec<String> {
        let mut seen = Vec::new();
        let mut record = |line: Line<'_>| {
            seen.push(match line {
                Line::Text { text, ended } => {
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(text),
                        if ended { "⏎" } else { "" }
                    )
                }
                Line::TooLong => "too long".to_owned(),
            });
        };
        for chunk in chunks {
            splitter.push(chunk, &mut record);
        }
        splitter.finish(&mut record);
        seen
    }

    #[test]
    fn lines_are_assembled_across_reads() {
        let mut splitter = LineSplitter::default();
        assert_eq!(
            lines(&mut splitter, &[b"{\"a\"", b":1}\n\n{\"b\":2}\nlast"]),
            ["{\"a\":1}⏎", "⏎", "{\"b\":2}⏎", "last"]
        );
    }

    #[test]
    fn an_overlong_line_is_reported_and_not_kept() {
        let mut splitter = LineSplitter::with_limit(4);
        let mut seen = Vec::new();
        splitter.push(b"abc", |line| seen.push(format!("{line:?}")));
        splitter.push(b"defgh", |line| seen.push(format!("{line:?}")));
        assert!(splitter.line.is_empty(), "the long line is not retained");
        splitter.push(b"ij\nok\n", |line| seen.push(format!("{line:?}")));
        assert_eq!(seen, ["TooLong", "Text { text: [111, 107], ended: true }"]);
    }
}
