//! Splitting a launcher's stdout into lines, for the providers whose stdout is one JSON event
//! per line (Claude's stream-json, Codex's `exec --json`).
//!
//! Lines arrive split at any byte. A line is kept until its `\n` so it can be parsed whole,
//! but only up to [`MAX_LINE_BYTES`]: a longer one is skipped, so memory stays bounded
//! whatever the launcher prints.

use memchr::memchr;

/// Longest line kept for parsing; a result may be 16 MiB before JSON escaping.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// One line of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line without its line end; `ended` is false only for an unterminated last line.
    Text { text: &'a [u8], ended: bool },
    /// The line was longer than the limit and was dropped.
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
