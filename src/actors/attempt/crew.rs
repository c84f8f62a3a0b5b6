//! The actors an attempt runs once its worker is launched, started linked to the attempt
//! supervisor with the notification receiver beside them, and stopped together once the
//! outcome is decided.

use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorCell, ActorRef, DerivedActorRef, SpawnErr};
use tokio::sync::{oneshot, watch};

use super::deadline_timer::{DeadlineTimer, TimerArgs, TimerMsg, limit_duration};
use super::group_killer::{GroupKiller, KillerArgs, KillerMsg};
use super::marker_parser::{MarkerArgs, MarkerParser};
use super::messages::{AttemptMsg, AttemptSpec, Output};
use super::notifications;
use super::pipe_reader::{Pipe, PipeReader, ReaderArgs};
use super::stop_scanner::{ScanArgs, StopScanner};
use super::transcript_writer::{TranscriptWriter, WriterArgs, WriterMsg};
use crate::domain::failure::ExecutionFailure;
use crate::domain::output_stream::OutputStream;
use crate::domain::state::ActiveAttempt;
use crate::platform::activity_sampler::{ActivitySampler, AttemptProcesses};
use crate::platform::durable::TranscriptFile;
use crate::platform::notify_socket::NotifySocket;

pub(crate) struct Crew {
    pub(crate) writer: ActorRef<WriterMsg>,
    pub(crate) marker: ActorRef<Output>,
    pub(crate) scanner: Option<ActorRef<Output>>,
    pub(crate) timer: ActorRef<TimerMsg>,
    pub(crate) killer: ActorRef<KillerMsg>,
    pub(crate) readers: Vec<ActorCell>,
    /// Bounds the live console once the worker is being stopped or has exited.
    pub(crate) console_bound: watch::Sender<bool>,
    /// Closes our read ends of the pipes (a process outside the group holds one open).
    pub(crate) close_readers: watch::Sender<bool>,
    /// Asks the notification receiver to drain the socket (until it is asked).
    pub(crate) notifications: Option<oneshot::Sender<()>>,
}

impl Crew {
    /// Starts every actor but the readers, and the notification receiver. Spawning fails only
    /// on a panic inside a `pre_start` (none does I/O there): a bug, returned as such.
    pub(crate) async fn start(
        supervisor: &ActorRef<AttemptMsg>,
        spec: &AttemptSpec,
        attempt: &ActiveAttempt,
        pgid: u32,
        worker_started_ticks: Option<u64>,
        notify_socket: Option<NotifySocket>,
        transcript: TranscriptFile,
    ) -> Result<Self, SpawnErr> {
        // The clocks count from here: the worker has just been started.
        let launched = Instant::now();
        let cell = supervisor.get_cell();
        let supervisor = supervisor.clone();
        let settings = &spec.settings;
        let span = spec.span.clone();
        let inherited = spec.inherited_children.clone();
        // Who belongs to the attempt: the notifications' senders and the sampled processes.
        let processes = Arc::new(AttemptProcesses::new(
            pgid,
            worker_started_ticks,
            inherited.clone(),
        ));
        let killer = KillerArgs {
            pgid,
            worker_started_ticks,
            inherited,
            supervisor: supervisor.clone(),
            span: span.clone(),
        };
        let (killer, _) = Actor::spawn_linked(None, GroupKiller, killer, cell.clone()).await?;
        // Always: besides the deadlines it keeps the agent's latest status.
        let idle_limit = settings.idle_timeout_seconds.and_then(limit_duration);
        let timer = TimerArgs {
            timeout_seconds: settings.timeout_seconds,
            idle_timeout_seconds: settings.idle_timeout_seconds,
            launched,
            sampler: idle_limit.map(|_| ActivitySampler::new(processes.clone(), launched)),
            supervisor: supervisor.clone(),
            events: spec.events.clone(),
            attempt_id: attempt.id.clone(),
            span: span.clone(),
        };
        let (timer, _) = Actor::spawn_linked(None, DeadlineTimer, timer, cell.clone()).await?;
        let notifications = notify_socket.map(|socket| {
            notifications::start(
                socket,
                launched,
                processes,
                timer.clone(),
                supervisor.clone(),
            )
        });
        let marker = MarkerArgs {
            supervisor: supervisor.clone(),
            span: span.clone(),
        };
        let (marker, _) = Actor::spawn_linked(None, MarkerParser, marker, cell.clone()).await?;
        let scanner = if settings.stop_patterns.is_empty() {
            None
        } else {
            let scan = ScanArgs {
                patterns: settings.stop_patterns.clone(),
                supervisor: supervisor.clone(),
                span: span.clone(),
            };
            Some(
                Actor::spawn_linked(None, StopScanner, scan, cell.clone())
                    .await?
                    .0,
            )
        };
        let (console_bound, bounded) = watch::channel(false);
        let writer = WriterArgs {
            transcript,
            transcript_path: attempt.transcript_path.clone(),
            console: spec.console.clone(),
            events: spec.events.clone(),
            attempt_id: attempt.id.clone(),
            // Output is a sign of life only to an idle limit: without one, the hot path
            // sends the timer nothing.
            timer: idle_limit.map(|_| timer.clone()),
            supervisor,
            console_bound: bounded,
            span,
        };
        let (writer, _) = Actor::spawn_linked(None, TranscriptWriter, writer, cell).await?;
        Ok(Self {
            writer,
            marker,
            scanner,
            timer,
            killer,
            readers: Vec::new(),
            console_bound,
            close_readers: watch::channel(false).0,
            notifications,
        })
    }

    /// Starts one reader per pipe; returns why a reader could not be started, if one could
    /// not. A stream without a reader has ended for the output's consumers.
    pub(crate) async fn start_readers(
        &mut self,
        pipes: [(OutputStream, Option<Pipe>); 2],
        supervisor: &ActorRef<AttemptMsg>,
        span: &tracing::Span,
    ) -> Vec<ExecutionFailure> {
        let mut failures = Vec::new();
        for (stream, pipe) in pipes {
            let Some(pipe) = pipe else {
                self.end_stream(stream);
                continue;
            };
            let args = ReaderArgs {
                stream,
                pipe,
                writer: self.writer.get_derived(),
                analysers: self.analysers(),
                supervisor: supervisor.clone(),
                closed: self.close_readers.subscribe(),
                span: span.clone(),
            };
            match Actor::spawn_linked(None, PipeReader, args, supervisor.get_cell()).await {
                Ok((reader, _)) => self.readers.push(reader.get_cell()),
                Err(error) => {
                    self.end_stream(stream);
                    failures.push(ExecutionFailure::ReaderStart {
                        stream,
                        detail: error.to_string(),
                    });
                }
            }
        }
        failures
    }

    /// The consumers of the output besides the writer.
    fn analysers(&self) -> Vec<DerivedActorRef<Output>> {
        std::iter::once(&self.marker)
            .chain(&self.scanner)
            .map(ActorRef::get_derived)
            .collect()
    }

    /// Tells the output's consumers that nothing comes from `stream` (no reader reads it).
    pub(crate) fn end_stream(&self, stream: OutputStream) {
        let _ = self
            .writer
            .send_message(WriterMsg::Output(Output::Ended(stream)));
        for analyser in std::iter::once(&self.marker).chain(&self.scanner) {
            let _ = analyser.send_message(Output::Ended(stream));
        }
    }

    pub(crate) fn stop(&self) {
        for actor in [
            self.writer.get_cell(),
            self.marker.get_cell(),
            self.killer.get_cell(),
            self.timer.get_cell(),
        ]
        .into_iter()
        .chain(self.scanner.iter().map(|scanner| scanner.get_cell()))
        .chain(self.readers.iter().cloned())
        {
            actor.stop(None);
        }
    }
}
