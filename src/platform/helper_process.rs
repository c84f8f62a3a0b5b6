//! One helper process — a hook command or a verification check — run to its end on the
//! calling thread (blocking), under the same cleanup rules as a worker (docs/architecture.md,
//! "Process groups"):
//!
//! - it leads a session and process group of its own (`setsid` before `exec`), registered with
//!   the watchdog (so a SIGKILLed handler does not leave it running) and with the
//!   [`helper_registry`] (so no worker's escaped-descendant sweep touches it);
//! - its stdin is `/dev/null` or a file the caller opened, its stdout and stderr are pipes
//!   read here and handed to the caller's sink chunk by chunk, its environment is the
//!   handler's with the caller's changes, its working directory the caller's;
//! - past its time limit, or when the caller's [`StopSwitch`] is thrown, the group gets
//!   SIGTERM, a grace period, then SIGKILL while any member lives (a second throw skips the
//!   grace); a leader that exits on its own leaves the pipes a short leak grace to close, then
//!   whatever is left of its group is a leak and is SIGKILLed;
//! - once the group is empty, descendants that left it (and were re-parented to the handler,
//!   a child subreaper) are swept with the escaped-descendant sweep, now or — when a worker
//!   may be running, whose escapees are indistinguishable — by the caller later
//!   ([`EscapeeSweep`]); a pipe still held open after that is abandoned after a bounded wait.
//!
//! The wait is a `poll` over the pipes, a pidfd for the leader (a short poll interval where
//! pidfds are missing) and the stop switch, so a stop request is acted on at once however
//! much the helper writes.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::descendant_sweep::{self, SweepReport};
use super::proc::{self, ChildSnapshot};
use super::process_group::{self, StopSignal};
use super::{helper_registry, spawn, watchdog};
use crate::domain::output_stream::OutputStream;
use crate::domain::watchdog::ATTEMPT_ENV;

/// Between SIGTERM and SIGKILL, as for a worker.
pub(crate) const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// How long SIGKILL is re-sent while members remain.
const KILL_ROUNDS_LIMIT: Duration = Duration::from_secs(2);
/// After the leader exits on its own: how long the pipes may take to close before what is
/// left of the group is a leak.
const LEAK_GRACE: Duration = Duration::from_millis(100);
/// After the group is empty: how long a pipe held by a process outside it is waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long escaped descendants are swept before the survivors are named.
const ESCAPEE_SWEEP_LIMIT: Duration = Duration::from_secs(5);
/// How often group membership is polled while it is being stopped (and the leader, where no
/// pidfd can be had).
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// One read from a pipe.
const CHUNK: usize = 64 * 1024;

/// What the helper reads on stdin.
pub(crate) enum HelperStdin {
    Null,
    File(File),
}

/// When a helper's escaped descendants are swept.
pub(crate) enum EscapeeSweep<'a> {
    /// Once its group is empty; children of the handler in this snapshot (inherited across
    /// `exec`, the watchdog) are never touched.
    Now(&'a ChildSnapshot),
    /// By the caller, later (through [`descendant_sweep::sweep_until_done`] with the run's
    /// start time, [`HelperRun::started_ticks`]): a worker may be running now, and its
    /// escapees cannot be told from the helper's.
    Later,
}

/// How to run one helper.
pub(crate) struct HelperCommand<'a> {
    /// Program and arguments; the program is looked up as `execvp` does, from `cwd`.
    pub argv: &'a [String],
    pub cwd: &'a Path,
    /// Variables removed from the handler's environment.
    pub env_remove: &'a [&'a str],
    /// Variables set, after the removals.
    pub env_set: &'a [(String, String)],
    pub stdin: HelperStdin,
    /// `None`: no limit.
    pub time_limit: Option<Duration>,
    pub escapees: EscapeeSweep<'a>,
}

/// How the helper's leader ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HelperExit {
    Code(i32),
    Signal(i32),
    /// Its status could not be collected (it survived every SIGKILL, or the wait failed).
    Unknown,
}

/// What running a helper came to.
#[derive(Debug)]
pub(crate) struct HelperRun {
    pub exit: HelperExit,
    /// The time limit ran out and the helper was stopped.
    pub timed_out: bool,
    /// The stop switch was thrown and the helper was stopped.
    pub interrupted: bool,
    pub duration: Duration,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Members of its group still alive after the leader exited on its own (SIGKILLed).
    pub leaked: Vec<u32>,
    /// Descendants that had left the group, killed by the escapee sweep.
    pub escaped: Vec<u32>,
    /// Processes alive when every SIGKILL had been tried.
    pub survivors: Vec<u32>,
    /// A pipe was still held open (by a process outside the group) and was closed unread.
    pub pipes_abandoned: bool,
    /// The leader's start time (`/proc/<pid>/stat` field 22), for a later escapee sweep.
    pub started_ticks: Option<u64>,
}

impl HelperRun {
    /// True when the helper exited 0 by itself.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit == HelperExit::Code(0) && !self.timed_out && !self.interrupted
    }
}

/// A switch another thread throws to stop the helper running (and to tell the caller not to
/// start more): the first throw is SIGTERM with the grace period, the second SIGKILL at once.
/// It stays thrown. Cheap to clone.
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

    /// Throws the switch (again).
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

    /// How often it was thrown.
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

/// Where the stop of the group stands.
enum Stage {
    Running,
    /// The leader exited by itself; the pipes get [`LEAK_GRACE`] to close.
    AfterExit {
        until: Instant,
    },
    /// SIGTERM sent.
    Terminating {
        kill_at: Instant,
    },
    /// SIGKILL sent, re-sent while members live.
    Killing {
        give_up_at: Instant,
    },
    /// The group is empty; the pipes get [`DRAIN_LIMIT`] to close.
    Draining {
        until: Instant,
    },
}

/// Runs the helper to its end (blocking) and reports how it went. `Err` only when it could
/// not be started (a missing program is `NotFound`); the caller words that.
pub(crate) fn run_helper(
    command: HelperCommand<'_>,
    sink: &mut dyn FnMut(OutputStream, &[u8]),
    stop: &StopSwitch,
) -> io::Result<HelperRun> {
    let started = Instant::now();
    let mut child = spawn(&command)?;
    let pid = child.id();
    let started_ticks = proc::stat(pid)
        .ok()
        .flatten()
        .map(|stat| stat.start_time_ticks);
    let mut pipes = Pipes::take(&mut child);
    let pidfd = process_group::pidfd_open(pid);
    let deadline = command.time_limit.map(|limit| started + limit);
    let mut run = HelperRun {
        exit: HelperExit::Unknown,
        timed_out: false,
        interrupted: false,
        duration: Duration::ZERO,
        stdout_bytes: 0,
        stderr_bytes: 0,
        leaked: Vec::new(),
        escaped: Vec::new(),
        survivors: Vec::new(),
        pipes_abandoned: false,
        started_ticks,
    };
    let mut exited = false;
    let mut throws_seen = 0;
    let mut stage = Stage::Running;
    loop {
        let throws = stop.throws();
        if throws > throws_seen {
            stop.drain();
            let first = throws_seen == 0;
            throws_seen = throws;
            match stage {
                Stage::Running | Stage::AfterExit { .. } if first => {
                    run.interrupted = true;
                    tracing::info!(pid, "stopping a helper process: interrupted");
                    stage = terminate(pid);
                }
                Stage::Terminating { .. } if throws >= 2 => stage = kill(pid),
                _ => {}
            }
        }
        if !exited && let Some(status) = try_wait(&mut child) {
            exited = true;
            run.exit = match (status.code(), status.signal()) {
                (Some(code), _) => HelperExit::Code(code),
                (None, Some(signal)) => HelperExit::Signal(signal),
                (None, None) => HelperExit::Unknown,
            };
        }
        let now = Instant::now();
        stage = match stage {
            Stage::Running if exited => Stage::AfterExit {
                until: now + LEAK_GRACE,
            },
            Stage::Running if deadline.is_some_and(|deadline| now >= deadline) => {
                run.timed_out = true;
                tracing::info!(pid, "stopping a helper process: time limit reached");
                terminate(pid)
            }
            Stage::AfterExit { until } if pipes.closed() || now >= until => {
                let leaked = live_members(pid);
                if leaked.is_empty() {
                    Stage::Draining {
                        until: now + DRAIN_LIMIT,
                    }
                } else {
                    tracing::info!(pid, ?leaked, "a helper's descendants outlived it");
                    run.leaked = leaked;
                    kill(pid)
                }
            }
            Stage::Terminating { .. } | Stage::Killing { .. }
                if exited && live_members(pid).is_empty() =>
            {
                Stage::Draining {
                    until: now + DRAIN_LIMIT,
                }
            }
            Stage::Terminating { kill_at } if now >= kill_at => kill(pid),
            Stage::Killing { give_up_at } if now >= give_up_at => {
                run.survivors = live_members(pid);
                tracing::error!(pid, survivors = ?run.survivors, "a helper's process group survived SIGKILL");
                Stage::Draining {
                    until: now + DRAIN_LIMIT,
                }
            }
            Stage::Killing { give_up_at } => {
                signal(pid, StopSignal::Kill);
                Stage::Killing { give_up_at }
            }
            Stage::Draining { .. } if pipes.closed() => break,
            Stage::Draining { until } if now >= until => {
                run.pipes_abandoned = true;
                break;
            }
            unchanged => unchanged,
        };
        let wake_at = match &stage {
            Stage::Running if exited => Some(now),
            Stage::Running => deadline,
            // Closed pipes end these waits: look again at once.
            Stage::AfterExit { .. } | Stage::Draining { .. } if pipes.closed() => Some(now),
            Stage::AfterExit { until } | Stage::Draining { until } => Some(*until),
            Stage::Terminating { .. } | Stage::Killing { .. } => Some(now + POLL_INTERVAL),
        };
        // Without a pidfd the leader's exit is noticed by polling.
        let wake_at = match (&pidfd, exited) {
            (None, false) => {
                Some(wake_at.map_or(now + POLL_INTERVAL, |at| at.min(now + POLL_INTERVAL)))
            }
            _ => wake_at,
        };
        pipes.wait(
            pidfd.as_ref().filter(|_| !exited),
            stop,
            wake_at,
            sink,
            &mut run,
        );
    }
    if !exited {
        tracing::error!(pid, "a helper process could not be reaped");
    } else {
        helper_registry::forget(pid);
    }
    watchdog::release(pid);
    if let EscapeeSweep::Now(inherited) = command.escapees {
        let SweepReport { escaped, survivors } =
            descendant_sweep::sweep_until_done(pid, started_ticks, inherited, ESCAPEE_SWEEP_LIMIT);
        if !escaped.is_empty() {
            tracing::info!(
                pid,
                ?escaped,
                "a helper's descendants escaped its group; killed them"
            );
        }
        run.escaped = escaped;
        run.survivors.extend(survivors);
    }
    run.duration = started.elapsed();
    Ok(run)
}

fn spawn(command: &HelperCommand<'_>) -> io::Result<Child> {
    let (program, args) = command
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let mut process = Command::new(program);
    process
        .args(args)
        .current_dir(command.cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    process.stdin(match &command.stdin {
        HelperStdin::Null => Stdio::null(),
        HelperStdin::File(file) => Stdio::from(file.try_clone()?),
    });
    for name in command.env_remove {
        process.env_remove(name);
    }
    process.envs(command.env_set.iter().map(|(name, value)| (name, value)));
    // A token of its own, as a worker's attempt id: the watchdog finds the helper's escaped
    // descendants by it after a SIGKILLed handler.
    let token = format!("helper-{}", uuid::Uuid::new_v4().simple());
    process.env(ATTEMPT_ENV, &token);
    // A duplicate of the watchdog socket, held until the spawn is over.
    let registration = watchdog::registration();
    let registration_fd = registration.as_ref().map(watchdog::Registration::raw);
    let registered = token.clone();
    // SAFETY: `setsid`, the watchdog registration (`getpid`, one non-blocking `send` from a
    // stack buffer, reading the token allocated before the fork) and `close_range` are
    // async-signal-safe and touch no memory of the parent, as for a worker (platform::spawn).
    unsafe {
        process.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            if let Some(fd) = registration_fd {
                watchdog::register_self(fd, &registered);
            }
            spawn::close_on_exec_from(3);
            Ok(())
        });
    }
    let spawned = helper_registry::spawn(&mut process);
    drop(registration);
    if let Ok(child) = &spawned {
        watchdog::watching(child.id(), &token);
    }
    spawned
}

fn try_wait(child: &mut Child) -> Option<std::process::ExitStatus> {
    match child.try_wait() {
        Ok(status) => status,
        Err(error) => {
            tracing::error!(pid = child.id(), %error, "cannot wait for a helper process");
            None
        }
    }
}

fn terminate(pgid: u32) -> Stage {
    signal(pgid, StopSignal::Terminate);
    Stage::Terminating {
        kill_at: Instant::now() + TERMINATE_GRACE,
    }
}

fn kill(pgid: u32) -> Stage {
    signal(pgid, StopSignal::Kill);
    Stage::Killing {
        give_up_at: Instant::now() + KILL_ROUNDS_LIMIT,
    }
}

fn signal(pgid: u32, signal: StopSignal) {
    if let Err(error) = process_group::signal_group(pgid, signal) {
        tracing::error!(pgid, %error, "helper process group not signalled");
    }
}

/// Pids of the live (non-zombie) members of group `pgid`.
fn live_members(pgid: u32) -> Vec<u32> {
    if !process_group::group_exists(pgid) {
        return Vec::new();
    }
    proc::live_group_members(pgid)
        .map(|members| members.iter().map(|member| member.pid).collect())
        .unwrap_or_default()
}

/// The helper's stdout and stderr, read without blocking; `None` once at end of file.
struct Pipes {
    open: [(OutputStream, Option<File>); 2],
    buffer: Vec<u8>,
}

impl Pipes {
    fn take(child: &mut Child) -> Self {
        let as_file = |fd: Option<OwnedFd>| {
            fd.map(|fd| {
                let _ = fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
                File::from(fd)
            })
        };
        Self {
            open: [
                (
                    OutputStream::Stdout,
                    as_file(child.stdout.take().map(OwnedFd::from)),
                ),
                (
                    OutputStream::Stderr,
                    as_file(child.stderr.take().map(OwnedFd::from)),
                ),
            ],
            buffer: vec![0; CHUNK],
        }
    }

    fn closed(&self) -> bool {
        self.open.iter().all(|(_, pipe)| pipe.is_none())
    }

    /// Waits until a pipe is readable, the leader exits, the switch is thrown or `wake_at`
    /// comes, and reads what the pipes hold.
    fn wait(
        &mut self,
        leader: Option<&OwnedFd>,
        stop: &StopSwitch,
        wake_at: Option<Instant>,
        sink: &mut dyn FnMut(OutputStream, &[u8]),
        run: &mut HelperRun,
    ) {
        let timeout = match wake_at {
            None => PollTimeout::NONE,
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                // Rounded up, so a wake-up never comes early and spins.
                let millis = left.as_micros().div_ceil(1000);
                PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut readable = [false; 2];
        {
            let mut fds = Vec::with_capacity(4);
            let mut slots = Vec::with_capacity(2);
            for (slot, (_, pipe)) in self.open.iter().enumerate() {
                if let Some(pipe) = pipe {
                    fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
                    slots.push(slot);
                }
            }
            fds.push(PollFd::new(stop.0.wake_read.as_fd(), PollFlags::POLLIN));
            if let Some(pidfd) = leader {
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
            }
            // EINTR: go round again.
            if poll(&mut fds, timeout).is_err() {
                return;
            }
            for (slot, fd) in slots.iter().zip(&fds) {
                readable[*slot] = fd.revents().is_some_and(|events| !events.is_empty());
            }
        }
        for (slot, ready) in readable.into_iter().enumerate() {
            if ready {
                self.read(slot, sink, run);
            }
        }
    }

    /// Reads what one pipe holds now — a bounded number of chunks, so the other pipe and the
    /// stop switch are looked at again soon; end of file (or a read error) closes it.
    fn read(
        &mut self,
        slot: usize,
        sink: &mut dyn FnMut(OutputStream, &[u8]),
        run: &mut HelperRun,
    ) {
        let (stream, pipe) = &mut self.open[slot];
        for _ in 0..16 {
            let Some(file) = pipe.as_mut() else { return };
            match file.read(&mut self.buffer) {
                Ok(0) => {
                    *pipe = None;
                    return;
                }
                Ok(read) => {
                    match stream {
                        OutputStream::Stdout => run.stdout_bytes += read as u64,
                        OutputStream::Stderr => run.stderr_bytes += read as u64,
                    }
                    sink(*stream, &self.buffer[..read]);
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
