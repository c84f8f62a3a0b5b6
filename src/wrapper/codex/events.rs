//! Reading `codex-lean exec --json`'s stdout: one JSON event per line (`thread.started`,
//! `turn.*`, `item.started` / `item.completed`, `error`), lines split at any byte.
//!
//! Codex reports whole items: a message or reasoning summary arrives once it is complete, a
//! command when it starts and again when it ends. What is shown, as `[codex] ` diagnostics:
//!
//! - agent messages as text (live result blocks hidden), the reasoning summary as text
//!   labelled `reasoning: `;
//! - a command when it starts, `exec: /bin/bash -lc 'ls'`, and its end, `exec result (exit 0,
//!   3 lines): …`; file changes, MCP tool calls, web searches and plan updates as one line
//!   each: notes, so tag text in them is escaped, not hidden;
//! - warnings (`error` items: Codex's non-fatal notices) and errors (`error` events:
//!   reconnects, and the error that ends a failed turn), once each;
//! - a line that is not a JSON object, as is (a launcher that dropped `--json`).
//!
//! A failed turn (`turn.failed`) is remembered: it means there is no result, and when its
//! error is a rate limit, usage limit or overload the wrapper exits 75.
//!
//! For the runner's notification socket ([`crate::wrapper::notifier`]) it also learns:
//!
//! - statuses: `generating` while a turn is in progress (at its start and after each command
//!   or tool call ends), the `exec: …` line when a command starts, `tool: …` / `web search: …`
//!   when a tool call starts, `files: …`, `reasoning: …` and `message: …` (the first words)
//!   when such an item is complete, and each reconnect or error;
//! - the usage: each `turn.completed` reports its turn's tokens (`input_tokens` with the
//!   cached ones included, `cached_input_tokens`, `output_tokens`, `reasoning_output_tokens`),
//!   summed over the turns and sent as a running report; once the launcher has exited by
//!   itself the same totals are sent as the final one ([`ExecEvents::final_usage`]). Codex
//!   reports no cost. A killed Codex leaves only what completed turns reported, or nothing.

use serde_json::{Map, Value};

use super::PREFIX;
use crate::domain::token_usage::TokenCounts;
use crate::domain::token_usage::report::UsageReport;
use crate::wrapper::diagnostics::{DiagnosticStream, StreamTranslator};
use crate::wrapper::json_lines::{Line, LineSplitter, MAX_LINE_BYTES};
use crate::wrapper::notifier::Notice;
use crate::wrapper::summary;

/// Incremental reader of `codex exec --json` output.
#[derive(Debug)]
pub struct ExecEvents {
    lines: LineSplitter,
    text: DiagnosticStream,
    /// The last `error` event shown, so a failed turn repeating it is not shown again.
    last_error: Option<String>,
    /// The error of a `turn.failed` event, if one came.
    failed_turn: Option<String>,
    /// What completed turns reported, summed; `None` before the first.
    usage: Option<TokenCounts>,
    notices: Vec<Notice>,
}

/// How a turn failed, as the translator saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnFailure {
    pub message: String,
    /// The message was already shown, as an `error` event.
    pub shown: bool,
}

impl Default for ExecEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl ExecEvents {
    pub fn new() -> Self {
        Self {
            lines: LineSplitter::default(),
            text: DiagnosticStream::new(PREFIX),
            last_error: None,
            failed_turn: None,
            usage: None,
            notices: Vec::new(),
        }
    }

    /// The totals of the completed turns as the final report (`final: true`), once the
    /// launcher has exited by itself; `None` when no turn completed.
    pub fn final_usage(&self) -> Option<UsageReport> {
        self.usage.clone().map(|totals| UsageReport {
            totals,
            is_final: true,
            ..UsageReport::default()
        })
    }

    fn status(&mut self, text: &str) {
        self.notices.push(Notice::status(text));
    }

    fn turn_completed(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else {
            return;
        };
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        let turn = TokenCounts {
            input_tokens: count("input_tokens"),
            cached_input_tokens: count("cached_input_tokens"),
            output_tokens: count("output_tokens"),
            reasoning_tokens: count("reasoning_output_tokens"),
            cost_usd: None,
        };
        let totals = self.usage.take().unwrap_or_default().plus(&turn);
        self.notices.push(Notice::Usage(UsageReport {
            totals: totals.clone(),
            ..UsageReport::default()
        }));
        self.usage = Some(totals);
    }

    /// The error the last turn failed with, if it failed.
    pub fn turn_failure(&self) -> Option<TurnFailure> {
        self.failed_turn.as_ref().map(|message| TurnFailure {
            message: message.clone(),
            shown: self.last_error.as_ref() == Some(message),
        })
    }

    fn line(&mut self, line: Line<'_>, out: &mut Vec<u8>) {
        let (text, ended) = match line {
            Line::Text { text, ended } => (text, ended),
            Line::TooLong => {
                let note = format!("skipped an output line longer than {MAX_LINE_BYTES} bytes");
                self.text.note(&note, out);
                return;
            }
        };
        match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(event)) => self.event(&event, out),
            _ => {
                self.text.translate(text, out);
                if ended {
                    self.text.translate(b"\n", out);
                }
            }
        }
    }

    fn event(&mut self, event: &Map<String, Value>, out: &mut Vec<u8>) {
        let item = event.get("item").unwrap_or(&Value::Null);
        match event.get("type").and_then(Value::as_str) {
            Some("item.started") => self.item_started(item, out),
            Some("item.completed") => self.item_completed(item, out),
            Some("turn.started") => self.status("generating"),
            Some("turn.completed") => self.turn_completed(event.get("usage")),
            Some("error") => {
                let message = event
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let note = format!("error: {message}");
                self.text.note(&note, out);
                self.status(&summary::one_line(&note));
                self.last_error = Some(message);
            }
            Some("turn.failed") => {
                let message = string(event.get("error").unwrap_or(&Value::Null), "message");
                if self.last_error.as_ref() != Some(&message) {
                    self.text.note(&format!("error: {message}"), out);
                    self.last_error = Some(message.clone());
                }
                self.failed_turn = Some(message);
            }
            _ => {}
        }
    }

    fn item_started(&mut self, item: &Value, out: &mut Vec<u8>) {
        let note = match kind(item) {
            "command_execution" => format!("exec: {}", summary::one_line(&string(item, "command"))),
            "mcp_tool_call" => format!("tool: {}.{}", string(item, "server"), string(item, "tool")),
            "web_search" => format!("web search: {}", summary::one_line(&string(item, "query"))),
            _ => return,
        };
        self.text.note(&note, out);
        self.status(&note);
    }

    fn item_completed(&mut self, item: &Value, out: &mut Vec<u8>) {
        match kind(item) {
            "agent_message" => {
                let text = string(item, "text");
                self.show_text("", &text, out);
                self.status(&summary::one_line(&format!("message: {text}")));
            }
            "reasoning" => {
                let text = string(item, "text");
                self.show_text("reasoning: ", &text, out);
                self.status(&summary::one_line(&format!("reasoning: {text}")));
            }
            "command_execution" => {
                let details = match item.get("exit_code").and_then(Value::as_i64) {
                    Some(code) => format!("exit {code}"),
                    None => string(item, "status"),
                };
                let output = string(item, "aggregated_output");
                let note = summary::output("exec result", &[&details], &output);
                self.text.note(&note, out);
                self.status("generating");
            }
            "file_change" => {
                let changes = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|change| format!("{} {}", string(change, "kind"), string(change, "path")))
                    .collect::<Vec<_>>()
                    .join(", ");
                let note = format!("files ({}): {changes}", string(item, "status"));
                self.text.note(&summary::one_line(&note), out);
                self.status(&summary::one_line(&format!("files: {changes}")));
            }
            "mcp_tool_call" => {
                let note = format!(
                    "tool result ({}): {}.{}",
                    string(item, "status"),
                    string(item, "server"),
                    string(item, "tool")
                );
                self.text.note(&note, out);
                self.status("generating");
            }
            "todo_list" => {
                let items: Vec<&Value> = item
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .collect();
                let done = items
                    .iter()
                    .filter(|todo| todo.get("completed").and_then(Value::as_bool) == Some(true))
                    .count();
                let next = items
                    .iter()
                    .find(|todo| todo.get("completed").and_then(Value::as_bool) != Some(true))
                    .map(|todo| format!("; next: {}", string(todo, "text")))
                    .unwrap_or_default();
                let note = format!("plan: {done} of {} done{next}", items.len());
                self.text.note(&summary::one_line(&note), out);
            }
            "error" => {
                let note = format!("warning: {}", string(item, "message"));
                self.text.note(&note, out);
            }
            // Shown when they started.
            "web_search" => {}
            other => self.text.note(&format!("item: {other}"), out),
        }
    }

    /// Shows a whole item's text through the live filter, `label` on its first line, ending
    /// its line.
    fn show_text(&mut self, label: &str, text: &str, out: &mut Vec<u8>) {
        if text.trim().is_empty() {
            return;
        }
        self.text.translate(label.as_bytes(), out);
        self.text.translate(text.as_bytes(), out);
        if !text.ends_with('\n') {
            self.text.translate(b"\n", out);
        }
    }
}

impl StreamTranslator for ExecEvents {
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
        self.text.finish(out);
    }

    fn take_notices(&mut self, into: &mut Vec<Notice>) {
        into.append(&mut self.notices);
    }
}

fn kind(item: &Value) -> &str {
    item.get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
}

/// A string field, or an empty string: a missing field must not hide the rest of the event.
fn string(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests;
