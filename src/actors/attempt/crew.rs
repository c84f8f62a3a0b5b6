//! The actors an attempt runs once its worker is launched — group killer, deadline timer,
//! marker parser, stop scanner, transcript writer and one pipe reader per stream — started
//! linked to the attempt supervisor, with the notification receiver beside them, and stopped
//! together once the outcome is decided.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef, SpawnErr};
use tokio::io::AsyncRead;
use tokio::net::unix::pipe;

use super::deadline_timer::{DeadlineTimer, TimerArgs, TimerMsg};
use super::group_killer::{GroupKiller, KillerArgs, KillerMsg};
use super::marker_parser::{MarkerMsg, MarkerParser};
use super::messages::AttemptMsg;
use super::notifications;
use super::pipe_reader::{PipeReader, ReaderArgs, ReaderMsg};
use super::stop_scanner::{ScanArgs, ScanMsg, StopScanner};
use super::transcript_writer::{ConsoleBound, TranscriptWriter, WriterArgs, WriterMsg};
use crate::actors::observer::Emitter;
use crate::domain::failure::ExecutionFailure;
use crate::domain::output_stream::OutputStream;
use crate::invocation::RunSettings;
use crate::platform::activity_sampler::{ActivitySampler, AttemptProcesses};
use crate::platform::console::Console;
use crate::platform::notify_socket::{NotifyReceiver, NotifySocket};
use crate::platform::proc::ChildSnapshot;
use crate::platform::transcript_file::TranscriptFile;

/// The attempt's actors.
pub(crate) struct Crew {
    pub(crate) writer: ActorRef<WriterMsg>,
    pub(crate) marker: ActorRef<MarkerMsg>,
    pub(crate) scanner: Option<ActorRef<ScanMsg>>,
    pub(crate) timer: Option<ActorRef<TimerMsg>>,
    pub(crate) killer: ActorRef<KillerMsg>,
    pub(crate) readers: Vec<ActorRef<ReaderMsg>>,
    /// Bounds the live console once the worker is being stopped or has exited.
    pub(crate) console_bound: ConsoleBound,
    /// The thread reading the worker's notifications, until the socket is drained.
    pub(crate) notifications: Option<NotifyReceiver>,
}

/// What the crew is started for.
pub(crate) struct CrewArgs<'a> {
    pub(crate) supervisor: &'a ActorRef<AttemptMsg>,
    pub(crate) settings: &'a RunSettings,
    /// The worker's process group (its pid: it leads a session of its own).
    pub(crate) pgid: u32,
    /// The worker's start time, to tell its descendants from children the handler inherited.
    pub(crate) worker_started_ticks: Option<u64>,
    pub(crate) inherited: Arc<ChildSnapshot>,
    /// When the worker was started: the clocks count from here.
    pub(crate) launched: Instant,
    /// The socket the worker's `NOTIFY_SOCKET` names, if it has one.
    pub(crate) notify_socket: Option<NotifySocket>,
    pub(crate) transcript: TranscriptFile,
    pub(crate) transcript_path: String,
    pub(crate) attempt_id: String,
    pub(crate) console: Option<Arc<Console>>,
    pub(crate) events: Emitter,
    /// The attempt's span, which every actor of the crew logs in.
    pub(crate) span: tracing::Span,
}

impl Crew {
    /// Starts every actor but the readers ([`Crew::start_readers`] follows the launch), and
    /// the notification receiver. Spawning can only fail on a panic inside `pre_start` (none
    /// of them does I/O or takes an OS resource there), so a failure is a bug, returned as
    /// such.
    pub(crate) async fn start(args: CrewArgs<'_>) -> Result<Self, SpawnErr> {
        let cell = args.supervisor.get_cell();
        let supervisor = args.supervisor.clone();
        let settings = args.settings;
        // Who belongs to the attempt: the notifications' senders and the sampled processes.
        let processes = Arc::new(AttemptProcesses::new(
            args.pgid,
            args.worker_started_ticks,
            args.inherited.clone(),
        ));
        let (killer, _) = Actor::spawn_linked(
            None,
            GroupKiller,
            KillerArgs {
                pgid: args.pgid,
                worker_started_ticks: args.worker_started_ticks,
                inherited: args.inherited,
                supervisor: supervisor.clone(),
                span: args.span.clone(),
            },
            cell.clone(),
        )
        .await?;
        // Always: besides the deadlines it keeps the agent's latest status.
        let idle_timeout = settings.idle_timeout_seconds.and_then(limit_duration);
        let (timer, _) = Actor::spawn_linked(
            None,
            DeadlineTimer,
            TimerArgs {
                timeout: settings.timeout_seconds.and_then(limit_duration),
                idle_timeout,
                launched: args.launched,
                sampler: idle_timeout
                    .map(|_| ActivitySampler::new(processes.clone(), args.launched)),
                supervisor: supervisor.clone(),
                events: args.events.clone(),
                attempt_id: args.attempt_id.clone(),
                span: args.span.clone(),
            },
            cell.clone(),
        )
        .await?;
        let notifications = args.notify_socket.and_then(|socket| {
            notifications::start(socket, processes, timer.clone(), supervisor.clone())
        });
        let (marker, _) =
            Actor::spawn_linked(None, MarkerParser, args.span.clone(), cell.clone()).await?;
        let scanner = if settings.stop_patterns.is_empty() {
            None
        } else {
            let (scanner, _) = Actor::spawn_linked(
                None,
                StopScanner,
                ScanArgs {
                    patterns: settings.stop_patterns.clone(),
                    supervisor: supervisor.clone(),
                    span: args.span.clone(),
                },
                cell.clone(),
            )
            .await?;
            Some(scanner)
        };
        let (console_bound, bounded) = ConsoleBound::new();
        let (writer, _) = Actor::spawn_linked(
            None,
            TranscriptWriter,
            WriterArgs {
                transcript: args.transcript,
                transcript_path: args.transcript_path,
                console: args.console,
                events: args.events,
                attempt_id: args.attempt_id,
                marker: marker.clone(),
                scanner: scanner.clone(),
                // Output is a sign of life only to an idle limit: without one, the hot path
                // sends the timer nothing.
                timer: idle_timeout.map(|_| timer.clone()),
                supervisor,
                console_bound: bounded,
                span: args.span,
            },
            cell,
        )
        .await?;
        Ok(Self {
            writer,
            marker,
            scanner,
            timer: Some(timer),
            killer,
            readers: Vec::new(),
            console_bound,
            notifications,
        })
    }

    /// Starts one reader per pipe; returns why a reader could not be started, if one could
    /// not (the attempt is then stopped as an execution failure).
    pub(crate) async fn start_readers(
        &mut self,
        stdout: Option<pipe::Receiver>,
        stderr: Option<pipe::Receiver>,
        supervisor: &ActorRef<AttemptMsg>,
        span: &tracing::Span,
    ) -> Vec<ExecutionFailure> {
        let pipes: [(OutputStream, Option<Box<dyn AsyncRead + Send + Unpin>>); 2] = [
            (
                OutputStream::Stdout,
                stdout.map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
            ),
            (
                OutputStream::Stderr,
                stderr.map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
            ),
        ];
        let mut failures = Vec::new();
        for (stream, pipe) in pipes {
            let Some(pipe) = pipe else { continue };
            let started = Actor::spawn_linked(
                None,
                PipeReader,
                ReaderArgs {
                    stream,
                    pipe,
                    writer: self.writer.clone(),
                    supervisor: supervisor.clone(),
                    span: span.clone(),
                },
                supervisor.get_cell(),
            )
            .await;
            match started {
                Ok((reader, _)) => self.readers.push(reader),
                Err(error) => failures.push(ExecutionFailure::ReaderStart {
                    stream,
                    detail: error.to_string(),
                }),
            }
        }
        failures
    }

    /// Stops every actor of the crew.
    pub(crate) fn stop(&self) {
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

/// A validated limit in seconds as a duration. A limit too large for the clock (1e300 is
/// finite and positive, so valid) can never be reached: it means no deadline at all.
fn limit_duration(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}
