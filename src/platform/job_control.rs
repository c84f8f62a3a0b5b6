//! Job control of a `run` (docs/reliability.md, "A stopped handler"): a person's Ctrl-Z — a
//! SIGTSTP the terminal sent — suspends the whole run: the watchdog is told, every watched
//! group (worker, hook, check; each in a session of its own, out of the terminal's reach) is
//! stopped, then the handler stops itself; on `fg` or `bg` all go on together. A SIGTSTP a
//! process sent is ignored, and any other stop of the handler is ended by the watchdog.

use std::io;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

use super::watchdog;

/// The write end of the wake-up pipe of the job-control thread (-1 before [`start`]).
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// What the signal handler writes: the terminal's SIGTSTP, or one a process sent.
const FROM_TERMINAL: u8 = 1;
const FROM_A_PROCESS: u8 = 0;

extern "C" fn on_stop_request(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo (null checked anyway).
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    // The terminal's line discipline sends it from the kernel; kill(2) and friends do not.
    let byte = if code == libc::SI_KERNEL {
        FROM_TERMINAL
    } else {
        FROM_A_PROCESS
    };
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking and never closed,
        // and a full one already wakes the thread.
        unsafe {
            libc::write(fd, (&raw const byte).cast(), 1);
        }
    }
}

/// Starts the job-control thread and catches SIGTSTP. Call after the watchdog is started
/// (a thread makes its start a re-execution).
pub(crate) fn start() -> io::Result<()> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
    std::thread::Builder::new()
        .name("ash-job-control".into())
        .spawn(move || serve(read))?;
    // Kept open for the process's life: the handler may write to it at any moment.
    WAKE.store(write.into_raw_fd(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::SigAction(on_stop_request),
        SaFlags::SA_RESTART | SaFlags::SA_SIGINFO,
        SigSet::empty(),
    );
    // SAFETY: the handler only reads its siginfo, an atomic, and calls write(2).
    unsafe { sigaction(Signal::SIGTSTP, &action) }.map_err(io::Error::from)?;
    Ok(())
}

fn serve(read: OwnedFd) {
    let mut byte = [0u8; 1];
    loop {
        match nix::unistd::read(&read, &mut byte) {
            Ok(0) => return,
            Ok(_) if byte[0] == FROM_TERMINAL => {
                tracing::info!("suspended from the terminal (SIGTSTP): the run is suspended");
                watchdog::suspend_run();
                tracing::info!("continued: the run goes on");
            }
            Ok(_) => {
                tracing::info!("ignored a SIGTSTP not sent by the terminal");
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => {
                tracing::warn!(%error, "job control stopped: SIGTSTP is no longer acted on");
                return;
            }
        }
    }
}
