//! Reading `claude-lean`'s stream-json events: what each one shows, tells the runner (statuses,
//! a retry's idle extension, usage via [`super::tokens`]) and leaves as the final response
//! (docs/providers.md, "Claude: stream-json with partial messages").

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_with::DefaultOnError;

use super::tokens::{ClaudeUsage, Usage, final_report};
use super::{LAUNCHER, PREFIX};
use crate::wrapper::final_result::FinalResponse;
use crate::wrapper::json_lines::{EventReader, Shown};
use crate::wrapper::notifier::Notice;
use crate::wrapper::rate_limit;
use crate::wrapper::summary;

/// Beyond an announced retry delay, how much longer the idle deadline is extended: time for
/// the retried request to get its first answer.
pub const RETRY_MARGIN: Duration = Duration::from_secs(5);

/// The model name Claude gives messages it made up itself (errors, interruptions).
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// One line of stream-json output. Every field here and in the types below is optional, and
/// one of another type counts as missing (`DefaultOnError`).
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    StreamEvent {
        event: StreamEvent,
    },
    /// A whole message, or one of its blocks.
    Assistant {
        message: Message,
    },
    /// Tool results.
    User {
        message: Message,
    },
    System(SystemEvent),
    Result(ResultEvent),
    #[default]
    #[serde(other)]
    Other,
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: Message,
    },
    ContentBlockStart {
        content_block: Block,
    },
    MessageDelta {
        usage: Usage,
    },
    ContentBlockDelta {
        delta: Delta,
    },
    ContentBlockStop,
    MessageStop,
    #[default]
    #[serde(other)]
    Other,
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    TextDelta {
        text: Option<String>,
    },
    #[default]
    #[serde(other)]
    Other,
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct Message {
    id: Option<String>,
    model: Option<String>,
    #[serde_with(skip_apply)]
    #[serde_as(as = "DefaultOnError<Vec<DefaultOnError>>")]
    #[serde(default)]
    content: Vec<Block>,
    usage: Usage,
}

/// A message's content block, or the block a `content_block_start` opens.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: Option<String>,
    },
    Thinking,
    RedactedThinking,
    ToolUse {
        name: Option<String>,
        /// The tool's own arguments, any JSON.
        input: Value,
    },
    ServerToolUse {
        name: Option<String>,
    },
    ToolResult {
        content: Option<ToolResultContent>,
        is_error: bool,
    },
    #[default]
    #[serde(other)]
    Other,
}

#[serde_with::serde_as]
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    /// Of which only text is shown; anything else that is not text reads as no parts.
    Parts(#[serde_as(as = "DefaultOnError<Vec<DefaultOnError>>")] Vec<Part>),
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum SystemEvent {
    ApiRetry(Retry),
    #[default]
    #[serde(other)]
    Other,
}

/// An API request the CLI is about to retry.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct Retry {
    error_status: Option<u64>,
    error: Option<String>,
    attempt: Option<f64>,
    max_retries: Option<f64>,
    retry_delay_ms: Option<f64>,
}

/// The session's outcome; the last one is the authoritative response.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct ResultEvent {
    subtype: Option<String>,
    is_error: bool,
    api_error_status: Option<u16>,
    #[serde(rename = "result")]
    text: Option<String>,
    usage: Option<Usage>,
    #[serde_with(skip_apply)]
    #[serde_as(as = "DefaultOnError<BTreeMap<_, DefaultOnError>>")]
    #[serde(default, rename = "modelUsage")]
    model_usage: BTreeMap<String, Usage>,
    total_cost_usd: Option<f64>,
}

/// What claude-lean's events told so far.
#[derive(Debug, Default)]
pub struct StreamJson {
    streaming_message: Option<String>,
    /// Messages whose text arrived as deltas, so their whole text is not shown again.
    streamed_text: HashSet<String>,
    /// Text of a message the CLI made up, held until the result says whether it is the
    /// result's own error.
    synthetic: Option<String>,
    result: Option<ResultEvent>,
    usage: ClaudeUsage,
}

impl EventReader for StreamJson {
    const PREFIX: &'static str = PREFIX;
    type Event = Event;

    fn event(&mut self, event: Event, shown: &mut Shown, out: &mut Vec<u8>) {
        match event {
            Event::StreamEvent { event } => self.stream_event(event, shown, out),
            Event::Assistant { message } => self.assistant(message, shown, out),
            Event::User { message } => {
                let mut results = false;
                for block in &message.content {
                    if let Block::ToolResult { content, is_error } = block {
                        shown.note(&tool_result_summary(content.as_ref(), *is_error), out);
                        results = true;
                    }
                }
                if results {
                    shown.status("generating");
                }
            }
            Event::System(SystemEvent::ApiRetry(retry)) => {
                shown.end_line(out);
                let line = retry.line();
                shown.note(&line, out);
                shown.status(&line);
                if let Some(delay) = retry
                    .retry_delay_ms
                    .filter(|delay| delay.is_finite() && *delay >= 0.0)
                {
                    let delay =
                        Duration::try_from_secs_f64(delay / 1000.0).unwrap_or(Duration::MAX);
                    shown.notify(Notice::Extend(delay.saturating_add(RETRY_MARGIN)));
                }
            }
            Event::Result(result) => self.result(result, shown, out),
            Event::System(SystemEvent::Other) | Event::Other => {}
        }
    }

    fn finish(&mut self, shown: &mut Shown, out: &mut Vec<u8>) {
        self.show_synthetic(shown, out);
    }
}

impl StreamJson {
    /// The last `result` event's response.
    pub fn final_response(self) -> FinalResponse {
        match self.result {
            Some(result) => response(&result),
            None => FinalResponse::Unavailable(format!("{LAUNCHER} produced no result event")),
        }
    }

    fn report_running_usage(&self, shown: &mut Shown) {
        if let Some(report) = self.usage.running_report() {
            shown.notify(Notice::Usage(report));
        }
    }

    fn stream_event(&mut self, event: StreamEvent, shown: &mut Shown, out: &mut Vec<u8>) {
        match event {
            StreamEvent::MessageStart { message } => {
                self.streaming_message = message.id.clone();
                shown.status("generating");
                let (id, model) = (message.id.as_deref(), message.model.as_deref());
                if self.usage.message(id, model, &message.usage) {
                    self.report_running_usage(shown);
                }
            }
            StreamEvent::ContentBlockStart { content_block } => match content_block {
                Block::Thinking | Block::RedactedThinking => shown.status("thinking"),
                Block::Text { .. } => shown.status("generating"),
                Block::ToolUse { name, .. } | Block::ServerToolUse { name } => {
                    shown.status(&format!("tool: {}", name.as_deref().unwrap_or("unknown")));
                }
                Block::ToolResult { .. } | Block::Other => {}
            },
            StreamEvent::MessageDelta { usage } => {
                if let Some(id) = &self.streaming_message
                    && self.usage.delta(id, &usage)
                {
                    self.report_running_usage(shown);
                }
            }
            StreamEvent::ContentBlockDelta { delta } => {
                if let Delta::TextDelta { text: Some(text) } = delta {
                    if let Some(message) = &self.streaming_message {
                        self.streamed_text.insert(message.clone());
                    }
                    shown.text(&text, out);
                }
            }
            StreamEvent::ContentBlockStop | StreamEvent::MessageStop => shown.end_line(out),
            StreamEvent::Other => {}
        }
    }

    fn assistant(&mut self, message: Message, shown: &mut Shown, out: &mut Vec<u8>) {
        let (id, model) = (message.id.as_deref(), message.model.as_deref());
        let streamed = id.is_some_and(|id| self.streamed_text.contains(id));
        let synthetic = model == Some(SYNTHETIC_MODEL);
        if !synthetic && self.usage.message(id, model, &message.usage) {
            self.report_running_usage(shown);
        }
        for block in message.content {
            match block {
                Block::Text { text: Some(text) } if !streamed => {
                    if synthetic {
                        self.show_synthetic(shown, out);
                        self.synthetic = Some(text);
                    } else {
                        shown.text(&text, out);
                        shown.end_line(out);
                    }
                }
                Block::ToolUse { name, input } => {
                    shown.end_line(out);
                    let line = tool_summary(name.as_deref(), &input);
                    shown.note(&line, out);
                    shown.status(&line);
                }
                // Streamed text was shown as it came; thinking is never shown.
                Block::Text { .. }
                | Block::Thinking
                | Block::RedactedThinking
                | Block::ServerToolUse { .. }
                | Block::ToolResult { .. }
                | Block::Other => {}
            }
        }
    }

    fn result(&mut self, result: ResultEvent, shown: &mut Shown, out: &mut Vec<u8>) {
        let report = final_report(
            result.usage.as_ref(),
            &result.model_usage,
            result.total_cost_usd,
        );
        if let Some(report) = report {
            shown.end_line(out);
            let line = format!(
                "usage: {}{}",
                report.totals.describe(),
                if report.totals.cost_usd.is_some() {
                    " (Claude Code's estimate, not a bill)"
                } else {
                    ""
                }
            );
            shown.note(&line, out);
            shown.notify(Notice::Usage(report));
        }
        // The result says a made-up message's error again, with its API status: said once.
        let repeated = result.is_error
            && self.synthetic.as_deref().map(str::trim) == result.text.as_deref().map(str::trim);
        if repeated {
            self.synthetic = None;
        }
        self.show_synthetic(shown, out);
        self.result = Some(result);
    }

    fn show_synthetic(&mut self, shown: &mut Shown, out: &mut Vec<u8>) {
        if let Some(text) = self.synthetic.take() {
            shown.end_line(out);
            shown.text(&text, out);
            shown.end_line(out);
        }
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
    let status = result
        .api_error_status
        .or_else(|| rate_limit::quoted_status(text));
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

impl Retry {
    /// `API error 529 (overloaded); retry 2 of 10 in 1.2 s`.
    fn line(&self) -> String {
        let mut line = "API error".to_owned();
        if let Some(status) = self.error_status {
            line.push_str(&format!(" {status}"));
        }
        if let Some(error) = &self.error {
            line.push_str(&format!(" ({error})"));
        }
        line.push_str("; retry");
        if let Some(attempt) = self.attempt {
            line.push_str(&format!(" {attempt}"));
            if let Some(max) = self.max_retries {
                line.push_str(&format!(" of {max}"));
            }
        }
        if let Some(delay) = self.retry_delay_ms {
            line.push_str(&format!(" in {:.1} s", delay / 1000.0));
        }
        line
    }
}

/// `tool: <name> <main input>`.
fn tool_summary(name: Option<&str>, input: &Value) -> String {
    let name = name.unwrap_or("unknown");
    summary::one_line(&format!("tool: {name} {}", input_summary(input)))
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

/// `tool result (error, 3 lines): …`.
fn tool_result_summary(content: Option<&ToolResultContent>, is_error: bool) -> String {
    let text = match content {
        Some(ToolResultContent::Text(text)) => text.clone(),
        Some(ToolResultContent::Parts(parts)) => parts
            .iter()
            .map(|part| match part.kind.as_deref() {
                Some("text") => part.text.clone().unwrap_or_default(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => String::new(),
    };
    summary::output(
        "tool result",
        if is_error { &["error"] } else { &[] },
        &text,
    )
}

#[cfg(test)]
mod tests;
