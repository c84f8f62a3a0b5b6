//! A worker process the handler started itself ([`super::spawn`]), not through
//! `tokio::process`: its three pipes as tokio pipe ends, and its exit awaited on a pidfd and
//! reaped by that pidfd exactly once — so a reused pid can never be waited for or signalled
//! by mistake.
//!
//! Dropping a child that was never reaped kills it (SIGKILL through the pidfd) and reaps it
//! on a thread of its own. That is a backstop for a bug only, as `kill_on_drop` was: the
//! group killer is what stops workers.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::process_group;
use crate::domain::decision::ChildExit;

/// A started worker: the leader of its own session and process group.
#[derive(Debug)]
pub(crate) struct WorkerChild {
    pid: u32,
    /// `None` once dropped into the reaping thread.
    pidfd: Option<AsyncFd<OwnedFd>>,
    exit: Option<ChildExit>,
    /// The worker's stdin (the prompt goes there).
    pub stdin: Option<pipe::Sender>,
    /// The worker's stdout.
    pub stdout: Option<pipe::Receiver>,
    /// The worker's stderr.
    pub stderr: Option<pipe::Receiver>,
}

/// The handler's ends of a worker's three pipes.
pub(crate) struct ParentEnds {
    pub(crate) stdin: OwnedFd,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
}

impl WorkerChild {
    /// Takes charge of child `pid`, whose pidfd is `pidfd`, with the handler's ends of its
    /// pipes. Call inside the runtime: the descriptors are registered with its reactor.
    pub(crate) fn new(pid: u32, pidfd: OwnedFd, ends: ParentEnds) -> io::Result<Self> {
        // SAFETY: an `OwnedFd` keeps its descriptor open and the same until the `AsyncFd`
        // drops it or hands it back (`into_inner`).
        let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
            .map_err(|error| error.into_parts().1)?;
        Ok(Self {
            pid,
            pidfd: Some(pidfd),
            exit: None,
            stdin: Some(pipe::Sender::from_owned_fd(ends.stdin)?),
            stdout: Some(pipe::Receiver::from_owned_fd(ends.stdout)?),
            stderr: Some(pipe::Receiver::from_owned_fd(ends.stderr)?),
        })
    }

    /// The worker's pid, which is also its process group and session id.
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// Waits until the worker exits and reaps it; later calls return the same exit.
    pub(crate) async fn wait(&mut self) -> io::Result<ChildExit> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        let pidfd = self
            .pidfd
            .as_ref()
            .ok_or_else(|| io::Error::other("the worker was handed off"))?;
        loop {
            let mut ready = pidfd.readable().await?;
            match reap(pidfd.get_ref()) {
                Ok(Some(exit)) => {
                    self.exit = Some(exit);
                    return Ok(exit);
                }
                // Readable is only ever set by an exit; a spurious wake-up waits again.
                Ok(None) => ready.clear_ready(),
                Err(Errno::EINTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
    }
}

/// Reaps the child behind `pidfd` if it has exited (`WNOHANG`).
fn reap(pidfd: &OwnedFd) -> Result<Option<ChildExit>, Errno> {
    let status = waitid(
        Id::PIDFd(pidfd.as_fd()),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
    )?;
    Ok(match status {
        WaitStatus::Exited(_, code) => Some(ChildExit {
            code: Some(code),
            signal: None,
        }),
        WaitStatus::Signaled(_, signal, _) => Some(ChildExit {
            code: None,
            signal: Some(signal as i32),
        }),
        _ => None,
    })
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        if self.exit.is_some() {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        let pidfd = pidfd.into_inner();
        process_group::kill_by_pidfd(&pidfd);
        // SIGKILL takes effect soon but not at once: reap off the caller's thread.
        let reaper = std::thread::Builder::new()
            .name("ash-reaper".into())
            .spawn(move || {
                let _ = waitid(Id::PIDFd(pidfd.as_fd()), WaitPidFlag::WEXITED);
            });
        if let Err(error) = reaper {
            tracing::warn!(pid = self.pid, %error, "cannot reap a dropped worker");
        }
    }
}
