//! A dedicated thread that performs one kind of blocking write on behalf of async code.
//!
//! A write can block for as long as its target pleases: a paused terminal, a pipe nobody
//! reads, a slow or failing disk. Done on a runtime worker thread it would stall the tasks
//! parked behind it — a timeout among them — so the transcript file and the live console each
//! get a thread of their own. Submitting never blocks: the queue is unbounded, and what bounds
//! it is the callers — an attempt's output waits for each chunk's result before reading more
//! (backpressure: the child still waits for a slow sink), and the other writers (progress
//! lines) are small and few. Writes happen in submission order; the thread drops its
//! reference to a buffer before reporting, so the caller gets sole ownership back for reuse.

use std::io;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// Where a job's bytes go; `T` tells the sink which of its targets (e.g. stdout or stderr).
pub(crate) trait Sink<T>: Send + 'static {
    fn write(&mut self, target: T, bytes: &[u8]) -> io::Result<()>;
}

struct Job<T> {
    target: T,
    bytes: Arc<Vec<u8>>,
    done: oneshot::Sender<io::Result<()>>,
}

/// The thread and its queue; dropping this closes the queue and lets the thread end. It is
/// not joined: a thread blocked on a sink that never drains must not hold up the handler.
pub(crate) struct WriteThread<T> {
    jobs: Sender<Job<T>>,
    _thread: JoinHandle<()>,
}

impl<T: Send + 'static> WriteThread<T> {
    /// Starts a thread named `name` that owns `sink`.
    pub(crate) fn start(name: &str, mut sink: impl Sink<T>) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job<T>>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for job in queue {
                    let result = sink.write(job.target, &job.bytes);
                    drop(job.bytes);
                    let _ = job.done.send(result);
                }
            })?;
        Ok(Self {
            jobs,
            _thread: thread,
        })
    }

    /// Queues `bytes` for `target`; the receiver yields the result once they are written.
    pub(crate) fn submit(
        &self,
        target: T,
        bytes: Arc<Vec<u8>>,
    ) -> oneshot::Receiver<io::Result<()>> {
        let (done, written) = oneshot::channel();
        if let Err(mpsc::SendError(job)) = self.jobs.send(Job {
            target,
            bytes,
            done,
        }) {
            let _ = job.done.send(Err(io::Error::other("write thread stopped")));
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    type Writes = Arc<Mutex<Vec<(u8, Vec<u8>)>>>;

    struct Recorder(Writes);

    impl Sink<u8> for Recorder {
        fn write(&mut self, target: u8, bytes: &[u8]) -> io::Result<()> {
            if target == 0 {
                return Err(io::Error::other("refused"));
            }
            self.0.lock().unwrap().push((target, bytes.to_vec()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn writes_in_order_and_hands_the_buffer_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let thread = WriteThread::start("test-writer", Recorder(seen.clone())).unwrap();
        let bytes = Arc::new(b"first".to_vec());
        thread.submit(1, bytes.clone()).await.unwrap().unwrap();
        assert_eq!(
            Arc::strong_count(&bytes),
            1,
            "the thread let go of the buffer"
        );
        thread
            .submit(2, Arc::new(b"second".to_vec()))
            .await
            .unwrap()
            .unwrap();
        let error = thread.submit(0, Arc::new(Vec::new())).await.unwrap();
        assert_eq!(error.unwrap_err().to_string(), "refused");
        assert_eq!(
            *seen.lock().unwrap(),
            [(1, b"first".to_vec()), (2, b"second".to_vec())]
        );
    }
}
