//! The actors an attempt runs once its worker is launched, started linked to the attempt
//! supervisor with the notification receiver beside them, and stopped together once the
//! outcome is decided.

use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorCell, ActorRef, DerivedActorRef, SpawnErr};
use tokio::sync::watch;

use super::deadline_timer::{DeadlineTimer, TimerArgs, TimerMsg, limit_duration};
use super::group_killer::{GroupKiller, KillerArgs, KillerMsg};
use super::marker_parser::{MarkerArgs, MarkerParser};
use super::messages::{AttemptMsg, Output};
use super::notifications;
use super::pipe_reader::{Pipe, PipeReader, ReaderArgs};
use super::stop_scanner::{ScanArgs, StopScanner};
use super::transcript_writer::{TranscriptWriter, WriterArgs, WriterMsg};
use crate::actors::observer::Emitter;
use crate::domain::failure::ExecutionFailure;
use crate::domain::output_stream::OutputStream;
use crate::invocation::RunSettings;
use crate::platform::activity_sampler::{ActivitySampler, AttemptProcesses};
use crate::platform::console::Console;
use crate::platform::durable::TranscriptFile;
use crate::platform::notify_socket::{NotifyReceiver, NotifySocket};
use crate::platform::proc::ChildSnapshot;

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
    /// Until the socket is drained.
    pub(crate) notifications: Option<NotifyReceiver>,
}

pub(crate) struct CrewArgs<'a> {
    pub(crate) supervisor: &'a ActorRef<AttemptMsg>,
    pub(crate) settings: &'a RunSettings,
    /// The worker's process group (its pid).
    pub(crate) pgid: u32,
    /// The worker's start time, to tell its descendants from children the handler inherited.
    pub(crate) worker_started_ticks: Option<u64>,
    pub(crate) inherited: Arc<ChildSnapshot>,
    /// The clocks count from here.
    pub(crate) launched: Instant,
    pub(crate) notify_socket: Option<NotifySocket>,
    pub(crate) transcript: TranscriptFile,
    pub(crate) transcript_path: String,
    pub(crate) attempt_id: String,
    pub(crate) console: Option<Arc<Console>>,
    pub(crate) events: Emitter,
    pub(crate) span: tracing::Span,
}

impl Crew {
    /// Starts every actor but the readers, and the notification receiver. Spawning fails only
    /// on a panic inside a `pre_start` (none does I/O there): a bug, returned as such.
    pub(crate) async fn start(args: CrewArgs<'_>) -> Result<Self, SpawnErr> {
        let cell = args.supervisor.get_cell();
        let supervisor = args.supervisor.clone();
        let settings = args.settings;
        let span = args.span;
        // Who belongs to the attempt: the notifications' senders and the sampled processes.
        let processes = Arc::new(AttemptProcesses::new(
            args.pgid,
            args.worker_started_ticks,
            args.inherited.clone(),
        ));
        let killer = KillerArgs {
            pgid: args.pgid,
            worker_started_ticks: args.worker_started_ticks,
            inherited: args.inherited,
            supervisor: supervisor.clone(),
            span: span.clone(),
        };
        let (killer, _) = Actor::spawn_linked(None, GroupKiller, killer, cell.clone()).await?;
        // Always: besides the deadlines it keeps the agent's latest status.
        let idle_limit = settings.idle_timeout_seconds.and_then(limit_duration);
        let timer = TimerArgs {
            timeout_seconds: settings.timeout_seconds,
            idle_timeout_seconds: settings.idle_timeout_seconds,
            launched: args.launched,
            sampler: idle_limit.map(|_| ActivitySampler::new(processes.clone(), args.launched)),
            supervisor: supervisor.clone(),
            events: args.events.clone(),
            attempt_id: args.attempt_id.clone(),
            span: span.clone(),
        };
        let (timer, _) = Actor::spawn_linked(None, DeadlineTimer, timer, cell.clone()).await?;
        let notifications = args.notify_socket.map(|socket| {
            notifications::start(socket, processes, timer.clone(), supervisor.clone())
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
            transcript: args.transcript,
            transcript_path: args.transcript_path,
            console: args.console,
            events: args.events,
            attempt_id: args.attempt_id,
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
