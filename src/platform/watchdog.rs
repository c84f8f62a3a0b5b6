//! The per-run watchdog process: what stops a worker when the handler itself is killed
//! (SIGKILL, the OOM killer) and can stop nothing (docs/architecture.md, "The watchdog"; the
//! rules are [`crate::domain::watchdog`]).
//!
//! `run` re-executes its own binary (`/proc/self/exe`, so the watchdog is always the same
//! build, wherever it is installed) with a hidden first argument. The watchdog:
//!
//! - reads a `SOCK_SEQPACKET` socket on its stdin whose other end only the handler holds
//!   (close-on-exec, so no worker keeps it): every worker sends `watch <pgid>` from its forked
//!   child *before* `exec`, and the handler sends `release <pgid>` once it stopped the group;
//! - starts its own session (`setsid` before `exec`) and ignores SIGINT, SIGTERM, SIGHUP,
//!   SIGQUIT and the terminal stop signals, so a Ctrl-C, a hangup or a `kill` aimed at the
//!   handler's process group never reaches it;
//! - forgets a watched group as soon as it no longer exists (checked twice a second), so a
//!   reused pgid is never signalled;
//! - on end of file — the handler is gone, however it went — stops every group not released:
//!   SIGTERM, a 0.5 s grace, then SIGKILL while members remain (2 s at most), never its own
//!   group or the handler's, and exits. On a normal exit nothing is left to stop and it exits
//!   at once; the handler waits for it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, recv, socketpair};
use nix::unistd::{getpgrp, getpid, getppid, setsid};

use super::proc;
use super::process_group;
use crate::domain::escalation::{CHECK_INTERVAL, Escalation, KillStep};
use crate::domain::watchdog::{MAX_MESSAGE, Registry, WatchdogMessage};

/// The hidden first argument that makes the binary a watchdog.
pub const WATCHDOG_ARG: &str = "__ai-session-handler-watchdog";

/// How often the watchdog forgets groups that are gone.
const PRUNE_INTERVAL: u16 = 500;
/// How long the handler waits for the watchdog to exit at the end of a run.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The handler's side: its end of the socket and the watchdog process.
struct Watchdog {
    socket: OwnedFd,
    child: Child,
}

/// The watchdog of this `run` invocation, if it started.
static WATCHDOG: Mutex<Option<Watchdog>> = Mutex::new(None);

/// Starts the watchdog. Call once, before any worker is spawned.
pub fn start() -> io::Result<u32> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    let handler_pgid = getpgrp().as_raw();
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0("ai-session-handler-watchdog")
        .arg(WATCHDOG_ARG)
        .arg(handler_pgid.to_string())
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| setsid().map(drop).map_err(io::Error::from));
    }
    let child = command.spawn()?;
    let pid = child.id();
    *lock() = Some(Watchdog {
        socket: ours,
        child,
    });
    Ok(pid)
}

fn lock() -> std::sync::MutexGuard<'static, Option<Watchdog>> {
    WATCHDOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The descriptor a worker registers through, to be captured before `fork`.
pub fn registration_fd() -> Option<RawFd> {
    lock().as_ref().map(|watchdog| watchdog.socket.as_raw_fd())
}

/// Registers the calling process's group with the watchdog. Runs in a forked worker between
/// `fork` and `exec` (after `setsid`), so it only makes async-signal-safe calls: `getpid` and
/// one non-blocking `send` of a message formatted on the stack. A watchdog that is gone or
/// full is ignored: the launch goes on without it.
pub fn register_self(fd: RawFd) {
    let mut buffer = [0u8; MAX_MESSAGE];
    let length = WatchdogMessage::Watch(getpid().as_raw() as u32).encode(&mut buffer);
    // SAFETY: `send` reads `length` initialized bytes of a live stack buffer.
    unsafe {
        libc::send(
            fd,
            buffer.as_ptr().cast(),
            length,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
    }
}

/// Tells the watchdog the handler stopped group `pgid` itself.
pub fn release(pgid: u32) {
    let guard = lock();
    let Some(watchdog) = guard.as_ref() else {
        return;
    };
    let mut buffer = [0u8; MAX_MESSAGE];
    let length = WatchdogMessage::Release(pgid).encode(&mut buffer);
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    if let Err(error) =
        nix::sys::socket::send(watchdog.socket.as_raw_fd(), &buffer[..length], flags)
    {
        tracing::warn!(%error, pgid, "could not release a process group with the watchdog");
    }
}

/// Ends the watchdog at the end of `run`: closes our end of the socket — it then stops
/// whatever was not released and exits — and waits for it (bounded), so no process of the
/// run outlives the handler.
pub fn finish() {
    let Some(Watchdog { socket, mut child }) = lock().take() else {
        return;
    };
    drop(socket);
    let deadline = Instant::now() + EXIT_WAIT;
    // The watchdog exits within microseconds of the end of file; a pidfd wakes us the moment
    // it does, where a sleep between polls would add its whole period to every run.
    let pidfd = process_group::pidfd_open(child.id());
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() >= deadline => {
                tracing::warn!(pid = child.id(), "the watchdog did not exit; leaving it");
                return;
            }
            Ok(None) => match &pidfd {
                Some(pidfd) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
                    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
                    let _ = poll(&mut fds, timeout);
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            },
        }
    }
}

/// If this process was started as the watchdog (`<exe> __ai-session-handler-watchdog
/// <handler pgid>`), runs it and returns its exit code.
pub fn main_if_watchdog() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WATCHDOG_ARG {
        return None;
    }
    let handler_pgid = args
        .next()
        .and_then(|arg| arg.to_str()?.parse::<u32>().ok())
        .unwrap_or(0);
    Some(watch(handler_pgid))
}

/// The watchdog's life: read messages until the handler is gone, then stop what is left.
fn watch(handler_pgid: u32) -> i32 {
    for stopping in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ] {
        // SAFETY: installing SIG_IGN runs no handler code.
        unsafe {
            let _ = signal(stopping, SigHandler::SigIgn);
        }
    }
    let handler_pid = getppid().as_raw();
    let mut registry = Registry::new(getpgrp().as_raw() as u32, handler_pgid);
    // SAFETY: fd 0 is the socket the handler passed as stdin; it stays open for the whole
    // process life and nothing else closes it.
    let socket = unsafe { BorrowedFd::borrow_raw(0) };
    let mut packet = [0u8; 64];
    loop {
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(PRUNE_INTERVAL)) {
            Ok(0) => registry.forget_gone(process_group::group_exists),
            Ok(_) => match recv(socket.as_raw_fd(), &mut packet, MsgFlags::empty()) {
                // End of file: the handler is gone.
                Ok(0) => break,
                Ok(length) => {
                    if let Some(message) = WatchdogMessage::parse(&packet[..length]) {
                        registry.apply(message);
                    }
                }
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                Err(_) => break,
            },
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    registry.forget_gone(process_group::group_exists);
    let groups = registry.unreleased();
    if groups.is_empty() {
        return 0;
    }
    stop_groups(&groups);
    let listed: Vec<String> = groups.iter().map(u32::to_string).collect();
    eprintln!(
        "[ai-session-handler watchdog] the handler (pid {handler_pid}) ended without stopping worker process group {}; stopped it",
        listed.join(", ")
    );
    0
}

/// Stops each group as the group killer does ([`Escalation`]: SIGTERM, the grace period, then
/// SIGKILL while any member lives, bounded), all of them at once.
fn stop_groups(groups: &[u32]) {
    let alive = |pgid: u32| {
        process_group::group_exists(pgid)
            && proc::live_group_members(pgid).is_ok_and(|members| !members.is_empty())
    };
    let mut stopping: Vec<(u32, Escalation)> = groups
        .iter()
        .map(|pgid| (*pgid, Escalation::terminate()))
        .collect();
    while !stopping.is_empty() {
        let now = Instant::now();
        let mut next_check = CHECK_INTERVAL;
        stopping.retain_mut(
            |(pgid, escalation)| match escalation.step(now, alive(*pgid)) {
                KillStep::Send(signal) => {
                    let _ = process_group::signal_group(*pgid, signal);
                    true
                }
                KillStep::CheckAfter(after) => {
                    next_check = next_check.min(after);
                    true
                }
                KillStep::Emptied | KillStep::GaveUp => false,
            },
        );
        if !stopping.is_empty() {
            std::thread::sleep(next_check);
        }
    }
}
