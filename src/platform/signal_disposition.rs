//! Signal dispositions: giving a signal its default action back once nothing of ours handles
//! it any more.
//!
//! `signal-hook` never uninstalls the handler it registered: after its stream is closed a
//! delivery still runs that handler, which now does nothing, so the signal is silently
//! ignored. Once a `run` has recorded everything, the handler's only work left is printing its
//! final report, and a report blocked on a stdout or stderr nobody reads must stay
//! interruptible like any program's output.

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// Sets the default action (`SIG_DFL`) for each of `signals` (numbers that are no signal are
/// skipped). A failure is logged and the signal keeps its disposition.
///
/// Call it only when nothing in this process will register these signals with `signal-hook`
/// again: its registry still believes its handler is installed and would not reinstall it.
pub fn restore_default(signals: &[i32]) {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for &number in signals {
        let Ok(signal) = Signal::try_from(number) else {
            continue;
        };
        // SAFETY: installing SIG_DFL runs no code of ours when the signal arrives.
        if let Err(error) = unsafe { sigaction(signal, &default) } {
            tracing::warn!(signal = number, %error, "cannot restore the default action of a signal");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `signal` currently has its default action (read without changing it).
    fn is_default(signal: i32) -> std::io::Result<bool> {
        let signal = Signal::try_from(signal).map_err(std::io::Error::from)?;
        let mut current = std::mem::MaybeUninit::<nix::libc::sigaction>::uninit();
        // SAFETY: a null new action only reads the current one into `current`.
        let result =
            unsafe { nix::libc::sigaction(signal as i32, std::ptr::null(), current.as_mut_ptr()) };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: sigaction succeeded, so it filled `current`.
        let current = unsafe { current.assume_init() };
        Ok(current.sa_sigaction == nix::libc::SIG_DFL)
    }

    #[test]
    fn a_signal_hook_handler_is_replaced_by_the_default_action() {
        // SIGWINCH: default is "ignore", so nothing happens to the test process whatever the
        // disposition; no other test uses it.
        let winch = nix::libc::SIGWINCH;
        let id = signal_hook::flag::register(
            winch,
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        )
        .unwrap();
        assert!(!is_default(winch).unwrap());
        signal_hook::low_level::unregister(id);
        assert!(
            !is_default(winch).unwrap(),
            "signal-hook leaves its handler installed"
        );
        restore_default(&[winch, 0, 9999]);
        assert!(is_default(winch).unwrap());
    }
}
