//! AttemptSupervisor: one per attempt. It owns the attempt's actors, feeds its messages to the
//! lifecycle machine ([`crate::domain::lifecycle::attempt`]) and carries out the effects. Its
//! handlers never wait: preparation, the `running` record, Verify checks and the commit run as
//! tasks that report back (docs/architecture.md, "Attempt lifecycle").

mod commit;
mod crew;
mod deadline_timer;
mod group_killer;
mod marker_parser;
mod messages;
mod notifications;
mod pipe_reader;
mod prepare;
mod recording;
mod stop_scanner;
mod transcript_writer;
mod verify;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::task::JoinHandle;
use tracing::Instrument;

use self::crew::Crew;
use self::group_killer::KillerMsg;
use self::pipe_reader::Pipe;
use self::prepare::{Launch, SetupFailure};
use self::recording::Findings;
use self::transcript_writer::WriterMsg;
use self::verify::CheckJob;
use super::state_store::StoreMsg;
use super::{call, notify, off_runtime};
use crate::domain::decision::ChildExit;
use crate::domain::events::RunEvent;
use crate::domain::failure::ExecutionFailure;
use crate::domain::identity::ProcessIdentity;
use crate::domain::lifecycle::attempt::{
    AttemptEffect, AttemptEvent, AttemptLifecycle, RecordingInput,
};
use crate::domain::lifecycle::run::RecordFailure;
use crate::domain::notify::NotifyTally;
use crate::domain::output_stream::OutputStream;
use crate::domain::state::{ActiveAttempt, ActiveStatus, StateWriteError};
use crate::domain::timestamp::Timestamp;
use crate::domain::token_usage::publication::UsagePublication;
use crate::domain::transcript::Trailer;
use crate::domain::verification::{CheckOutcome, VerifyCheck, VerifyPlan, stop_detail};
use crate::domain::watchdog::{LossReaction, WatchdogLoss};
use crate::platform::durable::TranscriptFile;
use crate::platform::git::{self, NotRecorded, TreeSnapshot};
use crate::platform::helper_process::StopSwitch;
use crate::platform::watchdog;

pub(crate) use self::messages::{AttemptMsg, AttemptSpec};

pub(crate) struct AttemptSupervisor;

pub(crate) struct AttemptState {
    spec: AttemptSpec,
    lifecycle: AttemptLifecycle,
    /// The attempt as durably prepared (and, once recorded, running).
    attempt: Option<ActiveAttempt>,
    crew: Option<Crew>,
    /// The worker's transcript when it never ran (the launch error goes there).
    unlaunched_transcript: Option<TranscriptFile>,
    /// Why the prepared record was not written, until the machine concludes.
    not_prepared: Option<(String, StateWriteError)>,
    started: std::time::Instant,
    /// When the attempt finished and its one duration, measured at that moment
    /// ([`AttemptState::finish_now`]): every record of the attempt carries it.
    finished: Option<(Timestamp, u64)>,
    findings: Findings,
    /// This attempt's number among the phase's attempts in the state.
    phase_attempt: u32,
    check_stop: Option<StopSwitch>,
    notify_tally: Option<NotifyTally>,
    usage_publication: UsagePublication,
    tasks: Vec<JoinHandle<()>>,
    /// Watchdog losses are told to this attempt while it lives.
    _watchdog: watchdog::Subscription,
    watchdog_losses: Vec<WatchdogLoss>,
    /// The work tree before the launch, while changes are to be recorded.
    changes_before: Option<Result<TreeSnapshot, NotRecorded>>,
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
        let verify = VerifyPlan::for_phase(&spec.phase.verify, spec.settings.verify);
        let lifecycle =
            AttemptLifecycle::configured(verify, spec.settings.budget, spec.order.spent_before);
        let mut state = AttemptState {
            spec,
            lifecycle,
            attempt: None,
            crew: None,
            unlaunched_transcript: None,
            not_prepared: None,
            started: std::time::Instant::now(),
            finished: None,
            findings: Findings::default(),
            phase_attempt: 1,
            check_stop: None,
            notify_tally: None,
            usage_publication: UsagePublication::default(),
            tasks: Vec::new(),
            _watchdog: {
                let target = myself.clone();
                watchdog::subscribe(move |loss| {
                    notify(&target, AttemptMsg::WatchdogLost(Box::new(loss)));
                })
            },
            watchdog_losses: Vec::new(),
            changes_before: None,
        };
        let spec = state.spec.clone();
        state.spawn(async move {
            let result = prepare::prepare(spec).await;
            notify(&myself, AttemptMsg::Prepared(Box::new(result)));
        });
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
                AttemptMsg::Event(event) => Some(event),
                AttemptMsg::Prepared(result) => state.on_prepared(*result, &myself).await?,
                AttemptMsg::NotificationsDrained(tally) => {
                    if let Some(counts) = tally.describe() {
                        tracing::info!(notifications = %counts, "notification socket closed");
                    }
                    state.notify_tally = Some(tally);
                    Some(AttemptEvent::NotificationsDrained)
                }
                AttemptMsg::Verdict(verdict) => state.findings.verdict(verdict),
                AttemptMsg::FinalMatch(found) => state.findings.final_match(found),
                AttemptMsg::TrailerWritten { error, output } => {
                    state.findings.trailer(error, output)
                }
                AttemptMsg::ChangesRecorded(changes) => state.findings.changes(changes.map(|c| *c)),
                AttemptMsg::CheckEnded(ended) => Some(state.check_ended(*ended)),
                AttemptMsg::WatchdogLost(loss) => state.on_watchdog_lost(*loss),
            };
            if let Some(event) = event {
                state.feed(event, &myself);
            }
            Ok::<(), ActorProcessingErr>(())
        }
        .instrument(span)
        .await
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
            let failure = ExecutionFailure::ActorFailed {
                detail: error.to_string(),
            };
            state.feed(AttemptEvent::Failed(failure), &myself);
            // What a failed consumer of the output would have reported, its absence says.
            let gathered = match &state.crew {
                Some(crew) => state.findings.consumer_failed(crew, &who),
                None => None,
            };
            if let Some(gathered) = gathered {
                state.feed(gathered, &myself);
            }
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
        // A check still running (the run is ending on a failure) is killed at once: its job
        // runs off the runtime, where no abort reaches it.
        if let Some(stop) = state.check_stop.take() {
            stop.stop();
            stop.stop();
        }
        if let Some(crew) = state.crew.take() {
            crew.stop();
        }
        Ok(())
    }
}

impl AttemptState {
    fn feed(&mut self, event: AttemptEvent, myself: &ActorRef<AttemptMsg>) {
        self.note(&event);
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

    fn note(&mut self, event: &AttemptEvent) {
        if let AttemptEvent::RunningRecorded = event
            && let Some(attempt) = self.attempt.as_mut()
        {
            attempt.status = ActiveStatus::Running;
            tracing::info!("attempt running");
        }
        if let AttemptEvent::GroupEmptied(report) = event {
            tracing::info!(
                leaked = ?report.leaked,
                escaped = ?report.escaped,
                survivors = ?report.survivors,
                "group stopped"
            );
            self.emit(RunEvent::GroupStopped(report.clone()));
        }
    }

    fn execute(&mut self, effect: AttemptEffect, myself: &ActorRef<AttemptMsg>) {
        match effect {
            AttemptEffect::CancelDeadlines => {
                if let Some(crew) = &self.crew {
                    crew.timer.stop(None);
                }
            }
            AttemptEffect::BoundConsole => {
                if let Some(crew) = &self.crew {
                    crew.console_bound.send_replace(true);
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
            AttemptEffect::StartTimer(timer) => {
                myself.send_after(timer.duration(), move || {
                    AttemptEvent::TimerElapsed(timer).into()
                });
            }
            AttemptEffect::DrainNotifications => {
                let drain = self
                    .crew
                    .as_mut()
                    .and_then(|crew| crew.notifications.take());
                // The receiving task answers with the tally once the socket is drained.
                if drain.is_none_or(|drain| drain.send(()).is_err()) {
                    notify(
                        myself,
                        AttemptMsg::NotificationsDrained(NotifyTally::default()),
                    );
                }
            }
            AttemptEffect::CloseReaders => {
                tracing::info!("pipes still open after the group emptied; closing our read ends");
                if let Some(crew) = &self.crew {
                    crew.close_readers.send_replace(true);
                }
            }
            AttemptEffect::Gather(input) => self.gather(input, myself),
            AttemptEffect::PublishUsage(usage) => {
                if self.usage_publication.changed(self.started.elapsed()) {
                    self.emit(RunEvent::Usage {
                        phase_id: self.spec.phase.id.clone(),
                        usage,
                    });
                }
            }
            AttemptEffect::RunCheck(check) => self.run_check(check, myself),
            AttemptEffect::StopCheck => {
                if let Some(cause) = self.lifecycle.cause() {
                    let (kind, detail) = (cause.kind(), stop_detail(cause));
                    tracing::info!(cause = kind, detail, "stopping the verify check");
                    self.emit(RunEvent::StopRequested {
                        cause: kind.to_owned(),
                        detail,
                    });
                }
                if let Some(stop) = &self.check_stop {
                    stop.stop();
                }
            }
            // The switch's second throw skips the grace period.
            AttemptEffect::KillCheckNow => {
                if let Some(stop) = &self.check_stop {
                    stop.stop();
                }
            }
            AttemptEffect::Commit(conclusion) => {
                self.stop_crew();
                self.commit(conclusion);
            }
            AttemptEffect::LeaveUnresolved {
                conclusion,
                failure,
                decided,
            } => {
                self.stop_crew();
                tracing::info!(status = %conclusion.decision.status, "outcome decided");
                tracing::info!(%failure, "outcome not committed after an earlier state write failure");
                let Some(attempt) = self.attempt.clone() else {
                    return;
                };
                let failure = RecordFailure::RunningRecord { failure, decided };
                let spec = self.spec.clone();
                self.spawn(commit::unresolved(
                    spec,
                    attempt,
                    conclusion.decision,
                    failure,
                ));
            }
            AttemptEffect::ConcludeNotPrepared => {
                if let Some((attempt_id, error)) = self.not_prepared.take() {
                    let spec = self.spec.clone();
                    self.spawn(commit::not_prepared(spec, attempt_id, error));
                }
            }
        }
    }

    fn stop_crew(&mut self) {
        if let Some(crew) = self.crew.take() {
            crew.stop();
        }
    }

    fn run_check(&mut self, check: VerifyCheck, myself: &ActorRef<AttemptMsg>) {
        let count = self.spec.phase.verify.len();
        tracing::info!(index = check.index, of = count, first_line = %check.first_line(), "verify check starting");
        self.emit(RunEvent::VerifyStarted {
            phase_id: self.spec.phase.id.clone(),
            index: check.index,
            of: count,
            command_first_line: check.first_line(),
        });
        let writer = self.crew.as_ref().map(|crew| crew.writer.clone());
        let (stop, writer) = match (StopSwitch::new(), writer) {
            (Ok(stop), Some(writer)) => (stop, writer),
            (stop, _) => {
                let reason = match stop {
                    Err(error) => format!("cannot create its stop switch: {error}"),
                    Ok(_) => "the attempt's transcript writer is gone".to_owned(),
                };
                let outcome =
                    CheckOutcome::unstarted(format!("could not start the check: {reason}"));
                let ended = messages::EndedCheck {
                    check,
                    outcome,
                    stopped: false,
                };
                return notify(myself, AttemptMsg::CheckEnded(Box::new(ended)));
            }
        };
        self.check_stop = Some(stop.clone());
        let job = CheckJob {
            check,
            spec: self.spec.clone(),
            writer,
            stop,
        };
        let target = myself.clone();
        self.spawn(async move {
            let ended = off_runtime(move || job.run()).await;
            notify(&target, AttemptMsg::CheckEnded(Box::new(ended)));
        });
    }

    /// A check ended: the attempt's end moves to now, and observers hear how it went.
    fn check_ended(&mut self, ended: messages::EndedCheck) -> AttemptEvent {
        self.check_stop = None;
        self.finish_now();
        let messages::EndedCheck {
            check,
            outcome,
            stopped,
        } = ended;
        self.emit(RunEvent::VerifyFinished {
            phase_id: self.spec.phase.id.clone(),
            index: check.index,
            command_first_line: check.first_line(),
            passed: outcome.passed() && !stopped,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            stopped,
            duration_ms: outcome.duration_ms,
            output_bytes: outcome.output_bytes,
        });
        AttemptEvent::CheckEnded(outcome)
    }

    /// The attempt is finished (its worker is gone, or never ran): its `finished_at`, with its
    /// duration measured at the same moment.
    fn finish_now(&mut self) -> (Timestamp, u64) {
        let duration_ms = self
            .started
            .elapsed()
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX);
        let finished = (Timestamp::from_datetime(chrono::Utc::now()), duration_ms);
        self.finished = Some(finished);
        finished
    }

    /// The watchdog was lost: say so (event now, trailer and outcome later); when no new
    /// watchdog took over, the machine stops the attempt ([`WatchdogLoss::reaction`]).
    fn on_watchdog_lost(&mut self, loss: WatchdogLoss) -> Option<AttemptEvent> {
        tracing::info!(loss = %loss.describe(), "the attempt lost its watchdog");
        self.emit(RunEvent::watchdog_lost(&loss));
        let reaction = loss.reaction();
        self.watchdog_losses.push(loss);
        match reaction {
            LossReaction::Continue => None,
            LossReaction::StopAttempt(detail) => Some(AttemptEvent::Unprotected { detail }),
        }
    }

    fn watchdog_notes(&self) -> Vec<String> {
        self.watchdog_losses
            .iter()
            .map(WatchdogLoss::trailer_line)
            .collect()
    }

    /// Runs `work` in the attempt's span; aborted if the attempt stops first.
    fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        let span = self.spec.span.clone();
        self.tasks.push(tokio::spawn(work.instrument(span)));
    }

    fn emit(&self, event: RunEvent) {
        let attempt_id = self.attempt.as_ref().map(|attempt| attempt.id.as_str());
        self.spec.events.emit(attempt_id, event);
    }

    fn tell_killer(&self, message: KillerMsg) {
        if let Some(crew) = &self.crew {
            notify(&crew.killer, message);
        }
    }

    async fn on_prepared(
        &mut self,
        result: Result<Launch, SetupFailure>,
        myself: &ActorRef<AttemptMsg>,
    ) -> Result<Option<AttemptEvent>, ActorProcessingErr> {
        let launch = match result {
            Ok(launch) => launch,
            Err(SetupFailure::NotPrepared { attempt_id, error }) => {
                tracing::info!(%error, "prepared record not written");
                self.not_prepared = Some((attempt_id, error));
                return Ok(Some(AttemptEvent::PreparedRecordFailed));
            }
            Err(SetupFailure::Setup {
                attempt,
                phase_attempt,
                error,
            }) => {
                self.attempt = Some(attempt);
                self.phase_attempt = phase_attempt;
                let detail = error.to_string();
                return Ok(Some(AttemptEvent::SetupFailed { detail }));
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
                return Ok(Some(AttemptEvent::LaunchFailed { summary }));
            }
        };
        let Launch {
            attempt,
            phase_attempt,
            mut child,
            identity,
            transcript,
            prompt,
            notify_socket,
            changes_before,
        } = launch;
        self.changes_before = changes_before;
        let pid = child.id();
        tracing::info!(pid, pgid = pid, "worker spawned");
        self.spec.events.emit(
            Some(&attempt.id),
            RunEvent::WorkerSpawned { pid, pgid: pid },
        );
        self.attempt = Some(attempt.clone());
        self.phase_attempt = phase_attempt;
        let crew = Crew::start(
            myself,
            &self.spec,
            &attempt,
            pid,
            identity.as_ref().map(|identity| identity.start_time_ticks),
            notify_socket,
            transcript,
        )
        .await;
        let mut crew = match crew {
            Ok(crew) => crew,
            Err(error) => {
                // A bug: nothing would supervise the worker. Dropping it stops its group
                // before this supervisor fails (the run reports an internal error).
                drop(child);
                return Err(error.into());
            }
        };
        if let Some(stdin) = child.stdin.take() {
            self.spawn(write_prompt(stdin, prompt));
        }
        let pipes = [
            (
                OutputStream::Stdout,
                child.stdout.take().map(|pipe| Box::new(pipe) as Pipe),
            ),
            (
                OutputStream::Stderr,
                child.stderr.take().map(|pipe| Box::new(pipe) as Pipe),
            ),
        ];
        let waiter = myself.clone();
        self.spawn(async move {
            let exit = child.wait().await.unwrap_or_else(|error| {
                tracing::error!(%error, "waiting for the worker failed");
                ChildExit {
                    code: None,
                    signal: None,
                }
            });
            tracing::info!(code = exit.code, signal = exit.signal, "worker exited");
            notify(&waiter, AttemptEvent::LeaderExited(exit).into());
        });
        if crew.scanner.is_none() {
            self.findings.no_scanner();
        }
        let reader_failures = crew.start_readers(pipes, myself, &self.spec.span).await;
        self.crew = Some(crew);
        // The group exists and the killer knows it: a held signal is acted on now.
        self.feed(AttemptEvent::Launched, myself);
        self.record_running(&attempt.id, identity, myself);
        for failure in reader_failures {
            self.feed(AttemptEvent::Failed(failure), myself);
        }
        Ok(None)
    }

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
        self.spawn(async move {
            let result = call(&store, |reply| StoreMsg::MarkRunning {
                attempt_id,
                identity,
                reply,
            })
            .await
            .unwrap_or(Err(StateWriteError::Stopped));
            let recorded = match result {
                Ok(()) => AttemptEvent::RunningRecorded,
                Err(error) => AttemptEvent::RunningRecordFailed {
                    detail: error.to_string(),
                },
            };
            notify(&target, recorded.into());
        });
    }

    /// The writer is asked for the trailer; the marker parser's verdict and the stop scanner's
    /// last word come on their own once both streams ended. The three make `Gathered`.
    fn gather(&mut self, input: RecordingInput, myself: &ActorRef<AttemptMsg>) {
        let (finished_at, _) = self.finish_now();
        let Some(crew) = &self.crew else { return };
        let trailer = Trailer {
            exit: Some(input.exit),
            finished_at: Some(finished_at),
            group: input.group,
            pipes_held_open: input.pipes_held_open,
            launch_error: None,
            // The writer adds what happened to the live output.
            console_notes: Vec::new(),
            watchdog_notes: self.watchdog_notes(),
            notes: input.notes,
            notifications: self.notify_tally.and_then(|tally| tally.describe()),
        };
        notify(&crew.writer, WriterMsg::Finish(Box::new(trailer)));
        self.record_changes(myself);
        // A writer that failed before has said all it will.
        if let Some(gathered) = self.findings.start() {
            notify(myself, gathered.into());
        }
    }

    /// Compares the work tree now (the group is stopped) with the one before the launch, in a
    /// task off the runtime; recording waits for it (so Verify checks run after it).
    fn record_changes(&mut self, myself: &ActorRef<AttemptMsg>) {
        let Some(before) = self.changes_before.take() else {
            if let Some(gathered) = self.findings.changes(None) {
                notify(myself, gathered.into());
            }
            return;
        };
        let target = myself.clone();
        self.spawn(async move {
            let changes = off_runtime(move || match before {
                Err(not_recorded) => not_recorded.into_changes(),
                Ok(before) => match git::snapshot_again(&before) {
                    Ok(after) => git::compare(&before, &after),
                    Err(not_recorded) => not_recorded.into_changes(),
                },
            })
            .await;
            notify(
                &target,
                AttemptMsg::ChangesRecorded(Some(Box::new(changes))),
            );
        });
    }
}

/// Writes the prompt to the worker's stdin and closes it, in a task of its own (abandoned at
/// cleanup): a worker that never reads stdin stalls nothing, and EPIPE means it did not want it.
async fn write_prompt(mut stdin: ChildStdin, prompt: Vec<u8>) {
    let _ = stdin.write_all(&prompt).await;
    let _ = stdin.shutdown().await;
}
