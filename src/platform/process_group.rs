//! Signalling and reaping: the only place that calls `kill`, `killpg`, `waitpid` and `prctl`.
//!
//! A worker's group is addressed only by the pgid saved at launch, never our own group and
//! never pgid 0 or 1. Single processes are signalled only when they are our own children
//! (adopted as a child subreaper), whose pids cannot be reused while unreaped.

use std::io;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, getsid};

use super::proc::{self, ChildSnapshot};

/// The signals the killer sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    Terminate,
    Kill,
}

impl StopSignal {
    fn as_nix(self) -> Signal {
        match self {
            Self::Terminate => Signal::SIGTERM,
            Self::Kill => Signal::SIGKILL,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Terminate => "SIGTERM",
            Self::Kill => "SIGKILL",
        }
    }
}

/// Why a group was not signalled.
#[derive(Debug, thiserror::Error)]
pub enum GroupSignalError {
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
pub fn signal_group(pgid: u32, signal: StopSignal) -> Result<(), GroupSignalError> {
    let own_group = getpgrp().as_raw() as u32;
    if pgid <= 1 || pgid == own_group {
        return Err(GroupSignalError::NotAWorkerGroup(pgid));
    }
    match killpg(Pid::from_raw(pgid as i32), signal.as_nix()) {
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
pub fn group_exists(pgid: u32) -> bool {
    pgid > 1 && killpg(Pid::from_raw(pgid as i32), None) != Err(Errno::ESRCH)
}

/// SIGKILLs one of our own children (an adopted descendant).
pub fn kill_child(pid: u32) {
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// Reaps one of our own children if it has exited; never `waitpid(-1)`, which would steal the
/// children tokio waits for.
pub fn reap_child(pid: u32) {
    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
}

/// Registers the handler as a child subreaper: descendants that leave a worker's group are
/// re-parented to the handler, not to init, when their parent dies.
pub fn become_child_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// Whether this process leads its own session: the handler starts every worker that way
/// (`setsid`), a shell never does for a command it runs.
pub fn leads_own_session() -> bool {
    getsid(None).is_ok_and(|session| session == getpid())
}

/// Sends signal number `signal` to our child `pid` (a forwarded SIGINT/SIGTERM). The caller
/// guarantees the child is not reaped yet, so the pid cannot have been reused.
pub fn signal_child(pid: u32, signal: i32) {
    if let (Ok(pid), Ok(signal)) = (i32::try_from(pid), Signal::try_from(signal)) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// `SIGINT`, `SIGTERM`, … for a signal number the platform knows.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Signal::try_from(signal).ok().map(Signal::as_str)
}

/// One pass over our children as a child subreaper: reaps adopted zombies and returns the
/// live adopted descendants of a worker — every child except `leader` (tokio reaps it), the
/// children we had before the worker (`inherited`), and any that started before it (clock
/// ticks are coarse, so only a strictly earlier start proves a child is not the worker's;
/// without `worker_started_ticks` none can be told apart and none is returned). The caller
/// kills what it gets with [`kill_child`].
pub fn adopted_descendants(
    leader: Option<u32>,
    worker_started_ticks: Option<u64>,
    inherited: &ChildSnapshot,
) -> Vec<u32> {
    let mut alive = Vec::new();
    for pid in proc::own_children().unwrap_or_default() {
        if Some(pid) == leader {
            continue;
        }
        match proc::stat(pid) {
            Ok(Some(stat)) if stat.is_defunct() => reap_child(pid),
            Ok(Some(stat))
                if inherited.contains(&stat)
                    || worker_started_ticks
                        .is_none_or(|started| stat.start_time_ticks < started) =>
            {
                tracing::debug!(pid, "adopted child predates the worker; left alone");
            }
            Ok(Some(_)) => alive.push(pid),
            _ => {}
        }
    }
    alive
}
