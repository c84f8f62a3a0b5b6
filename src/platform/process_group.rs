//! Running a process group — a worker's, a hook's or a Verify check's — and every signal that
//! takes (docs/architecture.md, "Process groups"): one `fork` + `exec` into a new session, one
//! TERM → grace → KILL loop ([`escalate`], the watchdog's too), no descriptor inherited by the
//! handler passed on. Groups are addressed only by the pgid saved at launch, never our own or
//! pgid ≤ 1; single processes only as our unreaped children or through a pidfd checked against
//! the start time a scan saw.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, getsid};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::notify_socket::NOTIFY_SOCKET;
use super::{helper_registry, proc, watchdog};
use crate::domain::decision::ChildExit;
use crate::domain::escalation::{CHECK_INTERVAL, Escalation, KillStep};
use crate::domain::watchdog::ATTEMPT_ENV;

pub(crate) use crate::domain::escalation::StopSignal;
pub(crate) use rustix::process::Signal as SweepSignal;

/// Pipe capacity asked for a worker's output pipes.
const PIPE_CAPACITY: i32 = 1 << 20;

/// What a new process group runs, and with what.
pub(crate) struct GroupCommand<'a> {
    /// The program is looked up as `execvp` does, from `cwd`.
    pub argv: &'a [String],
    pub cwd: &'a Path,
    /// Carried in [`ATTEMPT_ENV`] by its processes and their descendants: the watchdog and
    /// `status` find what left the group by it.
    pub token: &'a str,
    /// The attempt's own socket, or none: the handler's own (systemd's) never reaches a child.
    pub notify_socket: Option<&'a str>,
    /// Variables set over the handler's environment.
    pub env_set: &'a [(String, String)],
}

/// The command that starts `group` as the leader of a new session (so no controlling
/// terminal, and its pgid is its pid), stdout and stderr piped. `registration` is the
/// watchdog socket's duplicate the child registers itself on.
fn session_command(
    group: &GroupCommand<'_>,
    stdin: Stdio,
    registration: Option<RawFd>,
) -> io::Result<Command> {
    let (program, args) = group
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(group.cwd)
        .envs(group.env_set.iter().map(|(name, value)| (name, value)))
        .env(ATTEMPT_ENV, group.token)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match group.notify_socket {
        Some(socket) => command.env(NOTIFY_SOCKET, socket),
        None => command.env_remove(NOTIFY_SOCKET),
    };
    let token = group.token.to_owned();
    // SAFETY: between fork and exec the closure makes only async-signal-safe calls and reads
    // no memory of the parent but the token allocated before the fork: `setsid`, the watchdog
    // registration (`getpid` and one non-blocking `send` of a message formatted on the stack)
    // and `close_range`. std resets the signal mask and SIGPIPE itself.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
            if let Some(fd) = registration {
                watchdog::register_self(fd, &token);
            }
            // Every descriptor above stderr close-on-exec (Linux 5.11; before, `run` marked the
            // inherited ones at its start): the child gets its three standard streams only.
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    Ok(command)
}

/// Marks every descriptor the handler inherited above stderr close-on-exec, once at the start
/// of `run`: the caller's open descriptors (a job server's pipes, a test harness's files) are
/// not a child's, and SPEC's worker protocol passes only the three standard streams. The
/// handler's own descriptors are close-on-exec already, and each child marks everything
/// above stderr again before its `exec` where the kernel can (Linux 5.11).
pub(crate) fn keep_inherited_descriptors_from_workers() {
    // SAFETY: F_GETFD/F_SETFD on descriptor numbers change only their close-on-exec flag; a
    // closed one (the listing's own) fails with EBADF.
    unsafe {
        for fd in proc::own_descriptors().into_iter().filter(|fd| *fd > 2) {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Starts a worker with its stdin piped (the prompt goes there). Call inside the runtime (the
/// pipes and the exit are awaited through its reactor), off its worker threads (the spawn
/// waits for `exec`).
pub(crate) fn spawn_worker(group: &GroupCommand<'_>) -> io::Result<WorkerChild> {
    // Held until the spawn is over: its number names the watchdog socket in the child.
    let registration = watchdog::registration();
    let command = session_command(
        group,
        Stdio::piped(),
        registration.as_ref().map(AsRawFd::as_raw_fd),
    )?;
    let mut command = tokio::process::Command::from(command);
    // A backstop for a bug only: the attempt always stops the group and waits for the leader.
    command.kill_on_drop(true);
    let spawned = command.spawn();
    drop(registration);
    let child = spawned?;
    // A handler killed here leaves a worker the watchdog knows from the child's own
    // registration (the hostile tests stop the handler at this point).
    fail::fail_point!("worker-spawned");
    WorkerChild::new(child, group.token)
}

/// Starts a helper (a hook, a Verify check), registered with the [`helper_registry`] in the
/// same step so that no worker's sweep takes it for an escapee. Blocking.
pub(crate) fn spawn_helper(
    group: &GroupCommand<'_>,
    stdin: Stdio,
) -> io::Result<std::process::Child> {
    let registration = watchdog::registration();
    let mut command = session_command(group, stdin, registration.as_ref().map(AsRawFd::as_raw_fd))?;
    let spawned = helper_registry::spawn(&mut command);
    drop(registration);
    if let Ok(child) = &spawned {
        // The child's own registration may have gone to a watchdog replaced meanwhile.
        watchdog::watching(child.id(), group.token);
    }
    spawned
}

/// A started worker: its three pipes, its exit awaited (and reaped) by tokio.
#[derive(Debug)]
pub(crate) struct WorkerChild {
    child: tokio::process::Child,
    pid: u32,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

impl WorkerChild {
    fn new(mut child: tokio::process::Child, attempt_id: &str) -> io::Result<Self> {
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the worker was reaped before it was watched"))?;
        watchdog::watching(pid, attempt_id);
        // Enlarged (best effort): fewer, larger reads.
        let outputs = [
            child.stdout.as_ref().map(AsFd::as_fd),
            child.stderr.as_ref().map(AsFd::as_fd),
        ];
        for fd in outputs.into_iter().flatten() {
            let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
        }
        Ok(Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            pid,
        })
    }

    /// The worker's pid, which is also its process group and session id.
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// Waits until the worker exits and reaps it; later calls return the same exit.
    pub(crate) async fn wait(&mut self) -> io::Result<ChildExit> {
        let status = self.child.wait().await?;
        Ok(ChildExit {
            code: status.code(),
            signal: status.signal(),
        })
    }
}

impl Drop for WorkerChild {
    /// A worker dropped before its leader was reaped (a bug, or a launch that failed halfway)
    /// has its group SIGKILLed: while the leader is unreaped its pid, the pgid, cannot be
    /// reused. tokio kills and reaps the leader itself (`kill_on_drop`).
    fn drop(&mut self) {
        if self.child.id().is_some() {
            let _ = signal_group(self.pid, Signal::SIGKILL);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// On a deadline or a request: SIGTERM, the grace period, SIGKILL.
    Terminate,
    /// Its leader exited on its own (and its pipes had their leak grace): whatever is left of
    /// the group leaked, and is SIGKILLed.
    AfterExit,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// Members alive after the leader's own exit (SIGKILLed).
    pub leaked: Vec<u32>,
    /// Members alive after every SIGKILL.
    pub survivors: Vec<u32>,
}

/// Stops group `pgid` (blocking) until no live member is left, or reports what survived
/// SIGKILL. `what` names the leader in the log; `kill_now` (a second request) skips what is
/// left of the grace; `wait` waits until the next look (a helper's runner reads its pipes).
pub(crate) fn stop_group(
    pgid: u32,
    what: &str,
    stop: Stop,
    kill_now: &dyn Fn() -> bool,
    wait: &mut dyn FnMut(Duration),
) -> Stopped {
    let mut stopped = Stopped::default();
    let escalation = match stop {
        Stop::Terminate => Escalation::terminate(),
        Stop::AfterExit => {
            stopped.leaked = live_members(pgid);
            if stopped.leaked.is_empty() {
                return stopped;
            }
            tracing::info!(pgid, leaked = ?stopped.leaked, "descendants outlived {what}");
            Escalation::kill()
        }
    };
    let alive = |groups: &[u32]| groups.iter().any(|pgid| !live_members(*pgid).is_empty());
    if escalate(&mut vec![pgid], escalation, kill_now, alive, wait) == KillStep::GaveUp {
        stopped.survivors = live_members(pgid);
        tracing::error!(pgid, survivors = ?stopped.survivors, "process group survived SIGKILL");
    }
    stopped
}

/// Carries `escalation` out on `groups` (blocking) until they are empty or members outlived
/// every SIGKILL. A group that no longer exists is dropped at once, so a reused pgid is never
/// signalled.
pub(crate) fn escalate(
    groups: &mut Vec<u32>,
    mut escalation: Escalation,
    kill_now: &dyn Fn() -> bool,
    mut alive: impl FnMut(&[u32]) -> bool,
    wait: &mut dyn FnMut(Duration),
) -> KillStep {
    let mut logged: Vec<StopSignal> = Vec::new();
    loop {
        groups.retain(|pgid| group_exists(*pgid));
        let alive = !groups.is_empty() && alive(groups);
        if kill_now() && !escalation.killing() {
            tracing::info!(pgids = ?groups, "second signal: skipping the grace period");
            escalation.skip_grace();
        }
        match escalation.step(Instant::now(), alive) {
            KillStep::Send(signal) => {
                for pgid in groups.iter() {
                    match signal_group(*pgid, as_nix(signal)) {
                        Ok(()) if !logged.contains(&signal) => {
                            tracing::info!(
                                pgid,
                                signal = signal.name(),
                                "signal sent to process group"
                            );
                        }
                        Ok(()) => {}
                        Err(error) => {
                            tracing::error!(pgid, %error, "process group not signalled");
                        }
                    }
                }
                if !logged.contains(&signal) {
                    logged.push(signal);
                }
                wait(CHECK_INTERVAL);
            }
            KillStep::CheckAfter(after) => wait(after),
            end @ (KillStep::Emptied | KillStep::GaveUp) => return end,
        }
    }
}

fn as_nix(signal: StopSignal) -> Signal {
    match signal {
        StopSignal::Terminate => Signal::SIGTERM,
        StopSignal::Kill => Signal::SIGKILL,
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum GroupSignalError {
    #[error(
        "refusing to signal process group {0}: it is the handler's own group or not a worker's"
    )]
    NotAWorkerGroup(u32),
    #[error("killpg({pgid}, {signal}) failed: {errno}")]
    Failed {
        pgid: u32,
        signal: &'static str,
        errno: Errno,
    },
}

/// Signals every member of group `pgid`: a stop (TERM, KILL), or a suspension of the whole
/// run (STOP, CONT). An empty group is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) -> Result<(), GroupSignalError> {
    let own_group = getpgrp().as_raw() as u32;
    if pgid <= 1 || pgid == own_group {
        return Err(GroupSignalError::NotAWorkerGroup(pgid));
    }
    match killpg(Pid::from_raw(pgid as i32), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(errno) => Err(GroupSignalError::Failed {
            pgid,
            signal: signal.as_str(),
            errno,
        }),
    }
}

/// Whether the kernel still knows any process (zombies included) in group `pgid`: one
/// syscall, before a `/proc` scan says which members are alive.
pub(crate) fn group_exists(pgid: u32) -> bool {
    pgid > 1 && killpg(Pid::from_raw(pgid as i32), None) != Err(Errno::ESRCH)
}

/// Pids of the live members of group `pgid` (a zombie runs nothing and holds no pipe).
pub(crate) fn live_members(pgid: u32) -> Vec<u32> {
    if !group_exists(pgid) {
        return Vec::new();
    }
    proc::processes_where(|stat| stat.pgrp == pgid && !stat.is_defunct())
        .map(|members| members.iter().map(|member| member.pid).collect())
        .unwrap_or_default()
}

/// Signals one of our own children (an adopted descendant): its pid cannot be reused while
/// it is unreaped. The sweep sends SIGSTOP to freeze a lineage, then SIGKILL.
pub(crate) fn signal_child(pid: u32, signal: SweepSignal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// SIGKILLs our own child `pid`, whose pid the caller knows is not reaped yet (a wrapper's
/// launcher that outlived its grace).
pub(crate) fn kill_child(pid: u32) {
    signal_child(pid, SweepSignal::KILL);
}

/// Signals a process that is *not* our child without ever reaching another that reuses its
/// pid: a pidfd is opened first, then the start time is checked against the one the scan saw,
/// and the signal goes through the pidfd. False when the process is gone, is not the one
/// scanned, or pidfds are unavailable (Linux < 5.3).
pub(crate) fn signal_descendant(pid: u32, start_time_ticks: u64, signal: SweepSignal) -> bool {
    let Some(pidfd) = pidfd_open(pid) else {
        return false;
    };
    let same = proc::start_time(pid) == Some(start_time_ticks);
    same && rustix::process::pidfd_send_signal(&pidfd, signal).is_ok()
}

/// A pidfd for `pid` (readable once it exits); `None` when the process is gone or pidfds are
/// unavailable (Linux < 5.3).
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Reaps one of our own children if it has exited; never `waitpid(-1)`, which would steal the
/// children tokio waits for.
pub(crate) fn reap_child(pid: u32) {
    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
}

/// Registers the handler as a child subreaper: descendants that leave a worker's group are
/// re-parented to it, not to init, when their parent dies.
pub(crate) fn become_child_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// Whether this process leads its own session: the handler starts every worker that way
/// (`setsid`), a shell never does for a command it runs.
pub(crate) fn leads_own_session() -> bool {
    getsid(None).is_ok_and(|session| session == getpid())
}

/// Forwards signal number `signal` (SIGINT, SIGTERM) to our child `pid`. The caller
/// guarantees the child is not reaped yet, so the pid cannot have been reused.
pub(crate) fn forward_signal(pid: u32, signal: i32) {
    if let (Ok(pid), Ok(signal)) = (i32::try_from(pid), Signal::try_from(signal)) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// `SIGINT`, `SIGTERM`, … for a signal number the platform knows.
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    Signal::try_from(signal).ok().map(Signal::as_str)
}
