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
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn translate_chunks(chunks: &[&[u8]]) -> (String, ExecEvents) {
        let mut reader = ExecEvents::new();
        let mut out = Vec::new();
        for chunk in chunks {
            reader.translate(chunk, &mut out);
        }
        reader.finish(&mut out);
        (String::from_utf8(out).expect("utf-8"), reader)
    }

    fn translate(events: &[Value]) -> (String, ExecEvents) {
        let text: String = events.iter().map(|event| format!("{event}\n")).collect();
        translate_chunks(&[text.as_bytes()])
    }

    fn completed(item: Value) -> Value {
        json!({"type": "item.completed", "item": item})
    }

    /// A session as Codex 0.171 prints it with `--json`.
    fn session() -> Vec<Value> {
        let command = json!({"id": "item_3", "type": "command_execution",
            "command": "/bin/bash -lc 'echo   hello\n&& echo <phase-complete>x</phase-complete>'",
            "aggregated_output": "", "exit_code": null, "status": "in_progress"});
        let mut finished = command.clone();
        finished["aggregated_output"] = json!("hello\nbash: syntax error\n");
        finished["exit_code"] = json!(2);
        finished["status"] = json!("failed");
        vec![
            json!({"type": "thread.started", "thread_id": "t"}),
            completed(json!({"id": "item_0", "type": "error",
                "message": "Model metadata for `mock-model` not found."})),
            json!({"type": "turn.started"}),
            completed(json!({"id": "item_1", "type": "reasoning",
                "text": "Secret thinking: <phase-blocked>never shown</phase-blocked>"})),
            completed(json!({"id": "item_2", "type": "agent_message",
                "text": "Let me check <phase-complete> later.\n```python\nprint('<phase-blocked>')\n```\n"})),
            json!({"type": "item.started", "item": command}),
            completed(finished),
            completed(json!({"id": "item_4", "type": "agent_message",
                "text": "Done.\n<phase-complete>\nRan echo.\n</phase-complete>"})),
            json!({"type": "turn.completed", "usage": {"input_tokens": 20}}),
        ]
    }

    #[test]
    fn items_are_shown_labelled_escaped_and_once() {
        let (out, reader) = translate(&session());
        assert_eq!(
            out,
            "[codex] warning: Model metadata for `mock-model` not found.\n\
             [codex] reasoning: Secret thinking: \n\
             [codex] Let me check &lt;phase-complete> later.\n\
             [codex] ```python\n\
             [codex] print('&lt;phase-blocked>')\n\
             [codex] ```\n\
             [codex] exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'\n\
             [codex] exec result (exit 2, 2 lines): hello bash: syntax error\n\
             [codex] Done.\n"
        );
        assert_eq!(reader.turn_failure(), None);
    }

    #[test]
    fn output_does_not_depend_on_where_lines_are_split() {
        let text: String = session().iter().map(|event| format!("{event}\n")).collect();
        let expected = translate_chunks(&[text.as_bytes()]).0;
        let bytes = text.as_bytes();
        for cut in (0..=bytes.len()).step_by(7) {
            assert_eq!(
                translate_chunks(&[&bytes[..cut], &bytes[cut..]]).0,
                expected,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_failed_turn_is_remembered_and_its_error_shown_once() {
        let message = "exceeded retry limit, last status: 429 Too Many Requests";
        let (out, reader) = translate(&[
            json!({"type": "error", "message": "Reconnecting... 1/2 (stream error)"}),
            json!({"type": "error", "message": message}),
            json!({"type": "turn.failed", "error": {"message": message}}),
        ]);
        assert_eq!(
            out,
            format!(
                "[codex] error: Reconnecting... 1/2 (stream error)\n[codex] error: {message}\n"
            )
        );
        assert_eq!(
            reader.turn_failure(),
            Some(TurnFailure {
                message: message.to_owned(),
                shown: true
            })
        );
        let (out, reader) =
            translate(&[json!({"type": "turn.failed", "error": {"message": "boom"}})]);
        assert_eq!(out, "[codex] error: boom\n");
        assert_eq!(
            reader.turn_failure().map(|failure| failure.shown),
            Some(true)
        );
    }

    #[test]
    fn other_items_are_one_line_each() {
        let (out, _) = translate(&[
            completed(
                json!({"type": "file_change", "status": "completed", "changes": [
                {"path": "src/a.rs", "kind": "update"}, {"path": "b.rs", "kind": "add"}]}),
            ),
            json!({"type": "item.started", "item": {"type": "mcp_tool_call", "server": "docs",
                "tool": "search", "status": "in_progress"}}),
            completed(
                json!({"type": "mcp_tool_call", "server": "docs", "tool": "search",
                "status": "completed"}),
            ),
            json!({"type": "item.started", "item": {"type": "web_search", "query": "rust <T>"}}),
            completed(json!({"type": "web_search", "query": "rust <T>"})),
            completed(json!({"type": "todo_list", "items": [
                {"text": "read", "completed": true}, {"text": "write", "completed": false}]})),
            completed(
                json!({"type": "command_execution", "command": "x", "status": "declined",
                "aggregated_output": ""}),
            ),
            completed(json!({"type": "future_kind"})),
        ]);
        assert_eq!(
            out,
            "[codex] files (completed): update src/a.rs, add b.rs\n\
             [codex] tool: docs.search\n\
             [codex] tool result (completed): docs.search\n\
             [codex] web search: rust &lt;T>\n\
             [codex] plan: 1 of 2 done; next: write\n\
             [codex] exec result (declined, empty)\n\
             [codex] item: future_kind\n"
        );
    }

    #[test]
    fn lines_that_are_not_events_are_shown_as_they_are() {
        let (out, _) = translate_chunks(&[b"The answer <phase-complete>x</phase-complete>\nplain"]);
        assert_eq!(out, "[codex] The answer \n[codex] plain\n");
    }

    fn notices_of(events: &[Value]) -> (ExecEvents, Vec<Notice>) {
        let (_, mut reader) = translate(events);
        let mut notices = Vec::new();
        reader.take_notices(&mut notices);
        (reader, notices)
    }

    #[test]
    fn statuses_follow_the_items_and_a_turn_in_progress_is_generating() {
        let (_, notices) = notices_of(&session());
        let statuses: Vec<&str> = notices
            .iter()
            .filter_map(|notice| match notice {
                Notice::Status(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            statuses,
            [
                "generating",
                "reasoning: Secret thinking: &lt;phase-blocked>never shown&lt;/phase-blocked>",
                "message: Let me check &lt;phase-complete> later. ```python print('&lt;phase-blocked>') ```",
                "exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'",
                "generating",
                "message: Done. &lt;phase-complete> Ran echo. &lt;/phase-complete>",
            ]
        );
        let (_, notices) = notices_of(&[
            completed(
                json!({"type": "file_change", "status": "completed", "changes": [
                {"path": "src/a.rs", "kind": "update"}]}),
            ),
            json!({"type": "error", "message": "Reconnecting... 1/2 (stream error)"}),
        ]);
        assert_eq!(
            notices,
            [
                Notice::Status("files: update src/a.rs".to_owned()),
                Notice::Status("error: Reconnecting... 1/2 (stream error)".to_owned()),
            ]
        );
    }

    #[test]
    fn each_completed_turn_reports_the_sum_and_the_end_makes_it_final() {
        let (reader, notices) = notices_of(&[
            json!({"type": "turn.completed", "usage": {"input_tokens": 20,
                "cached_input_tokens": 5, "cache_write_input_tokens": 0, "output_tokens": 40,
                "reasoning_output_tokens": 7}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}),
        ]);
        let expected = TokenCounts {
            input_tokens: Some(21),
            cached_input_tokens: Some(5),
            output_tokens: Some(42),
            reasoning_tokens: Some(7),
            cost_usd: None,
        };
        match notices.last() {
            Some(Notice::Usage(report)) => {
                assert!(!report.is_final);
                assert_eq!(report.totals, expected);
            }
            other => panic!("{other:?}"),
        }
        let last = reader.final_usage().expect("final");
        assert!(last.is_final);
        assert_eq!(last.totals, expected);
        assert_eq!(ExecEvents::new().final_usage(), None);
    }

    use crate::wrapper::diagnostics::test_support::{json_like_chunks, translate_all};

    proptest! {
        #[test]
        fn never_panics_and_stays_inert(chunks in json_like_chunks()) {
            let mut reader = ExecEvents::new();
            let out = translate_all(&mut reader, &chunks);
            prop_assert!(!out.contains(&b'<'));
            let _ = reader.turn_failure();
        }
    }
}
