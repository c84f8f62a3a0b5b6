//! Signalling and reaping of process groups and adopted children: `killpg`, the subreaper
//! `prctl`, pidfds and the escapee kills. (A worker's leader is reaped by its pidfd in
//! `worker_child`; the watchdog and `session_spawn` signal the processes they own.)
//!
//! A worker's group is addressed only by the pgid saved at launch, never our own group and
//! never pgid 0 or 1. Single processes are signalled only when they are our own children
//! (adopted as a child subreaper), whose pids cannot be reused while unreaped, or through a
//! pidfd checked against the start time the sweep saw (descendants of those children).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, getsid};

pub(crate) use crate::domain::escalation::StopSignal;

fn as_nix(signal: StopSignal) -> Signal {
    match signal {
        StopSignal::Terminate => Signal::SIGTERM,
        StopSignal::Kill => Signal::SIGKILL,
    }
}

/// Why a group was not signalled.
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

/// Signals every member of the worker group `pgid`. An empty group is not an error.
pub(crate) fn signal_group(pgid: u32, signal: StopSignal) -> Result<(), GroupSignalError> {
    let own_group = getpgrp().as_raw() as u32;
    if pgid <= 1 || pgid == own_group {
        return Err(GroupSignalError::NotAWorkerGroup(pgid));
    }
    match killpg(Pid::from_raw(pgid as i32), as_nix(signal)) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(errno) => Err(GroupSignalError::Failed {
            pgid,
            signal: signal.name(),
            errno,
        }),
    }
}

/// Whether the kernel still knows any process (zombies included) in group `pgid`: the cheap
/// probe, one syscall, before a `/proc` scan says which members are alive.
pub(crate) fn group_exists(pgid: u32) -> bool {
    pgid > 1 && killpg(Pid::from_raw(pgid as i32), None) != Err(Errno::ESRCH)
}

/// Signals one of our own children (an adopted descendant): its pid cannot be reused while
/// it is unreaped.
pub(crate) fn signal_child(pid: u32, signal: SweepSignal) {
    let _ = kill(Pid::from_raw(pid as i32), signal.as_nix());
}

/// What the escaped-descendant sweep sends: SIGSTOP to freeze a lineage (a stopped process
/// cannot fork), then SIGKILL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SweepSignal {
    Stop,
    Kill,
}

impl SweepSignal {
    fn as_nix(self) -> Signal {
        match self {
            Self::Stop => Signal::SIGSTOP,
            Self::Kill => Signal::SIGKILL,
        }
    }
}

/// Signals a descendant of an adoptee — a process that is *not* our child — without ever
/// reaching another process that reuses its pid: a pidfd is opened first, then the process's
/// start time is checked against the one seen in the scan (a reused pid has a later one), and
/// the signal goes through the pidfd, which names that process only. Returns false when the
/// process is gone, is not the one scanned, or pidfds are unavailable (Linux < 5.3).
pub(crate) fn signal_descendant(pid: u32, start_time_ticks: u64, signal: SweepSignal) -> bool {
    let Some(pidfd) = pidfd_open(pid) else {
        return false;
    };
    let same = super::proc::stat(pid)
        .ok()
        .flatten()
        .is_some_and(|stat| stat.start_time_ticks == start_time_ticks);
    same && pidfd_send_signal(&pidfd, signal.as_nix())
}

/// A pidfd for `pid`: a descriptor that names that process only (readable once it exits).
/// `None` when the process is gone or pidfds are unavailable (Linux < 5.3).
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) takes plain integers and returns a new descriptor or -1; no
    // memory is shared with the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// SIGKILLs the process behind `pidfd` (a reused pid is never hit).
pub(crate) fn kill_by_pidfd(pidfd: &OwnedFd) -> bool {
    pidfd_send_signal(pidfd, Signal::SIGKILL)
}

fn pidfd_send_signal(pidfd: &OwnedFd, signal: Signal) -> bool {
    // SAFETY: pidfd_send_signal(fd, sig, NULL, 0): a descriptor we own, a signal number, no
    // siginfo pointer.
    let result = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    result == 0
}

/// Reaps one of our own children if it has exited; never `waitpid(-1)`, which would steal the
/// children tokio waits for.
pub(crate) fn reap_child(pid: u32) {
    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
}

/// Registers the handler as a child subreaper: descendants that leave a worker's group are
/// re-parented to the handler, not to init, when their parent dies.
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
