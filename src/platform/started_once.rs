//! A process-wide service started on first use — a thread every attempt of the process
//! shares — whose failure to start is remembered: every later caller gets the same error, so
//! all attempts of a run behave as the first one did.

use std::io;
use std::sync::OnceLock;

/// `T`, started by the first [`StartedOnce::get_or_start`].
pub(crate) struct StartedOnce<T>(OnceLock<Result<T, (io::ErrorKind, String)>>);

impl<T> StartedOnce<T> {
    pub(crate) const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// The service, started with `start` if this is the first call.
    pub(crate) fn get_or_start(&self, start: impl FnOnce() -> io::Result<T>) -> io::Result<&T> {
        self.0
            .get_or_init(|| start().map_err(|error| (error.kind(), error.to_string())))
            .as_ref()
            .map_err(|(kind, message)| io::Error::new(*kind, message.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_start_is_kept_and_a_failure_is_repeated() {
        let started = StartedOnce::new();
        assert_eq!(*started.get_or_start(|| Ok(1)).unwrap(), 1);
        assert_eq!(*started.get_or_start(|| Ok(2)).unwrap(), 1);
        let failed: StartedOnce<u8> = StartedOnce::new();
        let first = failed
            .get_or_start(|| Err(io::Error::new(io::ErrorKind::OutOfMemory, "no thread")))
            .unwrap_err();
        let again = failed.get_or_start(|| Ok(3)).unwrap_err();
        assert_eq!(
            (first.kind(), again.kind()),
            (io::ErrorKind::OutOfMemory, io::ErrorKind::OutOfMemory)
        );
        assert_eq!(again.to_string(), "no thread");
    }
}
