//! The handler's side of the per-run watchdog (docs/architecture.md, "The watchdog"): starting
//! it (a re-execution of the handler's binary), telling it which
//! groups to watch and release, noticing its loss on a monitor thread and replacing it, and
//! waiting for it at the end. Its own life is [`super::watchdog_process`].

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, socketpair};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::{Pid, getpgrp, getpid, setsid};

use super::watchdog_process::WatchdogConfig;
use super::{proc, process_group};
use crate::domain::watchdog::{
    LossBudget, LossCause, MAX_MESSAGE, Replacement, WatchdogLoss, WatchdogMessage,
};

pub(crate) use super::watchdog_process::{WATCHDOG_NAME, WatchdogLog, main_if_watchdog};

/// How long the handler waits for the watchdog to exit at the end of a run.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Receives the losses of the watchdog (the running attempt).
type Listener = dyn Fn(WatchdogLoss) + Send + Sync;

/// The handler's view of its watchdog: the current one's socket and pid.
#[derive(Default)]
struct HandlerSide {
    socket: Option<OwnedFd>,
    pid: Option<u32>,
    config: WatchdogConfig,
    /// Groups registered and not released, with their tokens: what a replacement is told.
    watched: BTreeMap<u32, String>,
    budget: LossBudget,
    /// `finish` closed the socket: the watchdog's exit is expected.
    finishing: bool,
    /// Gone once its [`Subscription`] is dropped.
    listener: Option<Weak<Listener>>,
    /// Losses no subscriber heard yet (the next attempt is told).
    pending: Vec<WatchdogLoss>,
}

static SIDE: Mutex<Option<HandlerSide>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<HandlerSide>> {
    SIDE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts the watchdog; returns its pid. Call once, before any worker is spawned. It records
/// what it had to stop in the run's `events_path` (as `run_id`'s) and in the handler's `log`.
pub(crate) fn start(
    events_path: PathBuf,
    run_id: &str,
    log: Option<WatchdogLog>,
) -> io::Result<u32> {
    let config = WatchdogConfig {
        handler_pid: getpid().as_raw() as u32,
        handler_pgid: getpgrp().as_raw() as u32,
        events_path: Some(events_path),
        run_id: run_id.to_owned(),
        log,
    };
    let (socket, pid) = exec_watchdog(&config)?;
    // Never mistaken for a worker's escapee (nor counted as the worker's activity).
    super::helper_registry::lock().spare_watchdog(pid, proc::start_time(pid));
    *lock() = Some(HandlerSide {
        socket: Some(socket),
        pid: Some(pid),
        config,
        ..HandlerSide::default()
    });
    if let Err(error) = std::thread::Builder::new()
        .name("ash-watchdog-monitor".into())
        .spawn(move || monitor(pid))
    {
        // The watchdog itself works; `finish` reaps it.
        tracing::warn!(%error, "cannot start the watchdog monitor; a lost watchdog would go unnoticed");
    }
    Ok(pid)
}

/// (ours, theirs), both close-on-exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)
}

fn exec_watchdog(config: &WatchdogConfig) -> io::Result<(OwnedFd, u32)> {
    let (ours, theirs) = socket_pair()?;
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0(WATCHDOG_NAME)
        .args(config.to_args())
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| setsid().map(drop).map_err(io::Error::from));
    }
    let child = command.spawn()?;
    // The monitor thread waits for it by pid; the `Child` handle is not needed.
    Ok((ours, child.id()))
}

/// Waits for the watchdog `pid` to exit or stop, and handles each loss until the run ends or
/// no watchdog is left.
fn monitor(mut pid: u32) {
    loop {
        let lost = wait_lost(pid);
        let mut guard = lock();
        let Some(side) = guard.as_mut() else { return };
        let Some(cause) = lost.filter(|_| !side.finishing) else {
            // The expected exit after `finish`, or nothing left to wait for.
            side.pid = None;
            return;
        };
        let replacement = if side.budget.replace_after_loss() {
            match replace(side) {
                Ok(new_pid) => Replacement::Started(new_pid),
                Err(error) => Replacement::Failed(error.to_string()),
            }
        } else {
            Replacement::GaveUp {
                losses: side.budget.losses(),
            }
        };
        if !matches!(replacement, Replacement::Started(_)) {
            // Nothing watches the workers any more; `finish` has nothing to wait for.
            side.socket = None;
            side.pid = None;
        }
        let signal = match cause {
            LossCause::Killed(signal) | LossCause::Stopped(signal) => {
                process_group::signal_name(signal)
            }
            LossCause::Exited(_) => None,
        };
        let loss = WatchdogLoss {
            pid,
            cause,
            replacement: replacement.clone(),
            signal_name: signal,
        };
        tracing::info!(loss = %loss.describe(), "watchdog lost");
        match side.listener.as_ref().and_then(Weak::upgrade) {
            Some(listener) => {
                drop(guard);
                listener(loss);
            }
            None => {
                side.pending.push(loss);
                drop(guard);
            }
        }
        match replacement {
            Replacement::Started(new_pid) => pid = new_pid,
            Replacement::Failed(_) | Replacement::GaveUp { .. } => return,
        }
    }
}

/// Blocks until the watchdog `pid` (our child) exits or is stopped; a stopped one is killed
/// and reaped. `None` when there is nothing to wait for.
fn wait_lost(pid: u32) -> Option<LossCause> {
    let target = Pid::from_raw(pid as i32);
    loop {
        match waitid(
            Id::Pid(target),
            WaitPidFlag::WEXITED | WaitPidFlag::WSTOPPED,
        ) {
            Ok(WaitStatus::Exited(_, code)) => return Some(LossCause::Exited(code)),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                return Some(LossCause::Killed(signal as i32));
            }
            Ok(WaitStatus::Stopped(_, signal)) => {
                // A stopped watchdog protects nothing; it is our child, unreaped, so its pid
                // is still its own.
                let _ = kill(target, Signal::SIGKILL);
                let _ = waitid(Id::Pid(target), WaitPidFlag::WEXITED);
                return Some(LossCause::Stopped(signal as i32));
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}

fn replace(side: &mut HandlerSide) -> io::Result<u32> {
    fail::fail_point!("watchdog-replace", |_| Err(io::Error::other(
        "injected failure at failpoint watchdog-replace"
    )));
    // Under the registry's lock from the fork on: a sweep meanwhile would take the new
    // watchdog, a child that started after the worker, for an escapee.
    let mut registry = super::helper_registry::lock();
    let (socket, pid) = exec_watchdog(&side.config)?;
    registry.spare_watchdog(pid, proc::start_time(pid));
    drop(registry);
    for (pgid, attempt) in &side.watched {
        send(
            &socket,
            WatchdogMessage::Watch {
                pgid: *pgid,
                attempt,
            },
        );
    }
    side.socket = Some(socket);
    side.pid = Some(pid);
    Ok(pid)
}

fn send(socket: &OwnedFd, message: WatchdogMessage<'_>) {
    if let Err(error) = send_raw(socket.as_raw_fd(), message) {
        tracing::warn!(%error, ?message, "could not tell the watchdog");
    }
}

/// One non-blocking `send` of a message formatted on the stack: async-signal-safe.
fn send_raw(fd: RawFd, message: WatchdogMessage<'_>) -> nix::Result<usize> {
    let mut buffer = [0u8; MAX_MESSAGE];
    let length = message.encode(&mut buffer);
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    nix::sys::socket::send(fd, &buffer[..length], flags)
}

/// A close-on-exec duplicate of our end of the socket for the next spawn, held until the
/// spawn is over, so its number names that socket in the child whatever happens meanwhile.
pub(crate) fn registration() -> Option<OwnedFd> {
    let guard = lock();
    let socket = guard.as_ref()?.socket.as_ref()?;
    socket.try_clone().ok()
}

/// Registers the calling process's group and token with the watchdog, from a child between
/// `fork` and `exec` (after `setsid`): only async-signal-safe calls. A watchdog that is gone
/// or full is ignored; the handler registers the group again once the spawn returned.
pub(crate) fn register_self(fd: RawFd, token: &str) {
    let pgid = getpid().as_raw() as u32;
    let _ = send_raw(
        fd,
        WatchdogMessage::Watch {
            pgid,
            attempt: token,
        },
    );
}

/// Records, once its spawn returned, that group `pgid`, whose processes carry `token`, is
/// watched, and tells the current watchdog (the child's own registration may have gone to one
/// replaced meanwhile).
pub(crate) fn watching(pgid: u32, token: &str) {
    let mut guard = lock();
    let Some(side) = guard.as_mut() else { return };
    side.watched.insert(pgid, token.to_owned());
    if let Some(socket) = &side.socket {
        send(
            socket,
            WatchdogMessage::Watch {
                pgid,
                attempt: token,
            },
        );
    }
}

/// Tells the watchdog the handler stopped group `pgid` itself.
pub(crate) fn release(pgid: u32) {
    let mut guard = lock();
    let Some(side) = guard.as_mut() else { return };
    side.watched.remove(&pgid);
    if let Some(socket) = &side.socket {
        send(socket, WatchdogMessage::Release(pgid));
    }
}

/// Suspends the run for a person's Ctrl-Z (blocking until it is continued): tells the
/// watchdog the handler's stop is theirs, stops every watched group, stops the handler, and
/// once something continued it, continues the groups and tells the watchdog.
pub(crate) fn suspend_run() {
    let groups = pause(WatchdogMessage::Suspend, Signal::SIGSTOP);
    tracing::info!(pgids = ?groups, "process groups suspended with the handler");
    // Directed at this very thread (a process-directed one may be taken by another thread,
    // and this one would run on a moment): it stops before `raise` returns, the other threads
    // with it, and `fg` or `bg` continue them all.
    let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    pause(WatchdogMessage::Resume, Signal::SIGCONT);
}

/// Tells the watchdog `message` and sends `signal` to every watched group; returns them.
fn pause(message: WatchdogMessage<'_>, signal: Signal) -> Vec<u32> {
    let guard = lock();
    let Some(side) = guard.as_ref() else {
        return Vec::new();
    };
    if let Some(socket) = &side.socket {
        send(socket, message);
    }
    let groups: Vec<u32> = side.watched.keys().copied().collect();
    for pgid in &groups {
        if let Err(error) = process_group::signal_group(*pgid, signal) {
            tracing::warn!(pgid, %error, "process group not suspended or continued");
        }
    }
    groups
}

/// Hands every later loss of the watchdog to `listener` — and, at once, the losses no one
/// heard yet — until the returned subscription is dropped. A new subscription replaces the
/// previous one.
pub(crate) fn subscribe(listener: impl Fn(WatchdogLoss) + Send + Sync + 'static) -> Subscription {
    let listener: Arc<Listener> = Arc::new(listener);
    let pending = match lock().as_mut() {
        Some(side) => {
            side.listener = Some(Arc::downgrade(&listener));
            std::mem::take(&mut side.pending)
        }
        None => Vec::new(),
    };
    for loss in pending {
        listener(loss);
    }
    Subscription {
        _listener: listener,
    }
}

/// Ends a [`subscribe`] when dropped.
pub(crate) struct Subscription {
    _listener: Arc<Listener>,
}

/// Closes our end of the socket at the end of `run` — the watchdog then stops whatever was not
/// released and exits — and waits for it (bounded). The monitor thread may reap it first: then
/// this wait finds no such child, and it is gone too.
pub(crate) fn finish() {
    let pid = {
        let mut guard = lock();
        let Some(side) = guard.as_mut() else { return };
        side.finishing = true;
        if let Some(socket) = &side.socket {
            send(socket, WatchdogMessage::Finish);
        }
        side.socket = None;
        side.pid
    };
    let Some(pid) = pid else { return };
    let target = Pid::from_raw(pid as i32);
    let deadline = Instant::now() + EXIT_WAIT;
    while Instant::now() < deadline {
        match waitid(Id::Pid(target), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            _ => return,
        }
    }
    tracing::warn!(pid, "the watchdog did not exit; leaving it");
}
