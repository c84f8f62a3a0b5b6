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
mod tests;
