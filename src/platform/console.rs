//! The handler's live console: a dedicated thread that writes live agent output to the
//! handler's own stdout and stderr.
//!
//! Writing to a terminal or pipe can block for as long as the reader pleases (a paused
//! terminal, a parent that stopped reading). Doing that on a runtime worker thread could stall
//! tasks parked behind it — a timeout among them — so the blocking writes happen here instead.
//! Output going to a regular file or the null device cannot block that way, so it is written
//! inline, like the transcript, without the thread hop.
//!
//! The caller submits one buffer at a time and awaits the result, which keeps backpressure (the
//! child still waits for a slow console). Buffers are shared (`Arc`), so a chunk that is
//! visible as a whole is written without a copy; the thread drops its reference before
//! reporting, so the caller gets sole ownership back for reuse.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::mpsc::{self, SyncSender};
use std::thread::JoinHandle;

use nix::sys::stat::{SFlag, fstat, makedev};
use std::os::fd::AsFd;
use tokio::sync::oneshot;

use crate::domain::output_stream::OutputStream;

struct Job {
    stream: OutputStream,
    bytes: Arc<Vec<u8>>,
    done: oneshot::Sender<io::Result<()>>,
}

/// The console thread; dropping this closes the queue and joins the thread.
pub struct Console {
    jobs: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
    stdout_inline: bool,
    stderr_inline: bool,
}

impl Console {
    pub fn start() -> io::Result<Self> {
        // One queued job at most: the caller waits for each before submitting the next.
        let (jobs, queue) = mpsc::sync_channel::<Job>(1);
        let thread = std::thread::Builder::new()
            .name("ash-console".into())
            .spawn(move || {
                for job in queue {
                    let result = write_to(job.stream, &job.bytes);
                    drop(job.bytes);
                    let _ = job.done.send(result);
                }
            })?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
            stdout_inline: never_blocks(&io::stdout()),
            stderr_inline: never_blocks(&io::stderr()),
        })
    }

    /// Queues `bytes` for `stream`; the receiver yields the result once they are written.
    pub fn submit(
        &self,
        stream: OutputStream,
        bytes: Arc<Vec<u8>>,
    ) -> oneshot::Receiver<io::Result<()>> {
        let (done, written) = oneshot::channel();
        let inline = match stream {
            OutputStream::Stdout => self.stdout_inline,
            OutputStream::Stderr => self.stderr_inline,
        };
        if inline {
            let _ = done.send(write_to(stream, &bytes));
            return written;
        }
        let job = Job {
            stream,
            bytes,
            done,
        };
        let sent = match &self.jobs {
            Some(jobs) => jobs.send(job),
            None => Err(mpsc::SendError(job)),
        };
        if let Err(mpsc::SendError(job)) = sent {
            let _ = job
                .done
                .send(Err(io::Error::other("console thread stopped")));
        }
        written
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
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

/// True for a regular file or the null device (character device 1:3), whose writes cannot wait
/// on a reader.
fn never_blocks(stream: &impl AsFd) -> bool {
    match fstat(stream.as_fd()) {
        Ok(stat) => {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFREG || (kind == SFlag::S_IFCHR && stat.st_rdev == makedev(1, 3))
        }
        Err(_) => false,
    }
}
