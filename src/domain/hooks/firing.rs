//! When a hook fires and what it is told (docs/cli.md, "Notifications"): [`HookTrigger`]
//! maps each run event to a hook event, if any; [`end_events`] maps how the run ended to
//! `phase-stopped`, `interrupted` and `run-finished`.

use serde_json::{Map, Value, json};

use super::{HookEvent, LONG_WAIT_SECONDS};
use crate::domain::events::RunEvent;
use crate::domain::recovery::NextStep;
use crate::domain::retry::next_step::StepKind;
use crate::domain::run_env::RunFacts;
use crate::domain::state::AttemptStatus;
use crate::domain::template::shell_join;

/// Everything one firing of a hook event tells the hook (docs/cli.md, "What a hook gets").
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HookFacts {
    pub event: HookEvent,
    /// The matching `events.jsonl` record, as a JSON object.
    pub record: Value,
    /// Id and title.
    pub phase: Option<(String, String)>,
    pub status: Option<String>,
    pub exit_code: Option<i32>,
    pub message: Option<String>,
    pub question: Option<String>,
    pub reason: Option<String>,
    /// The step that continues the run (the run's `next:` line, `run --json`'s `next`).
    pub next: Option<NextStep>,
}

impl HookFacts {
    /// The rest is filled in by the caller.
    pub(crate) fn new(event: HookEvent, record: Value) -> Self {
        Self {
            event,
            record,
            phase: None,
            status: None,
            exit_code: None,
            message: None,
            question: None,
            reason: None,
            next: None,
        }
    }

    /// The object on the hook's stdin and in `{event_file}`: the record's keys first, then the
    /// hook's own (`event` is the hook event's name).
    pub(crate) fn payload(&self, plan_path: &str, state_path: &str) -> Value {
        let mut object = match &self.record {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        let phase = self
            .phase
            .as_ref()
            .map(|(id, title)| json!({"id": id, "title": title}));
        let own = [
            ("event", json!(self.event.as_str())),
            ("plan_path", json!(plan_path)),
            ("state_path", json!(state_path)),
            ("phase", phase.unwrap_or(Value::Null)),
            ("status", json!(self.status)),
            ("exit_code", json!(self.exit_code)),
            ("message", json!(self.message)),
            ("question", json!(self.question)),
            ("reason", json!(self.reason)),
            ("recovery", json!(self.recovery())),
            ("next", json!(self.next)),
        ];
        for (key, value) in own {
            object.insert(key.to_owned(), value);
        }
        Value::Object(object)
    }

    /// `AISH_EVENT`, `AISH_STATUS`, `AISH_EXIT_CODE`, then what a worker is told too (`run`,
    /// with this firing's phase): what is absent is the empty string, so a hook can always
    /// expand them.
    pub(crate) fn environment(&self, run: RunFacts<'_>) -> Vec<(String, String)> {
        let next = self.next.as_ref();
        let mut environment: Vec<(String, String)> = [
            (super::HOOK_MARKER, self.event.as_str().to_owned()),
            ("AISH_STATUS", self.status.clone().unwrap_or_default()),
            (
                "AISH_EXIT_CODE",
                self.exit_code
                    .map(|code| code.to_string())
                    .unwrap_or_default(),
            ),
            (
                "AISH_NEXT_ACTION",
                next.map(|next| next.action.as_str().to_owned())
                    .unwrap_or_default(),
            ),
            ("AISH_NEXT_COMMAND", self.recovery().unwrap_or_default()),
            (
                "AISH_NEXT_WHY",
                next.and_then(|next| next.why.clone()).unwrap_or_default(),
            ),
            (
                "AISH_NEXT_UNTIL",
                next.and_then(|next| next.until.clone()).unwrap_or_default(),
            ),
            (
                "AISH_NEXT_ANSWER",
                next.and_then(|next| next.answer.as_deref())
                    .map(shell_join)
                    .unwrap_or_default(),
            ),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        let phase_title = self.phase.as_ref().map_or("", |(_, title)| title.as_str());
        environment.extend(
            RunFacts {
                phase_id: self.phase_id(),
                phase_title,
                ..run
            }
            .environment(),
        );
        environment
    }

    /// `recovery`: the next step as one command line, `cd <dir> && <command>`.
    fn recovery(&self) -> Option<String> {
        self.next.as_ref().map(NextStep::run_from)
    }

    pub(crate) fn phase_id(&self) -> &str {
        self.phase.as_ref().map_or("", |(id, _)| id.as_str())
    }
}

/// Follows a run's events and says which hook event each one is, if any.
#[derive(Debug, Default)]
pub(crate) struct HookTrigger {
    /// The long wait in progress: its phase and the status that led to it.
    long_wait: Option<(String, AttemptStatus)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Trigger {
    pub event: HookEvent,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub message: String,
}

impl HookTrigger {
    pub(crate) fn observe(&mut self, event: &RunEvent) -> Option<Trigger> {
        match event {
            RunEvent::OutcomeCommitted {
                phase_id,
                status,
                summary,
                ..
            } => status.committed_hook().map(|event| Trigger {
                event,
                phase_id: phase_id.clone(),
                status: *status,
                message: summary.clone(),
            }),
            RunEvent::RetryScheduled {
                schedule,
                delay_seconds,
                of,
                ..
            } if schedule.reason.kind() != StepKind::Switch
                && *delay_seconds > LONG_WAIT_SECONDS =>
            {
                self.long_wait = Some((schedule.phase_id.clone(), schedule.after));
                Some(Trigger {
                    event: HookEvent::WaitStarted,
                    phase_id: schedule.phase_id.clone(),
                    status: schedule.after,
                    message: format!(
                        "{} (attempt {} of {of}) waits {} s after {} ({})",
                        schedule.phase_id,
                        schedule.attempt,
                        delay_seconds.ceil(),
                        schedule.after,
                        schedule.reason.describe()
                    ),
                })
            }
            RunEvent::RetryDue { phase_id, attempt } => {
                let (waited_phase, status) = self.long_wait.take()?;
                (waited_phase == *phase_id).then(|| Trigger {
                    event: HookEvent::WaitFinished,
                    phase_id: phase_id.clone(),
                    status,
                    message: format!("the wait is over: {phase_id} runs again (attempt {attempt})"),
                })
            }
            _ => None,
        }
    }
}

/// How a run ended, as far as the end events are concerned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunEndFacts {
    /// The status of the attempt that ended the run (committed, or decided but not recorded).
    pub status: Option<AttemptStatus>,
    /// The same write scheduled that phase's next attempt: a later run resumes it.
    pub retry_scheduled: bool,
    /// An attempt's outcome could not be recorded (or its prepared record not written): it
    /// needs a person whatever the worker reported.
    pub unresolved: bool,
    /// The caught signal the run ended on.
    pub signal: Option<i32>,
}

/// The hook events of a run's end, in firing order (`run-finished` always).
pub(crate) fn end_events(facts: &RunEndFacts) -> Vec<HookEvent> {
    let stopped_for_a_person = facts.unresolved
        || facts
            .status
            .is_some_and(|status| status.waits_for_a_person() && !facts.retry_scheduled);
    let interrupted = facts.signal.is_some() || facts.status == Some(AttemptStatus::Interrupted);
    let mut events = Vec::with_capacity(3);
    if stopped_for_a_person {
        events.push(HookEvent::PhaseStopped);
    }
    if interrupted {
        events.push(HookEvent::Interrupted);
    }
    events.push(HookEvent::RunFinished);
    events
}
