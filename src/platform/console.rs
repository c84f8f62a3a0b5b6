//! The handler's live console: agent output echoed to the handler's own stdout and stderr.
//!
//! Writing to a terminal, pipe or file can block for as long as the reader or the disk
//! pleases, so the writes happen on a [`WriteThread`] of their own, never on a runtime worker.
//! The null device cannot block (nothing is written anywhere), so a stream going there is
//! written inline without the thread hop.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::Arc;

use nix::sys::stat::{SFlag, fstat, makedev};
use tokio::sync::oneshot;

use super::write_thread::{Sink, WriteThread};
use crate::domain::output_stream::OutputStream;

/// The handler's stdout and stderr, each written and flushed as a whole buffer.
struct HandlerStreams;

impl Sink<OutputStream> for HandlerStreams {
    fn write(&mut self, stream: OutputStream, bytes: &[u8]) -> io::Result<()> {
        write_to(stream, bytes)
    }
}

/// The console thread; dropping this lets the thread end.
pub struct Console {
    thread: WriteThread<OutputStream>,
    stdout_inline: bool,
    stderr_inline: bool,
    /// The agent's stdout goes to the handler's stderr (`run --json` keeps stdout for its
    /// result object).
    stdout_to_stderr: bool,
}

impl Console {
    pub fn start(stdout_to_stderr: bool) -> io::Result<Self> {
        Ok(Self {
            thread: WriteThread::start("ash-console", HandlerStreams)?,
            stdout_inline: is_null_device(&io::stdout()),
            stderr_inline: is_null_device(&io::stderr()),
            stdout_to_stderr,
        })
    }

    /// Queues `bytes` for `stream`; the receiver yields the result once they are written.
    pub fn submit(
        &self,
        stream: OutputStream,
        bytes: Arc<Vec<u8>>,
    ) -> oneshot::Receiver<io::Result<()>> {
        let stream = match stream {
            OutputStream::Stdout if self.stdout_to_stderr => OutputStream::Stderr,
            other => other,
        };
        let inline = match stream {
            OutputStream::Stdout => self.stdout_inline,
            OutputStream::Stderr => self.stderr_inline,
        };
        if inline {
            let (done, written) = oneshot::channel();
            let _ = done.send(write_to(stream, &bytes));
            return written;
        }
        self.thread.submit(stream, bytes)
    }
}

fn write_to(stream: OutputStream, bytes: &[u8]) -> io::Result<()> {
    match stream {
        OutputStream::Stdout => write_flush(&mut io::stdout().lock(), bytes),
        OutputStream::Stderr => write_flush(&mut io::stderr().lock(), bytes),
    }
}

fn write_flush(sink: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    sink.write_all(bytes)?;
    sink.flush()
}

/// True for the null device (character device 1:3), whose writes go nowhere and never wait.
fn is_null_device(stream: &impl AsFd) -> bool {
    match fstat(stream.as_fd()) {
        Ok(stat) => {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFCHR && stat.st_rdev == makedev(1, 3)
        }
        Err(_) => false,
    }
}
