//! The terminal status of an attempt (docs/state-and-recovery.md) and everything that follows
//! from it. Each property is one exhaustive `match` (or derives from one), so a new status is a
//! compiler-guided change.

use serde::{Deserialize, Serialize};

use super::exit_code::ExitCode;
use super::hooks::event::HookEvent;

/// As written to outcomes, `committed_outcomes`, `last_run` and `stop.reason`.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AttemptStatus {
    PhaseComplete,
    Blocked,
    NeedsClarification,
    AgentFailed,
    LaunchFailed,
    MissingMarker,
    InvalidMarker,
    MultipleMarkers,
    Timeout,
    StopRegex,
    Interrupted,
    ExecutionIoFailed,
    /// A rate-limit pattern matched or the agent exited 75.
    RateLimited,
    /// The agent reported `phase-complete`, but a Verify check failed.
    VerificationFailed,
    BudgetExceeded,
}

impl AttemptStatus {
    /// Its name in records and reports: `needs-clarification`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// How a run it stopped ends; the exit code, the result tag and the hooks follow from it.
    fn result_kind(self) -> RunResult {
        match self {
            Self::PhaseComplete => RunResult::Complete,
            Self::Blocked => RunResult::Blocked,
            Self::NeedsClarification => RunResult::NeedsClarification,
            Self::Interrupted => RunResult::Interrupted,
            Self::AgentFailed
            | Self::LaunchFailed
            | Self::MissingMarker
            | Self::InvalidMarker
            | Self::MultipleMarkers
            | Self::Timeout
            | Self::StopRegex
            | Self::ExecutionIoFailed
            | Self::RateLimited
            | Self::VerificationFailed
            | Self::BudgetExceeded => RunResult::Failed,
        }
    }

    /// `result` in `run --json` for a run it stopped (docs/run-result.schema.json).
    pub(crate) fn run_result(self) -> &'static str {
        self.result_kind().into()
    }

    /// The handler exit code it leads to (`last_run.exit_code`).
    pub(crate) fn exit_code(self) -> ExitCode {
        match self.result_kind() {
            RunResult::Complete => ExitCode::Success,
            RunResult::Blocked => ExitCode::Blocked,
            RunResult::NeedsClarification => ExitCode::NeedsClarification,
            RunResult::Interrupted | RunResult::Failed => ExitCode::AgentFailed,
        }
    }

    /// The result tag the worker reported it with, for the statuses a worker reports:
    /// `phase-blocked`.
    pub(crate) fn result_tag(self) -> Option<&'static str> {
        match self.result_kind() {
            RunResult::Complete => Some("phase-complete"),
            RunResult::Blocked => Some("phase-blocked"),
            RunResult::NeedsClarification => Some("phase-needs-clarification"),
            RunResult::Interrupted | RunResult::Failed => None,
        }
    }

    /// Whether `retry.on` may name it (docs/unattended-runs.md): not a completion, a wait for a
    /// person, the user's own stop, nor a failure a retry cannot change (a command that cannot
    /// start, the handler's own storage, a budget the whole invocation spent).
    pub(crate) fn is_retryable(self) -> bool {
        match self {
            Self::AgentFailed
            | Self::MissingMarker
            | Self::InvalidMarker
            | Self::MultipleMarkers
            | Self::Timeout
            | Self::StopRegex
            | Self::RateLimited
            | Self::VerificationFailed => true,
            Self::PhaseComplete
            | Self::Blocked
            | Self::NeedsClarification
            | Self::Interrupted
            | Self::LaunchFailed
            | Self::ExecutionIoFailed
            | Self::BudgetExceeded => false,
        }
    }

    /// Whether `retry.on` names it when the config does not say: every retryable status
    /// but `stop-regex`, which is the user asking for a stop.
    pub(crate) fn is_retried_by_default(self) -> bool {
        self.is_retryable() && self != Self::StopRegex
    }

    /// The hook event its commit fires, if any (a stop fires `phase-stopped` when the run
    /// ends: [`AttemptStatus::waits_for_a_person`]).
    pub(crate) fn committed_hook(self) -> Option<HookEvent> {
        match self.result_kind() {
            RunResult::Complete => Some(HookEvent::PhaseComplete),
            RunResult::Blocked
            | RunResult::NeedsClarification
            | RunResult::Interrupted
            | RunResult::Failed => None,
        }
    }

    /// Whether a run that stopped with it (and scheduled no retry) waits for a person: the
    /// `phase-stopped` hook. Not after a completion, nor after the user's own interrupt.
    pub(crate) fn waits_for_a_person(self) -> bool {
        match self.result_kind() {
            RunResult::Complete | RunResult::Interrupted => false,
            RunResult::Blocked | RunResult::NeedsClarification | RunResult::Failed => true,
        }
    }

    /// The stop is a question or a blocker a person answers (`answer` writes the answer into
    /// the plan, docs/cli.md).
    pub(crate) fn is_answerable(self) -> bool {
        match self.result_kind() {
            RunResult::Blocked | RunResult::NeedsClarification => true,
            RunResult::Complete | RunResult::Interrupted | RunResult::Failed => false,
        }
    }

    /// What a person does before running a phase stopped with it again (the `next:` line's
    /// advice), and whether that may edit the plan, so the next run accepts a plan change.
    pub(crate) fn recovery(self) -> Option<(&'static str, bool)> {
        match self {
            Self::PhaseComplete => None,
            Self::Blocked => Some(("resolve the blocker", false)),
            Self::NeedsClarification => Some(("answer in the plan or the repository", true)),
            Self::Interrupted => Some(("inspect the partial changes", false)),
            Self::VerificationFailed => Some((
                "inspect the failed check's output (the next attempt is shown it too)",
                false,
            )),
            Self::BudgetExceeded => Some(("raise the budget cap the phase ran out of", false)),
            Self::AgentFailed
            | Self::LaunchFailed
            | Self::MissingMarker
            | Self::InvalidMarker
            | Self::MultipleMarkers
            | Self::Timeout
            | Self::StopRegex
            | Self::ExecutionIoFailed
            | Self::RateLimited => Some(("inspect the transcript and fix the cause", false)),
        }
    }
}

/// How a run that an attempt stopped ends, as `run --json` names it.
#[derive(Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
enum RunResult {
    Complete,
    Blocked,
    NeedsClarification,
    Interrupted,
    Failed,
}

#[cfg(test)]
mod tests {
    use strum::IntoEnumIterator;

    use super::*;

    #[test]
    fn names_are_the_recorded_ones() {
        assert_eq!(
            AttemptStatus::NeedsClarification.as_str(),
            "needs-clarification"
        );
        assert_eq!(
            AttemptStatus::ExecutionIoFailed.to_string(),
            "execution-io-failed"
        );
        for status in AttemptStatus::iter() {
            assert_eq!(status.as_str().parse(), Ok(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        assert!("io-error".parse::<AttemptStatus>().is_err());
    }

    #[test]
    fn every_failure_status_is_exit_four() {
        for status in AttemptStatus::iter() {
            let expected = match status {
                AttemptStatus::PhaseComplete => 0,
                AttemptStatus::Blocked => 2,
                AttemptStatus::NeedsClarification => 3,
                _ => 4,
            };
            assert_eq!(status.exit_code().code(), expected, "{status}");
        }
    }

    #[test]
    fn the_default_retry_statuses_are_retryable() {
        for status in AttemptStatus::iter() {
            assert!(
                !status.is_retried_by_default() || status.is_retryable(),
                "{status}"
            );
        }
    }
}
