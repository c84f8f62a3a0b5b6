//! The transcript file, written on a [`WriteThread`] of its own: a slow or failing disk must
//! never stall the runtime threads that run timeouts and signals. Chunks are appended as they
//! arrive, with no buffering beyond the chunk in hand, so a SIGKILLed handler still leaves
//! everything it had read on disk (in the page cache at least). No fsync: the transcript is
//! evidence, not state.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::write_thread::{Sink, WriteThread};

struct Appender(File);

impl Sink<()> for Appender {
    fn write(&mut self, (): (), bytes: &[u8]) -> io::Result<()> {
        // Lets tests hold a write for a while (`transcript-write=sleep(2000)`) or fail it.
        fail::fail_point!("transcript-write", |_| Err(io::Error::other(
            "injected failure at failpoint transcript-write"
        )));
        self.0.write_all(bytes)
    }
}

/// A transcript open for appending.
pub(crate) struct TranscriptFile(WriteThread<()>);

impl TranscriptFile {
    /// Takes over `file` (already holding the header).
    pub(crate) fn start(file: File) -> io::Result<Self> {
        WriteThread::start("ash-transcript", Appender(file)).map(Self)
    }

    /// Appends `bytes`; the receiver yields the result once they are written.
    pub(crate) fn append(&self, bytes: Arc<Vec<u8>>) -> oneshot::Receiver<io::Result<()>> {
        self.0.submit((), bytes)
    }
}
