//! AttemptSupervisor: one per attempt. It prepares the attempt durably, launches the worker,
//! supervises the actors that own the attempt's resources, and runs cleanup in one fixed
//! order:
//!
//! ```text
//! cancel timers → stop the group (Terminate, or SweepAfterExit after a normal exit)
//!   → readers reach EOF (bounded; then our read ends are closed) → transcript trailer
//!   → marker verdict → final stop-regex check → decide → write outcome → commit state
//!   → report to the run supervisor (which prints and releases the workspace lock)
//! ```
//!
//! The lifecycle is an explicit [`Stage`]; signal deferral is a property of the stage, not a
//! flag. While preparing and launching, everything happens inside one handler, so an
//! `Interrupt` waits in the mailbox until the group exists and its pgid is recorded; from
//! then on the first trigger (timeout, idle timeout, stop regex, interrupt, output failure)
//! becomes the cause and starts `Stopping`. Triggers during cleanup are noted — an interrupt
//! decides the outcome even then, as the exit code will — but never restart or skip cleanup; a
//! second interrupt only makes the killer skip its grace period.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::deadline_timer::{DeadlineTimer, TimerArgs, TimerMsg};
use super::group_killer::{GroupKiller, KillReport, KillerArgs, KillerMsg};
use super::marker_parser::{MarkerMsg, MarkerParser};
use super::notify;
use super::pipe_reader::{PipeReader, ReaderArgs, ReaderMsg};
use super::run_supervisor::RunMsg;
use super::state_store::{CommitError, Preparation, StoreMsg};
use super::stop_scanner::{ScanArgs, ScanMsg, StopScanner};
use super::transcript_writer::{TranscriptWriter, WriterArgs, WriterMsg};
use crate::domain::attempt_id::attempt_id;
use crate::domain::decision::{ChildExit, Decision, StopCause, decide};
use crate::domain::marker::MarkerVerdict;
use crate::domain::outcome::{Artifacts, OutcomeRecord};
use crate::domain::output_stream::OutputStream;
use crate::domain::plan::Phase;
use crate::domain::prompt::{PromptContext, render_prompt};
use crate::domain::state::{
    ActiveAttempt, ActiveStatus, AttemptStatus, PhaseRef, PlanRecord, SnapshotRef, State,
};
use crate::domain::stop_regex::StopMatch;
use crate::domain::template::PlaceholderValues;
use crate::domain::timestamp::Timestamp;
use crate::domain::transcript::{Trailer, TranscriptHeader, render_header, render_trailer};
use crate::invocation::{PlanSnapshot, RunSettings};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::proc::ChildSnapshot;
use crate::platform::{durable, proc, spawn};

/// After the leader exits on its own, how long its pipes may stay open before the remaining
/// group members are killed as leaked descendants.
const LEAK_GRACE: Duration = Duration::from_millis(100);
/// Once the group is empty, how long EOF may take before our read ends are closed anyway (a
/// process that left the group can still hold a pipe).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Everything one attempt needs, fixed when the run supervisor selects the phase.
pub struct AttemptSpec {
    pub run: ActorRef<RunMsg>,
    pub store: ActorRef<StoreMsg>,
    pub location: Arc<PlanLocation>,
    pub snapshot: Arc<PlanSnapshot>,
    pub settings: Arc<RunSettings>,
    pub phase: Phase,
    pub execution_workspace: String,
    /// A plan record to accept in the prepared write.
    pub accept: Option<PlanRecord>,
    /// Resolve the abandoned attempt (as `interrupted`) in the prepared write.
    pub resolve_abandoned: bool,
    /// The handler's children before its first worker: never treated as escaped descendants.
    pub inherited_children: Arc<ChildSnapshot>,
    pub span: tracing::Span,
}

/// What the attempt supervisor tells the run supervisor when it is done.
#[derive(Clone, Debug)]
pub struct AttemptReport {
    pub phase_id: String,
    pub attempt_id: String,
    pub outcome: AttemptOutcome,
}

#[derive(Clone, Debug)]
pub enum AttemptOutcome {
    /// The outcome is durably committed; `state` is the state now on disk.
    Committed {
        decision: Decision,
        outcome_path: String,
        transcript_path: String,
        state: Box<State>,
    },
    /// The prepared record could not be written: nothing was launched, nothing changed.
    NotPrepared { message: String },
    /// A durable write after preparation failed; the last durable record (prepared or
    /// running) stays and the attempt is unresolved.
    Unresolved {
        decision: Decision,
        /// What failed, e.g. `could not record attempt outcome: …`.
        failure: String,
        attempt: Box<ActiveAttempt>,
    },
}

pub enum AttemptMsg {
    /// Prepare and launch (sent to itself on start).
    Launch,
    ChildExited(ChildExit),
    StreamEnded {
        stream: OutputStream,
        error: Option<String>,
    },
    StopMatched(StopMatch),
    DeadlineReached,
    IdleDeadlineReached,
    /// SIGINT/SIGTERM forwarded by the run supervisor.
    Interrupt(i32),
    /// The transcript or the live console could not be written.
    OutputFailed(String),
    GroupEmptied(KillReport),
    LeakGraceElapsed,
    DrainLimitElapsed,
}

/// Where the attempt is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Recording the prepared attempt and launching; messages wait in the mailbox.
    Preparing,
    /// The worker runs; the first trigger decides the cause.
    Running,
    /// The leader exited on its own; waiting (leak grace) for the pipes, then sweeping.
    Sweeping,
    /// A trigger fired; the killer is stopping the group.
    Stopping,
    /// The group is empty; waiting for EOF on both pipes and the leader's exit status.
    Draining,
    /// Writing the trailer, deciding, committing.
    Recording,
    Done,
}

pub struct AttemptSupervisor;

/// The actors an attempt runs once its worker is launched.
struct Crew {
    writer: ActorRef<WriterMsg>,
    marker: ActorRef<MarkerMsg>,
    scanner: Option<ActorRef<ScanMsg>>,
    timer: Option<ActorRef<TimerMsg>>,
    killer: ActorRef<KillerMsg>,
    readers: Vec<ActorRef<ReaderMsg>>,
}

pub struct AttemptState {
    spec: AttemptSpec,
    stage: Stage,
    attempt: Option<ActiveAttempt>,
    crew: Option<Crew>,
    tasks: Vec<JoinHandle<()>>,
    cause: Option<StopCause>,
    interrupts: u32,
    exit: Option<ChildExit>,
    open_streams: Vec<OutputStream>,
    sweep_requested: bool,
    leak_grace_elapsed: bool,
    kill_report: Option<KillReport>,
    pipes_held_open: bool,
    /// A state write after preparation failed: nothing more is written for this attempt.
    state_write_failure: Option<String>,
}

impl Actor for AttemptSupervisor {
    type Msg = AttemptMsg;
    type State = AttemptState;
    type Arguments = AttemptSpec;

    async fn pre_start(
        &self,
        myself: ActorRef<AttemptMsg>,
        spec: AttemptSpec,
    ) -> Result<AttemptState, ActorProcessingErr> {
        notify(&myself, AttemptMsg::Launch);
        Ok(AttemptState {
            spec,
            stage: Stage::Preparing,
            attempt: None,
            crew: None,
            tasks: Vec::new(),
            cause: None,
            interrupts: 0,
            exit: None,
            open_streams: vec![OutputStream::Stdout, OutputStream::Stderr],
            sweep_requested: false,
            leak_grace_elapsed: false,
            kill_report: None,
            pipes_held_open: false,
            state_write_failure: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<AttemptMsg>,
        message: AttemptMsg,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.spec.span.clone();
        async {
            match message {
                AttemptMsg::Launch => state.launch(&myself).await,
                AttemptMsg::ChildExited(exit) => state.on_child_exit(exit, &myself),
                AttemptMsg::StreamEnded { stream, error } => {
                    state.open_streams.retain(|open| *open != stream);
                    if let Some(message) = error {
                        state.trigger(StopCause::ExecutionIo { message });
                    }
                }
                AttemptMsg::StopMatched(found) => state.trigger(StopCause::StopRegex {
                    pattern: found.pattern,
                }),
                AttemptMsg::DeadlineReached => {
                    if let Some(seconds) = state.spec.settings.timeout_seconds {
                        state.trigger(StopCause::Timeout { seconds });
                    }
                }
                AttemptMsg::IdleDeadlineReached => {
                    if let Some(seconds) = state.spec.settings.idle_timeout_seconds {
                        state.trigger(StopCause::IdleTimeout { seconds });
                    }
                }
                AttemptMsg::Interrupt(signal) => state.on_interrupt(signal),
                AttemptMsg::OutputFailed(message) => {
                    state.trigger(StopCause::ExecutionIo { message })
                }
                AttemptMsg::GroupEmptied(report) => {
                    tracing::info!(?report, "group stopped");
                    state.kill_report = Some(report);
                    state.stage = Stage::Draining;
                    myself.send_after(DRAIN_LIMIT, || AttemptMsg::DrainLimitElapsed);
                }
                AttemptMsg::LeakGraceElapsed => state.leak_grace_elapsed = true,
                AttemptMsg::DrainLimitElapsed => state.stop_draining(),
            }
            state.advance().await;
        }
        .instrument(span)
        .await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<AttemptMsg>,
        event: SupervisionEvent,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        // Children stop on purpose during cleanup; only a failure is news. The default
        // handler would stop this supervisor on any child exit, skipping cleanup.
        if let SupervisionEvent::ActorFailed(who, error) = event {
            tracing::error!(actor = ?who.get_id(), %error, "attempt actor failed");
            state.trigger(StopCause::ExecutionIo {
                message: format!("internal error: an attempt actor failed: {error}"),
            });
            state.advance().await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AttemptMsg>,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        for task in state.tasks.drain(..) {
            task.abort();
        }
        Ok(())
    }
}

impl AttemptState {
    /// Prepare → prompt → transcript header → launch → running record, all inside one
    /// handler: a signal arriving meanwhile waits until the group is ours to stop.
    async fn launch(&mut self, myself: &ActorRef<AttemptMsg>) {
        let started_at = Timestamp::from_datetime(chrono::Utc::now());
        let id = attempt_id(started_at, &self.spec.phase.id, uuid::Uuid::new_v4());
        self.spec.span.record("attempt_id", id.as_str());
        let layout = &self.spec.location.layout;
        let attempt = ActiveAttempt {
            id: id.clone(),
            status: ActiveStatus::Prepared,
            phase: PhaseRef {
                id: self.spec.phase.id.clone(),
                title: self.spec.phase.title.clone(),
            },
            snapshot: SnapshotRef {
                path: self.spec.snapshot.path.clone(),
                sha256: self.spec.snapshot.sha256.clone(),
            },
            execution_workspace: self.spec.execution_workspace.clone(),
            started_at,
            prompt_path: layout.prompt_path(&id),
            transcript_path: layout.transcript_path(&id),
            outcome_path: layout.outcome_path(&id),
            process: None,
        };
        let preparation = Preparation {
            attempt: attempt.clone(),
            accept: self.spec.accept.take(),
            resolve_abandoned_at: self.spec.resolve_abandoned.then_some(started_at),
        };
        let prepared = match self
            .spec
            .store
            .call(
                |reply| StoreMsg::Prepare {
                    preparation: Box::new(preparation),
                    reply,
                },
                None,
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(Ok(state))) => state,
            Ok(ractor::rpc::CallResult::Success(Err(message))) => {
                tracing::info!(%message, "prepared record not written");
                return self.conclude(
                    id,
                    AttemptOutcome::NotPrepared {
                        message: format!("could not prepare attempt state: {message}"),
                    },
                );
            }
            _ => {
                return self.conclude(
                    id,
                    AttemptOutcome::NotPrepared {
                        message: "could not prepare attempt state: state store stopped".into(),
                    },
                );
            }
        };
        tracing::info!(attempt_id = %id, phase_id = %attempt.phase.id, "attempt prepared");
        self.attempt = Some(attempt.clone());

        let argv = self.spec.settings.template.render(&PlaceholderValues {
            prompt_file: &attempt.prompt_path,
            workspace: &attempt.execution_workspace,
            run_id: &id,
            transcript_file: &attempt.transcript_path,
            state_file: &layout.state_path(),
        });
        let prompt = render_prompt(&PromptContext {
            plan_workspace_path: &self.spec.location.workspace,
            execution_workspace_path: &attempt.execution_workspace,
            plan_path: &self.spec.snapshot.path,
            state_path: &layout.state_path(),
            run_id: &id,
            transcript_path: &attempt.transcript_path,
            preamble: &self.spec.snapshot.plan.preamble,
            phase: &self.spec.phase,
            state: &prepared,
        });
        let transcript = match self.write_artifacts(&attempt, &argv, &prompt) {
            Ok(transcript) => transcript,
            Err(message) => {
                self.cause = Some(StopCause::ExecutionIo { message });
                return self.record_without_worker(None).await;
            }
        };
        // Everything that can fail for lack of resources is set up before the launch, so a
        // failure here never leaves a worker without its supervision.
        let console = if self.spec.settings.quiet {
            None
        } else {
            match Console::start() {
                Ok(console) => Some(console),
                Err(error) => {
                    self.cause = Some(StopCause::ExecutionIo {
                        message: format!("cannot start the live console thread: {error}"),
                    });
                    return self.record_without_worker(None).await;
                }
            }
        };

        let mut child = match spawn::spawn_worker(&argv, &attempt.execution_workspace) {
            Ok(child) => child,
            Err(error) => {
                let summary = format!(
                    "could not launch agent command: {}: {}",
                    argv.first().map(String::as_str).unwrap_or_default(),
                    crate::platform::locate::os_message(&error)
                );
                tracing::info!(%summary, "launch failed");
                return self
                    .record_without_worker(Some((transcript, summary)))
                    .await;
            }
        };
        let Some(pid) = child.id() else {
            // The child was reaped already; tokio forgets its pid then. Treat like a launch
            // we cannot supervise.
            return self
                .record_without_worker(Some((
                    transcript,
                    "could not launch agent command: the process vanished at once".into(),
                )))
                .await;
        };
        let identity = match proc::identity_of(pid) {
            Ok(identity) => Some(identity),
            Err(error) => {
                tracing::warn!(pid, %error, "process identity unavailable");
                None
            }
        };
        tracing::info!(pid, pgid = pid, "worker spawned");

        let worker_started_ticks = identity.as_ref().map(|identity| identity.start_time_ticks);
        self.crew = Some(
            self.start_crew(myself, pid, worker_started_ticks, transcript, console)
                .await,
        );
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        if let Some(mut stdin) = stdin {
            // A worker that never reads stdin must not stall us: the write runs on its own and
            // is abandoned at cleanup. A closed pipe (EPIPE) just means it did not want it.
            let prompt = prompt.into_bytes();
            self.tasks.push(tokio::spawn(
                async move {
                    let _ = stdin.write_all(&prompt).await;
                    let _ = stdin.shutdown().await;
                }
                .instrument(self.spec.span.clone()),
            ));
        }
        let waiter_target = myself.clone();
        self.tasks.push(tokio::spawn(
            async move {
                let exit = match child.wait().await {
                    Ok(status) => {
                        use std::os::unix::process::ExitStatusExt;
                        ChildExit {
                            code: status.code(),
                            signal: status.signal(),
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, "waiting for the worker failed");
                        ChildExit {
                            code: None,
                            signal: None,
                        }
                    }
                };
                tracing::info!(?exit, "worker exited");
                notify(&waiter_target, AttemptMsg::ChildExited(exit));
            }
            .instrument(self.spec.span.clone()),
        ));

        self.stage = Stage::Running;
        if let Err(message) = self.mark_running(identity).await {
            // SPEC §7: after a failed state write the last durable record (here: prepared) is
            // kept and nothing more is written; the worker is stopped and the attempt stays
            // unresolved for the operator.
            let failure = format!("could not record running attempt: {message}");
            self.state_write_failure = Some(failure.clone());
            self.trigger(StopCause::ExecutionIo { message: failure });
        }
        for (stream, pipe) in [
            (
                OutputStream::Stdout,
                stdout.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
            (
                OutputStream::Stderr,
                stderr.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
        ] {
            let Some(pipe) = pipe else { continue };
            let writer = self.crew.as_ref().map(|crew| crew.writer.clone());
            let Some(writer) = writer else { continue };
            match Actor::spawn_linked(
                None,
                PipeReader,
                ReaderArgs {
                    stream,
                    pipe,
                    writer,
                    supervisor: myself.clone(),
                    span: self.spec.span.clone(),
                },
                myself.get_cell(),
            )
            .await
            {
                Ok((reader, _)) => {
                    if let Some(crew) = self.crew.as_mut() {
                        crew.readers.push(reader);
                    }
                }
                Err(error) => self.trigger(StopCause::ExecutionIo {
                    message: format!("could not start the {} reader: {error}", stream.name()),
                }),
            }
        }
    }

    /// Creates the prompt (exclusively) and the transcript with its header.
    fn write_artifacts(
        &self,
        attempt: &ActiveAttempt,
        argv: &[String],
        prompt: &str,
    ) -> Result<File, String> {
        durable::write_new(Path::new(&attempt.prompt_path), prompt.as_bytes(), "prompt")
            .map_err(|error| error.to_string())?;
        let header = render_header(&TranscriptHeader {
            attempt_id: &attempt.id,
            phase_id: &attempt.phase.id,
            phase_title: &attempt.phase.title,
            plan_path: &self.spec.snapshot.path,
            state_path: &self.spec.location.layout.state_path(),
            plan_workspace: &self.spec.location.workspace,
            execution_workspace: &attempt.execution_workspace,
            started_at: attempt.started_at,
            agent_cmd: self.spec.settings.template.raw(),
            argv,
        });
        let transcript = durable::write_new(
            Path::new(&attempt.transcript_path),
            header.as_bytes(),
            "transcript-header",
        )
        .map_err(|error| error.to_string())?;
        Ok(transcript)
    }

    async fn start_crew(
        &self,
        myself: &ActorRef<AttemptMsg>,
        pgid: u32,
        worker_started_ticks: Option<u64>,
        transcript: File,
        console: Option<Console>,
    ) -> Crew {
        let supervisor = myself.clone();
        let cell = myself.get_cell();
        let settings = &self.spec.settings;
        // Spawning these can only fail on a panic inside pre_start (none of them does I/O or
        // allocates an OS resource there), so a failure here is a bug; it surfaces as an
        // internal error.
        let (killer, _) = Actor::spawn_linked(
            None,
            GroupKiller,
            KillerArgs {
                pgid,
                worker_started_ticks,
                inherited: self.spec.inherited_children.clone(),
                supervisor: supervisor.clone(),
            },
            cell.clone(),
        )
        .await
        .expect("group killer starts");
        let timer = if settings.timeout_seconds.is_some() || settings.idle_timeout_seconds.is_some()
        {
            let (timer, _) = Actor::spawn_linked(
                None,
                DeadlineTimer,
                TimerArgs {
                    timeout: settings.timeout_seconds.and_then(limit_duration),
                    idle_timeout: settings.idle_timeout_seconds.and_then(limit_duration),
                    supervisor: supervisor.clone(),
                },
                cell.clone(),
            )
            .await
            .expect("deadline timer starts");
            Some(timer)
        } else {
            None
        };
        let (marker, _) = Actor::spawn_linked(None, MarkerParser, (), cell.clone())
            .await
            .expect("marker parser starts");
        let scanner = if settings.stop_patterns.is_empty() {
            None
        } else {
            let (scanner, _) = Actor::spawn_linked(
                None,
                StopScanner,
                ScanArgs {
                    patterns: settings.stop_patterns.clone(),
                    supervisor: supervisor.clone(),
                },
                cell.clone(),
            )
            .await
            .expect("stop scanner starts");
            Some(scanner)
        };
        let (writer, _) = Actor::spawn_linked(
            None,
            TranscriptWriter,
            WriterArgs {
                transcript,
                transcript_path: self
                    .attempt
                    .as_ref()
                    .map(|attempt| attempt.transcript_path.clone())
                    .unwrap_or_default(),
                console,
                marker: marker.clone(),
                scanner: scanner.clone(),
                timer: timer.clone(),
                supervisor,
            },
            cell,
        )
        .await
        .expect("transcript writer starts");
        Crew {
            writer,
            marker,
            scanner,
            timer,
            killer,
            readers: Vec::new(),
        }
    }

    async fn mark_running(
        &mut self,
        identity: Option<crate::domain::identity::ProcessIdentity>,
    ) -> Result<(), String> {
        let Some(attempt) = self.attempt.as_mut() else {
            return Err("no prepared attempt".into());
        };
        let attempt_id = attempt.id.clone();
        let result = self
            .spec
            .store
            .call(
                |reply| StoreMsg::MarkRunning {
                    attempt_id,
                    identity: identity.clone(),
                    reply,
                },
                None,
            )
            .await;
        match result {
            Ok(ractor::rpc::CallResult::Success(Ok(()))) => {
                attempt.status = ActiveStatus::Running;
                attempt.process = identity;
                tracing::info!("attempt running");
                Ok(())
            }
            Ok(ractor::rpc::CallResult::Success(Err(message))) => Err(message),
            _ => Err("state store stopped".into()),
        }
    }

    /// Remembers the first cause and starts stopping the group; later causes are only logged.
    fn trigger(&mut self, cause: StopCause) {
        match self.stage {
            Stage::Running => {
                tracing::info!(?cause, "stopping the attempt");
                self.cause = Some(cause);
                self.stage = Stage::Stopping;
                if let Some(crew) = &self.crew {
                    if let Some(timer) = &crew.timer {
                        timer.stop(None);
                    }
                    notify(&crew.killer, KillerMsg::Terminate);
                }
            }
            Stage::Sweeping | Stage::Stopping | Stage::Draining if self.cause.is_none() => {
                // The leader already exited (or is being stopped) but nothing has decided the
                // outcome yet: this cause does, and cleanup continues as it was.
                tracing::info!(?cause, stage = ?self.stage, "cause noted during cleanup");
                self.cause = Some(cause);
            }
            _ => tracing::info!(?cause, stage = ?self.stage, "later cause ignored"),
        }
    }

    /// An interrupt decides the outcome even while the group is already being stopped for
    /// another cause: the handler will exit 130/143, and the record must agree with that.
    /// Cleanup itself goes on unchanged.
    fn on_interrupt(&mut self, signal: i32) {
        self.interrupts += 1;
        tracing::info!(signal, stage = ?self.stage, count = self.interrupts, "interrupt acted on");
        let stopping = matches!(
            self.stage,
            Stage::Sweeping | Stage::Stopping | Stage::Draining
        );
        match self.cause.take() {
            Some(earlier) if stopping && !matches!(earlier, StopCause::Interrupted { .. }) => {
                tracing::info!(
                    ?earlier,
                    "interrupt during cleanup replaces the earlier cause"
                );
                self.cause = Some(StopCause::Interrupted {
                    signal,
                    during: Some(Box::new(earlier)),
                });
            }
            cause => {
                self.cause = cause;
                self.trigger(StopCause::Interrupted {
                    signal,
                    during: None,
                });
            }
        }
        if self.interrupts > 1
            && let Some(crew) = &self.crew
        {
            notify(&crew.killer, KillerMsg::KillNow);
        }
    }

    fn on_child_exit(&mut self, exit: ChildExit, myself: &ActorRef<AttemptMsg>) {
        self.exit = Some(exit);
        if self.stage == Stage::Running {
            self.stage = Stage::Sweeping;
            if let Some(timer) = self.crew.as_ref().and_then(|crew| crew.timer.as_ref()) {
                timer.stop(None);
            }
            myself.send_after(LEAK_GRACE, || AttemptMsg::LeakGraceElapsed);
        }
    }

    /// The drain limit passed with the group gone: close our read ends if a process outside
    /// the group still holds a pipe, and stop waiting for an exit status that cannot come (a
    /// leader stuck in an uninterruptible sleep survives SIGKILL).
    fn stop_draining(&mut self) {
        if self.stage != Stage::Draining {
            return;
        }
        if !self.open_streams.is_empty() {
            tracing::info!(open = ?self.open_streams, "pipes still open after the group emptied; closing our read ends");
            self.pipes_held_open = true;
            if let Some(crew) = &self.crew {
                for reader in &crew.readers {
                    notify(reader, ReaderMsg::Close);
                }
            }
            self.open_streams.clear();
        }
        if self.exit.is_none() {
            tracing::warn!(
                "no exit status for the worker after the drain limit; recording it as unknown"
            );
            self.exit = Some(ChildExit {
                code: None,
                signal: None,
            });
        }
    }

    /// Moves the lifecycle forward when the current stage's conditions are met.
    async fn advance(&mut self) {
        if self.stage == Stage::Sweeping
            && !self.sweep_requested
            && (self.open_streams.is_empty() || self.leak_grace_elapsed)
        {
            self.sweep_requested = true;
            if let Some(crew) = &self.crew {
                notify(&crew.killer, KillerMsg::SweepAfterExit);
            }
        }
        if self.stage == Stage::Draining && self.open_streams.is_empty() && self.exit.is_some() {
            self.record().await;
        }
    }

    /// Cleanup after the group is gone and both pipes are closed: trailer, verdicts, decision,
    /// outcome, commit, report.
    async fn record(&mut self) {
        self.stage = Stage::Recording;
        let Some(crew) = self.crew.take() else { return };
        for reader in &crew.readers {
            reader.stop(None);
        }
        let kill_report = self.kill_report.take().unwrap_or_default();
        let finished_at = Timestamp::from_datetime(chrono::Utc::now());
        let trailer = Trailer {
            exit: self.exit,
            finished_at: Some(finished_at),
            leaked: kill_report.leaked,
            escaped: kill_report.escaped,
            survivors: kill_report.survivors,
            pipes_held_open: self.pipes_held_open,
            launch_error: None,
        };
        match call(&crew.writer, |reply| WriterMsg::Finish { trailer, reply }).await {
            Some(Ok(())) => {}
            Some(Err(message)) => self.note_cause(StopCause::ExecutionIo { message }),
            None => self.note_cause(StopCause::ExecutionIo {
                message: "transcript writer stopped before the trailer was written".into(),
            }),
        }
        let verdict = call(&crew.marker, |reply| MarkerMsg::Finish { reply })
            .await
            .unwrap_or_else(|| MarkerVerdict::Invalid("marker parser stopped".into()));
        if let Some(scanner) = &crew.scanner
            && let Some(Some(found)) = call(scanner, |reply| ScanMsg::Finish { reply }).await
        {
            self.note_cause(StopCause::StopRegex {
                pattern: found.pattern,
            });
        }
        let exit = self.exit.unwrap_or(ChildExit {
            code: None,
            signal: None,
        });
        let decision = decide(self.cause.as_ref(), exit, verdict);
        tracing::info!(status = %decision.status, "outcome decided");
        self.commit(decision, exit, finished_at).await;
        for actor in [
            crew.writer.get_cell(),
            crew.marker.get_cell(),
            crew.killer.get_cell(),
        ]
        .into_iter()
        .chain(crew.scanner.map(|scanner| scanner.get_cell()))
        .chain(crew.timer.map(|timer| timer.get_cell()))
        {
            actor.stop(None);
        }
    }

    /// A cause found during recording (the final stop-regex check, a transcript failure)
    /// decides the outcome only if nothing decided it before.
    fn note_cause(&mut self, cause: StopCause) {
        if self.cause.is_none() {
            tracing::info!(?cause, "cause found while recording");
            self.cause = Some(cause);
        }
    }

    /// Records an attempt whose worker never ran (artifact or launch failure).
    async fn record_without_worker(&mut self, launch_failure: Option<(File, String)>) {
        self.stage = Stage::Recording;
        let finished_at = Timestamp::from_datetime(chrono::Utc::now());
        let exit = ChildExit {
            code: None,
            signal: None,
        };
        let decision = match launch_failure {
            Some((mut transcript, summary)) => {
                let trailer = Trailer {
                    finished_at: Some(finished_at),
                    launch_error: Some(summary.clone()),
                    ..Trailer::default()
                };
                if let Err(error) =
                    transcript.write_all(render_trailer(&trailer, 0, true).as_bytes())
                {
                    tracing::warn!(%error, "could not note the launch failure in the transcript");
                }
                Decision {
                    status: AttemptStatus::LaunchFailed,
                    summary,
                }
            }
            None => decide(
                self.cause.as_ref(),
                exit,
                MarkerVerdict::Missing(String::new()),
            ),
        };
        self.commit(decision, exit, finished_at).await;
    }

    async fn commit(&mut self, decision: Decision, exit: ChildExit, finished_at: Timestamp) {
        let Some(attempt) = self.attempt.clone() else {
            return;
        };
        if let Some(failure) = self.state_write_failure.clone() {
            tracing::info!(%failure, "outcome not committed after an earlier state write failure");
            return self.conclude(
                attempt.id.clone(),
                AttemptOutcome::Unresolved {
                    decision,
                    failure,
                    attempt: Box::new(attempt),
                },
            );
        }
        let outcome = OutcomeRecord {
            attempt_id: attempt.id.clone(),
            plan: attempt.snapshot.clone(),
            phase: attempt.phase.clone(),
            status: decision.status,
            summary: decision.summary.clone(),
            started_at: attempt.started_at,
            finished_at,
            execution_workspace: attempt.execution_workspace.clone(),
            artifacts: Artifacts {
                prompt_path: attempt.prompt_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
            },
            exit_code: exit.code,
            signal: exit.signal,
        };
        let result = call(&self.spec.store, |reply| StoreMsg::Commit {
            outcome: Box::new(outcome),
            reply,
        })
        .await;
        let outcome = match result {
            Some(Ok(state)) => {
                tracing::info!(status = %decision.status, "outcome committed");
                AttemptOutcome::Committed {
                    decision,
                    outcome_path: attempt.outcome_path.clone(),
                    transcript_path: attempt.transcript_path.clone(),
                    state: Box::new(state),
                }
            }
            Some(Err(error)) => {
                let failure = match error {
                    CommitError::OutcomeWrite(message) => {
                        format!("could not write attempt outcome: {message}")
                    }
                    CommitError::StateWrite(message) => {
                        format!("could not record attempt outcome: {message}")
                    }
                };
                tracing::info!(%failure, "outcome not committed; attempt stays unresolved");
                AttemptOutcome::Unresolved {
                    decision,
                    failure,
                    attempt: Box::new(attempt.clone()),
                }
            }
            None => AttemptOutcome::Unresolved {
                decision,
                failure: "could not record attempt outcome: state store stopped".into(),
                attempt: Box::new(attempt.clone()),
            },
        };
        self.conclude(attempt.id, outcome);
    }

    fn conclude(&mut self, attempt_id: String, outcome: AttemptOutcome) {
        self.stage = Stage::Done;
        // The run supervisor stops this actor (and with it any remaining child) once it has
        // the report; until then late messages are ignored by stage.
        notify(
            &self.spec.run,
            RunMsg::AttemptConcluded(Box::new(AttemptReport {
                phase_id: self.spec.phase.id.clone(),
                attempt_id,
                outcome,
            })),
        );
    }
}

/// A validated limit in seconds as a duration. A limit too large for the clock (1e300 is
/// finite and positive, so valid) can never be reached: it means no deadline at all.
fn limit_duration(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}

/// Calls an actor and unwraps the reply; `None` when the actor is gone.
async fn call<M: ractor::Message, R: Send + 'static>(
    actor: &ActorRef<M>,
    message: impl FnOnce(RpcReplyPort<R>) -> M,
) -> Option<R> {
    match actor.call(message, None).await {
        Ok(ractor::rpc::CallResult::Success(reply)) => Some(reply),
        _ => None,
    }
}
