//! The handler's live console: a dedicated thread that writes live agent output to the
//! handler's own stdout and stderr.
//!
//! Writing to a terminal or pipe can block for as long as the reader pleases (a paused
//! terminal, a parent that stopped reading). Doing that on a runtime worker thread could stall
//! tasks parked behind it — a timeout among them — so the blocking writes happen here instead.
//! The caller submits one buffer at a time and gets it back with the result, which keeps
//! backpressure (the child still waits for a slow console) and lets the buffer be reused.

use std::io::{self, Write};
use std::sync::mpsc::{self, SyncSender};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::domain::marker::OutputStream;

/// A buffer handed back with the outcome of writing it.
pub type Written = (Vec<u8>, io::Result<()>);

struct Job {
    stream: OutputStream,
    bytes: Vec<u8>,
    done: oneshot::Sender<Written>,
}

/// The console thread; dropping this closes the queue and joins the thread.
pub struct Console {
    jobs: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Console {
    pub fn start() -> io::Result<Self> {
        // One queued job at most: the caller waits for each before submitting the next.
        let (jobs, queue) = mpsc::sync_channel::<Job>(1);
        let thread = std::thread::Builder::new()
            .name("ash-console".into())
            .spawn(move || {
                for job in queue {
                    let result = match job.stream {
                        OutputStream::Stdout => write_flush(&mut io::stdout().lock(), &job.bytes),
                        OutputStream::Stderr => write_flush(&mut io::stderr().lock(), &job.bytes),
                    };
                    let _ = job.done.send((job.bytes, result));
                }
            })?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Queues `bytes` for `stream`; the receiver yields the buffer back once written.
    pub fn submit(&self, stream: OutputStream, bytes: Vec<u8>) -> oneshot::Receiver<Written> {
        let (done, written) = oneshot::channel();
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
                .send((job.bytes, Err(io::Error::other("console thread stopped"))));
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

fn write_flush(sink: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    sink.write_all(bytes)?;
    sink.flush()
}
