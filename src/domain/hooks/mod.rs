//! Hooks (issue 21; docs/cli.md, "Notifications"): the user's commands run at the moments of a
//! run that matter to a person — it finished, a phase stopped for them, a phase completed, a
//! long wait started or ended, the run was interrupted.
//!
//! This module owns what a hook *is*: the event names, the `hooks` config key and the
//! `--hook EVENT=COMMAND` flag (strict, with messages naming the key or flag), and the hook
//! command template — split like `agent_cmd` by the shared [`crate::domain::template`]
//! machinery, with its own placeholders. When a hook fires and what it is told is
//! [`firing`]; running it is the command layer's (`cli::hooks`).

pub(crate) mod event;
pub(crate) mod firing;

use serde_json::Value;

pub(crate) use event::{HookEvent, UnknownHookEvent};

use super::config::section::{ConfigError, Expected, Reason, reject_unknown_keys};
use super::seconds::format_seconds;
use super::template::{PlaceholderSet, Template, TemplateError};

/// Waits and backoffs at most this long fire no `wait-started`/`wait-finished`: a person need
/// not hear about a pause they would not have noticed.
pub(crate) const LONG_WAIT_SECONDS: f64 = 60.0;

/// A hook's time limit when its config entry (or `--hook`) gives none.
pub(crate) const DEFAULT_HOOK_TIMEOUT_SECONDS: f64 = 30.0;

/// The names a hook command may use between braces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookPlaceholder {
    /// The canonical plan path.
    Plan,
    RunId,
    /// The phase the event is about; empty when none.
    PhaseId,
    /// The status the event carries; empty when none.
    Status,
    /// The private temporary file holding the event object.
    EventFile,
}

impl PlaceholderSet for HookPlaceholder {
    const NAMES: &'static [&'static str] = &["plan", "run_id", "phase_id", "status", "event_file"];
    const EMPTY_COMMAND: &'static str = "hook command produced an empty command";

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "plan" => Some(Self::Plan),
            "run_id" => Some(Self::RunId),
            "phase_id" => Some(Self::PhaseId),
            "status" => Some(Self::Status),
            "event_file" => Some(Self::EventFile),
            _ => None,
        }
    }
}

/// A validated hook command.
pub(crate) type HookTemplate = Template<HookPlaceholder>;

/// The values substituted into a hook command.
#[derive(Clone, Debug)]
pub struct HookValues<'a> {
    pub plan: &'a str,
    pub run_id: &'a str,
    pub phase_id: &'a str,
    pub status: &'a str,
    pub event_file: &'a str,
}

impl HookTemplate {
    /// The argv with placeholders substituted; substituted values never split or requote.
    pub fn render(&self, values: &HookValues<'_>) -> Vec<String> {
        self.render_with(|placeholder| match placeholder {
            HookPlaceholder::Plan => values.plan,
            HookPlaceholder::RunId => values.run_id,
            HookPlaceholder::PhaseId => values.phase_id,
            HookPlaceholder::Status => values.status,
            HookPlaceholder::EventFile => values.event_file,
        })
    }
}

/// One configured hook.
#[derive(Clone, Debug, PartialEq)]
pub struct Hook {
    /// The events it runs at, each once, in the order given.
    pub on: Vec<HookEvent>,
    pub command: HookTemplate,
    /// Finite, greater than 0.
    pub timeout_seconds: f64,
    /// Where it was declared, for messages: `hooks[2]` or `--hook`.
    pub origin: String,
}

impl Hook {
    /// Whether it runs at `event`.
    pub fn runs_on(&self, event: HookEvent) -> bool {
        self.on.contains(&event)
    }

    /// `run-finished, phase-stopped: notify-send … (timeout 30 s)`, for `check`.
    pub fn describe(&self) -> String {
        let events: Vec<&str> = self.on.iter().map(|event| event.as_str()).collect();
        format!(
            "{}: {} (timeout {} s)",
            events.join(", "),
            self.command.raw(),
            format_seconds(self.timeout_seconds)
        )
    }
}

/// The keys of one `hooks` entry, in validation order.
const HOOK_KEYS: [&str; 3] = ["on", "command", "timeout_seconds"];

/// Reads the `hooks` config key: a list of `{on, command, timeout_seconds}` objects. Absent or
/// `null` is no hooks. Every message names the entry (`hooks[1].on[0]`).
pub(crate) fn hooks_from_config(value: Option<&Value>) -> Result<Vec<Hook>, ConfigError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ConfigError::wrong("hooks", Expected::List)),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| hook_entry(&format!("hooks[{index}]"), item))
        .collect()
}

fn hook_entry(name: &str, item: &Value) -> Result<Hook, ConfigError> {
    let Value::Object(map) = item else {
        return Err(ConfigError::wrong(name, Expected::Object));
    };
    // Like the top level: the alphabetically first unknown key is named, with the known ones.
    reject_unknown_keys(map, &format!("{name}."), &HOOK_KEYS)?;
    let on = match map.get("on") {
        None => {
            return Err(ConfigError::MissingKey {
                key: format!("{name}.on"),
            });
        }
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(_) => {
            return Err(ConfigError::wrong(
                format!("{name}.on"),
                Expected::NonEmptyListOf {
                    items: "events",
                    known: &HookEvent::NAMES,
                },
            ));
        }
    };
    let mut events = Vec::with_capacity(on.len());
    for (index, event) in on.iter().enumerate() {
        let key = || format!("{name}.on[{index}]");
        let Value::String(text) = event else {
            return Err(ConfigError::wrong(key(), Expected::String));
        };
        let event = HookEvent::parse(text).map_err(|error| ConfigError::Invalid {
            key: key(),
            reason: Reason::UnknownEvent(error),
        })?;
        if !events.contains(&event) {
            events.push(event);
        }
    }
    let command = match map.get("command") {
        None => {
            return Err(ConfigError::MissingKey {
                key: format!("{name}.command"),
            });
        }
        Some(Value::String(raw)) => {
            HookTemplate::parse(raw).map_err(|error| ConfigError::Invalid {
                key: format!("{name}.command"),
                reason: Reason::Template(error),
            })?
        }
        Some(_) => {
            return Err(ConfigError::wrong(
                format!("{name}.command"),
                Expected::String,
            ));
        }
    };
    let timeout_seconds = match map.get("timeout_seconds") {
        None => DEFAULT_HOOK_TIMEOUT_SECONDS,
        Some(Value::Number(number)) => match number.as_f64() {
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => seconds,
            _ => return Err(timeout_error(name)),
        },
        Some(_) => return Err(timeout_error(name)),
    };
    Ok(Hook {
        on: events,
        command,
        timeout_seconds,
        origin: name.to_owned(),
    })
}

fn timeout_error(name: &str) -> ConfigError {
    ConfigError::wrong(format!("{name}.timeout_seconds"), Expected::FiniteAboveZero)
}

/// Parses a `--hook EVENT=COMMAND` value (a clap value parser): one event, then the command
/// template, which keeps every later `=`. The time limit is the default.
pub(crate) fn parse_hook_flag(text: &str) -> Result<Hook, InvalidHookFlag> {
    let Some((event, command)) = text.split_once('=') else {
        return Err(InvalidHookFlag::NotEventEqualsCommand {
            text: text.to_owned(),
        });
    };
    let event = HookEvent::parse(event.trim())?;
    let command =
        HookTemplate::parse(command).map_err(|error| InvalidHookFlag::Command { event, error })?;
    Ok(Hook {
        on: vec![event],
        command,
        timeout_seconds: DEFAULT_HOOK_TIMEOUT_SECONDS,
        origin: "--hook".to_owned(),
    })
}

/// A `--hook` value that is not `EVENT=COMMAND` with a known event and a valid command.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidHookFlag {
    #[error(
        "expected EVENT=COMMAND (events: {}), got '{text}'",
        HookEvent::NAMES.join(", ")
    )]
    NotEventEqualsCommand { text: String },
    #[error(transparent)]
    Event(#[from] UnknownHookEvent),
    #[error("hook command for {event}: {error}")]
    Command {
        event: HookEvent,
        error: TemplateError,
    },
}

#[cfg(test)]
mod tests;
