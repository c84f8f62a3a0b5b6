//! `check --prompt [--phase ID]`: the prompt the next attempt (or the named phase's, as if it
//! ran next) would receive, byte for byte, launch-time values as `<placeholders>`; it
//! validates what `run` validates, except that a missing agent program is a note (the prompt
//! does not depend on it), and writes nothing (docs/cli.md, "`check --prompt`").

use std::io::Write;

use super::args::CheckArgs;
use crate::domain::exit_code::ExitCode;
use crate::domain::prompt::RetryNote;
use crate::domain::prompt::preview::{PreviewRequest, preview_prompt};
use crate::domain::selection::{FirstSelection, RecoveryFlags, Refusal, way_forward};
use crate::domain::state::{SnapshotRef, StateError};
use crate::domain::timestamp::Timestamp;
use crate::invocation::{
    InputError, RunOverrides, abandoned_retry_allowed, execution_workspace_of, locate, read_state,
    verification_failure_of,
};
use crate::report::{Output, prefixed};

/// The prompt (empty when no attempt would run) and what the reader should know about it.
struct Preview {
    prompt: String,
    notes: Vec<String>,
}

/// Why there is no prompt to show: what `run` would refuse, in the same words. `Refused`: the
/// state admits no run, not even with the recovery flags; `Preparation`: the preparation
/// `run` would write does not apply to the state (applied to a copy here).
#[derive(Debug, thiserror::Error)]
enum PreviewError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{0}")]
    Refused(Refusal),
    #[error("{path}: {error}")]
    Preparation { path: String, error: StateError },
}

pub(super) fn run(args: &CheckArgs) -> ExitCode {
    match preview(args) {
        Ok(preview) => {
            let mut out = std::io::stdout().lock();
            let written = out
                .write_all(preview.prompt.as_bytes())
                .and_then(|()| out.flush());
            drop(out);
            Output::stderr(prefixed("note", &preview.notes)).print();
            match written {
                Ok(()) => ExitCode::Success,
                Err(error) => {
                    Output::error(format!("cannot write the prompt: {error}")).print();
                    ExitCode::InvalidInput
                }
            }
        }
        Err(error) => {
            Output::error(error.to_string()).print();
            ExitCode::InvalidInput
        }
    }
}

fn preview(args: &CheckArgs) -> Result<Preview, PreviewError> {
    let location = locate(args.plan.path())?;
    let overrides = RunOverrides {
        agent_cmd: args.agent_cmd.clone(),
        retries: args.retries,
        wait: args.wait,
        ..RunOverrides::default()
    };
    let (settings, snapshot, missing) =
        super::run::inputs_and_missing_programs(&location, &overrides)?;
    if let Some(problem) = missing.interpreters.into_iter().next() {
        return Err(problem.into());
    }
    let mut notes: Vec<String> = missing
        .agents
        .into_iter()
        .map(|problem| format!("{problem}; run refuses until it is found"))
        .collect();
    let state = read_state(&location.layout)?;

    let schedule_fits = state.retry_schedule.as_ref().is_some_and(|schedule| {
        schedule
            .fits(
                &settings.retry,
                &settings.rate_limit,
                settings.templates.len(),
            )
            .is_ok()
    });
    let now = Timestamp::from_datetime(chrono::Utc::now());
    let (flags, admission) = way_forward(&state, &snapshot.facts(), schedule_fits, now)
        .map_err(PreviewError::Refused)?;
    let (next, resolve_abandoned, resumed) = match &admission.first {
        FirstSelection::RetryAbandoned(attempt) => {
            abandoned_retry_allowed(&location, &snapshot, attempt)?;
            (Some(attempt.phase.id.as_str()), true, None)
        }
        FirstSelection::RetryStopped { phase_id } | FirstSelection::Next { phase_id } => {
            (Some(phase_id.as_str()), false, None)
        }
        FirstSelection::ResumeSchedule(schedule) => {
            notes.push(format!(
                "run resumes the retry scheduled for {}: attempt {}, not before {} ({})",
                schedule.phase_id,
                schedule.attempt,
                schedule.not_before,
                schedule.reason.describe()
            ));
            (Some(schedule.phase_id.as_str()), false, Some(schedule))
        }
        FirstSelection::AllComplete => (None, false, None),
    };
    if let Some(needed) = flags_note(flags) {
        notes.push(needed);
    }
    let phase_id = match (&args.phase, next) {
        (Some(named), _) => {
            let Some(phase) = snapshot.plan.phase(named) else {
                return Err(InputError::UnknownPhase {
                    phase_id: named.clone(),
                    known: snapshot.plan.phases.iter().map(|p| p.id.clone()).collect(),
                }
                .into());
            };
            if state.completed_phase_ids.contains(&phase.id) {
                return Err(InputError::PhaseComplete(phase.id.clone()).into());
            }
            if next != Some(named.as_str()) {
                notes.push(format!(
                    "{named} is not the next phase ({}); this is the prompt it would receive if it ran next",
                    next.unwrap_or("none")
                ));
            }
            named.as_str()
        }
        (None, Some(next)) => next,
        (None, None) => {
            notes.push("every phase is complete; no attempt would run".to_owned());
            return Ok(Preview {
                prompt: String::new(),
                notes,
            });
        }
    };
    let phase = snapshot
        .plan
        .phase(phase_id)
        .ok_or_else(|| InputError::PhaseMissing(phase_id.to_owned()))?;
    let execution_workspace = execution_workspace_of(&location, phase)?;
    // A resumed schedule's retry section belongs to the phase it resumes.
    let retry = resumed
        .filter(|schedule| schedule.phase_id == phase.id)
        .map(|schedule| {
            RetryNote::resuming(
                schedule,
                settings.retry.max_attempts,
                state.last_run.as_ref(),
            )
        });
    // What a failed check said goes into the prompt of the phase's next attempt.
    let verification_failure = state
        .last_run
        .as_ref()
        .filter(|last_run| last_run.phase_id == phase.id)
        .and_then(verification_failure_of);
    let prompt = preview_prompt(
        &PreviewRequest {
            layout: &location.layout,
            plan_workspace_path: &location.workspace,
            snapshot: SnapshotRef {
                path: snapshot.path.clone(),
                sha256: snapshot.sha256.clone(),
            },
            preamble: &snapshot.plan.preamble,
            phase,
            execution_workspace: &execution_workspace,
            state: &state,
            accept: admission.accept.clone(),
            resolve_abandoned,
            retry: retry.as_ref(),
            verification_failure: verification_failure.as_ref(),
        },
        uuid::Uuid::new_v4(),
    )
    .map_err(|error| PreviewError::Preparation {
        path: location.layout.state_path(),
        error,
    })?;
    Ok(Preview { prompt, notes })
}

/// `run needs --retry-stopped --accept-plan-change for this attempt`, when it does.
fn flags_note(flags: RecoveryFlags) -> Option<String> {
    let needed: Vec<&str> = [
        (flags.retry_stopped, "--retry-stopped"),
        (flags.accept_plan_change, "--accept-plan-change"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    (!needed.is_empty()).then(|| format!("run needs {} for this attempt", needed.join(" ")))
}
