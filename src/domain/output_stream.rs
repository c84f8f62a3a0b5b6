//! Which of the child's two output streams bytes came from, and the last line they held.

use super::marker::mentions_result_tag;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    pub(crate) fn name(self) -> &'static str {
        self.into()
    }
}

/// The most recent complete line the agent printed on either stream, for a live status line:
/// kept per stream (the pipes interleave at any byte), cut to its last [`LastLine::MAX`]
/// bytes. A line that holds a result tag is never it (live output hides the result block).
#[derive(Clone, Debug, Default)]
pub struct LastLine {
    /// Bytes after the last line end, per stream (stdout, stderr).
    partial: [Vec<u8>; 2],
    line: Vec<u8>,
}

impl LastLine {
    /// The most bytes of a line kept.
    pub const MAX: usize = 240;

    pub fn feed(&mut self, stream: OutputStream, chunk: &[u8]) {
        let partial = &mut self.partial[stream as usize];
        let Some(last_end) = memchr::memrchr(b'\n', chunk) else {
            push_capped(partial, chunk);
            return;
        };
        // The chunk's complete lines, last first, until one holds no result tag.
        let mut end = last_end;
        loop {
            let start = memchr::memrchr(b'\n', &chunk[..end]).map_or(0, |at| at + 1);
            let mut line = Vec::new();
            if start == 0 {
                line.extend_from_slice(partial);
            }
            push_capped(&mut line, &chunk[start..end]);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !mentions_result_tag(&line) {
                self.line = line;
                break;
            }
            if start == 0 {
                break;
            }
            end = start - 1;
        }
        partial.clear();
        push_capped(partial, &chunk[last_end + 1..]);
    }

    /// The last complete line, lossily decoded, if there was one.
    pub fn line(&self) -> Option<String> {
        (!self.line.is_empty()).then(|| String::from_utf8_lossy(&self.line).into_owned())
    }
}

/// Appends `bytes`, keeping only the last [`LastLine::MAX`] bytes.
fn push_capped(kept: &mut Vec<u8>, bytes: &[u8]) {
    kept.extend_from_slice(&bytes[bytes.len().saturating_sub(LastLine::MAX)..]);
    if kept.len() > LastLine::MAX {
        kept.drain(..kept.len() - LastLine::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(chunks: &[(OutputStream, &str)]) -> Option<String> {
        let mut last = LastLine::default();
        for (stream, chunk) in chunks {
            last.feed(*stream, chunk.as_bytes());
        }
        last.line()
    }

    #[test]
    fn the_last_complete_line_wins_across_chunks_and_streams() {
        use OutputStream::{Stderr, Stdout};
        assert_eq!(fed(&[(Stdout, "partial")]), None);
        assert_eq!(
            fed(&[(Stdout, "one\ntw"), (Stdout, "o\nthr")]),
            Some("two".into())
        );
        assert_eq!(
            fed(&[
                (Stdout, "out li"),
                (Stderr, "err line\r\n"),
                (Stdout, "ne\n")
            ]),
            Some("out line".into())
        );
        assert_eq!(fed(&[(Stdout, "a\nb\nc\n")]), Some("c".into()));
    }

    #[test]
    fn a_result_block_is_never_the_last_line() {
        use OutputStream::Stdout;
        assert_eq!(
            fed(&[(Stdout, "working\n<phase-complete>ok</phase-complete>\n")]),
            Some("working".into())
        );
        assert_eq!(
            fed(&[
                (Stdout, "step 3\n"),
                (Stdout, "<phase-blocked>\nneed a key\n"),
                (Stdout, "</phase-blocked>\n")
            ]),
            Some("need a key".into())
        );
        assert_eq!(fed(&[(Stdout, "< /phase-complete >\n")]), None);
        assert_eq!(fed(&[(Stdout, "a < b\n")]), Some("a < b".into()));
    }

    #[test]
    fn a_long_line_is_cut_to_its_end() {
        let long = format!("{}\n", "x".repeat(1000) + "END");
        let line = fed(&[(OutputStream::Stdout, &long)]).unwrap();
        assert_eq!(line.len(), LastLine::MAX);
        assert!(line.ends_with("END"));
    }
}
