//! Reading `codex-lean exec --json`'s events: what each item shows and tells the runner, the
//! usage summed over the completed turns, and a failed turn, which means there is no result
//! (docs/providers.md, "Codex: `exec --json`").

use serde::Deserialize;
use serde_with::DefaultOnError;

use super::PREFIX;
use crate::domain::token_usage::TokenCounts;
use crate::domain::token_usage::report::UsageReport;
use crate::wrapper::json_lines::{EventReader, Shown};
use crate::wrapper::notifier::Notice;
use crate::wrapper::summary;

/// One line of `codex exec --json` output. Every field here and in the types below is optional,
/// and one of another type counts as missing (`DefaultOnError`).
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "item.started")]
    ItemStarted { item: Item },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: Option<TurnUsage> },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: TurnError },
    /// A reconnect, or the error that ends a failed turn.
    #[serde(rename = "error")]
    Error { message: String },
    #[default]
    #[serde(other)]
    Other,
}

/// A unit of Codex's work, reported whole.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
    },
    CommandExecution {
        command: String,
        exit_code: Option<i64>,
        status: String,
        aggregated_output: String,
    },
    FileChange {
        #[serde_with(skip_apply)]
        #[serde_as(as = "DefaultOnError<Vec<DefaultOnError>>")]
        #[serde(default)]
        changes: Vec<FileChange>,
        status: String,
    },
    McpToolCall {
        server: String,
        tool: String,
        status: String,
    },
    WebSearch {
        query: String,
    },
    TodoList {
        #[serde_with(skip_apply)]
        #[serde_as(as = "DefaultOnError<Vec<DefaultOnError>>")]
        #[serde(default)]
        items: Vec<Todo>,
    },
    /// A non-fatal notice.
    Error {
        message: String,
    },
    /// A kind this wrapper does not know, or no kind at all.
    #[serde(untagged)]
    Unknown {
        #[serde(rename = "type")]
        kind: Option<String>,
    },
}

impl Default for Item {
    fn default() -> Self {
        Self::Unknown { kind: None }
    }
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct FileChange {
    kind: String,
    path: String,
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct Todo {
    text: String,
    completed: bool,
}

#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct TurnError {
    message: String,
}

/// One turn's tokens; `input_tokens` includes the cached ones.
#[serde_with::apply(_ => #[serde_as(as = "DefaultOnError")] #[serde(default)])]
#[serde_with::serde_as]
#[derive(Debug, Default, Deserialize)]
pub struct TurnUsage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    reasoning_output_tokens: Option<u64>,
}

/// What codex-lean's events told so far.
#[derive(Debug, Default)]
pub struct ExecEvents {
    /// The last `error` event shown, so a failed turn repeating it is not shown again.
    last_error: Option<String>,
    failed_turn: Option<String>,
    /// What completed turns reported, summed; `None` before the first. Codex reports no cost,
    /// and a killed Codex nothing for the turn it was in.
    usage: Option<TokenCounts>,
}

/// How a turn failed; `shown` when its message was already shown as an `error` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnFailure {
    pub message: String,
    pub shown: bool,
}

impl EventReader for ExecEvents {
    const PREFIX: &'static str = PREFIX;
    type Event = Event;

    fn event(&mut self, event: Event, shown: &mut Shown, out: &mut Vec<u8>) {
        match event {
            Event::ItemStarted { item } => item_started(item, shown, out),
            Event::ItemCompleted { item } => item_completed(item, shown, out),
            Event::TurnStarted => shown.status("generating"),
            Event::TurnCompleted { usage } => {
                if let Some(usage) = usage {
                    self.turn_completed(&usage, shown);
                }
            }
            Event::Error { message } => {
                let note = format!("error: {message}");
                shown.note(&note, out);
                shown.status(&summary::one_line(&note));
                self.last_error = Some(message);
            }
            Event::TurnFailed { error } => {
                let message = error.message;
                if self.last_error.as_ref() != Some(&message) {
                    shown.note(&format!("error: {message}"), out);
                    self.last_error = Some(message.clone());
                }
                self.failed_turn = Some(message);
            }
            Event::Other => {}
        }
    }
}

impl ExecEvents {
    /// The totals of the completed turns as the final report (`final: true`), once the
    /// launcher has exited by itself; `None` when no turn completed.
    pub fn final_usage(&self) -> Option<UsageReport> {
        self.usage.clone().map(|totals| UsageReport {
            totals,
            is_final: true,
            ..UsageReport::default()
        })
    }

    pub fn turn_failure(&self) -> Option<TurnFailure> {
        self.failed_turn.as_ref().map(|message| TurnFailure {
            message: message.clone(),
            shown: self.last_error.as_ref() == Some(message),
        })
    }

    /// Adds a turn's tokens to the totals and reports them as a running report.
    fn turn_completed(&mut self, usage: &TurnUsage, shown: &mut Shown) {
        let turn = TokenCounts {
            input_tokens: usage.input_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_output_tokens,
            cost_usd: None,
        };
        let totals = self.usage.take().unwrap_or_default().plus(&turn);
        shown.notify(Notice::Usage(UsageReport {
            totals: totals.clone(),
            ..UsageReport::default()
        }));
        self.usage = Some(totals);
    }
}

/// A command or tool call starts: one line, and the status.
fn item_started(item: Item, shown: &mut Shown, out: &mut Vec<u8>) {
    let note = match item {
        Item::CommandExecution { command, .. } => format!("exec: {}", summary::one_line(&command)),
        Item::McpToolCall { server, tool, .. } => format!("tool: {server}.{tool}"),
        Item::WebSearch { query } => format!("web search: {}", summary::one_line(&query)),
        // Shown once complete.
        Item::AgentMessage { .. }
        | Item::Reasoning { .. }
        | Item::FileChange { .. }
        | Item::TodoList { .. }
        | Item::Error { .. }
        | Item::Unknown { .. } => return,
    };
    shown.note(&note, out);
    shown.status(&note);
}

fn item_completed(item: Item, shown: &mut Shown, out: &mut Vec<u8>) {
    match item {
        Item::AgentMessage { text } => {
            show_text("", &text, shown, out);
            shown.status(&summary::one_line(&format!("message: {text}")));
        }
        Item::Reasoning { text } => {
            show_text("reasoning: ", &text, shown, out);
            shown.status(&summary::one_line(&format!("reasoning: {text}")));
        }
        Item::CommandExecution {
            exit_code,
            status,
            aggregated_output,
            ..
        } => {
            let details = match exit_code {
                Some(code) => format!("exit {code}"),
                None => status,
            };
            let note = summary::output("exec result", &[&details], &aggregated_output);
            shown.note(&note, out);
            shown.status("generating");
        }
        Item::FileChange { changes, status } => {
            let changes = changes
                .iter()
                .map(|change| format!("{} {}", change.kind, change.path))
                .collect::<Vec<_>>()
                .join(", ");
            let note = format!("files ({status}): {changes}");
            shown.note(&summary::one_line(&note), out);
            shown.status(&summary::one_line(&format!("files: {changes}")));
        }
        Item::McpToolCall {
            server,
            tool,
            status,
        } => {
            shown.note(&format!("tool result ({status}): {server}.{tool}"), out);
            shown.status("generating");
        }
        Item::TodoList { items } => {
            let done = items.iter().filter(|todo| todo.completed).count();
            let next = items
                .iter()
                .find(|todo| !todo.completed)
                .map(|todo| format!("; next: {}", todo.text))
                .unwrap_or_default();
            let note = format!("plan: {done} of {} done{next}", items.len());
            shown.note(&summary::one_line(&note), out);
        }
        Item::Error { message } => shown.note(&format!("warning: {message}"), out),
        // Shown when it started.
        Item::WebSearch { .. } => {}
        Item::Unknown { kind } => {
            let kind = kind.as_deref().unwrap_or("unknown");
            shown.note(&format!("item: {kind}"), out);
        }
    }
}

/// Shows a whole item's text through the live filter, `label` on its first line.
fn show_text(label: &str, text: &str, shown: &mut Shown, out: &mut Vec<u8>) {
    if text.trim().is_empty() {
        return;
    }
    shown.text(label, out);
    shown.text(text, out);
    shown.end_line(out);
}

#[cfg(test)]
mod tests;
