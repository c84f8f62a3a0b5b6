//! Signal dispositions after the run's signal intake (docs/architecture.md, "Signals"): the
//! default action given back ([`restore_default`]: `signal-hook` never uninstalls its handler,
//! which would leave the signals ignored), and a counting handler of our own ([`catch`]) while
//! the end-of-run hooks run (signal-hook's registry would not reinstall its own).

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// The first signal caught by [`catch`]'s handler (0: none yet).
static FIRST_CAUGHT: AtomicI32 = AtomicI32::new(0);
static CAUGHT_COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_signal(signal: nix::libc::c_int) {
    // Only atomics: async-signal-safe.
    let _ = FIRST_CAUGHT.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    CAUGHT_COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Signals caught by our own handler until this is dropped, which restores their default
/// action. One at a time per process.
pub(crate) struct CaughtSignals {
    signals: Vec<i32>,
}

/// Catches `signals` (numbers that are no signal are skipped) with a handler that only counts
/// them. Call it only after the run's signal intake is gone.
pub(crate) fn catch(signals: &[i32]) -> CaughtSignals {
    FIRST_CAUGHT.store(0, Ordering::SeqCst);
    CAUGHT_COUNT.store(0, Ordering::SeqCst);
    let caught = CaughtSignals {
        signals: signals.to_vec(),
    };
    caught.reinstall();
    caught
}

impl CaughtSignals {
    /// Installs our handler (again: the run's signal intake gives the signals their default
    /// action back when its state is dropped), keeping what was caught.
    pub(crate) fn reinstall(&self) {
        // SA_RESTART: a blocking call elsewhere (a report being printed) goes on after the
        // handler.
        let counting = SigAction::new(
            SigHandler::Handler(count_signal),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        set_action(&self.signals, &counting, "cannot catch a signal");
    }

    pub(crate) fn first(&self) -> Option<i32> {
        match FIRST_CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }

    pub(crate) fn count(&self) -> u32 {
        CAUGHT_COUNT.load(Ordering::SeqCst)
    }
}

impl Drop for CaughtSignals {
    fn drop(&mut self) {
        restore_default(&self.signals);
    }
}

/// Sets `SIG_DFL` for each of `signals`; a failure is logged. Only when nothing will register
/// them with `signal-hook` again: its registry would believe its handler still installed.
pub(crate) fn restore_default(signals: &[i32]) {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    set_action(
        signals,
        &default,
        "cannot restore the default action of a signal",
    );
}

/// Installs `action` — SIG_DFL or [`count_signal`] — for each of `signals` (numbers that are
/// no signal are skipped); a failure is logged as `failure`.
fn set_action(signals: &[i32], action: &SigAction, failure: &str) {
    for &number in signals {
        let Ok(signal) = Signal::try_from(number) else {
            continue;
        };
        // SAFETY: the action runs no code of ours (SIG_DFL) or only touches atomics
        // (`count_signal`), which is async-signal-safe.
        if let Err(error) = unsafe { sigaction(signal, action) } {
            tracing::warn!(signal = number, %error, "{failure}");
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
    fn caught_signals_are_counted_until_the_default_action_is_back() {
        // SIGURG: default is "ignore", no other test uses it.
        let urg = nix::libc::SIGURG;
        let caught = catch(&[urg]);
        assert!(!is_default(urg).unwrap());
        assert_eq!(caught.first(), None);
        nix::sys::signal::raise(Signal::SIGURG).unwrap();
        nix::sys::signal::raise(Signal::SIGURG).unwrap();
        assert_eq!(caught.first(), Some(urg));
        assert_eq!(caught.count(), 2);
        // Something else restores the default: reinstalling keeps the count.
        restore_default(&[urg]);
        assert!(is_default(urg).unwrap());
        caught.reinstall();
        nix::sys::signal::raise(Signal::SIGURG).unwrap();
        assert_eq!(caught.count(), 3);
        drop(caught);
        assert!(is_default(urg).unwrap());
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
