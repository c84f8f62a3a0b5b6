//! The preparation of one attempt, run as a task beside the attempt supervisor: the prepared
//! record, the prompt, the transcript header, the notification socket, the spawn and the
//! worker's `/proc` identity. It hands back a [`Launch`] or says why nothing runs.

use std::io;
use std::path::Path;

use super::messages::AttemptSpec;
use crate::actors::state_store::{Preparation, StoreMsg};
use crate::actors::{call, off_runtime};
use crate::domain::attempt_id::attempt_id;
use crate::domain::events::RunEvent;
use crate::domain::identity::ProcessIdentity;
use crate::domain::prompt::{PromptContext, render_prompt};
use crate::domain::run_env::RunFacts;
use crate::domain::state::{ActiveAttempt, ActiveStatus, PhaseRef, SnapshotRef, StateWriteError};
use crate::domain::template::PlaceholderValues;
use crate::domain::timestamp::Timestamp;
use crate::domain::transcript::{TranscriptHeader, render_header};
use crate::platform::durable::TranscriptFile;
use crate::platform::git::{self, NotRecorded, TreeSnapshot};
use crate::platform::notify_socket::NotifySocket;
use crate::platform::proc;
use crate::platform::process_group::{self, GroupCommand, WorkerChild};
use crate::platform::{durable, program};

/// A launched worker, handed from the preparation task to the supervisor.
pub(crate) struct Launch {
    pub(crate) attempt: ActiveAttempt,
    pub(crate) phase_attempt: u32,
    pub(crate) child: WorkerChild,
    pub(crate) identity: Option<ProcessIdentity>,
    pub(crate) transcript: TranscriptFile,
    pub(crate) prompt: Vec<u8>,
    /// The socket the worker's `NOTIFY_SOCKET` names; `None` when it could not be bound
    /// (the worker then runs without one).
    pub(crate) notify_socket: Option<NotifySocket>,
    /// The work tree before the launch, when changes are recorded.
    pub(crate) changes_before: Option<Result<TreeSnapshot, NotRecorded>>,
}

/// Why the preparation task launched nothing.
pub(crate) enum SetupFailure {
    /// The prepared record was not written (or not durably: then it may be visible).
    NotPrepared {
        attempt_id: String,
        error: StateWriteError,
    },
    /// The prepared record is durable, but the prompt or the transcript header could not be
    /// created (the error names the file).
    Setup {
        attempt: ActiveAttempt,
        phase_attempt: u32,
        error: io::Error,
    },
    /// The worker could not be started; `transcript` gets the launch error.
    Launch {
        attempt: ActiveAttempt,
        phase_attempt: u32,
        transcript: TranscriptFile,
        summary: String,
    },
}

/// Prepared record → prompt → transcript header → console → spawn → identity.
pub(crate) async fn prepare(spec: AttemptSpec) -> Result<Launch, SetupFailure> {
    let started_at = Timestamp::from_datetime(chrono::Utc::now());
    let id = attempt_id(started_at, &spec.phase.id, uuid::Uuid::new_v4());
    spec.span.record("attempt_id", id.as_str());
    let layout = &spec.location.layout;
    let attempt = ActiveAttempt {
        id: id.clone(),
        status: ActiveStatus::Prepared,
        phase: PhaseRef {
            id: spec.phase.id.clone(),
            title: spec.phase.title.clone(),
        },
        snapshot: SnapshotRef {
            path: spec.snapshot.path.clone(),
            sha256: spec.snapshot.sha256.clone(),
        },
        execution_workspace: spec.execution_workspace.clone(),
        started_at,
        prompt_path: layout.prompt_path(&id),
        transcript_path: layout.transcript_path(&id),
        outcome_path: layout.outcome_path(&id),
        process: None,
    };
    let preparation = Preparation {
        attempt: attempt.clone(),
        accept: spec.order.accept.clone(),
        resolve_abandoned_at: spec.order.resolve_abandoned.then_some(started_at),
    };
    let prepared = call(&spec.store, |reply| StoreMsg::Prepare {
        preparation: Box::new(preparation),
        reply,
    })
    .await
    .unwrap_or(Err(StateWriteError::Stopped))
    .map_err(|error| SetupFailure::NotPrepared {
        attempt_id: id.clone(),
        error,
    })?;
    tracing::info!(attempt_id = %id, phase_id = %attempt.phase.id, "attempt prepared");
    let phase_attempt = prepared
        .finished_attempts_of(&attempt.phase.id)
        .saturating_add(1)
        .try_into()
        .unwrap_or(u32::MAX);
    spec.events.emit(
        Some(&id),
        RunEvent::AttemptPrepared {
            phase_id: attempt.phase.id.clone(),
            title: attempt.phase.title.clone(),
            phase_index: spec.phase_index,
            phases: spec.snapshot.plan.phases.len(),
            phase_attempt,
            attempt: spec.order.ledger.attempt,
            of: spec.settings.retry.max_attempts,
            agent_cmd: spec.settings.templates[spec.order.template_index]
                .raw()
                .to_owned(),
            prompt_path: attempt.prompt_path.clone(),
            transcript_path: attempt.transcript_path.clone(),
        },
    );

    let template = &spec.settings.templates[spec.order.template_index];
    let argv = template.render(&PlaceholderValues {
        prompt_file: &attempt.prompt_path,
        workspace: &attempt.execution_workspace,
        run_id: &id,
        transcript_file: &attempt.transcript_path,
        state_file: &layout.state_path(),
    });
    let prompt = render_prompt(&PromptContext {
        plan_workspace_path: &spec.location.workspace,
        execution_workspace_path: &attempt.execution_workspace,
        plan_path: &spec.snapshot.path,
        state_path: &layout.state_path(),
        run_id: &id,
        transcript_path: &attempt.transcript_path,
        preamble: &spec.snapshot.plan.preamble,
        phase: &spec.phase,
        state: &prepared,
        retry: spec.order.note.as_ref(),
        verification_failure: spec.order.verification_failure.as_ref(),
    });
    let header = render_header(&TranscriptHeader {
        attempt_id: &attempt.id,
        phase_id: &attempt.phase.id,
        phase_title: &attempt.phase.title,
        plan_path: &spec.snapshot.path,
        state_path: &layout.state_path(),
        plan_workspace: &spec.location.workspace,
        execution_workspace: &attempt.execution_workspace,
        started_at: attempt.started_at,
        agent_cmd: template.raw(),
        argv: &argv,
    });
    // One blocking call off the runtime for everything from the first artifact to the
    // worker's identity: every step waits on the disk, the spawn or `/proc`.
    let environment = RunFacts {
        plan: &spec.snapshot.path,
        plan_workspace: &spec.location.workspace,
        state_file: &layout.state_path(),
        run_id: spec.events.run_id(),
        attempt_id: &attempt.id,
        phase_id: &attempt.phase.id,
        phase_title: &attempt.phase.title,
        execution_workspace: &attempt.execution_workspace,
    }
    .environment();
    let record_changes = spec.settings.record_changes;
    let prompt = prompt.into_bytes();
    off_runtime(move || {
        start(
            attempt,
            phase_attempt,
            prompt,
            &header,
            &argv,
            &environment,
            record_changes,
        )
    })
    .await
    .map_err(|failure| *failure)
}

/// The start job, in order: the prompt, the transcript with its header, the notification
/// socket, the spawn, the worker's identity. Everything that can fail for lack of resources is
/// set up before the launch, so a failure never leaves a worker unsupervised. Blocking: runs
/// off the runtime (`off_runtime`, inside its context, which the spawn needs); `environment`
/// holds the `AISH_*` variables the worker gets.
fn start(
    attempt: ActiveAttempt,
    phase_attempt: u32,
    prompt: Vec<u8>,
    header: &str,
    argv: &[String],
    environment: &[(String, String)],
    record_changes: bool,
) -> Result<Launch, Box<SetupFailure>> {
    // The prompt is created exclusively, then the transcript with its header.
    let written =
        durable::write_new(Path::new(&attempt.prompt_path), &prompt, "prompt").and_then(|_| {
            let path = Path::new(&attempt.transcript_path);
            durable::write_new(path, header.as_bytes(), "transcript-header")
        });
    let transcript = match written {
        Ok(file) => TranscriptFile::new(file),
        Err(error) => {
            return Err(Box::new(SetupFailure::Setup {
                attempt,
                phase_attempt,
                error,
            }));
        }
    };
    // Bound before the spawn, so whatever the worker sends before it is read waits in the
    // socket. Without one the worker runs as before notifications existed.
    let notify_socket = NotifySocket::bind()
        .inspect_err(|error| tracing::warn!(%error, "cannot bind the notification socket; the worker runs without NOTIFY_SOCKET"))
        .ok();
    let cwd = &attempt.execution_workspace;
    // The work tree as the worker will find it, so the outcome says what the attempt
    // changed; bounded in time, and never a reason not to launch.
    let changes_before = record_changes.then(|| git::snapshot(Path::new(cwd)));
    let group = GroupCommand {
        argv,
        cwd: Path::new(cwd),
        token: &attempt.id,
        notify_socket: notify_socket.as_ref().map(NotifySocket::env_value),
        env_set: environment,
    };
    let child = match process_group::spawn_worker(&group) {
        Ok(child) => child,
        Err(error) => {
            let program = argv.first().cloned().unwrap_or_default();
            let problem = program::launch_problem(&program, cwd, &error);
            return Err(Box::new(SetupFailure::Launch {
                attempt,
                phase_attempt,
                transcript,
                summary: format!("could not launch agent command: {problem}"),
            }));
        }
    };
    let pid = child.id();
    let identity = proc::identity_of(pid)
        .inspect_err(|error| tracing::warn!(pid, %error, "process identity unavailable"))
        .ok();
    Ok(Launch {
        attempt,
        phase_attempt,
        child,
        identity,
        transcript,
        prompt,
        notify_socket,
        changes_before,
    })
}
