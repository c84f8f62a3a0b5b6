//! The notification socket, both ends (docs/worker-protocol.md, "Notifications"): the
//! attempt's `SOCK_DGRAM` socket in a directory only the handler's user can enter, with
//! credentials checked against the attempt's processes ([`NotifySocket`], read by a task on the
//! caller's runtime), and the wrappers' sending end ([`NotifySender`]), which never blocks.

use std::ffi::OsStr;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::socket::{
    self, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr, sockopt,
};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::domain::notify::{
    AGENT_LOG_TARGET, FloodGuard, MAX_DATAGRAM_BYTES, Notification, NotifyTally, SenderVerdicts,
    parse_datagram,
};

/// sd_notify(3)'s variable.
pub(crate) const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Datagrams read per readiness wake-up before the task yields.
pub(crate) const BATCH: usize = 64;

/// At most this many queued datagrams are read when the receiving stops.
pub(crate) const DRAIN_LIMIT: usize = 4_096;

/// The most descriptors one datagram can carry (`SCM_MAX_FD`).
const MAX_PASSED_FDS: usize = 253;

/// An accepted datagram and who sent it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Delivery {
    pub pid: u32,
    pub notification: Notification,
}

/// `sun_path` holds 108 bytes, the terminating NUL included.
const MAX_SOCKET_PATH: usize = 107;

/// The socket's file name in its directory.
const SOCKET_NAME: &str = "notify";

/// The receiving end of one attempt's socket: close-on-exec, bound in a fresh directory of
/// mode 0700, both gone when it is dropped (the socket's descriptor closed where a close
/// cannot hold anything up: [`close_elsewhere`]).
#[derive(Debug)]
pub(crate) struct NotifySocket {
    fd: Option<OwnedFd>,
    path: String,
    /// Removed (with the socket's file) when dropped.
    directory: Option<tempfile::TempDir>,
}

impl NotifySocket {
    /// Binds a fresh socket at `<dir>/notify` in a new private directory under
    /// `$XDG_RUNTIME_DIR`, else the temporary directory, else `/tmp` (the first where it can be
    /// made and its path fits `sun_path`). Only the handler's user can enter the directory, so
    /// no other user's process can send at all. Datagrams queue in the kernel until
    /// [`Self::receive`] reads them, so it is bound before the worker starts and read once the
    /// worker's identity (the membership predicate) is known.
    pub(crate) fn bind() -> io::Result<Self> {
        let mut last_error = None;
        for base in socket_bases() {
            match Self::bind_in(&base) {
                Ok(socket) => return Ok(socket),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("no directory for the socket")))
    }

    fn bind_in(base: &Path) -> io::Result<Self> {
        let directory = tempfile::Builder::new()
            .prefix("ai-session-handler-notify-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        let path = directory.path().join(SOCKET_NAME);
        let path = path.to_str().map(str::to_owned).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the socket path is not UTF-8")
        })?;
        if path.len() > MAX_SOCKET_PATH {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the socket path {path} is longer than {MAX_SOCKET_PATH} bytes"),
            ));
        }
        let fd = datagram_socket()?;
        // Before the bind: a datagram queued without credentials could not be judged.
        socket::setsockopt(&fd, sockopt::PassCred, &true)?;
        socket::bind(fd.as_raw_fd(), &UnixAddr::new(path.as_str())?)?;
        Ok(Self {
            fd: Some(fd),
            path,
            directory: Some(directory),
        })
    }

    /// The worker's `NOTIFY_SOCKET` value: the socket's absolute path.
    pub(crate) fn env_value(&self) -> &str {
        &self.path
    }

    /// Receives until `stop` fires (or its sender is dropped), handing every accepted datagram
    /// from a process for which `is_member(pid)` holds to `deliver`; then reads what is still
    /// queued (a final report sent just before the worker's exit counts), closes the socket and
    /// returns the tally. Nothing it meets fails the attempt: a read error ends the receiving.
    pub(crate) async fn receive(
        mut self,
        mut is_member: impl FnMut(u32) -> bool,
        mut deliver: impl FnMut(Delivery),
        stop: &mut oneshot::Receiver<()>,
    ) -> NotifyTally {
        let Some(socket) = self.fd.take() else {
            return NotifyTally::default();
        };
        // SAFETY: `socket` is an open socket this value owns alone; `OwnedFd::as_raw_fd`
        // returns it unchanged until the `AsyncFd` drops it.
        let fd = match unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE) } {
            Ok(fd) => fd,
            Err(error) => {
                tracing::warn!(%error, "cannot watch the notification socket; notifications are not read");
                return NotifyTally::default();
            }
        };
        let mut receiver = Receiver {
            buffer: vec![0; MAX_DATAGRAM_BYTES],
            control: nix::cmsg_space!(nix::libc::ucred, [RawFd; MAX_PASSED_FDS]),
            guard: FloodGuard::default(),
            verdicts: SenderVerdicts::default(),
            origin: Instant::now(),
            tally: NotifyTally::default(),
        };
        'receiving: loop {
            let mut ready = tokio::select! {
                biased;
                _ = &mut *stop => break 'receiving,
                ready = fd.readable() => match ready {
                    Ok(ready) => ready,
                    Err(error) => {
                        tracing::warn!(%error, "notification socket failed; notifications are no longer read");
                        break 'receiving;
                    }
                },
            };
            for _ in 0..BATCH {
                if let Some(pause) = receiver.guard.before_read(receiver.elapsed()) {
                    tokio::select! {
                        biased;
                        _ = &mut *stop => break 'receiving,
                        () = tokio::time::sleep(pause) => {}
                    }
                    continue 'receiving;
                }
                match ready
                    .try_io(|fd| receiver.read_one(fd.get_ref(), &mut is_member, &mut deliver))
                {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "reading the notification socket failed; notifications are no longer read");
                        break 'receiving;
                    }
                    // Drained: wait for the next readiness.
                    Err(_would_block) => continue 'receiving,
                }
            }
            tokio::task::yield_now().await;
        }
        // The worker may have sent its last word just before exiting.
        for _ in 0..DRAIN_LIMIT {
            match receiver.read_one(fd.get_ref(), &mut is_member, &mut deliver) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    tracing::warn!(%error, "reading the notification socket failed while draining");
                    break;
                }
            }
        }
        // Senders can no longer reach it; then the socket is closed (with whatever a sender
        // may still have queued on it) where a close cannot hold up this task.
        drop(self.directory.take());
        close_elsewhere(fd.into_inner());
        receiver.tally
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        drop(self.directory.take());
        if let Some(fd) = self.fd.take() {
            close_elsewhere(fd);
        }
    }
}

/// A non-blocking Unix datagram socket: the receiver's and a sender's.
fn datagram_socket() -> nix::Result<OwnedFd> {
    socket::socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
}

/// Where an attempt's socket directory may go, in order of preference.
fn socket_bases() -> Vec<PathBuf> {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute());
    let mut bases: Vec<PathBuf> = runtime_dir.into_iter().collect();
    bases.push(std::env::temp_dir());
    bases.push(PathBuf::from("/tmp"));
    bases.dedup();
    bases
}

/// Closes `fd` on a thread of its own. Descriptors passed along are accepted (refusing them,
/// `SO_PASSRIGHTS`, would fail `systemd-notify`, whose default mode passes a pipe and waits for
/// its close), but closing the last reference to a passed socket can block for its whole
/// `SO_LINGER` time (a file on a stalled FUSE mount for good), so the receiver never closes
/// what a sender passed: a stalled close holds up only this thread and the closes queued
/// behind it. The receiving socket itself is closed here too, since whatever is still queued
/// on it is released with it.
fn close_elsewhere(fd: OwnedFd) {
    static CLOSER: OnceLock<Option<mpsc::Sender<OwnedFd>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<OwnedFd>();
        std::thread::Builder::new()
            .name("ash-fd-closer".to_owned())
            .spawn(move || receiver.into_iter().for_each(drop))
            .map_err(|error| tracing::warn!(%error, "cannot start the descriptor closer"))
            .ok()
            .map(|_| sender)
    });
    // Without the thread (it could not be started, or is gone): closed here, as a last resort.
    match closer {
        Some(sender) => {
            if let Err(mpsc::SendError(fd)) = sender.send(fd) {
                drop(fd);
            }
        }
        None => drop(fd),
    }
}

/// The receiving loop's buffers and counters: memory is one datagram's buffer (`MSG_TRUNC`
/// still tells an oversized one's length), CPU is bounded by the [`FloodGuard`] and by judging
/// each sender once a while ([`SenderVerdicts`]), not once a datagram.
struct Receiver {
    buffer: Vec<u8>,
    control: Vec<u8>,
    guard: FloodGuard,
    verdicts: SenderVerdicts,
    origin: Instant,
    tally: NotifyTally,
}

impl Receiver {
    fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Reads one datagram (`WouldBlock` when none is queued), closes what it carried, judges
    /// its sender and hands it on if accepted.
    fn read_one(
        &mut self,
        fd: &OwnedFd,
        is_member: &mut impl FnMut(u32) -> bool,
        deliver: &mut impl FnMut(Delivery),
    ) -> io::Result<()> {
        let mut iov = [IoSliceMut::new(&mut self.buffer)];
        let message = socket::recvmsg::<()>(
            fd.as_raw_fd(),
            &mut iov,
            Some(&mut self.control),
            MsgFlags::MSG_TRUNC | MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let len = message.bytes;
        let mut sender = None;
        match message.cmsgs() {
            Ok(cmsgs) => {
                for cmsg in cmsgs {
                    match cmsg {
                        ControlMessageOwned::ScmCredentials(credentials) => {
                            sender = u32::try_from(credentials.pid()).ok();
                        }
                        ControlMessageOwned::ScmRights(fds) => {
                            for fd in fds {
                                // SAFETY: the kernel just installed `fd` in our table for us;
                                // nothing else knows it, so this is its only owner.
                                close_elsewhere(unsafe { OwnedFd::from_raw_fd(fd) });
                                self.tally.descriptors_closed += 1;
                            }
                        }
                        _ => {}
                    }
                }
            }
            // The buffer holds the kernel's maximum; if it still overflowed, the kernel kept
            // what did not fit and released it.
            Err(_) => tracing::warn!("a notification's control data was truncated"),
        }
        let received = len.min(self.buffer.len());
        let at = self.elapsed();
        let verdicts = &mut self.verdicts;
        let Some(pid) = sender.filter(|&pid| verdicts.judge(pid, at, &mut *is_member)) else {
            self.tally.from_outside += 1;
            return Ok(());
        };
        if !self.guard.may_parse(self.elapsed()) {
            self.tally.flooded += 1;
            return Ok(());
        }
        let parsed = parse_datagram(&self.buffer[..received], len);
        self.tally.count(&parsed);
        match parsed {
            Ok(notification) => deliver(Delivery { pid, notification }),
            Err(rejection) => {
                tracing::debug!(target: AGENT_LOG_TARGET, pid, %rejection, "notification dropped");
            }
        }
        Ok(())
    }
}

/// The sending end: what an agent (a wrapper) uses to notify the runner that started it.
#[derive(Debug)]
pub(crate) struct NotifySender {
    fd: OwnedFd,
    address: UnixAddr,
}

impl NotifySender {
    /// From `NOTIFY_SOCKET`, if it is set and names a socket address; `None` otherwise (the
    /// agent then behaves as without a runner listening).
    pub(crate) fn from_env() -> Option<Self> {
        let value = std::env::var_os(NOTIFY_SOCKET)?;
        Self::connect(&value)
            .inspect_err(
                |error| tracing::debug!(%error, "NOTIFY_SOCKET is not usable; not notifying"),
            )
            .ok()
    }

    /// For the address `value` (`@name` abstract, or a path).
    pub(crate) fn connect(value: &OsStr) -> io::Result<Self> {
        let bytes = value.as_bytes();
        let address = match bytes.split_first() {
            Some((b'@', name)) => UnixAddr::new_abstract(name)?,
            Some((b'/', _)) => UnixAddr::new(bytes)?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "NOTIFY_SOCKET is neither an absolute path nor an @abstract name",
                ));
            }
        };
        let fd = datagram_socket()?;
        Ok(Self { fd, address })
    }

    /// Sends `message` (`KEY=VALUE` lines) as one datagram; never blocks. An error means it
    /// was not delivered (the receiver is gone, or its queue is full: the datagram is dropped).
    pub(crate) fn send(&self, message: &str) -> io::Result<()> {
        socket::sendmsg(
            self.fd.as_raw_fd(),
            &[IoSlice::new(message.as_bytes())],
            &[],
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            Some(&self.address),
        )
        .map(drop)
        .map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests;
