//! One helper process — a hook command or a Verify check — run to its end on the calling
//! thread (blocking) under a worker's cleanup rules: its own group, registered with the
//! watchdog and the [`helper_registry`], a time limit and a [`StopSwitch`], leak grace, drain
//! limit and escapee sweep (docs/architecture.md, "Process groups"). One `poll` waits on its
//! pipes, its pidfd and the switch, so a stop is acted on at once however much it writes.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::descendant_sweep;
use super::proc::{self, ChildSnapshot};
use super::process_group::{self, GroupCommand, Stop};
use super::{helper_registry, watchdog};
use crate::domain::decision::ChildExit;
use crate::domain::escalation::{CHECK_INTERVAL, DRAIN_LIMIT, LEAK_GRACE};
use crate::domain::lifecycle::GroupReport;
use crate::domain::output_stream::OutputStream;

const CHUNK: usize = 64 * 1024;

pub(crate) enum EscapeeSweep<'a> {
    /// Once its group is empty; children of the handler in this snapshot (inherited across
    /// `exec`, the watchdog) are never touched.
    Now(&'a ChildSnapshot),
    /// By the caller, later (through [`descendant_sweep::sweep_until_done`] with the run's
    /// start time, [`HelperRun::started_ticks`]): a worker may be running now, and its
    /// escapees cannot be told from the helper's.
    Later,
}

/// How to run one helper (a helper never gets the handler's `NOTIFY_SOCKET`).
pub(crate) struct HelperCommand<'a> {
    /// The program is looked up as `execvp` does, from `cwd`.
    pub argv: &'a [String],
    pub cwd: &'a Path,
    /// Variables set over the handler's environment.
    pub env_set: &'a [(String, String)],
    /// `/dev/null` when `None`.
    pub stdin: Option<File>,
    pub time_limit: Option<Duration>,
    pub escapees: EscapeeSweep<'a>,
}

#[derive(Debug)]
pub(crate) struct HelperRun {
    /// Neither code nor signal: its status could not be collected (it survived every
    /// SIGKILL, or the wait failed).
    pub exit: ChildExit,
    pub timed_out: bool,
    /// The stop switch was thrown and the helper was stopped.
    pub interrupted: bool,
    pub duration: Duration,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// What stopping its group (and the escapee sweep) killed or left.
    pub group: GroupReport,
    /// A pipe still held open (by a process outside the group) was closed unread.
    pub pipes_abandoned: bool,
    /// The leader's start time, for a later escapee sweep.
    pub started_ticks: Option<u64>,
}

impl HelperRun {
    /// The helper exited 0 by itself.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit.code == Some(0) && !self.timed_out && !self.interrupted
    }
}

/// A switch another thread throws to stop the helper running (and to tell the caller not to
/// start more): the first throw is SIGTERM with the grace period, the second SIGKILL at once.
#[derive(Clone)]
pub(crate) struct StopSwitch(Arc<SwitchInner>);

struct SwitchInner {
    throws: AtomicU8,
    /// Written on every throw, so a `poll` wakes at once; drained by the runner.
    wake_read: OwnedFd,
    wake_write: OwnedFd,
}

impl StopSwitch {
    pub(crate) fn new() -> io::Result<Self> {
        let (wake_read, wake_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(io::Error::from)?;
        Ok(Self(Arc::new(SwitchInner {
            throws: AtomicU8::new(0),
            wake_read,
            wake_write,
        })))
    }

    pub(crate) fn stop(&self) {
        let _ = self
            .0
            .throws
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |throws| {
                Some(throws.saturating_add(1))
            });
        // A full pipe already wakes the runner; nothing else can go wrong that matters.
        let _ = nix::unistd::write(&self.0.wake_write, &[1]);
    }

    pub(crate) fn throws(&self) -> u8 {
        self.0.throws.load(Ordering::SeqCst)
    }

    fn drain(&self) {
        let mut buffer = [0u8; 64];
        while let Ok(read) = nix::unistd::read(&self.0.wake_read, &mut buffer) {
            if read == 0 {
                break;
            }
        }
    }
}

/// Runs the helper to its end (blocking) and reports how it went. `Err` only when it could
/// not be started (a missing program is `NotFound`); the caller words that.
pub(crate) fn run_helper(
    command: HelperCommand<'_>,
    sink: &mut dyn FnMut(OutputStream, &[u8]),
    stop: &StopSwitch,
) -> io::Result<HelperRun> {
    let started = Instant::now();
    // A token of its own, as a worker's attempt id: the watchdog finds the helper's escaped
    // descendants by it after a SIGKILLed handler.
    let token = format!("helper-{}", uuid::Uuid::new_v4().simple());
    let stdin = match &command.stdin {
        None => Stdio::null(),
        Some(file) => Stdio::from(file.try_clone()?),
    };
    let group = GroupCommand {
        argv: command.argv,
        cwd: command.cwd,
        token: &token,
        notify_socket: None,
        env_set: command.env_set,
    };
    let mut helper = Helper::new(process_group::spawn_helper(&group, stdin)?, sink);
    let pid = helper.pid;
    let started_ticks = proc::start_time(pid);
    let deadline = command.time_limit.map(|limit| started + limit);
    let (mut timed_out, mut interrupted) = (false, false);
    // Until the leader exits, the switch is thrown or the time limit passes.
    let mut how = loop {
        if stop.throws() > 0 {
            interrupted = true;
            break Stop::Terminate;
        }
        if helper.exit.is_some() {
            break Stop::AfterExit;
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            timed_out = true;
            tracing::info!(pid, "stopping a helper process: time limit reached");
            break Stop::Terminate;
        }
        helper.wait(deadline, stop);
    };
    if how == Stop::AfterExit {
        // The pipes get the leak grace to close; a throw meanwhile still stops the group.
        let until = Instant::now() + LEAK_GRACE;
        while !helper.pipes_closed() && Instant::now() < until {
            if stop.throws() > 0 {
                interrupted = true;
                how = Stop::Terminate;
                break;
            }
            helper.wait(Some(until), stop);
        }
    }
    if interrupted {
        tracing::info!(pid, "stopping a helper process: interrupted");
    }
    let kill_now = || stop.throws() >= 2;
    let stopped = process_group::stop_group(pid, "a helper", how, &kill_now, &mut |after| {
        helper.wait(Some(Instant::now() + after), stop)
    });
    // The group is empty: a pipe still open is held by a process outside it.
    let until = Instant::now() + DRAIN_LIMIT;
    while !helper.pipes_closed() && Instant::now() < until {
        helper.wait(Some(until), stop);
    }
    let pipes_abandoned = !helper.pipes_closed();
    helper.reap();
    if helper.exit.is_some() {
        helper_registry::forget(pid);
    } else {
        tracing::error!(pid, "a helper process could not be reaped");
    }
    let mut run = HelperRun {
        exit: helper.exit.unwrap_or(ChildExit {
            code: None,
            signal: None,
        }),
        timed_out,
        interrupted,
        duration: Duration::ZERO,
        stdout_bytes: helper.bytes[0],
        stderr_bytes: helper.bytes[1],
        group: GroupReport {
            leaked: stopped.leaked,
            escaped: Vec::new(),
            survivors: stopped.survivors,
        },
        pipes_abandoned,
        started_ticks,
    };
    if let EscapeeSweep::Now(inherited) = command.escapees {
        let swept = descendant_sweep::sweep_until_done(pid, started_ticks, inherited);
        run.group.escaped = swept.escaped;
        run.group.survivors.extend(swept.survivors);
    }
    // Only now: a handler killed during the sweep leaves the watchdog the group's escapees.
    watchdog::release(pid);
    run.duration = started.elapsed();
    Ok(run)
}

/// A running helper: its leader, its pipes (non-blocking; `None` once at end of file) and
/// where their output goes.
struct Helper<'a> {
    child: Child,
    pid: u32,
    /// Readable once the leader exits; `None` once it is reaped (or pidfds are missing).
    pidfd: Option<OwnedFd>,
    exit: Option<ChildExit>,
    pipes: [(OutputStream, Option<File>); 2],
    bytes: [u64; 2],
    buffer: Vec<u8>,
    sink: &'a mut dyn FnMut(OutputStream, &[u8]),
}

impl<'a> Helper<'a> {
    fn new(mut child: Child, sink: &'a mut dyn FnMut(OutputStream, &[u8])) -> Self {
        let pid = child.id();
        let as_file = |fd: Option<OwnedFd>| {
            fd.map(|fd| {
                let _ = fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
                File::from(fd)
            })
        };
        let stdout = as_file(child.stdout.take().map(OwnedFd::from));
        let stderr = as_file(child.stderr.take().map(OwnedFd::from));
        Self {
            child,
            pid,
            pidfd: process_group::pidfd_open(pid),
            exit: None,
            pipes: [
                (OutputStream::Stdout, stdout),
                (OutputStream::Stderr, stderr),
            ],
            bytes: [0; 2],
            buffer: vec![0; CHUNK],
            sink,
        }
    }

    fn pipes_closed(&self) -> bool {
        self.pipes.iter().all(|(_, pipe)| pipe.is_none())
    }

    fn reap(&mut self) {
        if self.exit.is_some() {
            return;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.exit = Some(ChildExit {
                    code: status.code(),
                    signal: status.signal(),
                });
                self.pidfd = None;
            }
            Ok(None) => {}
            Err(error) => {
                tracing::error!(pid = self.pid, %error, "cannot wait for a helper process");
            }
        }
    }

    /// Waits until a pipe is readable, the leader exits, the switch is thrown or `wake_at`
    /// comes (without a pidfd, a short interval at most), then reads what the pipes hold and
    /// reaps the leader if it exited.
    fn wait(&mut self, wake_at: Option<Instant>, stop: &StopSwitch) {
        let now = Instant::now();
        let wake_at = match (&self.pidfd, self.exit) {
            (None, None) => {
                Some(wake_at.map_or(now + CHECK_INTERVAL, |at| at.min(now + CHECK_INTERVAL)))
            }
            _ => wake_at,
        };
        let timeout = match wake_at {
            None => PollTimeout::NONE,
            Some(at) => {
                // Rounded up, so a wake-up never comes early and spins.
                let millis = at.saturating_duration_since(now).as_micros().div_ceil(1000);
                PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds: Vec<PollFd> = self
            .pipes
            .iter()
            .filter_map(|(_, pipe)| pipe.as_ref())
            .map(|pipe| PollFd::new(pipe.as_fd(), PollFlags::POLLIN))
            .collect();
        fds.push(PollFd::new(stop.0.wake_read.as_fd(), PollFlags::POLLIN));
        if let Some(pidfd) = &self.pidfd {
            fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
        }
        // EINTR: the caller goes round again.
        let _ = poll(&mut fds, timeout);
        drop(fds);
        stop.drain();
        // Non-blocking: a pipe that holds nothing answers at once.
        self.read(0);
        self.read(1);
        self.reap();
    }

    /// Reads what one pipe holds now — a bounded number of chunks, so the other pipe and the
    /// stop switch are looked at again soon; end of file (or a read error) closes it.
    fn read(&mut self, slot: usize) {
        let (stream, pipe) = &mut self.pipes[slot];
        for _ in 0..16 {
            let Some(file) = pipe.as_mut() else { return };
            match file.read(&mut self.buffer) {
                Ok(0) => {
                    *pipe = None;
                    return;
                }
                Ok(read) => {
                    self.bytes[slot] += read as u64;
                    (self.sink)(*stream, &self.buffer[..read]);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot read a helper's output; closing the pipe");
                    *pipe = None;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
