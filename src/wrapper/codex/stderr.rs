//! Reading `codex-lean`'s stderr: plain diagnostics, except that the echo of the prompt
//! becomes one note ([`PromptEcho`]) and the last `ERROR: ` line is kept as the reason a turn
//! failed (both only matter for a launcher that drops `--json`).

use super::PREFIX;
use crate::wrapper::diagnostics::{DiagnosticStream, StreamTranslator};
use crate::wrapper::json_lines::{Line, LineSplitter};
use crate::wrapper::prompt_echo::PromptEcho;

/// Longest stderr line kept to be looked at for `ERROR: `; longer ones are only shown.
const MAX_ERROR_LINE: usize = 64 * 1024;

#[derive(Debug)]
pub struct CodexStderr {
    echo: PromptEcho,
    text: DiagnosticStream,
    lines: LineSplitter,
    last_error: Option<String>,
    /// Bytes passed by the echo filter, reused across calls.
    shown: Vec<u8>,
}

impl CodexStderr {
    pub fn new(prompt: &[u8]) -> Self {
        let note = format!(
            "(the prompt, {} bytes, echoed by {}; not shown)",
            prompt.len(),
            super::LAUNCHER
        );
        Self {
            echo: PromptEcho::new(prompt.to_vec(), &note),
            text: DiagnosticStream::new(PREFIX),
            lines: LineSplitter::with_limit(MAX_ERROR_LINE),
            last_error: None,
            shown: Vec::new(),
        }
    }

    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Renders what the echo filter let through, and looks at its complete lines.
    fn pass(&mut self, out: &mut Vec<u8>) {
        let shown = std::mem::take(&mut self.shown);
        self.text.translate(&shown, out);
        let last_error = &mut self.last_error;
        self.lines.push(&shown, |line| note_error(line, last_error));
        self.shown = shown;
        self.shown.clear();
    }
}

fn note_error(line: Line<'_>, last_error: &mut Option<String>) {
    if let Line::Text { text, .. } = line {
        let text = String::from_utf8_lossy(text);
        if let Some(error) = text.trim_end().strip_prefix("ERROR: ") {
            *last_error = Some(error.to_owned());
        }
    }
}

impl StreamTranslator for CodexStderr {
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.echo.filter(chunk, &mut self.shown);
        self.pass(out);
    }

    fn holds_partial_line(&self) -> bool {
        self.echo.holds() || self.text.holds_partial_line()
    }

    fn flush_partial_line(&mut self, out: &mut Vec<u8>) {
        // A possible echo that stalled is not one: it is shown after all.
        self.echo.release(&mut self.shown);
        self.pass(out);
        self.text.flush_partial_line(out);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.echo.release(&mut self.shown);
        self.pass(out);
        let last_error = &mut self.last_error;
        self.lines.finish(|line| note_error(line, last_error));
        self.text.finish(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translate(prompt: &str, chunks: &[&[u8]]) -> (String, CodexStderr) {
        let mut stderr = CodexStderr::new(prompt.as_bytes());
        let mut out = Vec::new();
        for chunk in chunks {
            stderr.translate(chunk, &mut out);
        }
        stderr.finish(&mut out);
        (String::from_utf8(out).expect("utf-8"), stderr)
    }

    #[test]
    fn the_echoed_prompt_is_one_note() {
        let prompt = "PROTOCOL\n- Do not run git commit.\n";
        let echo = format!("--------\nuser\n{prompt}\nwarning: <x>\n");
        let (out, _) = translate(
            prompt,
            &[b"Reading prompt from stdin...\n", echo.as_bytes()],
        );
        assert_eq!(
            out,
            "[codex] Reading prompt from stdin...\n\
             [codex] --------\n\
             [codex] user\n\
             [codex] (the prompt, 34 bytes, echoed by codex-lean; not shown)\n\
             [codex] warning: &lt;x>\n"
        );
    }

    #[test]
    fn the_last_error_line_is_remembered() {
        let (_, stderr) = translate(
            "p",
            &[
                b"ERROR: Reconnecting... 1/2\nERROR: exceeded retry",
                b" limit, last status: 429\n",
            ],
        );
        assert_eq!(
            stderr.last_error(),
            Some("exceeded retry limit, last status: 429")
        );
        let (_, stderr) = translate("p", &[b"warning: x\n"]);
        assert_eq!(stderr.last_error(), None);
    }

    #[test]
    fn a_stalled_echo_is_flushed_as_text() {
        let mut stderr = CodexStderr::new(b"long prompt\n");
        let mut out = Vec::new();
        stderr.translate(b"long", &mut out);
        assert!(stderr.holds_partial_line());
        stderr.flush_partial_line(&mut out);
        assert_eq!(out, b"[codex] long\n");
        assert!(!stderr.holds_partial_line());
    }
}
