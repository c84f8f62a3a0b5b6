//! `ai-session-handler-claude-high` and `-claude-medium`: `claude-lean -p` with stream-json
//! output.
//!
//! Claude's stdout is one JSON event per line (`--output-format stream-json --verbose`), read
//! incrementally: lines may arrive split at any byte. Each complete line is
//!
//! - an `assistant` event: its text blocks are shown as diagnostics and each tool use as one
//!   summary line (`tool: Bash ls -la`); other content (thinking) is not shown;
//! - a `result` event: remembered, not shown. The `result` text of the **last** one is the
//!   authoritative response, provided it reports success (`subtype` `success`, no `is_error`);
//! - any other JSON object (system, user/tool-result events): not shown;
//! - anything that is not a JSON object: shown as a diagnostic line, as is.
//!
//! Everything shown passes through one [`DiagnosticStream`], so result blocks in the assistant's
//! live text are hidden, and stderr is rendered like Codex's. A line longer than
//! [`MAX_LINE_BYTES`] is skipped (with a diagnostic) to keep memory bounded.

use std::ffi::OsString;

use memchr::memchr;
use serde_json::{Map, Value};

use super::child::Launcher;
use super::diagnostics::{DiagnosticStream, StreamTranslator};
use super::final_result::FinalResponse;
use super::session::{self, Provider};

pub const LAUNCHER: &str = "claude-lean";

const PREFIX: &str = "[claude] ";

/// Longest stdout line kept for parsing; a result may be 16 MiB before JSON escaping.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Longest tool-use summary shown, in characters.
const MAX_SUMMARY_CHARS: usize = 120;

/// Claude's `--effort` level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    High,
    Medium,
}

impl Effort {
    fn as_str(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Medium => "medium",
        }
    }
}

/// Runs one Claude session; `model` is passed as `--model`. Returns the exit code.
pub fn run(effort: Effort, model: Option<String>) -> i32 {
    session::run(Claude { effort, model })
}

struct Claude {
    effort: Effort,
    model: Option<String>,
}

impl Provider for Claude {
    const PREFIX: &'static str = PREFIX;
    type Stdout = StreamJson;

    fn launcher(&mut self) -> Result<Launcher, String> {
        Ok(claude_launcher(self.effort, self.model.as_deref()))
    }

    fn stdout_translator(&self) -> StreamJson {
        StreamJson::new()
    }

    fn final_response(&self, stdout: StreamJson) -> FinalResponse {
        stdout.final_response()
    }
}

/// `claude-lean --effort E -p --output-format stream-json --verbose [--model M]`.
///
/// Without `--model`, `ANTHROPIC_MODEL` (inherited untouched) and then Claude's settings and
/// the launcher's defaults decide.
fn claude_launcher(effort: Effort, model: Option<&str>) -> Launcher {
    let mut args: Vec<OsString> = [
        "--effort",
        effort.as_str(),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(OsString::from)
    .to_vec();
    if let Some(model) = model {
        args.extend(["--model".into(), model.into()]);
    }
    Launcher {
        program: LAUNCHER,
        args,
        env: Vec::new(),
    }
}

/// Incremental reader of claude-lean's stream-json stdout.
#[derive(Debug)]
pub struct StreamJson {
    /// The current line so far, up to [`MAX_LINE_BYTES`].
    line: Vec<u8>,
    /// The current line outgrew the limit; its remaining bytes are dropped.
    line_too_long: bool,
    diagnostics: DiagnosticStream,
    /// From the last `result` event: its text, or why it does not count.
    last_result: Option<Result<String, String>>,
}

impl Default for StreamJson {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamJson {
    pub fn new() -> Self {
        Self {
            line: Vec::new(),
            line_too_long: false,
            diagnostics: DiagnosticStream::new(PREFIX),
            last_result: None,
        }
    }

    /// The authoritative response: the last `result` event, if it reports success.
    pub fn final_response(self) -> FinalResponse {
        match self.last_result {
            Some(Ok(text)) => FinalResponse::Text(text.into_bytes()),
            Some(Err(reason)) => FinalResponse::Unavailable(reason),
            None => FinalResponse::Unavailable(format!("{LAUNCHER} produced no result event")),
        }
    }

    /// Adds `bytes` (no line end inside) to the current line.
    fn extend_line(&mut self, bytes: &[u8]) {
        if self.line_too_long {
            return;
        }
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            self.line_too_long = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// Handles the complete current line (`line_end` is its `\n`, if any).
    fn end_line(&mut self, line_end: &[u8], out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.line_too_long) {
            let notice = format!("skipped an output line longer than {MAX_LINE_BYTES} bytes\n");
            self.diagnostics.translate(notice.as_bytes(), out);
            return;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(event)) => self.event(&event, out),
            _ => {
                self.diagnostics.translate(&line, out);
                self.diagnostics.translate(line_end, out);
            }
        }
    }

    fn event(&mut self, event: &Map<String, Value>, out: &mut Vec<u8>) {
        match event.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let blocks = event
                    .get("message")
                    .and_then(|message| message.get("content"))
                    .and_then(Value::as_array);
                for block in blocks.into_iter().flatten() {
                    self.content_block(block, out);
                }
            }
            Some("result") => self.last_result = Some(result_text(event)),
            _ => {}
        }
    }

    fn content_block(&mut self, block: &Value, out: &mut Vec<u8>) {
        let shown = match block.get("type").and_then(Value::as_str) {
            Some("text") => block.get("text").and_then(Value::as_str).map(str::to_owned),
            Some("tool_use") => Some(tool_summary(block)),
            _ => None,
        };
        if let Some(mut shown) = shown {
            if !shown.ends_with('\n') {
                shown.push('\n');
            }
            self.diagnostics.translate(shown.as_bytes(), out);
        }
    }
}

impl StreamTranslator for StreamJson {
    fn translate(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) {
        while let Some(newline) = memchr(b'\n', chunk) {
            self.extend_line(&chunk[..newline]);
            self.end_line(b"\n", out);
            chunk = &chunk[newline + 1..];
        }
        self.extend_line(chunk);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.line.is_empty() || self.line_too_long {
            self.end_line(b"", out);
        }
        self.diagnostics.finish(out);
    }
}

/// The text of a `result` event, or why it is not a usable response.
fn result_text(event: &Map<String, Value>) -> Result<String, String> {
    let subtype = event.get("subtype").and_then(Value::as_str);
    let is_error = event.get("is_error").and_then(Value::as_bool) == Some(true);
    let text = event.get("result").and_then(Value::as_str);
    if is_error || subtype != Some("success") {
        let subtype = subtype.unwrap_or("none");
        let detail = text.map(|text| format!(": {text}")).unwrap_or_default();
        return Err(format!(
            "{LAUNCHER} reported an error result (subtype {subtype}){detail}"
        ));
    }
    text.map(str::to_owned)
        .ok_or_else(|| format!("{LAUNCHER}'s result event has no result text"))
}

/// One line for a `tool_use` block: `tool: <name> <main input>`, shortened.
fn tool_summary(block: &Value) -> String {
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let input = block.get("input").map(input_summary).unwrap_or_default();
    let summary = format!("tool: {name} {input}");
    let mut words = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = words.char_indices().nth(MAX_SUMMARY_CHARS) {
        words.truncate(cut);
        words.push('…');
    }
    words
}

/// The input field that says most about a tool call, else the whole input as JSON.
fn input_summary(input: &Value) -> String {
    const TELLING_FIELDS: [&str; 8] = [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
        "prompt",
    ];
    if let Some(text) = TELLING_FIELDS
        .iter()
        .find_map(|field| input.get(field).and_then(Value::as_str))
    {
        return text.to_owned();
    }
    match input {
        Value::Null => String::new(),
        Value::Object(fields) if fields.is_empty() => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn translate_chunks(chunks: &[&[u8]]) -> (String, FinalResponse) {
        let mut reader = StreamJson::new();
        let mut out = Vec::new();
        for chunk in chunks {
            reader.translate(chunk, &mut out);
        }
        reader.finish(&mut out);
        (
            String::from_utf8(out).expect("utf-8"),
            reader.final_response(),
        )
    }

    fn translate(text: &str) -> (String, FinalResponse) {
        translate_chunks(&[text.as_bytes()])
    }

    fn lines(events: &[Value]) -> String {
        events.iter().map(|event| format!("{event}\n")).collect()
    }

    fn assistant(content: Value) -> Value {
        json!({"type": "assistant", "message": {"role": "assistant", "content": content}})
    }

    fn success(text: &str) -> Value {
        json!({"type": "result", "subtype": "success", "is_error": false, "result": text})
    }

    fn session() -> String {
        lines(&[
            json!({"type": "system", "subtype": "init", "model": "claude"}),
            assistant(json!([{"type": "text", "text": "Looking at <phase-blocked > now."}])),
            assistant(json!([{"type": "tool_use", "id": "t1", "name": "Bash",
                "input": {"command": "ls -la", "description": "List files"}}])),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "content": "secret listing"}]}}),
            assistant(json!([{"type": "text",
                "text": "Done.\n<phase-complete>Built it.</phase-complete>"}])),
            success("Done.\n<phase-complete>Built it.</phase-complete>"),
        ])
    }

    #[test]
    fn launches_claude_lean_with_effort_and_stream_json() {
        assert_eq!(
            claude_launcher(Effort::Medium, None),
            Launcher {
                program: "claude-lean",
                args: [
                    "--effort",
                    "medium",
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose"
                ]
                .map(OsString::from)
                .to_vec(),
                env: Vec::new(),
            }
        );
        let with_model = claude_launcher(Effort::High, Some("opus"));
        assert_eq!(with_model.args[1], "high");
        assert_eq!(
            with_model.args[6..],
            [OsString::from("--model"), "opus".into()]
        );
    }

    #[test]
    fn renders_text_and_tool_summaries_and_hides_the_live_result() {
        let (out, response) = translate(&session());
        assert_eq!(
            out,
            "[claude] Looking at &lt;phase-blocked > now.\n\
             [claude] tool: Bash ls -la\n\
             [claude] Done.\n\
             [claude] \n"
        );
        assert_eq!(
            response,
            FinalResponse::Text(b"Done.\n<phase-complete>Built it.</phase-complete>".to_vec())
        );
    }

    #[test]
    fn output_does_not_depend_on_where_lines_are_split() {
        let whole = session();
        let expected = translate(&whole);
        let bytes = whole.as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(
                translate_chunks(&[&bytes[..cut], &bytes[cut..]]),
                expected,
                "cut {cut}"
            );
        }
        let single_bytes: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(translate_chunks(&single_bytes), expected);
    }

    #[test]
    fn non_json_lines_are_diagnostics_verbatim() {
        let (out, response) = translate("Warning: <deprecated>\r\n[1, 2]\n\"text\"\nno newline");
        assert_eq!(
            out,
            "[claude] Warning: &lt;deprecated>\r\n[claude] [1, 2]\n[claude] \"text\"\n[claude] no newline\n"
        );
        assert_eq!(
            response,
            FinalResponse::Unavailable("claude-lean produced no result event".to_owned())
        );
    }

    #[test]
    fn the_last_result_event_wins() {
        let text = lines(&[
            success("<phase-blocked>first</phase-blocked>"),
            success("<phase-complete>second</phase-complete>"),
        ]);
        assert_eq!(
            translate(&text).1,
            FinalResponse::Text(b"<phase-complete>second</phase-complete>".to_vec())
        );
        let text = lines(&[
            success("<phase-complete>first</phase-complete>"),
            json!({"type": "result", "subtype": "error_max_turns", "is_error": true}),
        ]);
        assert_eq!(
            translate(&text).1,
            FinalResponse::Unavailable(
                "claude-lean reported an error result (subtype error_max_turns)".to_owned()
            )
        );
    }

    #[test]
    fn error_results_do_not_count() {
        let cases = [
            (
                json!({"type": "result", "subtype": "success", "is_error": true,
                    "result": "API Error: 529 overloaded"}),
                "claude-lean reported an error result (subtype success): API Error: 529 overloaded",
            ),
            (
                json!({"type": "result", "subtype": "error_during_execution", "is_error": false,
                    "result": "<phase-complete>x</phase-complete>"}),
                "claude-lean reported an error result (subtype error_during_execution): \
                 <phase-complete>x</phase-complete>",
            ),
            (
                json!({"type": "result", "result": "<phase-complete>x</phase-complete>"}),
                "claude-lean reported an error result (subtype none): \
                 <phase-complete>x</phase-complete>",
            ),
            (
                json!({"type": "result", "subtype": "success", "is_error": false}),
                "claude-lean's result event has no result text",
            ),
        ];
        for (event, reason) in cases {
            assert_eq!(
                translate(&lines(&[event])).1,
                FinalResponse::Unavailable(reason.to_owned())
            );
        }
    }

    #[test]
    fn tool_summaries_are_one_short_line() {
        let summary = |input: Value| tool_summary(&json!({"name": "Tool", "input": input}));
        assert_eq!(
            summary(json!({"file_path": "/src/main.rs"})),
            "tool: Tool /src/main.rs"
        );
        assert_eq!(
            summary(json!({"command": "echo a\n  echo b"})),
            "tool: Tool echo a echo b"
        );
        assert_eq!(summary(json!({})), "tool: Tool");
        assert_eq!(summary(json!({"todos": [1]})), "tool: Tool {\"todos\":[1]}");
        assert_eq!(tool_summary(&json!({})), "tool: unknown");
        let long = summary(json!({"command": "é".repeat(300)}));
        assert_eq!(long.chars().count(), MAX_SUMMARY_CHARS + 1);
        assert!(long.ends_with("é…"), "{long}");
    }

    #[test]
    fn thinking_and_malformed_events_are_not_shown() {
        let text = lines(&[
            assistant(json!([{"type": "thinking", "thinking": "hmm"}, {"type": "text"}])),
            json!({"type": "assistant"}),
            json!({"type": "assistant", "message": {"content": "not a list"}}),
        ]);
        assert_eq!(translate(&text).0, "");
    }

    #[test]
    fn an_overlong_line_is_skipped_with_a_notice() {
        let mut reader = StreamJson::new();
        let mut out = Vec::new();
        let piece = vec![b'x'; MAX_LINE_BYTES / 4 + 1];
        for _ in 0..4 {
            reader.translate(&piece, &mut out);
        }
        assert!(reader.line.is_empty(), "the long line is not retained");
        reader.translate(b"tail\nafter\n", &mut out);
        reader.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            format!(
                "[claude] skipped an output line longer than {MAX_LINE_BYTES} bytes\n[claude] after\n"
            )
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_inert(
            chunks in proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![
                        Just(b'{'), Just(b'}'), Just(b'"'), Just(b'\n'), Just(b'<'),
                        Just(b':'), any::<u8>(),
                    ],
                    0..40,
                ),
                0..8,
            ),
        ) {
            let mut reader = StreamJson::new();
            let mut out = Vec::new();
            for chunk in &chunks {
                reader.translate(chunk, &mut out);
            }
            reader.finish(&mut out);
            prop_assert!(!out.contains(&b'<'));
            let _ = reader.final_response();
        }
    }
}
