//! A process-wide service started on first use — a thread every attempt of the process
//! shares. A failure to start it is not remembered: it is the caller's error this time, and
//! the next caller tries again (a thread limit reached for a moment must not leave the rest of
//! the run without the service).

use std::io;
use std::sync::{Mutex, OnceLock, PoisonError};

/// `T`, started by the first successful [`StartedOnce::get_or_start`].
pub(crate) struct StartedOnce<T> {
    started: OnceLock<T>,
    /// Held while starting, so two first callers never start two services.
    starting: Mutex<()>,
}

impl<T> StartedOnce<T> {
    pub(crate) const fn new() -> Self {
        Self {
            started: OnceLock::new(),
            starting: Mutex::new(()),
        }
    }

    /// The service, started with `start` unless an earlier call started it.
    pub(crate) fn get_or_start(&self, start: impl FnOnce() -> io::Result<T>) -> io::Result<&T> {
        if let Some(service) = self.started.get() {
            return Ok(service);
        }
        let _starting = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(service) = self.started.get() {
            return Ok(service);
        }
        let service = start()?;
        Ok(self.started.get_or_init(|| service))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_started_service_is_kept() {
        let started = StartedOnce::new();
        assert_eq!(*started.get_or_start(|| Ok(1)).unwrap(), 1);
        assert_eq!(*started.get_or_start(|| Ok(2)).unwrap(), 1);
    }

    #[test]
    fn a_failed_start_is_reported_and_tried_again() {
        let started: StartedOnce<u8> = StartedOnce::new();
        let failed = started
            .get_or_start(|| Err(io::Error::new(io::ErrorKind::OutOfMemory, "no thread")))
            .unwrap_err();
        assert_eq!(failed.kind(), io::ErrorKind::OutOfMemory);
        assert_eq!(*started.get_or_start(|| Ok(3)).unwrap(), 3);
    }

    #[test]
    fn concurrent_first_callers_start_one_service() {
        let started: StartedOnce<usize> = StartedOnce::new();
        let starts = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    started
                        .get_or_start(|| {
                            Ok(starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                        })
                        .copied()
                        .unwrap()
                });
            }
        });
        assert_eq!(starts.into_inner(), 1);
        assert_eq!(*started.get_or_start(|| Ok(99)).unwrap(), 0);
    }
}
