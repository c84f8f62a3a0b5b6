//! The transcript file, appended to as the output arrives, with no buffering beyond the chunk
//! in hand, so a SIGKILLed handler still leaves everything it had read on disk (in the page
//! cache at least). No fsync: the transcript is evidence, not state. Appending blocks on the
//! disk: its owner (the attempt's transcript writer) calls it off the runtime threads.

use std::fs::File;
use std::io::{self, Write};

/// A transcript open for appending (it already holds its header).
pub(crate) struct TranscriptFile(File);

impl TranscriptFile {
    pub(crate) fn new(file: File) -> Self {
        Self(file)
    }

    /// Appends `bytes` (blocking).
    pub(crate) fn append(&self, bytes: &[u8]) -> io::Result<()> {
        // Lets tests hold a write for a while (`transcript-write=sleep(2000)`) or fail it.
        fail::fail_point!("transcript-write", |_| Err(io::Error::other(
            "injected failure at failpoint transcript-write"
        )));
        (&self.0).write_all(bytes)
    }
}
