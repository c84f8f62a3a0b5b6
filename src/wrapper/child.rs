//! Running the launcher as the wrapper's immediate child, in the wrapper's process group: the
//! prompt on its stdin, each output pipe pumped through a translator, SIGINT and SIGTERM
//! forwarded with a kill grace, and bounded draining after its exit (docs/providers.md,
//! "Processes and signals").

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_tokio::Signals;

use crate::domain::escalation::TERMINATE_GRACE;
use crate::platform::process_group;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::descendants::{Leftover, Reaper, Supervision};
use super::diagnostics::StreamTranslator;
use super::notifier::{Notice, Notifier};
use crate::platform::notify_socket::NOTIFY_SOCKET;

/// How long a signalled child may take to exit before it is killed: half the runner's grace,
/// which leaves the wrapper time to drain and remove its scratch files inside the runner's.
pub const KILL_GRACE: Duration = Duration::from_millis(TERMINATE_GRACE.as_millis() as u64 / 2);

/// After the child's exit, how long a pipe that still has no end of file is read while it has
/// data waiting.
pub const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// After the child's exit, when a pipe is abandoned even if data keeps arriving.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// How long a pipe must be quiet before a held partial line is written.
pub const QUIET_FLUSH: Duration = Duration::from_millis(200);

/// How long a partial line is held at most, however much keeps arriving without a line end.
pub const MAX_HOLD: Duration = Duration::from_secs(1);

/// How often a wrapper run by hand reaps adopted children that exited (it is their subreaper).
const REAP_INTERVAL: Duration = Duration::from_secs(5);

const CHUNK_SIZE: usize = 64 * 1024;

/// The launcher command: found on PATH, run with the wrapper's environment plus `env`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launcher {
    pub program: &'static str,
    pub args: Vec<OsString>,
    pub env: Vec<(&'static str, OsString)>,
}

/// Why the launcher did not run to completion with its output intact: signal handling could
/// not be set up (nothing was launched), the spawn failed, or reading its output, writing the
/// wrapper's or waiting failed.
#[derive(Debug)]
pub enum RunError {
    Signals(io::Error),
    Spawn(io::Error),
    Failed(String),
}

/// How a launched child ended, and what its translators learned.
#[derive(Debug)]
pub struct Finished<O, E> {
    pub status: ExitStatus,
    /// The first SIGINT/SIGTERM the wrapper received, if any.
    pub interrupted: Option<i32>,
    pub stdout: O,
    pub stderr: E,
    pub leftovers: Vec<Leftover>,
}

/// The conventional exit code for `status`: the code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

/// Runs `launcher` to completion with `prompt` on its stdin, its stdout through `stdout` and
/// its stderr through `stderr`, sending what they learn through `notifier`.
pub async fn run<O, E>(
    launcher: &Launcher,
    prompt: Vec<u8>,
    stdout: O,
    stderr: E,
    supervision: Supervision,
    notifier: Arc<Notifier>,
) -> Result<Finished<O, E>, RunError>
where
    O: StreamTranslator + Send + 'static,
    E: StreamTranslator + Send + 'static,
{
    // Registered before the launch so that an early signal is held, then forwarded.
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(RunError::Signals)?;
    let mut reaper = match supervision {
        Supervision::Handler => None,
        Supervision::ByHand => Reaper::prepare()
            .inspect_err(|error| tracing::warn!(%error, "cannot become a child subreaper; leftover descendants will not be stopped"))
            .ok(),
    };
    let mut child = Command::new(launcher.program)
        .args(&launcher.args)
        .envs(launcher.env.iter().map(|(key, value)| (key, value)))
        .env_remove(NOTIFY_SOCKET)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Backstop for an early return; normally the child is waited for.
        .kill_on_drop(true)
        .spawn()
        .map_err(RunError::Spawn)?;
    if let Some(reaper) = &mut reaper {
        reaper.launched(child.id());
    }

    let mut stdin = child.stdin.take().expect("stdin is piped");
    let feeder = tokio::spawn(async move {
        // A child that exits without reading its prompt is its own business, not an error.
        let _ = stdin.write_all(&prompt).await;
    });
    let (exited_tx, exited) = watch::channel(false);
    let (failure_tx, mut failures) = mpsc::unbounded_channel();
    let stdout_pump = tokio::spawn(pump(
        Pump {
            label: format!("{} stdout", launcher.program),
            exited: exited.clone(),
            failures: failure_tx.clone(),
            notifier: notifier.clone(),
        },
        child.stdout.take().expect("stdout is piped"),
        stdout,
        tokio::io::stdout(),
    ));
    let stderr_pump = tokio::spawn(pump(
        Pump {
            label: format!("{} stderr", launcher.program),
            exited,
            failures: failure_tx,
            notifier,
        },
        child.stderr.take().expect("stderr is piped"),
        stderr,
        tokio::io::stderr(),
    ));

    let mut interrupted = None;
    let mut output_error = None;
    let mut kill_at: Option<Instant> = None;
    let mut reaping = tokio::time::interval(REAP_INTERVAL);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = reaping.tick(), if reaper.is_some() => {
                if let Some(reaper) = &reaper {
                    reaper.reap_zombies();
                }
            }
            Some(signal) = signals.next() => {
                interrupted.get_or_insert(signal);
                stop(&child, signal, &mut kill_at);
            }
            Some(error) = failures.recv() => {
                output_error.get_or_insert(error);
                stop(&child, SIGTERM, &mut kill_at);
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                tracing::debug!("launcher outlived its grace; killing it");
                // `id()` is `None` once the child is reaped, so this pid cannot have been reused.
                if let Some(pid) = child.id() {
                    process_group::kill_child(pid);
                }
                kill_at = None;
            }
        }
    };
    feeder.abort();
    // By hand, what the launcher left behind is stopped before the pipes are drained: it may
    // hold them open.
    let leftovers = match &reaper {
        Some(reaper) => reaper.sweep().await,
        None => Vec::new(),
    };
    let _ = exited_tx.send(true);

    // Until the pumps are done a signal is still caught, so it cannot cut the output short;
    // it only withdraws the result.
    let pumps = async { (stdout_pump.await, stderr_pump.await) };
    tokio::pin!(pumps);
    let (stdout, stderr) = loop {
        tokio::select! {
            joined = &mut pumps => break joined,
            Some(signal) = signals.next() => { interrupted.get_or_insert(signal); }
        }
    };
    signals.handle().close();
    while let Ok(error) = failures.try_recv() {
        output_error.get_or_insert(error);
    }
    // A pump fails to join only if a translator panicked: report it, never claim a result.
    let stdout =
        stdout.map_err(|error| RunError::Failed(format!("the stdout reader failed: {error}")))?;
    let stderr =
        stderr.map_err(|error| RunError::Failed(format!("the stderr reader failed: {error}")))?;
    if let Some(error) = output_error {
        return Err(RunError::Failed(error));
    }
    let status = status.map_err(|error| {
        RunError::Failed(format!("waiting for {} failed: {error}", launcher.program))
    })?;
    Ok(Finished {
        status,
        interrupted,
        stdout,
        stderr,
        leftovers,
    })
}

/// Sends `signal` to the child unless it has been reaped, and starts the kill grace.
fn stop(child: &Child, signal: i32, kill_at: &mut Option<Instant>) {
    if let Some(pid) = child.id() {
        tracing::debug!(pid, signal, "forwarding signal to launcher");
        // `id()` is `None` once the child is reaped, so this pid cannot have been reused.
        process_group::forward_signal(pid, signal);
    }
    kill_at.get_or_insert_with(|| Instant::now() + KILL_GRACE);
}

/// What a pump shares with the supervising loop.
struct Pump {
    /// `codex-lean stdout`, for error messages.
    label: String,
    exited: watch::Receiver<bool>,
    failures: mpsc::UnboundedSender<String>,
    notifier: Arc<Notifier>,
}

impl Pump {
    fn notify(&self, translator: &mut impl StreamTranslator, notices: &mut Vec<Notice>) {
        translator.take_notices(notices);
        if !notices.is_empty() {
            self.notifier.send(notices);
            notices.clear();
        }
    }

    fn fail(&self, problem: String) {
        // The receiver lives as long as `run`, which outlives every pump.
        let _ = self.failures.send(problem);
    }

    fn fail_writing(&self, error: &io::Error) {
        self.fail(format!(
            "failed streaming {} to the wrapper's output: {error}",
            self.label
        ));
    }
}

/// Copies `pipe` through `translator` to `sink` until end of file (or the drain deadlines
/// after the child's exit); returns the translator for what it learned. A write failure stops
/// the pump at once: dropping the pipe tells the launcher that nobody is listening.
async fn pump<T, R, W>(pump: Pump, mut pipe: R, mut translator: T, mut sink: W) -> T
where
    T: StreamTranslator,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut chunk = vec![0; CHUNK_SIZE];
    let mut out = Vec::new();
    // Both deadlines count from the exit, once: output arriving later never extends them.
    let drained = after_exit(pump.exited.clone(), DRAIN_GRACE);
    let abandoned = after_exit(pump.exited.clone(), DRAIN_LIMIT);
    tokio::pin!(drained, abandoned);
    let mut held = HeldLine::default();
    let mut notices = Vec::new();
    loop {
        let flush_at = held.flush_at();
        let read = tokio::select! {
            // In this order: a partial line due is written before more is read, and data
            // already waiting is read before the grace can end the pump.
            biased;
            () = &mut abandoned => break,
            () = tokio::time::sleep_until(flush_at.unwrap_or_else(Instant::now)), if flush_at.is_some() => {
                out.clear();
                translator.flush_partial_line(&mut out);
                held.update(false);
                if let Err(error) = write_out(&mut sink, &out).await {
                    pump.fail_writing(&error);
                    return translator;
                }
                continue;
            }
            read = pipe.read(&mut chunk) => read,
            () = &mut drained => break,
        };
        out.clear();
        match read {
            Ok(0) => break,
            Ok(len) => {
                translator.translate(&chunk[..len], &mut out);
                pump.notify(&mut translator, &mut notices);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                pump.fail(format!("failed reading {}: {error}", pump.label));
                break;
            }
        }
        held.update(translator.holds_partial_line());
        if let Err(error) = write_out(&mut sink, &out).await {
            pump.fail_writing(&error);
            return translator;
        }
    }
    out.clear();
    translator.finish(&mut out);
    pump.notify(&mut translator, &mut notices);
    if let Err(error) = write_out(&mut sink, &out).await {
        pump.fail_writing(&error);
    }
    translator
}

/// When the partial line a translator holds (`since` when) is due to be written.
#[derive(Debug, Default)]
struct HeldLine {
    since: Option<Instant>,
    last_read: Option<Instant>,
}

impl HeldLine {
    /// Called after every read (and flush), with whether a partial line is now held.
    fn update(&mut self, holds: bool) {
        let now = Instant::now();
        self.last_read = Some(now);
        self.since = if holds {
            Some(self.since.unwrap_or(now))
        } else {
            None
        };
    }

    /// The quiet deadline, or the hold limit if that comes first.
    fn flush_at(&self) -> Option<Instant> {
        let since = self.since?;
        let quiet = self.last_read.unwrap_or(since) + QUIET_FLUSH;
        Some(quiet.min(since + MAX_HOLD))
    }
}

async fn after_exit(mut exited: watch::Receiver<bool>, delay: Duration) {
    // An error means the sender is gone, which happens only after the exit was announced.
    let _ = exited.wait_for(|exited| *exited).await;
    tokio::time::sleep(delay).await;
}

async fn write_out<W: AsyncWrite + Unpin>(sink: &mut W, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    sink.write_all(bytes).await?;
    sink.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_preserved_and_signal_deaths_map_to_128_plus_signal() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(9 << 8)), 9);
        assert_eq!(exit_code(ExitStatus::from_raw(SIGTERM)), 128 + SIGTERM);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
    }

    #[test]
    fn a_partial_line_is_due_after_a_quiet_period_or_at_the_hold_limit() {
        let mut held = HeldLine::default();
        assert_eq!(held.flush_at(), None);
        held.update(true);
        let since = held.since.expect("held");
        assert_eq!(held.flush_at(), Some(since + QUIET_FLUSH));
        // Data keeps arriving without a line end: the hold limit wins.
        held.last_read = Some(since + MAX_HOLD - QUIET_FLUSH / 2);
        assert_eq!(held.flush_at(), Some(since + MAX_HOLD));
        held.update(false);
        assert_eq!(held.flush_at(), None);
    }
}
