//! AttemptSupervisor: one per attempt. It owns the attempt's actors and executes the effects
//! of the pure lifecycle machine ([`crate::domain::lifecycle::attempt`]), which holds every
//! rule: which trigger becomes the cause, what a signal does in each stage, when cleanup moves
//! on. This actor only turns messages into machine events and machine effects into actions.
//!
//! Its handlers never wait on a disk, a store write or another actor's reply: preparation,
//! the `running` record, the recording steps and the commit run as tasks that report back
//! with a message. So a timeout, a stop-regex match or a signal is handled at once whatever
//! the disk is doing, and a signal during preparation is held by the machine until the group
//! exists.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::deadline_timer::{DeadlineTimer, TimerArgs, TimerMsg};
use super::group_killer::{GroupKiller, KillerArgs, KillerMsg};
use super::marker_parser::{MarkerMsg, MarkerParser};
use super::observer::Emitter;
use super::pipe_reader::{PipeReader, ReaderArgs, ReaderMsg};
use super::run_supervisor::RunMsg;
use super::state_store::{CommitError, Preparation, StoreError, StoreMsg};
use super::stop_scanner::{ScanArgs, ScanMsg, StopScanner};
use super::transcript_writer::{
    ConsoleBound, OutputError, TranscriptWriter, WriterArgs, WriterMsg,
};
use super::{call, notify, off_runtime};
use crate::domain::attempt_id::attempt_id;
use crate::domain::decision::{ChildExit, Decision};
use crate::domain::events::RunEvent;
use crate::domain::identity::ProcessIdentity;
use crate::domain::lifecycle::GroupReport;
use crate::domain::lifecycle::attempt::{
    AttemptEffect, AttemptEvent, AttemptLifecycle, Conclusion, RecordingInput,
};
use crate::domain::marker::MarkerVerdict;
use crate::domain::outcome::{Artifacts, OutcomeRecord, OutputBytes};
use crate::domain::output_stream::OutputStream;
use crate::domain::plan::Phase;
use crate::domain::prompt::{PromptContext, RetryNote, render_prompt};
use crate::domain::rate_limit::reset_time::find_reset;
use crate::domain::retry::is_retryable;
use crate::domain::retry::next_step::{
    FinishedAttempt, NextStep, RetryLedger, RetryReason, next_step,
};
use crate::domain::retry::schedule::RetrySchedule;
use crate::domain::state::{
    ActiveAttempt, ActiveStatus, AttemptStatus, PhaseRef, PlanRecord, SnapshotRef,
};
use crate::domain::stop_regex::StopMatch;
use crate::domain::template::PlaceholderValues;
use crate::domain::timestamp::Timestamp;
use crate::domain::transcript::{
    TRAILER_SEPARATOR, Trailer, TranscriptHeader, render_header, render_trailer,
};
use crate::domain::watchdog::{LossReaction, WatchdogLoss};
use crate::invocation::{PlanSnapshot, RunSettings};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::proc::{self, ChildSnapshot};
use crate::platform::transcript_file::TranscriptFile;
use crate::platform::{durable, file_tail, spawn, watchdog};

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
    /// Which of the settings' agent templates runs (0 is the primary).
    pub template_index: usize,
    /// The phase's retry history before this attempt, and what its prompt says about it.
    pub turn: AttemptTurn,
    /// The phase's position in the plan (1-based), for progress.
    pub phase_index: usize,
    pub events: Emitter,
    /// The run's live console; `None` with `--quiet`.
    pub console: Option<Arc<Console>>,
    pub span: tracing::Span,
}

/// Where an attempt stands in its phase's retries in this invocation.
#[derive(Clone, Debug)]
pub struct AttemptTurn {
    pub ledger: RetryLedger,
    /// `None` for a phase's first attempt, whose prompt has no retry section.
    pub note: Option<RetryNote>,
}

impl AttemptTurn {
    pub fn first() -> Self {
        Self {
            ledger: RetryLedger::first(),
            note: None,
        }
    }
}

/// The retry the policy scheduled after a committed attempt (durable in the same write).
#[derive(Clone, Debug)]
pub struct ScheduledRetry {
    pub schedule: RetrySchedule,
    /// When the next attempt is due, exactly (the schedule keeps it rounded up to the second,
    /// so that a resumed wait never ends early).
    pub due: chrono::DateTime<chrono::Utc>,
    /// The reset-time phrase of the agent's output the wait is based on, if any.
    pub reset_phrase: Option<String>,
}

/// What the attempt supervisor tells the run supervisor when it is done.
#[derive(Debug)]
pub struct AttemptReport {
    pub phase_id: String,
    pub attempt_id: String,
    pub outcome: AttemptOutcome,
}

#[derive(Debug)]
pub enum AttemptOutcome {
    /// The outcome is durably committed.
    Committed {
        decision: Decision,
        outcome_path: String,
        transcript_path: String,
        /// The next attempt of the phase, when the retry policy scheduled one.
        retry: Option<ScheduledRetry>,
    },
    /// The prepared record could not be written: nothing was launched, nothing changed.
    NotPrepared { error: StoreError },
    /// A durable write after preparation failed; the last durable record (prepared or
    /// running) stays and the attempt is unresolved.
    Unresolved {
        decision: Decision,
        failure: RecordFailure,
        attempt: Box<ActiveAttempt>,
    },
}

/// The durable write that left an attempt unresolved.
#[derive(Debug, thiserror::Error)]
pub enum RecordFailure {
    /// The `running` record; `decided` when this failure is also what stopped the attempt
    /// (its message is then already the decision's summary).
    #[error("{message}")]
    RunningRecord { message: String, decided: bool },
    #[error("could not write attempt outcome: {0}")]
    OutcomeWrite(CommitError),
    #[error("could not record attempt outcome: {0}")]
    OutcomeRecord(StoreError),
}

pub enum AttemptMsg {
    /// The preparation task finished: the worker runs, or why it does not.
    Prepared(Box<Result<Launch, SetupFailure>>),
    /// The `running` record write reported.
    RunningRecorded(Result<(), StoreError>),
    ChildExited(ChildExit),
    StreamEnded {
        stream: OutputStream,
        error: Option<String>,
    },
    StopMatched(StopMatch),
    DeadlineReached,
    IdleDeadlineReached,
    /// A stopping signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) forwarded by the run supervisor.
    Interrupt(i32),
    /// The transcript or the live console could not be written.
    OutputFailed(String),
    GroupEmptied(GroupReport),
    LeakGraceElapsed,
    DrainLimitElapsed,
    /// The recording task wrote the trailer and gathered the verdicts.
    Gathered(Box<Gathered>),
    /// The commit task finished.
    Committed(Box<Result<Option<ScheduledRetry>, RecordFailure>>),
    /// The run's watchdog was lost, and replaced or not (platform::watchdog's monitor).
    WatchdogLost(Box<WatchdogLoss>),
}

/// A launched worker, handed from the preparation task to the supervisor.
pub struct Launch {
    attempt: ActiveAttempt,
    phase_attempt: u32,
    child: Child,
    pid: u32,
    identity: Option<ProcessIdentity>,
    transcript: TranscriptFile,
    prompt: Vec<u8>,
}

/// Why the preparation task launched nothing.
pub enum SetupFailure {
    /// The prepared record was not written (or not durably: then it may be visible).
    NotPrepared {
        attempt_id: String,
        error: StoreError,
    },
    /// The prepared record is durable, but the prompt, the transcript header or a writer
    /// thread could not be created.
    Setup {
        attempt: ActiveAttempt,
        phase_attempt: u32,
        error: SetupError,
    },
    /// The worker could not be started; `transcript` gets the launch error.
    Launch {
        attempt: ActiveAttempt,
        phase_attempt: u32,
        transcript: TranscriptFile,
        summary: String,
    },
}

/// What could not be set up before the launch.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The prompt or the transcript header (the message names the file).
    #[error("{0}")]
    Artifact(io::Error),
    #[error("cannot start the transcript thread: {0}")]
    TranscriptThread(io::Error),
}

/// What the recording task found.
pub struct Gathered {
    trailer: Result<(), OutputError>,
    output: OutputBytes,
    verdict: MarkerVerdict,
    final_match: Option<StopMatch>,
    exit: Option<ChildExit>,
    finished_at: Timestamp,
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
    /// Bounds the live console once the worker is being stopped or has exited.
    console_bound: ConsoleBound,
}

impl Crew {
    fn stop(&self) {
        for actor in [
            self.writer.get_cell(),
            self.marker.get_cell(),
            self.killer.get_cell(),
        ]
        .into_iter()
        .chain(self.scanner.iter().map(|scanner| scanner.get_cell()))
        .chain(self.timer.iter().map(|timer| timer.get_cell()))
        .chain(self.readers.iter().map(|reader| reader.get_cell()))
        {
            actor.stop(None);
        }
    }
}

pub struct AttemptState {
    spec: AttemptSpec,
    lifecycle: AttemptLifecycle,
    /// The attempt as durably prepared (and, once recorded, running).
    attempt: Option<ActiveAttempt>,
    crew: Option<Crew>,
    /// The worker's transcript when it never ran (the launch error goes there).
    unlaunched_transcript: Option<TranscriptFile>,
    /// The decision being committed by the commit task.
    committing: Option<Decision>,
    /// Why the prepared record was not written, until the machine concludes.
    not_prepared: Option<(String, StoreError)>,
    /// When the attempt started, for its duration.
    started: std::time::Instant,
    /// What the agent wrote, once the trailer is written.
    output: OutputBytes,
    /// This attempt's number among the phase's attempts in the state.
    phase_attempt: u32,
    tasks: Vec<JoinHandle<()>>,
    /// Watchdog losses are told to this attempt while it lives.
    _watchdog: watchdog::Subscription,
    /// The watchdog losses during this attempt, for the trailer and the outcome.
    watchdog_losses: Vec<WatchdogLoss>,
    /// A loss that stops the attempt, noticed before its worker ran: acted on at launch.
    deferred_watchdog_stop: Option<String>,
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
        let mut state = AttemptState {
            spec,
            lifecycle: AttemptLifecycle::new(),
            attempt: None,
            crew: None,
            unlaunched_transcript: None,
            committing: None,
            not_prepared: None,
            started: std::time::Instant::now(),
            output: OutputBytes::default(),
            phase_attempt: 1,
            tasks: Vec::new(),
            _watchdog: {
                let target = myself.clone();
                watchdog::subscribe(move |loss| {
                    notify(&target, AttemptMsg::WatchdogLost(Box::new(loss)));
                })
            },
            watchdog_losses: Vec::new(),
            deferred_watchdog_stop: None,
        };
        let preparation = state.preparation();
        let target = myself.clone();
        state.tasks.push(tokio::spawn(
            async move {
                let result = preparation.run().await;
                notify(&target, AttemptMsg::Prepared(Box::new(result)));
            }
            .instrument(state.spec.span.clone()),
        ));
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<AttemptMsg>,
        message: AttemptMsg,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        let span = state.spec.span.clone();
        async {
            let event = match message {
                AttemptMsg::Prepared(result) => state.on_prepared(*result, &myself).await,
                AttemptMsg::RunningRecorded(Ok(())) => {
                    if let Some(attempt) = state.attempt.as_mut() {
                        attempt.status = ActiveStatus::Running;
                    }
                    tracing::info!("attempt running");
                    Some(AttemptEvent::RunningRecorded)
                }
                AttemptMsg::RunningRecorded(Err(error)) => {
                    Some(AttemptEvent::RunningRecordFailed {
                        message: error.to_string(),
                    })
                }
                AttemptMsg::ChildExited(exit) => Some(AttemptEvent::LeaderExited(exit)),
                AttemptMsg::StreamEnded { stream, error } => {
                    Some(AttemptEvent::StreamEnded { stream, error })
                }
                AttemptMsg::StopMatched(found) => Some(state.pattern_event(found, false)),
                AttemptMsg::DeadlineReached => state
                    .spec
                    .settings
                    .timeout_seconds
                    .map(|seconds| AttemptEvent::DeadlineReached { seconds }),
                AttemptMsg::IdleDeadlineReached => state
                    .spec
                    .settings
                    .idle_timeout_seconds
                    .map(|seconds| AttemptEvent::IdleDeadlineReached { seconds }),
                AttemptMsg::Interrupt(signal) => Some(AttemptEvent::Interrupt { signal }),
                AttemptMsg::OutputFailed(message) => Some(AttemptEvent::OutputFailed { message }),
                AttemptMsg::GroupEmptied(report) => {
                    tracing::info!(
                        leaked = ?report.leaked,
                        escaped = ?report.escaped,
                        survivors = ?report.survivors,
                        "group stopped"
                    );
                    state.emit(RunEvent::group_stopped(&report));
                    Some(AttemptEvent::GroupEmptied(report))
                }
                AttemptMsg::LeakGraceElapsed => Some(AttemptEvent::LeakGraceElapsed),
                AttemptMsg::DrainLimitElapsed => Some(AttemptEvent::DrainLimitElapsed),
                AttemptMsg::Gathered(gathered) => {
                    state.on_gathered(*gathered, &myself);
                    None
                }
                AttemptMsg::Committed(result) => {
                    state.on_committed(*result);
                    None
                }
                AttemptMsg::WatchdogLost(loss) => state.on_watchdog_lost(*loss),
            };
            if let Some(event) = event {
                state.feed(event, &myself);
            }
        }
        .instrument(span)
        .await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<AttemptMsg>,
        event: SupervisionEvent,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        // Children stop on purpose during cleanup; only a failure is news. The default
        // handler would stop this supervisor on any child exit, skipping cleanup.
        if let SupervisionEvent::ActorFailed(who, error) = event {
            tracing::error!(actor = %who.get_id(), %error, "attempt actor failed");
            state.feed(
                AttemptEvent::OutputFailed {
                    message: format!("internal error: an attempt actor failed: {error}"),
                },
                &myself,
            );
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
        if let Some(crew) = state.crew.take() {
            crew.stop();
        }
        Ok(())
    }
}

impl AttemptState {
    /// Feeds one event to the machine and executes the effects it returns.
    fn feed(&mut self, event: AttemptEvent, myself: &ActorRef<AttemptMsg>) {
        let before = self.lifecycle.stage().name();
        let effects = self.lifecycle.handle(event);
        let after = self.lifecycle.stage().name();
        if before != after {
            tracing::info!(from = before, to = after, "attempt stage");
        }
        for effect in effects {
            self.execute(effect, myself);
        }
    }

    fn execute(&mut self, effect: AttemptEffect, myself: &ActorRef<AttemptMsg>) {
        tracing::debug!(effect = effect_name(&effect), "attempt effect");
        match effect {
            AttemptEffect::CancelTimers => {
                if let Some(timer) = self.crew.as_ref().and_then(|crew| crew.timer.as_ref()) {
                    timer.stop(None);
                }
            }
            AttemptEffect::BoundConsole => {
                if let Some(crew) = &self.crew {
                    crew.console_bound.engage();
                }
            }
            AttemptEffect::TerminateGroup => {
                if let Some(cause) = self.lifecycle.cause() {
                    let (kind, detail) = (cause.kind(), cause.describe());
                    tracing::info!(cause = kind, detail, "stopping the attempt");
                    self.emit(RunEvent::StopRequested {
                        cause: kind.to_owned(),
                        detail,
                    });
                }
                self.tell_killer(KillerMsg::Terminate);
            }
            AttemptEffect::KillNow => self.tell_killer(KillerMsg::KillNow),
            AttemptEffect::SweepAfterExit => self.tell_killer(KillerMsg::SweepAfterExit),
            AttemptEffect::StartLeakGrace => {
                myself.send_after(LEAK_GRACE, || AttemptMsg::LeakGraceElapsed);
            }
            AttemptEffect::StartDrainLimit => {
                myself.send_after(DRAIN_LIMIT, || AttemptMsg::DrainLimitElapsed);
            }
            AttemptEffect::CloseReaders => {
                tracing::info!("pipes still open after the group emptied; closing our read ends");
                if let Some(crew) = &self.crew {
                    for reader in &crew.readers {
                        notify(reader, ReaderMsg::Close);
                    }
                }
            }
            AttemptEffect::Record(input) => self.start_recording(input, myself),
            AttemptEffect::RecordWithoutWorker { launch_error } => {
                self.record_without_worker(launch_error, myself)
            }
            AttemptEffect::ConcludeNotPrepared => {
                if let Some((attempt_id, error)) = self.not_prepared.take() {
                    self.conclude(attempt_id, AttemptOutcome::NotPrepared { error });
                }
            }
        }
    }

    /// The watchdog was lost: say so (event now, trailer and outcome later) and, when no new
    /// watchdog took over, stop the attempt — its worker would outlive a SIGKILLed handler.
    /// The rules are [`WatchdogLoss::reaction`]; the stop is an `execution-io` cause.
    fn on_watchdog_lost(&mut self, loss: WatchdogLoss) -> Option<AttemptEvent> {
        tracing::info!(loss = %loss.describe(), "the attempt lost its watchdog");
        self.emit(RunEvent::watchdog_lost(&loss));
        let reaction = loss.reaction();
        self.watchdog_losses.push(loss);
        match reaction {
            LossReaction::Continue => None,
            LossReaction::StopAttempt(message) if self.crew.is_none() => {
                // No group to stop yet: the machine ignores triggers while preparing.
                self.deferred_watchdog_stop = Some(message);
                None
            }
            LossReaction::StopAttempt(message) => Some(AttemptEvent::OutputFailed { message }),
        }
    }

    fn watchdog_notes(&self) -> Vec<String> {
        self.watchdog_losses
            .iter()
            .map(WatchdogLoss::trailer_line)
            .collect()
    }

    /// A match of the combined pattern set: stop regexes come first, rate-limit patterns after.
    fn pattern_event(&self, found: StopMatch, at_end: bool) -> AttemptEvent {
        let pattern = found.pattern;
        match (found.index < self.spec.settings.stop_pattern_count, at_end) {
            (true, false) => AttemptEvent::StopRegexMatched { pattern },
            (true, true) => AttemptEvent::FinalStopMatch { pattern },
            (false, false) => AttemptEvent::RateLimitMatched { pattern },
            (false, true) => AttemptEvent::FinalRateLimitMatch { pattern },
        }
    }

    /// Emits an event of this attempt (with its id once it has one).
    fn emit(&self, event: RunEvent) {
        let attempt_id = self.attempt.as_ref().map(|attempt| attempt.id.as_str());
        self.spec.events.emit(attempt_id, event);
    }

    /// Milliseconds since the attempt started.
    fn duration_ms(&self) -> u64 {
        self.started
            .elapsed()
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX)
    }

    fn tell_killer(&self, message: KillerMsg) {
        if let Some(crew) = &self.crew {
            notify(&crew.killer, message);
        }
    }

    /// The preparation task's inputs, cloned out of the spec.
    fn preparation(&mut self) -> PreparationTask {
        PreparationTask {
            store: self.spec.store.clone(),
            location: self.spec.location.clone(),
            snapshot: self.spec.snapshot.clone(),
            settings: self.spec.settings.clone(),
            phase: self.spec.phase.clone(),
            execution_workspace: self.spec.execution_workspace.clone(),
            accept: self.spec.accept.take(),
            resolve_abandoned: self.spec.resolve_abandoned,
            template_index: self.spec.template_index,
            retry_note: self.spec.turn.note.clone(),
            attempt_number: self.spec.turn.ledger.attempt,
            phase_index: self.spec.phase_index,
            events: self.spec.events.clone(),
            span: self.spec.span.clone(),
        }
    }

    async fn on_prepared(
        &mut self,
        result: Result<Launch, SetupFailure>,
        myself: &ActorRef<AttemptMsg>,
    ) -> Option<AttemptEvent> {
        let launch = match result {
            Ok(launch) => launch,
            Err(SetupFailure::NotPrepared { attempt_id, error }) => {
                tracing::info!(%error, "prepared record not written");
                self.not_prepared = Some((attempt_id, error));
                return Some(AttemptEvent::PreparedRecordFailed);
            }
            Err(SetupFailure::Setup {
                attempt,
                phase_attempt,
                error,
            }) => {
                self.attempt = Some(attempt);
                self.phase_attempt = phase_attempt;
                let message = error.to_string();
                return Some(AttemptEvent::SetupFailed { message });
            }
            Err(SetupFailure::Launch {
                attempt,
                phase_attempt,
                transcript,
                summary,
            }) => {
                tracing::info!(%summary, "launch failed");
                self.attempt = Some(attempt);
                self.phase_attempt = phase_attempt;
                self.unlaunched_transcript = Some(transcript);
                return Some(AttemptEvent::LaunchFailed { summary });
            }
        };
        let Launch {
            attempt,
            phase_attempt,
            mut child,
            pid,
            identity,
            transcript,
            prompt,
        } = launch;
        tracing::info!(pid, pgid = pid, "worker spawned");
        self.spec.events.emit(
            Some(&attempt.id),
            RunEvent::WorkerSpawned { pid, pgid: pid },
        );
        let worker_started_ticks = identity.as_ref().map(|identity| identity.start_time_ticks);
        self.attempt = Some(attempt.clone());
        self.phase_attempt = phase_attempt;
        self.crew = Some(
            self.start_crew(
                myself,
                pid,
                worker_started_ticks,
                transcript,
                attempt.transcript_path.clone(),
            )
            .await,
        );
        if let Some(stdin) = child.stdin.take() {
            self.tasks.push(tokio::spawn(
                write_prompt(stdin, prompt).instrument(self.spec.span.clone()),
            ));
        }
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let waiter_target = myself.clone();
        self.tasks.push(tokio::spawn(
            async move {
                let exit = wait_for_exit(&mut child).await;
                tracing::info!(code = exit.code, signal = exit.signal, "worker exited");
                notify(&waiter_target, AttemptMsg::ChildExited(exit));
            }
            .instrument(self.spec.span.clone()),
        ));
        // The group exists and the killer knows it: a held signal is acted on now.
        self.feed(AttemptEvent::Launched, myself);
        if let Some(message) = self.deferred_watchdog_stop.take() {
            self.feed(AttemptEvent::OutputFailed { message }, myself);
        }
        self.record_running(&attempt.id, identity, myself);
        self.start_readers(stdout, stderr, myself).await;
        None
    }

    /// Writes the `running` record in a task: a slow disk must not delay a timeout or signal.
    fn record_running(
        &mut self,
        attempt_id: &str,
        identity: Option<ProcessIdentity>,
        myself: &ActorRef<AttemptMsg>,
    ) {
        let store = self.spec.store.clone();
        let attempt_id = attempt_id.to_owned();
        let target = myself.clone();
        if let Some(attempt) = self.attempt.as_mut() {
            attempt.process = identity.clone();
        }
        self.tasks.push(tokio::spawn(
            async move {
                let result = call(&store, |reply| StoreMsg::MarkRunning {
                    attempt_id,
                    identity,
                    reply,
                })
                .await
                .unwrap_or(Err(StoreError::Stopped));
                notify(&target, AttemptMsg::RunningRecorded(result));
            }
            .instrument(self.spec.span.clone()),
        ));
    }

    async fn start_readers(
        &mut self,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
        myself: &ActorRef<AttemptMsg>,
    ) {
        let pipes: [(
            OutputStream,
            Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
        ); 2] = [
            (
                OutputStream::Stdout,
                stdout.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
            (
                OutputStream::Stderr,
                stderr.map(|pipe| Box::new(pipe) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            ),
        ];
        for (stream, pipe) in pipes {
            let (Some(pipe), Some(writer)) =
                (pipe, self.crew.as_ref().map(|crew| crew.writer.clone()))
            else {
                continue;
            };
            let started = Actor::spawn_linked(
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
            .await;
            match started {
                Ok((reader, _)) => {
                    if let Some(crew) = self.crew.as_mut() {
                        crew.readers.push(reader);
                    }
                }
                Err(error) => self.feed(
                    AttemptEvent::OutputFailed {
                        message: format!("could not start the {} reader: {error}", stream.name()),
                    },
                    myself,
                ),
            }
        }
    }

    async fn start_crew(
        &self,
        myself: &ActorRef<AttemptMsg>,
        pgid: u32,
        worker_started_ticks: Option<u64>,
        transcript: TranscriptFile,
        transcript_path: String,
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
        let (console_bound, bounded) = ConsoleBound::new();
        let (writer, _) = Actor::spawn_linked(
            None,
            TranscriptWriter,
            WriterArgs {
                transcript,
                transcript_path,
                console: self.spec.console.clone(),
                events: self.spec.events.clone(),
                attempt_id: self
                    .attempt
                    .as_ref()
                    .map(|attempt| attempt.id.clone())
                    .unwrap_or_default(),
                marker: marker.clone(),
                scanner: scanner.clone(),
                timer: timer.clone(),
                supervisor,
                console_bound: bounded,
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
            console_bound,
        }
    }

    /// The group is gone and both pipes are closed: a task stops the readers, writes the
    /// trailer and gathers the verdicts, then reports back.
    fn start_recording(&mut self, input: RecordingInput, myself: &ActorRef<AttemptMsg>) {
        let Some(crew) = &self.crew else { return };
        for reader in &crew.readers {
            reader.stop(None);
        }
        let finished_at = Timestamp::from_datetime(chrono::Utc::now());
        let trailer = Trailer {
            exit: input.exit,
            finished_at: Some(finished_at),
            leaked: input.group.leaked,
            escaped: input.group.escaped,
            survivors: input.group.survivors,
            pipes_held_open: input.pipes_held_open,
            launch_error: None,
            // The writer adds what happened to the live output.
            console_notes: Vec::new(),
            watchdog_notes: self.watchdog_notes(),
        };
        let writer = crew.writer.clone();
        let marker = crew.marker.clone();
        let scanner = crew.scanner.clone();
        let target = myself.clone();
        self.tasks.push(tokio::spawn(
            async move {
                let (trailer, output) = call(&writer, |reply| WriterMsg::Finish { trailer, reply })
                    .await
                    .unwrap_or((Err(OutputError::WriterStopped), OutputBytes::default()));
                let verdict = call(&marker, |reply| MarkerMsg::Finish { reply })
                    .await
                    .unwrap_or_else(|| MarkerVerdict::Invalid("marker parser stopped".into()));
                let final_match = match &scanner {
                    Some(scanner) => call(scanner, |reply| ScanMsg::Finish { reply })
                        .await
                        .flatten(),
                    None => None,
                };
                notify(
                    &target,
                    AttemptMsg::Gathered(Box::new(Gathered {
                        trailer,
                        output,
                        verdict,
                        final_match,
                        exit: input.exit,
                        finished_at,
                    })),
                );
            }
            .instrument(self.spec.span.clone()),
        ));
    }

    fn on_gathered(&mut self, gathered: Gathered, myself: &ActorRef<AttemptMsg>) {
        if let Err(error) = gathered.trailer {
            let message = error.to_string();
            self.feed(AttemptEvent::TrailerFailed { message }, myself);
        }
        if let Some(found) = gathered.final_match {
            let event = self.pattern_event(found, true);
            self.feed(event, myself);
        }
        if let Some(crew) = self.crew.take() {
            crew.stop();
        }
        let conclusion = self.lifecycle.decide(gathered.exit, gathered.verdict);
        self.output = gathered.output;
        self.commit(conclusion, gathered.finished_at, None, myself);
    }

    /// Records an attempt whose worker never ran (setup or launch failure).
    fn record_without_worker(
        &mut self,
        launch_error: Option<String>,
        myself: &ActorRef<AttemptMsg>,
    ) {
        let finished_at = Timestamp::from_datetime(chrono::Utc::now());
        let note =
            self.unlaunched_transcript
                .take()
                .zip(launch_error)
                .map(|(transcript, summary)| {
                    let trailer = Trailer {
                        finished_at: Some(finished_at),
                        launch_error: Some(summary),
                        watchdog_notes: self.watchdog_notes(),
                        ..Trailer::default()
                    };
                    (transcript, render_trailer(&trailer, 0, true))
                });
        let conclusion = self
            .lifecycle
            .decide(None, MarkerVerdict::Missing(String::new()));
        self.commit(conclusion, finished_at, note, myself);
    }

    /// Commits the decided outcome in a task (after writing `note` to the transcript of a
    /// worker that never ran), unless a state write already failed: then nothing more is
    /// written and the attempt stays unresolved.
    fn commit(
        &mut self,
        conclusion: Conclusion,
        finished_at: Timestamp,
        note: Option<(TranscriptFile, String)>,
        myself: &ActorRef<AttemptMsg>,
    ) {
        tracing::info!(status = %conclusion.decision.status, "outcome decided");
        let Some(attempt) = self.attempt.clone() else {
            return;
        };
        if let Some(message) = conclusion.unresolved {
            tracing::info!(failure = %message, "outcome not committed after an earlier state write failure");
            let failure = RecordFailure::RunningRecord {
                message,
                decided: conclusion.unresolved_decided,
            };
            let outcome = AttemptOutcome::Unresolved {
                decision: conclusion.decision,
                failure,
                attempt: Box::new(attempt.clone()),
            };
            return self.conclude(attempt.id, outcome);
        }
        let outcome = OutcomeRecord {
            attempt_id: attempt.id.clone(),
            plan: attempt.snapshot.clone(),
            phase: attempt.phase.clone(),
            status: conclusion.decision.status,
            summary: conclusion.decision.summary.clone(),
            started_at: attempt.started_at,
            finished_at,
            execution_workspace: attempt.execution_workspace.clone(),
            artifacts: Artifacts {
                prompt_path: attempt.prompt_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
            },
            exit_code: conclusion.exit.code,
            signal: conclusion.exit.signal,
            duration_ms: Some(
                self.started
                    .elapsed()
                    .as_millis()
                    .try_into()
                    .unwrap_or(u64::MAX),
            ),
            output_bytes: Some(self.output),
            phase_attempt: Some(self.phase_attempt),
            agent_cmd: Some(
                self.spec.settings.templates[self.spec.template_index]
                    .raw()
                    .to_owned(),
            ),
            watchdog_losses: u32::try_from(self.watchdog_losses.len())
                .ok()
                .filter(|losses| *losses > 0),
        };
        let policy = self.retry_inputs(conclusion.decision.status, &attempt);
        self.committing = Some(conclusion.decision);
        let store = self.spec.store.clone();
        let target = myself.clone();
        self.tasks.push(tokio::spawn(
            async move {
                if let Some((transcript, text)) = note {
                    let written = transcript
                        .append(Arc::new(text.into_bytes()))
                        .await
                        .unwrap_or_else(|_| Err(io::Error::other("transcript thread stopped")));
                    if let Err(error) = written {
                        tracing::warn!(%error, "could not note the launch failure in the transcript");
                    }
                }
                let retry = match policy {
                    Some(policy) => policy.decide().await,
                    None => None,
                };
                let schedule = retry.as_ref().map(|retry| retry.schedule.clone());
                let result = match call(&store, |reply| StoreMsg::Commit {
                    outcome: Box::new(outcome),
                    schedule,
                    reply,
                })
                .await
                {
                    Some(Ok(_)) => Ok(retry),
                    Some(Err(CommitError::StateWrite(error))) => {
                        Err(RecordFailure::OutcomeRecord(error))
                    }
                    Some(Err(error)) => Err(RecordFailure::OutcomeWrite(error)),
                    None => Err(RecordFailure::OutcomeRecord(StoreError::Stopped)),
                };
                notify(&target, AttemptMsg::Committed(Box::new(result)));
            }
            .instrument(self.spec.span.clone()),
        ));
    }

    fn on_committed(&mut self, result: Result<Option<ScheduledRetry>, RecordFailure>) {
        let (Some(decision), Some(attempt)) = (self.committing.take(), self.attempt.clone()) else {
            return;
        };
        let outcome = match result {
            Ok(retry) => {
                tracing::info!(status = %decision.status, "outcome committed");
                self.emit(RunEvent::OutcomeCommitted {
                    phase_id: attempt.phase.id.clone(),
                    status: decision.status,
                    duration_ms: self.duration_ms(),
                    summary: decision.summary.clone(),
                    stdout_bytes: self.output.stdout,
                    stderr_bytes: self.output.stderr,
                    outcome_path: attempt.outcome_path.clone(),
                    transcript_path: attempt.transcript_path.clone(),
                });
                AttemptOutcome::Committed {
                    decision,
                    outcome_path: attempt.outcome_path.clone(),
                    transcript_path: attempt.transcript_path.clone(),
                    retry,
                }
            }
            Err(failure) => {
                tracing::info!(%failure, "outcome not committed; attempt stays unresolved");
                AttemptOutcome::Unresolved {
                    decision,
                    failure,
                    attempt: Box::new(attempt.clone()),
                }
            }
        };
        self.conclude(attempt.id, outcome);
    }

    /// What the retry decision needs, for an attempt whose status may be retried.
    fn retry_inputs(&self, status: AttemptStatus, attempt: &ActiveAttempt) -> Option<RetryInputs> {
        if !is_retryable(status) {
            return None;
        }
        Some(RetryInputs {
            phase_id: attempt.phase.id.clone(),
            status,
            template_index: self.spec.template_index,
            ledger: self.spec.turn.ledger.clone(),
            settings: self.spec.settings.clone(),
            transcript_path: attempt.transcript_path.clone(),
        })
    }

    fn conclude(&mut self, attempt_id: String, outcome: AttemptOutcome) {
        // The run supervisor stops this actor (and with it any remaining child) once it has
        // the report; the machine is done, so late messages change nothing.
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

/// What the retry policy decides from, after a retryable attempt.
struct RetryInputs {
    phase_id: String,
    status: AttemptStatus,
    template_index: usize,
    ledger: RetryLedger,
    settings: Arc<RunSettings>,
    transcript_path: String,
}

/// How much of the transcript's end is searched for a provider's reset time: the message that
/// ended the attempt is near the end, and the search must not cost memory in proportion to
/// the output.
const RESET_SEARCH_BYTES: u64 = 64 * 1024;

impl RetryInputs {
    /// The pure policy decision, after a rate limit with the reset time found at the end of
    /// the output (read off the runtime threads, with the machine's local time zone for clock
    /// times without one).
    async fn decide(self) -> Option<ScheduledRetry> {
        let now = chrono::Utc::now();
        let hint = if self.status == AttemptStatus::RateLimited {
            let path = self.transcript_path.clone();
            off_runtime(move || {
                let (tail, _) = file_tail::read_end(Path::new(&path), RESET_SEARCH_BYTES).ok()?;
                find_reset(&output_text(&tail), now, &chrono::Local)
            })
            .await
        } else {
            None
        };
        let finished = FinishedAttempt {
            status: self.status,
            template_index: self.template_index,
            reset_at: hint.as_ref().map(|hint| hint.at),
        };
        let settings = &self.settings;
        let step = next_step(
            &finished,
            &self.ledger,
            &settings.retry,
            &settings.rate_limit,
            settings.templates.len(),
            now,
        );
        match &step {
            NextStep::RetryAfter {
                not_before,
                attempt,
                of,
                template_index,
                reason,
                ..
            } => tracing::info!(
                status = %self.status,
                next = "retry",
                not_before = %not_before,
                attempt,
                of,
                template_index,
                reason = reason.as_str(),
                "retry policy decided"
            ),
            NextStep::Stop(reason) => tracing::info!(
                status = %self.status,
                next = "stop",
                reason = reason.describe(),
                "retry policy decided"
            ),
        }
        let due = match &step {
            NextStep::RetryAfter { not_before, .. } => *not_before,
            NextStep::Stop(_) => return None,
        };
        let schedule = RetrySchedule::from_step(&self.phase_id, self.status, &step)?;
        let reset_phrase = hint
            .filter(|_| schedule.reason == RetryReason::ResetTime)
            .map(|hint| hint.phrase);
        Some(ScheduledRetry {
            schedule,
            due,
            reset_phrase,
        })
    }
}

/// The agent's output in the transcript's last bytes: without the runner's trailer (its
/// `finished_at` is no reset time), decoded lossily.
fn output_text(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    match text.rfind(TRAILER_SEPARATOR) {
        Some(at) => text[..at].to_owned(),
        None => text.into_owned(),
    }
}

/// Everything the preparation task needs, owned, so it can run beside the actor.
struct PreparationTask {
    store: ActorRef<StoreMsg>,
    location: Arc<PlanLocation>,
    snapshot: Arc<PlanSnapshot>,
    settings: Arc<RunSettings>,
    phase: Phase,
    execution_workspace: String,
    accept: Option<PlanRecord>,
    resolve_abandoned: bool,
    template_index: usize,
    retry_note: Option<RetryNote>,
    attempt_number: u32,
    phase_index: usize,
    events: Emitter,
    span: tracing::Span,
}

impl PreparationTask {
    /// Prepared record → prompt → transcript header → console → spawn → identity.
    async fn run(self) -> Result<Launch, SetupFailure> {
        let started_at = Timestamp::from_datetime(chrono::Utc::now());
        let id = attempt_id(started_at, &self.phase.id, uuid::Uuid::new_v4());
        self.span.record("attempt_id", id.as_str());
        let layout = &self.location.layout;
        let attempt = ActiveAttempt {
            id: id.clone(),
            status: ActiveStatus::Prepared,
            phase: PhaseRef {
                id: self.phase.id.clone(),
                title: self.phase.title.clone(),
            },
            snapshot: SnapshotRef {
                path: self.snapshot.path.clone(),
                sha256: self.snapshot.sha256.clone(),
            },
            execution_workspace: self.execution_workspace.clone(),
            started_at,
            prompt_path: layout.prompt_path(&id),
            transcript_path: layout.transcript_path(&id),
            outcome_path: layout.outcome_path(&id),
            process: None,
        };
        let preparation = Preparation {
            attempt: attempt.clone(),
            accept: self.accept.clone(),
            resolve_abandoned_at: self.resolve_abandoned.then_some(started_at),
        };
        let prepared = call(&self.store, |reply| StoreMsg::Prepare {
            preparation: Box::new(preparation),
            reply,
        })
        .await
        .unwrap_or(Err(StoreError::Stopped))
        .map_err(|error| SetupFailure::NotPrepared {
            attempt_id: id.clone(),
            error,
        })?;
        tracing::info!(attempt_id = %id, phase_id = %attempt.phase.id, "attempt prepared");
        let phase_attempt = prepared
            .committed_outcomes
            .iter()
            .filter(|outcome| outcome.phase_id == attempt.phase.id)
            .count()
            .saturating_add(1)
            .try_into()
            .unwrap_or(u32::MAX);
        self.events.emit(
            Some(&id),
            RunEvent::AttemptPrepared {
                phase_id: attempt.phase.id.clone(),
                title: attempt.phase.title.clone(),
                phase_index: self.phase_index,
                phases: self.snapshot.plan.phases.len(),
                phase_attempt,
                attempt: self.attempt_number,
                of: self.settings.retry.max_attempts,
                agent_cmd: self.settings.templates[self.template_index]
                    .raw()
                    .to_owned(),
                prompt_path: attempt.prompt_path.clone(),
                transcript_path: attempt.transcript_path.clone(),
            },
        );

        let template = &self.settings.templates[self.template_index];
        let argv = template.render(&PlaceholderValues {
            prompt_file: &attempt.prompt_path,
            workspace: &attempt.execution_workspace,
            run_id: &id,
            transcript_file: &attempt.transcript_path,
            state_file: &layout.state_path(),
        });
        let prompt = render_prompt(&PromptContext {
            plan_workspace_path: &self.location.workspace,
            execution_workspace_path: &attempt.execution_workspace,
            plan_path: &self.snapshot.path,
            state_path: &layout.state_path(),
            run_id: &id,
            transcript_path: &attempt.transcript_path,
            preamble: &self.snapshot.plan.preamble,
            phase: &self.phase,
            state: &prepared,
            retry: self.retry_note.as_ref(),
        });
        let header = render_header(&TranscriptHeader {
            attempt_id: &attempt.id,
            phase_id: &attempt.phase.id,
            phase_title: &attempt.phase.title,
            plan_path: &self.snapshot.path,
            state_path: &layout.state_path(),
            plan_workspace: &self.location.workspace,
            execution_workspace: &attempt.execution_workspace,
            started_at: attempt.started_at,
            agent_cmd: template.raw(),
            argv: &argv,
        });
        let prompt = prompt.into_bytes();
        let artifacts = {
            let (prompt_path, transcript_path, prompt) = (
                attempt.prompt_path.clone(),
                attempt.transcript_path.clone(),
                prompt.clone(),
            );
            off_runtime(move || write_artifacts(&prompt_path, &prompt, &transcript_path, &header))
                .await
        };
        let transcript = match artifacts
            .map_err(SetupError::Artifact)
            .and_then(|file| TranscriptFile::start(file).map_err(SetupError::TranscriptThread))
        {
            Ok(transcript) => transcript,
            Err(error) => {
                return Err(SetupFailure::Setup {
                    attempt,
                    phase_attempt,
                    error,
                });
            }
        };
        // Everything that can fail for lack of resources is set up before the launch, so a
        // failure here never leaves a worker without its supervision.
        let launch_failure = |summary: String, transcript| SetupFailure::Launch {
            attempt: attempt.clone(),
            phase_attempt,
            transcript,
            summary,
        };

        let child = match spawn::spawn_worker(&argv, &attempt.execution_workspace, &attempt.id) {
            Ok(child) => child,
            Err(error) => {
                let program = argv.first().cloned().unwrap_or_default();
                let cwd = attempt.execution_workspace.clone();
                let problem =
                    off_runtime(move || spawn::launch_problem(&program, &cwd, &error)).await;
                let summary = format!("could not launch agent command: {problem}");
                return Err(launch_failure(summary, transcript));
            }
        };
        let Some(pid) = child.id() else {
            // The child was reaped already; tokio forgets its pid then. Treat like a launch
            // we cannot supervise.
            return Err(launch_failure(
                "could not launch agent command: the process vanished at once".into(),
                transcript,
            ));
        };
        let identity = match off_runtime(move || proc::identity_of(pid)).await {
            Ok(identity) => Some(identity),
            Err(error) => {
                tracing::warn!(pid, %error, "process identity unavailable");
                None
            }
        };
        Ok(Launch {
            attempt,
            phase_attempt,
            child,
            pid,
            identity,
            transcript,
            prompt,
        })
    }
}

/// Creates the prompt (exclusively) and the transcript with its header.
fn write_artifacts(
    prompt_path: &str,
    prompt: &[u8],
    transcript_path: &str,
    header: &str,
) -> io::Result<File> {
    durable::write_new(Path::new(prompt_path), prompt, "prompt")?;
    durable::write_new(
        Path::new(transcript_path),
        header.as_bytes(),
        "transcript-header",
    )
}

/// Writes the prompt to the worker's stdin and closes it. A worker that never reads stdin
/// must not stall anything: this runs on its own and is abandoned at cleanup. A closed pipe
/// (EPIPE) just means the worker did not want it.
async fn write_prompt(mut stdin: ChildStdin, prompt: Vec<u8>) {
    let _ = stdin.write_all(&prompt).await;
    let _ = stdin.shutdown().await;
}

async fn wait_for_exit(child: &mut Child) -> ChildExit {
    use std::os::unix::process::ExitStatusExt;
    match child.wait().await {
        Ok(status) => ChildExit {
            code: status.code(),
            signal: status.signal(),
        },
        Err(error) => {
            tracing::error!(%error, "waiting for the worker failed");
            ChildExit {
                code: None,
                signal: None,
            }
        }
    }
}

fn effect_name(effect: &AttemptEffect) -> &'static str {
    match effect {
        AttemptEffect::CancelTimers => "cancel-timers",
        AttemptEffect::BoundConsole => "bound-console",
        AttemptEffect::TerminateGroup => "terminate-group",
        AttemptEffect::KillNow => "kill-now",
        AttemptEffect::StartLeakGrace => "start-leak-grace",
        AttemptEffect::SweepAfterExit => "sweep-after-exit",
        AttemptEffect::StartDrainLimit => "start-drain-limit",
        AttemptEffect::CloseReaders => "close-readers",
        AttemptEffect::Record(_) => "record",
        AttemptEffect::RecordWithoutWorker { .. } => "record-without-worker",
        AttemptEffect::ConcludeNotPrepared => "conclude-not-prepared",
    }
}

/// A validated limit in seconds as a duration. A limit too large for the clock (1e300 is
/// finite and positive, so valid) can never be reached: it means no deadline at all.
fn limit_duration(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}
