//! What a hook is (docs/cli.md, "Notifications"): the `hooks` config key and the `--hook
//! EVENT=COMMAND` flag, read strictly, and the hook command template with its placeholders.
//! When a hook fires and what it is told is [`firing`]; running it is `cli::hooks`'.

pub(crate) mod event;
pub(crate) mod firing;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Unexpected, Visitor};
use strum::VariantNames;

pub(crate) use event::{HookEvent, UnknownHookEvent};

use super::config::rules::{ConfigError, Expected, Reason, read};
use super::seconds::{format_seconds, is_valid_duration};
use super::template::{PlaceholderSet, Template, TemplateError};

/// Waits and backoffs at most this long fire no `wait-started`/`wait-finished`: a person need
/// not hear about a pause they would not have noticed.
pub(crate) const LONG_WAIT_SECONDS: f64 = 60.0;

/// The variable every hook gets ([`firing::HookFacts::environment`]): a handler that finds it
/// in its environment was started by a hook.
pub(crate) const HOOK_MARKER: &str = "AISH_EVENT";

/// Why a run's `hooks` do not run, if they do not: its handler was started by a hook
/// (`in_a_hook`), and a hook that starts a handler whose hooks start handlers would recurse
/// without bound — so a hook's handler runs none. `None` when it runs them, or has none.
pub(crate) fn hooks_off(in_a_hook: bool, hooks: usize) -> Option<String> {
    (in_a_hook && hooks > 0).then(|| {
        format!(
            "{hooks} hook(s) not run: this handler was started by a hook ({HOOK_MARKER} is set), and a hook's handler runs no hooks of its own"
        )
    })
}

/// A hook's time limit when its config entry (or `--hook`) gives none.
pub(crate) const DEFAULT_HOOK_TIMEOUT_SECONDS: f64 = 30.0;

/// The names a hook command may use between braces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumString, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum HookPlaceholder {
    Plan,
    RunId,
    PhaseId,
    Status,
    EventFile,
}

impl PlaceholderSet for HookPlaceholder {
    const EMPTY_COMMAND: &'static str = "hook command produced an empty command";
}

pub(crate) type HookTemplate = Template<HookPlaceholder>;

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

#[derive(Clone, Debug, PartialEq)]
pub struct Hook {
    /// Each once, in the order given.
    pub on: Vec<HookEvent>,
    pub command: HookTemplate,
    pub timeout_seconds: f64,
    /// Where it was declared, for messages: `hooks[2]` or `--hook`.
    pub origin: String,
}

/// One entry of the config's `hooks` list, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookEntry {
    #[serde(deserialize_with = "event_names")]
    on: Vec<String>,
    command: String,
    #[serde(default, deserialize_with = "timeout")]
    timeout_seconds: Option<f64>,
}

impl Hook {
    pub fn runs_on(&self, event: HookEvent) -> bool {
        self.on.contains(&event)
    }

    /// For `check`: `run-finished, phase-stopped: notify-send … (timeout 30 s)`.
    pub fn describe(&self) -> String {
        let events: Vec<&str> = self.on.iter().map(|event| event.as_str()).collect();
        format!(
            "{}: {} (timeout {} s)",
            events.join(", "),
            self.command.raw(),
            format_seconds(self.timeout_seconds)
        )
    }

    /// Entry `index` of the config's `hooks` list; every message names it (`hooks[1].on[0]`).
    pub(crate) fn from_config(entry: HookEntry, index: usize) -> Result<Self, ConfigError> {
        let origin = format!("hooks[{index}]");
        let mut on = Vec::with_capacity(entry.on.len());
        for (index, name) in entry.on.iter().enumerate() {
            let event = HookEvent::parse(name).map_err(|error| ConfigError::Invalid {
                key: format!("{origin}.on[{index}]"),
                reason: Reason::UnknownEvent(error),
            })?;
            if !on.contains(&event) {
                on.push(event);
            }
        }
        let command =
            HookTemplate::parse(&entry.command).map_err(|error| ConfigError::Invalid {
                key: format!("{origin}.command"),
                reason: Reason::Template(error),
            })?;
        Ok(Self {
            on,
            command,
            timeout_seconds: entry
                .timeout_seconds
                .unwrap_or(DEFAULT_HOOK_TIMEOUT_SECONDS),
            origin,
        })
    }
}

/// `on`: a non-empty list of event names (each checked by [`Hook::from_config`]).
fn event_names<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    deserializer.deserialize_any(EventNames)
}

struct EventNames;

impl<'de> Visitor<'de> for EventNames {
    type Value = Vec<String>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        let expected = Expected::NonEmptyListOf {
            items: "events",
            known: HookEvent::VARIANTS,
        };
        write!(formatter, "{expected}")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Vec<String>, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = items.next_element()? {
            names.push(name);
        }
        if names.is_empty() {
            return Err(de::Error::invalid_type(Unexpected::Seq, &self));
        }
        Ok(names)
    }
}

/// A finite number of seconds greater than 0 (`null` is not).
fn timeout<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    read(deserializer, |value| {
        value
            .as_f64()
            .filter(|seconds| is_valid_duration(*seconds))
            .map(Some)
            .ok_or(Expected::FiniteAboveZero)
    })
}

/// Parses a `--hook EVENT=COMMAND` value (a clap value parser); the command keeps every later
/// `=`.
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

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidHookFlag {
    #[error(
        "expected EVENT=COMMAND (events: {}), got '{text}'",
        HookEvent::VARIANTS.join(", ")
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
