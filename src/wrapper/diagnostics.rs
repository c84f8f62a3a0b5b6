//! Diagnostic rendering: how everything a launcher prints reaches the runner inertly.
//!
//! The runner reads a wrapper's output as a worker's output, so any tag text in a provider's
//! chatter could be taken for (or spoil) the result block. Every diagnostic line is therefore
//! prefixed (`[codex] `, `[claude] `) and every literal `<` becomes `&lt;`: no opening tag can
//! begin a line, no tag can be recognized anywhere, and no prefixed line can open a code fence.
//! Only the wrapper's own final block is printed raw.
//!
//! [`DiagnosticStream`] puts the domain's [`LiveFilter`] in front of the renderer, so complete
//! live result blocks are hidden (a live block is never the result), even when split across
//! reads. Rendering is incremental and byte-exact — carriage returns are kept — and produces
//! the same bytes however the input is chunked; nothing is held back waiting for a line end.

use memchr::memchr;

use crate::domain::marker::LiveFilter;

/// Turns the bytes a launcher writes on one stream into what the wrapper prints on it.
pub trait StreamTranslator {
    /// Appends the output for the next `chunk` to `out`.
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>);
    /// The stream ended: appends whatever is still owed (held bytes, a final line end).
    fn finish(&mut self, out: &mut Vec<u8>);
}

/// Prefixes lines and escapes `<`, across chunk boundaries.
#[derive(Debug)]
pub struct DiagnosticRenderer {
    prefix: &'static str,
    /// The next byte begins a line, so it needs the prefix first.
    at_line_start: bool,
}

impl DiagnosticRenderer {
    pub fn new(prefix: &'static str) -> Self {
        Self {
            prefix,
            at_line_start: true,
        }
    }

    /// Appends the rendering of `text` to `out`.
    pub fn render(&mut self, mut text: &[u8], out: &mut Vec<u8>) {
        while !text.is_empty() {
            if self.at_line_start {
                out.extend_from_slice(self.prefix.as_bytes());
            }
            let line_len = memchr(b'\n', text).map_or(text.len(), |newline| newline + 1);
            let (line, rest) = text.split_at(line_len);
            escape_into(line, out);
            self.at_line_start = line.ends_with(b"\n");
            text = rest;
        }
    }

    /// Ends an unterminated last line with `\n`, so whatever follows starts a line.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.at_line_start {
            out.push(b'\n');
            self.at_line_start = true;
        }
    }

    /// Renders a complete message of the wrapper's own (one or more lines).
    pub fn message(prefix: &'static str, message: &str) -> Vec<u8> {
        let mut renderer = Self::new(prefix);
        let mut out = Vec::with_capacity(prefix.len() + message.len() + 1);
        renderer.render(message.as_bytes(), &mut out);
        renderer.finish(&mut out);
        out
    }
}

/// Copies `bytes` to `out` with every `<` written as `&lt;`.
fn escape_into(mut bytes: &[u8], out: &mut Vec<u8>) {
    while let Some(found) = memchr(b'<', bytes) {
        out.extend_from_slice(&bytes[..found]);
        out.extend_from_slice(b"&lt;");
        bytes = &bytes[found + 1..];
    }
    out.extend_from_slice(bytes);
}

/// One launcher stream shown as diagnostics: live result blocks hidden, the rest rendered.
#[derive(Debug)]
pub struct DiagnosticStream {
    filter: LiveFilter,
    renderer: DiagnosticRenderer,
    /// What the filter let through, reused across chunks.
    visible: Vec<u8>,
}

impl DiagnosticStream {
    pub fn new(prefix: &'static str) -> Self {
        Self {
            filter: LiveFilter::new(),
            renderer: DiagnosticRenderer::new(prefix),
            visible: Vec::new(),
        }
    }
}

impl StreamTranslator for DiagnosticStream {
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.visible.clear();
        self.filter.filter(chunk, &mut self.visible);
        self.renderer.render(&self.visible, out);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.visible.clear();
        self.filter.finish(&mut self.visible);
        self.renderer.render(&self.visible, out);
        self.renderer.finish(out);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn render_chunks(chunks: &[&[u8]]) -> String {
        let mut stream = DiagnosticStream::new("[codex] ");
        let mut out = Vec::new();
        for chunk in chunks {
            stream.translate(chunk, &mut out);
        }
        stream.finish(&mut out);
        String::from_utf8(out).expect("utf-8 in, utf-8 out")
    }

    fn render_text(text: &str) -> String {
        let mut renderer = DiagnosticRenderer::new("[claude] ");
        let mut out = Vec::new();
        renderer.render(text.as_bytes(), &mut out);
        renderer.finish(&mut out);
        String::from_utf8(out).expect("utf-8 in, utf-8 out")
    }

    #[test]
    fn reference_example_renders_exactly() {
        for fence in ["```python", "~~~text"] {
            let third_chunk = format!("\n{fence}\r\n");
            let chunks: [&[u8]; 5] = [
                b"first <phase-blo",
                b"cked>secret\r\nsecond",
                b" line</phase-blocked> tail\r",
                third_chunk.as_bytes(),
                b"print('<phase-blocked >')",
            ];
            assert_eq!(
                render_chunks(&chunks),
                format!(
                    "[codex] first  tail\r\n[codex] {fence}\r\n[codex] print('&lt;phase-blocked >')\n"
                )
            );
        }
    }

    #[test]
    fn every_line_is_prefixed_including_empty_ones() {
        assert_eq!(
            render_text("a\n\nb\n"),
            "[claude] a\n[claude] \n[claude] b\n"
        );
    }

    #[test]
    fn every_angle_bracket_is_escaped() {
        assert_eq!(
            render_text("<<phase-complete>x</phase-complete> & <b>"),
            "[claude] &lt;&lt;phase-complete>x&lt;/phase-complete> & &lt;b>\n"
        );
    }

    #[test]
    fn carriage_returns_are_kept_and_do_not_end_lines() {
        assert_eq!(
            render_text("50%\r100%\r\ndone"),
            "[claude] 50%\r100%\r\n[claude] done\n"
        );
    }

    #[test]
    fn finish_adds_a_line_end_only_after_a_partial_line() {
        assert_eq!(render_text("done\n"), "[claude] done\n");
        assert_eq!(render_text("done"), "[claude] done\n");
        assert_eq!(render_text(""), "");
    }

    #[test]
    fn nothing_is_held_back_waiting_for_a_line_end() {
        let mut renderer = DiagnosticRenderer::new("[codex] ");
        let mut out = Vec::new();
        renderer.render(b"working", &mut out);
        assert_eq!(out, b"[codex] working");
        renderer.render(b"...\nnext", &mut out);
        assert_eq!(out, b"[codex] working...\n[codex] next");
    }

    #[test]
    fn complete_live_blocks_are_hidden_and_unclosed_ones_shown() {
        assert_eq!(
            render_chunks(&[b"live\n<phase-complete>claim</phase-complete>\n"]),
            "[codex] live\n[codex] \n"
        );
        assert_eq!(
            render_chunks(&[b"diagnostic quoted <phase-blocked> without a close\n"]),
            "[codex] diagnostic quoted &lt;phase-blocked> without a close\n"
        );
    }

    #[test]
    fn a_wrapper_message_is_one_rendered_line() {
        assert_eq!(
            DiagnosticRenderer::message("[codex] ", "error: <x> failed"),
            b"[codex] error: &lt;x> failed\n"
        );
    }

    proptest! {
        #[test]
        fn rendering_does_not_depend_on_chunking(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(b'<'), Just(b'>'), Just(b'/'), Just(b'\n'), Just(b'\r'), Just(b' '),
                    Just(b'p'), any::<u8>(),
                ],
                0..200,
            ),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(text.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for point in points {
                chunks.push(&text[start..point]);
                start = point;
            }
            chunks.push(&text[start..]);
            let mut whole = DiagnosticStream::new("[codex] ");
            let mut expected = Vec::new();
            whole.translate(&text, &mut expected);
            whole.finish(&mut expected);
            let mut split = DiagnosticStream::new("[codex] ");
            let mut actual = Vec::new();
            for chunk in chunks {
                split.translate(chunk, &mut actual);
            }
            split.finish(&mut actual);
            prop_assert_eq!(actual, expected);
        }

        #[test]
        fn output_is_inert_and_line_structured(text in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut stream = DiagnosticStream::new("[codex] ");
            let mut out = Vec::new();
            stream.translate(&text, &mut out);
            stream.finish(&mut out);
            prop_assert!(!out.contains(&b'<'));
            if !out.is_empty() {
                prop_assert!(out.ends_with(b"\n"));
                for line in out[..out.len() - 1].split(|&byte| byte == b'\n') {
                    prop_assert!(line.starts_with(b"[codex] "));
                }
            }
        }
    }
}
