//! The transcript file, written on the transcript [`WriteThread`]: a slow or failing disk must
//! never stall the runtime threads that run timeouts and signals. Chunks are appended as they
//! arrive, with no buffering beyond the chunk in hand, so a SIGKILLed handler still leaves
//! everything it had read on disk (in the page cache at least). No fsync: the transcript is
//! evidence, not state.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::started_once::StartedOnce;
use super::write_thread::{Sink, WriteThread};

/// Writes each chunk to the transcript it names: one thread serves every transcript of the
/// process, since attempts run one after another (a thread per attempt cost more than the
/// writes of a short one).
struct Appender;

impl Sink<Arc<File>> for Appender {
    fn write(&mut self, file: Arc<File>, bytes: &[u8]) -> io::Result<()> {
        // Lets tests hold a write for a while (`transcript-write=sleep(2000)`) or fail it.
        fail::fail_point!("transcript-write", |_| Err(io::Error::other(
            "injected failure at failpoint transcript-write"
        )));
        (&*file).write_all(bytes)
    }
}

/// The transcript thread, started on first use and kept for the life of the process (an
/// attempt that cannot start it fails its setup; the next one tries again).
fn transcript_thread() -> io::Result<&'static WriteThread<Arc<File>>> {
    static THREAD: StartedOnce<WriteThread<Arc<File>>> = StartedOnce::new();
    THREAD.get_or_start(|| WriteThread::start("ash-transcript", Appender))
}

/// A transcript open for appending; the file is closed once this is dropped and its queued
/// chunks are written.
pub(crate) struct TranscriptFile {
    file: Arc<File>,
    thread: &'static WriteThread<Arc<File>>,
}

impl TranscriptFile {
    /// Takes over `file` (already holding the header).
    pub(crate) fn start(file: File) -> io::Result<Self> {
        Ok(Self {
            file: Arc::new(file),
            thread: transcript_thread()?,
        })
    }

    /// Appends `bytes`; the receiver yields the result once they are written.
    pub(crate) fn append(&self, bytes: Arc<Vec<u8>>) -> oneshot::Receiver<io::Result<()>> {
        self.thread.submit(self.file.clone(), bytes)
    }
}
