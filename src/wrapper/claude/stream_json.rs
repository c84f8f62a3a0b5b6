//! Reading `claude-lean`'s stdout: one JSON event per line (`--output-format stream-json
//! --verbose --include-partial-messages`), lines split at any byte ([`LineSplitter`]).
//!
//! What is shown, as `[claude] ` diagnostics:
//!
//! - assistant text as the model writes it: `stream_event` text deltas. The whole message
//!   that follows as an `assistant` event is then not shown again; an `assistant` text whose
//!   message was not streamed (the CLI run without partial messages) is shown whole;
//! - each tool call as one line, `tool: Bash ls -la`, and each tool result as one line,
//!   `tool result (error, 3 lines): …`: notes, so tag text in them is escaped, not hidden;
//! - each API retry as one line, `API error 529 (overloaded); retry 2 of 10 in 1.2 s` — the
//!   CLI retries for minutes in silence otherwise;
//! - a line that is not a JSON object, as is.
//!
//! Not shown: thinking, system and status events, and the text of a message the CLI made up
//! itself (model `<synthetic>`) when the result repeats it as its error: the error is then
//! said once, by the result, with its API status.
//!
//! The `result` text of the **last** `result` event is the authoritative response, provided
//! it reports success. A failed result with API status 429 or 529, or usage-limit wording,
//! is a rate limit ([`rate_limit`]). Its usage is shown as one line, `usage: 20 in (0 cached),
//! 40 out tokens, $0.0011 (Claude Code's estimate, not a bill)`.
//!
//! For the runner's notification socket ([`crate::wrapper::notifier`]) it also learns:
//!
//! - statuses: `generating` (a message or text block starts, a tool result came back),
//!   `thinking` (a thinking block starts), the tool line for each tool use, the retry line for
//!   each API retry;
//! - for an announced retry delay, an extension of the idle deadline by the delay plus
//!   [`RETRY_MARGIN`];
//! - the usage so far and at the end ([`super::tokens`]).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value};

use super::LAUNCHER;
use super::PREFIX;
use super::tokens::{ClaudeUsage, final_report};
use crate::wrapper::diagnostics::{DiagnosticStream, StreamTranslator};
use crate::wrapper::final_result::FinalResponse;
use crate::wrapper::json_lines::{Line, LineSplitter, MAX_LINE_BYTES};
use crate::wrapper::notifier::Notice;
use crate::wrapper::rate_limit;
use crate::wrapper::summary;

/// Beyond an announced retry delay, how much longer the idle deadline is extended: time for
/// the retried request to get its first answer.
pub const RETRY_MARGIN: Duration = Duration::from_secs(5);

/// The model name Claude gives messages it made up itself (errors, interruptions).
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// What a `result` event said.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ResultEvent {
    subtype: Option<String>,
    is_error: bool,
    /// `api_error_status`, when the CLI gave one.
    status: Option<u16>,
    text: Option<String>,
}

/// Incremental reader of claude-lean's stream-json stdout.
#[derive(Debug)]
pub struct StreamJson {
    lines: LineSplitter,
    text: DiagnosticStream,
    /// The message whose stream events are arriving.
    streaming_message: Option<String>,
    /// Messages whose text arrived as deltas, so their whole text is not shown again.
    streamed_text: HashSet<String>,
    /// The text shown last did not end its line.
    open_text_line: bool,
    /// Text of a message the CLI made up, held until the result says whether it is the
    /// result's own error.
    synthetic: Option<String>,
    result: Option<ResultEvent>,
    usage: ClaudeUsage,
    notices: Vec<Notice>,
}

impl Default for StreamJson {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamJson {
    pub fn new() -> Self {
        Self {
            lines: LineSplitter::default(),
            text: DiagnosticStream::new(PREFIX),
            streaming_message: None,
            streamed_text: HashSet::new(),
            open_text_line: false,
            synthetic: None,
            result: None,
            usage: ClaudeUsage::default(),
            notices: Vec::new(),
        }
    }

    fn status(&mut self, text: &str) {
        self.notices.push(Notice::status(text));
    }

    fn report_running_usage(&mut self) {
        if let Some(report) = self.usage.running_report() {
            self.notices.push(Notice::Usage(report));
        }
    }

    /// The authoritative response: the last `result` event, if it reports success.
    pub fn final_response(self) -> FinalResponse {
        match self.result {
            Some(result) => response(&result),
            None => FinalResponse::Unavailable(format!("{LAUNCHER} produced no result event")),
        }
    }

    fn line(&mut self, line: Line<'_>, out: &mut Vec<u8>) {
        let (text, ended) = match line {
            Line::Text { text, ended } => (text, ended),
            Line::TooLong => {
                self.end_text_line(out);
                let note = format!("skipped an output line longer than {MAX_LINE_BYTES} bytes");
                self.text.note(&note, out);
                return;
            }
        };
        match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(event)) => self.event(&event, out),
            _ => {
                self.end_text_line(out);
                self.text.translate(text, out);
                if ended {
                    self.text.translate(b"\n", out);
                }
            }
        }
    }

    fn event(&mut self, event: &Map<String, Value>, out: &mut Vec<u8>) {
        match event.get("type").and_then(Value::as_str) {
            Some("stream_event") => {
                if let Some(Value::Object(inner)) = event.get("event") {
                    self.stream_event(inner, out);
                }
            }
            Some("assistant") => self.assistant(event, out),
            Some("user") => {
                let mut results = false;
                for block in content(event) {
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        self.text.note(&tool_result_summary(block), out);
                        results = true;
                    }
                }
                if results {
                    self.status("generating");
                }
            }
            Some("system") if event.get("subtype").and_then(Value::as_str) == Some("api_retry") => {
                self.end_text_line(out);
                let line = retry_line(event);
                self.text.note(&line, out);
                self.status(&line);
                if let Some(delay) = event
                    .get("retry_delay_ms")
                    .and_then(Value::as_f64)
                    .filter(|delay| delay.is_finite() && *delay >= 0.0)
                {
                    let delay =
                        Duration::try_from_secs_f64(delay / 1000.0).unwrap_or(Duration::MAX);
                    self.notices
                        .push(Notice::Extend(delay.saturating_add(RETRY_MARGIN)));
                }
            }
            Some("result") => {
                if let Some(report) = final_report(event) {
                    self.end_text_line(out);
                    let line = format!(
                        "usage: {}{}",
                        report.totals.describe(),
                        if report.totals.cost_usd.is_some() {
                            " (Claude Code's estimate, not a bill)"
                        } else {
                            ""
                        }
                    );
                    self.text.note(&line, out);
                    self.notices.push(Notice::Usage(report));
                }
                let result = result_event(event);
                let repeated = result.is_error
                    && self.synthetic.as_deref().map(str::trim)
                        == result.text.as_deref().map(str::trim);
                if repeated {
                    self.synthetic = None;
                }
                self.show_synthetic(out);
                self.result = Some(result);
            }
            _ => {}
        }
    }

    fn stream_event(&mut self, event: &Map<String, Value>, out: &mut Vec<u8>) {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let message = event.get("message").unwrap_or(&Value::Null);
                self.streaming_message =
                    message.get("id").and_then(Value::as_str).map(str::to_owned);
                self.status("generating");
                if self.usage.message(message) {
                    self.report_running_usage();
                }
            }
            Some("content_block_start") => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("thinking" | "redacted_thinking") => self.status("thinking"),
                    Some("text") => self.status("generating"),
                    Some("tool_use" | "server_tool_use") => {
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown");
                        self.status(&format!("tool: {name}"));
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                let changed = match (&self.streaming_message, event.get("usage")) {
                    (Some(id), Some(usage)) => {
                        let id = id.clone();
                        self.usage.delta(&id, usage)
                    }
                    _ => false,
                };
                if changed {
                    self.report_running_usage();
                }
            }
            Some("content_block_delta") => {
                let delta = event.get("delta");
                let is_text = delta
                    .and_then(|delta| delta.get("type"))
                    .and_then(Value::as_str)
                    == Some("text_delta");
                let text = delta
                    .and_then(|delta| delta.get("text"))
                    .and_then(Value::as_str);
                if let (true, Some(text)) = (is_text, text) {
                    if let Some(message) = &self.streaming_message {
                        self.streamed_text.insert(message.clone());
                    }
                    self.show_text(text, out);
                }
            }
            Some("content_block_stop" | "message_stop") => self.end_text_line(out),
            _ => {}
        }
    }

    fn assistant(&mut self, event: &Map<String, Value>, out: &mut Vec<u8>) {
        let message = event.get("message");
        let field = |name: &str| {
            message
                .and_then(|message| message.get(name))
                .and_then(Value::as_str)
        };
        let streamed = field("id").is_some_and(|id| self.streamed_text.contains(id));
        let synthetic = field("model") == Some(SYNTHETIC_MODEL);
        if !synthetic && message.is_some_and(|message| self.usage.message(message)) {
            self.report_running_usage();
        }
        for block in content(event) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") if !streamed => {
                    let Some(text) = block.get("text").and_then(Value::as_str) else {
                        continue;
                    };
                    if synthetic {
                        self.show_synthetic(out);
                        self.synthetic = Some(text.to_owned());
                    } else {
                        self.show_text(text, out);
                        self.end_text_line(out);
                    }
                }
                Some("tool_use") => {
                    self.end_text_line(out);
                    let line = tool_summary(block);
                    self.text.note(&line, out);
                    self.status(&line);
                }
                _ => {}
            }
        }
    }

    /// Shows assistant text (live blocks hidden).
    fn show_text(&mut self, text: &str, out: &mut Vec<u8>) {
        if text.is_empty() {
            return;
        }
        self.text.translate(text.as_bytes(), out);
        self.open_text_line = !text.ends_with('\n');
    }

    /// Ends the line the last text left open, so what follows starts a line.
    fn end_text_line(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.open_text_line) {
            self.text.translate(b"\n", out);
        }
    }

    fn show_synthetic(&mut self, out: &mut Vec<u8>) {
        if let Some(text) = self.synthetic.take() {
            self.end_text_line(out);
            self.show_text(&text, out);
            self.end_text_line(out);
        }
    }
}

impl StreamTranslator for StreamJson {
    fn translate(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.push(chunk, |line| self.line(line, out));
        self.lines = lines;
    }

    fn holds_partial_line(&self) -> bool {
        self.text.holds_partial_line()
    }

    fn flush_partial_line(&mut self, out: &mut Vec<u8>) {
        self.text.flush_partial_line(out);
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.finish(|line| self.line(line, out));
        self.show_synthetic(out);
        self.end_text_line(out);
        self.text.finish(out);
    }

    fn take_notices(&mut self, into: &mut Vec<Notice>) {
        into.append(&mut self.notices);
    }
}

/// The content blocks of an `assistant` or `user` event.
fn content(event: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    event
        .get("message")
        .and_then(|message| message.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn result_event(event: &Map<String, Value>) -> ResultEvent {
    ResultEvent {
        subtype: event
            .get("subtype")
            .and_then(Value::as_str)
            .map(str::to_owned),
        is_error: event.get("is_error").and_then(Value::as_bool) == Some(true),
        status: event
            .get("api_error_status")
            .and_then(Value::as_u64)
            .and_then(|status| u16::try_from(status).ok()),
        text: event
            .get("result")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// What a `result` event means for the session.
fn response(result: &ResultEvent) -> FinalResponse {
    let subtype = result.subtype.as_deref();
    if !result.is_error && subtype == Some("success") {
        return match &result.text {
            Some(text) => FinalResponse::Text(text.clone().into_bytes()),
            None => {
                FinalResponse::Unavailable(format!("{LAUNCHER}'s result event has no result text"))
            }
        };
    }
    let text = result.text.as_deref().unwrap_or_default();
    let status = result.status.or_else(|| rate_limit::quoted_status(text));
    if rate_limit::is_temporary(status, text) {
        let status = status
            .map(|status| format!(" (API status {status})"))
            .unwrap_or_default();
        return FinalResponse::RateLimited(format!("rate limited{status}: {text}"));
    }
    if let Some(status) = status {
        return FinalResponse::Unavailable(format!(
            "{LAUNCHER} reported API error {status}: {text}"
        ));
    }
    let detail = result
        .text
        .as_deref()
        .map(|text| format!(": {text}"))
        .unwrap_or_default();
    FinalResponse::Unavailable(format!(
        "{LAUNCHER} reported an error result (subtype {}){detail}",
        subtype.unwrap_or("none")
    ))
}

/// `API error 529 (overloaded); retry 2 of 10 in 1.2 s`.
fn retry_line(event: &Map<String, Value>) -> String {
    let number = |name: &str| event.get(name).and_then(Value::as_f64);
    let mut line = "API error".to_owned();
    if let Some(status) = event.get("error_status").and_then(Value::as_u64) {
        line.push_str(&format!(" {status}"));
    }
    if let Some(error) = event.get("error").and_then(Value::as_str) {
        line.push_str(&format!(" ({error})"));
    }
    line.push_str("; retry");
    if let Some(attempt) = number("attempt") {
        line.push_str(&format!(" {attempt}"));
        if let Some(max) = number("max_retries") {
            line.push_str(&format!(" of {max}"));
        }
    }
    if let Some(delay) = number("retry_delay_ms") {
        line.push_str(&format!(" in {:.1} s", delay / 1000.0));
    }
    line
}

/// One line for a `tool_use` block: `tool: <name> <main input>`.
fn tool_summary(block: &Value) -> String {
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let input = block.get("input").map(input_summary).unwrap_or_default();
    summary::one_line(&format!("tool: {name} {input}"))
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

/// One line for a `tool_result` block: `tool result (error, 3 lines): …`.
fn tool_result_summary(block: &Value) -> String {
    let text = match block.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
    summary::output(
        "tool result",
        if is_error { &["error"] } else { &[] },
        &text,
    )
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

    fn assistant(id: &str, content: Value) -> Value {
        json!({"type": "assistant", "message": {"id": id, "role": "assistant", "model": "claude",
            "content": content}})
    }

    fn delta(text: &str) -> Value {
        json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}})
    }

    fn stream(kind: &str) -> Value {
        json!({"type": "stream_event", "event": {"type": kind}})
    }

    fn message_start(id: &str) -> Value {
        json!({"type": "stream_event", "event": {"type": "message_start",
            "message": {"id": id}}})
    }

    fn success(text: &str) -> Value {
        json!({"type": "result", "subtype": "success", "is_error": false, "result": text})
    }

    /// A session as Claude 2.1 prints it with partial messages: deltas, then each block
    /// whole as its own `assistant` event, before the block's stop.
    fn session() -> String {
        lines(&[
            json!({"type": "system", "subtype": "init", "model": "claude"}),
            message_start("m1"),
            delta("Looking at <phase-"),
            delta("blocked > now."),
            assistant(
                "m1",
                json!([{"type": "text", "text": "Looking at <phase-blocked > now."}]),
            ),
            stream("content_block_stop"),
            assistant(
                "m1",
                json!([{"type": "tool_use", "id": "t1", "name": "Bash",
                "input": {"command": "ls <phase-complete>x</phase-complete>"}}]),
            ),
            stream("message_stop"),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "content": "secret\nlisting", "is_error": false}]}}),
            message_start("m2"),
            delta("Done.\n<phase-complete>Built"),
            delta(" it.</phase-complete>"),
            assistant(
                "m2",
                json!([{"type": "text",
                "text": "Done.\n<phase-complete>Built it.</phase-complete>"}]),
            ),
            stream("content_block_stop"),
            success("Done.\n<phase-complete>Built it.</phase-complete>"),
        ])
    }

    #[test]
    fn streamed_text_is_shown_once_tools_as_one_line_and_the_live_result_hidden() {
        let (out, response) = translate(&session());
        assert_eq!(
            out,
            "[claude] Looking at &lt;phase-blocked > now.\n\
             [claude] tool: Bash ls &lt;phase-complete>x&lt;/phase-complete>\n\
             [claude] tool result (2 lines): secret listing\n\
             [claude] Done.\n"
        );
        assert_eq!(
            response,
            FinalResponse::Text(b"Done.\n<phase-complete>Built it.</phase-complete>".to_vec())
        );
    }

    #[test]
    fn whole_messages_are_shown_when_not_streamed() {
        let text = lines(&[
            assistant("m1", json!([{"type": "text", "text": "first\nsecond"}])),
            assistant(
                "m2",
                json!([{"type": "thinking", "thinking": "hmm"}, {"type": "text"}]),
            ),
            assistant("m3", json!([{"type": "text", "text": "third\n"}])),
        ]);
        assert_eq!(
            translate(&text).0,
            "[claude] first\n[claude] second\n[claude] third\n"
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
    fn partial_text_is_held_until_its_line_ends_or_is_flushed() {
        let mut reader = StreamJson::new();
        let mut out = Vec::new();
        reader.translate(lines(&[delta("tick 1\ntick")]).as_bytes(), &mut out);
        assert_eq!(out, b"[claude] tick 1\n");
        assert!(reader.holds_partial_line());
        reader.flush_partial_line(&mut out);
        reader.translate(lines(&[delta(" 2\n")]).as_bytes(), &mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "[claude] tick 1\n[claude] tick\n[claude]  2\n"
        );
    }

    #[test]
    fn retries_are_shown() {
        let retry = json!({"type": "system", "subtype": "api_retry", "attempt": 2,
            "max_retries": 10, "retry_delay_ms": 1172.6, "error_status": 529, "error": "overloaded"});
        let bare = json!({"type": "system", "subtype": "api_retry", "attempt": 1});
        assert_eq!(
            translate(&lines(&[retry, bare])).0,
            "[claude] API error 529 (overloaded); retry 2 of 10 in 1.2 s\n\
             [claude] API error; retry 1\n"
        );
    }

    #[test]
    fn an_api_error_is_said_once_with_its_status() {
        let text = lines(&[
            json!({"type": "assistant", "message": {"id": "x", "model": "<synthetic>",
                "content": [{"type": "text", "text": "Invalid API key · Fix external API key"}]}}),
            json!({"type": "result", "subtype": "success", "is_error": true,
                "api_error_status": 401, "result": "Invalid API key · Fix external API key"}),
        ]);
        let (out, response) = translate(&text);
        assert_eq!(out, "");
        assert_eq!(
            response,
            FinalResponse::Unavailable(
                "claude-lean reported API error 401: Invalid API key · Fix external API key"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_synthetic_message_that_is_not_the_error_is_shown() {
        let text = lines(&[
            json!({"type": "assistant", "message": {"id": "x", "model": "<synthetic>",
                "content": [{"type": "text", "text": "[Request interrupted]"}]}}),
            success("<phase-complete>ok</phase-complete>"),
        ]);
        assert_eq!(translate(&text).0, "[claude] [Request interrupted]\n");
        let unfinished = lines(&[json!({"type": "assistant", "message": {"id": "x",
            "model": "<synthetic>", "content": [{"type": "text", "text": "No response"}]}})]);
        assert_eq!(translate(&unfinished).0, "[claude] No response\n");
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
    fn failed_results_are_errors_or_rate_limits() {
        let limited = |text: &str| FinalResponse::RateLimited(text.to_owned());
        let unavailable = |text: &str| FinalResponse::Unavailable(text.to_owned());
        let cases = [
            (
                json!({"type": "result", "subtype": "success", "is_error": true,
                    "api_error_status": 429, "result": "API Error: Request rejected (429) · slow down"}),
                limited(
                    "rate limited (API status 429): API Error: Request rejected (429) · slow down",
                ),
            ),
            (
                json!({"type": "result", "subtype": "success", "is_error": true,
                    "result": "API Error: 529 overloaded"}),
                limited("rate limited (API status 529): API Error: 529 overloaded"),
            ),
            (
                json!({"type": "result", "subtype": "success", "is_error": true,
                    "result": "5-hour limit reached ∙ resets 3pm"}),
                limited("rate limited: 5-hour limit reached ∙ resets 3pm"),
            ),
            (
                json!({"type": "result", "subtype": "success", "is_error": true,
                    "api_error_status": 500, "result": "API Error: 500 Internal server error"}),
                unavailable(
                    "claude-lean reported API error 500: API Error: 500 Internal server error",
                ),
            ),
            (
                json!({"type": "result", "subtype": "error_during_execution", "is_error": false,
                    "result": "<phase-complete>x</phase-complete>"}),
                unavailable(
                    "claude-lean reported an error result (subtype error_during_execution): \
                     <phase-complete>x</phase-complete>",
                ),
            ),
            (
                json!({"type": "result", "result": "<phase-complete>x</phase-complete>"}),
                unavailable(
                    "claude-lean reported an error result (subtype none): \
                     <phase-complete>x</phase-complete>",
                ),
            ),
            (
                json!({"type": "result", "subtype": "success", "is_error": false}),
                unavailable("claude-lean's result event has no result text"),
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(translate(&lines(&[event])).1, expected);
        }
    }

    #[test]
    fn tool_lines_are_one_short_line() {
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
    }

    #[test]
    fn tool_results_are_one_short_line() {
        let result = |content: Value, is_error: bool| {
            tool_result_summary(&json!({"type": "tool_result", "content": content,
                "is_error": is_error}))
        };
        assert_eq!(
            result(json!("Exit code 2\nhello\nbash: error"), true),
            "tool result (error, 3 lines): Exit code 2 hello bash: error"
        );
        assert_eq!(
            result(
                json!([{"type": "text", "text": "a"}, {"type": "image"}]),
                false
            ),
            "tool result (2 lines): a [image]"
        );
        assert_eq!(result(json!(""), false), "tool result (empty)");
        assert_eq!(
            tool_result_summary(&json!({"type": "tool_result"})),
            "tool result (empty)"
        );
    }

    #[test]
    fn an_overlong_line_is_skipped_with_a_notice() {
        let mut reader = StreamJson::new();
        let mut out = Vec::new();
        let piece = vec![b'x'; MAX_LINE_BYTES / 4 + 1];
        for _ in 0..4 {
            reader.translate(&piece, &mut out);
        }
        reader.translate(b"tail\nafter\n", &mut out);
        reader.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            format!(
                "[claude] skipped an output line longer than {MAX_LINE_BYTES} bytes\n[claude] after\n"
            )
        );
    }

    fn notices_of(events: &[Value]) -> (String, Vec<Notice>) {
        let mut reader = StreamJson::new();
        let mut out = Vec::new();
        reader.translate(lines(events).as_bytes(), &mut out);
        reader.finish(&mut out);
        let mut notices = Vec::new();
        reader.take_notices(&mut notices);
        (String::from_utf8(out).expect("utf-8"), notices)
    }

    fn statuses(notices: &[Notice]) -> Vec<&str> {
        notices
            .iter()
            .filter_map(|notice| match notice {
                Notice::Status(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn block_start(kind: &str, extra: Value) -> Value {
        let mut block = json!({"type": kind});
        if let (Value::Object(block), Value::Object(extra)) = (&mut block, extra) {
            block.extend(extra);
        }
        json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
            "content_block": block}})
    }

    #[test]
    fn statuses_say_what_the_model_is_doing() {
        let (_, notices) = notices_of(&[
            message_start("m1"),
            block_start("thinking", json!({"thinking": ""})),
            block_start("text", json!({"text": ""})),
            block_start("tool_use", json!({"name": "Bash", "input": {}})),
            assistant(
                "m1",
                json!([{"type": "tool_use", "id": "t1", "name": "Bash",
                    "input": {"command": "cargo   test\n--locked"}}]),
            ),
            json!({"type": "user", "message": {"content": [
                {"type": "tool_result", "content": "ok", "is_error": false}]}}),
        ]);
        assert_eq!(
            statuses(&notices),
            [
                "generating",
                "thinking",
                "generating",
                "tool: Bash",
                "tool: Bash cargo test --locked",
                "generating"
            ]
        );
    }

    #[test]
    fn an_announced_retry_extends_the_idle_deadline_by_its_delay_and_a_margin() {
        let retry = json!({"type": "system", "subtype": "api_retry", "attempt": 6,
            "max_retries": 10, "retry_delay_ms": 18600.0, "error_status": 529,
            "error": "overloaded"});
        let (out, notices) = notices_of(&[retry]);
        assert_eq!(
            out,
            "[claude] API error 529 (overloaded); retry 6 of 10 in 18.6 s\n"
        );
        assert_eq!(
            notices,
            [
                Notice::Status("API error 529 (overloaded); retry 6 of 10 in 18.6 s".to_owned()),
                Notice::Extend(Duration::from_millis(18_600) + RETRY_MARGIN),
            ]
        );
        // Without a delay there is nothing to extend by.
        let (_, notices) = notices_of(&[json!({"type": "system", "subtype": "api_retry"})]);
        assert_eq!(notices.len(), 1);
    }

    #[test]
    fn usage_is_reported_as_it_goes_and_finally_from_the_result() {
        use crate::domain::token_usage::TokenCounts;
        let start = json!({"type": "stream_event", "event": {"type": "message_start",
            "message": {"id": "m1", "model": "claude-opus", "usage": {"input_tokens": 10,
                "cache_read_input_tokens": 90, "cache_creation_input_tokens": 0,
                "output_tokens": 1}}}});
        let delta = json!({"type": "stream_event", "event": {"type": "message_delta",
            "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}});
        let result = json!({"type": "result", "subtype": "success", "is_error": false,
            "result": "<phase-complete>x</phase-complete>", "total_cost_usd": 0.0125,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                "cache_creation_input_tokens": 0, "output_tokens": 20},
            "modelUsage": {"claude-opus": {"inputTokens": 10, "cacheReadInputTokens": 90,
                "outputTokens": 20, "costUSD": 0.0125}}});
        let (out, notices) = notices_of(&[start, delta, result]);
        let reports: Vec<&UsageReport> = notices
            .iter()
            .filter_map(|notice| match notice {
                Notice::Usage(report) => Some(report),
                _ => None,
            })
            .collect();
        assert_eq!(reports.len(), 3, "{notices:?}");
        assert!(!reports[0].is_final && !reports[1].is_final);
        assert_eq!(reports[0].totals.output_tokens, Some(1));
        assert_eq!(reports[1].totals.output_tokens, Some(20));
        assert_eq!(reports[1].totals.input_tokens, Some(100));
        assert!(reports[2].is_final);
        assert_eq!(
            reports[2].totals,
            TokenCounts {
                input_tokens: Some(100),
                cached_input_tokens: Some(90),
                output_tokens: Some(20),
                reasoning_tokens: None,
                cost_usd: Some(0.0125),
            }
        );
        assert_eq!(
            out,
            "[claude] usage: 100 in (90 cached), 20 out tokens, $0.0125 (Claude Code's estimate, not a bill)\n"
        );
    }

    use crate::domain::token_usage::report::UsageReport;
    use crate::wrapper::diagnostics::test_support::{json_like_chunks, translate_all};

    proptest! {
        #[test]
        fn never_panics_and_stays_inert(chunks in json_like_chunks()) {
            let mut reader = StreamJson::new();
            let out = translate_all(&mut reader, &chunks);
            prop_assert!(!out.contains(&b'<'));
            let _ = reader.final_response();
        }
    }
}
